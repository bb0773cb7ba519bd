"""``lf.cuda.FloatTensor`` and its siblings: torch's legacy typed constructors for tensors on the GPU.

``lf.cuda.FloatTensor(data)`` / ``(2, 3)`` build a float32 tensor on the current GPU, and ``isinstance(t,
lf.cuda.FloatTensor)`` asks whether ``t`` is a float32 GPU tensor, as in torch. Without a GPU, calling one raises
:class:`lazyflow.NoCudaError` (a TypeError, as torch's CPU build raises); ``isinstance`` answers False.
"""

from __future__ import annotations

from .._core import dtypes as D
from .._legacy import _TensorType, legacy_new
from .._tensor import Tensor
from ._common import NoCudaTypeError, is_available, no_cuda

__all__ = [
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


class _CudaTensorType(_TensorType):
    """The type of ``lf.cuda.FloatTensor`` & co: as ``lf.FloatTensor``'s, for tensors on the GPU."""

    is_cuda = True

    def __instancecheck__(cls, obj) -> bool:
        return isinstance(obj, Tensor) and obj.dtype is cls.dtype and obj.device.type == "cuda"

    def __call__(cls, *args, data=None, size=None, device=None):
        if not is_available():
            raise no_cuda(f"{cls.__name__}() (type lazyflow.cuda.{cls.__name__} not available)", NoCudaTypeError)
        return legacy_new(cls.dtype, "cuda", args, data, size, device, cls.__name__)

    def __repr__(cls) -> str:
        return f"<class 'lazyflow.cuda.{cls.__name__}'>"


def _cuda_type(name: str, dtype: D.DType) -> type:
    return _CudaTensorType(
        name,
        (),
        {
            "dtype": dtype,
            "__module__": "lazyflow.cuda",
            "__qualname__": name,
            "__doc__": f"torch's legacy ``torch.cuda.{name}``: ``{name}(data)`` converts to {dtype.name}, "
            f"``{name}(2, 3)`` gives zeros, on the current GPU.",
        },
    )


FloatTensor = _cuda_type("FloatTensor", D.float32)
DoubleTensor = _cuda_type("DoubleTensor", D.float64)
HalfTensor = _cuda_type("HalfTensor", D.float16)
BFloat16Tensor = _cuda_type("BFloat16Tensor", D.bfloat16)
LongTensor = _cuda_type("LongTensor", D.int64)
IntTensor = _cuda_type("IntTensor", D.int32)
ShortTensor = _cuda_type("ShortTensor", D.int16)
CharTensor = _cuda_type("CharTensor", D.int8)
ByteTensor = _cuda_type("ByteTensor", D.uint8)
BoolTensor = _cuda_type("BoolTensor", D.bool_)
