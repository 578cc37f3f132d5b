"""Nothing lost (issue 23): the report swap survives a kill at every step; output files are
checked before any work, never replace an existing file without --force, and are written
atomically; messages about files are words with the path, never "[Errno N]" or a temporary name."""

from __future__ import annotations

import errno
import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from tl_geometry.cli import main
from tl_geometry.io import outdir, outfile
from tl_geometry.render import html
from tl_geometry.report import GeometryReport, Row, atomic_write_text

# ------------------------------------------------------------------ the report swap, killed at every step

OWNED = ("a.png", "b.png", "c.png", "d.png", "e.png")
#: Which figures each report draws (b.png in both, with different bytes).
FIGURES = {"old": ("a.png", "b.png", "c.png"), "new": ("b.png", "d.png"), "third": ("e.png",)}


def _report(tag: str) -> GeometryReport:
    return GeometryReport(rows=(Row("m", None, None, "shape.n_layers", 1.0),), provenance={"tag": tag})


def _fake_render_into(report, folder, *, figures=True, dpi=110):
    """Every file a report writes, deterministic bytes per report (matplotlib is not under test)."""
    tag = report.provenance["tag"]
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    report.to_json(folder / "report.json")
    for name in FIGURES[tag]:
        atomic_write_text(folder / name, f"{tag} figure {name}")
    atomic_write_text(folder / "report.md", f"{tag} markdown")
    atomic_write_text(folder / "index.html", f"{tag} html")
    return folder / "index.html"


@pytest.fixture
def fake_render(monkeypatch):
    monkeypatch.setattr(html, "render_into", _fake_render_into)
    monkeypatch.setattr(html, "figure_files", lambda: OWNED)


def _snapshot(folder: Path) -> dict[str, bytes]:
    """The files directly in ``folder`` (the lock file and sub-folders aside)."""
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file() and p.name != outdir.LOCK_FILE}


def _expected(tmp_path: Path, tag: str) -> dict[str, bytes]:
    ref = tmp_path / f"expected-{tag}"
    ref.mkdir()
    (ref / "notes.txt").write_text("a person's notes, never touched")
    html.write_outputs(_report(tag), ref, force=True)
    return _snapshot(ref)


#: Every call that changes the file system during write_outputs; the child dies before the k-th.
_STEPS = ("replace", "rename", "unlink", "remove", "rmdir", "mkdir", "link", "truncate", "chmod")


def _run_killed_at(k: int, out: Path) -> int:
    """In a forked child: write the new report with --force, dying (os._exit) before the k-th
    file-system change. Returns the child's exit status (0: it finished before step k)."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            count = [0]
            for name in _STEPS:
                real = getattr(os, name)

                def step(*a, _real=real, **kw):
                    count[0] += 1
                    if count[0] == k:
                        os._exit(77)
                    return _real(*a, **kw)

                setattr(os, name, step)
            html.write_outputs(_report("new"), out, force=True)
            os._exit(0)
        except BaseException:
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_report_swap_killed_at_every_step_leaves_the_old_or_the_new_report(tmp_path, fake_render):
    old, new, third = (_expected(tmp_path, t) for t in ("old", "new", "third"))
    assert old != new and set(old) != set(new)  # figures differ in names and in bytes
    pristine = tmp_path / "pristine"
    pristine.mkdir()
    (pristine / "notes.txt").write_text("a person's notes, never touched")
    html.write_outputs(_report("old"), pristine, force=True)
    assert _snapshot(pristine) == old

    outcomes = []
    k = 0
    while True:
        k += 1
        assert k < 500, "write_outputs never finished"
        out = tmp_path / f"run-{k}"
        shutil.copytree(pristine, out)
        code = _run_killed_at(k, out)
        if code == 0:  # finished before the k-th step: every step of the run has been killed once
            assert _snapshot(out) == new
            break
        assert code == 77, f"the child failed at step {k} (exit {code})"
        # right after the kill: the other files as they were; report.json whole, old or new
        now = _snapshot(out)
        assert now["notes.txt"] == old["notes.txt"]
        assert now["report.json"] in (old["report.json"], new["report.json"])
        # the next run into the directory first finishes (or drops) the killed one ...
        _, _, lock = outdir.prepare(out, force=True)
        lock.release()
        after = _snapshot(out)
        assert after in (old, new), f"kill before step {k}: a mix of the old and the new report: {sorted(after)}"
        assert not (out / outdir.WORK_DIR / outdir.MANIFEST).exists()
        outcomes.append("old" if after == old else "new")
        # ... and then writes its own report whole, with nothing left over
        html.write_outputs(_report("third"), out, force=True)
        assert _snapshot(out) == third
        assert sorted(p.name for p in out.iterdir()) == sorted(third)
    n_steps = k - 1
    print(
        f"report swap: killed at each of {n_steps} steps; outcomes {outcomes.count('old')} old, "
        f"{outcomes.count('new')} new"
    )
    assert n_steps >= 10 and "old" in outcomes and "new" in outcomes
    # the commit point is one step: every kill before it gives the old report, every kill after it the new one
    assert outcomes == sorted(outcomes, key=("old", "new").index)


def test_recover_ignores_a_manifest_that_is_not_a_plan_of_ours(tmp_path):
    out = tmp_path / "out"
    work = out / outdir.WORK_DIR
    work.mkdir(parents=True)
    (out / "keep.png").write_text("mine")
    for bad in (
        '{"format": 1, "move": [], "remove": ["../x.png"]}',
        '{"format": 1, "move": [], "remove": ["keep.txt"]}',
        "not json",
        '{"format": 2, "move": [], "remove": []}',
    ):
        (work / outdir.MANIFEST).write_text(bad)
        assert outdir.recover(out) is False
        assert (out / "keep.png").read_text() == "mine"


# ------------------------------------------------------------------ results files: the trial's cases

NOTES = "".join(f"note {i}: buy {i} apples\n" if i % 9 else f"{i}\n" for i in range(126))
OTHER_TOOL = "".join(json.dumps({"ts": i, "event": "login", "user": f"u{i}"}) + "\n" for i in range(30))


@pytest.mark.parametrize(
    "name, text, argv",
    [
        ("notes.txt", NOTES, ["sweep", "toy", "--sizes", "4", "--seeds", "0", "--steps", "2"]),
        ("events.jsonl", OTHER_TOOL, ["sweep", "toy", "--sizes", "4", "--seeds", "0", "--steps", "2"]),
        ("notes.txt", NOTES, ["sweep", "shape", "--dry-run"]),
        ("notes.txt", NOTES, ["sweep", "models", "--models", "smollm2-135m"]),
    ],
)
def test_sweep_refuses_a_file_it_did_not_write_and_leaves_it_byte_identical(
    tmp_path, capsys, monkeypatch, name, text, argv
):
    p = tmp_path / name
    p.write_text(text)
    assert len(NOTES.splitlines()) == 126
    before = p.read_bytes()
    from tl_geometry.families.interaction import toy_superposition

    monkeypatch.setattr(toy_superposition, "run", lambda *a, **k: pytest.fail("work started"))
    assert main(argv + ["--out", str(p)]) == 2
    err = capsys.readouterr().err
    print(err)
    assert str(p) in err and "is not a results file written by tl-geometry" in err and "left unchanged" in err
    assert "torn" not in err and "[Errno" not in err
    assert p.read_bytes() == before


# ------------------------------------------------------------------ output files of every command


def _no_load(monkeypatch):
    """Any model load fails the test: the checks must come first."""
    import tl_geometry as tg

    def boom(*a, **k):
        pytest.fail("the model was loaded before the output was checked")

    monkeypatch.setattr(tg.models, "load", boom)


def _commands(tmp_path: Path, dest: str) -> list[list[str]]:
    """Every command that writes a single file, writing to ``dest``."""
    return [
        ["pga", "--out", dest],
        ["pga", "--figures", dest],
        ["agop", "--out", dest],
        ["sae", "compare", "--model", "smollm2-135m", "--out", dest],
        ["sae", "compare", "--model", "smollm2-135m", "--figure", dest],
        ["sae", "widths", "--config", "none", "--json", dest],
        ["sweep", "toy", "--sizes", "4", "--figure", dest, "--out", str(tmp_path / "r.jsonl")],
        ["sweep", "shape", "--dry-run", "--figure", dest, "--out", str(tmp_path / "r.jsonl")],
        ["sweep", "models", "--models", "m", "--csv", dest, "--out", str(tmp_path / "r.jsonl")],
    ]


def _check_refused(argv, capsys, *must):
    assert main(argv) == 2, argv
    err = capsys.readouterr().err.strip()
    assert "\n" not in err, err
    for m in must:
        assert m in err, (argv, err)
    assert "[Errno" not in err and ".tmp" not in err and "tl-geometry-tmp" not in err, err
    return err


@pytest.fixture
def no_work(monkeypatch):
    _no_load(monkeypatch)
    from tl_geometry.families import sae
    from tl_geometry.families.interaction import toy_superposition

    monkeypatch.setattr(toy_superposition, "run", lambda *a, **k: pytest.fail("work started"))
    monkeypatch.setattr(sae, "widths", lambda *a, **k: pytest.fail("work started"))
    monkeypatch.setattr(sae, "published_host", lambda *a, **k: pytest.fail("work started"))


def test_every_command_refuses_an_existing_file_without_force_before_any_work(tmp_path, capsys, no_work):
    precious = tmp_path / "precious.json"
    for argv in _commands(tmp_path, str(precious)):
        if "--figures" in argv:  # a folder of figures: refused when it holds one of ours
            folder = tmp_path / "figs"
            folder.mkdir(exist_ok=True)
            (folder / html.figure_files()[0]).write_text("an older figure")
            argv = ["pga", "--figures", str(folder)]
            _check_refused(argv, capsys, str(folder), "--force")
            assert (folder / html.figure_files()[0]).read_text() == "an older figure"
            continue
        precious.write_text("precious")
        _check_refused(argv, capsys, str(precious), "already exists", "--force")
        assert precious.read_text() == "precious"


def test_every_command_checks_the_destination_before_any_work(tmp_path, capsys, no_work):
    existing_dir = tmp_path / "existingdir"
    existing_dir.mkdir()
    a_file = tmp_path / "file.txt"
    a_file.write_text("x")
    for argv in _commands(tmp_path, str(existing_dir)):
        if "--figures" in argv:
            continue  # a folder is what --figures wants
        _check_refused(argv, capsys, str(existing_dir), "is a directory")
    for argv in _commands(tmp_path, str(a_file / "out.json")):
        _check_refused(argv, capsys, str(a_file), "not a folder")
    assert sorted(p.name for p in existing_dir.iterdir()) == [] and a_file.read_text() == "x"


def test_an_unwritable_destination_is_refused_before_any_work(tmp_path, capsys, no_work, monkeypatch):
    # os.access and chmod mean nothing to root: make the probe fail as a read-only folder would
    def probe(folder):
        raise PermissionError(errno.EACCES, "Permission denied", str(folder / ".tl-geometry-probe.xyz"))

    monkeypatch.setattr(outfile, "_probe", probe)  # where check_writable and check_out_file look it up
    for argv in _commands(tmp_path, str(tmp_path / "new.json")):
        if "--figures" in argv:
            argv = ["pga", "--figures", str(tmp_path / "figs")]
        _check_refused(argv, capsys, "permission denied")
    _check_refused(["reproduce", "--tiny", "--out", str(tmp_path / "rep")], capsys, "permission denied")
    _check_refused(["render", str(tmp_path / "r.json"), "--out", str(tmp_path / "o")], capsys, "permission denied")


def test_write_file_is_atomic_and_its_errors_name_the_file_not_the_temporary(tmp_path, monkeypatch):
    p = tmp_path / "out.json"
    outdir.write_file(p, "one")
    with pytest.raises(outdir.OutputExistsError, match="already exists; pass --force"):
        outdir.write_file(p, "two")
    assert p.read_text() == "one"
    outdir.write_file(p, "two", force=True)
    assert p.read_text() == "two"
    mode = p.stat().st_mode & 0o777
    from tl_geometry.report import current_umask

    assert mode == 0o666 & ~current_umask()

    real = os.replace

    def full_disk(src, dst, *a, **k):
        raise OSError(errno.ENOSPC, "No space left on device", str(src))

    monkeypatch.setattr(os, "replace", full_disk)
    with pytest.raises(outdir.OutputNotWritableError) as info:
        outdir.write_file(p, "three", force=True)
    monkeypatch.setattr(os, "replace", real)
    msg = str(info.value)
    assert msg == f"cannot write the output file {p}: the disk is full"
    assert p.read_text() == "two" and sorted(q.name for q in tmp_path.iterdir()) == ["out.json"]

    # an exception while drawing into output_file leaves the destination and no temporary file
    with pytest.raises(RuntimeError), outdir.output_file(p, force=True) as tmp:
        tmp.write_text("half")
        raise RuntimeError("drawing failed")
    assert p.read_text() == "two" and sorted(q.name for q in tmp_path.iterdir()) == ["out.json"]


def test_write_files_moves_figures_in_and_refuses_existing_ones(tmp_path):
    folder = tmp_path / "figs"

    def draw(tmp):
        (tmp / "x.png").write_text("x")
        return {"x": tmp / "x.png"}

    assert outdir.write_files(folder, draw) == {"x": folder / "x.png"}
    with pytest.raises(outdir.OutputExistsError):
        outdir.write_files(folder, draw)
    outdir.write_files(folder, draw, force=True)
    assert sorted(p.name for p in folder.iterdir()) == ["x.png"]


# ------------------------------------------------------------------ messages in words


def test_our_os_errors_have_no_errno_prefix(tmp_path):
    out = tmp_path / "o"
    with outdir.OutputLock(out.parent):
        pass
    err = outdir.OutputLockedError(errno.EEXIST, "output directory x is in use")
    assert str(err) == "output directory x is in use" and err.errno == errno.EEXIST
    err = outdir.OutputNotWritableError(errno.EPERM, "cannot write to x")
    assert str(err) == "cannot write to x" and isinstance(err, PermissionError)


def test_the_cli_says_what_happened_to_a_file_in_words(tmp_path, capsys, monkeypatch):
    from tl_geometry.commands import render

    def raising(args):
        raise PermissionError(errno.EPERM, "Operation not permitted", str(tmp_path / "x.json"))

    monkeypatch.setattr(render, "run", raising)
    assert main(["render", "r.json", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert (
        err == f"tl-geometry render: error: {tmp_path / 'x.json'}: the operation is not permitted "
        "(permissions, a read-only or special file system)"
    )


# ------------------------------------------------------------------ schema versions


@pytest.mark.parametrize("version, match", [(999, "schema_version 999, newer"), ("1", "whole number"), (True, "whole")])
def test_render_refuses_an_unknown_schema_version(tmp_path, capsys, version, match):
    rep = _report("old").to_dict()
    rep["schema_version"] = version
    p = tmp_path / "report.json"
    p.write_text(json.dumps(rep))
    out = tmp_path / "html"
    err = _check_refused(["render", str(p), "--out", str(out)], capsys, str(p), match)
    assert "upgrade" in err or version != 999
    assert not out.exists()
    with pytest.raises(ValueError, match=match):
        GeometryReport.from_json(p)
    rep["schema_version"] = 1
    assert GeometryReport.from_dict(rep).provenance == {"tag": "old"}
    del rep["schema_version"]
    assert len(GeometryReport.from_dict(rep).rows) == 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q"]))


def test_reproduce_refuses_a_resume_file_it_did_not_write_fresh_or_not(tmp_path, capsys):
    import tl_geometry as tg
    from tl_geometry.runtime.jobs import NotAResultsFileError

    out = tmp_path / "rep"
    out.mkdir()
    p = out / "reproduce.jsonl"
    p.write_text(OTHER_TOOL)
    for fresh in (False, True):
        with pytest.raises(NotAResultsFileError, match="not a results file written by tl-geometry"):
            tg.reproduce("capacity", size="tiny", out=out, fresh=fresh, progress=False)
    _check_refused(["reproduce", "capacity", "--tiny", "--fresh", "--out", str(out)], capsys, str(p), "left unchanged")
    assert p.read_text() == OTHER_TOOL and sorted(q.name for q in out.iterdir()) == ["reproduce.jsonl"]
    a_file = tmp_path / "f"
    a_file.write_text("x")
    _check_refused(["reproduce", "--tiny", "--out", str(a_file)], capsys, str(a_file), "is a file")
