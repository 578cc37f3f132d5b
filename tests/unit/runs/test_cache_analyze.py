"""``tg.analyze(model, tokens, cache=...)`` / ``activations=...``: the activation metrics from a
user's ``run_with_cache`` cache equal the capture path's, BOS dropped as the capture layer does."""

from __future__ import annotations

import math

import pytest
import torch

import tl_geometry as tg
from tests.helpers import builtin_metrics
from tl_geometry import capture, registry
from tl_geometry.errors import InputError, TLGeometryError

pytestmark = pytest.mark.needs_hooked

#: Every built-in activation metric (a new family's too): each must give the same rows from a cache.
ACT_METRICS = builtin_metrics(needs="activations")
#: Smaller options for some (a tiny model); the others run with their family's fast_options.
SMALL = {
    "pga": {"k": 4, "n_null": 5, "max_points": 150},
    "epsilon_activations": {"max_points": 150},
    "intrinsic_dimension": {"max_points": 150, "range_max": 8},
}
OPTIONS = {
    m: dict(SMALL.get(m, registry.family_of(m).fast_options.get(m, {})))
    for m in ACT_METRICS
    if m in SMALL or registry.family_of(m).fast_options.get(m)
}
HOOKS = ["blocks.0.hook_resid_post", "blocks.2.hook_resid_post"]


@pytest.fixture(scope="module")
def byte_model():
    from tests.helpers import make_byte_model

    return make_byte_model()


@pytest.fixture(scope="module")
def tokens():
    gen = torch.Generator().manual_seed(1)
    toks = torch.randint(1, 300, (12, 16), generator=gen)
    toks[:, 0] = 0  # every sequence starts with the tokenizer's BOS
    return toks


def _values(report):
    out = {}
    for r in report.rows:
        key = (r.metric, r.hook, r.extras.get("ccr"))
        out[key] = (r.value, r.extras.get("stderr"))
    return out


def _max_diff(a, b):
    assert a.keys() == b.keys()
    worst = 0.0
    for k in a:
        for x, y in zip(a[k], b[k]):
            if x is None and y is None:
                continue
            if isinstance(x, float) and math.isnan(x):
                assert math.isnan(y), k
                continue
            worst = max(worst, abs(x - y))
    return worst


def _batched_cache(model, tokens, batch_size=8):
    """Activations from run_with_cache batch by batch (the capture path's batches): equal bits."""
    parts: dict[str, list[torch.Tensor]] = {}
    for s in range(0, tokens.shape[0], batch_size):
        _, c = model.run_with_cache(tokens[s : s + batch_size], names_filter=HOOKS)
        for h in HOOKS:
            parts.setdefault(h, []).append(c[h])
    return {h: torch.cat(v) for h, v in parts.items()}


def test_the_list_covers_every_builtin_activation_metric():
    builtin = {n for n in tg.list_metrics(needs="activations") if tg.get_metric(n).builtin}
    assert builtin == set(ACT_METRICS) and {"pga", "spectral", "epsilon_activations"} <= builtin
    assert set(SMALL) <= builtin  # no stale entry


def test_cache_equals_capture_for_every_activation_metric(byte_model, tokens):
    kw = dict(metrics=ACT_METRICS, hooks=HOOKS, options=OPTIONS, progress=False)
    ref = tg.analyze(byte_model, tokens, **kw)
    # a cache of the whole batch at once: equal up to the matmul's batch-size rounding
    _, cache = byte_model.run_with_cache(tokens)
    got = tg.analyze(byte_model, tokens, cache=cache, **kw)
    declared = registry.declared_rows()
    assert {declared[r.metric][1].by for r in got.rows} == set(ACT_METRICS)  # every metric gave rows
    assert _max_diff(_values(ref), _values(got)) < 1e-4
    assert got.provenance["capture"]["mode"] == "cache"
    assert got.provenance["capture"]["forward_passes"] == 0
    # activations computed in the capture path's batches: the same numbers exactly
    exact = tg.analyze(byte_model, tokens, activations=_batched_cache(byte_model, tokens), **kw)
    assert _values(exact) == _values(ref)


def test_cache_runs_the_model_on_one_sequence_only_to_check_it(byte_model, tokens):
    """The cache is used, not recomputed: the model runs once on the first sequence (the cheap
    check that the cache is this model's on these tokens), never on the batch."""
    _, cache = byte_model.run_with_cache(tokens)
    calls = []
    handle = byte_model.embed.register_forward_hook(lambda mod, args, out: calls.append(tuple(args[0].shape)))
    try:
        tg.analyze(byte_model, tokens, cache=cache, metrics=["spectral"], hooks=HOOKS, progress=False)
    finally:
        handle.remove()
    assert calls == [(1, tokens.shape[1])]


def test_bos_is_dropped_like_the_capture_layer(byte_model, tokens):
    """A slow reference: drop position 0 (BOS in every sequence) by hand, then the pure function."""
    _, cache = byte_model.run_with_cache(tokens)
    h = HOOKS[1]
    acts = cache[h]
    ref_rows = torch.cat([acts[b, 1:] for b in range(acts.shape[0])])
    rows = capture.flatten_valid(byte_model, tokens, acts)
    assert torch.equal(rows, ref_rows)
    naive = acts.reshape(-1, acts.shape[-1])  # the pitfall: BOS kept
    assert naive.shape[0] == rows.shape[0] + tokens.shape[0]
    # a flat (batch*pos, d) tensor is read back as (batch, pos, d): BOS still dropped
    assert torch.equal(capture.flatten_valid(byte_model, tokens, naive), ref_rows)
    rep = tg.analyze(byte_model, tokens, activations={h: naive}, metrics=["spectral"], progress=False)
    want = tg.spectral_metrics(ref_rows)
    row = next(r for r in rep.rows if r.metric == "spectral.rankme")
    assert row.hook == h
    assert row.value == pytest.approx(want.rankme, rel=1e-5)
    assert row.extras["n_points"] == ref_rows.shape[0]


def test_missing_hook_names_it_and_the_hooks_present(byte_model, tokens):
    _, cache = byte_model.run_with_cache(tokens, names_filter=["blocks.0.hook_resid_post"])
    with pytest.raises(
        InputError, match=r"'blocks\.2\.hook_resid_post' is not in the activations.*blocks\.0\.hook_resid_post"
    ):
        tg.analyze(byte_model, tokens, cache=cache, metrics=["spectral"], hooks=HOOKS, progress=False)


def test_gradient_metrics_are_refused_when_named_and_skipped_by_default(byte_model, tokens):
    _, cache = byte_model.run_with_cache(tokens)
    with pytest.raises(InputError, match=r"\['agop'\] cannot be computed from cached activations.*gradients"):
        tg.analyze(byte_model, tokens, cache=cache, metrics=["spectral", "agop"], progress=False)
    rep = tg.analyze(byte_model, tokens, cache=cache, options={"pga": {"k": 4, "n_null": 5}}, progress=False)
    skipped = rep.provenance["capture"]["skipped"]
    assert {"agop", "nfa"} <= set(skipped)
    assert not any(r.metric.startswith("agop") for r in rep.rows)
    assert "agop" not in rep.provenance["metrics"]


@pytest.mark.parametrize(
    ("acts", "match"),
    [
        (torch.zeros(12, 15, 32), r"shape \(12, 15, 32\).*expected \(12, 16, d\)"),
        (torch.zeros(12 * 15, 32), r"already-filtered rows"),
        (torch.zeros(12, 16, 32, dtype=torch.long), "floating point"),
        ([[0.0]], "must be a tensor"),
    ],
)
def test_bad_activation_shapes_are_refused(byte_model, tokens, acts, match):
    with pytest.raises(TLGeometryError, match=match):
        tg.analyze(byte_model, tokens, activations={HOOKS[0]: acts}, metrics=["spectral"], progress=False)


def test_bad_combinations(byte_model, tokens):
    _, cache = byte_model.run_with_cache(tokens)
    with pytest.raises(InputError, match="not both"):
        tg.analyze(byte_model, tokens, cache=cache, activations=dict(cache.items()), metrics=["spectral"])
    with pytest.raises(InputError, match="need the tokens"):
        tg.analyze(byte_model, None, cache=cache, metrics=["spectral"])
    with pytest.raises(InputError, match="separate"):
        tg.analyze(byte_model, tokens, cache=cache, metrics=["spectral"], capture="separate")
