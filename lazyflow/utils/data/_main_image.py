"""DataLoader workers for a script without ``if __name__ == "__main__":``: its definitions, without its top level.

torch's Linux default forks workers, so a script written without a main guard (the style of torch's examples)
works there. lazyflow cannot fork a process that has run JAX: JAX's runtime threads hold locks that a forked
child inherits locked, so the child hangs (or aborts) at its first lazyflow op -- and a Dataset of lazyflow
tensors runs lazyflow ops. The fork server (started before any JAX backend) is safe, but a forkserver/spawn worker
rebuilds ``__main__`` by running the script again, which without a guard means the whole training run.

So the workers get an *image* of the main script instead: its import, function and class statements (executed
in the worker, in file order, from the script's own source, so tracebacks name its lines) and, by value, the
module globals those definitions read (``V = 16``, a vocabulary, a transform pipeline) where they pickle. The
top-level code that *does* things (the training loop, prints, saves) never runs in a worker. A global that
cannot be pickled (an open file, a lock) is replaced by a placeholder that raises :class:`WorkerGlobalError`
naming it and the fix at its first use; a global not read by any definition is not sent at all.

The Dataset, the collate function and ``worker_init_fn`` are sent pickled, and unpickled in the worker only after
the image is installed (classes of the script are pickled by reference to ``__main__``).
"""

from __future__ import annotations

import ast
import contextlib
import importlib
import pickle
import sys
import types
from dataclasses import dataclass, field

from ..._core.errors import LazyflowError
from ._worker import worker_loop

__all__ = ["WorkerGlobalError", "MainImage", "build_image", "hidden_main_path", "worker_loop_from_image"]

_KEPT = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


class WorkerGlobalError(LazyflowError, NameError):
    """A DataLoader worker used a global of an unguarded main script that could not be sent to it."""


@dataclass
class MainImage:
    """What a worker needs to rebuild the main script's definitions."""

    path: str
    source: str
    # per top-level statement kept, in file order: ("code", index into the parsed body) or ("value", name)
    steps: list[tuple[str, object]] = field(default_factory=list)
    values: dict[str, bytes] = field(default_factory=dict)
    modules: dict[str, str] = field(default_factory=dict)  # name -> module imported by name in the worker
    unsent: dict[str, str] = field(default_factory=dict)  # name -> why it could not be pickled


def _names_read(nodes) -> set[str]:
    out: set[str] = set()
    for node in nodes:
        for n in ast.walk(node):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
                out.add(n.id)
            elif isinstance(n, ast.Global):
                out.update(n.names)
    return out


def _bound(node) -> list[str]:
    """The module-level names a top-level statement binds, in order (assignments, loop and ``with`` targets,
    imports and definitions nested in ``if``/``try``/``with``/``for`` blocks; not names local to a def/class)."""
    out: list[str] = []

    def visit(n):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.append(n.name)  # its body is another scope
            return
        if isinstance(n, (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            return
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            out.append(n.id)
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            out.extend((a.asname or a.name).split(".")[0] for a in n.names if a.name != "*")
        for child in ast.iter_child_nodes(n):
            visit(child)

    visit(node)
    return out


def _only_definitions(node) -> bool:
    """A ``try`` block of imports and definitions (``try: import wandb / except ImportError: wandb = None``)."""
    if isinstance(node, _KEPT) or isinstance(node, ast.Pass):
        return True
    if isinstance(node, ast.Assign):  # a constant fallback value
        return isinstance(node.value, ast.Constant)
    if isinstance(node, ast.Try):
        parts = [*node.body, *node.orelse, *node.finalbody, *(s for h in node.handlers for s in h.body)]
        return all(_only_definitions(s) for s in parts)
    return False


def _kept(node) -> bool:
    return isinstance(node, _KEPT) or (isinstance(node, ast.Try) and _only_definitions(node))


def build_image(main: types.ModuleType, source: str, path: str) -> MainImage:
    """The image of ``main`` (the running ``__main__``; ``source`` its file's text)."""
    body = ast.parse(source, path).body
    kept = [node for node in body if _kept(node)]
    defined: set[str] = set()
    for node in kept:
        defined.update(_bound(node))
    wanted = _names_read(kept) - defined
    image = MainImage(path, source)
    placed: set[str] = set()
    g = vars(main)
    for i, node in enumerate(body):
        if _kept(node):
            image.steps.append(("code", i))
            continue
        for name in _bound(node):
            # the value the script holds now, placed where the script first binds it (so a class statement
            # further down that reads it at definition time finds it)
            if name in wanted and name not in placed and name in g:
                placed.add(name)
                value = g[name]
                if isinstance(value, types.ModuleType):  # `import x` under an `if`: imported again by name
                    image.modules[name] = value.__name__
                    image.steps.append(("module", name))
                    continue
                try:
                    image.values[name] = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
                    image.steps.append(("value", name))
                except Exception as e:  # any pickling failure: a placeholder says why
                    image.unsent[name] = f"{type(e).__name__}: {e}"
    return image


class _Unsent:
    """Stands for a global of the main script that could not be pickled; any use raises."""

    __slots__ = ("_name", "_why")

    def __init__(self, name: str, why: str):
        object.__setattr__(self, "_name", name)
        object.__setattr__(self, "_why", why)

    def _fail(self, *args, **kwargs):
        name, why = object.__getattribute__(self, "_name"), object.__getattribute__(self, "_why")
        raise WorkerGlobalError(
            f"DataLoader worker: the main script's global {name!r} could not be sent to the worker ({why}). The "
            'script has no `if __name__ == "__main__":` guard, so workers rebuild only its imports, functions, '
            "classes and the picklable globals they read. Create it inside the Dataset (e.g. in __init__ or "
            "lazily in __getitem__), make it picklable, or put the script's top level under the main guard"
        )

    # every way code commonly uses a value fails loudly (dunder methods are looked up on the type)
    __getattr__ = __setattr__ = __call__ = __getitem__ = __setitem__ = __iter__ = __len__ = __bool__ = _fail
    __contains__ = __enter__ = __exit__ = __int__ = __float__ = __index__ = __str__ = __format__ = _fail
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = __rtruediv__ = _fail
    __matmul__ = __rmatmul__ = __neg__ = __lt__ = __le__ = __gt__ = __ge__ = _fail

    def __repr__(self) -> str:
        return f"<unsent main-script global {object.__getattribute__(self, '_name')!r}>"


def install(image: MainImage) -> types.ModuleType:
    """Rebuild ``__main__`` in this (worker) process from ``image``."""
    body = ast.parse(image.source, image.path).body
    mod = types.ModuleType("__mp_main__")
    mod.__file__ = image.path
    sys.modules["__main__"] = sys.modules["__mp_main__"] = mod
    ns = vars(mod)
    for name, why in image.unsent.items():
        ns[name] = _Unsent(name, why)
    late: list[str] = []
    for kind, what in image.steps:
        if kind == "code":
            node = body[what]  # type: ignore[index]
            exec(compile(ast.Module(body=[node], type_ignores=[]), image.path, "exec"), ns)
        elif kind == "module":
            ns[what] = importlib.import_module(image.modules[what])  # type: ignore[index]
        else:
            try:
                ns[what] = pickle.loads(image.values[what])  # type: ignore[index]
            except Exception:  # e.g. an instance of a class defined further down: retry below
                late.append(what)  # type: ignore[arg-type]
    for name in late:
        try:
            ns[name] = pickle.loads(image.values[name])
        except Exception as e:
            ns[name] = _Unsent(name, f"unpickling failed in the worker: {type(e).__name__}: {e}")
    return mod


@contextlib.contextmanager
def hidden_main_path():
    """While workers start: ``__main__`` shows no file, so multiprocessing does not make each worker run the
    script (the image rebuilds its definitions instead)."""
    main = sys.modules.get("__main__")
    if main is None:
        yield
        return
    d = main.__dict__
    saved = {k: d[k] for k in ("__file__", "__spec__") if k in d}
    d.pop("__file__", None)
    d["__spec__"] = None  # `python -m module`: the module would be run again by name
    try:
        yield
    finally:
        d.update(saved)


def worker_loop_from_image(image: MainImage, payload: bytes, args: tuple) -> None:
    """A worker's entry point: install the image, unpickle the dataset / collate_fn / worker_init_fn, run
    ``worker_loop`` with them at their places in ``args`` (None placeholders there)."""
    install(image)
    dataset, collate_fn, init_fn = pickle.loads(payload)
    a = list(args)
    a[1], a[8], a[11] = dataset, collate_fn, init_fn
    worker_loop(*a)
