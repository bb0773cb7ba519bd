"""Batch collation: torch's ``default_collate`` / ``default_convert`` producing lazyflow tensors.

One traversal serves two places. In the main process (``num_workers=0``) leaves become lazyflow tensors
directly. In a worker process leaves become NUMPY arrays (workers never build JAX arrays to ship across
processes), stacked straight into memory handed out by an allocator (a shared-memory slot, see
``_worker``); the main process then turns the numpy leaves into tensors with ``to_lazyflow``.

Numpy batches are stacked into 64-byte-aligned buffers that nothing else references, so handing them to
JAX on CPU does not copy them again.
"""

from __future__ import annotations

import collections.abc
import copy
import re

import jax
import numpy as np

from ... import _functional as F
from ..._core import dtypes as D
from ..._tensor import Tensor, _make

__all__ = ["default_collate", "default_convert"]

_STR_OBJ = re.compile("[SaUO]")
_ERR = "default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; found {}"
_ALIGN = 64


def aligned_empty(shape: tuple, dtype) -> np.ndarray:
    """An uninitialised numpy array whose data starts on a 64-byte boundary."""
    dtype = np.dtype(dtype)
    n = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    raw = np.empty(n + _ALIGN, np.uint8)
    off = (-raw.ctypes.data) % _ALIGN
    return raw[off : off + n].view(dtype).reshape(shape)


def owned_tensor(array: np.ndarray) -> Tensor:
    """A tensor over a numpy array the caller will never touch again (no second copy on CPU)."""
    D.from_jax_dtype(array.dtype).to_jax()  # unsupported dtypes / 64-bit without x64 raise DTypeError
    return _make(jax.device_put(array))


def _tensor_from(array: np.ndarray) -> Tensor:
    """A tensor holding a private copy of ``array``."""
    out = aligned_empty(array.shape, array.dtype)
    np.copyto(out, array)
    return owned_tensor(out)


class GatheredBatch(collections.abc.Sequence):
    """A batch fetched by ``TensorDataset.__getitems__``: one gathered column per tensor.

    It behaves as the list of samples a custom ``collate_fn`` expects; ``default_collate`` returns the
    columns directly (the result torch gives: a list with one stacked tensor per field).
    """

    def __init__(self, columns: list) -> None:
        self.columns = columns

    def __len__(self) -> int:
        return len(self.columns[0]) if self.columns else 0

    def __getitem__(self, i):
        return tuple(c[i] for c in self.columns)


class _Collator:
    """One traversal of torch's collate rules; ``numpy=True`` builds numpy leaves in ``alloc``'d memory."""

    def __init__(self, numpy: bool, alloc=aligned_empty) -> None:
        self.numpy = numpy
        self.alloc = alloc

    def leaf(self, stacked: np.ndarray):
        return stacked if self.numpy else owned_tensor(stacked)

    def stack(self, arrays: list, shape: tuple, dtype) -> np.ndarray:
        out = self.alloc((len(arrays),) + tuple(shape), dtype)
        for i, a in enumerate(arrays):
            out[i] = a
        return out

    def __call__(self, batch):
        if isinstance(batch, GatheredBatch):
            return [self.column(c) for c in batch.columns]
        elem = batch[0]
        if isinstance(elem, Tensor):
            if self.numpy:
                arrays = [np.asarray(t._value) for t in batch]
                return self.stack(arrays, arrays[0].shape, arrays[0].dtype)
            return F.stack(list(batch), 0)
        if isinstance(elem, np.ndarray):
            if _STR_OBJ.search(elem.dtype.str) is not None:
                raise TypeError(_ERR.format(elem.dtype))
            for a in batch:
                if a.shape != elem.shape:
                    raise RuntimeError(
                        f"stack expects each numpy array to be equal size, but got {elem.shape} at "
                        f"entry 0 and {a.shape} at another entry"
                    )
            return self.leaf(self.stack(batch, elem.shape, elem.dtype))
        if isinstance(elem, (np.bool_, np.number)):
            return self.leaf(self.stack(batch, (), elem.dtype))
        if isinstance(elem, float):
            return self.leaf(self.stack(batch, (), np.float64))
        if isinstance(elem, bool):
            return self.leaf(self.stack(batch, (), np.bool_))
        if isinstance(elem, int):
            return self.leaf(self.stack(batch, (), np.int64))
        if isinstance(elem, (str, bytes)):
            return batch
        if isinstance(elem, collections.abc.Mapping):
            out = {key: self([d[key] for d in batch]) for key in elem}
            return _rebuild_mapping(elem, out)
        if isinstance(elem, tuple) and hasattr(elem, "_fields"):
            return type(elem)(*(self(s) for s in zip(*batch)))
        if isinstance(elem, collections.abc.Sequence):
            size = len(elem)
            if any(len(e) != size for e in batch):
                raise RuntimeError("each element in list of batch should be of equal size")
            parts = [self(s) for s in zip(*batch)]
            if isinstance(elem, tuple):
                return parts  # torch returns a list for tuples
            return _rebuild_sequence(elem, parts)
        raise TypeError(_ERR.format(type(elem)))

    def column(self, col):
        if isinstance(col, Tensor):
            if not self.numpy:
                return col
            col = np.asarray(col._value)
        col = np.asarray(col)
        out = self.alloc(col.shape, col.dtype)
        np.copyto(out, col)
        return self.leaf(out)


def _rebuild_mapping(elem, values: dict):
    try:
        if isinstance(elem, collections.abc.MutableMapping):
            clone = copy.copy(elem)
            clone.update(values)
            return clone
        return type(elem)(values)
    except TypeError:
        return values


def _rebuild_sequence(elem, parts: list):
    try:
        if isinstance(elem, collections.abc.MutableSequence):
            clone = copy.copy(elem)
            for i, p in enumerate(parts):
                clone[i] = p
            return clone
        return type(elem)(parts)
    except TypeError:
        return parts


def default_collate(batch):
    """Stack a list of samples into a batch of lazyflow tensors, keeping the samples' structure.

    torch's rules: tensors and numpy arrays are stacked along a new first dimension; Python floats
    become float64, ints int64 and bools bool tensors; strings stay a list; dicts, namedtuples and lists
    are collated field by field (a tuple sample gives a list, as in torch).

    Args:
        batch: a sequence of samples of identical structure.
    Returns:
        The collated batch.
    Raises:
        TypeError: a leaf type that cannot be batched (objects, string arrays...).
        RuntimeError: list samples, or arrays, of unequal sizes.
    >>> default_collate([(np.zeros(3), 1), (np.ones(3), 2)])
    [tensor([[0., 0., 0.], [1., 1., 1.]], dtype=lazyflow.float64), tensor([1, 2])]
    """
    return _Collator(numpy=False)(batch)


def numpy_collate(batch, alloc=aligned_empty):
    """``default_collate`` with numpy leaves written into memory from ``alloc(shape, dtype)``."""
    return _Collator(numpy=True, alloc=alloc)(batch)


def _convert(data, leaf):
    if isinstance(data, Tensor):
        return data
    if isinstance(data, np.ndarray):
        return data if _STR_OBJ.search(data.dtype.str) is not None else leaf(data)
    if isinstance(data, (np.bool_, np.number)):
        return leaf(np.asarray(data))
    if isinstance(data, collections.abc.Mapping):
        return _rebuild_mapping(data, {k: _convert(data[k], leaf) for k in data})
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return type(data)(*(_convert(d, leaf) for d in data))
    if isinstance(data, tuple):
        return [_convert(d, leaf) for d in data]
    if isinstance(data, collections.abc.Sequence) and not isinstance(data, (str, bytes)):
        return _rebuild_sequence(data, [_convert(d, leaf) for d in data])
    return data


def default_convert(data):
    """Convert numpy arrays (and numpy scalars) anywhere in ``data`` into lazyflow tensors (copies).

    Used when automatic batching is off (``batch_size=None``). Other values are left unchanged.

    Args:
        data: a sample.
    Returns:
        The sample with tensors in place of numpy arrays.
    """
    return _convert(data, _tensor_from)


def numpy_convert(data):
    """``default_convert`` for a worker: lazyflow tensors become numpy arrays, the rest is unchanged."""
    if isinstance(data, Tensor):
        return np.asarray(data._value)
    if isinstance(data, collections.abc.Mapping):
        return _rebuild_mapping(data, {k: numpy_convert(data[k]) for k in data})
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return type(data)(*(numpy_convert(d) for d in data))
    if isinstance(data, (list, tuple)):
        return type(data)(numpy_convert(d) for d in data)
    return data


def to_lazyflow(data):
    """Turn the numpy leaves of a worker's batch (private arrays owned by the caller) into tensors."""
    return _convert(data, owned_tensor)
