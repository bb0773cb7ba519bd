"""lazyflow dtypes: singletons with torch's names, torch's promotion rules."""

from __future__ import annotations

import builtins

import jax.numpy as jnp
import numpy as np

from . import config
from .errors import DTypeError

__all__ = [
    "DType",
    "float16",
    "bfloat16",
    "float32",
    "float64",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "bool_",
    "complex64",
    "complex128",
    "cfloat",
    "cdouble",
    "half",
    "float",
    "double",
    "short",
    "int",
    "long",
    "get_default_dtype",
    "set_default_dtype",
    "to_dtype",
    "from_jax_dtype",
    "promote_types",
    "result_type",
    "default_int",
    "default_complex",
    "to_complex",
    "to_real",
]

_BY_NAME: dict[str, DType] = {}
_BY_NP: dict[np.dtype, DType] = {}


class DType:
    """A tensor element type (``lf.float32`` ...). One object per type: compare with ``is`` or ``==``."""

    __slots__ = ("name", "np", "is_floating_point", "is_signed", "itemsize", "_cat")

    def __init__(self, name: str, np_dtype, cat: builtins.int):
        self.name = name
        self.np = np.dtype(np_dtype)
        self.is_floating_point = cat == 2
        self.is_signed = cat >= 2 or (cat == 1 and self.np.kind == "i")
        self.itemsize = self.np.itemsize
        self._cat = cat  # 0 bool, 1 integer, 2 floating, 3 complex
        _BY_NAME[name] = self
        _BY_NP[self.np] = self

    @property
    def is_complex(self) -> bool:
        return self._cat == 3

    @property
    def is_inexact(self) -> bool:
        """Floating or complex: the dtypes that carry gradients (torch's ``is_floating_point() or is_complex()``)."""
        return self._cat >= 2

    def __repr__(self) -> str:
        return f"lazyflow.{self.name}"

    def __reduce__(self):
        return (to_dtype, (self.name,))

    def to_jax(self):
        if self.itemsize == (16 if self._cat == 3 else 8) and not config.x64_enabled():
            raise DTypeError(
                f"{self} needs JAX's 64-bit mode, which is off in this process (LAZYFLOW_X64=0 or "
                "jax_enable_x64=False); use a 32-bit dtype or enable x64"
            )
        return self.np


float16 = DType("float16", jnp.float16, 2)
bfloat16 = DType("bfloat16", jnp.bfloat16, 2)
float32 = DType("float32", jnp.float32, 2)
float64 = DType("float64", jnp.float64, 2)
uint8 = DType("uint8", jnp.uint8, 1)
int8 = DType("int8", jnp.int8, 1)
int16 = DType("int16", jnp.int16, 1)
int32 = DType("int32", jnp.int32, 1)
int64 = DType("int64", jnp.int64, 1)
bool_ = DType("bool", jnp.bool_, 0)
complex64 = DType("complex64", jnp.complex64, 3)
complex128 = DType("complex128", jnp.complex128, 3)
half, float, double = float16, float32, float64
short, int, long = int16, int32, int64
cfloat, cdouble = complex64, complex128

_ALIASES = {
    "half": float16,
    "float": float32,
    "double": float64,
    "short": int16,
    "int": int32,
    "long": int64,
    "bool": bool_,
    "cfloat": complex64,
    "cdouble": complex128,
}


class _Default:
    """Process-wide, like torch.set_default_dtype (the eager cache keeps one kernel table per default)."""

    dtype = float32


_default = _Default()
_listeners: list = []  # called with the new default dtype (the eager cache keeps one table per default dtype)


def get_default_dtype() -> DType:
    """The dtype of floating tensors created without an explicit dtype (float32 unless changed)."""
    return _default.dtype


def set_default_dtype(d) -> None:
    """Set the default floating dtype (float16, bfloat16, float32 or float64), like torch."""
    d = to_dtype(d)
    if not d.is_floating_point:
        raise DTypeError(f"set_default_dtype expects a floating dtype, got {d}")
    d.to_jax()
    _default.dtype = d
    for fn in _listeners:
        fn(d)


def default_int() -> DType:
    """torch's default integer dtype: int64 (int32 when x64 is off)."""
    return int64 if config.x64_enabled() else int32


def default_complex() -> DType:
    """torch's default complex dtype: complex128 when the default float is float64, else complex64 (JAX has no
    complex32, so a float16/bfloat16 default also gives complex64)."""
    return complex128 if _default.dtype is float64 else complex64


def to_complex(d: DType) -> DType:
    """The complex dtype holding ``d``'s values: float64/complex128 -> complex128, other floats -> complex64."""
    if d._cat == 3:
        return d
    return complex128 if d is float64 else complex64


def to_real(d: DType) -> DType:
    """The real dtype of a complex dtype's parts (complex64 -> float32); other dtypes unchanged."""
    if d is complex64:
        return float32
    return float64 if d is complex128 else d


def to_dtype(d) -> DType:
    """Normalise a dtype given as DType, name, numpy/jax dtype or Python type into a lazyflow DType."""
    if isinstance(d, DType):
        return d
    if isinstance(d, str):
        name = d.removeprefix("torch.").removeprefix("lazyflow.")
        r = _BY_NAME.get(name) or _ALIASES.get(name)
        if r is None:
            raise DTypeError(f"unknown dtype name {d!r}; expected one of {sorted(_BY_NAME)}")
        return r
    if d is builtins.float:
        return get_default_dtype()
    if d is builtins.int:
        return default_int()
    if d is builtins.bool:
        return bool_
    if d is builtins.complex:
        return default_complex()
    try:
        npd = np.dtype(d)
    except TypeError:
        npd = None
    if npd is not None and npd in _BY_NP:
        return _BY_NP[npd]
    raise DTypeError(f"unsupported dtype {d!r}; lazyflow supports {sorted(_BY_NAME)}")


def from_jax_dtype(d) -> DType:
    r = _BY_NP.get(np.dtype(d))
    if r is None:
        raise DTypeError(f"unsupported array dtype {d}; lazyflow supports {sorted(_BY_NAME)}")
    return r


def promote_types(type1: DType, type2: DType) -> DType:
    """torch.promote_types (identical to JAX's lattice on lazyflow's dtypes, checked against torch)."""
    if type1 is type2:
        return type1
    return _BY_NP[np.dtype(jnp.promote_types(type1.np, type2.np))]


def _combine(higher: DType | None, lower: DType | None) -> DType | None:
    # torch's combine_categories (c10 ResultTypeState)
    if higher is None:
        return lower
    if lower is None:
        return higher
    if higher._cat == 3:
        return higher
    if lower._cat == 3:  # a floating higher keeps its precision: float32 tensor * complex128 scalar -> complex64
        return to_complex(higher) if higher.is_floating_point else lower
    if higher.is_floating_point:
        return higher
    if higher is bool_ or lower.is_floating_point:
        return promote_types(higher, lower)
    return higher


def result_type(*items) -> DType:
    """torch.result_type over (dtype, ndim) pairs for tensors and Python scalar types.

    Args:
        items: each either a ``(DType, ndim)`` pair for a tensor, or one of the Python types
            ``bool``, ``int``, ``float``, ``complex`` for a scalar operand.
    """
    dim = zero = wrapped = None
    for it in items:
        if isinstance(it, tuple):
            d, nd = it
            if nd > 0:
                dim = d if dim is None else promote_types(dim, d)
            else:
                zero = d if zero is None else promote_types(zero, d)
        else:
            if it is builtins.float:
                d = get_default_dtype()
            elif it is builtins.bool:
                d = bool_
            elif it is builtins.complex:
                d = default_complex()
            else:
                d = int64 if config.x64_enabled() else int32
            wrapped = d if wrapped is None else promote_types(wrapped, d)
    r = _combine(dim, _combine(zero, wrapped))
    if r is None:
        raise DTypeError("result_type needs at least one operand")
    return r
