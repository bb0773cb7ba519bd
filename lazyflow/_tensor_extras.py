"""``lf.frombuffer``, ``lf.thread_safe_generator`` and a few Tensor methods with one obvious meaning for dense
tensors: ``hardshrink``, ``dense_dim``, ``const_data_ptr``, ``module_load``."""

from __future__ import annotations

import numpy as np

from ._core import dtypes as D
from ._core.errors import DTypeError, ValueRangeError
from ._creation import tensor
from ._functional import where
from ._tensor import Tensor

__all__ = ["frombuffer", "thread_safe_generator"]


def frombuffer(buffer, *, dtype, count: int = -1, offset: int = 0, requires_grad: bool = False) -> Tensor:
    """A 1-D tensor of ``dtype`` from an object exposing the buffer protocol (``bytes``, ``bytearray``,
    ``memoryview``, ``array.array``...), reading ``count`` elements (-1: all) after ``offset`` bytes.

    torch's tensor shares the buffer's memory; lazyflow copies it once (its ingress rule: a JAX array is immutable,
    so later writes to the buffer never show in the tensor).

    Raises:
        ValueRangeError: an empty read, an offset past the buffer, a length that is not a multiple of the element
            size, or ``count`` elements past the end (a ValueError, with torch's checks).
        DTypeError: ``dtype`` is not a lazyflow dtype.
    """
    if not isinstance(dtype, D.DType):
        raise DTypeError(f"frombuffer(): dtype must be a lazyflow dtype (lf.float32...), got {dtype!r}")
    view = memoryview(buffer).cast("B")
    length, size = view.nbytes, dtype.np.itemsize
    if length == 0 or count == 0:
        raise ValueRangeError(f"both buffer length ({length}) and count ({count}) must not be 0")
    if not 0 <= offset < length:
        raise ValueRangeError(
            f"offset ({offset} bytes) must be non-negative and no greater than buffer length ({length} bytes) minus 1"
        )
    if count < 0:
        if (length - offset) % size:
            raise ValueRangeError(
                f"buffer length ({length - offset} bytes) after offset ({offset} bytes) must be a multiple of "
                f"element size ({size})"
            )
        count = (length - offset) // size
    if offset + count * size > length:
        raise ValueRangeError(
            f"requested buffer length ({count} * {size} bytes) after offset ({offset} bytes) must not be greater "
            f"than actual buffer length ({length} bytes)"
        )
    data = np.frombuffer(view, dtype=dtype.np, count=count, offset=offset).copy()
    return tensor(data, dtype=dtype, requires_grad=requires_grad)


def thread_safe_generator() -> None:
    """torch's per-thread generator for DataLoader *thread* workers, else None (the default generator). lazyflow's
    DataLoader runs its workers in processes (as torch's default), never in threads, so this is always None."""
    return None


def hardshrink(self: Tensor, lambd: float = 0.5) -> Tensor:
    """``self`` where ``|self| > lambd``, else 0 (NaN stays NaN, as in torch)."""
    return where(self.abs() <= lambd, 0.0, self)


def dense_dim(self: Tensor) -> int:
    """The number of dense dimensions: every dimension (lazyflow's tensors are dense, as torch's strided ones)."""
    return self.ndim


def const_data_ptr(self: Tensor) -> int:
    """The address of the first element (read-only use; as :meth:`Tensor.data_ptr`)."""
    return self.data_ptr()


def module_load(self: Tensor, other: Tensor, assign: bool = False) -> Tensor:
    """What ``load_state_dict`` swaps in for ``self`` given the state dict's ``other`` (torch's default):
    ``other.detach()`` when ``assign``, else ``self.copy_(other).detach()``."""
    if assign:
        return other.detach()
    return self.copy_(other).detach()


METHODS = {
    "module_load": module_load,
    "hardshrink": hardshrink,
    "dense_dim": dense_dim,
    "const_data_ptr": const_data_ptr,
}
