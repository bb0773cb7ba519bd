"""The save plan: find the tensors in an object, name them, lay their bytes out, and checksum them.

Every Tensor and numpy array in the saved object becomes one *entry* (a dict in the metadata) with a
dotted key naming where it sits (``model.layer1.weight``), its shape, dtype and storage:

* ``("array", name)``: its own orbax array -- tensors of at least ``PACK_MAX`` bytes, and every sharded
  tensor (saved shard by shard);
* ``("packed", group, offset, nbytes)``: a byte range of a per-dtype packed group (a flat uint8 orbax
  array), for small single-device tensors: orbax pays about a millisecond per array;
* ``("same", key)``: the bytes of an earlier entry (two Tensor objects sharing one JAX array);
* ``("empty",)``: no bytes at all.

Checksums are CRC-32 (zlib) over ``CRC_CHUNK``-byte chunks of each entry's bytes in C order (so a flipped
byte names its tensor); a sharded tensor has one CRC list per saved shard, keyed by the shard's region.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.core
import numpy as np

from .._core.errors import CheckpointError
from .._tensor import Tensor
from . import _store
from ._crc import bytes_view, crc_many

__all__ = ["PACK_MAX", "GROUP_MAX", "Plan", "tensor_kind"]

PACK_MAX = 1 << 20  # tensors below this many bytes are packed into groups
GROUP_MAX = 32 << 20  # a packed group holds at most this many bytes (bounded reads for partial loads)
ZARR_CHUNK = 8 << 20  # orbax chunk size for big arrays: reads of several chunks run in parallel
_ALIGN = _store.ALIGN


def tensor_kind(t: Tensor) -> str:
    """``"parameter"``/``"buffer"`` for lazyflow's nn classes, ``"tensor"`` otherwise."""
    cls = type(t)
    if cls is Tensor:
        return "tensor"
    if cls.__module__.startswith("lazyflow.nn"):
        if cls.__name__ == "Parameter":
            return "parameter"
        if cls.__name__ == "Buffer":
            return "buffer"
    return "tensor"


def _sharding_record(arr: jax.Array) -> dict | None:
    s = arr.sharding
    if len(s.device_set) <= 1:
        return None
    if isinstance(s, jax.sharding.NamedSharding):
        mesh = s.mesh
        if not isinstance(mesh, jax.sharding.Mesh):
            raise CheckpointError(f"cannot save an array sharded over an abstract mesh ({mesh}); it has no devices")
        spec = tuple(p if p is None or isinstance(p, str) else tuple(p) for p in s.spec)
        return {
            "type": "named",
            "mesh_shape": tuple(mesh.devices.shape),
            "axis_names": tuple(mesh.axis_names),
            "device_ids": tuple(int(d.id) for d in mesh.devices.flat),
            "spec": spec,
        }
    return {"type": type(s).__name__, "device_ids": tuple(sorted(int(d.id) for d in s.device_set))}


def _device_str(arr: jax.Array) -> str:
    d = min(arr.sharding.device_set, key=lambda d: d.id)
    return "cpu" if d.platform == "cpu" else f"{'cuda' if d.platform in ('gpu', 'cuda', 'rocm') else d.platform}:{d.id}"


def _is_leaf(obj) -> bool:
    """Tensors, and numpy arrays of numeric dtypes (strings/objects/records stay in the pickle)."""
    return isinstance(obj, Tensor) or (
        isinstance(obj, np.ndarray) and (obj.dtype.kind in "biufc" or obj.dtype.name == "bfloat16")
    )


def _join(prefix: str, k) -> str:
    return str(k) if not prefix else f"{prefix}.{k}"


class Plan:
    """Everything one save writes, built synchronously from the object (the data are referenced, never
    changed: JAX arrays are immutable and lazyflow does not donate a buffer something else references)."""

    def __init__(self, obj: Any, *, snapshot_numpy: bool):
        self.entries: list[dict] = []
        self._index: dict[int, int] = {}  # id(Tensor or ndarray) -> entry index
        self._keys: set[str] = set()
        self._anon = 0
        self._snapshot_numpy = snapshot_numpy
        self._keep: list = []  # objects whose ids are in _index (so that ids stay unique)
        self._walk(obj, "", set())
        from . import _unpickler

        self.structure = _unpickler.dumps(obj, self._persistent_id)
        self._layout()

    # ---------------------------------------------------------------- discovery
    def _walk(self, obj, prefix: str, seen: set) -> None:
        if _is_leaf(obj):
            self._register(obj, prefix)
            return
        if isinstance(obj, (dict, list, tuple)):
            if id(obj) in seen:
                return
            seen.add(id(obj))
            items = obj.items() if isinstance(obj, dict) else enumerate(obj)
            for k, v in items:
                self._walk(v, _join(prefix, k), seen)

    def _unique_key(self, key: str) -> str:
        key = key or "tensor"
        if key not in self._keys:
            return key
        n = 2
        while f"{key}#{n}" in self._keys:
            n += 1
        return f"{key}#{n}"

    def _register(self, obj, key: str) -> int:
        i = self._index.get(id(obj))
        if i is not None:
            return i
        key = self._unique_key(key)
        self._keys.add(key)
        if isinstance(obj, Tensor):
            value = obj._value
            if isinstance(value, jax.core.Tracer):
                raise CheckpointError(
                    f"cannot save tensor '{key}': it is traced inside lf.compile / lf.nn.Graph; save the "
                    "module's state_dict outside the compiled function"
                )
            entry = {
                "key": key,
                "kind": tensor_kind(obj),
                "dtype": obj.dtype.name,
                "shape": tuple(obj.shape),
                "requires_grad": bool(obj._rg),
            }
            if entry["kind"] == "buffer":
                entry["persistent"] = bool(getattr(obj, "persistent", True))
            entry["device"] = _device_str(value)
            entry["sharding"] = _sharding_record(value)
            data = value
        else:
            data = np.array(obj, order="C", copy=True) if self._snapshot_numpy else np.ascontiguousarray(obj)
            entry = {
                "key": key,
                "kind": "ndarray",
                "dtype": obj.dtype.name if obj.dtype.name == "bfloat16" else obj.dtype.str,
                "shape": tuple(obj.shape),
                "requires_grad": False,
                "device": "cpu",
                "sharding": None,
            }
        entry["_data"] = data
        self._index[id(obj)] = len(self.entries)
        self._keep.append(obj)
        self.entries.append(entry)
        return len(self.entries) - 1

    def _persistent_id(self, obj):
        if _is_leaf(obj):
            i = self._index.get(id(obj))
            if i is None:
                self._anon += 1
                i = self._register(obj, f"<unnamed>.{self._anon}")
            return ("lazyflow.tensor", i)
        return None

    # ---------------------------------------------------------------- layout
    def _layout(self) -> None:
        """Assign storage: own arrays, packed groups or empty; build the orbax leaves."""
        self.arrays: dict[str, Any] = {}  # orbax leaf name -> np.ndarray | jax.Array
        self.save_args: dict[str, Any] = {}
        self.groups: dict[str, dict] = {}
        by_data: dict[int, dict] = {}  # id(array) -> first entry holding it (shared storage)
        pack: dict[str, list[dict]] = {}
        for e in self.entries:
            data = e["_data"]
            first = by_data.get(id(data))
            if first is not None:
                e["storage"] = ("same", first["key"])
                continue
            by_data[id(data)] = e
            nbytes = int(np.prod(e["shape"], dtype=np.int64)) * np.dtype(data.dtype).itemsize
            e["nbytes"] = nbytes
            if nbytes == 0:
                e["storage"] = ("empty",)
            elif e["sharding"] is not None or nbytes >= PACK_MAX:
                name = f"a{len(self.arrays)}"
                e["storage"] = ("array", name)
                leaf = data if e["sharding"] is not None else np.asarray(data)
                self.arrays[name] = leaf
                self.save_args[name] = _store.ocp.SaveArgs(chunk_byte_size=ZARR_CHUNK if nbytes > ZARR_CHUNK else None)
            else:
                pack.setdefault(np.dtype(data.dtype).name, []).append(e)
        for dtname, members in pack.items():
            start = 0
            while start < len(members):
                size, end = 0, start
                while end < len(members) and (end == start or size + members[end]["nbytes"] <= GROUP_MAX):
                    size += -size % _ALIGN + members[end]["nbytes"]
                    end += 1
                self._pack_group(dtname, members[start:end])
                start = end

    def _pack_group(self, dtname: str, members: list[dict]) -> None:
        name = f"g{len(self.groups)}"
        offsets, size = [], 0
        for e in members:
            size += -size % _ALIGN
            offsets.append(size)
            size += e["nbytes"]
        buf = _store.aligned_empty(size)
        for e, off in zip(members, offsets):
            buf[off : off + e["nbytes"]] = bytes_view(np.asarray(e["_data"]))
            e["storage"] = ("packed", name, off, e["nbytes"])
        self.groups[name] = {"dtype": dtname, "nbytes": size}
        self.arrays[name] = buf
        self.save_args[name] = _store.ocp.SaveArgs(chunk_byte_size=ZARR_CHUNK if size > ZARR_CHUNK else None)

    # ---------------------------------------------------------------- checksums (may run in the background)
    def checksum(self, *, host_data: bool = True) -> None:
        """Fill ``crc`` of every entry that owns bytes (reads the data; call after the layout). Sharded
        tensors get the CRCs of this process's shards; ``host_data=False`` skips the single-device tensors
        (processes other than the primary: only the primary writes those)."""
        host, owners = [], []
        for e in self.entries:
            kind = e["storage"][0]
            if kind in ("array", "packed") and e["sharding"] is None and not host_data:
                continue
            if kind == "array" and e["sharding"] is None:
                host.append(self.arrays[e["storage"][1]])
                owners.append((e, None))
            elif kind == "packed":
                _, g, off, n = e["storage"]
                host.append(self.arrays[g][off : off + n])
                owners.append((e, None))
            elif kind == "array":
                arr = e["_data"]
                e["crc"] = []
                for shard in arr.addressable_shards:
                    if shard.replica_id != 0:
                        continue
                    region = tuple(
                        (s.start or 0, dim if s.stop is None else s.stop) for s, dim in zip(shard.index, arr.shape)
                    )
                    host.append(np.asarray(shard.data))
                    owners.append((e, region))
        for (e, region), crcs in zip(owners, crc_many(host)):
            if region is None:
                e["crc"] = crcs
            else:
                e["crc"].append((region, crcs))

    def sharded_crcs(self) -> dict[int, list]:
        """``{entry index: [(region, crcs), ...]}`` of the sharded tensors (this process's shards)."""
        return {
            i: list(e["crc"])
            for i, e in enumerate(self.entries)
            if e["storage"][0] == "array" and e["sharding"] is not None
        }

    def merge_sharded_crcs(self, per_process: list[dict[int, list]]) -> None:
        """Combine every process's :meth:`sharded_crcs` (each region once) into the entries."""
        for i, e in enumerate(self.entries):
            if e["storage"][0] == "array" and e["sharding"] is not None:
                merged = {}
                for part in per_process:
                    for region, crcs in part.get(i, ()):
                        merged.setdefault(tuple(tuple(r) for r in region), crcs)
                e["crc"] = sorted(merged.items())

    def records(self) -> list[dict]:
        """The entries as stored (without the data references)."""
        return [{k: v for k, v in e.items() if k != "_data"} for e in self.entries]
