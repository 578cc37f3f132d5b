"""Benchmark: peak memory and time of loading a model, against TransformerLens's own loader.

    python -m benchmarks.bench_memory [--models smollm2 gemma smollm2-0.5b ...] [--loaders ours tl]
                                      [--repeats 3] [--small]

* ours: ``tg.models.load(name)`` (the one-copy loader: the transformers model handed over and freed,
  TL's processing without its copies, the processed tensors made the parameters), or for a scaled
  model ``tg.models.scaled(family, n)`` (TransformerLens initialises its own parameters);
* reference (``tl``): TransformerLens's own loader on the same transformers model — the converted
  state dict into ``HookedTransformer(cfg).load_and_process_state_dict``, the transformers model
  kept until the end — what ``tg.models.load`` did before; for a scaled model, a random
  transformers model built from the same config and converted that way;
* floor: the float32 weights beside the bare process (memory), one read of the file (time, GGUF
  models).

Models: ``smollm2`` (SmolLM2-135M GGUF), ``gemma`` (Gemma-3-270M GGUF, needs its packages),
``smollm2-0.5b``, ``smollm2-1b``, ``gemma-3-0.5b``, ``gemma-3-1b`` (``tg.models.scaled``). Each load
runs in a fresh process (its peak RSS, ``ru_maxrss``, is its own; torch, transformers and
TransformerLens are imported before the clock starts); the warm-up is one read of the GGUF file
(the page cache: a fresh process warms nothing else); then ``--repeats`` (≥ 3) rounds alternating
which loader goes first, best and median. A run whose estimated peak
(``tg.models.peek(...).memory_bytes()``, or 5 copies of the weights for the reference) exceeds the
available memory is skipped and said so. ``--small``: a tiny random Llama saved with
``save_pretrained`` and a tiny scaled model instead (seconds).

Prints one row per model and loader (best and median seconds, peak and held GiB) and the ratios
ours / reference and ours / floor.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks import _util
from benchmarks.bench_load import tiny_llama  # the same random 2-layer Llama --small loads

SCALED = {
    "smollm2-0.5b": ("smollm2", 5e8, {}),
    "smollm2-1b": ("smollm2", 1e9, {}),
    "gemma-3-0.5b": ("gemma-3", 5e8, {}),
    "gemma-3-1b": ("gemma-3", 1e9, {}),
    "tiny-scaled": ("smollm2", 2e6, {"vocab_size": 300, "n_layers": 2}),
}

CHILD = r"""
import gc, json, resource, sys, time, warnings
warnings.filterwarnings("ignore")
import torch
import tl_geometry as tg
import transformers, transformer_lens
from transformer_lens import HookedTransformer
spec, loader, scaled = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])

def rss():
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS"):
                return int(line.split()[1]) * 1024
    return 0

def tl_own(hf):
    import tempfile
    from transformer_lens.loading_from_pretrained import get_pretrained_state_dict
    from tl_geometry.models import hf_loading
    flags = tg.models.processing_flags("tl")[1]
    with tempfile.TemporaryDirectory() as tmp:
        cfg = hf_loading._tl_config(hf, hf.config, tmp, name=None, device=torch.device("cpu"), dtype=torch.float32, n_ctx=2048, fold_ln=True)
        sd = get_pretrained_state_dict(tmp, cfg, hf_model=hf, dtype=torch.float32)
        model = HookedTransformer(cfg, move_to_device=False)
        model.load_and_process_state_dict(sd, **flags)
    return model

base = rss()
t0 = time.perf_counter()
if scaled:
    family, n, kw = scaled
    if loader == "ours":
        model = tg.models.scaled(family, n, **kw)
    else:
        sc = tg.models.scaled_config(family, n, **kw)
        cls = transformers.LlamaForCausalLM if family == "smollm2" else transformers.Gemma3ForCausalLM
        hf = cls(sc.hf_config).eval()
        model = tl_own(hf)
elif loader == "ours":
    model = tg.models.load(spec)
else:
    path = tg.models.zoo_file(spec) if tg.models.canonical_name(spec) in tg.models.ZOO else spec
    hf, tok = tg.models.load_hf_path(path)
    model = tl_own(hf)
seconds = time.perf_counter() - t0
n_params = sum(p.numel() for p in model.parameters())
gc.collect()
print(json.dumps({"seconds": seconds, "peak": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                  "held": rss(), "base": base, "n_params": n_params}))
"""


def measure(spec: str, loader: str) -> dict:
    scaled = json.dumps(SCALED.get(spec))
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, spec, loader, scaled],
        env=_util.child_env(TOKENIZERS_PARALLELISM="false"),
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{loader} load of {spec} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _file(spec: str) -> Path | None:
    if spec == "smollm2":
        return _util.smollm2_gguf()
    if spec == "gemma":
        return _util.gemma_gguf()
    return Path(spec) if Path(spec).exists() else None


def _estimate(spec: str, loader: str) -> int | None:
    """Our estimate of the run's peak (bytes), to skip a run that would not fit."""
    import tl_geometry as tg

    if spec in SCALED:
        family, n, kw = SCALED[spec]
        weights = tg.models.scaled_config(family, n, **kw).weights_bytes
        return int((1.3 if loader == "ours" else 5) * weights) + 2**29
    shape = tg.models.peek(spec)
    if shape is None:
        return None
    return shape.memory_bytes() if loader == "ours" else int(5 * 4 * shape.tl_params) + 2**29


def main(argv=None) -> None:
    ap = _util.make_parser(__doc__)
    ap.add_argument("--models", nargs="+", default=["smollm2"], help="models to load (see the docstring)")
    ap.add_argument("--loaders", nargs="+", default=["ours", "tl"], choices=["ours", "tl"])
    args = _util.parse_args(ap, argv)
    _util.print_environment("model load: peak memory and time, ours against TransformerLens's own loader")
    import psutil

    with tempfile.TemporaryDirectory() as tmp:
        specs = [str(tiny_llama(Path(tmp))), "tiny-scaled"] if args.small else list(args.models)
        for spec in specs:
            path = _file(spec)
            if spec == "gemma":
                spec = "gemma-3-270m"
            if spec == "smollm2":
                spec = "smollm2-135m"
            runs: dict[str, list[dict]] = {k: [] for k in args.loaders}
            for loader in args.loaders:
                need, avail = _estimate(spec, loader), psutil.virtual_memory().available
                if need is not None and need > avail:
                    print(
                        f"{spec} / {loader}: skipped, estimated {need / 2**30:.1f} GiB > {avail / 2**30:.1f} GiB available"
                    )
                    runs.pop(loader)
            if not runs:
                continue
            floor = None
            if path is not None and path.is_file():
                floor = _util.read_floor(path, repeats=args.repeats)  # its warm-up call is the load's warm-up too
            names = list(runs)
            for r in range(args.repeats):
                for loader in names[r % len(names) :] + names[: r % len(names)]:
                    runs[loader].append(measure(spec, loader))
            t = {k: _util.Timing(k, [x["seconds"] for x in v], [x["seconds"] for x in v]) for k, v in runs.items()}
            first = next(iter(runs.values()))[0]
            weights = 4 * first["n_params"] / 2**30
            base = min(x["base"] for v in runs.values() for x in v) / 2**30
            print(
                f"\n### {spec}: {first['n_params']:,} TransformerLens parameters, {weights:.2f} GiB of float32 weights"
            )
            print(
                "(best CPU s column: wall seconds again; each load is a fresh process; the process alone holds "
                f"{base:.2f} GiB)"
            )
            rows = []
            for k, v in runs.items():
                peak = min(x["peak"] for x in v) / 2**30
                held = min(x["held"] for x in v) / 2**30
                copies = (peak - base) / weights
                label = "ours" if k == "ours" else "reference: TransformerLens's own loader"
                rows.append(
                    (label, t[k], f"peak {peak:.2f} GiB ({copies:.2f} copies of the weights), held {held:.2f} GiB")
                )
            if floor is not None:
                rows.append(("floor: one read of the file", floor))
            _util.print_table(rows)
            print(f"memory floor: the weights beside the process, {base + weights:.2f} GiB")
            if "ours" in t:
                _util.print_ratios(
                    t["ours"], t.get("tl"), floor, reference_name="TransformerLens's loader", floor_name="file read"
                )
                if "tl" in runs:
                    po = min(x["peak"] for x in runs["ours"])
                    pr = min(x["peak"] for x in runs["tl"])
                    print(f"peak memory ours / reference: {po / pr:.2f}x")
            sys.stdout.flush()
    print(f"\nload average: {os.getloadavg()}")
    _util.print_footer()


if __name__ == "__main__":
    main()
