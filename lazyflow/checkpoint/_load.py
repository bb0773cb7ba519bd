"""``lf.load`` and partial loads: placement, reads of only the needed bytes, checksum verification."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import numpy as np

from .._core.device import Device, JaxDevice, to_jax_device
from .._core.errors import CheckpointError, CheckpointUnpicklingError, LazyflowError
from .._tensor import _make
from . import _crc, _layout, _multi, _unpickler
from ._crc import dtype_from_name
from ._meta import TensorInfo, info_of, read_meta

__all__ = ["load", "load_tensors"]


def _placement(e: dict, info: TensorInfo, map_location, sharding, where: str):
    """The jax Device or Sharding a saved tensor goes to."""
    if sharding is not None:
        s = (
            sharding(info.key, info)
            if callable(sharding) and not isinstance(sharding, jax.sharding.Sharding)
            else sharding
        )
        if s is not None:
            if not isinstance(s, (jax.sharding.Sharding, jax.Device)):
                raise CheckpointError(
                    f"{where}: sharding for '{info.key}' must be a jax Sharding or Device, got {type(s).__name__}"
                )
            return s
    if map_location is not None:
        if isinstance(map_location, Mapping):
            target = map_location.get(info.device)
            if target is None:
                return _saved_placement(info, where)
            return _device(target, where, info.key)
        if callable(map_location):
            raise CheckpointError(
                f"{where}: map_location as a function is not supported; pass a device, a "
                "device string or a dict {saved device: device}"
            )
        return _device(map_location, where, info.key)
    return _saved_placement(info, where)


def _resolve_device(d) -> JaxDevice:
    """A jax device for a device spec; with several processes ``"cpu"``/``"cuda:N"`` name this process's own
    devices (as ``map_location="cuda:0"`` means each rank's first GPU in torch)."""
    if isinstance(d, jax.Device):
        return d
    d = d if isinstance(d, Device) else Device(d)
    jd = to_jax_device(d)
    if _multi.count() > 1 and jd not in jax.local_devices():
        local = [x for x in jax.local_devices() if x.platform == jd.platform]
        if not local:
            raise CheckpointError(f"process {_multi.rank()} has no local {d.type} device")
        jd = local[min(d.index or 0, len(local) - 1)]
    return jd


def _device(d, where: str, key: str) -> JaxDevice | jax.sharding.Sharding:
    if isinstance(d, jax.sharding.Sharding):
        return d
    try:
        return _resolve_device(d)
    except LazyflowError as e:
        raise CheckpointError(f"{where}: cannot place '{key}' on map_location={d!r}: {e}") from e


def _saved_placement(info: TensorInfo, where: str):
    if info.sharding is not None:
        try:
            return info.sharding.to_sharding()
        except CheckpointError as e:
            raise CheckpointError(f"{where}: '{info.key}': {e}") from None
    try:
        return _resolve_device(info.device)
    except LazyflowError as e:
        raise CheckpointError(
            f"{where}: '{info.key}' was saved on {info.device}, which does not exist "
            f"here ({e}); pass map_location='cpu' (or another device)"
        ) from None


def _region_data(arr: jax.Array, region: tuple, shards: dict):
    """The saved region's values from a restored (possibly resharded) array, or None when no part of this
    process holds all of it (another process verifies it then)."""
    sh = shards.get(region)
    if sh is not None:
        return np.asarray(sh.data)
    for idx, sh in shards.items():  # inside one local shard: slice that shard on the host
        if all(a <= lo and hi <= b for (lo, hi), (a, b) in zip(region, idx)):
            return np.asarray(sh.data)[tuple(slice(lo - a, hi - a) for (lo, hi), (a, _) in zip(region, idx))]
    if arr.is_fully_addressable:
        return np.asarray(arr[tuple(slice(a, b) for a, b in region)])
    return None


class _Reader:
    """Reads a set of entries (and only the bytes they need), verifies them, places them."""

    def __init__(self, path: str, vdir: str, meta: dict, map_location, sharding):
        self.path, self.vdir, self.meta = path, vdir, meta
        self.where = f"checkpoint '{path}'"
        self.entries = meta["entries"]
        self.by_key = {e["key"]: i for i, e in enumerate(self.entries)}
        by_key = {e["key"]: e for e in self.entries}
        self.infos = [info_of(e, by_key) for e in self.entries]
        self.map_location, self.sharding = map_location, sharding

    def _root(self, i: int) -> int:
        """The entry owning ``i``'s bytes (validated: a ``same`` entry names an owner, never another ``same``)."""
        st = self.entries[i]["storage"]
        return self.by_key[st[1]] if st[0] == "same" else i

    def read(self, wanted: Sequence[int]) -> dict[int, Any]:
        """Values (Tensors / numpy arrays) for entry indices ``wanted``: reads only the bytes they need,
        verifies every checksum, then places them."""
        from . import _store

        roots = {i: self._root(i) for i in wanted}
        needed = sorted(set(roots.values()))
        args: dict[str, Any] = {}
        groups: dict[str, list[int]] = {}  # packed group -> the entries read from it
        owned: dict[str, int] = {}  # own host array -> its entry
        for r in needed:
            e = self.entries[r]
            st = e["storage"]
            if st[0] == "packed":
                groups.setdefault(st[1], []).append(r)
            elif st[0] == "array" and e["sharding"] is not None:
                place = self._placement(r)
                target = place if isinstance(place, jax.sharding.Sharding) else jax.sharding.SingleDeviceSharding(place)
                args[st[1]] = _store.ocp.ArrayRestoreArgs(
                    restore_type=jax.Array,
                    sharding=target,
                    global_shape=tuple(e["shape"]),
                    dtype=dtype_from_name(e["dtype"]),
                )
            elif st[0] == "array":
                n = int(e.get("nbytes", 0))
                spans = tuple((lo, min(lo + _crc.CRC_CHUNK, n)) for lo in range(0, max(n, 1), _crc.CRC_CHUNK))
                args[st[1]] = _store.HostRestoreArgs(restore_type=np.ndarray, checks=(spans,))
                owned[st[1]] = r
            elif st[0] != "empty":
                raise CheckpointError(f"{self.where}: unknown storage {st[0]!r} for '{e['key']}'")
        for g, rs in groups.items():
            if g not in self.meta["groups"]:
                raise CheckpointError(
                    f"{self.where}: packed group {g!r} of '{self.entries[rs[0]]['key']}' is not in the metadata"
                )
            spans = tuple((off, off + n) for _, _, off, n in (self.entries[r]["storage"] for r in rs))
            if sum(hi - lo for lo, hi in spans) * 2 >= self.meta["groups"][g]["nbytes"]:
                args[g] = _store.HostRestoreArgs(restore_type=np.ndarray, checks=(spans,))
            else:  # a partial load of a few small tensors: read just their byte ranges
                args[g] = _store.HostRestoreArgs(
                    restore_type=np.ndarray, ranges=spans, checks=tuple(((0, hi - lo),) for lo, hi in spans)
                )
        try:
            raw = _store.read_arrays(self.vdir, args, _crc.executor)
        except LazyflowError:
            raise
        except Exception as e:
            keys = [self.entries[r]["key"] for r in needed if self.entries[r]["storage"][0] != "empty"]
            shown = ", ".join(keys[:6]) + (", ..." if len(keys) > 6 else "")
            raise CheckpointError(
                f"{self.where}: reading the tensor data failed for {shown} "
                f"({type(e).__name__}: {e}); the checkpoint's files are damaged or "
                "incomplete"
            ) from e
        host = self._verify(needed, groups, owned, args, raw)
        values = self._place(needed, host, raw)
        return {i: self._wrap(i, values[roots[i]]) for i in wanted}

    def _placement(self, r: int):
        return _placement(self.entries[r], self.infos[r], self.map_location, self.sharding, self.where)

    def _verify(self, needed, groups, owned, args, raw) -> dict[int, np.ndarray]:
        """Check every checksum; returns the host bytes (uint8 views) of the host-read entries."""
        host, bad = {}, []

        def check(r, crcs):
            if list(self.entries[r].get("crc", ())) != list(crcs):
                bad.append(self.entries[r]["key"])

        for leaf, r in owned.items():
            got = raw[leaf]
            host[r] = got.buffers[0].reshape(-1).view(np.uint8)
            check(r, got.crcs[0])
        for g, rs in groups.items():
            got = raw[g]
            if args[g].ranges is None:  # the whole group: one buffer, one CRC per member
                flat = got.buffers[0].reshape(-1).view(np.uint8)
                for r, crc in zip(rs, got.crcs[0]):
                    _, _, off, n = self.entries[r]["storage"]
                    host[r] = flat[off : off + n]
                    check(r, [crc])
            else:  # one buffer per member
                for r, buf, crcs in zip(rs, got.buffers, got.crcs):
                    host[r] = buf.view(np.uint8)
                    check(r, crcs)
        for r in needed:
            e = self.entries[r]
            if e["storage"][0] == "empty":
                host[r] = np.empty(0, np.uint8)
            elif e["storage"][0] == "array" and e["sharding"] is not None:
                arr = raw[e["storage"][1]]
                shards = {
                    tuple((s.start or 0, dim if s.stop is None else s.stop) for s, dim in zip(sh.index, arr.shape)): sh
                    for sh in arr.addressable_shards
                }
                for region, crcs in e.get("crc", ()):
                    data = _region_data(arr, tuple(tuple(x) for x in region), shards)
                    if data is not None and _crc.crc_chunks(data) != list(crcs):
                        bad.append(e["key"])
                        break
        if bad:
            shown = ", ".join(f"'{k}'" for k in bad[:8]) + (", ..." if len(bad) > 8 else "")
            raise CheckpointError(
                f"{self.where} is corrupted: the data of {shown} do not match their "
                "checksums (CRC-32); the files were changed or damaged after saving"
            )
        for r, v in host.items():
            e = self.entries[r]
            want = int(np.prod(e["shape"], dtype=np.int64)) * dtype_from_name(e["dtype"]).itemsize
            if v.nbytes != want:
                raise CheckpointError(f"{self.where}: '{e['key']}' has {v.nbytes} bytes on disk, expected {want}")
        return host

    def _place(self, needed, host, raw) -> dict[int, Any]:
        """Typed host views placed on their devices (one batched ``device_put`` per placement: on CPU it
        wraps the aligned buffers without copying)."""
        out: dict[int, Any] = {}
        batches: dict[Any, list[int]] = {}
        for r in needed:
            e = self.entries[r]
            if e["storage"][0] == "array" and e["sharding"] is not None:
                out[r] = raw[e["storage"][1]]
                continue
            arr = host[r].view(dtype_from_name(e["dtype"])).reshape(tuple(e["shape"]))
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
        if e["requires_grad"] and t.dtype.is_inexact:
            t._rg = True
        if e["kind"] == "parameter":
            from ..nn.parameter import Parameter

            return Parameter(t, requires_grad=bool(e["requires_grad"]))
        if e["kind"] == "buffer":
            from ..nn.parameter import Buffer

            return Buffer(t, persistent=bool(e.get("persistent", True)))
        return t


def _open(path: str, map_location, sharding) -> _Reader:
    vdir, meta = read_meta(path)
    return _Reader(path, vdir, meta, map_location, sharding)


def load(
    path: str | os.PathLike,
    *,
    map_location: Any = None,
    sharding: jax.sharding.Sharding | Callable[[str, TensorInfo], Any] | None = None,
    weights_only: bool = True,
) -> Any:
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
    path = _layout.as_path(path, "lf.load")
    return _layout.retrying(path, lambda: _load(path, map_location, sharding, weights_only))


def _load(path: str, map_location, sharding, weights_only: bool) -> Any:
    reader = _open(path, map_location, sharding)
    values = reader.read(range(len(reader.entries)))

    def persistent_load(pid):
        if not (
            isinstance(pid, tuple)
            and len(pid) == 2
            and pid[0] == _unpickler.PID_TAG
            and isinstance(pid[1], int)
            and 0 <= pid[1] < len(values)
        ):
            raise CheckpointUnpicklingError(
                f"{reader.where}: bad tensor reference {pid!r} in the metadata (expected "
                f"('{_unpickler.PID_TAG}', index) with 0 <= index < {len(values)})"
            )
        return values[pid[1]]

    return _unpickler.loads(reader.meta["structure"], persistent_load, weights_only=weights_only, where=reader.where)


def load_tensors(
    path: str | os.PathLike,
    keys: Sequence[str] | None = None,
    *,
    map_location: Any = None,
    sharding: jax.sharding.Sharding | Callable[[str, TensorInfo], Any] | None = None,
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
    path = _layout.as_path(path, "lf.checkpoint.load_tensors")
    return _layout.retrying(path, lambda: _load_tensors(path, keys, map_location, sharding))


def _load_tensors(path: str, keys, map_location, sharding) -> dict[str, Any]:
    reader = _open(path, map_location, sharding)
    if keys is None:
        keys = [e["key"] for e in reader.entries]
    missing = [k for k in keys if k not in reader.by_key]
    if missing:
        import difflib

        hint = difflib.get_close_matches(missing[0], list(reader.by_key), n=3)
        raise CheckpointError(
            f"{reader.where} has no tensor {missing[0]!r}"
            + (f" (close: {hint})" if hint else "")
            + f"; it holds {len(reader.by_key)} keys, see lf.checkpoint.inspect"
        )
    idx = [reader.by_key[k] for k in keys]
    values = reader.read(idx)
    return {k: values[i] for k, i in zip(keys, idx)}
