"""The three AGOP conventions (space="input" | "output" | "loss") against explicit full Jacobians.

References: ``torch.autograd.functional.jacobian`` of the model run from its embeddings
(``start_at_layer=0``, no hooks involved), one sequence at a time, accumulated in float64.
The authors' conventions (github.com/wenjie1835/Interaction_Law): output space in
budget_scaling/transformer_ntp_shape_sweep.py (P = torch.manual_seed(42); randn(64, V) / 8),
loss space in shape_scan/transformer_shape_scan.py (gradient of the summed cross-entropy w.r.t.
the token embeddings, one row per position).
"""

import warnings

import pytest
import torch
import torch.nn.functional as F

import tl_geometry as tg
from tl_geometry.families.interaction import SPACES
from tl_geometry.families.interaction.shape_sweep import build_model
from tl_geometry.metrics.interaction import projection_matrix

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def paper_tiny():
    """A 2-layer, d_model 8 TinyGPT of the paper preset (vocab 256, n_ctx 12), float64 for the references."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return build_model(2, 8, preset="paper", n_ctx=12, seed=3)


@pytest.fixture(scope="module")
def toks():
    return torch.randint(0, 256, (3, 6), generator=torch.Generator().manual_seed(1))


def embed(model, tok):
    """Token + position embeddings of one sequence (1, T, d), the input of every reference."""
    return (model.W_E[tok] + model.W_pos[: tok.shape[-1]]).detach()


def from_embeddings(model, e):
    return model(e, start_at_layer=0)  # (1, T, V)


def test_spaces_vocabulary():
    assert set(SPACES) == {"input", "output", "loss"}
    with pytest.raises(ValueError, match="space must be one of .*input.*output.*loss"):
        tg.agop(build_model(1, 16, n_ctx=8), torch.zeros(1, 4, dtype=torch.long), space="logits", progress=False)


def test_input_space_against_full_jacobian(paper_tiny, toks):
    m, toks = paper_tiny, toks[:2, :4]
    d = m.cfg.d_model
    G, n = torch.zeros(d, d, dtype=torch.float64), 0
    for b in range(toks.shape[0]):
        e = embed(m, toks[b : b + 1])
        J = torch.autograd.functional.jacobian(lambda x: from_embeddings(m, x), e)  # (1, T, V, 1, T, d)
        J = J[0, :, :, 0].double()  # (T, V, T, d)
        for s in range(J.shape[2]):
            Js = J[:, :, s].reshape(-1, d)  # every logit w.r.t. position s
            G += Js.T @ Js
            n += 1
    res = tg.agop(m, toks, hooks=["blocks.0.hook_resid_pre"], exact=True, progress=False)
    torch.testing.assert_close(
        res.matrices["blocks.0.hook_resid_pre"].double(), G / n, rtol=1e-4, atol=1e-5 * float(G.abs().max())
    )
    assert res.space == "input"


def test_authors_projection_draw():
    # the authors' code, literally: torch.manual_seed(42); torch.randn(64, 256) / math.sqrt(64) (on CPU)
    torch.manual_seed(42)
    theirs = torch.randn(64, 256) / 8.0
    torch.testing.assert_close(projection_matrix(64, 256, seed=42, convention="paper"), theirs, rtol=0, atol=0)
    assert not torch.equal(projection_matrix(64, 256, seed=42), theirs)  # ours (library) is a different draw
    with pytest.raises(ValueError, match="convention must be"):
        projection_matrix(4, 8, convention="authors")


@pytest.mark.parametrize("projection_seed", [42, None])
def test_output_space_against_full_jacobian(paper_tiny, toks, projection_seed):
    m, k = paper_tiny, 16
    if projection_seed is None:
        P = projection_matrix(k, 256, seed=0).double()
    else:
        torch.manual_seed(projection_seed)
        P = (torch.randn(k, 256) / k**0.5).double()  # the authors' draw
    G = torch.zeros(k, k, dtype=torch.float64)
    for b in range(toks.shape[0]):
        e = embed(m, toks[b : b + 1])
        J = torch.autograd.functional.jacobian(lambda x: from_embeddings(m, x)[0, -1], e)  # (V, 1, T, d)
        PJ = P @ J.reshape(256, -1).double()
        G += PJ @ PJ.T
    G /= toks.shape[0]
    res = tg.agop(
        m, toks, space="output", exact=True, projection_dim=k, projection_seed=projection_seed, progress=False
    )
    torch.testing.assert_close(
        res.matrices["blocks.0.hook_resid_pre"].double(), G, rtol=1e-4, atol=1e-5 * float(G.abs().max())
    )
    assert res.provenance["agop_projection"]["convention"] == ("library" if projection_seed is None else "paper")
    # the JVP-probe estimator agrees with the exact matrix in expectation
    est = tg.agop(
        m, toks, space="output", n_probes=600, projection_dim=k, projection_seed=projection_seed, progress=False
    )
    rel = (est.matrices["blocks.0.hook_resid_pre"].double() - G).norm() / G.norm()
    assert rel < 0.15


def test_loss_space_against_per_sequence_jacobian(paper_tiny, toks):
    m = paper_tiny
    d = m.cfg.d_model
    G, n = torch.zeros(d, d, dtype=torch.float64), 0
    for b in range(toks.shape[0]):
        tok = toks[b : b + 1]

        def summed_ce(x):
            logits = from_embeddings(m, x)[0]
            return F.cross_entropy(logits[:-1], tok[0, 1:], reduction="sum")  # noqa: B023  (called in this iteration)

        g = torch.autograd.functional.jacobian(summed_ce, embed(m, tok))[0].double()  # (T, d)
        assert torch.count_nonzero(g[-1]) == 0  # the last position predicts nothing
        for t in range(g.shape[0] - 1):
            G += torch.outer(g[t], g[t])
            n += 1
    G /= n
    for hook in ("hook_embed", "blocks.0.hook_resid_pre"):  # same gradient: resid_pre = embed + pos_embed
        res = tg.agop(m, toks, space="loss", hooks=[hook], batch_size=2, progress=False)
        torch.testing.assert_close(res.matrices[hook].double(), G, rtol=1e-4, atol=1e-5 * float(G.abs().max()))
        assert res.exact and res.stats[hook].n_positions == n == 3 * 5
    assert tg.agop(m, toks, space="loss", progress=False).hooks == ["hook_embed"]  # the authors' hook by default


def test_loss_space_bad_input(paper_tiny, toks):
    with pytest.raises(ValueError, match="at least 2 tokens"):
        tg.agop(paper_tiny, toks[:, :1], space="loss", progress=False)
    with pytest.raises(ValueError, match="projection_seed applies to space='output' only"):
        tg.agop(paper_tiny, toks, space="loss", projection_seed=42, progress=False)
    with pytest.raises(ValueError, match="past the unembedding"):
        tg.agop(paper_tiny, toks, space="loss", hooks=["unembed.hook_out"], progress=False)


@pytest.mark.parametrize("space, extra", [("loss", []), ("output", ["--projection-seed", "42", "--exact"])])
def test_cli_agop_spaces(paper_tiny, toks, space, extra, monkeypatch, tmp_path, capsys):
    from tl_geometry.cli import main

    monkeypatch.setattr(tg.models, "load", lambda name, **kw: paper_tiny)
    monkeypatch.setattr(tg.corpus, "tokens", lambda model, source, **kw: toks[: kw["n_seqs"], : kw["seq_len"]])
    out = tmp_path / "agop.json"
    hook = "hook_embed" if space == "loss" else "blocks.0.hook_resid_pre"
    assert main(["agop", "--space", space, "--n-seqs", "2", "--seq-len", "5", *extra, "--out", str(out)]) == 0
    assert hook in capsys.readouterr().out
    rows = [r for r in tg.GeometryReport.from_json(out).rows if r.metric == "agop.aofe_ratio"]
    assert [r.extras["space"] for r in rows] == [space]
    direct = tg.agop(
        paper_tiny,
        toks[:2, :5],
        space=space,
        exact=True,
        progress=False,
        projection_seed=42 if space == "output" else None,
    )
    assert rows[0].value == pytest.approx(direct.stats[hook].ratio, rel=1e-6)
