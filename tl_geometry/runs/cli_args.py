"""Arguments shared by the sub-commands, and checks of them that run before any model is loaded.

Argument groups (one definition each, each command passing its own defaults and help specifics):
[`add_model_text`][tl_geometry.runs.cli_args.add_model_text] and [`add_device_threads`][tl_geometry.runs.cli_args.add_device_threads]
(``report``, ``pga``, ``agop``, ``id``), [`add_layers_hooks`][tl_geometry.runs.cli_args.add_layers_hooks],
[`add_batch_seed`][tl_geometry.runs.cli_args.add_batch_seed] and [`add_outputs`][tl_geometry.runs.cli_args.add_outputs]
(``pga``, ``agop``, ``id``).

Their checks: [`model_flag_checks`][tl_geometry.runs.cli_args.model_flag_checks] (what each size flag accepts, plus a
command's own) and [`check_model_args`][tl_geometry.runs.cli_args.check_model_args] (every check that needs no model),
then [`check_outputs`][tl_geometry.runs.cli_args.check_outputs]; after the load [`corpus_tokens`][tl_geometry.runs.cli_args.corpus_tokens]
and [`chosen_hooks`][tl_geometry.runs.cli_args.chosen_hooks] read what the flags ask for, and [`write_report`][tl_geometry.runs.cli_args.write_report] and
[`write_figures`][tl_geometry.runs.cli_args.write_figures] write the results. ``report``, ``pga``, ``agop``, ``id`` and
``sweep`` call the checks first, so a bad ``--k 0``, ``--batch-size 0``, ``--n-seqs 0``, ``--layers 99``, a
missing corpus file or an existing ``--out`` is refused in a fraction of a second instead of after a 12–60 s model
load. Each check goes through `tl_geometry.base._checks` (the one validation layer) and names the flag.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tl_geometry.base import _checks
from tl_geometry.errors import InputError


def check_flags(
    args: Any, table: Mapping[str, _checks.Check], *, lists: Sequence[str] = (), optional: Sequence[str] = ()
) -> None:
    """Check ``args.<dest>`` for each ``dest`` in ``table``; the error names the flag (``--dest``).

    ``lists``: flags taking several values (``nargs``), each value checked; absent (None) is fine.
    ``optional``: flags whose absence (None, the flag not given) is fine.
    """
    for dest, check in table.items():
        value = getattr(args, dest, None)
        if (dest in lists or dest in optional) and value is None:
            continue
        if isinstance(value, list):
            for v in value:
                check(v, "--" + dest.replace("_", "-") + " (each value)")
        else:
            check(value, "--" + dest.replace("_", "-"))


def check_corpus(corpus: Any, encoding: str = "utf-8") -> None:
    """A corpus source name, or a readable text file that decodes with ``encoding``."""
    from tl_geometry.io import corpus as corpus_mod

    # unknown source, missing file, decode errors; a large file read only as far as a batch reads it
    docs = corpus_mod.texts(corpus, encoding=encoding, max_chars=corpus_mod.chars_for(0))
    if not any(t.strip() for t in docs):
        raise InputError(f"--corpus {str(corpus)!r} holds no text")


def check_device(device: Any) -> None:
    """A device torch knows and this machine has."""
    from tl_geometry.models import check_device as _check

    _check(device)


def model_shape(model: str) -> tuple[int | None, int | None, int | None]:
    """(n_layers, d_model, n_ctx) of a model name or path, read without loading weights (None where
    not readable cheaply, e.g. a hub name offline; the load then checks)."""
    from tl_geometry.models import peek

    shape = peek(model)
    if shape is not None:
        return shape.n_layers, shape.d_model, shape.n_ctx
    if isinstance(model, str) and not os.path.exists(model):
        from tl_geometry.runs.pipeline import config_for

        cfg = config_for(model)
        if cfg is not None:
            return getattr(cfg, "n_layers", None), getattr(cfg, "d_model", None), getattr(cfg, "n_ctx", None)
    return None, None, None


def check_model_fit(
    model: str, *, layers: Sequence[int] | None = None, k: int | None = None, seq_len: int | None = None
) -> None:
    """``--layers`` within the model's n_layers, ``--k`` below its d_model and ``--seq-len`` within
    its context, read from its files (or hub config) before any load."""
    n_layers, d_model, n_ctx = model_shape(model)
    if layers and n_layers is not None:
        bad = [layer for layer in layers if not 0 <= layer < n_layers]
        if bad:
            raise InputError(
                f"--layers {' '.join(map(str, bad))} out of range: model {model} has n_layers={n_layers} "
                f"(layers 0 … {n_layers - 1})"
            )
    if k is not None and d_model is not None and not 1 <= k < d_model:
        raise InputError(f"--k must satisfy 1 <= k < d_model={d_model} (model {model}), got {k}")
    if seq_len is not None and n_ctx is not None and seq_len > n_ctx:
        raise InputError(f"--seq-len {seq_len} exceeds the context of model {model} (n_ctx={n_ctx})")


def add_device_threads(p: Any) -> None:
    """``--device`` and ``--threads``, the same words in every command that runs a model."""
    p.add_argument("--device", default="cpu")
    p.add_argument(
        "--threads",
        type=int,
        default=None,
        help="CPU threads torch may use (default: OMP_NUM_THREADS, else one per core); the "
        "library runs its sort-bound kernels on one of them",
    )


def add_model_text(p: Any, *, n_seqs: int, seq_len: int) -> None:
    """``--model``, ``--corpus``, ``--corpus-encoding``, ``--n-seqs`` and ``--seq-len``: the model and
    the text every command that runs a model reads (the defaults of the sizes are the command's)."""
    p.add_argument(
        "--model",
        default="smollm2-135m",
        help="offline 'smollm2-135m' (default), a local .gguf file or Hugging Face model directory, "
        "or any TransformerLens model name (needs the hub)",
    )
    p.add_argument("--corpus", default="pydoc", help="'pydoc' (default), 'shakespeare' or a text file")
    p.add_argument(
        "--corpus-encoding",
        default="utf-8",
        help="encoding of a --corpus text file (default utf-8, strict; e.g. latin-1, cp1252)",
    )
    p.add_argument("--n-seqs", type=int, default=n_seqs, help=f"sequences of text (default {n_seqs})")
    p.add_argument("--seq-len", type=int, default=seq_len, help=f"tokens per sequence (default {seq_len})")


def add_layers_hooks(p: Any, *, site: str, default: str) -> None:
    """``--layers`` (read as ``blocks.{l}.hook_resid_<site>``) and ``--hooks`` (explicit names); the two
    exclude each other (refused by [`check_model_args`][tl_geometry.runs.cli_args.check_model_args]).

    Args:
        p: the sub-command's parser.
        site: ``"pre"`` or ``"post"``, the residual stream the command reads at a layer.
        default: what the command reads without either flag, in words.
    """
    p.add_argument(
        "--layers",
        type=int,
        nargs="+",
        default=None,
        help=f"layers for blocks.{{l}}.hook_resid_{site} (default: {default})",
    )
    p.add_argument("--hooks", nargs="+", default=None, help="explicit hook names (instead of --layers)")


def add_batch_seed(p: Any, *, batch_size: int = 8) -> None:
    """``--batch-size`` and ``--seed`` of a command that runs a model over a corpus sample."""
    p.add_argument(
        "--batch-size", type=int, default=batch_size, help=f"sequences per forward pass (default {batch_size})"
    )
    p.add_argument(
        "--seed", type=int, default=0, help="seed of the corpus sample and of the metric's random draws (default 0)"
    )


def add_outputs(p: Any, *, figures: str | None = None) -> None:
    """``--out`` (the GeometryReport JSON), ``--figures`` when the command draws, and ``--force``.

    Args:
        p: the sub-command's parser.
        figures: the figures ``--figures`` writes, in words (e.g. ``"the ID figure"``); None: no ``--figures``.
    """
    p.add_argument("--out", default=None, help="write the GeometryReport JSON here")
    if figures is not None:
        p.add_argument("--figures", default=None, help=f"write {figures} (PNG) into this directory")
    p.add_argument(
        "--force", action="store_true", help="replace existing output files (otherwise an existing one is refused)"
    )


TEXT_SIZES: dict[str, _checks.Check] = {"n_seqs": _checks.int_at_least(1), "seq_len": _checks.int_at_least(2)}
"""What the sizes of [`add_model_text`][tl_geometry.runs.cli_args.add_model_text] accept."""


def model_flag_checks(**own: _checks.Check) -> dict[str, _checks.Check]:
    """What each numeric flag of a command built from these groups accepts: the sizes of the text,
    ``--layers`` (each >= 0), the command's ``own`` flags, ``--batch-size``, ``--seed`` and ``--threads``."""
    return {
        **TEXT_SIZES,
        "layers": _checks.int_at_least(0),
        **own,
        "batch_size": _checks.int_at_least(1),
        "seed": _checks.SEED,
        "threads": _checks.int_at_least(1, none_ok=True),
    }


def check_model_args(
    args: Any, table: Mapping[str, _checks.Check], *, lists: Sequence[str] = ("layers",), k: int | None = None
) -> None:
    """Every check that needs no model, before the load: ``--hooks`` and ``--layers`` not both, each
    flag of ``table`` (see [`check_flags`][tl_geometry.runs.cli_args.check_flags]), the device, the corpus, and
    ``--layers`` / ``--k`` / ``--seq-len`` against the model's files
    ([`check_model_fit`][tl_geometry.runs.cli_args.check_model_fit])."""
    if args.hooks and args.layers is not None:
        raise InputError("pass either --hooks or --layers, not both")
    check_flags(args, table, lists=lists)
    check_device(args.device)
    check_corpus(args.corpus, args.corpus_encoding)
    check_model_fit(args.model, layers=args.layers, k=k, seq_len=args.seq_len)


def check_outputs(args: Any) -> None:
    """``--out`` and ``--figures`` (where the command has it) checked before the model is loaded: an
    existing file is refused without ``--force``, and the folder must be writable."""
    from tl_geometry.io import outdir

    if args.out:
        outdir.check_out_file(args.out, force=args.force, what="report file")
    if getattr(args, "figures", None):
        from tl_geometry.render.html import figure_files

        outdir.check_figure_dir(args.figures, figure_files(), force=args.force)


def corpus_tokens(model: Any, args: Any) -> Any:
    """The token sample [`add_model_text`][tl_geometry.runs.cli_args.add_model_text]'s flags and ``--seed`` ask for,
    tokenized by ``model`` ([`tl_geometry.io.corpus.tokens`][tl_geometry.io.corpus.tokens])."""
    from tl_geometry.io import corpus

    return corpus.tokens(
        model, args.corpus, n_seqs=args.n_seqs, seq_len=args.seq_len, seed=args.seed, encoding=args.corpus_encoding
    )


def chosen_hooks(model: Any, args: Any, *, site: str, default: Callable[[], Any] | None = None) -> Any:
    """The hooks [`add_layers_hooks`][tl_geometry.runs.cli_args.add_layers_hooks]'s flags ask for: ``--hooks``, else
    ``blocks.{l}.hook_resid_<site>`` at each of ``--layers``, else ``default()`` (None without ``default``:
    the metric's own default)."""
    if args.hooks:
        return args.hooks
    if args.layers is not None:
        from tl_geometry import capture

        return capture.resid_hooks(model, site, args.layers)
    return default() if default is not None else None


def write_report(args: Any, report: Any) -> None:
    """Write ``report`` (a GeometryReport) to ``--out`` atomically, when given, and say so."""
    if args.out:
        from tl_geometry.io import outdir

        outdir.write_file(args.out, report.to_json(), force=args.force, what="report file")
        print(f"wrote {args.out}")


def write_figures(args: Any, draw: Any) -> None:
    """Draw the figures into ``--figures`` atomically, when given, and name them. ``draw(folder)``
    saves them into a temporary folder and returns ``{name: path}``
    (see [`tl_geometry.io.outdir.write_files`][tl_geometry.io.outdir.write_files])."""
    if args.figures:
        from tl_geometry.io import outdir

        paths = outdir.write_files(args.figures, draw, force=args.force)
        print(f"wrote {', '.join(str(p) for p in paths.values())}")
