"""The metadata file (framing, encoding, reading) and what ``inspect`` reports about each saved tensor."""

from __future__ import annotations

import dataclasses
import os
import struct
from collections.abc import Sequence
from typing import Any

import jax
import numpy as np

from .._core import dtypes as D
from .._core.device import JaxDevice
from .._core.errors import CheckpointError
from . import _layout, _schema, _unpickler
from ._crc import crc32, dtype_from_name

__all__ = ["FORMAT_VERSION", "inspect", "TensorInfo", "SavedSharding", "read_meta", "encode_meta", "info_of", "frame"]

FORMAT_VERSION = 1
_MAGIC = b"LFCKPT\x00\x01"
_HEADER = struct.Struct("<IQ")  # crc32 of the payload, payload length


def frame(payload: bytes) -> bytes:
    return _MAGIC + _HEADER.pack(crc32(payload), len(payload)) + payload


def _unframe(data: bytes, where: str) -> bytes:
    n = len(_MAGIC) + _HEADER.size
    if len(data) < n or data[: len(_MAGIC)] != _MAGIC:
        raise CheckpointError(f"{where}: the metadata file is not lazyflow's (bad magic bytes)")
    crc, length = _HEADER.unpack_from(data, len(_MAGIC))
    payload = data[n:]
    if len(payload) != length:
        raise CheckpointError(f"{where}: the metadata file is truncated ({len(payload)} of {length} bytes)")
    if crc32(payload) != crc:
        raise CheckpointError(f"{where}: the metadata file is corrupted (checksum mismatch)")
    return payload


def _lazyflow_version() -> str:
    try:
        import importlib.metadata

        return importlib.metadata.version("lazyflow")
    except Exception:
        return "unknown"


def encode_meta(plan) -> bytes:
    """The metadata file's bytes for a plan whose checksums are filled in."""
    outer = {
        "format": _layout.FORMAT_NAME,
        "version": FORMAT_VERSION,
        "lazyflow": _lazyflow_version(),
        "entries": plan.records(),
        "groups": plan.groups,
        "structure": plan.structure,
    }
    return frame(_unpickler.dumps(outer))


def read_meta(path: str) -> tuple[str, dict]:
    from . import _store

    vdir = _layout.resolve(path, FORMAT_VERSION)
    where = f"checkpoint '{path}'"
    try:
        data = _store.read_meta(vdir)
    except OSError as e:
        raise CheckpointError(f"{where}: cannot read the metadata file ({e})") from e
    meta = _unpickler.load_record(_unframe(data, where), where)  # plain values: never a global, any weights_only
    if not isinstance(meta, dict) or meta.get("format") != _layout.FORMAT_NAME:
        raise CheckpointError(f"{where}: the metadata file is not lazyflow's")
    if not isinstance(meta.get("version"), int) or meta["version"] > FORMAT_VERSION:
        raise CheckpointError(
            f"{where} has checkpoint format version {meta.get('version')}, newer than the versions this "
            f"lazyflow reads (<= {FORMAT_VERSION}); upgrade lazyflow to load it"
        )
    _schema.validate(meta, where)
    return vdir, meta


# ------------------------------------------------------------------------------------------ inspect
@dataclasses.dataclass(frozen=True)
class SavedSharding:
    """How a tensor was sharded when saved: a ``NamedSharding`` over a mesh of these device ids."""

    mesh_shape: tuple
    axis_names: tuple
    device_ids: tuple
    spec: jax.sharding.PartitionSpec | None

    def to_sharding(self, devices: Sequence[JaxDevice] | None = None) -> jax.sharding.NamedSharding:
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
                    "key and info) or map_location='cpu'"
                )
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


def info_of(e: dict, entries_by_key: dict) -> TensorInfo:
    s = e.get("sharding")
    saved = None
    if s is not None:
        spec = jax.sharding.PartitionSpec(*s["spec"]) if s.get("type") == "named" else None
        saved = SavedSharding(
            tuple(s.get("mesh_shape", (len(s["device_ids"]),))),
            tuple(s.get("axis_names", ("d",))),
            tuple(s["device_ids"]),
            spec,
        )
    dtype = D.to_dtype(e["dtype"]) if e["kind"] != "ndarray" else dtype_from_name(e["dtype"])
    root = entries_by_key[e["storage"][1]] if e["storage"][0] == "same" else e  # validated: one step, an owner
    return TensorInfo(
        e["key"],
        tuple(e["shape"]),
        dtype,
        e["kind"],
        bool(e["requires_grad"]),
        e["device"],
        saved,
        int(root.get("nbytes", 0)),
        e["storage"][0],
    )


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
    path = _layout.as_path(path, "lf.checkpoint.inspect")
    meta = _layout.retrying(path, lambda: read_meta(path)[1])
    by_key = {e["key"]: e for e in meta["entries"]}
    return {e["key"]: info_of(e, by_key) for e in meta["entries"]}
