"""Security checks over the library source (AST, not regex) and plugin isolation.

* no pickle-family deserializers (pickle, cPickle, dill, marshal, shelve, joblib);
* ``torch.load`` only with ``weights_only=True``; ``numpy.load`` never with ``allow_pickle=True``;
  ``yaml.load`` only with a Safe loader; no ``trust_remote_code=True``;
* no ``eval`` / ``exec`` / ``compile`` builtins, no ``shell=True``, no ``os.system`` / ``os.popen``;
* dynamic imports only where a name is validated (CLI commands, plugins, sweep loaders);
* a broken or hostile metric plugin is warned about and skipped, never breaks the host or
  overrides a built-in.
"""

import ast
import warnings
from pathlib import Path

import pytest

import tl_geometry
from tl_geometry import registry

PKG = Path(tl_geometry.__file__).parent
SOURCES = sorted(PKG.rglob("*.py"))
PICKLE_MODULES = {"pickle", "cPickle", "_pickle", "dill", "marshal", "shelve", "joblib", "cloudpickle"}
# files allowed to import a module whose name is computed (each validates the name first)
DYNAMIC_IMPORT_OK = {
    "cli.py",  # sub-commands: commands/ and the families' declared command modules
    "registry/phase.py",  # plugins and the built-in families
    "base/lazy.py",  # a declared "module:function" (a family's figures, reading, checks; the report's display)
    "runs/model_slot.py",  # a user's --loader module:function
    "commands/sweep.py",  # the families' declared command modules (their SWEEPS)
    "commands/__init__.py",
    "__init__.py",  # the lazy package root: module names from its own table
    "runs/reproduction.py",  # the families' declared checks modules
}
"""Files allowed ``import_module`` with a computed name (matched exactly, relative to the package)."""


def _dotted(node) -> str:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return ".".join(reversed(parts))


def _kw(call: ast.Call, name: str):
    for k in call.keywords:
        if k.arg == name:
            return k.value
    return None


def _is_true(node) -> bool:
    return isinstance(node, ast.Constant) and node.value is True


def scan(source: str, filename: str = "<src>") -> list[str]:
    """Problems found in one file's source (``file:line: reason``)."""
    problems = []
    tree = ast.parse(source, filename)
    rel = filename
    for node in ast.walk(tree):
        where = f"{rel}:{getattr(node, 'lineno', '?')}"
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] in PICKLE_MODULES:
                    problems.append(f"{where}: imports {a.name} (pickle-family deserializer)")
        elif isinstance(node, ast.ImportFrom):
            if (node.module or "").split(".")[0] in PICKLE_MODULES:
                problems.append(f"{where}: imports from {node.module} (pickle-family deserializer)")
        elif isinstance(node, ast.Call):
            name = _dotted(node.func)
            if isinstance(node.func, ast.Name) and name in ("eval", "exec", "compile"):
                problems.append(f"{where}: calls {name}()")
            if (
                isinstance(node.func, ast.Name)
                and name == "__import__"
                and node.args
                and not isinstance(node.args[0], ast.Constant)
            ):
                problems.append(f"{where}: __import__ with a computed name")
            if name in ("os.system", "os.popen", "os.execv", "os.execvp", "commands.getoutput"):
                problems.append(f"{where}: calls {name}")
            if _is_true(_kw(node, "shell")):
                problems.append(f"{where}: shell=True")
            if _is_true(_kw(node, "trust_remote_code")):
                problems.append(f"{where}: trust_remote_code=True")
            if name.endswith("torch.load"):
                if not _is_true(_kw(node, "weights_only")):
                    problems.append(f"{where}: torch.load without weights_only=True")
            if name in ("np.load", "numpy.load") and _is_true(_kw(node, "allow_pickle")):
                problems.append(f"{where}: numpy.load(allow_pickle=True)")
            if name in ("yaml.load", "yaml.load_all", "yaml.unsafe_load", "yaml.full_load"):
                loader = _kw(node, "Loader")
                if name != "yaml.load" or loader is None or "Safe" not in _dotted(loader):
                    problems.append(f"{where}: {name} without a SafeLoader")
            if name.endswith("import_module") and node.args and not isinstance(node.args[0], ast.Constant):
                if rel not in DYNAMIC_IMPORT_OK:
                    problems.append(f"{where}: import_module with a computed name")
    return problems


def test_library_source_is_clean():
    assert SOURCES, f"no sources under {PKG}"
    problems = []
    for p in SOURCES:
        problems += scan(p.read_text(encoding="utf-8"), str(p.relative_to(PKG)))
    assert problems == []


@pytest.mark.parametrize(
    "snippet, reason",
    [
        ("import pickle\npickle.load(open('x', 'rb'))", "pickle-family"),
        ("from dill import loads", "pickle-family"),
        ("import torch\ntorch.load('m.pt')", "torch.load without weights_only=True"),
        ("import torch\ntorch.load('m.pt', weights_only=False)", "torch.load without weights_only=True"),
        ("eval(user_string)", "calls eval()"),
        ("exec(code)", "calls exec()"),
        ("import subprocess\nsubprocess.run(cmd, shell=True)", "shell=True"),
        ("import os\nos.system(cmd)", "calls os.system"),
        ("import numpy as np\nnp.load(p, allow_pickle=True)", "allow_pickle"),
        ("import yaml\nyaml.load(text)", "SafeLoader"),
        ("AutoModel.from_pretrained(name, trust_remote_code=True)", "trust_remote_code"),
        ("import importlib\nimportlib.import_module(user)", "computed name"),
        ("__import__(name)", "computed name"),
    ],
)
def test_scanner_catches_each_pattern(snippet, reason):
    """The checker itself works: each forbidden pattern is reported."""
    found = scan(snippet, "x.py")
    assert any(reason in f for f in found), found


@pytest.mark.parametrize(
    "snippet",
    [
        "import torch\ntorch.load('m.pt', weights_only=True)",
        "model.eval()",
        "__import__('tl_geometry.runtime.jobs', fromlist=['job_key'])",
        "import yaml\nyaml.load(t, Loader=yaml.SafeLoader)",
        "import subprocess\nsubprocess.run(['git', 'rev-parse', 'HEAD'])",
    ],
)
def test_scanner_allows_safe_forms(snippet):
    assert scan(snippet, "x.py") == []


class _FakeEP:
    def __init__(self, name, loader):
        self.name, self.value, self.group, self._loader = name, f"fake:{name}", registry.ENTRY_POINT_GROUP, loader

    def load(self):
        return self._loader()


def test_plugin_failures_are_isolated(monkeypatch):
    def broken():
        raise ImportError("plugin dependency missing")

    def hostile():
        def fn(model, tokens=None, *, hooks=None):  # tries to replace a built-in
            raise AssertionError("hostile metric ran")

        registry.register_metric("shape", needs="weights", overwrite=True)(fn)

    def good():
        def fn(model, tokens=None, *, hooks=None):
            return tl_geometry.GeometryReport.from_rows([], model=model)

        registry.register_metric("security_test_plugin_metric", needs="weights")(fn)

    eps = [_FakeEP("broken", lambda: broken()), _FakeEP("hostile", lambda: hostile()), _FakeEP("good", lambda: good())]
    import importlib.metadata as md

    before = registry.get_metric("shape")  # loads the real plugins (if any) first
    monkeypatch.setattr(md, "entry_points", lambda **kw: eps if kw.get("group") == registry.ENTRY_POINT_GROUP else [])
    try:
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            loaded = registry.load_plugins(force=True)
        msgs = [str(x.message) for x in w]
        assert loaded == ["good"]
        assert any("skipping metric plugin 'broken'" in m and "plugin dependency missing" in m for m in msgs)
        assert any("skipping metric plugin 'hostile'" in m and "built-in" in m for m in msgs)
        assert registry.get_metric("shape") is before and registry.get_metric("shape").builtin
        spec = registry.get_metric("security_test_plugin_metric")
        assert not spec.builtin and "good" in spec.source
    finally:
        if "security_test_plugin_metric" in registry._REGISTRY:
            registry.unregister_metric("security_test_plugin_metric")


def test_reports_and_results_are_plain_json(tmp_path):
    """Reading a report or results file never executes content: JSON only, bad input is an error."""
    from tl_geometry.report import GeometryReport
    from tl_geometry.runtime.jobs import NotAResultsFileError, read_records

    p = tmp_path / "evil.json"
    p.write_bytes(b"\x80\x04\x95cos\nsystem\n.")  # a pickle payload
    with pytest.raises(ValueError):
        GeometryReport.from_json(p)
    q = tmp_path / "evil.jsonl"
    q.write_bytes(b"\x80\x04\x95cos\nsystem\n.\n")
    with pytest.raises(NotAResultsFileError, match="not a results file"):  # not ours: refused, not read
        read_records(q)
    q.write_bytes(b'{"key": "a", "params": {}, "status": "ok"}\n\xff\xfe garbage')  # undecodable torn last line
    assert [r["key"] for r in read_records(q)] == ["a"]
