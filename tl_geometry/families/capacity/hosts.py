"""Published hosts: the capacity paper's Table 1, one name resolver, and where a host's ε comes from.

The capacity paper (Guha, arXiv 2606.02765, Appendix D, Table 1) publishes d_model and
ε = μ + 2σ of the raw input embedding's pairwise cosines for 45 models, and their capacity (a
count for ε < 0.1, "indeterminate" otherwise). Everything in the package that needs those rows
reads them here, from one data file, ``tl_geometry/data/published_hosts.json`` (with its
attribution: paper CC BY 4.0, authors' code MIT, Copyright (c) 2026 Alexander Guha):

* [`published_hosts`][tl_geometry.families.capacity.hosts.published_hosts] — name → [`PublishedHost`][tl_geometry.families.capacity.hosts.PublishedHost] (name, aliases, d_model, d_vocab where
  we recorded it, ε, published capacity, tied, the analysed checkpoint);
* [`normalize_name`][tl_geometry.families.capacity.hosts.normalize_name] and [`find_host`][tl_geometry.families.capacity.hosts.find_host] — the one way a model name (``"gemma-2-2b"``,
  ``"meta-llama/Llama-2-7b-hf"``, ``"google/gemma-3-1b-pt"``, ``"Llama 2 7B"``) is matched to a row;
* [`published`][tl_geometry.families.capacity.hosts.published], [`published_rows`][tl_geometry.families.capacity.hosts.published_rows], [`published_epsilon`][tl_geometry.families.capacity.hosts.published_epsilon] — the views of the table
  the public API has always offered (``tg.published()`` etc.);
* [`host_epsilon`][tl_geometry.families.capacity.hosts.host_epsilon] — the one answer to "where does this host's ε come from": a number
  (``"given"``), a published name (``"published"``), or a model measured from its W_E/W_U
  (``"measured"``). Used by the SAE adapter and by ``tl-geometry capacity``.

Everything but [`host_epsilon`][tl_geometry.families.capacity.hosts.host_epsilon] is pure (standard library only); [`host_epsilon`][tl_geometry.families.capacity.hosts.host_epsilon]
imports the model-facing modules when it is called.

Our choices: the ``tied`` and ``d_vocab`` columns and the aliases are ours, not the paper's
(see the data file's ``fields``). A name is matched ignoring an organisation prefix, case,
``-``, ``_`` and spaces, first as given, then without one ``-hf``/``-base``/``-instruct``/``-it``/
``-pt`` suffix ([`HOST_SUFFIXES`][tl_geometry.families.capacity.hosts.HOST_SUFFIXES]); the paper's own spellings and the aliases are the keys.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import resources
from typing import Any, NamedTuple

from tl_geometry.base.tables import Tabular
from tl_geometry.errors import InputError, UnknownNameError

__all__ = [
    "PublishedHost",
    "PublishedRow",
    "PublishedEpsilon",
    "HOST_SUFFIXES",
    "published_hosts",
    "normalize_name",
    "find_host",
    "close_names",
    "published",
    "published_rows",
    "published_epsilon",
    "HostEpsilon",
    "host_epsilon",
]

DATA_FILE = "data/published_hosts.json"
"""The data file, relative to the package."""

HOST_SUFFIXES = ("-hf", "_hf", "-base", "-instruct", "-it", "-pt", "_pt")
"""Suffixes a checkpoint's name may carry beyond the table's name; one is dropped when the name as given does not match (``meta-llama/Llama-2-7b-hf`` → Llama-2-7B)."""


class PublishedHost(NamedTuple):
    """One row of the capacity paper's Table 1 (Appendix D), with our columns.

    Attributes:
        name: the model (our spelling, e.g. ``"Llama-2-70B"``).
        d_model: width.
        epsilon: published ε = μ + 2σ of the raw input embedding's pairwise cosines (5 decimals).
        capacity: the published "Rep. Capacity" (full form, 3 significant digits), or None
            where the paper prints "indeterminate" (ε ≥ 0.1 in the authors' code).
        tied: the model's input embedding and unembedding are one matrix (``tie_word_embeddings``
            of its Hugging Face config; our addition, not in the paper).
        hf_id: the checkpoint the authors analysed.
        aliases: other spellings that resolve to this row (ours).
        d_vocab: the tokenizer's vocabulary size where we recorded it (ours), else None.
    """

    name: str
    d_model: int
    epsilon: float
    capacity: float | None
    tied: bool
    hf_id: str
    aliases: tuple[str, ...] = ()
    d_vocab: int | None = None

    def to_pandas(self):
        """This row as a one-row ``pandas.DataFrame`` (see [`tl_geometry.base.tables`][tl_geometry.base.tables])."""
        from tl_geometry.base.tables import to_pandas

        return to_pandas(self)


PublishedRow = PublishedHost
"""The full row of Table 1, as [`published_rows`][tl_geometry.families.capacity.hosts.published_rows] returns it (the same record type)."""


class PublishedEpsilon(NamedTuple):
    """(d_model, ε) of one row of the capacity paper's Table 1 (published, not recomputed here)."""

    d_model: int
    epsilon: float

    def to_pandas(self):
        """This row as a one-row ``pandas.DataFrame`` (see [`tl_geometry.base.tables`][tl_geometry.base.tables])."""
        from tl_geometry.base.tables import to_pandas

        return to_pandas(self)


_HOSTS: dict[str, PublishedHost] | None = None
_INDEX: dict[str, str] | None = None


def _load() -> dict[str, PublishedHost]:
    global _HOSTS, _INDEX
    if _HOSTS is None:
        rows = json.loads(resources.files("tl_geometry").joinpath(DATA_FILE).read_text())["models"]
        hosts = {
            r["name"]: PublishedHost(
                name=str(r["name"]),
                d_model=int(r["d_model"]),
                epsilon=float(r["epsilon"]),
                capacity=None if r.get("capacity") is None else float(r["capacity"]),
                tied=bool(r["tied"]),
                hf_id=str(r["hf_id"]),
                aliases=tuple(str(a) for a in r.get("aliases") or ()),
                d_vocab=None if r.get("d_vocab") is None else int(r["d_vocab"]),
            )
            for r in rows
        }
        index: dict[str, str] = {}
        for h in hosts.values():  # the table's names first: an alias never shadows a name
            index.setdefault(normalize_name(h.name), h.name)
        for h in hosts.values():
            for a in h.aliases:
                index.setdefault(normalize_name(a), h.name)
        _HOSTS, _INDEX = hosts, index
    return _HOSTS


def published_hosts() -> dict[str, PublishedHost]:
    """The capacity paper's Table 1: model name → [`PublishedHost`][tl_geometry.families.capacity.hosts.PublishedHost], in the table's order.

    Examples:
        >>> from tl_geometry.families.capacity.hosts import published_hosts
        >>> h = published_hosts()["Gemma-2-2B"]
        >>> h.d_model, h.epsilon, h.tied, h.d_vocab
        (2304, 0.35084, True, 256000)
    """
    return dict(_load())


def normalize_name(name: Any) -> str:
    """The key a model name is matched by: the part after the last '/', lower case, only letters,
    digits and '.'.

    Examples:
        >>> normalize_name("meta-llama/Llama-2-7b-hf"), normalize_name("Llama 2_7B")
        ('llama27bhf', 'llama27b')
    """
    base = str(name).split("/")[-1]
    return "".join(ch for ch in base.lower() if ch.isalnum() or ch == ".")


def find_host(name: Any) -> PublishedHost | None:
    """The published row a model name refers to, or None.

    Matched by [`normalize_name`][tl_geometry.families.capacity.hosts.normalize_name] against the table's names and aliases, first as given,
    then without one of [`HOST_SUFFIXES`][tl_geometry.families.capacity.hosts.HOST_SUFFIXES].

    Examples:
        >>> find_host("google/gemma-3-1b-pt").name
        'Gemma-3-1B'
        >>> find_host("meta-llama/Llama-2-7b-hf").name
        'Llama-2-7B'
        >>> find_host("gpt2-small") is None
        True
    """
    hosts = _load()
    assert _INDEX is not None
    key = str(name).split("/")[-1]
    candidates = [key] + [key[: -len(s)] for s in HOST_SUFFIXES if key.lower().endswith(s)]
    for cand in candidates:
        hit = _INDEX.get(normalize_name(cand))
        if hit is not None:
            return hosts[hit]
    return None


def close_names(name: str, options: Iterable[str] | None = None, n: int = 5) -> list[str]:
    """Names in ``options`` (default: the table's) close to ``name``, for error messages:
    difflib's matches, else those containing ``name`` or contained in it."""
    options = list(_load() if options is None else options)
    close = difflib.get_close_matches(name, options, n=n, cutoff=0.5)
    if not close:
        low = name.lower()
        close = [o for o in options if low in o.lower() or o.lower() in low][:n]
    return close


# ----------------------------------------------------------------------------- views of the table
def published_rows() -> dict[str, PublishedRow]:
    """The capacity paper's Table 1 in full: model name → [`PublishedRow`][tl_geometry.families.capacity.hosts.PublishedRow].

    Published values (Guha, arXiv 2606.02765, Appendix D; the rows come from the authors'
    ``code/repr_cap_table.py``), plus our ``tied`` flag. Shipped in
    ``tl_geometry/data/published_hosts.json`` with its attribution (paper CC BY 4.0, code MIT,
    Copyright (c) 2026 Alexander Guha).

    Examples:
        >>> import tl_geometry as tg
        >>> r = tg.published_rows()["Llama-2-70B"]
        >>> r.capacity, r.tied
        (8150000000000000.0, False)
        >>> tg.published_rows()["Gemma-3-1B"].capacity is None
        True
    """
    return published_hosts()


def published() -> dict[str, PublishedEpsilon]:
    """The capacity paper's published ε table (Table 1): model name → (d_model, ε).

    These are **published values** (Guha, arXiv 2606.02765), shipped as data in
    ``tl_geometry/data/published_hosts.json`` so that bounds can be compared without weights.

    Examples:
        >>> import tl_geometry as tg
        >>> tg.published()["Llama-2-7B"]
        PublishedEpsilon(d_model=4096, epsilon=0.0645)
    """
    return {name: PublishedEpsilon(h.d_model, h.epsilon) for name, h in _load().items()}


def published_epsilon(name: str) -> PublishedEpsilon:
    """Look up a published ε by model name, ignoring case, '-', '_' and spaces ([`find_host`][tl_geometry.families.capacity.hosts.find_host]).

    The values are Table 1 of the capacity paper (arXiv 2606.02765): ε = μ + 2σ of the pairwise
    cosine similarities of the model's embedding rows, as the authors measured it.

    Also accepts a Hugging Face id (``"meta-llama/Llama-2-7b-hf"`` → ``Llama-2-7B``): the part
    before '/' and a trailing ``-hf`` (or another of [`HOST_SUFFIXES`][tl_geometry.families.capacity.hosts.HOST_SUFFIXES]) are ignored.

    Raises:
        KeyError: no match; the message lists close names.
    """
    hit = find_host(name)
    if hit is not None:
        return PublishedEpsilon(hit.d_model, hit.epsilon)
    table = _load()
    close = difflib.get_close_matches(str(name), list(table), n=3, cutoff=0.4)
    raise UnknownNameError(
        f"no published ε for {name!r}; close names: {close}; see tl_geometry.published() for all {len(table)}"
    )


# ----------------------------------------------------------------------------- ε of a host
@dataclass(frozen=True)
class HostEpsilon(Tabular):
    """A host's ε and where it came from ([`host_epsilon`][tl_geometry.families.capacity.hosts.host_epsilon]).

    Attributes:
        epsilon: ε = μ + 2σ.
        source: ``"given"`` (a number), ``"published"`` (Table 1) or ``"measured"`` (the model's
            matrix, [`tl_geometry.embedding_epsilon`][tl_geometry.families.capacity.embedding_epsilon]).
        d_model: the host's width (None for a given number).
        d_vocab: its vocabulary size, when known (the model's; the table's ``d_vocab`` for a
            published host).
        host: the published row (``source="published"``).
        stats: the [`SimilarityStats`][tl_geometry.metrics.capacity.SimilarityStats] (``source="measured"``).
        model: the model measured (loaded here when a name was given with ``load=True``).
        matrix: ``"W_E"`` or ``"W_U"``: the matrix measured (published ε is always of W_E).
    """

    epsilon: float
    source: str
    d_model: int | None = None
    d_vocab: int | None = None
    host: PublishedHost | None = None
    stats: Any = None
    model: Any = None
    matrix: str = "W_E"

    @property
    def published_as(self) -> str | None:
        """The table's name of a published host."""
        return self.host.name if self.host is not None else None


def host_epsilon(host: Any, *, matrix: str = "W_E", load: bool = False, device: str = "cpu") -> HostEpsilon:
    """ε of a host: a number, a published model name, or a model (measured from its matrix).

    The one resolver behind [`tl_geometry.families.sae.compare`][tl_geometry.families.sae.comparison.compare] / [`tl_geometry.families.sae.decoder_epsilon`][tl_geometry.families.sae.decoder.decoder_epsilon]
    (``load=False``: a name must be in the table) and ``tl-geometry capacity`` (``load=True``).

    Args:
        host: a float ε (``source="given"``); a TransformerLens model (``"measured"``); or a name:
            with ``load=True`` an offline zoo name is loaded and measured first, then a published
            name gives the table's ε, then any other name is loaded ([`tl_geometry.models.load`][tl_geometry.models.load])
            and measured; with ``load=False`` only published names are accepted.
        matrix: ``"W_E"`` or ``"W_U"``, for a measured host.
        load: load models named by a string (see above).
        device: for a model loaded here.

    Raises:
        ValueError: with ``load=False``, a name not in the table (close names listed).
    """
    if isinstance(host, (int, float)) and not isinstance(host, bool):
        return HostEpsilon(float(host), "given")
    model = host
    if isinstance(host, str):
        zoo = False
        if load:
            from tl_geometry.models import ZOO, canonical_name

            zoo = canonical_name(host) in ZOO
        hit = None if zoo else find_host(host)
        if hit is not None:
            return HostEpsilon(hit.epsilon, "published", d_model=hit.d_model, d_vocab=hit.d_vocab, host=hit)
        if not load:
            raise InputError(
                f"no published ε for {host!r}; close names: {close_names(host)}; "
                "pass a loaded model to measure ε from its W_E"
            )
        from tl_geometry import models

        model = models.load(host, device=device)
    from tl_geometry.families.capacity import embedding_epsilon

    st = embedding_epsilon(model, matrix=matrix, progress=False)
    return HostEpsilon(
        st.epsilon,
        "measured",
        d_model=int(model.cfg.d_model),
        d_vocab=int(model.cfg.d_vocab),
        stats=st,
        model=model,
        matrix=matrix,
    )
