"""Validation of the metadata record before anything uses it.

Every field a reader touches is checked for its type and range here, once, so that a hostile or damaged
record raises :class:`CheckpointError` naming the entry, the field, what was expected and what arrived --
never a raw ``KeyError``/``TypeError``, never a loop or an allocation sized by a lie. References between
entries form no graph to walk: a ``("same", key)`` entry names an *owning* entry (never another ``same``),
so there are no chains and no cycles; packed ranges lie inside their group; array and group names are
lazyflow's own (``a<n>``, ``g<n>``) and used once.
"""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np

from .._core import dtypes as D
from .._core.errors import CheckpointError
from ._crc import CRC_CHUNK, dtype_from_name

__all__ = ["validate", "KINDS", "STORAGES"]

KINDS = ("tensor", "parameter", "buffer", "ndarray")
STORAGES = ("array", "packed", "same", "empty")
_ARRAY_NAME = re.compile(r"a[0-9]{1,9}")
_GROUP_NAME = re.compile(r"g[0-9]{1,9}")
_MAX_NDIM = 64
_MAX_BYTES = 1 << 62  # beyond any real tensor; keeps offset arithmetic exact


def _what(v: Any) -> str:
    """A short repr: the record holds plain values only (dicts, lists, tuples, str, bytes, numbers, None)."""
    r = repr(v)
    return r if len(r) <= 80 else f"{r[:77]}... (a {type(v).__name__})"


class _Checker:
    """Checks run inline (``if not ok: c.fail(...)``): a message is only built for the field that fails."""

    def __init__(self, where: str):
        self.where = where
        self.dtypes: dict[tuple[str, bool], np.dtype] = {}  # (name, is ndarray) -> dtype, parsed once

    def fail(self, ctx: str, expected: str, got: Any):
        raise CheckpointError(
            f"{self.where}: the metadata is malformed: {ctx} should be {expected}, got {_what(got)}"
            "; the checkpoint is damaged or was not written by lf.save"
        )

    def field(self, d: dict, name: str, ctx: str, expected: str):
        try:
            return d[name]
        except KeyError:
            self.fail(f"{ctx} field '{name}'", expected, "nothing (the field is missing)")

    def ints(self, v: Any, ctx: str, lo: int = 0, hi: int = _MAX_BYTES) -> tuple:
        """``v`` as a tuple of ints in [lo, hi] (a tuple or list in the record)."""
        if type(v) not in (tuple, list) or not all(type(x) is int and lo <= x <= hi for x in v):
            self.fail(ctx, f"a tuple of ints in [{lo}, {hi}]", v)
        return tuple(v)


def _dtype(c: _Checker, e: dict, ctx: str) -> np.dtype:
    name = c.field(e, "dtype", ctx, "a dtype name")
    hit = c.dtypes.get((name, e["kind"] == "ndarray")) if type(name) is str else None
    if hit is not None:
        return hit
    if type(name) is not str or len(name) > 32:
        c.fail(f"{ctx} 'dtype'", "a dtype name", name)
    c.dtypes[name, e["kind"] == "ndarray"] = dt = _parse_dtype(c, e, name, ctx)
    return dt


def _parse_dtype(c: _Checker, e: dict, name: str, ctx: str) -> np.dtype:
    if e["kind"] != "ndarray":
        try:
            return D.to_dtype(name).np
        except Exception:
            c.fail(f"{ctx} 'dtype'", "a lazyflow dtype name (float32, bfloat16, int64...)", name)
    try:
        return dtype_from_name(name)
    except CheckpointError:
        c.fail(f"{ctx} 'dtype'", "a numeric numpy dtype string ('<f4', '<i8'...)", name)


def _sharding(c: _Checker, s: Any, ndim: int, ctx: str) -> None:
    ctx = f"{ctx} sharding"
    if type(s) is not dict:
        c.fail(ctx, "None or a dict", s)
    ids = c.ints(c.field(s, "device_ids", ctx, "a tuple of device ids"), f"{ctx} device_ids", 0, 1 << 31)
    if not 0 < len(ids) <= 1 << 20:
        c.fail(f"{ctx} device_ids", "a non-empty tuple", s["device_ids"])
    if type(c.field(s, "type", ctx, "a str")) is not str:
        c.fail(f"{ctx} 'type'", "a str", s["type"])
    if s["type"] != "named":
        return
    shape = c.ints(c.field(s, "mesh_shape", ctx, "a tuple of ints"), f"{ctx} mesh_shape", 1, 1 << 20)
    if math.prod(shape) != len(ids):
        c.fail(f"{ctx} mesh_shape", f"dims whose product is {len(ids)}", s["mesh_shape"])
    axes = c.field(s, "axis_names", ctx, "a tuple of str")
    if type(axes) not in (tuple, list) or len(axes) != len(shape) or not all(type(a) is str for a in axes):
        c.fail(f"{ctx} axis_names", f"{len(shape)} axis names", axes)
    spec = c.field(s, "spec", ctx, "a tuple")
    if type(spec) not in (tuple, list) or len(spec) > ndim:
        c.fail(f"{ctx} spec", f"a tuple of at most {ndim} entries", spec)
    for p in spec:
        if not (p is None or p in axes or (type(p) in (tuple, list) and all(a in axes for a in p))):
            c.fail(f"{ctx} spec entry", f"None, one of {tuple(axes)} or a tuple of them", p)


def _crcs(c: _Checker, v: Any, nbytes: int, ctx: str) -> None:
    want = max(1, -(-nbytes // CRC_CHUNK))
    crcs = c.ints(v, ctx, 0, 0xFFFFFFFF)
    if len(crcs) != want:
        c.fail(ctx, f"{want} CRC-32 values (one per {CRC_CHUNK >> 20} MiB)", v)


def _sharded_crcs(c: _Checker, v: Any, shape: tuple, ctx: str) -> None:
    if type(v) not in (tuple, list):
        c.fail(ctx, "a list of (region, crcs)", v)
    for item in v:
        if type(item) not in (tuple, list) or len(item) != 2:
            c.fail(ctx, "(region, crcs) pairs", item)
        region = item[0]
        if type(region) not in (tuple, list) or len(region) != len(shape):
            c.fail(f"{ctx} region", f"{len(shape)} (start, stop) pairs", region)
        for r, dim in zip(region, shape):
            if not (
                type(r) in (tuple, list) and len(r) == 2 and all(type(x) is int for x in r) and 0 <= r[0] <= r[1] <= dim
            ):
                c.fail(f"{ctx} region", f"(start, stop) within 0..{dim}", r)
        c.ints(item[1], f"{ctx} crcs", 0, 0xFFFFFFFF)


def validate(meta: Any, where: str) -> None:
    """Check the metadata record (see docs/checkpoint-format.md) before any of it is used.

    Raises:
        CheckpointError: the first field that is missing, of the wrong type or out of range, naming the entry.
    """
    c = _Checker(where)
    if type(meta) is not dict:
        c.fail("the metadata record", "a dict", meta)
    entries = c.field(meta, "entries", "the record", "a list of tensor entries")
    if type(entries) is not list:
        c.fail("the record field 'entries'", "a list of tensor entries", entries)
    groups = c.field(meta, "groups", "the record", "a dict of packed groups")
    if type(groups) is not dict:
        c.fail("the record field 'groups'", "a dict of packed groups", groups)
    structure = c.field(meta, "structure", "the record", "bytes (the pickled structure)")
    if type(structure) is not bytes:
        c.fail("the record field 'structure'", "bytes (the pickled structure)", structure)
    for g, info in groups.items():
        if type(g) is not str or _GROUP_NAME.fullmatch(g) is None:
            c.fail("a packed group name", "g<number>", g)
        if type(info) is not dict:
            c.fail(f"packed group '{g}'", "a dict", info)
        c.ints((c.field(info, "nbytes", f"packed group '{g}'", "an int"),), f"packed group '{g}' 'nbytes'")
    owners: dict[str, tuple] = {}  # key -> (shape, dtype) of the entries that own bytes
    arrays: set[str] = set()
    seen: set[str] = set()
    for i, e in enumerate(entries):
        if type(e) is not dict:
            c.fail(f"metadata entry {i}", "a dict", e)
        key = c.field(e, "key", f"entry {i}", "a str")
        if type(key) is not str:
            c.fail(f"entry {i} 'key'", "a str", key)
        ctx = f"entry {i} ('{key if len(key) <= 60 else key[:57] + '...'}')"
        if key in seen:
            c.fail(f"{ctx} 'key'", "unique", key)
        seen.add(key)
        if c.field(e, "kind", ctx, f"one of {KINDS}") not in KINDS:
            c.fail(f"{ctx} 'kind'", f"one of {KINDS}", e["kind"])
        dt = _dtype(c, e, ctx)
        shape = c.ints(c.field(e, "shape", ctx, "a tuple of ints"), f"{ctx} 'shape'")
        if len(shape) > _MAX_NDIM:
            c.fail(f"{ctx} 'shape'", f"at most {_MAX_NDIM} dimensions", e["shape"])
        nbytes = math.prod(shape) * dt.itemsize
        if nbytes > _MAX_BYTES:
            c.fail(f"{ctx} 'shape'", "a shape of a representable size", e["shape"])
        if type(c.field(e, "requires_grad", ctx, "a bool")) is not bool:
            c.fail(f"{ctx} 'requires_grad'", "a bool", e["requires_grad"])
        if type(e.get("persistent", False)) is not bool:
            c.fail(f"{ctx} 'persistent'", "a bool", e["persistent"])
        if type(c.field(e, "device", ctx, "a device string")) is not str:
            c.fail(f"{ctx} 'device'", "a device string", e["device"])
        sharding = c.field(e, "sharding", ctx, "None or a dict")
        if sharding is not None:
            _sharding(c, sharding, len(shape), ctx)
        st = c.field(e, "storage", ctx, "a storage tuple")
        if type(st) not in (tuple, list) or not st or st[0] not in STORAGES:
            c.fail(f"{ctx} 'storage'", f"a tuple starting with one of {STORAGES}", st)
        kind = st[0]
        if kind == "same":
            if not (len(st) == 2 and type(st[1]) is str and st[1] in owners):
                c.fail(f"{ctx} 'storage'", "('same', key) naming an earlier entry that owns its bytes", st)
            if owners[st[1]] != (shape, dt):
                c.fail(f"{ctx} 'storage'", f"a shared entry of the same shape {shape} and dtype {dt}", st)
            continue
        if c.field(e, "nbytes", ctx, "an int") != nbytes or type(e["nbytes"]) is not int:
            c.fail(f"{ctx} 'nbytes'", f"{nbytes} (shape {shape} x {dt.itemsize} bytes)", e["nbytes"])
        owners[key] = (shape, dt)
        if kind == "empty":
            if len(st) != 1 or nbytes:
                c.fail(f"{ctx} 'storage'", "('empty',) for a tensor of 0 bytes", st)
            continue
        if kind == "array":
            if not (
                len(st) == 2
                and type(st[1]) is str
                and _ARRAY_NAME.fullmatch(st[1])
                and st[1] not in arrays
                and nbytes > 0
            ):
                c.fail(f"{ctx} 'storage'", "('array', 'a<number>') of at least 1 byte, with a name used once", st)
            arrays.add(st[1])
        else:
            if not (len(st) == 4 and type(st[1]) is str and st[1] in groups):
                c.fail(f"{ctx} 'storage'", "('packed', group, offset, nbytes) naming a group of the record", st)
            off, n = c.ints(st[2:], f"{ctx} packed offset and size")
            if n != nbytes or off + n > groups[st[1]]["nbytes"]:
                c.fail(
                    f"{ctx} 'storage'", f"{nbytes} bytes inside group '{st[1]}' ({groups[st[1]]['nbytes']} bytes)", st
                )
        crc = c.field(e, "crc", ctx, "the CRC-32 values")
        if kind == "array" and sharding is not None:
            _sharded_crcs(c, crc, shape, f"{ctx} 'crc'")
        else:
            _crcs(c, crc, nbytes, f"{ctx} 'crc'")
