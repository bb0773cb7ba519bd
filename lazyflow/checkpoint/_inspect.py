"""``lf.checkpoint.inspect`` over every format ``lf.load`` reads: key, shape, dtype and size of each saved tensor.

A lazyflow directory lists its metadata file (:func:`._meta.inspect`); a single lazyflow file is unpacked to a
temporary directory (every member's CRC-32 checked, as a load does) and listed the same way. A ``torch.save`` file
is listed from its pickle alone: ``data.pkl`` runs through the same allowlisted unpickler as a load, but storages
become their records' sizes and tensors their descriptions, so no tensor data is read. A ``.safetensors`` file (or
a sharded index) is listed from its header.
"""

from __future__ import annotations

import collections
import math
import os
import shutil
import tempfile
import zipfile
from typing import IO, Any

import numpy as np

from .._core import dtypes as D
from .._core.errors import CheckpointError, CheckpointUnpicklingError
from . import _allowlist as A
from . import _meta, _safetensors, _single_file, _torch_format
from ._formats import detect_format
from ._meta import TensorInfo

__all__ = ["inspect"]


class _Described:
    """A tensor of a torch file, described (its key comes from where it sits in the object)."""

    def __init__(self, shape, dtype: np.dtype, location: str, storage: str, requires_grad: bool, kind: str):
        self.shape, self.dtype, self.location, self.storage = tuple(shape), dtype, location, storage
        self.requires_grad, self.kind = requires_grad, kind


class _TorchMeta(_torch_format._TorchReader):
    """A torch file's reader that reads ``data.pkl`` only (see the module docstring)."""

    def persistent_load(self, pid):
        if not (type(pid) is tuple and len(pid) == 5 and pid[0] == "storage" and type(pid[2]) is str):
            return super().persistent_load(pid)  # raises the load's error for a malformed reference
        _, stype, key, location, numel = pid
        member = f"{self.prefix}data/{key}"
        if not isinstance(stype, _torch_format._StorageType) or member not in self.names:
            return super().persistent_load(pid)
        size = self.zf.getinfo(member).file_size
        if type(numel) is not int or numel < 0 or size != numel * stype.dtype.itemsize:
            raise CheckpointError(
                f"{self.where}: storage '{key}' ({stype.name}) holds {size} bytes, the pickle claims {numel} "
                "elements; the file is damaged"
            )
        return _torch_format._Storage(np.empty(0, np.uint8), stype.dtype, key, str(location))

    def rebuild_tensor(self, storage, offset, size, stride, requires_grad, hooks, metadata=None, *, dtype=None):
        if not (isinstance(storage, _torch_format._Storage) and type(size) in (tuple, _torch_format.Size)):
            raise A.BadArguments(f"torch._utils._rebuild_tensor_v2 expects (storage, offset, size, ...), got {size!r}")
        dt = storage.dtype if dtype is None else dtype
        lf_dtype = dt.name in _torch_format._LF_DTYPES or dt == D.bfloat16.np
        return _Described(
            size, dt, storage.location, storage.key, bool(requires_grad), "tensor" if lf_dtype else "ndarray"
        )

    def rebuild_parameter(self, data, requires_grad, hooks, state=None):
        if not isinstance(data, _Described):
            raise A.BadArguments(f"torch._utils._rebuild_parameter expects a tensor, got {type(data).__name__}")
        data.kind, data.requires_grad = "parameter", bool(requires_grad)
        return data


def _flatten(obj: Any, prefix: str, out: dict, seen: set) -> None:
    """Tensors of nested dicts/lists/tuples under dotted keys (a state dict's keys stay as they are)."""
    if isinstance(obj, _Described):
        first = obj.storage not in seen
        seen.add(obj.storage)
        dtype = D.to_dtype(obj.dtype) if obj.kind != "ndarray" else obj.dtype
        nbytes = math.prod(obj.shape) * obj.dtype.itemsize
        out[prefix] = TensorInfo(
            prefix, obj.shape, dtype, obj.kind, obj.requires_grad, obj.location, None, nbytes,
            "array" if first else "same",
        )  # fmt: skip
    elif isinstance(obj, (dict, collections.OrderedDict)):
        for k, v in obj.items():
            _flatten(v, f"{prefix}.{k}" if prefix else str(k), out, seen)
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            _flatten(v, f"{prefix}.{i}" if prefix else str(i), out, seen)


def _torch(zf: zipfile.ZipFile, where: str) -> dict[str, TensorInfo]:
    try:
        obj = _TorchMeta(zf, where, mmap_path=None, map_location="cpu").load()
    except CheckpointError:
        raise
    except A.BadArguments as e:
        raise CheckpointUnpicklingError(f"{where}: weights_only load refused a call: {e}") from e
    out: dict[str, TensorInfo] = {}
    _flatten(obj, "", out, set())
    return out


def _safetensors_file(path: str, where: str, keys=None) -> dict[str, TensorInfo]:
    head = _safetensors.header(path, where)
    out = {}
    for k, (shape, dt) in head.items():
        lf_dtype = dt.name in _torch_format._LF_DTYPES or dt == D.bfloat16.np
        dtype = D.to_dtype(dt) if lf_dtype else dt
        nbytes = math.prod(shape) * dt.itemsize
        out[k] = TensorInfo(k, shape, dtype, "tensor" if lf_dtype else "ndarray", False, "cpu", None, nbytes, "array")
    return out


def _sharded(index: str, where: str) -> dict[str, TensorInfo]:
    weight_map, shards = _safetensors.read_index(index, where)
    found: dict[str, TensorInfo] = {}
    for shard, keys in shards.items():
        part = _safetensors_file(shard, f"{where} shard '{os.path.basename(shard)}'")
        _safetensors.check_shard(where, shard, keys, weight_map, part)
        found.update(part)
    return {k: found[k] for k in weight_map}


def _single(zf: zipfile.ZipFile, where: str) -> dict[str, TensorInfo]:
    tmp = tempfile.mkdtemp(prefix="lazyflow-inspect-")
    try:
        _single_file._extract(zf, tmp, where)
        try:
            return _meta.inspect(tmp)
        except CheckpointError as e:
            raise type(e)(str(e).replace(tmp, where)) from e
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def inspect(path: str | os.PathLike | IO[bytes]) -> dict[str, TensorInfo]:
    """Every tensor of the checkpoint at ``path``: key, shape, dtype, saved device/sharding.

    Any format :func:`lf.load` reads (:func:`detect_format` names it): a lazyflow directory or single file, a
    ``torch.save`` file (nested containers listed under dotted keys: ``{"model": sd}`` gives ``model.<key>``;
    tensors sharing a storage are listed each, the second and later with ``storage == "same"``), a
    ``.safetensors`` file or a sharded index. Tensor data is not read, except that a single lazyflow file is
    unpacked (and checksummed) first. Dtypes lazyflow lacks (uint16/32/64, float8) are numpy dtypes with
    ``kind == "ndarray"``, as ``lf.load`` returns them.

    Args:
        path: a path, or an open binary file.
    Returns:
        ``{key: TensorInfo}`` in the file's order.
    Raises:
        CheckpointError: nothing there, a damaged file, a format lazyflow does not read.
        CheckpointUnpicklingError: a ``torch.save`` pickle outside torch's weights_only allowlist.

    >>> lf.checkpoint.inspect("resnet18.pth")["fc.weight"].shape
    (1000, 512)
    """
    fmt = detect_format(path)
    if hasattr(path, "read"):
        f: Any = path
        where = "the file object"
        pos = f.tell()
        try:
            if fmt == "safetensors":
                with tempfile.NamedTemporaryFile(suffix=".safetensors") as tmp:
                    tmp.write(f.read())
                    tmp.flush()
                    return _safetensors_file(tmp.name, where)
            with zipfile.ZipFile(f) as zf:
                return _single(zf, where) if fmt == "lazyflow-file" else _torch(zf, where)
        finally:
            f.seek(pos)
    p = os.path.abspath(os.fspath(path))  # type: ignore[arg-type]
    where = f"'{p}'"
    if fmt == "lazyflow":
        return _meta.inspect(p)
    if fmt == "safetensors":
        return _safetensors_file(p, where)
    if fmt == "safetensors-sharded":
        return _sharded(os.path.join(p, _safetensors.INDEX_NAME) if os.path.isdir(p) else p, where)
    with zipfile.ZipFile(p) as zf:
        return _single(zf, where) if fmt == "lazyflow-file" else _torch(zf, where)
