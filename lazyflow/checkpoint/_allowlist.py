"""What a ``weights_only`` load may resolve and call: exact ``(module, name)`` pairs, argument-checking
constructors, and the types users add with :func:`add_safe_globals`.

Nothing here imports a module by name or walks an attribute chain: each allowed global is the object
written in the table below. Allowed globals are *values*; only the ones in :data:`CALLS` may be called
(by ``REDUCE``), and each of those checks its arguments first -- ``numpy.dtype`` builds plain numeric dtypes
only, the numpy scalar reconstructor takes a numeric dtype and exactly its itemsize of bytes, and so on.
"""

from __future__ import annotations

import builtins
import collections
import re
from collections.abc import Callable, Iterable
from typing import Any, TypeGuard

import numpy as np

from .._core import dtypes as D
from .._core.device import Device
from .._core.errors import CheckpointUnpicklingError

__all__ = [
    "GLOBALS",
    "CALLS",
    "BadArguments",
    "allowed_globals",
    "add_safe_globals",
    "get_safe_globals",
    "clear_safe_globals",
    "user_object",
    "user_global",
    "is_value",
    "numeric_dtype",
    "short",
]

_LF_DTYPE_NAMES = ("bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64")
_NUMPY_SCALARS = (
    np.bool_,
    np.int8,
    np.int16,
    np.int32,
    np.int64,
    np.uint8,
    np.uint16,
    np.uint32,
    np.uint64,
    np.float16,
    np.float32,
    np.float64,
    np.complex64,
    np.complex128,
)
# numpy scalar types of lazyflow dtypes that numpy itself does not define (ml_dtypes' bfloat16)
_EXTRA_SCALARS = tuple(t for t in (D.to_dtype(n).np.type for n in _LF_DTYPE_NAMES) if t not in _NUMPY_SCALARS)
_DTYPE_CODE = re.compile(r"[<>|=]?[A-Za-z]{1,16}[0-9]{0,3}")  # 'f4', '<i8', 'float32': no fields, no shape


class BadArguments(Exception):
    """A constructor of the allowlist was given arguments it does not accept."""


def short(x: Any) -> str:
    """``repr`` of plain values (shortened), the type name of anything else (its repr could run code)."""
    r = repr(x) if type(x) in (tuple, list, str, bytes, int, float, bool, type(None)) else f"<{type(x).__name__}>"
    return r if len(r) <= 120 else r[:117] + "..."


def numeric_dtype(dt: Any) -> TypeGuard[np.dtype]:
    """Whether ``dt`` is a plain numeric numpy dtype (bool, ints, floats, complex, lazyflow's bfloat16)."""
    return (
        isinstance(dt, np.dtype)
        and dt.names is None
        and dt.subdtype is None
        and (dt.kind in "biufc" or dt.type in _EXTRA_SCALARS)
    )


def _is_int(x: Any) -> bool:
    return type(x) is int or type(x) is bool


def _need(ok: bool, what: str, args: tuple) -> None:
    if not ok:
        raise BadArguments(f"{what} expects {_ARGS_DOC[what]}, got the arguments {short(args)}")


def _dtype(*args):
    _need(
        1 <= len(args) <= 3
        and (
            type(args[0]) is str
            and _DTYPE_CODE.fullmatch(args[0]) is not None
            or any(args[0] is t for t in _EXTRA_SCALARS)
        )
        and all(a is False or a is True for a in args[1:])
        and (len(args) < 2 or args[1] is False),
        "numpy.dtype",
        args,
    )
    # copy=True: a BUILD then changes this object, never numpy's singleton. The ignore: pyright keeps the
    # len(args) == 0 branch of _need's argument alive past the call, though _need raised for it.
    dt = np.dtype(args[0], False, True)  # pyright: ignore[reportGeneralTypeIssues]
    _need(numeric_dtype(dt), "numpy.dtype", args)
    return dt


def _scalar(*args):
    _need(
        len(args) == 2 and numeric_dtype(args[0]) and type(args[1]) is bytes and len(args[1]) == args[0].itemsize,
        "numpy scalar",
        args,
    )
    return np.frombuffer(args[1], dtype=args[0])[0]


def _ordered_dict(*args):
    _need(args == (), "collections.OrderedDict", args)
    return collections.OrderedDict()


def _defaultdict(*args):
    _need(
        len(args) == 1 and (args[0] is None or is_value(args[0]) or user_object(args[0])),
        "collections.defaultdict",
        args,
    )
    return collections.defaultdict(args[0])


def _deque(*args):
    _need(
        args == ()
        or (
            len(args) == 2
            and type(args[0]) in (list, tuple)
            and (args[1] is None or type(args[1]) is int and args[1] >= 0)
        ),
        "collections.deque",
        args,
    )
    return collections.deque(*args)


def _bytearray(*args):
    _need(len(args) <= 1 and all(type(a) is bytes for a in args), "builtins.bytearray", args)
    return bytearray(*args)


def _slice(*args):
    _need(1 <= len(args) <= 3 and all(a is None or _is_int(a) for a in args), "builtins.slice", args)
    return slice(*args)


def _range(*args):
    _need(1 <= len(args) <= 3 and all(_is_int(a) for a in args), "builtins.range", args)
    return range(*args)


def _complex(*args):
    _need(len(args) <= 2 and all(_is_int(a) or type(a) is float for a in args), "builtins.complex", args)
    return complex(*args)


def _to_dtype(*args):
    _need(len(args) == 1 and type(args[0]) is str, "lazyflow._core.dtypes.to_dtype", args)
    return D.to_dtype(args[0])


def _device(*args):
    _need(
        1 <= len(args) <= 2 and type(args[0]) is str and (len(args) == 1 or args[1] is None or type(args[1]) is int),
        "lazyflow._core.device.Device",
        args,
    )
    return Device(*args)


_ARGS_DOC = {
    "numpy.dtype": "a plain numeric dtype code ('f4', '<i8', 'bfloat16'...) with align=False",
    "numpy scalar": "a numeric numpy dtype and exactly its itemsize of bytes",
    "collections.OrderedDict": "no arguments (the items follow through SETITEMS)",
    "collections.defaultdict": "an allowlisted default factory or None",
    "collections.deque": "no arguments or (list, maxlen)",
    "builtins.bytearray": "no argument or one bytes object",
    "builtins.slice": "one to three ints or None",
    "builtins.range": "one to three ints",
    "builtins.complex": "up to two ints or floats",
    "lazyflow._core.dtypes.to_dtype": "one dtype name",
    "lazyflow._core.device.Device": "a device type string and an optional index",
}

# (module, name) -> the object a weights_only load pushes for it. Only these names resolve, exactly as listed.
GLOBALS: dict[tuple[str, str], Any] = {
    **{
        ("builtins", n): getattr(builtins, n)
        for n in (
            "set",
            "frozenset",
            "slice",
            "range",
            "complex",
            "bytearray",
            "bytes",
            "int",
            "float",
            "bool",
            "str",
            "tuple",
            "list",
            "dict",
            "Ellipsis",
            "NotImplemented",
        )
    },
    ("collections", "OrderedDict"): collections.OrderedDict,
    ("collections", "defaultdict"): collections.defaultdict,
    ("collections", "deque"): collections.deque,
    ("lazyflow._core.dtypes", "to_dtype"): D.to_dtype,
    ("lazyflow._core.device", "Device"): Device,
    ("numpy", "dtype"): np.dtype,
    ("numpy._core.multiarray", "scalar"): _scalar,  # numpy >= 2 writes this name, numpy 1.x the next one
    ("numpy.core.multiarray", "scalar"): _scalar,
    **{(t.__module__, t.__name__): t for t in _NUMPY_SCALARS + _EXTRA_SCALARS},  # values (dtype=np.float32)
}
_VALUE_IDS = {id(v) for v in GLOBALS.values()}

# what REDUCE may call: id(allowlisted object) -> (the object, a constructor that checks its arguments)
CALLS: dict[int, tuple[Any, Callable]] = {
    id(obj): (obj, fn)
    for obj, fn in (
        (np.dtype, _dtype),
        (_scalar, _scalar),
        (collections.OrderedDict, _ordered_dict),
        (collections.defaultdict, _defaultdict),
        (collections.deque, _deque),
        (builtins.bytearray, _bytearray),
        (builtins.slice, _slice),
        (builtins.range, _range),
        (builtins.complex, _complex),
        (D.to_dtype, _to_dtype),
        (Device, _device),
    )
}

_user_allowed: dict[str, Any] = {}  # "module.qualname" -> object
_user_ids: dict[int, Any] = {}  # id -> object, for identity checks


def is_value(obj: Any) -> bool:
    """Whether ``obj`` is one of the built-in allowlist's objects."""
    return id(obj) in _VALUE_IDS


def user_object(obj: Any) -> bool:
    """Whether ``obj`` (a class or function) was added with :func:`add_safe_globals`."""
    return _user_ids.get(id(obj)) is obj


def user_global(full_name: str) -> Any:
    """The object added under ``module.qualname`` (exactly that string), else None."""
    return _user_allowed.get(full_name)


def allowed_globals() -> list[str]:
    """Every ``module.name`` a ``weights_only`` load resolves: the built-in allowlist, then the added ones."""
    return [f"{m}.{n}" for m, n in GLOBALS] + list(_user_allowed)


def add_safe_globals(safe_globals: Iterable[Any]) -> None:
    """Allow these classes/functions in ``weights_only`` loads (like ``torch.serialization.add_safe_globals``).

    An added class is trusted as pickle trusts it: the checkpoint may call it with any arguments, and its
    ``__setstate__`` (or a ``__dict__`` update) receives any state the checkpoint holds.

    Args:
        safe_globals: classes or functions, or ``(obj, "module.qualname")`` pairs for objects pickled under
            another name.

    Raises:
        CheckpointUnpicklingError: an entry without ``__module__``/``__qualname__``.
    """
    for g in safe_globals:
        if isinstance(g, tuple) and len(g) == 2:
            obj, name = g
        else:
            obj = g
            mod, qual = getattr(g, "__module__", None), getattr(g, "__qualname__", None)
            name = f"{mod}.{qual}" if isinstance(mod, str) and isinstance(qual, str) else None
        if not isinstance(name, str) or "." not in name.strip("."):
            raise CheckpointUnpicklingError(
                f"add_safe_globals expects classes or functions, or (object, 'module.qualname') pairs, got {g!r}"
            )
        _user_allowed[name] = obj
        _user_ids[id(obj)] = obj


def get_safe_globals() -> list:
    """The globals added with :func:`add_safe_globals`."""
    return list(_user_allowed.values())


def clear_safe_globals() -> None:
    """Forget every global added with :func:`add_safe_globals`."""
    _user_allowed.clear()
    _user_ids.clear()
