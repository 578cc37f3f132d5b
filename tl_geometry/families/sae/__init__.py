"""SAE adapter: published SAE widths (sae_lens) next to the capacity bound, and SAE decoder ε.

The capacity paper (Guha, arXiv 2606.02765) bounds how many directions with pairwise
|cos| ≤ ε fit in d_model dimensions, k(d, ε) ([`tl_geometry.capacity`][tl_geometry.metrics.capacity.capacity]). Sparse
autoencoders claim a number of features d_sae per hook. This module puts the two side by side:

* [`widths`][tl_geometry.families.sae.directory.widths] — one [`SAEWidth`][tl_geometry.families.sae.directory.SAEWidth] per SAE of sae_lens's packaged pretrained directory
  (release, id, model, hook, d_sae and where d_sae came from);
* [`load`][tl_geometry.families.sae.loading.load] — ``SAE.from_pretrained`` / ``SAE.load_from_disk`` with a fast, clear failure
  offline;
* [`compare`][tl_geometry.families.sae.comparison.compare] — a [`GeometryReport`][tl_geometry.report.GeometryReport] with d_sae / capacity and
  the shared ratio per SAE (the paper's shared-resource reading, its Eq. 2: token embeddings,
  unembeddings and features draw on one pool of near-orthogonal directions, k ≈ 2V + k_features
  for untied models and V + k_features for tied ones), so (2V + d_sae) / k or (V + d_sae) / k;
* [`decoder_epsilon`][tl_geometry.families.sae.decoder.decoder_epsilon] — ε of an SAE's decoder rows and the exact fraction of decoder pairs
  whose |cos| exceeds the host model's ε.

sae_lens is an optional dependency (``pip install 'tl-geometry[sae]'``), imported only inside the
functions that need it. The width parser and the blockwise pair count are pure functions and
work without it.

Our choices where the paper is silent:

* **Widths from ids.** sae_lens's directory has no width field. ``width_source="config"`` when
  the SAE's config was read (from the local HF cache, or the hub with ``config="hub"``);
  otherwise d_sae is parsed from the id, then the repository path, then the release name, then
  the repo id, by the first matching rule of [`WIDTH_RULES`][tl_geometry.families.sae.ids.WIDTH_RULES] (``"id"``); else
  ``"unknown"``. ``Nk`` means the power of two nearest N·1000 when it is within 5 % of it
  (``16k`` → 16384, ``131k`` → 131072, ``1m`` → 1048576), else N·1024 (``80k`` → 81920).
* **No count, no ratio.** The capacity is the paper's ([`tl_geometry.capacity_estimate`][tl_geometry.metrics.capacity.capacity_estimate],
  preset ``"paper"``): a count only for ε < 0.1. For a boundary (0.1 ≤ ε ≤ 0.2) or Class-1
  (ε > 0.2) host the capacity is indeterminate, and so are the ratios: NaN with
  ``verdict="indeterminate"`` and the reason in ``extras["reason"]``, never a number.
* **Tied or not.** The shared ratio needs to know whether the host ties its embedding and
  unembedding: ``tied=`` when given; else the published table's ``tied`` column (from each
  model's Hugging Face ``tie_word_embeddings``); else, for an offline-zoo model, whether its
  checkpoint has a separate output tensor; else unknown (NaN, ``verdict="tied unknown"``).
* **Published ε.** With only a model name, ε and d_model come from the paper's Table 1
  ([`tl_geometry.published`][tl_geometry.families.capacity.hosts.published], labelled ``epsilon_source="published"``); sae_lens names map
  to it ignoring an organisation prefix, case, and a ``-pt``/``-base``/``-it``/``-instruct``
  suffix (``google/gemma-3-1b-pt`` → Gemma-3-1B). d_vocab for those models comes from
  [`D_VOCAB`][tl_geometry.families.sae.directory.D_VOCAB] (their tokenizers' vocabulary sizes).
* **Exceedance** counts unordered pairs i < j of non-zero decoder rows with |cos| > ε_host
  (strictly greater), exactly, in float32 blocks.

Layout, one module per job:

* [`tl_geometry.families.sae.ids`][tl_geometry.families.sae.ids] — d_sae and the hook parsed from an SAE's id (pure);
* [`tl_geometry.families.sae.directory`][tl_geometry.families.sae.directory] — sae_lens's directory of releases ([`widths`][tl_geometry.families.sae.directory.widths]) and the
  published hosts ([`published_host`][tl_geometry.families.sae.directory.published_host]);
* [`tl_geometry.families.sae.loading`][tl_geometry.families.sae.loading] — [`load`][tl_geometry.families.sae.loading.load] (hub, local cache, saved folder), offline control
  through [`tl_geometry.io.hub`][tl_geometry.io.hub];
* [`tl_geometry.metrics.sae`][tl_geometry.metrics.sae] — the decoder math on tensors ([`cosine_exceedance`][tl_geometry.metrics.sae.cosine_exceedance],
  [`shared_directions`][tl_geometry.metrics.sae.shared_directions]); [`tl_geometry.families.sae.decoder`][tl_geometry.families.sae.decoder] — [`decoder_epsilon`][tl_geometry.families.sae.decoder.decoder_epsilon] against a host;
* [`tl_geometry.families.sae.comparison`][tl_geometry.families.sae.comparison] — [`compare`][tl_geometry.families.sae.comparison.compare], the registered ``"sae"`` metric and
  [`plot_sae_widths`][tl_geometry.families.sae.comparison.plot_sae_widths];
* [`tl_geometry.families.sae.reading`][tl_geometry.families.sae.reading] and [`tl_geometry.families.sae.figures`][tl_geometry.families.sae.figures] — the
  family's reading and figure in a report; [`tl_geometry.families.sae.cli`][tl_geometry.families.sae.cli] — ``tl-geometry sae``;
* [`tl_geometry.families.sae.training`][tl_geometry.families.sae.training] — a small SAE trained offline by sae_lens and
  published to a local hub cache ([`train_sae`][tl_geometry.families.sae.training.train_sae],
  [`publish_to_cache`][tl_geometry.families.sae.training.publish_to_cache]); [`tl_geometry.families.sae.checks`][tl_geometry.families.sae.checks] — its reproduce check;
* ``tl_geometry.families.sae._lens`` — the import guard (sae_lens is imported only inside the functions
  that need it; ``import tl_geometry`` works without it).
"""

from __future__ import annotations

from tl_geometry.families.sae._lens import SAELensNotInstalledError, _sae_lens  # noqa: F401  (_sae_lens: families.sae.training)
from tl_geometry.families.sae.comparison import compare, plot_sae_widths, sae_metric  # noqa: F401  (registers "sae")
from tl_geometry.families.sae.decoder import decoder_epsilon
from tl_geometry.families.sae.directory import (  # noqa: F401  (_directory: benchmarks, tests)
    D_VOCAB,
    SAEWidth,
    _directory,
    published_host,
    width_summary,
    widths,
)
from tl_geometry.families.sae.ids import WIDTH_RULES, parse_hook, parse_width
from tl_geometry.families.sae.loading import load
from tl_geometry.io.hub import HubUnavailableError
from tl_geometry.metrics.sae import DecoderEpsilon, cosine_exceedance, shared_directions

__all__ = [
    "SAEWidth",
    "WIDTH_RULES",
    "D_VOCAB",
    "parse_width",
    "parse_hook",
    "widths",
    "width_summary",
    "load",
    "compare",
    "DecoderEpsilon",
    "decoder_epsilon",
    "cosine_exceedance",
    "published_host",
    "shared_directions",
    "plot_sae_widths",
    "SAELensNotInstalledError",
    "HubUnavailableError",
]
