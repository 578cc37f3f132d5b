"""Load time and peak memory of the offline SmolLM2-135M, against transformers' own GGUF load.

Each measurement runs in a fresh subprocess so that peak RSS (ru_maxrss) belongs to it alone.
Prints: seconds and peak GiB for (a) transformers' AutoModelForCausalLM(gguf_file=) alone, the
floor, and (b) tg.models.load (which includes (a) plus TL's conversion), and their ratio.
"""

import json
import os
import subprocess
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")

CHILD = r"""
import json, os, resource, sys, time, warnings
warnings.filterwarnings("ignore")
import torch
torch.set_num_threads(2)
import tl_geometry as tg
t0 = time.perf_counter()
if sys.argv[1] == "hf":
    tg.models.load_hf_gguf(tg.models.zoo_file())
else:
    m = tg.models.load("smollm2-135m")
    toks = tg.corpus.tokens(m, "pydoc", n_seqs=8, seq_len=128)
    t1 = time.perf_counter()
    with torch.inference_mode():
        m(toks)
    fwd = time.perf_counter() - t1
seconds = time.perf_counter() - t0
out = {"seconds": seconds, "peak_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20}
if sys.argv[1] != "hf":
    out["forward_8x128_s"] = fwd
    out["seconds"] -= fwd
print(json.dumps(out))
"""


def measure(kind: str) -> dict:
    proc = subprocess.run([sys.executable, "-c", CHILD, kind], capture_output=True, text=True, check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    hf = measure("hf")
    tl = measure("tl")
    print(f"transformers GGUF load (floor): {hf['seconds']:.1f} s, peak {hf['peak_gib']:.2f} GiB")
    print(f"tg.models.load('smollm2-135m'):  {tl['seconds']:.1f} s, peak {tl['peak_gib']:.2f} GiB")
    print(f"forward 8 x 128 tokens:          {tl['forward_8x128_s']:.2f} s")
    print(
        f"ratio load time tl/hf: {tl['seconds'] / hf['seconds']:.2f}x; peak memory ratio: {tl['peak_gib'] / hf['peak_gib']:.2f}x"
    )
