"""Imports point one way (STYLE.md): a module never imports from a higher layer, and eager and graph never import
each other. Parsed from the source, nested (function-level) imports included."""

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1] / "lazyflow"

# lower number = lower layer; the longest matching prefix decides
LAYERS = {
    "lazyflow._core": 0,
    "lazyflow.ops": 1,
    "lazyflow._tensor": 2, "lazyflow.autograd": 2, "lazyflow._dispatch": 2, "lazyflow._creation": 2,
    "lazyflow._functional": 2, "lazyflow._methods": 2, "lazyflow.amp": 2,
    "lazyflow.eager": 3, "lazyflow.graph.trace": 3, "lazyflow.graph.functionalize": 3, "lazyflow.graph.compile": 3,
    "lazyflow.graph.mesh_config": 3,
    "lazyflow.distributed": 3, "lazyflow.distributed.run": 3,
    "lazyflow.nn": 4, "lazyflow.optim": 4, "lazyflow.utils": 4,
    "lazyflow.graph": 5,  # graph/__init__, module.py (CompiledModule) and nn_graph.py sit above nn/optim
    "lazyflow.checkpoint": 6,
    "lazyflow": 9,  # the package __init__ re-exports everything
}


def _layer(mod: str) -> int:
    best = max((p for p in LAYERS if mod == p or mod.startswith(p + ".")), key=len)
    return LAYERS[best]


def _modname(path: pathlib.Path) -> str:
    rel = path.relative_to(ROOT.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _resolve(name: str, package: str) -> str:
    """``from pkg import x``: x is a submodule if a file for it exists, else a name from pkg itself."""
    rel = pathlib.Path(*name.split(".")[1:])
    return name if (ROOT / rel).with_suffix(".py").exists() or (ROOT / rel).is_dir() else package


def _imports(path: pathlib.Path, mod: str):
    tree = ast.parse(path.read_text())
    pkg = mod if path.name == "__init__.py" else mod.rsplit(".", 1)[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
                names = [target] if node.module else [_resolve(f"{target}.{a.name}", target) for a in node.names]
            else:
                names = [node.module or ""]
            for n in names:
                if n.startswith("lazyflow"):
                    yield n, node.lineno
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("lazyflow"):
                    yield a.name, node.lineno


FILES = sorted(ROOT.rglob("*.py"))


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_imports_point_down(path):
    mod = _modname(path)
    me = _layer(mod)
    bad = []
    for target, line in _imports(path, mod):
        if target.startswith("lazyflow.eager") and mod.startswith("lazyflow.graph"):
            bad.append(f"line {line}: graph imports eager ({target})")
        if target.startswith("lazyflow.graph") and mod.startswith("lazyflow.eager"):
            bad.append(f"line {line}: eager imports graph ({target})")
        if target == "lazyflow" or mod.startswith(target + ".") or target == mod:
            continue  # the package itself / an ancestor package __init__ (checked on its own)
        if _layer(target) > me:
            bad.append(f"line {line}: {mod} (layer {me}) imports {target} (layer {_layer(target)})")
    assert not bad, "\n".join(bad)


def test_every_module_is_classified():
    assert len(FILES) > 20
    for p in FILES:
        _layer(_modname(p))


def test_lazyflow_never_imports_torch():
    offenders = [str(p) for p in FILES if "import torch" in p.read_text() or "from torch" in p.read_text()]
    assert not offenders
