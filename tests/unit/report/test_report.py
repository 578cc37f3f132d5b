import json
import math

import pytest

import tl_geometry as tg
from tl_geometry.report import GeometryReport, layer_of


def _report():
    return GeometryReport.from_rows(
        [
            {"metric": "pga.z", "value": 3.5, "hook": "blocks.2.hook_resid_post", "extras": {"ccr": 1, "k": 10}},
            {"metric": "epsilon.W_E", "value": 0.12, "extras": {"model_class": "boundary"}},
            {"metric": "odd", "value": float("nan")},
        ],
        model="toy",
        seed=3,
    )


def test_rows_layer_and_value():
    r = _report()
    assert layer_of("blocks.12.hook_resid_pre") == 12 and layer_of("hook_embed") is None
    assert r.rows[0].layer == 2 and r.rows[1].layer is None
    assert r.value("pga.z", ccr=1) == 3.5
    with pytest.raises(KeyError, match="expected one row"):
        r.value("pga.z", ccr=5)


def test_json_round_trip(tmp_path):
    r = _report()
    path = tmp_path / "sub" / "r.json"
    r.to_json(path)
    back = GeometryReport.from_json(path)
    assert back.rows[:2] == r.rows[:2]
    assert math.isnan(back.rows[2].value)
    assert back.provenance == r.provenance and back.provenance["seed"] == 3
    json.loads(path.read_text())  # strict JSON (nan written as a string)


def test_from_json_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such report"):
        GeometryReport.from_json(tmp_path / "missing.json")
    with pytest.raises(ValueError, match="missing 'rows'"):
        GeometryReport.from_json('{"x": 1}')


def test_pandas_and_markdown():
    r = _report()
    df = r.to_pandas()
    assert list(df.columns[:5]) == ["model", "hook", "layer", "metric", "value"]
    assert df.loc[0, "ccr"] == 1 and df.loc[0, "layer"] == 2
    md = r.to_markdown()
    assert "| toy | blocks.2.hook_resid_post | 2 | pga.z | 3.5 |" in md and "**seed**: 3" in md


def test_merge_and_filter():
    a, b = _report(), GeometryReport.from_rows([{"metric": "x", "value": 1.0}], model="m2", corpus="pydoc")
    m = GeometryReport.merge(a, b, run="r1")
    assert len(m) == 4 and m.provenance["corpus"] == "pydoc" and m.provenance["run"] == "r1"
    assert len(m.filter(prefix="pga")) == 1 and len(m.filter(hook="blocks.2.hook_resid_post")) == 1


def test_provenance_of_model(tiny_model):
    r = GeometryReport.from_rows([], model=tiny_model)
    p = r.provenance
    assert p["n_layers"] == 3 and p["d_model"] == 32 and p["model_class"] == "HookedTransformer"
    assert p["tl_geometry_version"] == tg.__version__ and "transformer_lens_version" in p


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002])
def test_atomic_write_text_mode_follows_umask(tmp_path, umask):
    """Not mkstemp's 0600: the mode a plain open() would give, so a shared report is readable."""
    import os
    import stat

    from tl_geometry.report import atomic_write_text, current_umask

    old = os.umask(umask)
    try:
        assert current_umask() == umask
        atomic_write_text(tmp_path / "a.txt", "x")
        atomic_write_text(tmp_path / "a.txt", "y")  # replacing keeps the umask's mode too
        GeometryReport.from_rows([], model="m").to_json(tmp_path / "r.json")
        with open(tmp_path / "plain.txt", "w") as f:
            f.write("z")
    finally:
        os.umask(old)
    want = stat.S_IMODE((tmp_path / "plain.txt").stat().st_mode)
    assert want == 0o666 & ~umask
    for name in ("a.txt", "r.json"):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == want
    assert (tmp_path / "a.txt").read_text() == "y" and sorted(p.name for p in tmp_path.iterdir()) == [
        "a.txt",
        "plain.txt",
        "r.json",
    ]


def test_transformer_lens_version_is_the_installed_one(tiny_model):
    from importlib.metadata import version

    p = GeometryReport.from_rows([], model=tiny_model).provenance
    assert p["transformer_lens_version"] == version("transformer_lens")


@pytest.mark.parametrize(
    "edit, match",
    [
        (lambda d: d["rows"][0].update(layer="three"), r"row 0: row 'm.x': layer must be a whole number"),
        (lambda d: d["rows"][0].update(layer=True), r"layer must be a whole number >= 0 or null, got True"),
        (lambda d: d["rows"][0].update(value=True), r"value must be a number"),
        (lambda d: d["rows"][0].update(metric=5), r"metric must be a non-empty string, got 5"),
        (lambda d: d["rows"][0].update(hook=["a"]), r"hook must be a string or null"),
        (lambda d: d["rows"][0].update(model=None), r"model must be a string"),
        (lambda d: d.update(provenance=[1, 2]), r"'provenance' must be a JSON object with string keys, got list"),
    ],
)
def test_a_report_file_is_validated_at_load_naming_the_row(tmp_path, capsys, edit, match):
    """Render reads a report.json: every row's types are checked at load (the row named), never a
    traceback in the readings (a string layer, a list provenance, an int metric used to be)."""
    import json

    from tl_geometry.cli import main

    d = GeometryReport.from_rows(
        [{"metric": "m.x", "value": 1.0, "hook": "blocks.0.hook_resid_post"}], model="tiny"
    ).to_dict()
    edit(d)
    with pytest.raises(ValueError, match=match):
        GeometryReport.from_dict(d)
    p = tmp_path / "report.json"
    p.write_text(json.dumps(d))
    assert main(["render", str(p), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_nan_and_inf_values_still_load_and_render(tmp_path):
    d = GeometryReport.from_rows(
        [{"metric": "m.x", "value": float("nan")}, {"metric": "m.y", "value": "inf"}], model="t"
    )
    back = GeometryReport.from_dict(d.to_dict())
    assert math.isnan(back.rows[0].value) and back.rows[1].value == float("inf")
