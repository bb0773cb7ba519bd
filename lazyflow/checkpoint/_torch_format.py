"""Reading PyTorch's file format (``torch.save``, the zip format of torch >= 1.6) without torch.

A ``.pt`` file is a zip archive ``<archive>/data.pkl`` (a protocol 2 pickle of the object) plus one record
``<archive>/data/<key>`` per storage, ``<archive>/byteorder`` and ``<archive>/version``. Tensors appear in the
pickle as ``torch._utils._rebuild_tensor_v2(storage, offset, size, stride, requires_grad, hooks)`` whose storage
is a persistent id ``("storage", torch.<Type>Storage, key, location, numel)``.

The pickle runs on lazyflow's own restricted machine (:mod:`._safe_unpickler`) with a profile that holds
torch's allowlist: the rebuild functions, ``torch.Size``, ``torch.device``, dtypes and storage types (each
a lazyflow stand-in checked here), besides lazyflow's plain containers and numbers. ``weights_only=False``
is refused: without torch, the classes such a pickle names do not exist here.
"""

from __future__ import annotations

import collections
import math
import os
import re
import zipfile
from collections.abc import Callable
from typing import Any

import jax
import ml_dtypes
import numpy as np

from .._core import dtypes as D
from .._core.device import Device
from .._core.errors import CheckpointError, CheckpointUnpicklingError, LazyflowError
from .._core.size import Size
from .._tensor import Tensor, _make
from ..nn.parameter import Parameter
from . import _allowlist as A
from . import _crc
from . import _safe_unpickler as U
from ._arena import aligned, read_records
from ._load import _resolve_device
from ._put import put

__all__ = ["STORAGE_DTYPES", "TORCH_DTYPES", "load_torch", "find_archive", "placement", "make_value"]

# torch's storage class name -> numpy dtype (bfloat16 and the float8s from ml_dtypes, which jax ships)
STORAGE_DTYPES: dict[str, np.dtype] = {
    "FloatStorage": np.dtype(np.float32),
    "DoubleStorage": np.dtype(np.float64),
    "HalfStorage": np.dtype(np.float16),
    "BFloat16Storage": np.dtype(D.bfloat16.np),
    "LongStorage": np.dtype(np.int64),
    "IntStorage": np.dtype(np.int32),
    "ShortStorage": np.dtype(np.int16),
    "CharStorage": np.dtype(np.int8),
    "ByteStorage": np.dtype(np.uint8),
    "BoolStorage": np.dtype(np.bool_),
    "ComplexFloatStorage": np.dtype(np.complex64),
    "ComplexDoubleStorage": np.dtype(np.complex128),
    "UInt16Storage": np.dtype(np.uint16),
    "UInt32Storage": np.dtype(np.uint32),
    "UInt64Storage": np.dtype(np.uint64),
    "UntypedStorage": np.dtype(np.uint8),  # torch.storage.UntypedStorage: _rebuild_tensor_v3 names the dtype
}
# torch dtype name -> numpy dtype (what a pickled ``torch.float32`` becomes: the lazyflow dtype when there is one)
TORCH_DTYPES: dict[str, np.dtype] = {
    "float32": np.dtype(np.float32),
    "float64": np.dtype(np.float64),
    "float16": np.dtype(np.float16),
    "bfloat16": np.dtype(D.bfloat16.np),
    "int64": np.dtype(np.int64),
    "int32": np.dtype(np.int32),
    "int16": np.dtype(np.int16),
    "int8": np.dtype(np.int8),
    "uint8": np.dtype(np.uint8),
    "bool": np.dtype(np.bool_),
    "complex64": np.dtype(np.complex64),
    "complex128": np.dtype(np.complex128),
    "uint16": np.dtype(np.uint16),
    "uint32": np.dtype(np.uint32),
    "uint64": np.dtype(np.uint64),
    "float8_e4m3fn": np.dtype(ml_dtypes.float8_e4m3fn),
    "float8_e5m2": np.dtype(ml_dtypes.float8_e5m2),
}
_LF_DTYPES = {
    *("float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool"),
    *("complex64", "complex128"),
}
_LF_NP = {np.dtype(TORCH_DTYPES[n]): D.to_dtype(n) for n in _LF_DTYPES}  # native numpy dtype -> lazyflow dtype
_MAX_DIM = 1 << 48  # sizes, strides and offsets beyond this are forged (no storage holds 2**48 elements)
_MAX_EXPAND = 1 << 30  # the most bytes a view may materialise beyond its storage's own size (stride-0 expands)
_DIRECT_MIN = 1 << 16  # records this big are read into aligned buffers (smaller ones: zipfile's read)


def _contiguous(size) -> tuple[int, ...]:
    """Row-major strides (in elements) of a shape."""
    out, acc = [], 1
    for n in reversed(size):
        out.append(acc)
        acc *= n
    return tuple(reversed(out))


_KEY = re.compile(r"[A-Za-z0-9_.-]{1,64}")  # a storage record's key: torch writes "0", "1", ...


class _StorageType:
    """What ``torch.FloatStorage`` & co. unpickle to: a value naming a dtype (never called)."""

    def __init__(self, name: str):
        self.name, self.dtype = name, STORAGE_DTYPES[name]


class _Storage:
    """One storage record: its bytes (read once, shared by every tensor that views it) and its location."""

    def __init__(self, data: np.ndarray, dtype: np.dtype, key: str, location: str):
        self.data, self.dtype, self.key, self.location = data, dtype, key, location


class _StorageStub:
    """What a ``map_location`` function receives as ``storage``: ``.cpu()``/``.cuda(i)``/``.to(device)`` name
    where the storage goes (torch's ``lambda storage, loc: storage.cuda(1)`` idiom); returning it unchanged
    keeps it on the CPU, returning None falls back to the saved location, as in torch."""

    def __init__(self, dtype: np.dtype, nbytes: int):
        self.dtype, self._nbytes = dtype, nbytes

    def nbytes(self) -> int:
        return self._nbytes

    def cpu(self) -> Device:
        return Device("cpu")

    def cuda(self, device: int | None = None) -> Device:
        return Device("cuda", device if device is not None else 0)

    def to(self, device) -> Device:
        return Device(device)


def placement(map_location, location: str, dtype: np.dtype, nbytes: int, where: str, what: str):
    """The jax device for data saved at ``location`` under torch's ``map_location`` rules: None keeps the saved
    location, a device/string moves everything there, a dict maps saved location strings, a function is called
    as ``fn(storage, location)`` (returning the storage keeps it on the CPU, None falls back to the saved
    location)."""
    ml = map_location
    if isinstance(ml, dict):
        ml = ml.get(location)
    elif callable(ml) and not isinstance(ml, (Device, jax.Device)):
        stub = _StorageStub(dtype, nbytes)
        got = ml(stub, location)
        ml = None if got is None else "cpu" if got is stub else got
        if ml is not None and not isinstance(ml, (str, Device, jax.Device)):
            raise CheckpointError(
                f"{where}: map_location returned {type(got).__name__} for {what}; return the storage (or "
                "storage.cuda(i) / storage.to(device)), a device, or None"
            )
    target = location if ml is None else ml
    try:
        return _resolve_device(target)
    except LazyflowError as e:
        hint = "" if ml is not None else "; pass map_location='cpu' (or another device)"
        raise CheckpointError(
            f"{where}: {what} was saved on {location!r}, which cannot be used here ({e}){hint}"
        ) from None


def make_value(arr: np.ndarray, place: Callable[[], Any], where: str, what: str, requires_grad: bool = False):
    """A loaded array as a lazyflow Tensor on ``place()`` (``arr`` is the load's own memory, or a read-only map
    with ``mmap=True``); dtypes lazyflow lacks (uint16/32/64, float8) stay numpy arrays of their own."""
    lf_dtype = _LF_NP.get(arr.dtype)
    if lf_dtype is None and arr.dtype.name in _LF_DTYPES:  # a non-native byte order: a native copy
        arr = arr.astype(arr.dtype.newbyteorder("="))
        lf_dtype = _LF_NP.get(arr.dtype)
    if lf_dtype is None:
        return np.array(arr)
    try:
        lf_dtype.to_jax()  # raises for a 64-bit dtype while JAX's x64 mode is off
        value = put(arr, place())
    except LazyflowError as e:
        raise CheckpointError(f"{where}: {what}: {e}") from e
    t = _make(value)
    if requires_grad and t.dtype.is_inexact:
        t._rg = True
    return t


def find_archive(zf: zipfile.ZipFile, where: str) -> str:
    """The archive prefix (``"name/"``) of a torch zip file, whose pickle is ``<prefix>data.pkl``."""
    pkls = [n for n in zf.namelist() if n.endswith("/data.pkl") and n.count("/") == 1]
    if len(pkls) != 1:
        raise CheckpointError(
            f"{where}: not a PyTorch checkpoint (expected one '<archive>/data.pkl' record in the zip, found "
            f"{len(pkls)})"
        )
    return pkls[0][: -len("data.pkl")]


class _TorchReader:
    """One load of a torch zip file."""

    def __init__(self, zf: zipfile.ZipFile, where: str, *, mmap_path: str | None, map_location):
        self.zf, self.where, self.mmap_path, self.map_location = zf, where, mmap_path, map_location
        self.prefix = find_archive(zf, where)
        self.names = set(zf.namelist())
        if len(self.names) != len(zf.infolist()):  # torch reads a repeated name's first entry, zipfile its last
            seen: set[str] = set()
            twice = next(n for n in zf.namelist() if n in seen or seen.add(n))
            raise CheckpointError(
                f"{where}: the zip holds record '{twice}' twice (torch would read one copy, lazyflow another); "
                "the file is damaged or forged"
            )
        self.storages: dict[str, _Storage] = {}
        self.places: dict[Any, Any] = {}
        self.crcs: list[tuple[str, int, Any]] = []
        self.mapped: np.ndarray | None = None
        self.records: dict[str, np.ndarray] = {}  # data records read (or mapped) up front, by member name
        order = self._text("byteorder", "little")
        if order not in ("little", "big"):
            raise CheckpointError(f"{where}: byteorder record says {order!r}, expected 'little' or 'big'")
        self.big = order == "big"

    def _text(self, name: str, default: str) -> str:
        full = self.prefix + name
        if full not in self.names:
            return default
        return self._read(full, name).tobytes().decode("ascii", "replace").strip()

    def _start(self, info: zipfile.ZipInfo, what: str) -> int:
        """Where a stored record's bytes begin (its local header checked against the central directory)."""
        fp = self.zf.fp
        assert fp is not None  # an open ZipFile has its file
        fp.seek(info.header_offset)
        head = fp.read(30)
        if len(head) < 30 or head[:4] != b"PK\x03\x04":
            raise CheckpointError(f"{self.where}: the zip header of record '{what}' is damaged")
        n, m = int.from_bytes(head[26:28], "little"), int.from_bytes(head[28:30], "little")
        if fp.read(n) != info.orig_filename.encode("utf-8"):
            raise CheckpointError(f"{self.where}: the zip header of record '{what}' names another record (damaged)")
        start = info.header_offset + 30 + n + m
        fp.seek(0, 2)
        if start + info.file_size > fp.tell():
            raise CheckpointError(f"{self.where}: record '{what}' runs past the end of the file (truncated)")
        return start

    def _prefetch(self) -> None:
        """Every stored data record at once: with mmap as slices of the file's map; else each record at a 64-byte
        boundary of this load's memory (``_arena._buffers``: a CPU device_put wraps it without a copy; one kept
        tensor never pins the whole file), all read by one ``preadv`` per ``IOV_MAX`` records. Each record's local
        zip header is checked and, without mmap, its CRC-32 computed (checked by :meth:`verify`). File objects
        (BytesIO) keep the per-record reads."""
        infos = [
            i
            for i in self.zf.infolist()
            if i.filename.startswith(self.prefix + "data/")
            and i.compress_type == zipfile.ZIP_STORED
            and not i.flag_bits & 0x1
        ]
        if not infos:
            return
        infos.sort(key=lambda i: i.header_offset)
        if self.mmap_path is not None:
            if self.mapped is None:
                self.mapped = np.memmap(self.mmap_path, np.uint8, "r")
            view = self.mapped.view(np.ndarray)  # plain slices (a memmap's cost numpy calls per slice)
            hi, fd = len(view), -1

            def head(off: int, n: int) -> bytes:
                return view[off : off + n].tobytes() if 0 <= off else b""

        else:
            try:
                fd = self.zf.fp.fileno()  # type: ignore[union-attr]
            except (AttributeError, OSError, ValueError):  # io.BytesIO: no descriptor
                return
            size = os.fstat(fd).st_size
            last = infos[-1].header_offset
            # the last record ends before the next header (or the central directory); nothing is read past the
            # file's end, whatever offsets a forged directory claims
            later = [i.header_offset for i in self.zf.infolist() if i.header_offset > last]
            hi = min([size, getattr(self.zf, "start_dir", size), *later])

            def head(off: int, n: int) -> bytes:
                if not 0 <= off < hi:
                    return b""
                try:
                    return os.pread(fd, min(n, hi - off), off)
                except OSError as e:
                    raise CheckpointError(f"{self.where}: reading the file failed ({e})") from e

        spans: list[tuple[int, int]] = []
        for info in infos:
            what = info.filename[len(self.prefix) :]
            name = info.orig_filename.encode("utf-8")
            local = head(info.header_offset, 30 + len(name))
            if len(local) < 30 or local[:4] != b"PK\x03\x04":
                raise CheckpointError(f"{self.where}: the zip header of record '{what}' is damaged")
            k, m = int.from_bytes(local[26:28], "little"), int.from_bytes(local[28:30], "little")
            if k != len(name) or local[30:] != name:
                raise CheckpointError(f"{self.where}: the zip header of record '{what}' names another record (damaged)")
            start = info.header_offset + 30 + k + m
            if start + info.file_size > hi:
                raise CheckpointError(f"{self.where}: record '{what}' runs past the end of the file (truncated)")
            spans.append((start, info.file_size))
        if self.mmap_path is not None:
            recs = [view[s : s + n] for s, n in spans]
        else:
            order = sorted(range(len(spans)), key=lambda j: spans[j][0])
            got = read_records(fd, [spans[j] for j in order], self.where)
            recs = [np.empty(0, np.uint8)] * len(spans)
            for j, r in zip(order, got):
                recs[j] = r
        for info, rec in zip(infos, recs):
            if self.mmap_path is None:
                job = (
                    _crc.done(_crc.crc32(rec))  # pyright: ignore[reportArgumentType]
                    if _crc.FAST  # zlib-ng's crc32 runs at several GB/s: inline is cheaper than waking a thread
                    else _crc.executor().submit(_crc.crc32, rec)
                )
                self.crcs.append((info.filename[len(self.prefix) :], info.CRC, job))
            self.records[info.filename] = rec

    def _read(self, member: str, what: str) -> np.ndarray:
        """A record's bytes: with mmap a read-only map of the file's stored bytes; else our own copy, for a stored
        record read straight into a 64-byte-aligned buffer (a CPU device_put then wraps it without a copy) whose
        CRC-32 is checked in the checksum threads (:meth:`verify` waits for them)."""
        hit = self.records.get(member)
        if hit is not None:
            return hit
        info = self.zf.getinfo(member)
        stored = info.compress_type == zipfile.ZIP_STORED and not info.flag_bits & 0x1
        if self.mmap_path is not None and member.startswith(self.prefix + "data/"):
            if not stored:
                raise CheckpointError(f"{self.where}: record '{what}' is compressed; mmap=True needs stored records")
            start = self._start(info, what)
            if info.file_size == 0:
                return np.empty(0, np.uint8)
            if self.mapped is None:  # one map of the whole file; each record is a slice of it
                self.mapped = np.memmap(self.mmap_path, np.uint8, "r")
            return self.mapped[start : start + info.file_size]
        if stored and info.file_size >= _DIRECT_MIN:
            fp: Any = self.zf.fp  # a binary file or BytesIO: both have readinto (IO[bytes] does not declare it)
            fp.seek(self._start(info, what))
            buf = aligned(info.file_size)
            view = memoryview(buf.data)
            if fp.readinto(view) != info.file_size:
                raise CheckpointError(f"{self.where}: record '{what}' is truncated")
            if _crc.FAST:  # zlib-ng's crc32 runs at several GB/s: inline is cheaper than waking a thread
                self.crcs.append((what, info.CRC, _crc.done(_crc.crc32(view))))
            else:
                self.crcs.append((what, info.CRC, _crc.executor().submit(_crc.crc32, view)))
            return buf
        try:
            return np.frombuffer(self.zf.read(member), np.uint8)
        except Exception as e:  # zipfile raises BadZipFile, zlib.error, EOFError, NotImplementedError...
            raise CheckpointError(
                f"{self.where}: record '{what}' cannot be read ({type(e).__name__}: {e}); the file is damaged or "
                "truncated"
            ) from e

    def verify(self) -> None:
        """Wait for the CRC-32 of every record read directly; raise naming the first that does not match."""
        for what, want, fut in self.crcs:
            if fut.result() != want:
                raise CheckpointError(
                    f"{self.where}: record '{what}' cannot be read (its CRC-32 does not match); the file is damaged"
                )

    # ------------------------------------------------------------------ pickle callbacks
    def persistent_load(self, pid):
        if not (
            type(pid) is tuple
            and len(pid) == 5
            and pid[0] == "storage"
            and isinstance(pid[1], _StorageType)
            and type(pid[2]) is str
            and type(pid[3]) is str
            and type(pid[4]) is int
        ):
            raise CheckpointUnpicklingError(
                f"{self.where}: bad storage reference {A.short(pid)} (expected ('storage', torch.<T>Storage, key, "
                "location, numel))"
            )
        _, stype, key, location, numel = pid
        hit = self.storages.get(key)
        if hit is not None:
            if hit.dtype != stype.dtype:
                raise CheckpointError(f"{self.where}: storage '{key}' is referenced with two dtypes")
            return hit
        if _KEY.fullmatch(key) is None or key in (".", ".."):
            raise CheckpointError(f"{self.where}: storage key {key!r} is not a record name (it points outside)")
        member = f"{self.prefix}data/{key}"
        if member not in self.names:
            raise CheckpointError(f"{self.where}: storage '{key}' has no record '{member}' in the file (truncated?)")
        raw = self._read(member, f"data/{key}")
        want = numel * stype.dtype.itemsize
        if numel < 0 or raw.nbytes != want:
            raise CheckpointError(
                f"{self.where}: storage '{key}' ({stype.name}) holds {raw.nbytes} bytes, the pickle claims {numel} "
                f"elements ({want} bytes); the file is damaged"
            )
        st = _Storage(raw, stype.dtype, key, location)
        self.storages[key] = st
        return st

    def _place(self, st: _Storage):
        # a map_location function is asked once per storage (as torch does); anything else depends on the saved
        # location only
        ml = self.map_location
        key = st.key if callable(ml) and not isinstance(ml, (Device, jax.Device)) else ("location", st.location)
        hit = self.places.get(key)
        if hit is None:
            hit = self.places[key] = self._placement(st)
        return hit

    def _placement(self, st: _Storage):
        return placement(self.map_location, st.location, st.dtype, st.data.nbytes, self.where, f"storage '{st.key}'")

    def rebuild_tensor_v3(self, storage, offset, size, stride, requires_grad, hooks, dtype, metadata=None):
        """Tensors of an untyped storage (torch writes uint16/32/64 and float8 this way): the dtype comes apart."""
        dt = dtype.np if isinstance(dtype, D.DType) else dtype
        if not (isinstance(dt, np.dtype) and dt in TORCH_DTYPES.values()):
            raise A.BadArguments(f"torch._utils._rebuild_tensor_v3 expects a torch dtype, got {A.short(dtype)}")
        return self.rebuild_tensor(storage, offset, size, stride, requires_grad, hooks, metadata, dtype=dt)

    def rebuild_tensor(self, storage, offset, size, stride, requires_grad, hooks, metadata=None, *, dtype=None):
        ok = (
            isinstance(storage, _Storage)
            and type(offset) is int
            and type(size) in (tuple, Size)
            and type(stride) in (tuple, Size)
            and len(size) == len(stride)
            and all(type(x) is int and 0 <= x < _MAX_DIM for x in (*size, *stride))
            and 0 <= offset < _MAX_DIM
            and type(requires_grad) is bool
            and (hooks is None or type(hooks) is collections.OrderedDict and not hooks)
            and (metadata is None or type(metadata) is dict and not metadata)
        )
        if not ok:
            raise A.BadArguments(
                "torch._utils._rebuild_tensor_v2 expects (storage, offset, size tuple, stride tuple, requires_grad, "
                f"empty hooks) with non-negative ints, got {A.short((offset, size, stride, requires_grad))}"
            )
        numel = math.prod(size)  # Python ints: no int64 overflow to 0 for a forged size
        dt = storage.dtype if dtype is None else dtype
        if storage.data.nbytes % dt.itemsize:
            raise CheckpointError(
                f"{self.where}: storage '{storage.key}' holds {storage.data.nbytes} bytes, not a whole number of {dt}"
            )
        data = storage.data.view(dt.newbyteorder(">") if self.big else dt)
        if numel:
            last = offset + sum((n - 1) * s for n, s in zip(size, stride))
            if last >= data.size:
                raise CheckpointError(
                    f"{self.where}: a tensor of size {tuple(size)} (offset {offset}, stride {tuple(stride)}) reaches "
                    f"element {last} of storage '{storage.key}', which has {data.size}; the file is damaged"
                )
            isz = data.itemsize
            if numel * isz > max(data.nbytes, _MAX_EXPAND):
                raise CheckpointError(
                    f"{self.where}: a tensor of size {tuple(size)} (stride {tuple(stride)}) would expand storage "
                    f"'{storage.key}' ({data.nbytes} bytes) to {numel * isz} bytes; lazyflow materialises views, and "
                    f"refuses to grow one past {_MAX_EXPAND >> 30} GiB (a forged file, or a huge expand())"
                )
            if offset == 0 and numel == data.size and tuple(stride) == _contiguous(size):
                view = data.reshape(tuple(size))  # the whole storage, in order: the common case
            else:
                view = np.lib.stride_tricks.as_strided(
                    data[offset:], shape=tuple(size), strides=tuple(s * isz for s in stride), writeable=False
                )
        else:
            view = np.empty(tuple(size), data.dtype)
        # mmap=False: the bytes are this load's own (zipfile's bytes object), never the caller's. A view of part
        # of a storage (or a byte-swapped one) becomes a compact array of its own.
        if view.dtype != dt or not view.flags.c_contiguous or view.nbytes != data.nbytes:
            view = np.array(view, dtype=dt, order="C")
        return self._tensor(view, storage, requires_grad)

    def _tensor(self, arr: np.ndarray, storage: _Storage, requires_grad: bool):
        return make_value(arr, lambda: self._place(storage), self.where, f"storage '{storage.key}'", requires_grad)

    def rebuild_parameter(self, data, requires_grad, hooks, state=None):
        if not (
            isinstance(data, Tensor)
            and type(requires_grad) is bool
            and (hooks is None or type(hooks) is collections.OrderedDict and not hooks)
            and (state is None or type(state) is dict and not state)
        ):
            raise A.BadArguments(
                "torch._utils._rebuild_parameter expects (tensor, requires_grad, empty hooks), got "
                f"{A.short((requires_grad,))} with {type(data).__name__}"
            )
        return Parameter(data, requires_grad=requires_grad)

    # ------------------------------------------------------------------ profile
    def profile(self) -> U.Profile:
        g: dict[tuple[str, str], Any] = dict(A.GLOBALS)
        calls = dict(A.CALLS)

        def add(module: str, name: str, obj: Any, fn: Callable | None = None):
            g[(module, name)] = obj
            if fn is not None:
                calls[id(obj)] = (obj, fn)

        add("torch._utils", "_rebuild_tensor_v2", self.rebuild_tensor, self.rebuild_tensor)
        add("torch._utils", "_rebuild_tensor_v3", self.rebuild_tensor_v3, self.rebuild_tensor_v3)
        add("torch._utils", "_rebuild_parameter", self.rebuild_parameter, self.rebuild_parameter)
        add("torch._utils", "_rebuild_parameter_with_state", _with_state, self.rebuild_parameter)
        add("torch", "Size", Size, _size)
        add("_codecs", "encode", _encode, _encode)
        add("builtins", "set", set, _set_of(set))  # protocol 2 writes a set as set(list)
        add("builtins", "frozenset", frozenset, _set_of(frozenset))
        for (module, name), obj in list(g.items()):  # protocol 2 names builtins by Python 2's module name
            if module == "builtins":
                g[("__builtin__", name)] = obj
        add("torch", "device", Device, _device)
        for name in STORAGE_DTYPES:
            add("torch.storage" if name == "UntypedStorage" else "torch", name, _StorageType(name))
        for name, dt in TORCH_DTYPES.items():
            add("torch", name, D.to_dtype(name) if name in _LF_DTYPES else dt)
        return U.Profile(
            "PyTorch pickle (data.pkl)",
            g,
            calls,
            min_protocol=2,
            extra_ops=U.PROTOCOL2_OPS,
            allowed_doc="torch's weights_only allowlist: tensors, Parameters, containers, numbers, strings, "
            "OrderedDict, torch.Size, torch.device, dtypes",
        )

    def load(self) -> Any:
        pkl = self._read(self.prefix + "data.pkl", "data.pkl").tobytes()
        try:
            self._prefetch()
            out = U.SafeUnpickler(
                pkl, self.persistent_load, self.where, allow_globals=True, profile=self.profile()
            ).load()
        finally:  # a failed load waits for its checksum threads too (their buffers stay referenced till then)
            crcs, self.crcs = self.crcs, []
            wait = [f for _, _, f in crcs]
            for f in wait:
                f.result()
            self.crcs = crcs
        self.verify()
        return out


def _with_state(*args):
    """Stands for ``torch._utils._rebuild_parameter_with_state``; REDUCE calls the checked constructor instead."""


def _size(*args):
    if not (len(args) == 1 and type(args[0]) in (tuple, list) and all(type(x) is int and x >= 0 for x in args[0])):
        raise A.BadArguments(f"torch.Size expects one tuple of non-negative ints, got {A.short(args)}")
    return Size(args[0])


def _device(*args):
    if not (
        1 <= len(args) <= 2 and type(args[0]) is str and (len(args) == 1 or args[1] is None or type(args[1]) is int)
    ):
        raise A.BadArguments(f"torch.device expects a device type string and an optional index, got {A.short(args)}")
    return Device(*args)


def _encode(*args):
    """``_codecs.encode(text, "latin1")``: how a protocol 2 pickle writes ``bytes`` (torch allows exactly this)."""
    if not (len(args) == 2 and type(args[0]) is str and args[1] in ("latin1", "latin-1")):
        raise A.BadArguments(f"_codecs.encode expects (str, 'latin1'), got {A.short(args)}")
    return args[0].encode("latin1")


_FLAT = (int, float, str, bytes, bool, type(None))


def _set_of(kind):
    def make(*args):
        if not (
            len(args) == 1
            and type(args[0]) is list
            and all(type(x) in _FLAT or type(x) is tuple and all(type(y) in _FLAT for y in x) for x in args[0])
        ):
            raise A.BadArguments(f"builtins.{kind.__name__} expects one list of plain values, got {A.short(args)}")
        return kind(args[0])

    return make


def load_torch(zf: zipfile.ZipFile, where: str, *, mmap_path: str | None, map_location, weights_only: bool) -> Any:
    """The object in a torch zip file (tensors as lazyflow Tensors; complex and uint16/32/64 as numpy arrays).

    Raises:
        CheckpointUnpicklingError: the pickle names a global outside torch's allowlist, or is malformed.
        CheckpointError: a damaged/truncated file, a storage shorter than its tensors, a bad map_location.
    """
    if not weights_only:
        raise CheckpointError(
            f"{where}: weights_only=False is not supported for PyTorch files: lazyflow reads them without torch, "
            "so the classes such a pickle names do not exist here; save plain state dicts (tensors, containers, "
            "numbers) or load with torch"
        )
    try:
        return _TorchReader(zf, where, mmap_path=mmap_path, map_location=map_location).load()
    except CheckpointError:
        raise
    except A.BadArguments as e:
        raise CheckpointUnpicklingError(f"{where}: weights_only load refused a call: {e}") from e
    except Exception as e:  # numpy or jax refusing values a forged file holds: still the file's fault
        raise CheckpointError(f"{where}: the file is damaged or forged ({type(e).__name__}: {e})") from e
