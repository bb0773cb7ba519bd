"""``lf.frombuffer``, ``lf.thread_safe_generator`` and a few Tensor methods and properties with one obvious meaning
for dense tensors: ``hardshrink``, ``dense_dim``, ``const_data_ptr``, ``module_load``, ``pin_memory``; ``H``, ``mH``,
``itemsize``, ``nbytes``, ``layout``, ``is_cpu``, ``output_nr`` and torch's ``is_<kind>`` flags."""

from __future__ import annotations

import warnings

import numpy as np

from ._core import dtypes as D
from ._core import formats as _formats
from ._core.errors import DeviceError, DTypeError, ShapeError, ValueRangeError
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


def pin_memory(self: Tensor, device=None) -> Tensor:
    """A copy of this CPU tensor for fast transfers to an accelerator. As in torch it needs one: on a machine
    without, it raises as torch's CPU build does. Where there is one, the copy is an ordinary host tensor (JAX
    stages host-to-device copies itself; ``is_pinned()`` stays False).

    Raises:
        DeviceError: no accelerator on this machine, or the tensor is not on the CPU.
    """
    from_type = self.device.type
    if not _formats.has_accelerator():
        raise DeviceError("Cannot access accelerator device when none is available.")
    if from_type != "cpu":
        raise DeviceError(f"cannot pin a {from_type} tensor: only dense CPU tensors can be pinned")
    return self.clone()


def is_pinned(self: Tensor, device=None) -> bool:
    """False: lazyflow never pins host memory itself (see :meth:`pin_memory`)."""
    return False


def _h(self: Tensor) -> Tensor:
    """The conjugate transpose of a matrix (2-D only, as torch's ``Tensor.H``)."""
    if self.ndim != 2:
        raise ShapeError(f"tensor.H is only supported on matrices (2-D tensors). Got {self.ndim}-D tensor.")
    return self.transpose(0, 1).conj()


def _mh(self: Tensor) -> Tensor:
    """The conjugate transpose of the last two dimensions (a matrix or a batch of them)."""
    if self.ndim < 2:
        raise ShapeError(f"tensor.mH is only supported on matrices or batches of matrices. Got {self.ndim}-D tensor.")
    return self.transpose(-2, -1).conj()


def _volatile(self: Tensor) -> bool:
    warnings.warn("volatile was removed (Variable.volatile is always False)", UserWarning, stacklevel=2)
    return False


def _false(self: Tensor) -> bool:
    return False


PROPERTIES = {
    "H": property(_h),
    "mH": property(_mh),
    "itemsize": property(lambda self: self.dtype.itemsize, doc="Bytes per element (``element_size()``)."),
    "nbytes": property(lambda self: self.numel() * self.dtype.itemsize, doc="Bytes of all elements."),
    "layout": property(lambda self: _formats.strided, doc="``lf.strided``: lazyflow's tensors are dense."),
    "is_cpu": property(lambda self: self.device.type == "cpu", doc="Whether the tensor lives on a CPU device."),
    "output_nr": property(
        lambda self: self._oidx if self._node is not None else 0,
        doc="Which output of its ``grad_fn`` this tensor is (0 for a leaf).",
    ),
    "name": property(lambda self: None, doc="None: lazyflow has no named tensors (torch's unnamed tensors say None)."),
    "volatile": property(_volatile, doc="False, with torch's warning (removed in torch 0.4)."),
    # torch's flags for layouts, dtypes and devices lazyflow does not have: always False here
    **{
        n: property(_false, doc="False: not a layout, dtype or device kind lazyflow has.")
        for n in (
            "is_sparse",
            "is_sparse_csr",
            "is_quantized",
            "is_mkldnn",
            "is_nested",
            "is_meta",
            "is_mps",
            "is_xla",
            "is_xpu",
            "is_ipu",
            "is_vulkan",
            "is_maia",
            "is_mtia",
        )
    },
}

METHODS = {
    "pin_memory": pin_memory,
    "is_pinned": is_pinned,
    "module_load": module_load,
    "hardshrink": hardshrink,
    "dense_dim": dense_dim,
    "const_data_ptr": const_data_ptr,
}
