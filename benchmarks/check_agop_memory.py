"""AGOP's step time and peak memory on SmolLM2-135M at report settings, this tree against another
checkout (e.g. main before issue 34's bound), and the working-set formula against the model.

    python -m benchmarks.check_agop_memory [--other /path/to/checkout] [--rounds 1] [--state-mb 1024 256]
                                           [--weights by-reference kept] [--small]

Each variant runs in a fresh process (``--rounds`` rounds, alternating the order): load SmolLM2-135M,
take the report's tokens (8 × 128 pydoc), then time ``tg.agop(model, tokens, n_probes=16)`` (the
report's options: every resid_pre hook) while a thread samples the resident set every 0.1 s; it
prints the AGOP wall time, the RSS before it, the peak during it (its own process) and the
provenance (batch, hook chunks). ``--weights``: this tree with TransformerLens's per-forward weight
copies saved by reference (`tl_geometry.capture.saved_weights`, agop's default) and/or kept by
autograd (both by default, alternated). ``--state-mb`` runs this tree once per value (a smaller one forces
hook chunks: what a model too wide for the budget pays in time). Then, in this tree: the graph
bound of one 128-token sequence against the bytes autograd holds for backward after one forward
(``torch.autograd.graph.saved_tensors_hooks``, parameters excluded), and the accumulator memory of
the unbounded design against the bounded one at d_model = 576 and 1,536. ``--small``: 2 × 32 tokens
and 4 probes. Timings on a loaded machine are labelled with its load average.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys

from benchmarks import _util

CHILD = r"""
import json, sys, threading, time, warnings
warnings.simplefilter("ignore")
import torch
n_seqs, seq_len, n_probes, state_mb = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
import tl_geometry as tg
from benchmarks import _util
if len(sys.argv) > 5:  # this tree only: the weight copies kept by autograd or saved by reference
    from tl_geometry.capture import backward
    backward.SAVE_WEIGHTS_BY_REFERENCE = sys.argv[5] == "by-reference"

def rss():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
t0 = time.perf_counter()
model = _util.load_smollm2(quiet=True)
load_s = time.perf_counter() - t0
tokens = _util.pydoc_tokens(model, n_seqs, seq_len)
before = rss()
peak = [before]
stop = threading.Event()
def sample():
    while not stop.is_set():
        peak[0] = max(peak[0], rss())
        time.sleep(0.1)
th = threading.Thread(target=sample, daemon=True)
kw = {} if state_mb == "default" else {"state_mb": float(state_mb)}
th.start()
t0 = time.perf_counter()
res = tg.agop(model, tokens, n_probes=n_probes, progress=False, **kw)
s = time.perf_counter() - t0
stop.set(); th.join()
prov = {k: v for k, v in res.provenance.items() if k.startswith("agop_") and k != "agop_projection"}
h = res.hooks[len(res.hooks) // 2]
print(json.dumps({"load_s": load_s, "agop_s": s, "rss_before_gib": before / 2**30, "peak_gib": peak[0] / 2**30,
                  "n_hooks": len(res.hooks), "prov": prov, "mid_hook": h, "ratio_stderr": res[h].ratio_stderr}))
"""

GRAPH = r"""
import gc, json, sys, warnings, weakref
warnings.simplefilter("ignore")
import torch
import tl_geometry as tg
from benchmarks import _util
seq_len, by_ref = int(sys.argv[1]), sys.argv[2] == "by-reference"
from tl_geometry.capture import saved_weights
model = _util.load_smollm2(quiet=True)
tokens = _util.pydoc_tokens(model, 1, seq_len)
own = {t.untyped_storage().data_ptr() for t in [*model.parameters(), *model.buffers()]}
refs = []
matcher = saved_weights._Matcher(model, saved_weights.MIN_NUMEL) if by_ref else None
def pack(t):
    r = matcher.pack(t) if matcher is not None else t
    if isinstance(r, torch.Tensor) and r.untyped_storage().data_ptr() not in own:
        refs.append(weakref.ref(r))
    return r
def unpack(r):
    return matcher.unpack(r) if matcher is not None else r
hooks = tg.capture.resid_hooks(model, "pre")
with torch.autograd.graph.saved_tensors_hooks(pack, unpack), tg.capture.frozen_parameters(model):
    with tg.capture.grad_capture(model, [*hooks, "unembed.hook_in"], cut=True, last="unembed.hook_in"), torch.enable_grad():
        logits = model(tokens)
gc.collect()
alive = {}
for r in refs:
    t = r()
    if t is not None:
        alive[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
c = model.cfg
from tl_geometry.capture import backward
from tl_geometry.families.interaction.memory import agop_plan_for
backward.SAVE_WEIGHTS_BY_REFERENCE = by_ref  # the plan's graph bound follows the probe passes' setting
bound = agop_plan_for(model, (1, seq_len), 1).graph_bytes
print(json.dumps({"held_mib": sum(alive.values()) / 2**20, "bound_mib": bound / 2**20}))
"""


def _run(code: str, argv: list[str], root: str | None) -> dict:
    if root is None:
        return _util.run_isolated_args(code, argv)
    env = _util.child_env()
    env["PYTHONPATH"] = os.pathsep.join([root, str(_util.ROOT)])  # the other tree's tl_geometry, our benchmarks
    out = subprocess.run(  # run from the other tree: ``python -c`` puts the working directory first
        [sys.executable, "-c", code, *argv], env=env, cwd=root, capture_output=True, text=True, timeout=3600
    )
    if out.returncode != 0:
        raise RuntimeError(f"isolated run failed ({out.returncode}):\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> None:
    ap = _util.make_parser(__doc__, repeats=False)
    ap.add_argument("--other", default=None, help="another checkout to compare (e.g. /work/main)")
    ap.add_argument("--rounds", type=int, default=1, help="fresh processes per variant, alternated")
    ap.add_argument("--state-mb", nargs="+", default=["default"], help="state_mb values for this tree")
    ap.add_argument(
        "--weights",
        nargs="+",
        choices=["by-reference", "kept"],
        default=["by-reference", "kept"],
        help="this tree's weight copies: saved by reference (the default of agop) and/or kept by autograd",
    )
    args = _util.parse_args(ap, argv)
    n_seqs, seq_len, n_probes = (2, 32, 4) if args.small else (8, 128, 16)
    _util.print_environment(f"AGOP on SmolLM2-135M, {n_seqs} x {seq_len} pydoc tokens, {n_probes} probes")
    variants = [(f"this tree, weights {w}", None, s, w) for s in args.state_mb for w in args.weights]
    if args.other:
        variants.insert(0, (f"other ({args.other})", args.other, "default", None))
    res: dict[str, list[dict]] = {}
    for i in range(args.rounds):
        for name, root, smb, w in variants if i % 2 == 0 else variants[::-1]:
            key = name if smb == "default" else f"{name}, state_mb={smb}"
            extra = [] if w is None else [w]
            res.setdefault(key, []).append(_run(CHILD, [str(n_seqs), str(seq_len), str(n_probes), smb, *extra], root))
    print()
    for key, runs in res.items():
        s = [r["agop_s"] for r in runs]
        r0 = runs[0]
        print(
            f"{key:<40} AGOP best {min(s):6.1f} s median {statistics.median(s):6.1f} s | RSS before "
            f"{r0['rss_before_gib']:.2f} GiB, peak {max(r['peak_gib'] for r in runs):.2f} GiB | load {r0['load_s']:.1f} s"
        )
        print(
            f"{'':<40} {r0['n_hooks']} hooks; {json.dumps(r0['prov'])}; ratio stderr at {r0['mid_hook']}: "
            f"{r0['ratio_stderr']:.4g}"
        )
    for w in args.weights:
        g = _util.run_isolated_args(GRAPH, [str(seq_len), w])
        print(
            f"\ngraph of one {seq_len}-token sequence, weights {w}: held {g['held_mib']:.0f} MiB, bound "
            f"{g['bound_mib']:.0f} MiB (held / bound {g['held_mib'] / g['bound_mib']:.2f})"
        )
    from tl_geometry.families.interaction.memory import agop_plan
    from tl_geometry.metrics.interaction import agop_state_bytes

    for d, n_hooks, layers, mlp, heads in ((576, 30, 30, 1536, 9), (1536, 60, 60, 4096, 16)):
        old = agop_state_bytes(d, n_hooks)
        plan = agop_plan(
            d_model=d, n_hooks=n_hooks, n_layers=layers, d_mlp=mlp, n_heads=heads, seq_len=128, d_vocab=49152, n_seqs=8
        )
        print(
            f"accumulators at d = {d}, {n_hooks} hooks: unbounded {old / 2**30:.2f} GiB; bounded (state_mb 1024) "
            f"{plan.state_bytes / 2**30:.2f} GiB in {plan.n_chunks} chunk(s) of {plan.hooks_per_chunk}; "
            f"working set {plan.working_set_bytes / 2**30:.2f} GiB"
        )
    _util.print_footer()


if __name__ == "__main__":
    main()
