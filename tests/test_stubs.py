"""The typed stub ``lazyflow/_tensor.pyi``: current with the runtime class, complete, and read by a type checker.

Most Tensor methods are attached at import time (``lazyflow/_methods.py``), so the stub is what an editor and a type
checker see. It is written by ``tools/gen_stubs.py``; these tests fail when it is stale or misses an attribute, and
run pyright (the ``test`` extra installs it with its own node runtime, so it works offline) on user code.
"""

import ast
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import lazyflow as lf

ROOT = Path(__file__).resolve().parents[1]
STUB = ROOT / "lazyflow" / "_tensor.pyi"
REGENERATE = "python tools/gen_stubs.py"


def _stub_tree() -> ast.Module:
    return ast.parse(STUB.read_text(), str(STUB))


def _tensor_class() -> ast.ClassDef:
    return next(n for n in _stub_tree().body if isinstance(n, ast.ClassDef) and n.name == "Tensor")


def _members(body) -> dict[str, list[ast.stmt]]:
    out: dict[str, list[ast.stmt]] = {}
    for node in body:
        if isinstance(node, ast.FunctionDef):
            out.setdefault(node.name, []).append(node)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            out.setdefault(node.target.id, []).append(node)
        elif isinstance(node, ast.Assign):
            for t in node.targets:
                out.setdefault(t.id, []).append(node)
    return out


def _signature(fn: ast.FunctionDef) -> str:
    return f"({ast.unparse(fn.args)}) -> {ast.unparse(fn.returns)}"


def test_stub_is_current(tmp_path):
    out = tmp_path / "_tensor.pyi"
    proc = subprocess.run(
        [sys.executable, "tools/gen_stubs.py", "--out", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    assert out.read_text() == STUB.read_text(), f"lazyflow/_tensor.pyi is stale: run `{REGENERATE}` and commit it"


def test_stub_has_every_runtime_attribute():
    machinery = {"__doc__", "__module__", "__slots__", "__weakref__"}
    runtime = set(vars(lf.Tensor)) - machinery
    stub = set(_members(_tensor_class().body))
    assert len([n for n in runtime if not n.startswith("_")]) > 250  # the methods _methods.py attached are there
    assert runtime - stub == set(), f"missing from the stub; run `{REGENERATE}`"
    assert stub - runtime == set(), "the stub declares attributes the runtime class does not have"


def test_stub_has_every_name_lazyflow_imports_from_tensor_module():
    imported = set()
    for path in (ROOT / "lazyflow").rglob("*.py"):
        for names in re.findall(r"from \.+_tensor import ([\w, ]+)", path.read_text()):
            imported.update(n.strip() for n in names.split(","))
    assert {"Tensor", "_make", "_Tracer"} <= imported
    assert imported - set(_members(_stub_tree().body)) - {"Tensor"} == set()


def test_stub_signatures_match_torch():
    members = _members(_tensor_class().body)
    expected = {  # torch's Tensor signatures; builtins are qualified because Tensor.bool/.int/.float shadow them
        "sum": "(self, dim=..., keepdim: builtins.bool=..., *, dtype=...) -> Tensor",
        "mean": "(self, dim=..., keepdim: builtins.bool=..., *, dtype=...) -> Tensor",
        "transpose": "(self, dim0: builtins.int, dim1: builtins.int) -> Tensor",
        "view": "(self, *args, size=..., dtype=...) -> Tensor",  # view(*shape), view(size=), view(dtype)
        "new_zeros": "(self, *args, size=..., dtype=..., device=..., requires_grad: builtins.bool=...) -> Tensor",
        "backward": "(self, gradient=..., retain_graph: builtins.bool | None=..., create_graph: builtins.bool=..., "
        "inputs=...) -> None",
        "add_": "(self, other, *, alpha=...) -> Tensor",
        "exp_": "(self) -> Tensor",  # the generic in-place wrappers take the operands of their out-of-place op
        "lerp_": "(self, end, weight) -> Tensor",
        "__getitem__": "(self, idx) -> Tensor",
        "__setitem__": "(self, idx, value) -> None",
        "__add__": "(self, other) -> Tensor",
        "__rtruediv__": "(self, other) -> Tensor",
        "__eq__": "(self, other) -> Tensor",
        "__new__": "(cls, *args, data=..., size=..., device=..., **unexpected) -> Self",
        "__len__": "(self) -> builtins.int",
        "numpy": "(self, *, force: builtins.bool=...) -> np.ndarray",
    }
    assert {n: _signature(members[n][0]) for n in expected} == expected
    getter, setter = members["requires_grad"]
    assert ast.unparse(getter.decorator_list[0]) == "property"
    assert ast.unparse(setter.decorator_list[0]) == "requires_grad.setter"
    assert [ast.unparse(d) for d in members["shape"][0].decorator_list] == ["property"]
    assert ast.unparse(members["grad"][0].annotation) == "Tensor | None"


def test_stub_is_in_the_package_data():
    assert (ROOT / "lazyflow" / "py.typed").is_file()
    assert re.search(r'lazyflow = \[[^]]*"py\.typed"[^]]*"\*\.pyi"', (ROOT / "pyproject.toml").read_text())


GOOD = """
    import lazyflow as lf
    from typing_extensions import assert_type

    x = lf.randn(3, requires_grad=True)
    x.relu().sum(dim=0).backward()
    assert_type(x.relu().sum(dim=0), lf.Tensor)
    assert_type(x[0], lf.Tensor)
    assert_type(x + 1, lf.Tensor)
    assert_type(2 * x - x / 3, lf.Tensor)
    assert_type(x @ x, lf.Tensor)
    assert_type(x == 1, lf.Tensor)
    assert_type(x.new_zeros(2), lf.Tensor)
    assert_type(x.ndim, int)
    assert_type(x.grad, lf.Tensor | None)
    assert_type(lf.nn.Parameter(lf.zeros(3)), lf.nn.Parameter)
    y = x.detach().clone()
    y.exp_().pow_(2)
    y[0] = 1.0
    y += 1
    for row in lf.randn(2, 3):
        assert_type(row.mean(dim=0, keepdim=True), lf.Tensor)
"""
BAD = """
    import lazyflow as lf

    lf.randn(3).no_such_method()
    lf.randn(3).sum(dim=0, keepdims=True)
"""


def test_pyright_reads_the_stub(tmp_path):
    (tmp_path / "good.py").write_text(textwrap.dedent(GOOD))
    (tmp_path / "bad.py").write_text(textwrap.dedent(BAD))
    # extraPaths: this checkout's lazyflow, ahead of whichever one the environment has installed
    (tmp_path / "pyrightconfig.json").write_text(json.dumps({"extraPaths": [str(ROOT)], "pythonVersion": "3.10"}))
    env = {**os.environ, "PYRIGHT_PYTHON_IGNORE_WARNINGS": "1"}  # no version check against PyPI
    proc = subprocess.run(
        [sys.executable, "-m", "pyright", "--outputjson", "--pythonpath", sys.executable, "good.py", "bad.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert proc.stdout.startswith("{"), f"pyright did not run (install the test extra): {proc.stderr}{proc.stdout}"
    errors = [
        (Path(d["file"]).name, d["range"]["start"]["line"] + 1, d.get("rule"), d["message"])
        for d in json.loads(proc.stdout)["generalDiagnostics"]
        if d["severity"] == "error"
    ]
    assert [e for e in errors if e[0] == "good.py"] == []
    assert [e[:3] for e in errors if e[0] == "bad.py"] == [
        ("bad.py", 4, "reportAttributeAccessIssue"),
        ("bad.py", 5, "reportCallIssue"),
    ], errors
    assert "no_such_method" in errors[0][3] and "keepdims" in errors[1][3]
    # and the snippet pyright accepts is code that runs
    exec(compile(textwrap.dedent(GOOD), "good.py", "exec"), {})
