"""safetensors files through the ``safetensors`` package's numpy API (the optional ``safetensors`` extra).

``lf.load("x.safetensors")`` returns ``{key: Tensor}``; a sharded checkpoint (``model.safetensors.index.json``
with its ``weight_map``, the layout model hubs use) loads from the index file or its directory.
``lf.save(state_dict, "x.safetensors", metadata={...})`` writes one (bfloat16 through ml_dtypes, which numpy
lacks and jax ships). The package parses and validates the files; when it refuses one, lazyflow re-reads the
header only to name the key at fault in its :class:`CheckpointError`.
"""

from __future__ import annotations

import json
import math
import os
import struct
from collections.abc import Mapping
from typing import IO, Any

import jax
import ml_dtypes
import numpy as np

from .._core import dtypes as D
from .._core.errors import CheckpointError, NotSupportedError
from .._tensor import Tensor
from ._arena import read_spans
from ._torch_format import make_value, placement

try:
    import safetensors
    import safetensors.numpy as stnp
except ImportError:  # the optional extra is not installed: every entry point says how to get it
    safetensors = stnp = None

__all__ = ["load_safetensors", "load_safetensors_bytes", "load_index", "save_safetensors", "metadata", "INDEX_NAME"]

INDEX_NAME = "model.safetensors.index.json"
_DTYPES = {
    "F64": np.dtype(np.float64),
    "F32": np.dtype(np.float32),
    "F16": np.dtype(np.float16),
    "BF16": np.dtype(D.bfloat16.np),
    "I64": np.dtype(np.int64),
    "I32": np.dtype(np.int32),
    "I16": np.dtype(np.int16),
    "I8": np.dtype(np.int8),
    "U64": np.dtype(np.uint64),
    "U32": np.dtype(np.uint32),
    "U16": np.dtype(np.uint16),
    "U8": np.dtype(np.uint8),
    "BOOL": np.dtype(np.bool_),
    "C64": np.dtype(np.complex64),
    "F8_E4M3": np.dtype(ml_dtypes.float8_e4m3fn),
    "F8_E5M2": np.dtype(ml_dtypes.float8_e5m2),
}


def _need() -> Any:
    if safetensors is None:
        raise NotSupportedError(
            "safetensors files need the 'safetensors' package: pip install safetensors (or lazyflow[safetensors])"
        )
    return stnp


def _diagnose(head: bytes, total: int, where: str, cause: Exception) -> CheckpointError:
    """The error for a file the package refused: the first key whose header entry is wrong, when one is."""
    msg = f"{where} is not a valid safetensors file ({type(cause).__name__}: {cause})"
    if len(head) < 8:
        return CheckpointError(f"{msg}: it is {len(head)} bytes long (truncated)")
    n = struct.unpack("<Q", head[:8])[0]
    if 8 + n > total:
        return CheckpointError(f"{msg}: the header claims {n} bytes, the file has {total - 8} after the length")
    try:
        header = json.loads(head[8 : 8 + n])
    except ValueError:
        return CheckpointError(f"{msg}: the header is not JSON (damaged)")
    if not isinstance(header, dict):
        return CheckpointError(f"{msg}: the header is not a JSON object")
    size = total - 8 - n
    for key, e in header.items():
        if key == "__metadata__":
            continue
        try:
            dt = _DTYPES[e["dtype"]]
            lo, hi = (int(x) for x in e["data_offsets"])
            want = int(np.prod(e["shape"], dtype=np.int64)) * dt.itemsize
        except (KeyError, TypeError, ValueError):
            return CheckpointError(f"{msg}: the header entry of '{key}' is malformed")
        if not 0 <= lo <= hi <= size or hi - lo != want:
            return CheckpointError(
                f"{msg}: the header says '{key}' lies at bytes [{lo}, {hi}) and needs {want} bytes, the data section "
                f"has {size} bytes (a header that lies about offsets, or a truncated file)"
            )
    return CheckpointError(f"{msg}: the file is damaged")


def _wrap_all(arrays: Mapping[str, np.ndarray], where: str, map_location) -> dict[str, Any]:
    out: dict[str, Any] = {}
    fixed = map_location is None or isinstance(map_location, str)  # one target for every tensor: resolved once
    cached: list = []

    def place(a, what):
        if not fixed:
            return placement(map_location, "cpu", a.dtype, a.nbytes, where, what)
        if not cached:
            cached.append(placement(map_location, "cpu", a.dtype, a.nbytes, where, what))
        return cached[0]

    for k, a in arrays.items():
        # the arrays are this load's own memory: from a path at 64-byte boundaries (the transfer wraps them
        # without a copy); from a file object the package's bytes (rarely aligned: the transfer copies them)
        what = f"'{k}'"
        out[k] = make_value(a, lambda a=a, what=what: place(a, what), where, what)
    return out


def _identity(st: os.stat_result) -> tuple[int, ...]:
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


def _read_tensors(path: str, where: str) -> dict[str, np.ndarray]:
    """Every tensor of the file as a numpy array at a 64-byte boundary of this load's memory.

    The package parses and validates the header (``safe_open``): it refuses a file whose tensors do not tile
    the data section exactly, in offset order, up to the file's last byte. So each tensor's bytes are the next
    ``nbytes`` of the file after the previous one's, and the section starts ``sum(nbytes)`` bytes before the
    end: one ``preadv`` lands them all, each aligned (``_arena._buffers``), and the device transfer wraps them without
    a copy (the package's own ``get_tensor`` makes a ``bytes`` copy, which the transfer would have to copy again).
    """
    assert safetensors is not None
    with open(path, "rb", buffering=0) as fh:
        before = os.fstat(fh.fileno())
        with safetensors.safe_open(path, framework="numpy") as f:
            names = f.keys()
            ordered = f.offset_keys()
            slices = [f.get_slice(k) for k in ordered]
            specs = {k: (s.get_dtype(), tuple(int(d) for d in s.get_shape())) for k, s in zip(ordered, slices)}
        after = os.stat(path)
        if _identity(before) != _identity(after):  # the package checked another file than the one read here
            raise CheckpointError(f"{where}: the file changed while it was read; load it again")
        sizes = []
        for k in ordered:
            name, shape = specs[k]
            dt = _DTYPES.get(name)
            if dt is None:
                raise CheckpointError(f"{where}: '{k}' has the dtype {name!r}, which lazyflow does not read")
            sizes.append(math.prod(shape) * dt.itemsize)
        start = before.st_size - sum(sizes)
        if start < 8:  # cannot happen for a file the package accepted: never read the header as data
            raise CheckpointError(f"{where}: the tensors need more bytes than the file has (damaged)")
        pieces = read_spans(fh.fileno(), start, sizes, where)
    got = {k: p for k, p in zip(ordered, pieces)}
    return {k: got[k].view(_DTYPES[specs[k][0]]).reshape(specs[k][1]) for k in names}


def load_safetensors(path: str, where: str, map_location) -> dict[str, Any]:
    """``{key: Tensor}`` from one ``.safetensors`` file (host memory of this load's own).

    Raises:
        CheckpointError: the package refuses the file (named, with the key at fault when the header lies).
        NotSupportedError: the ``safetensors`` package is missing.
    """
    _need()
    try:
        arrays = _read_tensors(path, where)
    except CheckpointError:
        raise
    except Exception as e:
        with open(path, "rb") as fh:
            total = os.fstat(fh.fileno()).st_size
            head = fh.read(8)
            if len(head) == 8:
                head += fh.read(min(struct.unpack("<Q", head)[0], 100 << 20))
        raise _diagnose(head, total, where, e) from e
    return _wrap_all(arrays, where, map_location)


def load_safetensors_bytes(data: bytes, where: str, map_location) -> dict[str, Any]:
    """``{key: Tensor}`` from the bytes of a safetensors file (an open file, a BytesIO)."""
    _need()
    assert safetensors is not None
    try:
        records = safetensors.deserialize(data)
        arrays = {}
        for k, v in records:
            dt = _DTYPES.get(v["dtype"])
            if dt is None:
                raise CheckpointError(f"{where}: '{k}' has the dtype {v['dtype']!r}, which lazyflow does not read")
            arrays[k] = np.frombuffer(v["data"], dt).reshape(v["shape"])
    except CheckpointError:
        raise
    except Exception as e:
        raise _diagnose(data[:8] + data[8 : 8 + (100 << 20)], len(data), where, e) from e
    return _wrap_all(arrays, where, map_location)


def read_index(index_path: str, where: str) -> tuple[dict[str, str], dict[str, list[str]]]:
    """A sharded checkpoint's index: ``(weight_map, {shard path: [keys]})``.

    Raises:
        CheckpointError: a malformed index, a shard name outside the index's directory, a missing shard.
    """
    try:
        with open(index_path, encoding="utf-8") as f:
            index = json.load(f)
        weight_map = index["weight_map"]
        if not isinstance(weight_map, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in weight_map.items()
        ):
            raise TypeError("weight_map must map strings to strings")
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise CheckpointError(
            f"{where}: not a safetensors index ({type(e).__name__}: {e}); expected JSON with a 'weight_map'"
        ) from e
    base = os.path.dirname(index_path)
    by_file: dict[str, list[str]] = {}
    for k, fname in weight_map.items():
        if fname != os.path.basename(fname) or fname in ("", ".", ".."):
            raise CheckpointError(f"{where}: the shard {fname!r} of '{k}' is not a file name in the index's directory")
        by_file.setdefault(fname, []).append(k)
    for fname, keys in by_file.items():
        if not os.path.isfile(os.path.join(base, fname)):
            raise CheckpointError(f"{where}: the shard '{fname}' (holding '{keys[0]}') is missing")
    return weight_map, {os.path.join(base, f): keys for f, keys in by_file.items()}


def check_shard(where: str, shard: str, keys: list[str], weight_map: dict[str, str], found) -> None:
    """The shard holds exactly the keys the index maps to it, else raise naming the first key at fault."""
    fname = os.path.basename(shard)
    missing = [k for k in keys if k not in found]
    extra = [k for k in found if weight_map.get(k) != fname]
    if missing or extra:
        bad = missing[0] if missing else extra[0]
        raise CheckpointError(
            f"{where}: the index maps '{bad}' to '{fname}', but the shard "
            + ("lacks it" if missing else f"holds '{bad}' and the index maps it elsewhere (or not at all)")
        )


def load_index(index_path: str, where: str, map_location) -> dict[str, Any]:
    """A sharded checkpoint: every shard named in the index's ``weight_map``, checked key by key.

    Raises:
        CheckpointError: a malformed index, a shard name outside the index's directory, a missing shard, a key
            the index maps to a shard that lacks it (or a shard key the index does not list).
    """
    weight_map, shards = read_index(index_path, where)
    loaded: dict[str, Any] = {}
    for shard, keys in shards.items():
        part = load_safetensors(shard, f"{where} shard '{os.path.basename(shard)}'", map_location)
        check_shard(where, shard, keys, weight_map, part)
        loaded.update(part)
    return {k: loaded[k] for k in weight_map}


def header(path: str, where: str) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
    """``{key: (shape, numpy dtype)}`` of a ``.safetensors`` file, from its header (no tensor data read).

    Raises:
        CheckpointError: the package refuses the file, or a dtype lazyflow does not know.
    """
    _need()
    assert safetensors is not None
    try:
        with safetensors.safe_open(path, framework="numpy") as f:
            raw = {k: (f.get_slice(k).get_shape(), f.get_slice(k).get_dtype()) for k in f.keys()}
    except Exception as e:
        raise CheckpointError(f"{where}: the safetensors package cannot read it ({e}); the file is damaged") from e
    out = {}
    for k, (shape, name) in raw.items():
        if name not in _DTYPES:
            raise CheckpointError(f"{where}: '{k}' has dtype {name}, which lazyflow does not read")
        out[k] = (tuple(int(d) for d in shape), _DTYPES[name])
    return out


def _host(obj: Any, where: str) -> dict[str, np.ndarray]:
    if not isinstance(obj, Mapping):
        raise CheckpointError(
            f"{where}: safetensors holds a flat {{name: tensor}} dict (a state_dict), got {type(obj).__name__}"
        )
    out = {}
    for k, v in obj.items():
        if not isinstance(k, str):
            raise CheckpointError(f"{where}: safetensors keys are strings, got {k!r}")
        if isinstance(v, Tensor):
            v = np.asarray(jax.device_get(v._value))
        if not isinstance(v, np.ndarray):
            raise CheckpointError(
                f"{where}: safetensors holds tensors only; '{k}' is a {type(v).__name__} (save it in metadata, or "
                "use the lazyflow or torch format)"
            )
        out[k] = np.ascontiguousarray(v) if v.ndim else v.copy()
    return out


def save_safetensors(obj: Any, target: str | IO[bytes], where: str, metadata: Mapping[str, str] | None) -> None:
    """Write a ``{name: tensor}`` dict as safetensors to a path (atomically) or an open binary file.

    Raises:
        CheckpointError: not a flat dict of tensors, or metadata that is not ``{str: str}``.
        NotSupportedError: the ``safetensors`` package is missing.
    """
    sn = _need()
    if metadata is not None and not (
        isinstance(metadata, Mapping) and all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items())
    ):
        raise CheckpointError(f"{where}: safetensors metadata must be a dict of strings to strings, got {metadata!r}")
    arrays = _host(obj, where)
    meta = dict(metadata) if metadata is not None else None
    if isinstance(target, str):
        tmp = f"{target}.tmp-{os.getpid()}"
        try:
            sn.save_file(arrays, tmp, metadata=meta)
            os.replace(tmp, target)
        finally:
            if os.path.exists(tmp):
                os.remove(tmp)
    else:
        target.write(sn.save(arrays, metadata=meta))


def metadata(path: str) -> dict[str, str]:
    """The ``__metadata__`` of a safetensors file (``{}`` when it has none)."""
    _need()
    assert safetensors is not None
    with safetensors.safe_open(path, framework="numpy") as f:
        return dict(f.metadata() or {})
