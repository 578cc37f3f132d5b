"""tl_geometry.families.capacity.hosts: one data file for the published hosts, one name resolver, one ε resolver,
and every shared constant (ε classes, efficient interval, the table) defined in exactly one module."""

from __future__ import annotations

import ast
import json
from importlib import resources
from pathlib import Path

import pytest

import tl_geometry as tg
from tl_geometry.families.capacity import hosts

PACKAGE = Path(tg.__file__).parent


@pytest.mark.parametrize("name", sorted(hosts.published_hosts()))
def test_every_host_round_trips(name):
    """The name and each alias resolve to the row; so do case/punctuation variants of the name."""
    h = hosts.published_hosts()[name]
    assert hosts.find_host(name) == h
    assert hosts.find_host(name.upper().replace("-", "_")) == h
    assert hosts.find_host(f"some-org/{name}") == h
    for alias in h.aliases:
        assert hosts.find_host(alias) == h, alias
    assert tg.published_epsilon(name) == (h.d_model, h.epsilon)
    assert tg.published()[name] == (h.d_model, h.epsilon)
    assert tg.published_rows()[name] is h or tg.published_rows()[name] == h


def test_table_shape_and_columns():
    table = hosts.published_hosts()
    assert len(table) == 45 and list(table) == [m["name"] for m in _data()["models"]]
    assert all(0 < h.epsilon < 1 and h.d_model > 0 and isinstance(h.tied, bool) for h in table.values())
    assert {n: h.d_vocab for n, h in table.items() if h.d_vocab} == tg.sae.D_VOCAB
    # every name and alias maps to one row only
    keys = [hosts.normalize_name(n) for n in table] + [
        hosts.normalize_name(a) for h in table.values() for a in h.aliases
    ]
    owners: dict[str, set[str]] = {}
    for h in table.values():
        for k in [h.name, *h.aliases]:
            owners.setdefault(hosts.normalize_name(k), set()).add(h.name)
    assert all(len(v) == 1 for v in owners.values()), {k: v for k, v in owners.items() if len(v) > 1}
    assert keys


def _data() -> dict:
    return json.loads(resources.files("tl_geometry").joinpath(hosts.DATA_FILE).read_text())


def test_suffixes_and_unknown_names():
    assert hosts.find_host("google/gemma-3-1b-pt").name == "Gemma-3-1B"
    assert hosts.find_host("Qwen/Qwen3-8B-Base").name == "Qwen3-8B"
    assert hosts.find_host("meta-llama/Llama-2-7b-hf").name == "Llama-2-7B"
    assert hosts.find_host("gpt2-small") is None
    assert tg.sae.published_host("google/gemma-3-1b-pt") == ("Gemma-3-1B", 1152, 0.20164)
    assert tg.sae.published_host("DeepSeek-R1")[0] == "DeepSeek-R1"  # same (d, ε) as DeepSeek-V3.2-Exp
    with pytest.raises(KeyError, match="no published"):
        tg.published_epsilon("not-a-model-xyz")


def test_host_epsilon_sources():
    assert hosts.host_epsilon(0.25) == hosts.HostEpsilon(0.25, "given")
    he = hosts.host_epsilon("gemma-2-2b")
    assert (he.source, he.epsilon, he.d_model, he.d_vocab, he.published_as) == (
        "published",
        0.35084,
        2304,
        256000,
        "Gemma-2-2B",
    )
    with pytest.raises(ValueError, match="no published ε for 'gpt2-small'.*pass a loaded model"):
        hosts.host_epsilon("gpt2-small")


@pytest.mark.needs_hooked
def test_host_epsilon_measures_a_model():
    from tests.helpers import make_tiny_model

    model = make_tiny_model()
    he = hosts.host_epsilon(model)
    st = tg.embedding_epsilon(model, progress=False)
    assert he.source == "measured" and he.epsilon == st.epsilon and he.d_model == model.cfg.d_model
    assert he.d_vocab == model.cfg.d_vocab and he.model is model


def test_capacity_is_the_formula_only():
    """tg.capacity is the function; the table is not patched onto it (tg.published() is)."""
    assert not hasattr(tg.capacity, "published") and not hasattr(tg.capacity, "published_epsilon")


# ----------------------------------------------------------------------------- one definition
def _modules():
    for p in sorted(PACKAGE.rglob("*.py")):
        yield p.relative_to(PACKAGE).as_posix(), ast.parse(p.read_text())


def _float_constants(tree, values):
    return [n for n in ast.walk(tree) if isinstance(n, ast.Constant) and type(n.value) is float and n.value in values]


def test_efficient_interval_is_defined_once():
    hits = sorted({mod for mod, tree in _modules() if _float_constants(tree, {0.023, 0.047})})
    assert hits == ["metrics/interaction.py"]


def test_epsilon_class_thresholds_are_defined_once():
    """0.1 and 0.2 are common numbers; as ε thresholds they appear as a comparison operand or a
    CLASS* constant. Only metrics/_capacity_forms.py defines them; everything else imports them."""
    compared, defined = set(), set()
    for mod, tree in _modules():
        for node in ast.walk(tree):
            if isinstance(node, ast.Compare):
                if _float_constants(ast.Module(body=[ast.Expr(node)], type_ignores=[]), {0.1, 0.2}):
                    compared.add(mod)
            if isinstance(node, ast.Assign) and _float_constants(node.value, {0.1, 0.2}):
                if any(isinstance(t, ast.Name) and "CLASS" in t.id for t in node.targets):
                    defined.add(mod)
    assert defined == {"metrics/_capacity_forms.py"}
    assert compared == set(), compared


def test_published_table_is_read_from_one_module():
    hits = sorted(
        mod
        for mod, tree in _modules()
        if any(
            isinstance(n, ast.Constant)
            and isinstance(n.value, str)
            and "published_" in n.value
            and n.value.endswith(".json")
            for n in ast.walk(tree)
        )
    )
    assert hits == ["families/capacity/hosts.py"]
    # no copy of a table row (name with its ε) as code anywhere but the data file
    copies = sorted(
        mod
        for mod, tree in _modules()
        if mod != "reproduce.py" and _float_constants(tree, {0.05917, 0.99918, 0.35084, 0.41554})
    )
    assert copies == []
