"""jobs.py: the crash-safe JSON-lines results file shared by sweeps (packing, shape, models)."""

import json

import pytest

from tl_geometry.runtime.jobs import ResultsFile, job_key, read_records, run_jobs


def _raw_lines(path):
    return [l for l in open(path, encoding="utf-8").read().split("\n") if l]


def test_job_key_is_order_independent_and_canonical():
    assert job_key({"a": 1, "b": [1, 2]}) == job_key({"b": [1, 2], "a": 1})
    assert job_key({"a": 1}) != job_key({"a": 2})
    assert json.loads(job_key({"b": 1, "a": 2})) == {"a": 2, "b": 1}


def test_append_and_read_back(tmp_path):
    rf = ResultsFile(tmp_path / "sub" / "r.jsonl")  # parent folder is created
    rf.append({"k": 1}, {"value": 0.5})
    rf.append({"k": 2}, {"error": "boom"}, status="error")
    recs = rf.records()
    assert [r["params"] for r in recs] == [{"k": 1}, {"k": 2}]
    assert [r["status"] for r in recs] == ["ok", "error"]
    assert recs[0]["value"] == 0.5
    assert rf.finished_keys() == {job_key({"k": 1})}
    assert rf.finished_keys(include_errors=True) == {job_key({"k": 1}), job_key({"k": 2})}
    assert rf.done({"k": 1}) and not rf.done({"k": 2}) and rf.done({"k": 2}, include_errors=True)
    # a header line, then every record exactly one line
    lines = _raw_lines(rf.path)
    assert len(lines) == 3 and json.loads(lines[0])["tl_geometry_results"] == 1


def test_missing_file_reads_empty(tmp_path):
    assert read_records(tmp_path / "nope.jsonl") == []
    assert ResultsFile(tmp_path / "nope.jsonl").repair() == 0


def test_torn_last_line_is_ignored_repaired_and_not_glued(tmp_path):
    p = tmp_path / "r.jsonl"
    rf = ResultsFile(p)
    rf.append({"k": 1}, {"v": 1})
    with open(p, "a", encoding="utf-8") as f:  # what a SIGKILL mid-write leaves behind
        f.write('{"key": "{\\"k\\":2}", "params": {"k": 2}, "sta')
    assert [r["params"] for r in read_records(p)] == [{"k": 1}]
    before = p.read_bytes()
    assert rf.repair() == 1
    assert p.read_bytes() == before[: before.rindex(b"\n") + 1]  # only the torn line went
    assert rf.repair() == 0
    # an append by another ResultsFile object cuts a torn line first: the new record survives whole
    with open(p, "a", encoding="utf-8") as f:
        f.write('{"key": "{\\"k\\":2}", "par')
    ResultsFile(p).append({"k": 3}, {"v": 3})
    assert [r["params"] for r in read_records(p)] == [{"k": 1}, {"k": 3}]
    assert all(json.loads(l) for l in _raw_lines(p))


def test_bad_status_and_directory_path(tmp_path):
    rf = ResultsFile(tmp_path / "r.jsonl")
    with pytest.raises(ValueError, match="status must be 'ok' or 'error'"):
        rf.append({"k": 1}, {}, status="done")
    with pytest.raises(ValueError, match="is a directory"):
        ResultsFile(tmp_path)


def test_run_jobs_resumes_and_skips_finished(tmp_path):
    p = tmp_path / "r.jsonl"
    calls = []

    def fn(params):
        calls.append(params["i"])
        return {"sq": params["i"] ** 2}

    jobs = [{"i": i} for i in range(4)]
    out = list(run_jobs(jobs[:2], fn, p, progress=False))
    assert [r["sq"] for r in out] == [0, 1]
    out = list(run_jobs(jobs, fn, p, progress=False))
    assert [r["params"]["i"] for r in out] == [2, 3]
    assert calls == [0, 1, 2, 3]  # each job ran exactly once
    assert sorted(r["sq"] for r in read_records(p)) == [0, 1, 4, 9]


def test_run_jobs_errors_recorded_and_retried_on_request(tmp_path):
    p = tmp_path / "r.jsonl"
    fail = {"on": True}

    def fn(params):
        if params["i"] == 1 and fail["on"]:
            raise RuntimeError("bad cell")
        return {"v": params["i"]}

    jobs = [{"i": 0}, {"i": 1}]
    out = list(run_jobs(jobs, fn, p, catch=True, progress=False))
    assert [r["status"] for r in out] == ["ok", "error"]
    assert "RuntimeError: bad cell" in out[1]["error"]
    fail["on"] = False
    assert list(run_jobs(jobs, fn, p, catch=True, progress=False)) == []  # errors not retried
    out = list(run_jobs(jobs, fn, p, catch=True, retry_errors=True, progress=False))
    assert [(r["params"]["i"], r["status"]) for r in out] == [(1, "ok")]


def test_run_jobs_without_catch_writes_nothing_for_the_failed_job(tmp_path):
    p = tmp_path / "r.jsonl"

    def fn(params):
        if params["i"] == 1:
            raise ValueError("no")
        return {}

    with pytest.raises(ValueError, match="no"):
        list(run_jobs([{"i": 0}, {"i": 1}, {"i": 2}], fn, p, progress=False))
    assert [r["params"]["i"] for r in read_records(p)] == [0]


def test_nan_and_inf_values_survive(tmp_path):
    rf = ResultsFile(tmp_path / "r.jsonl")
    rf.append({"k": 1}, {"v": float("nan"), "w": float("inf")})
    (rec,) = rf.records()
    assert rec["v"] != rec["v"] and rec["w"] == float("inf")


def test_run_jobs_without_a_results_file_runs_every_job(tmp_path):
    out = list(run_jobs([{"i": 0}, {"i": 1}], lambda p: {"v": p["i"]}, None, progress=False))
    assert [(r["params"]["i"], r["v"], r["status"]) for r in out] == [(0, 0, "ok"), (1, 1, "ok")]
    assert list(tmp_path.iterdir()) == []


def test_run_jobs_on_error_shapes_the_error_record(tmp_path):
    p = tmp_path / "r.jsonl"

    def fn(params):
        raise RuntimeError("boom")

    out = list(
        run_jobs(
            [{"i": 0}],
            fn,
            p,
            catch=True,
            progress=False,
            on_error=lambda exc: {"error": str(exc), "kind": type(exc).__name__},
        )
    )
    assert (out[0]["error"], out[0]["kind"]) == ("boom", "RuntimeError")
    (rec,) = read_records(p)
    assert rec["status"] == "error" and rec["kind"] == "RuntimeError"


def test_run_jobs_rejects_an_unknown_executor(tmp_path):
    with pytest.raises(ValueError, match="executor must be one of"):
        list(run_jobs([{"i": 0}], lambda p: {}, tmp_path / "r.jsonl", executor="dask", progress=False))
    assert not (tmp_path / "r.jsonl").exists()


def test_every_long_job_uses_run_jobs():
    """One resumable runner: the sweeps and experiments hand their units to jobs.run_jobs instead
    of re-implementing the skip-finished / append-at-once loop."""
    import ast
    from pathlib import Path

    import tl_geometry

    pkg = Path(tl_geometry.__file__).parent
    for mod in (
        "runs/sweeps.py",
        "families/pga/convergence.py",
        "families/capacity/packing.py",
        "runs/reproduction.py",
        "families/interaction/shape_sweep.py",
        "families/interaction/toy_superposition.py",
    ):
        tree = ast.parse((pkg / mod).read_text())
        called = {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
        appends = [
            n
            for n in ast.walk(tree)
            if isinstance(n, ast.Attribute)
            and n.attr == "append"
            and isinstance(n.value, ast.Name)
            and n.value.id == "rf"
        ]
        assert "run_jobs" in called and not appends, mod


# ---------------------------------------------------------------- files this package did not write


def _foreign_jsonl(n: int) -> str:
    return "".join(json.dumps({"id": i, "text": f"event {i}", "ok": True}) + "\n" for i in range(n))


FOREIGN = {
    # a 126-line text file, most lines not JSON (the trial's notes.txt)
    "notes.txt": "".join(f"note {i}: remember {i * 7}\n" if i % 8 else f"{i}\n" for i in range(126)),
    "other-tool.jsonl": _foreign_jsonl(40),  # every line parses, none is a record of ours
    "no-newline.txt": "a single line without its newline",
    "empty.jsonl": "",
    "blank.jsonl": "\n\n  \n",
}


@pytest.mark.parametrize("name", sorted(FOREIGN))
def test_a_file_we_did_not_write_is_refused_and_left_byte_identical(tmp_path, name):
    from tl_geometry.errors import TLGeometryError
    from tl_geometry.runtime.jobs import NotAResultsFileError

    p = tmp_path / name
    p.write_text(FOREIGN[name], encoding="utf-8")
    before = p.read_bytes()
    calls = []
    for action in (
        lambda: ResultsFile(p).repair(),
        lambda: ResultsFile(p).append({"k": 1}, {"v": 1}),
        lambda: ResultsFile(p).finished_keys(),
        lambda: read_records(p),
        lambda: list(run_jobs([{"k": 1}], lambda j: calls.append(j) or {"v": 1}, p, progress=False)),
    ):
        with pytest.raises(NotAResultsFileError) as info:
            action()
        assert isinstance(info.value, TLGeometryError)
        msg = str(info.value)
        assert str(p) in msg and "is not a results file written by tl-geometry" in msg and "left unchanged" in msg
        assert p.read_bytes() == before
    assert calls == []  # refused before any job ran


def test_a_bad_line_in_the_middle_of_our_own_file_is_refused_not_repaired(tmp_path):
    from tl_geometry.runtime.jobs import NotAResultsFileError

    p = tmp_path / "r.jsonl"
    rf = ResultsFile(p)
    rf.append({"k": 1}, {"v": 1})
    with open(p, "a", encoding="utf-8") as f:
        f.write("hand-edited line\n")
        f.write(json.dumps({"key": job_key({"k": 9}), "params": {"k": 9}, "status": "ok"}) + "\n")
    rf2 = ResultsFile(p)
    before = p.read_bytes()
    with pytest.raises(NotAResultsFileError, match=r"line 3, 'hand-edited line', is not JSON"):
        rf2.repair()
    with pytest.raises(NotAResultsFileError, match="line 3"):
        rf2.append({"k": 2}, {"v": 2})
    assert p.read_bytes() == before


def test_a_newer_format_is_refused(tmp_path):
    from tl_geometry.runtime.jobs import NotAResultsFileError

    p = tmp_path / "r.jsonl"
    p.write_text('{"tl_geometry_results": 2}\n')
    with pytest.raises(NotAResultsFileError, match="its format is 2; this tl-geometry reads format 1"):
        read_records(p)


def test_a_file_from_before_the_header_is_still_read_resumed_and_repaired(tmp_path):
    """Files written before the header existed: every line a record (key, params, status)."""
    p = tmp_path / "old.jsonl"
    old = [
        {"key": job_key({"k": 1}), "params": {"k": 1}, "status": "ok", "v": 1},
        {"key": job_key({"k": 2}), "params": {"k": 2}, "status": "error", "error": "boom"},
    ]
    p.write_text("".join(json.dumps(r) + "\n" for r in old) + '{"key": "{\\"k\\":3}", "pa')
    assert [r["params"] for r in read_records(p)] == [{"k": 1}, {"k": 2}]
    ran = [r["params"] for r in run_jobs([{"k": 1}, {"k": 2}, {"k": 3}], dict, p, progress=False, retry_errors=True)]
    assert ran == [{"k": 2}, {"k": 3}]
    lines = _raw_lines(p)
    assert [json.loads(l) for l in lines[:2]] == old  # the old lines kept as they were, no header added
    assert [json.loads(l)["params"] for l in lines[2:]] == [{"k": 2}, {"k": 3}]


def test_the_file_is_created_with_its_header_and_never_replaces_one_made_meanwhile(tmp_path, monkeypatch):
    from tl_geometry.io import outdir, outfile

    p = tmp_path / "r.jsonl"
    rf = ResultsFile(p)
    real = outfile._install

    def racing(tmp, path, **kw):  # another process creates the file between our check and our write
        path.write_text("someone else's\n")
        return real(tmp, path, **kw)

    monkeypatch.setattr(outfile, "_install", racing)  # output_file looks it up in its own module
    with pytest.raises(outdir.OutputExistsError, match="already exists"):
        rf.append({"k": 1}, {"v": 1})
    assert p.read_text() == "someone else's\n"
    assert [q.name for q in tmp_path.iterdir()] == ["r.jsonl"]  # no temporary file left


def test_a_results_file_in_use_by_another_runner_is_refused_before_any_work(tmp_path):
    """Two sweeps on one results file: the second is refused (the first's jobs run once, its
    records are not interleaved with another's); when the first ends, a rerun resumes."""
    from tl_geometry.runtime.jobs import ResultsFileInUseError, lock_path

    path = tmp_path / "r.jsonl"
    ran = []

    def fn(p):
        ran.append(p["i"])
        return {"v": p["i"]}

    first = run_jobs([{"i": i} for i in range(4)], fn, path, progress=False)
    next(first)  # the first runner holds the file
    assert lock_path(path).exists()
    with pytest.raises(
        ResultsFileInUseError, match=r"results file .*r\.jsonl is in use by another tl-geometry run \(pid"
    ):
        list(run_jobs([{"i": i} for i in range(4)], fn, path, progress=False))
    assert ran == [0]  # the second did no work
    rest = list(first)
    assert [r["params"]["i"] for r in rest] == [1, 2, 3] and ran == [0, 1, 2, 3]
    assert not lock_path(path).exists()  # released, nothing left behind
    assert len(read_records(path)) == 4
    assert list(run_jobs([{"i": i} for i in range(4)], fn, path, progress=False)) == []  # resumed: all done


def test_a_second_sweep_on_a_busy_results_file_exits_2_with_one_line(tmp_path, capsys):
    from tl_geometry.cli import main
    from tl_geometry.runtime.jobs import ResultsFileLock

    out = tmp_path / "r.jsonl"
    with ResultsFileLock(out):
        rc = main(["sweep", "models", "--models", "a", "--metrics", "shape", "--out", str(out)])
    err = capsys.readouterr().err
    assert rc == 2 and "is in use by another tl-geometry run" in err and len(err.strip().splitlines()) == 1
    assert not out.exists()
