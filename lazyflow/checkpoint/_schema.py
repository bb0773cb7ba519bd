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
from collections.abc import Sequence
from typing import Any, cast

import numpy as np

from .._core import dtypes as D
from .._core.errors import CheckpointError
from ._allowlist import numeric_dtype
from ._crc import CRC_CHUNK

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
    def __init__(self, where: str):
        self.where = where

    def fail(self, ctx: str, expected: str, got: Any):
        raise CheckpointError(f"{self.where}: the metadata is malformed: {ctx} should be {expected}, got {_what(got)}"
                              "; the checkpoint is damaged or was not written by lf.save")

    def need(self, ok: bool, ctx: str, expected: str, got: Any) -> None:
        if not ok:
            self.fail(ctx, expected, got)

    def field(self, d: dict, name: str, ctx: str, expected: str):
        if name not in d:
            self.fail(f"{ctx} field '{name}'", expected, "nothing (the field is missing)")
        return d[name]

    def int_(self, v: Any, ctx: str, lo: int = 0, hi: int = _MAX_BYTES) -> int:
        self.need(type(v) is int and lo <= v <= hi, ctx, f"an int in [{lo}, {hi}]", v)
        return v

    def seq(self, v: Any, ctx: str, expected: str) -> Sequence[Any]:
        # a tuple, typed as a Sequence: pyright would narrow a tuple by the len() checks inside need()'s argument
        self.need(type(v) in (tuple, list), ctx, expected, v)
        return tuple(v)


def _dtype(c: _Checker, e: dict, ctx: str) -> np.dtype:
    name = c.field(e, "dtype", ctx, "a dtype name")
    c.need(type(name) is str and len(name) <= 32, f"{ctx} 'dtype'", "a dtype name", name)
    if e["kind"] != "ndarray":
        try:
            return D.to_dtype(name).np
        except Exception:  # noqa: BLE001 - an unknown name is reported below
            c.fail(f"{ctx} 'dtype'", "a lazyflow dtype name (float32, bfloat16, int64...)", name)
    try:
        dt = D.to_dtype(name).np
    except Exception:  # noqa: BLE001 - not a lazyflow name: a numpy dtype string such as '<f4'
        try:
            dt = np.dtype(name)
        except Exception:  # noqa: BLE001 - reported below
            dt = None
    c.need(numeric_dtype(dt), f"{ctx} 'dtype'", "a numeric numpy dtype string ('<f4', '<i8'...)", name)
    return cast(np.dtype, dt)  # need() raised unless it is a numeric dtype


def _sharding(c: _Checker, s: Any, ndim: int, ctx: str) -> None:
    if s is None:
        return
    c.need(type(s) is dict, f"{ctx} 'sharding'", "None or a dict", s)
    ids = c.seq(c.field(s, "device_ids", f"{ctx} sharding", "a tuple of device ids"), f"{ctx} sharding device_ids",
                "a tuple of device ids")
    c.need(0 < len(ids) <= 1 << 20, f"{ctx} sharding device_ids", "a non-empty tuple", s["device_ids"])
    for i in ids:
        c.int_(i, f"{ctx} sharding device id", 0, 1 << 31)
    c.need(type(c.field(s, "type", f"{ctx} sharding", "a str")) is str, f"{ctx} sharding 'type'", "a str", s["type"])
    if s["type"] != "named":
        return
    shape = c.seq(c.field(s, "mesh_shape", f"{ctx} sharding", "a tuple of ints"), f"{ctx} sharding mesh_shape",
                  "a tuple of ints")
    for n in shape:
        c.int_(n, f"{ctx} sharding mesh_shape", 1, 1 << 20)
    c.need(math.prod(shape) == len(ids), f"{ctx} sharding mesh_shape", f"dims whose product is {len(ids)}",
           s["mesh_shape"])
    axes = c.seq(c.field(s, "axis_names", f"{ctx} sharding", "a tuple of str"), f"{ctx} sharding axis_names",
                 "a tuple of str")
    c.need(len(axes) == len(shape) and all(type(a) is str for a in axes), f"{ctx} sharding axis_names",
           f"{len(shape)} axis names", s["axis_names"])
    spec = c.seq(c.field(s, "spec", f"{ctx} sharding", "a tuple"), f"{ctx} sharding spec", "a tuple")
    c.need(len(spec) <= ndim, f"{ctx} sharding spec", f"at most {ndim} entries", s["spec"])
    for p in spec:
        c.need(p is None or p in axes or (type(p) in (tuple, list) and all(a in axes for a in p)),
               f"{ctx} sharding spec entry", f"None, one of {axes} or a tuple of them", p)


def _crcs(c: _Checker, v: Any, nbytes: int, ctx: str) -> None:
    crcs = c.seq(v, ctx, "a list of CRC-32 values")
    want = max(1, -(-nbytes // CRC_CHUNK))
    c.need(len(crcs) == want, ctx, f"{want} CRC-32 values (one per {CRC_CHUNK >> 20} MiB)", v)
    for x in crcs:
        c.int_(x, ctx, 0, 0xFFFFFFFF)


def _sharded_crcs(c: _Checker, v: Any, shape: Sequence[int], ctx: str) -> None:
    for item in c.seq(v, ctx, "a list of (region, crcs)"):
        c.need(type(item) in (tuple, list) and len(item) == 2, ctx, "(region, crcs) pairs", item)
        region = c.seq(item[0], f"{ctx} region", "a tuple of (start, stop)")
        c.need(len(region) == len(shape), f"{ctx} region", f"{len(shape)} (start, stop) pairs", item[0])
        for r, dim in zip(region, shape):
            c.need(type(r) in (tuple, list) and len(r) == 2 and all(type(x) is int for x in r)
                   and 0 <= r[0] <= r[1] <= dim, f"{ctx} region", f"(start, stop) within 0..{dim}", r)
        c.seq(item[1], f"{ctx} crcs", "a list of CRC-32 values")
        for x in item[1]:
            c.int_(x, f"{ctx} crcs", 0, 0xFFFFFFFF)


def validate(meta: Any, where: str) -> None:
    """Check the metadata record (see docs/checkpoint-format.md) before any of it is used.

    Raises:
        CheckpointError: the first field that is missing, of the wrong type or out of range, naming the entry.
    """
    c = _Checker(where)
    c.need(type(meta) is dict, "the metadata record", "a dict", meta)
    entries = c.field(meta, "entries", "the record", "a list of tensor entries")
    c.need(type(entries) is list, "the record field 'entries'", "a list of tensor entries", entries)
    groups = c.field(meta, "groups", "the record", "a dict of packed groups")
    c.need(type(groups) is dict, "the record field 'groups'", "a dict of packed groups", groups)
    structure = c.field(meta, "structure", "the record", "bytes (the pickled structure)")
    c.need(type(structure) is bytes, "the record field 'structure'", "bytes (the pickled structure)", structure)
    for g, info in groups.items():
        c.need(type(g) is str and _GROUP_NAME.fullmatch(g) is not None, "a packed group name", "g<number>", g)
        c.need(type(info) is dict, f"packed group '{g}'", "a dict", info)
        c.int_(c.field(info, "nbytes", f"packed group '{g}'", "an int"), f"packed group '{g}' 'nbytes'")
    owners: dict[str, tuple] = {}  # key -> (shape, dtype) of entries that own bytes
    keys, arrays = set(), set()
    for i, e in enumerate(entries):
        c.need(type(e) is dict, f"metadata entry {i}", "a dict", e)
        key = c.field(e, "key", f"entry {i}", "a str")
        c.need(type(key) is str, f"entry {i} 'key'", "a str", key)
        ctx = f"entry {i} ('{key if len(key) <= 60 else key[:57] + '...'}')"
        c.need(key not in keys, f"{ctx} 'key'", "unique", key)
        keys.add(key)
        c.need(c.field(e, "kind", ctx, f"one of {KINDS}") in KINDS, f"{ctx} 'kind'", f"one of {KINDS}", e["kind"])
        dt = _dtype(c, e, ctx)
        shape = c.seq(c.field(e, "shape", ctx, "a tuple of ints"), f"{ctx} 'shape'", "a tuple of ints")
        c.need(len(shape) <= _MAX_NDIM, f"{ctx} 'shape'", f"at most {_MAX_NDIM} dimensions", e["shape"])
        for n in shape:
            c.int_(n, f"{ctx} 'shape'", 0, _MAX_BYTES)
        nbytes = math.prod(shape) * dt.itemsize
        c.need(nbytes <= _MAX_BYTES, f"{ctx} 'shape'", "a shape of a representable size", e["shape"])
        for name in ("requires_grad",) + (("persistent",) if "persistent" in e else ()):
            c.need(type(c.field(e, name, ctx, "a bool")) is bool, f"{ctx} '{name}'", "a bool", e[name])
        c.need(type(c.field(e, "device", ctx, "a device string")) is str, f"{ctx} 'device'", "a device string",
               e["device"])
        _sharding(c, c.field(e, "sharding", ctx, "None or a dict"), len(shape), ctx)
        st = c.seq(c.field(e, "storage", ctx, "a storage tuple"), f"{ctx} 'storage'", "a storage tuple")
        c.need(len(st) > 0 and st[0] in STORAGES, f"{ctx} 'storage'", f"a tuple starting with one of {STORAGES}",
               e["storage"])
        if st[0] == "same":
            c.need(len(st) == 2 and type(st[1]) is str and st[1] in owners, f"{ctx} 'storage'",
                   "('same', key) naming an earlier entry that owns its bytes", e["storage"])
            c.need(owners[st[1]] == (shape, dt), f"{ctx} 'storage'",
                   f"a shared entry of the same shape {shape} and dtype {dt}", e["storage"])
            continue
        c.need(c.field(e, "nbytes", ctx, "an int") == nbytes and type(e["nbytes"]) is int, f"{ctx} 'nbytes'",
               f"{nbytes} (shape {shape} x {dt.itemsize} bytes)", e["nbytes"])
        owners[key] = (shape, dt)
        if st[0] == "empty":
            c.need(len(st) == 1 and nbytes == 0, f"{ctx} 'storage'", "('empty',) for a tensor of 0 bytes", e["storage"])
            continue
        if st[0] == "array":
            c.need(len(st) == 2 and type(st[1]) is str and _ARRAY_NAME.fullmatch(st[1]) is not None
                   and st[1] not in arrays, f"{ctx} 'storage'", "('array', 'a<number>') with a name used once",
                   e["storage"])
            arrays.add(st[1])
            c.need(nbytes > 0, f"{ctx} 'storage'", "an array of at least 1 byte", e["storage"])
        else:
            c.need(len(st) == 4 and type(st[1]) is str and st[1] in groups, f"{ctx} 'storage'",
                   "('packed', group, offset, nbytes) naming a group of the record", e["storage"])
            off, n = c.int_(st[2], f"{ctx} packed offset"), c.int_(st[3], f"{ctx} packed nbytes")
            c.need(n == nbytes and off + n <= groups[st[1]]["nbytes"], f"{ctx} 'storage'",
                   f"{nbytes} bytes inside group '{st[1]}' ({groups[st[1]]['nbytes']} bytes)", e["storage"])
        crc = c.field(e, "crc", ctx, "the CRC-32 values")
        if st[0] == "array" and e["sharding"] is not None:
            _sharded_crcs(c, crc, shape, f"{ctx} 'crc'")
        else:
            _crcs(c, crc, nbytes, f"{ctx} 'crc'")
