"""Write ``lazyflow/_tensor.pyi``: the Tensor class as the runtime has it after ``import lazyflow``.

``lazyflow/_methods.py`` attaches most of Tensor's methods with ``setattr`` (each op is written once, as a
function), so an editor or a type checker reading ``_tensor.py`` sees only its class body. This script reads the
finished class instead and writes every attribute with the signature of the function behind it
(``inspect.signature``), plus the module-level names the rest of lazyflow imports from ``_tensor``.
``tests/test_stubs.py`` fails when the committed stub is stale.

    python tools/gen_stubs.py              # rewrite lazyflow/_tensor.pyi
    python tools/gen_stubs.py --out FILE   # write elsewhere
"""

from __future__ import annotations

import argparse
import ast
import builtins
import importlib
import inspect
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the lazyflow of this checkout, not whichever one is installed

import lazyflow
from lazyflow import _tensor

COMMAND = "python tools/gen_stubs.py"
STUB = ROOT / "lazyflow" / "_tensor.pyi"
Tensor = lazyflow.Tensor

# class machinery, not API
_SKIP = {"__dict__", "__doc__", "__module__", "__qualname__", "__slots__", "__weakref__"}
# the __slots__ carry no annotations at runtime; the private ones are read across lazyflow
_SLOTS = {
    "grad": "Tensor | None",
    "_meta": "Any",
    "_node": "Any",
    "_oidx": "int",
    "_peers": "list[Any] | None",
    "_retain": "bool",
    "_rg": "bool",
    "_value": "Any",
    "_version": "int",
}
# return types of the attached functions that carry no return annotation (all else falls back to Any)
_BINARY = "add sub mul truediv floordiv mod pow matmul and or xor lshift rshift".split()
_OPERATORS = {f"__{p}{n}__" for n in _BINARY for p in ("", "r", "i")} | {
    f"__{n}__" for n in "eq ne lt le gt ge neg pos abs invert".split()
}
_RETURNS = {
    "__array__": "np.ndarray",
    "__deepcopy__": "Tensor",
    "__hash__": "int",
    "__iter__": "Iterator[Tensor]",
    "__new__": "Self",
    "__reduce__": "tuple[Any, ...]",
    # module level
    "_concrete": "None",
    "_make": "Tensor",
    "_alias": "Tensor",
    "_publish": "None",
    "_leave": "None",
    "_meta_of": "tuple[tuple[int, ...], D.DType, int]",
    "_to_device": "Tensor",
}
# where the names in the fixed types above come from: stub name -> (module, member or None for the module)
_STUB_NAMES = {
    "Any": ("typing", "Any"),
    "D": ("lazyflow._core.dtypes", None),
    "Iterator": ("collections.abc", "Iterator"),
    "Self": ("typing_extensions", "Self"),
    "np": ("numpy", None),
}


def _section(module: str) -> int:
    """isort's section of an import: 0 standard library, 1 third party, 2 lazyflow."""
    top = module.split(".")[0]
    return 0 if top in sys.stdlib_module_names else 2 if top == "lazyflow" else 1


class _Text:
    """Source text that ``inspect.Signature`` prints as it is (an annotation, or ``...`` for a default)."""

    def __init__(self, text: str):
        self.text = text

    def __repr__(self) -> str:
        return self.text


class _Renderer:
    """Renders annotations as stub text and collects the imports they need."""

    def __init__(self):
        self.shadowed: frozenset[str] = frozenset()  # names the class body being written rebinds (Tensor.bool...)
        self.bound: dict[str, tuple[str, str | None]] = {}  # stub name -> (module, member); one meaning per name

    def annotation(self, text: str, namespace: dict | None = None) -> str:
        """``text`` with its names bound to imports: those of ``namespace`` (a function's globals), else the fixed
        ``_STUB_NAMES``."""
        tree = ast.parse(text, mode="eval")
        for node in ast.walk(tree):
            if isinstance(node, ast.Name):
                self._bind(node, namespace or {})
        return ast.unparse(tree)

    def _bind(self, node: ast.Name, namespace: dict) -> None:
        name = node.id
        if name in ("Tensor", "None"):
            return
        if hasattr(builtins, name) and name not in namespace:
            if name in self.shadowed:  # mypy reads a bare `bool` inside the class as the method Tensor.bool
                self.bind("builtins", ("builtins", None))
                node.id = f"builtins.{name}"
            return
        if name in namespace:
            obj = namespace[name]
            where = (obj.__name__, None) if inspect.ismodule(obj) else (obj.__module__, obj.__qualname__)
        elif name in _STUB_NAMES:
            where = _STUB_NAMES[name]
        else:
            raise NameError(f"annotation name {name!r} is neither a builtin nor bound where the function is defined")
        self.bind(name, where)

    def bind(self, name: str, where: tuple[str, str | None]) -> None:
        """Import ``where`` (module, member) under ``name``."""
        if self.bound.setdefault(name, where) != where:
            raise NameError(f"stub name {name!r} means {where} in one place and {self.bound[name]} in another")

    def imports(self) -> list[str]:
        """The import block, in ruff's isort order: stdlib, third party, lazyflow; `import` before `from`."""
        plain, members = set(), {}
        for name, (module, member) in self.bound.items():
            if member is None:
                plain.add(f"import {module}" + (f" as {name}" if name != module else ""))
            else:
                members.setdefault(module, []).append(member + (f" as {name}" if name != member else ""))
        lines = []
        for section in range(3):
            group = sorted(x for x in plain if _section(x.split()[1]) == section)
            group += [
                f"from {m} import {', '.join(sorted(v))}" for m, v in sorted(members.items()) if _section(m) == section
            ]
            lines += [*group, ""] if group else []
        return lines

    def signature(self, fn, name: str, *, method: bool, returns: str = "Any") -> tuple[list[str], str]:
        """The parameter texts and the return text of ``fn`` (its first parameter renamed ``self`` for a method);
        ``returns`` stands in for a missing return annotation."""
        sig = inspect.signature(fn)
        namespace = getattr(fn, "__globals__", {})

        def ann(a):
            if a is inspect.Parameter.empty:
                return a
            if not isinstance(a, str):
                raise TypeError(f"{fn.__qualname__}: annotations must be strings (from __future__ import annotations)")
            return _Text(self.annotation(a, namespace))

        params = []
        for i, p in enumerate(sig.parameters.values()):
            if method and i == 0:
                p = p.replace(name="cls" if name == "__new__" else "self", annotation=p.empty)
            default = p.default if p.default is p.empty else _Text("...")
            params.append(p.replace(annotation=ann(p.annotation), default=default))
        ret = sig.return_annotation
        if ret is sig.empty:
            return _param_texts(params), self.annotation(_RETURNS.get(name, returns))
        return _param_texts(params), ann(ret).text


def _param_texts(params: list[inspect.Parameter]) -> list[str]:
    """``str(inspect.Signature)``'s parameter list, as separate items (``/`` and ``*`` markers included)."""
    out, pos_only, kw_marker = [], False, True
    for p in params:
        if p.kind is p.POSITIONAL_ONLY:
            pos_only = True
        elif pos_only:
            out.append("/")
            pos_only = False
        if p.kind is p.VAR_POSITIONAL:
            kw_marker = False
        elif p.kind is p.KEYWORD_ONLY and kw_marker:
            out.append("*")
            kw_marker = False
        out.append(str(p))
    return out + (["/"] if pos_only else [])


def _def(name: str, params: list[str], ret: str, indent: str = "") -> list[str]:
    """A stub ``def`` laid out as ``ruff format`` lays it out (one line, else the parameters on their own lines)."""
    line = f"{indent}def {name}({', '.join(params)}) -> {ret}: ..."
    if len(line) <= 120:
        return [line]
    inner = indent + "    "
    if len(inner + ", ".join(params)) <= 120:
        return [f"{indent}def {name}(", inner + ", ".join(params), f"{indent}) -> {ret}: ..."]
    return [f"{indent}def {name}(", *(f"{inner}{p}," for p in params), f"{indent}) -> {ret}: ..."]


def _in_place_base(name: str, fn):
    """The out-of-place method whose signature the generic in-place wrapper ``X_(self, *args)`` forwards to."""
    params = list(inspect.signature(fn).parameters.values())
    base = vars(Tensor).get(name[:-1])
    if not (name.endswith("_") and len(params) == 2 and params[1].kind is params[1].VAR_POSITIONAL and base):
        return None
    base_params = inspect.signature(base).parameters.values()
    if any(p.default is not p.empty or p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in base_params):
        return None  # the base takes more than the operands the wrapper passes on: keep `*args`
    return base


def _class_lines(r: _Renderer) -> list[str]:
    lines = ["class Tensor:"]
    for name, attr in sorted(vars(Tensor).items()):
        if name in _SKIP:
            continue
        if isinstance(attr, property):
            params, ret = r.signature(attr.fget, name, method=True)
            lines += ["    @property", *_def(name, params, ret, "    ")]
            if attr.fset is not None:
                params, _ = r.signature(attr.fset, name, method=True)
                lines += [f"    @{name}.setter", *_def(name, params, "None", "    ")]
        elif name == "__new__":  # a staticmethod at runtime, implicitly static in a stub
            lines += _def(name, *r.signature(attr.__func__, name, method=True), "    ")
        elif inspect.isfunction(attr):
            fn = _in_place_base(name, attr) or attr
            params, ret = r.signature(fn, name, method=True, returns="Tensor" if name in _OPERATORS else "Any")
            lines += _def(name, params, ret, "    ")
            if name in ("__eq__", "__ne__"):  # typeshed's object returns bool here; Tensor's elementwise ones do not
                lines[-1] += "  # type: ignore[override]"
        elif name == "__hash__" and attr is object.__hash__:  # identity hash, the C slot itself
            lines += _def(name, ["self"], "int", "    ")
        elif name in _SLOTS:
            lines.append(f"    {name}: {r.annotation(_SLOTS[name])}")
        elif type(attr) in (int, float, str, bool):
            lines.append(f"    {name}: {r.annotation(type(attr).__name__)}")
        else:
            raise TypeError(f"Tensor.{name}: no stub rule for a {type(attr).__name__}; add one to {COMMAND}")
    return lines


def _imported_from_tensor() -> set[str]:
    """Every name a lazyflow module imports from ``lazyflow._tensor``, plus its ``__all__``."""
    names = set(_tensor.__all__)
    for path in (ROOT / "lazyflow").rglob("*.py"):
        package = list(path.relative_to(ROOT).parent.parts)
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.module:
                base = package[: len(package) - node.level + 1] if node.level else []
                if base + node.module.split(".") == ["lazyflow", "_tensor"]:
                    names.update(a.name for a in node.names)
    return names


def _module_lines(r: _Renderer) -> list[str]:
    assigns = {
        t.id: node.value
        for node in ast.parse(Path(_tensor.__file__).read_text()).body
        if isinstance(node, ast.Assign)
        for t in node.targets
        if isinstance(t, ast.Name)
    }
    aliases, defs = [], []
    for name in sorted(_imported_from_tensor() - {"Tensor"}):
        obj = getattr(_tensor, name)
        if inspect.isfunction(obj) and obj.__module__ == _tensor.__name__:
            defs += _def(name, *r.signature(obj, name, method=False))
        elif isinstance(assigns.get(name), ast.Attribute):  # `_Tracer = jax.core.Tracer`: import Tracer, alias it
            owner, member = ast.unparse(assigns[name].value), assigns[name].attr
            root = owner.split(".")[0]
            module = vars(_tensor)[root].__name__ + owner[len(root) :]
            if getattr(importlib.import_module(module), member) is not obj:
                raise TypeError(f"_tensor.{name}: {module}.{member} is not the object the runtime has")
            r.bind(member, (module, member))
            aliases.append(f"{name} = {member}")
        else:
            raise TypeError(f"_tensor.{name}: neither a function defined there nor a module-level assignment")
    exported = ", ".join(f'"{n}"' for n in sorted(_tensor.__all__))
    return [f"__all__ = [{exported}]", "", *aliases, "", *defs]


def render() -> str:
    r = _Renderer()
    body = _module_lines(r)
    r.shadowed = frozenset(vars(Tensor))
    body += ["", *_class_lines(r)]
    header = [
        f"# Generated by `{COMMAND}` from the runtime Tensor class after `import lazyflow`;",
        "# do not edit (tests/test_stubs.py fails when this file is stale).",
        "",
    ]
    return "\n".join([*header, *r.imports(), *body]) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=STUB, help=f"where to write (default: {STUB.relative_to(ROOT)})")
    args = parser.parse_args()
    args.out.write_text(render())


if __name__ == "__main__":
    main()
