"""``lf.save`` / ``lf.load`` / ``inspect`` / partial loads, and the handle of an asynchronous save."""

from __future__ import annotations

import dataclasses
import os
import struct
import threading
import zlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import numpy as np

from .._core import dtypes as D
from .._core.device import Device, to_jax_device
from .._core.errors import CheckpointError, LazyflowError
from .._tensor import _make
from . import _layout, _unpickler

__all__ = ["FORMAT_VERSION", "save", "load", "load_tensors", "inspect", "TensorInfo", "SavedSharding",
           "SaveHandle"]

FORMAT_VERSION = 1
_MAGIC = b"LFCKPT\x00\x01"
_HEADER = struct.Struct("<IQ")  # crc32 of the payload, payload length


# ------------------------------------------------------------------------------------------ metadata
def _frame(payload: bytes) -> bytes:
    return _MAGIC + _HEADER.pack(zlib.crc32(payload), len(payload)) + payload


def _unframe(data: bytes, where: str) -> bytes:
    n = len(_MAGIC) + _HEADER.size
    if len(data) < n or data[:len(_MAGIC)] != _MAGIC:
        raise CheckpointError(f"{where}: the metadata file is not lazyflow's (bad magic bytes)")
    crc, length = _HEADER.unpack_from(data, len(_MAGIC))
    payload = data[n:]
    if len(payload) != length:
        raise CheckpointError(f"{where}: the metadata file is truncated ({len(payload)} of {length} bytes)")
    if zlib.crc32(payload) != crc:
        raise CheckpointError(f"{where}: the metadata file is corrupted (checksum mismatch)")
    return payload


def _lazyflow_version() -> str:
    try:
        import importlib.metadata

        return importlib.metadata.version("lazyflow")
    except Exception:  # noqa: BLE001 - not installed as a distribution: the field is informational
        return "unknown"


def _encode_meta(plan) -> bytes:
    plan.checksum()
    outer = {"format": _layout.FORMAT_NAME, "version": FORMAT_VERSION, "lazyflow": _lazyflow_version(),
             "entries": plan.records(), "groups": plan.groups, "structure": plan.structure}
    return _frame(_unpickler.dumps(outer))


def _read_meta(path: str) -> tuple[str, dict]:
    from . import _store

    vdir = _layout.resolve(path, FORMAT_VERSION)
    where = f"checkpoint '{path}'"
    try:
        data = _store.read_meta(vdir)
    except OSError as e:
        raise CheckpointError(f"{where}: cannot read the metadata file ({e})") from e
    meta = _unpickler.loads(_unframe(data, where), where=where)  # builtins only: always the safe unpickler
    if not isinstance(meta, dict) or meta.get("format") != _layout.FORMAT_NAME:
        raise CheckpointError(f"{where}: the metadata file is not lazyflow's")
    if not isinstance(meta.get("version"), int) or meta["version"] > FORMAT_VERSION:
        raise CheckpointError(
            f"{where} has checkpoint format version {meta.get('version')}, newer than the versions this "
            f"lazyflow reads (<= {FORMAT_VERSION}); upgrade lazyflow to load it")
    return vdir, meta


# ------------------------------------------------------------------------------------------ inspect
@dataclasses.dataclass(frozen=True)
class SavedSharding:
    """How a tensor was sharded when saved: a ``NamedSharding`` over a mesh of these device ids."""

    mesh_shape: tuple
    axis_names: tuple
    device_ids: tuple
    spec: jax.sharding.PartitionSpec | None

    def to_sharding(self, devices: Sequence[jax.Device] | None = None) -> jax.sharding.NamedSharding:
        """The ``NamedSharding`` over the same device ids here (or over ``devices``, in mesh order).

        Raises:
            CheckpointError: the saved devices do not exist in this process.
        """
        if devices is None:
            here = {d.id: d for d in jax.devices()}
            missing = [i for i in self.device_ids if i not in here]
            if missing:
                raise CheckpointError(
                    f"the tensor was saved sharded over devices {list(self.device_ids)} but devices {missing} "
                    f"do not exist here ({len(here)} devices); pass sharding= (a sharding, or a function of "
                    "key and info) or map_location='cpu'")
            devices = [here[i] for i in self.device_ids]
        mesh = jax.sharding.Mesh(np.array(devices, dtype=object).reshape(self.mesh_shape), self.axis_names)
        return jax.sharding.NamedSharding(mesh, self.spec or jax.sharding.PartitionSpec())


@dataclasses.dataclass(frozen=True)
class TensorInfo:
    """One saved tensor, as :func:`inspect` lists it (no data read)."""

    key: str
    shape: tuple
    dtype: Any  # a lazyflow DType, or a numpy dtype for saved numpy arrays
    kind: str  # "tensor", "parameter", "buffer" or "ndarray"
    requires_grad: bool
    device: str
    sharding: SavedSharding | None
    nbytes: int
    storage: str  # "array", "packed", "empty" or "same" (bytes shared with another key)


def _info(e: dict, entries_by_key: dict) -> TensorInfo:
    from . import _plan

    s = e.get("sharding")
    saved = None
    if s is not None:
        spec = jax.sharding.PartitionSpec(*s["spec"]) if s.get("type") == "named" else None
        saved = SavedSharding(tuple(s.get("mesh_shape", (len(s["device_ids"]),))),
                              tuple(s.get("axis_names", ("d",))), tuple(s["device_ids"]), spec)
    dtype = D.to_dtype(e["dtype"]) if e["kind"] != "ndarray" else _plan.dtype_from_name(e["dtype"])
    root = e
    while root["storage"][0] == "same":
        root = entries_by_key[root["storage"][1]]
    return TensorInfo(e["key"], tuple(e["shape"]), dtype, e["kind"], bool(e["requires_grad"]), e["device"],
                      saved, int(root.get("nbytes", 0)), e["storage"][0])


def inspect(path: str | os.PathLike) -> dict[str, TensorInfo]:
    """Every tensor of the checkpoint at ``path``: key, shape, dtype, saved device/sharding (no data read).

    Args:
        path: a checkpoint directory written by :func:`lf.save`.
    Returns:
        ``{key: TensorInfo}`` in save order.
    Raises:
        CheckpointError: ``path`` is missing, partial, foreign or of a newer format.

    >>> lf.checkpoint.inspect("ckpt")["model.0.weight"].shape
    (4, 3)
    """
    _, meta = _read_meta(os.fspath(path))
    by_key = {e["key"]: e for e in meta["entries"]}
    return {e["key"]: _info(e, by_key) for e in meta["entries"]}


# ------------------------------------------------------------------------------------------ save
class SaveHandle:
    """The handle of ``lf.save(..., async_save=True)``: the data were captured before it was returned."""

    def __init__(self, path: str):
        self.path = path
        self._done = threading.Event()
        self._error: BaseException | None = None

    def done(self) -> bool:
        """Whether the save has finished (successfully or not)."""
        return self._done.is_set()

    def wait(self, timeout: float | None = None) -> None:
        """Block until the checkpoint is complete at ``path``.

        Args:
            timeout: seconds to wait at most (None: no limit).
        Raises:
            CheckpointError: the save failed, or ``timeout`` passed first.
        """
        if not self._done.wait(timeout):
            raise CheckpointError(f"async save to '{self.path}' still running after {timeout} s")
        if self._error is not None:
            raise self._error

    def exception(self) -> BaseException | None:
        """The error of a finished failed save, else None."""
        return self._error if self._done.is_set() else None

    def __repr__(self) -> str:
        state = "running" if not self.done() else "failed" if self._error else "done"
        return f"SaveHandle('{self.path}', {state})"


def _fail(path: str, e: BaseException) -> CheckpointError:
    if isinstance(e, CheckpointError):
        return e
    return CheckpointError(f"saving a checkpoint to '{path}' failed: {type(e).__name__}: {e}")


def save(obj: Any, path: str | os.PathLike, *, async_save: bool = False) -> SaveHandle | None:
    """Save ``obj`` (a Tensor, or dicts/lists/tuples of Tensors, numpy arrays and picklable values) as a
    checkpoint directory at ``path``, atomically replacing any checkpoint already there.

    Tensor bytes go through orbax-checkpoint (small tensors packed per dtype, sharded tensors shard by shard);
    the structure and every other value go into a pickled metadata file with a CRC-32 per tensor.

    Args:
        obj: what to save, e.g. ``{"model": model.state_dict(), "optim": opt.state_dict(), "epoch": 3}``.
        path: the checkpoint directory (created; an existing checkpoint there stays intact until the new
            one is complete).
        async_save: return at once with a :class:`SaveHandle` while the bytes are written in the
            background; the tensors' values are captured before returning, so they may be updated
            in place right away.
    Returns:
        None, or a :class:`SaveHandle` for ``async_save=True``.
    Raises:
        CheckpointError: ``path`` is a foreign file/directory, a tensor is traced in graph mode, or the
            write failed (the previous checkpoint at ``path`` is then kept).

    >>> lf.save({"model": model.state_dict(), "epoch": 3}, "ckpt")
    """
    return _save(obj, path, async_save=async_save)


def _save(obj: Any, path, *, async_save: bool, after_commit: Callable[[], None] | None = None):
    """:func:`save`, running ``after_commit()`` once the checkpoint is complete (before an async handle
    reports done)."""
    from . import _plan, _store

    path = os.path.abspath(os.fspath(path))
    lock = _layout.path_lock(path)
    lock.acquire()
    txn = None
    try:
        plan = _plan.Plan(obj, snapshot_numpy=async_save)
        txn = _layout.Transaction(path)
        if async_save:  # checksums and metadata are computed in the background commit
            ckptr = _store.write(txn.version_dir, plan.arrays, plan.save_args, lambda: _encode_meta(plan),
                                 async_=True)
        else:  # checksums first (in parallel threads): measured faster than racing the writes for the cores
            _store.write(txn.version_dir, plan.arrays, plan.save_args, _encode_meta(plan))
            txn.commit(FORMAT_VERSION)
            txn = None
            if after_commit is not None:
                after_commit()
    except BaseException as e:
        if txn is not None:
            txn.abort()
        lock.release()
        if isinstance(e, LazyflowError) or not isinstance(e, Exception):
            raise
        raise _fail(path, e) from e
    if not async_save:
        lock.release()
        return None
    handle = SaveHandle(path)

    def finish():
        try:
            ckptr.wait_until_finished()
            txn.commit(FORMAT_VERSION)
        except BaseException as e:  # noqa: BLE001 - reported through the handle
            txn.abort()
            handle._error = _fail(path, e)
        else:
            if after_commit is not None:
                try:
                    after_commit()
                except BaseException as e:  # noqa: BLE001 - reported through the handle
                    handle._error = _fail(path, e)
        finally:
            try:
                ckptr.close()
            except Exception:  # noqa: BLE001 - the save's own outcome is what matters
                pass
            plan.arrays.clear()  # drop the references that kept the buffers from being donated
            lock.release()
            handle._done.set()

    threading.Thread(target=finish, name=f"lazyflow-save:{os.path.basename(path)}").start()
    return handle


# ------------------------------------------------------------------------------------------ load
def _placement(e: dict, info: TensorInfo, map_location, sharding, where: str):
    """The jax Device or Sharding a saved tensor goes to."""
    if sharding is not None:
        s = sharding(info.key, info) if callable(sharding) and not isinstance(sharding, jax.sharding.Sharding) \
            else sharding
        if s is not None:
            if not isinstance(s, (jax.sharding.Sharding, jax.Device)):
                raise CheckpointError(f"{where}: sharding for '{info.key}' must be a jax Sharding or Device, "
                                      f"got {type(s).__name__}")
            return s
    if map_location is not None:
        if isinstance(map_location, Mapping):
            target = map_location.get(info.device)
            if target is None:
                return _saved_placement(info, where)
            return _device(target, where, info.key)
        if callable(map_location):
            raise CheckpointError(f"{where}: map_location as a function is not supported; pass a device, a "
                                  "device string or a dict {saved device: device}")
        return _device(map_location, where, info.key)
    return _saved_placement(info, where)


def _device(d, where: str, key: str) -> jax.Device:
    if isinstance(d, jax.sharding.Sharding):
        return d
    try:
        return to_jax_device(d if isinstance(d, (Device, jax.Device)) else Device(d))
    except LazyflowError as e:
        raise CheckpointError(f"{where}: cannot place '{key}' on map_location={d!r}: {e}") from e


def _saved_placement(info: TensorInfo, where: str):
    if info.sharding is not None:
        try:
            return info.sharding.to_sharding()
        except CheckpointError as e:
            raise CheckpointError(f"{where}: '{info.key}': {e}") from None
    try:
        return to_jax_device(Device(info.device))
    except LazyflowError as e:
        raise CheckpointError(f"{where}: '{info.key}' was saved on {info.device}, which does not exist "
                              f"here ({e}); pass map_location='cpu' (or another device)") from None


def _is_multi(p) -> bool:
    return isinstance(p, jax.sharding.Sharding) and len(p.device_set) > 1


class _Reader:
    """Reads a set of entries (and only the bytes they need), verifies them, places them."""

    def __init__(self, path: str, vdir: str, meta: dict, map_location, sharding):
        self.path, self.vdir, self.meta = path, vdir, meta
        self.where = f"checkpoint '{path}'"
        self.entries = meta["entries"]
        self.by_key = {e["key"]: i for i, e in enumerate(self.entries)}
        by_key = {e["key"]: e for e in self.entries}
        self.infos = [_info(e, by_key) for e in self.entries]
        self.map_location, self.sharding = map_location, sharding

    def _root(self, i: int) -> int:
        seen = set()
        while self.entries[i]["storage"][0] == "same":
            if i in seen:
                raise CheckpointError(f"{self.where}: the metadata has a storage cycle at '{self.entries[i]['key']}'")
            seen.add(i)
            j = self.by_key.get(self.entries[i]["storage"][1])
            if j is None:
                raise CheckpointError(f"{self.where}: '{self.entries[i]['key']}' shares the bytes of a key "
                                      "that is not in the checkpoint")
            i = j
        return i

    def read(self, wanted: Sequence[int]) -> dict[int, Any]:
        """Values (Tensors / numpy arrays) for entry indices ``wanted``: reads only the bytes they need,
        verifies every checksum, then places them."""
        from . import _plan, _store

        roots = {i: self._root(i) for i in wanted}
        needed = sorted(set(roots.values()))
        args: dict[str, Any] = {}
        members: dict[str, list[int]] = {}  # orbax leaf -> entries read from it (host arrays)
        for r in needed:
            e = self.entries[r]
            st = e["storage"]
            if st[0] == "packed":
                members.setdefault(st[1], []).append(r)
            elif st[0] == "array" and e["sharding"] is not None:
                place = self._placement(r)
                target = place if isinstance(place, jax.sharding.Sharding) else \
                    jax.sharding.SingleDeviceSharding(place)
                args[st[1]] = _store.ocp.ArrayRestoreArgs(
                    restore_type=jax.Array, sharding=target, global_shape=tuple(e["shape"]),
                    dtype=_plan.dtype_from_name(e["dtype"]))
            elif st[0] == "array":
                n = int(e.get("nbytes", 0))
                spans = tuple((lo, min(lo + _plan.CRC_CHUNK, n)) for lo in range(0, max(n, 1), _plan.CRC_CHUNK))
                args[st[1]] = _store.HostRestoreArgs(restore_type=np.ndarray, checks=(spans,))
                members[st[1]] = [r]
            elif st[0] != "empty":
                raise CheckpointError(f"{self.where}: unknown storage {st[0]!r} for '{e['key']}'")
        for g, rs in members.items():
            if not g.startswith("g"):
                continue
            if g not in self.meta["groups"]:
                raise CheckpointError(f"{self.where}: packed group {g!r} of '{self.entries[rs[0]]['key']}' "
                                      "is not in the metadata")
            spans = tuple((self.entries[r]["storage"][2], self.entries[r]["storage"][2] + self.entries[r]["storage"][3])
                          for r in rs)
            if sum(hi - lo for lo, hi in spans) * 2 >= self.meta["groups"][g]["nbytes"]:
                args[g] = _store.HostRestoreArgs(restore_type=np.ndarray, checks=(spans,))
            else:  # a partial load of a few small tensors: read just their byte ranges
                args[g] = _store.HostRestoreArgs(restore_type=np.ndarray, ranges=spans,
                                                 checks=tuple(((0, hi - lo),) for lo, hi in spans))
        try:
            raw = _store.read_arrays(self.vdir, args, _plan._executor)
        except LazyflowError:
            raise
        except Exception as e:
            keys = [self.entries[r]["key"] for r in needed if self.entries[r]["storage"][0] != "empty"]
            shown = ", ".join(keys[:6]) + (", ..." if len(keys) > 6 else "")
            raise CheckpointError(f"{self.where}: reading the tensor data failed for {shown} "
                                  f"({type(e).__name__}: {e}); the checkpoint's files are damaged or "
                                  "incomplete") from e
        host = self._verify(needed, members, args, raw)
        values = self._place(needed, host, raw)
        return {i: self._wrap(i, values[roots[i]]) for i in wanted}

    def _placement(self, r: int):
        return _placement(self.entries[r], self.infos[r], self.map_location, self.sharding, self.where)

    def _verify(self, needed, members, args, raw) -> dict[int, np.ndarray]:
        """Check every checksum; returns the host bytes (uint8 views) of the host-read entries."""
        from . import _plan

        host, bad = {}, []
        for leaf, rs in members.items():
            got = raw[leaf]
            if args[leaf].ranges is None:
                flat = got.buffers[0].reshape(-1).view(np.uint8)
                if leaf.startswith("g"):
                    for r, crc in zip(rs, got.crcs[0]):
                        _, _, off, n = self.entries[r]["storage"]
                        host[r] = flat[off:off + n]
                        if list(self.entries[r].get("crc", ())) != [crc]:
                            bad.append(self.entries[r]["key"])
                else:
                    host[rs[0]] = flat
                    if list(self.entries[rs[0]].get("crc", ())) != list(got.crcs[0]):
                        bad.append(self.entries[rs[0]]["key"])
            else:
                for r, buf, crcs in zip(rs, got.buffers, got.crcs):
                    host[r] = buf.view(np.uint8)
                    if list(self.entries[r].get("crc", ())) != list(crcs):
                        bad.append(self.entries[r]["key"])
        for r in needed:
            e = self.entries[r]
            if e["storage"][0] == "empty":
                host[r] = np.empty(0, np.uint8)
            elif e["storage"][0] == "array" and e["sharding"] is not None:
                arr = raw[e["storage"][1]]
                shards = {tuple((s.start or 0, dim if s.stop is None else s.stop) for s, dim in
                                zip(sh.index, arr.shape)): sh for sh in arr.addressable_shards}
                for region, crcs in e.get("crc", ()):
                    region = tuple(tuple(x) for x in region)
                    sh = shards.get(region)
                    data = np.asarray(sh.data) if sh is not None else np.asarray(
                        arr[tuple(slice(a, b) for a, b in region)])
                    if _plan.crc_chunks(data) != list(crcs):
                        bad.append(e["key"])
                        break
        if bad:
            shown = ", ".join(f"'{k}'" for k in bad[:8]) + (", ..." if len(bad) > 8 else "")
            raise CheckpointError(f"{self.where} is corrupted: the data of {shown} do not match their "
                                  "checksums (CRC-32); the files were changed or damaged after saving")
        for r, v in host.items():
            e = self.entries[r]
            want = int(np.prod(e["shape"], dtype=np.int64)) * _plan.dtype_from_name(e["dtype"]).itemsize
            if v.nbytes != want:
                raise CheckpointError(f"{self.where}: '{e['key']}' has {v.nbytes} bytes on disk, expected {want}")
        return host

    def _place(self, needed, host, raw) -> dict[int, Any]:
        """Typed host views placed on their devices (one batched ``device_put`` per placement: on CPU it
        wraps the aligned buffers without copying)."""
        from . import _plan

        out: dict[int, Any] = {}
        batches: dict[Any, list[int]] = {}
        for r in needed:
            e = self.entries[r]
            if e["storage"][0] == "array" and e["sharding"] is not None:
                out[r] = raw[e["storage"][1]]
                continue
            arr = host[r].view(_plan.dtype_from_name(e["dtype"])).reshape(tuple(e["shape"]))
            if e["kind"] == "ndarray":
                out[r] = arr.copy() if e["storage"][0] == "packed" else arr
                continue
            out[r] = arr
            batches.setdefault(self._placement(r), []).append(r)
        for place, rs in batches.items():
            try:
                placed = jax.device_put([out[r] for r in rs], place)
            except Exception as ex:
                keys = ", ".join(self.entries[r]["key"] for r in rs[:4])
                raise CheckpointError(f"{self.where}: cannot place {keys} on {place}: {ex}") from ex
            for r, a in zip(rs, placed):
                out[r] = a
        return out

    def _wrap(self, i: int, value):
        e = self.entries[i]
        if e["kind"] == "ndarray":
            return value if isinstance(value, np.ndarray) else np.asarray(value)
        if isinstance(value, np.ndarray):  # an ndarray's bytes shared with a tensor entry
            value = jax.device_put(value)
        t = _make(value)
        if e["requires_grad"] and t.dtype.is_floating_point:
            t._rg = True
        if e["kind"] == "parameter":
            from ..nn.parameter import Parameter

            return Parameter(t, requires_grad=bool(e["requires_grad"]))
        if e["kind"] == "buffer":
            from ..nn.parameter import Buffer

            return Buffer(t, persistent=bool(e.get("persistent", True)))
        return t


def _open(path, map_location, sharding) -> _Reader:
    path = os.path.abspath(os.fspath(path))
    vdir, meta = _read_meta(path)
    return _Reader(path, vdir, meta, map_location, sharding)


def load(path: str | os.PathLike, *, map_location: Any = None,
         sharding: jax.sharding.Sharding | Callable[[str, TensorInfo], Any] | None = None,
         weights_only: bool = True) -> Any:
    """Load a checkpoint written by :func:`lf.save`: the same structure, with lazyflow Tensors.

    Container types and key order are preserved; tensors keep ``requires_grad``; Parameters saved from a
    ``state_dict`` come back as plain Tensors (as in torch). Every tensor's checksum is verified.

    Args:
        path: the checkpoint directory.
        map_location: put every tensor on this device (``"cpu"``, ``"cuda:0"``, a Device), or a dict
            ``{saved device: device}``; None keeps the saved device/sharding.
        sharding: a ``jax.sharding.Sharding`` for every tensor, or a function ``(key, TensorInfo)``
            returning a Sharding/Device (or None to fall back to ``map_location``).
        weights_only: unpickle the metadata with an allowlist of safe types (default). Set False only for
            checkpoints you trust: it unpickles arbitrary classes, which can run arbitrary code.
    Returns:
        The saved object.
    Raises:
        CheckpointError: missing, partial, foreign, corrupted or newer-format checkpoint; a type refused by
            ``weights_only``; saved devices that do not exist here (pass ``map_location``).

    >>> state = lf.load("ckpt", map_location="cpu")
    """
    reader = _open(path, map_location, sharding)
    values = reader.read(range(len(reader.entries)))

    def persistent_load(pid):
        if not (isinstance(pid, tuple) and len(pid) == 2 and pid[0] == _unpickler.PID_TAG
                and isinstance(pid[1], int) and 0 <= pid[1] < len(values)):
            raise CheckpointError(f"{reader.where}: bad tensor reference {pid!r} in the metadata")
        return values[pid[1]]

    return _unpickler.loads(reader.meta["structure"], persistent_load, weights_only=weights_only,
                            where=reader.where)


def load_tensors(path: str | os.PathLike, keys: Sequence[str] | None = None, *, map_location: Any = None,
                 sharding: jax.sharding.Sharding | Callable[[str, TensorInfo], Any] | None = None
                 ) -> dict[str, Any]:
    """Load some tensors by key, reading only their bytes (no unpickling of the structure).

    Args:
        path: the checkpoint directory.
        keys: keys as listed by :func:`inspect` (None: all).
        map_location, sharding: as in :func:`load`.
    Returns:
        ``{key: Tensor or numpy array}`` in the order of ``keys``.
    Raises:
        CheckpointError: a key not in the checkpoint (the message lists close ones), or as :func:`load`.

    >>> w = lf.checkpoint.load_tensors("ckpt", ["model.0.weight"])["model.0.weight"]
    """
    reader = _open(path, map_location, sharding)
    if keys is None:
        keys = [e["key"] for e in reader.entries]
    missing = [k for k in keys if k not in reader.by_key]
    if missing:
        import difflib

        hint = difflib.get_close_matches(missing[0], list(reader.by_key), n=3)
        raise CheckpointError(f"{reader.where} has no tensor {missing[0]!r}"
                              + (f" (close: {hint})" if hint else "")
                              + f"; it holds {len(reader.by_key)} keys, see lf.checkpoint.inspect")
    idx = [reader.by_key[k] for k in keys]
    values = reader.read(idx)
    return {k: values[i] for k, i in zip(keys, idx)}
