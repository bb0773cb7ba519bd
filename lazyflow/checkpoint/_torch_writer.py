"""Writing PyTorch's file format (``lf.save(obj, path, format="torch")``) without torch.

The zip layout is torch's own (``archive/data.pkl``, ``archive/data/<key>`` aligned at 64 bytes and stored
uncompressed, ``byteorder``, ``version``, ``.format_version``, ``.storage_alignment``); the pickle is protocol 2,
as ``torch.save`` writes it. Each Tensor becomes ``torch._utils._rebuild_tensor_v2`` over a storage of its own,
a Parameter ``torch._utils._rebuild_parameter``, a numpy array a tensor, a lazyflow dtype/Device/Size torch's
``torch.float32``/``torch.device``/``torch.Size``: ``torch.load(..., weights_only=True)`` reads the result.
"""

from __future__ import annotations

import collections
import io
import pickle
import struct
import zipfile
from typing import IO, Any

import jax
import jax.core
import numpy as np

from .._core import dtypes as D
from .._core.device import Device
from .._core.errors import CheckpointError
from .._core.size import Size
from .._tensor import Tensor
from ..nn.parameter import Parameter

__all__ = ["write_torch", "ALIGN"]

ALIGN = 64
_STORAGE_NAMES = {
    "float32": "FloatStorage",
    "float64": "DoubleStorage",
    "float16": "HalfStorage",
    "bfloat16": "BFloat16Storage",
    "int64": "LongStorage",
    "int32": "IntStorage",
    "int16": "ShortStorage",
    "int8": "CharStorage",
    "uint8": "ByteStorage",
    "bool": "BoolStorage",
    "complex64": "ComplexFloatStorage",
    "complex128": "ComplexDoubleStorage",
    "uint16": "UInt16Storage",
    "uint32": "UInt32Storage",
    "uint64": "UInt64Storage",
}


class _Global:
    """A torch global written by name (``GLOBAL module\\nname``): torch need not be importable here."""

    def __init__(self, module: str, name: str):
        self.module, self.name = module, name

    def __call__(self, *args):  # pickle's save_reduce wants a callable; only its name is ever written
        raise TypeError(f"{self.module}.{self.name} exists in torch only")


_REBUILD = _Global("torch._utils", "_rebuild_tensor_v2")
_REBUILD_PARAM = _Global("torch._utils", "_rebuild_parameter")
_SIZE = _Global("torch", "Size")
_DEVICE = _Global("torch", "device")


class _StorageRef:
    def __init__(self, key: str, name: str, numel: int):
        self.key, self.name, self.numel = key, name, numel


_PyPickler: Any = pickle._Pickler  # the Python pickler (its dispatch table takes types of ours); no stub has it


class _Pickler(_PyPickler):
    dispatch = dict(_PyPickler.dispatch)

    def __init__(self, file: IO[bytes], where: str):
        super().__init__(file, protocol=2)
        self.where = where
        self.records: list[tuple[str, np.ndarray]] = []

    def persistent_id(self, obj):
        if isinstance(obj, _StorageRef):
            return ("storage", _Global("torch", obj.name), obj.key, "cpu", obj.numel)
        return None

    def save_torch_global(self, obj: _Global):
        self.write(pickle.GLOBAL + f"{obj.module}\n{obj.name}\n".encode())
        self.memoize(obj)

    dispatch[_Global] = save_torch_global

    def reducer_override(self, obj):
        if isinstance(obj, Tensor):
            if isinstance(obj, Parameter):
                return _REBUILD_PARAM, (_Tensor(obj), bool(obj.requires_grad), collections.OrderedDict())
            return self._tensor_reduce(obj)
        if isinstance(obj, np.ndarray):
            return self._array_reduce(obj, False, "a numpy array")
        if isinstance(obj, _Tensor):
            return self._tensor_reduce(obj.t)
        if isinstance(obj, Device):
            return _DEVICE, (obj.type,) if obj.index is None else (obj.type, obj.index)
        if isinstance(obj, Size):
            return _SIZE, (tuple(int(x) for x in obj),)
        return NotImplemented

    def _tensor_reduce(self, t: Tensor):
        value = t._value  # the checkpoint layer reads values (as _plan does)
        if isinstance(value, jax.core.Tracer):
            raise CheckpointError(f"{self.where}: cannot save a traced tensor (inside lf.compile / a Graph)")
        return self._array_reduce(np.asarray(jax.device_get(value)), bool(t.requires_grad), "a tensor")

    def _array_reduce(self, arr: np.ndarray, requires_grad: bool, what: str):
        dt = np.dtype(arr.dtype)
        name = "bfloat16" if dt == D.bfloat16.np else dt.newbyteorder("=").name if dt.byteorder != "|" else dt.name
        storage = _STORAGE_NAMES.get(name)
        if storage is None:
            raise CheckpointError(f"{self.where}: {what} of dtype {dt} has no PyTorch storage type")
        arr = np.array(arr, dtype=dt.newbyteorder("<"), order="C", copy=not arr.flags.c_contiguous)
        key = str(len(self.records))
        self.records.append((key, arr))
        stride, acc = [], 1
        for n in reversed(arr.shape):
            stride.append(acc)
            acc *= max(int(n), 1)
        ref = _StorageRef(key, storage, int(arr.size))
        shape = tuple(int(n) for n in arr.shape)
        return _REBUILD, (ref, 0, shape, tuple(reversed(stride)), requires_grad, collections.OrderedDict())


class _Tensor:
    """A Parameter's data, pickled as a plain tensor inside ``_rebuild_parameter``."""

    def __init__(self, t: Tensor):
        self.t = t


def _dtype_reduce(self: _Pickler, obj: D.DType):
    self.save_torch_global(_Global("torch", obj.name))


_Pickler.dispatch[D.DType] = _dtype_reduce


def _aligned_extra(offset: int, name: bytes, size: int) -> bytes:
    """A zip extra field that puts a record's data at a multiple of ALIGN (torch's "FB" padding)."""
    zip64 = 20 if size * 1.05 > zipfile.ZIP64_LIMIT else 0
    pad = -(offset + 30 + len(name) + zip64 + 4) % ALIGN
    return b"FB" + struct.pack("<H", pad) + b"Z" * pad


def write_torch(obj: Any, out: IO[bytes], where: str, archive: str = "archive") -> None:
    """Write ``obj`` to the binary file ``out`` in torch's zip format.

    Raises:
        CheckpointError: a traced tensor, or a dtype torch has no storage for.
    """
    buf = io.BytesIO()
    p = _Pickler(buf, where)
    p.dump(obj)
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as zf:

        def put(name: str, data, aligned: bool = False):
            info = zipfile.ZipInfo(f"{archive}/{name}", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_STORED
            view = memoryview(data).cast("B")
            info.file_size = view.nbytes
            if aligned:
                assert zf.fp is not None  # open for writing
                info.extra = _aligned_extra(zf.fp.tell(), info.filename.encode(), view.nbytes)
            with zf.open(info, "w") as dst:
                dst.write(view)

        put("data.pkl", buf.getvalue())
        put(".format_version", b"1")
        put(".storage_alignment", str(ALIGN).encode())
        put("byteorder", b"little")
        for key, arr in p.records:
            put(f"data/{key}", arr.reshape(-1).view(np.uint8) if arr.size else b"", aligned=True)
        put("version", b"3\n")
