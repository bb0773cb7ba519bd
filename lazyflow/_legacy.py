"""torch's legacy constructors: ``lf.Tensor(...)`` and the typed tensor classes ``lf.FloatTensor``, ``lf.LongTensor``...

``lf.Tensor(data)`` converts data to the default float dtype, ``lf.Tensor(2, 3)`` makes a 2x3 tensor, as
``torch.Tensor`` does; ``lf.FloatTensor`` & co do the same for their dtype on the CPU, and ``isinstance(t,
lf.FloatTensor)`` asks whether ``t`` is a float32 CPU tensor, as in torch. torch leaves the memory of a tensor
built from sizes uninitialised; XLA has no uninitialised buffers, so lazyflow's is zeros (like ``lf.empty``).
"""

from __future__ import annotations

import builtins
from typing import Any

import numpy as np

from ._core import dtypes as D
from ._core.errors import DTypeError, OpError
from ._core.size import Size
from ._creation import tensor, zeros
from ._functional.shape import reshape
from ._tensor import Tensor

__all__ = [
    "legacy_new",
    "tensor_type",
    "TENSOR_TYPES",
    "BFloat16Tensor",
    "BoolTensor",
    "ByteTensor",
    "CharTensor",
    "DoubleTensor",
    "FloatTensor",
    "HalfTensor",
    "IntTensor",
    "LongTensor",
    "ShortTensor",
]

_INTS = (builtins.int, np.integer)


def _is_size(a) -> bool:
    return isinstance(a, _INTS) and not isinstance(a, (builtins.bool, np.bool_))


def legacy_new(
    dtype: D.DType, default_device, args: tuple[Any, ...], data=None, size=None, device=None, what: str = "Tensor"
):
    """The tensor ``lf.Tensor(*args)`` / ``lf.<Type>Tensor(*args)`` builds, of ``dtype``.

    Args:
        dtype: the tensor type's dtype (the default float dtype for ``lf.Tensor``).
        default_device: where it goes when ``device`` is not given (None: lazyflow's default device).
        args: ``()`` (an empty tensor), sizes (``2, 3``), or one data object (nested sequence, numpy array, tensor).
        data, size, device: torch's keyword spellings.
        what: the constructor's name, for messages.
    Raises:
        TypeError: a Python scalar as data (torch: "data must be a sequence"), sizes mixed with data, or both.
        DTypeError: a tensor of another dtype given to a typed constructor.
        OpError: a tensor together with ``device=`` (torch refuses that form too).
    """
    given = [a for a in (data, size) if a is not None]
    if len(given) + (builtins.bool(args)) > 1:
        raise TypeError(
            f"{what}() takes data, sizes or size=, not several of them (got {len(args)} positional, "
            f"data={data is not None}, size={size is not None})"
        )
    where = default_device if device is None else device
    if size is not None:
        return zeros(tuple(size), dtype=dtype, device=where)
    if data is None:
        if not args:
            return zeros(0, dtype=dtype, device=where)
        if len(args) == 1 and isinstance(args[0], Size):  # lf.Tensor(x.shape): that shape, as torch.Size gives
            return zeros(tuple(args[0]), dtype=dtype, device=where)
        if builtins.all(_is_size(a) for a in args):
            return zeros(tuple(builtins.int(a) for a in args), dtype=dtype, device=where)
        if len(args) > 1:
            raise TypeError(
                f"{what}() takes sizes (ints) or one data sequence, got ({', '.join(type(a).__name__ for a in args)})"
            )
        data = next(iter(args))  # exactly one: none returned above, several raised
    if isinstance(data, Tensor):
        if device is not None:
            raise OpError(
                f"{what}(tensor, device=...) is not supported (as in torch); use lf.tensor(data, "
                "device=...) or tensor.to(device)"
            )
        if what != "Tensor" and data.dtype is not dtype:
            raise DTypeError(
                f"{what}(tensor) expects a {dtype.name} tensor, got {data.dtype.name}; use "
                f"tensor.to(lazyflow.{dtype.name})"
            )
        return reshape(data, data.shape)  # torch returns an alias: here a view (never written through; README)
    if isinstance(data, np.generic) or not (isinstance(data, (list, tuple, np.ndarray)) or hasattr(data, "__array__")):
        raise TypeError(
            f"{what}(): data must be a sequence (got {type(data).__name__}); for a 0-d tensor use lf.tensor({data!r})"
        )
    return tensor(data, dtype=dtype, device=where)


class _TensorType(type):
    """The type of ``lf.FloatTensor`` and its siblings (torch's ``torch.tensortype``): calling one builds a CPU tensor
    of its dtype; ``isinstance`` asks a tensor's dtype and device, as torch does (these are not Tensor subclasses)."""

    dtype: D.DType
    is_cuda = False
    is_sparse = False

    def __instancecheck__(cls, obj) -> bool:
        return isinstance(obj, Tensor) and obj.dtype is cls.dtype and obj.device.type == "cpu"

    def __subclasscheck__(cls, sub) -> bool:
        return sub is cls

    def __call__(cls, *args, data=None, size=None, device=None):
        return legacy_new(cls.dtype, "cpu", args, data, size, device, cls.__name__)

    def __repr__(cls) -> str:
        return f"<class 'lazyflow.{cls.__name__}'>"


def _tensor_type(name: str, dtype: D.DType) -> type:
    return _TensorType(
        name,
        (),
        {
            "dtype": dtype,
            "__module__": "lazyflow",
            "__qualname__": name,
            "__doc__": f"torch's legacy ``{name}``: ``{name}(data)`` converts to {dtype.name}, "
            f"``{name}(2, 3)`` gives zeros, on the CPU.",
        },
    )


FloatTensor = _tensor_type("FloatTensor", D.float32)
DoubleTensor = _tensor_type("DoubleTensor", D.float64)
HalfTensor = _tensor_type("HalfTensor", D.float16)
BFloat16Tensor = _tensor_type("BFloat16Tensor", D.bfloat16)
LongTensor = _tensor_type("LongTensor", D.int64)
IntTensor = _tensor_type("IntTensor", D.int32)
ShortTensor = _tensor_type("ShortTensor", D.int16)
CharTensor = _tensor_type("CharTensor", D.int8)
ByteTensor = _tensor_type("ByteTensor", D.uint8)
BoolTensor = _tensor_type("BoolTensor", D.bool_)

TENSOR_TYPES = {
    t.dtype: t
    for t in (
        FloatTensor,
        DoubleTensor,
        HalfTensor,
        BFloat16Tensor,
        LongTensor,
        IntTensor,
        ShortTensor,
        CharTensor,
        ByteTensor,
        BoolTensor,
    )
}
"""dtype -> its legacy tensor type (what ``Tensor.type()`` names)."""


def _parse_type_name(name: str):
    """``"lazyflow.FloatTensor"`` / ``"torch.cuda.LongTensor"`` as ``(dtype, device or None)``."""
    parts = name.split(".")
    if len(parts) in (2, 3) and parts[0] in ("lazyflow", "torch") and (len(parts) == 2 or parts[1] == "cuda"):
        for d, t in TENSOR_TYPES.items():
            if t.__name__ == parts[-1]:
                return d, ("cuda" if len(parts) == 3 else "cpu")
    raise ValueError(
        f"invalid type: {name!r}; expected a tensor type name such as 'lazyflow.FloatTensor' or "
        "'lazyflow.cuda.LongTensor'"
    )


def tensor_type(self: Tensor, dtype=None, non_blocking: bool = False):
    """``t.type()``: the tensor type's name (``'lazyflow.FloatTensor'``, ``'lazyflow.cuda.FloatTensor'`` off the
    CPU), as torch names it; ``t.type(T)``: ``t`` converted to ``T`` -- a tensor type (``lf.DoubleTensor``, or its
    name, which also selects the CPU or CUDA), a dtype, or ``lf.Tensor`` (the default float dtype).

    Raises:
        ValueError: a string that is not a tensor type name (torch: ``t.type('torch.int32')`` raises too).
    """
    if dtype is None:
        dev = self.device.type
        return f"lazyflow.{'' if dev == 'cpu' else dev + '.'}{TENSOR_TYPES[self.dtype].__name__}"
    if isinstance(dtype, str):
        d, dev = _parse_type_name(dtype)
        return self.to(dev).to(d)
    if isinstance(dtype, _TensorType):
        return self.to("cpu").to(dtype.dtype)
    if dtype is Tensor:
        return self.to(D.get_default_dtype())
    if isinstance(dtype, D.DType):
        return self.to(dtype)
    raise ValueError(f"invalid type: {dtype!r}; expected a dtype, a tensor type (lf.FloatTensor...) or its name")
