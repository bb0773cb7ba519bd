"""Hostile and malformed metadata records, written into real checkpoints (CRC recomputed), and the loader
that opens each of them in a subprocess.

``python hostile_meta.py DIR`` saves one honest checkpoint per case under DIR, rewrites its metadata record
with the case's change, then calls ``lf.load``, ``lf.checkpoint.inspect`` and ``load_tensors`` on it and prints
one JSON line: per case and call, the exception class (or "loaded"), its message and the seconds it took.
A reference cycle used to make ``lf.load`` and ``inspect`` loop forever: the parent runs this with a timeout.
"""

from __future__ import annotations

import copy
import faulthandler
import json
import os
import pickle
import sys
import time

from gadgets import frame


def _entry(rec, key):
    return next(e for e in rec["entries"] if e["key"] == key)


def _set(key, field, value):
    def change(rec):
        _entry(rec, key)[field] = value

    return change


def _drop(key, field):
    def change(rec):
        del _entry(rec, key)[field]

    return change


def _record(field, value):
    def change(rec):
        if value is _MISSING:
            del rec[field]
        else:
            rec[field] = value

    return change


_MISSING = object()


def _cycle(rec):
    _entry(rec, "a")["storage"] = ("same", "b")
    _entry(rec, "b")["storage"] = ("same", "a")


def _self(rec):
    _entry(rec, "b")["storage"] = ("same", "b")


def _chain(rec):  # c -> b -> a: lf.save never writes chains (a shared entry names the first owner)
    _entry(rec, "c")["storage"] = ("same", "b")


def _packed_outside(rec):
    e = _entry(rec, "s")
    _, g, off, n = e["storage"]
    e["storage"] = ("packed", g, rec["groups"][g]["nbytes"] - 4, n)


# name -> (change to the honest record, regex the CheckpointError must match)
CASES = {
    "same_cycle_a_b": (_cycle, "same.*earlier entry that owns"),
    "same_self_reference": (_self, "same.*earlier entry that owns"),
    "same_chain": (_chain, "same.*earlier entry that owns"),
    "same_unknown_key": (_set("b", "storage", ("same", "nope")), "same.*earlier entry"),
    "same_unhashable_key": (_set("b", "storage", ("same", ["a"])), "same.*earlier entry"),
    "same_other_shape": (_set("c", "storage", ("same", "a")), "same shape"),
    "packed_outside_group": (_packed_outside, "inside group"),
    "packed_unknown_group": (_set("s", "storage", ("packed", "g99", 0, 16)), "naming a group"),
    "packed_negative_offset": (_set("s", "storage", ("packed", "g0", -64, 16)), "packed offset"),
    "array_name_path": (_set("a", "storage", ("array", "../../../etc/passwd")), "a<number>"),
    "array_name_twice": (_set("d", "storage", ("array", "a0")), "used once"),
    "storage_unknown_kind": (_set("a", "storage", ("file", "/etc/passwd")), "starting with one of"),
    "storage_none": (_set("a", "storage", None), "'storage' should be a tuple"),
    "entries_none": (_record("entries", None), "'entries' should be a list"),
    "entries_missing": (_record("entries", _MISSING), "'entries'.*missing"),
    "groups_none": (_record("groups", None), "'groups' should be a dict"),
    "structure_not_bytes": (_record("structure", "x"), "'structure' should be bytes"),
    "entry_not_dict": (_record("entries", [1]), "entry 0 should be a dict"),
    "entry_without_key": (_drop("a", "key"), "field 'key'.*missing"),
    "entry_without_storage": (_drop("a", "storage"), "field 'storage'.*missing"),
    "entry_without_shape": (_drop("a", "shape"), "field 'shape'.*missing"),
    "duplicate_key": (_set("b", "key", "a"), "'key' should be unique"),
    "unknown_kind": (_set("a", "kind", "module"), "'kind' should be one of"),
    "unknown_dtype": (_set("a", "dtype", "float128x"), "'dtype' should be a lazyflow dtype"),
    "ndarray_object_dtype": (_set("n", "dtype", "|O"), "'dtype' should be a numeric numpy dtype"),
    "ndarray_structured_dtype": (_set("n", "dtype", "f8,O"), "'dtype' should be a numeric numpy dtype"),
    "shape_negative": (_set("a", "shape", (-1, 4)), "'shape'"),
    "shape_not_ints": (_set("a", "shape", ("3",)), "'shape'"),
    "shape_none": (_set("a", "shape", None), "'shape' should be a tuple"),
    "shape_too_many_dims": (_set("a", "shape", (1,) * 100), "at most 64"),
    "shape_lies_about_nbytes": (_set("a", "shape", (10**12,)), "'nbytes' should be"),
    "nbytes_lies": (_set("a", "nbytes", 1 << 40), "'nbytes' should be"),
    "crc_wrong_count": (_set("a", "crc", [1, 2, 3]), "CRC-32"),
    "crc_not_ints": (_set("a", "crc", ["x"]), "'crc'"),
    "requires_grad_not_bool": (_set("a", "requires_grad", "yes"), "'requires_grad' should be a bool"),
    "sharding_bad_mesh": (
        _set(
            "a",
            "sharding",
            {"type": "named", "device_ids": (0,), "mesh_shape": (2, 2), "axis_names": ("x", "y"), "spec": (None,)},
        ),
        "product",
    ),
    "sharding_not_dict": (_set("a", "sharding", ["x"]), "sharding should be None or a dict"),
    "record_without_fields": (
        lambda rec: rec.clear() or rec.update({"format": "lazyflow.checkpoint", "version": 1}),
        "'entries'.*missing",
    ),
    "record_not_dict": (lambda rec: [rec], "not lazyflow's"),
}


def honest(lf, np, path):
    """The checkpoint every case starts from: owners a, c, d (own arrays) and s (packed), b sharing a, an ndarray."""
    a = lf.ones(600, 600)  # 1.4 MB: its own orbax array
    lf.save(
        {
            "a": a,
            "b": a.detach(),
            "c": lf.zeros(600, 601),
            "d": lf.zeros(601, 600),
            "s": lf.ones(4),
            "n": np.arange(3.0),
        },
        path,
    )


def main(d: str) -> dict:
    import numpy as np

    import lazyflow as lf
    from lazyflow.checkpoint import _layout, _store, load_tensors

    faulthandler.dump_traceback_later(240, exit=True)
    out = {}
    base = os.path.join(d, "honest")
    honest(lf, np, base)
    meta_file = os.path.join(_layout.resolve(base, 1), _store.META, _store.META_FILE)
    original = open(meta_file, "rb").read()
    record = pickle.loads(original[20:])
    for name, (change, _) in CASES.items():
        rec = copy.deepcopy(record)
        rec = change(rec) or rec
        with open(meta_file, "wb") as f:
            f.write(frame(pickle.dumps(rec, 5)))
        res = {}
        for call, fn in (
            ("load", lambda: lf.load(base)),
            ("inspect", lambda: lf.checkpoint.inspect(base)),
            ("load_tensors", lambda: load_tensors(base, ["a"])),
        ):
            t0 = time.monotonic()
            try:
                fn()
                res[call] = ["loaded", "", False, time.monotonic() - t0]
            except BaseException as e:
                res[call] = [type(e).__name__, str(e)[:500], isinstance(e, lf.CheckpointError), time.monotonic() - t0]
        out[name] = res
    with open(meta_file, "wb") as f:
        f.write(original)
    out["_honest"] = sorted(lf.load(base))
    return out


if __name__ == "__main__":
    print("RESULT " + json.dumps(main(sys.argv[1])))
