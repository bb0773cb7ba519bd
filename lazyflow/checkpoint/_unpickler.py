"""Pickling of the metadata: a pickler that moves tensors out of the pickle, an allowlisting unpickler.

Tensors and numpy arrays never enter the pickle: the pickler replaces each one with a persistent id
``("lazyflow.tensor", index)`` (``persistent_id``, as torch does for storages) and the loader hands back the
loaded tensor for it. With ``weights_only=True`` the unpickler resolves only the globals on the allowlist
below (plus those added by :func:`add_safe_globals`); every other global -- ``os.system`` in a malicious
``__reduce__``, or any user class -- raises :class:`CheckpointError` before anything is called.
"""

from __future__ import annotations

import builtins
import io
import pickle
from collections.abc import Callable, Iterable
from typing import Any

from .._core.errors import CheckpointError

__all__ = ["PID_TAG", "dumps", "loads", "add_safe_globals", "get_safe_globals", "clear_safe_globals"]

PID_TAG = "lazyflow.tensor"
PROTOCOL = 5

_BUILTINS = {"set", "frozenset", "slice", "range", "complex", "bytearray", "bytes", "int", "float", "bool",
             "str", "tuple", "list", "dict", "Ellipsis", "NotImplemented"}

# (module, qualname) pairs lazyflow writes itself or that standard containers/numbers pickle into.
_ALLOWED = {
    ("collections", "OrderedDict"),
    ("collections", "defaultdict"),
    ("collections", "deque"),
    ("lazyflow._core.dtypes", "to_dtype"),
    ("lazyflow._core.device", "Device"),
    ("numpy", "dtype"),
    ("numpy.core.multiarray", "scalar"),
    ("numpy._core.multiarray", "scalar"),
    ("_codecs", "encode"),  # protocol-2 pickles of bytes (numpy scalars) go through it; it only encodes text
}
_NUMPY_DTYPE_MODULES = ("numpy.dtypes",)  # numpy's per-dtype classes (Float32DType...) in dtype pickles

_user_allowed: dict[tuple[str, str], Any] = {}


def add_safe_globals(safe_globals: Iterable[Any]) -> None:
    """Allow these classes/functions in ``weights_only`` loads (like ``torch.serialization.add_safe_globals``).

    Args:
        safe_globals: classes or functions, or ``(obj, "module.qualname")`` pairs for objects pickled under
            another name.

    Raises:
        CheckpointError: an entry without ``__module__``/``__qualname__``.
    """
    for g in safe_globals:
        if isinstance(g, tuple):
            obj, name = g
            mod, _, qual = name.rpartition(".")
        else:
            obj = g
            mod, qual = getattr(g, "__module__", None), getattr(g, "__qualname__", None)
        if not mod or not qual:
            raise CheckpointError(f"add_safe_globals expects classes or functions, got {g!r}")
        _user_allowed[(mod, qual)] = obj


def get_safe_globals() -> list:
    """The globals added with :func:`add_safe_globals`."""
    return list(_user_allowed.values())


def clear_safe_globals() -> None:
    """Forget every global added with :func:`add_safe_globals`."""
    _user_allowed.clear()


class _Pickler(pickle.Pickler):
    def __init__(self, file, persistent_id_fn: Callable[[Any], Any]):
        super().__init__(file, protocol=PROTOCOL)
        self._pid = persistent_id_fn

    def persistent_id(self, obj):
        return self._pid(obj)


def dumps(obj: Any, persistent_id: Callable[[Any], Any] = lambda obj: None) -> bytes:
    """Pickle ``obj`` (protocol 5), asking ``persistent_id`` for the id of every object first."""
    buf = io.BytesIO()
    _Pickler(buf, persistent_id).dump(obj)
    return buf.getvalue()


class _Unpickler(pickle.Unpickler):
    def __init__(self, data: bytes, persistent_load: Callable[[Any], Any], weights_only: bool, where: str):
        super().__init__(io.BytesIO(data))
        self._load_pid = persistent_load
        self._weights_only = weights_only
        self._where = where

    def persistent_load(self, pid):
        return self._load_pid(pid)

    def find_class(self, module: str, name: str):
        if not self._weights_only:
            return super().find_class(module, name)
        if module == "builtins" and name in _BUILTINS:
            return getattr(builtins, name)
        if (module, name) in _user_allowed:
            return _user_allowed[(module, name)]
        if (module, name) in _ALLOWED or module in _NUMPY_DTYPE_MODULES:
            return super().find_class(module, name)
        raise CheckpointError(
            f"{self._where}: weights_only load refused the global '{module}.{name}': it is not one of the "
            "types lazyflow allows (containers, numbers, strings, numpy and lazyflow dtypes/devices, "
            "tensors). Unpickling it could run arbitrary code. If you trust where this checkpoint came from, "
            "load it with weights_only=False, or allow the type with "
            "lf.checkpoint.add_safe_globals([...])")


def loads(data: bytes, persistent_load: Callable[[Any], Any] = None, *, weights_only: bool = True,
          where: str = "checkpoint") -> Any:
    """Unpickle ``data``; with ``weights_only`` only allowlisted globals are resolved.

    Raises:
        CheckpointError: a refused global, or a pickle that is malformed.
    """
    def no_pid(pid):
        raise CheckpointError(f"{where}: unexpected persistent id {pid!r} in the metadata")

    try:
        return _Unpickler(data, persistent_load or no_pid, weights_only, where).load()
    except CheckpointError:
        raise
    except Exception as e:
        raise CheckpointError(f"{where}: the metadata could not be unpickled ({type(e).__name__}: {e})") from e

