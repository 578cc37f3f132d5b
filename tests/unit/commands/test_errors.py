"""One exception base: every deliberate error is a TLGeometryError; the CLI turns only those into exit 2."""

import pytest
import torch

from tl_geometry.errors import InputError, InputTypeError, TLGeometryError, UnknownNameError


# ---------------------------------------------------------------- the hierarchy
def test_families_keep_their_builtin_bases():
    assert issubclass(InputError, TLGeometryError) and issubclass(InputError, ValueError)
    assert issubclass(UnknownNameError, TLGeometryError) and issubclass(UnknownNameError, KeyError)
    assert issubclass(InputTypeError, TLGeometryError) and issubclass(InputTypeError, TypeError)
    assert not issubclass(TLGeometryError, (ValueError, KeyError, TypeError))


def test_unknown_name_str_is_the_plain_message():
    msg = "unknown metric 'pgaa'; did you mean 'pga'?"
    assert str(UnknownNameError(msg)) == msg  # a bare KeyError would print repr(msg), in quotes
    assert str(KeyError(msg)) != msg


def _named_errors():
    from tl_geometry.families.sae import HubUnavailableError, SAELensNotInstalledError
    from tl_geometry.io.corpus import CorpusDecodeError
    from tl_geometry.io.outdir import OutputExistsError, OutputLockedError, OutputNotWritableError
    from tl_geometry.io.weight_files import CorruptFileError
    from tl_geometry.models import ModelNotAvailableError

    return [
        (ModelNotAvailableError, (RuntimeError,)),
        (CorruptFileError, (InputError, ValueError)),
        (CorpusDecodeError, (InputError, ValueError)),
        (OutputExistsError, (FileExistsError, InputError, ValueError)),
        (OutputNotWritableError, (PermissionError, InputError, ValueError)),
        (OutputLockedError, (FileExistsError, InputError, ValueError)),
        (HubUnavailableError, (OSError,)),
        (SAELensNotInstalledError, (ImportError,)),
    ]


@pytest.mark.parametrize("cls, bases", _named_errors(), ids=lambda x: getattr(x, "__name__", ""))
def test_named_errors_are_tl_geometry_errors_and_keep_their_bases(cls, bases):
    assert issubclass(cls, TLGeometryError)
    for base in bases:
        assert issubclass(cls, base), f"{cls.__name__} lost its base {base.__name__}"


def test_every_exception_class_in_the_package_is_a_tl_geometry_error():
    """A new public ``class FooError(ValueError)`` that forgets the base is caught here (warnings and
    private control-flow exceptions such as ``capture._StopForward`` are not errors a caller sees)."""
    import importlib
    import pkgutil

    import tl_geometry

    for info in pkgutil.walk_packages(tl_geometry.__path__, "tl_geometry."):
        module = importlib.import_module(info.name)
        for name, obj in vars(module).items():
            if (
                isinstance(obj, type)
                and issubclass(obj, BaseException)
                and obj.__module__ == info.name
                and not issubclass(obj, Warning)
                and not name.startswith("_")
            ):  # private: control flow
                assert issubclass(obj, TLGeometryError), f"{info.name}.{name} does not derive from TLGeometryError"


# ------------------------------------------------- a bad input from each family
def _pure_cases():
    import tl_geometry.metrics.capacity as cap
    from tl_geometry import registry
    from tl_geometry.families import sae
    from tl_geometry.families.capacity import hosts, packing
    from tl_geometry.metrics import interaction, pga, spectral
    from tl_geometry.report import GeometryReport
    from tl_geometry.runs.sweeps import SweepJob

    return [
        ("capacity", lambda: cap.capacity_estimate(64, 1.5), InputError, r"epsilon must be < 1"),
        ("capacity-type", lambda: cap.capacity(64, "0.1"), InputTypeError, r"eps must be"),
        ("capacity-vectors", lambda: cap.similarity_stats(torch.ones(3)), InputError, r"expected 2-D vectors"),
        ("published", lambda: hosts.published_epsilon("no-such-model-xyz"), UnknownNameError, r"no published ε"),
        ("pga", lambda: pga.readout_basis(torch.randn(8, 20), 0), InputError, r"k must satisfy 1 <= k < d_model=8"),
        ("spectral", lambda: spectral.spectral_from_covariance(torch.ones(3, 4)), InputError, r"square 2-D"),
        ("interaction", lambda: interaction.aofe(torch.ones(3, 4)), InputError, r"must be a square 2-D matrix"),
        (
            "interaction-type",
            lambda: interaction.aofe([[1.0]]),
            InputTypeError,
            r"must be a 2-D torch tensor or numpy array",
        ),
        ("sae", lambda: sae.cosine_exceedance(torch.randn(5, 4), 2.0), InputError, r"threshold must lie in \[0, 1\]"),
        ("packing", lambda: packing.random_packing(4, 3, trials=0), InputError, r"trials must be >= 1"),
        ("registry", lambda: registry.get_metric("pgaa"), UnknownNameError, r"unknown metric 'pgaa'"),
        ("registry-name", lambda: registry.register_metric("", needs="weights"), InputError, r"non-empty string"),
        (
            "report",
            lambda: GeometryReport.from_dict({"rows": [{"model": "m"}]}),
            InputError,
            r"lacks \['metric', 'value'\]",
        ),
        ("report-value", lambda: GeometryReport().value("pga.z"), UnknownNameError, r"expected one row"),
        ("sweep", lambda: SweepJob(model=""), InputError, r"SweepJob.model must be a non-empty string"),
    ]


@pytest.mark.parametrize("case", _pure_cases(), ids=lambda c: c[0])
def test_pure_functions_raise_input_errors_naming_the_problem(case):
    _, call, cls, match = case
    with pytest.raises(cls, match=match) as info:
        call()
    assert isinstance(info.value, TLGeometryError)


def test_model_facing_calls_raise_input_errors(tiny_model):
    from tl_geometry import capture, models
    from tl_geometry.io import corpus

    with pytest.raises(InputError, match=r"unknown hook 'blocks\.0\.nope'"):
        capture.validate_hooks(tiny_model, ["blocks.0.nope"])
    with pytest.raises(InputTypeError, match="hook"):
        capture.validate_hooks(tiny_model, lambda name: True)
    with pytest.raises(InputError, match=r"exceeds the model's n_ctx"):
        capture.check_tokens(tiny_model, torch.zeros(1, tiny_model.cfg.n_ctx + 1, dtype=torch.long))
    with pytest.raises(InputError, match=r"unknown corpus source 'nosuchsource'"):
        corpus.texts("nosuchsource")
    with pytest.raises(InputError, match=r"processing must be one of"):
        models.processing_flags("folded")


# ------------------------------------------------------------------------ CLI
def test_cli_input_error_is_exit_2_with_one_line(capsys):
    from tl_geometry.cli import main

    assert main(["capacity"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "tl-geometry capacity: error: give at least one PATH_OR_MODEL, or --published for the paper's table"


def test_cli_turns_any_tl_geometry_error_into_exit_2(monkeypatch, capsys):
    from tl_geometry import cli

    def bad(args):
        raise UnknownNameError("unknown release 'x'; close matches: ['y']\n(see `tl-geometry sae widths`)")

    monkeypatch.setattr("tl_geometry.commands.metrics.run", bad)
    assert cli.main(["metrics"]) == 2
    err = capsys.readouterr().err
    assert (
        err == "tl-geometry metrics: error: unknown release 'x'; close matches: ['y'] (see `tl-geometry sae widths`)\n"
    )


def test_cli_path_errors_are_exit_2(tmp_path, capsys):
    from tl_geometry.cli import main

    assert main(["render", str(tmp_path / "missing.json"), "--out", str(tmp_path / "page")]) == 2
    assert "no such report file" in capsys.readouterr().err


@pytest.mark.parametrize(
    "exc",
    [
        RuntimeError("internal invariant broken"),
        ValueError("a dependency's ValueError"),
        KeyError("a bug's missing key"),
        AssertionError("unreachable"),
    ],
)
def test_cli_lets_other_exceptions_propagate(monkeypatch, capsys, exc):
    """A bug must show its traceback (exit 1 from the interpreter), not pass for a usage error."""
    from tl_geometry import cli

    def boom(args):
        raise exc

    monkeypatch.setattr("tl_geometry.commands.metrics.run", boom)
    with pytest.raises(type(exc)) as info:
        cli.main(["metrics"])
    assert info.value is exc
    assert "error:" not in capsys.readouterr().err


def test_cli_bug_exits_1_with_a_traceback(tmp_path):
    """End to end: the console entry point exits 1 and prints the traceback for a non-library error."""
    import os
    import subprocess
    import sys

    script = tmp_path / "run.py"
    script.write_text(
        "import sys\n"
        "import tl_geometry.commands.metrics as m\n"
        "def boom(args):\n    raise RuntimeError('internal invariant broken')\n"
        "m.run = boom\n"
        "from tl_geometry.cli import main\n"
        "sys.exit(main(['metrics']))\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 1
    assert "Traceback" in proc.stderr and "RuntimeError: internal invariant broken" in proc.stderr
    assert "error: internal" not in proc.stderr
