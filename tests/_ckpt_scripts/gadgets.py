"""Pickle gadgets against ``weights_only`` loads, and the runner that fires them in a subprocess.

Each gadget is hand-assembled from pickle opcodes. A *live* gadget runs code under plain ``pickle.loads``
(it writes its marker file): ``python gadgets.py pickle DIR`` proves that, so a refusal by lazyflow is a
refusal of something real. ``python gadgets.py lazyflow DIR`` fires every gadget at lazyflow four ways --
``_unpickler.loads(..., weights_only=True)``, the plain-record unpickler, and a real checkpoint directory whose
metadata file holds the gadget (as the saved structure for ``lf.load``; as the whole record for ``lf.load`` and
``lf.checkpoint.inspect``) with its CRC recomputed -- and prints one JSON line per gadget and path.
``python gadgets.py torch DIR`` fires the same bytes at ``torch.load(weights_only=True)`` (legacy file format).
"""

from __future__ import annotations

import io
import json
import os
import pickle
import struct
import sys
import zlib

P5 = b"\x80\x05"
_MAGIC = b"LFCKPT\x00\x01"


def s(x: str) -> bytes:
    """A str operand (SHORT_BINUNICODE / BINUNICODE)."""
    b = x.encode()
    return (b"\x8c" + bytes([len(b)]) if len(b) < 256 else b"X" + struct.pack("<I", len(b))) + b


def by(x: bytes) -> bytes:
    """A bytes operand (BINBYTES)."""
    return b"B" + struct.pack("<I", len(x)) + x


def g(module: str, name: str) -> bytes:
    """STACK_GLOBAL module.name."""
    return s(module) + s(name) + b"\x93"


def call1(fn: bytes, arg: bytes) -> bytes:
    """fn(arg) with TUPLE1 + REDUCE."""
    return fn + arg + b"\x85R"


def _dag_key(levels: int) -> bytes:
    """A tuple shared twice at every level (2**levels leaves, levels+1 objects) used as a dict key."""
    out = P5 + b"}" + b")\x940"  # memo 0 = ()
    for i in range(levels):
        out += b"h" + bytes([i]) + b"h" + bytes([i]) + b"\x86\x940"  # memo i+1 = (m[i], m[i])
    return out + b"h" + bytes([levels]) + b"K\x01s."


def _deep_key(depth: int) -> bytes:
    return P5 + b"}" + b")" + b"\x85" * depth + b"K\x01s."


def gadgets(marker: str) -> dict[str, tuple[bytes, bool, str]]:
    """name -> (pickle bytes, live under plain pickle, regex the lazyflow error must match)."""
    code = f"open({marker!r}, 'w').write('ran')"
    cmd = f"touch {marker}"
    inner = P5 + call1(g("builtins", "eval"), s(code)) + b"."
    od = g("collections", "OrderedDict") + b")R"
    return {
        # dotted names: an attribute walk from any module reaches eval
        "issue17_numpy_dtypes_builtins_get": (
            P5 + call1(g("numpy.dtypes", "__builtins__.get"), s("eval")) + s(code) + b"\x85R.",
            True,
            "dotted",
        ),
        "dotted_via_GLOBAL_opcode": (
            P5 + b"cnumpy.dtypes\n__builtins__.get\n" + s("eval") + b"\x85R" + s(code) + b"\x85R.",
            True,
            "dotted",
        ),
        "dotted_via_allowed_module_collections": (
            P5 + call1(g("collections", "__builtins__.get"), s("eval")) + s(code) + b"\x85R.",
            True,
            "dotted",
        ),
        "dotted_via_allowed_module_numpy": (
            P5 + call1(g("numpy", "__builtins__.get"), s("eval")) + s(code) + b"\x85R.",
            True,
            "dotted",
        ),
        "dotted_via_allowed_class_attribute": (P5 + g("collections", "OrderedDict.fromkeys") + b".", False, "dotted"),
        # builtins that run code or reach anything
        "builtins_eval": (P5 + call1(g("builtins", "eval"), s(code)) + b".", True, "builtins.eval"),
        "builtins_exec": (P5 + call1(g("builtins", "exec"), s(code)) + b".", True, "builtins.exec"),
        "builtins_getattr_of_import": (
            P5
            + g("builtins", "getattr")
            + b"("
            + call1(g("builtins", "__import__"), s("os"))
            + s("system")
            + b"tR"
            + s(cmd)
            + b"\x85R.",
            True,
            "builtins.getattr",
        ),
        "builtins___import__": (P5 + call1(g("builtins", "__import__"), s("os")) + b".", False, "builtins.__import__"),
        "builtins_globals_of_module": (P5 + g("builtins", "globals") + b")R.", False, "builtins.globals"),
        "builtins_type_three_args": (P5 + g("builtins", "type") + b"(" + s("X") + b")}tR.", False, "builtins.type"),
        "os_system": (P5 + call1(g("os", "system"), s(cmd)) + b".", True, "os.system"),
        "posix_system": (P5 + call1(g("posix", "system"), s(cmd)) + b".", True, "posix.system"),
        "subprocess_getoutput": (P5 + call1(g("subprocess", "getoutput"), s(cmd)) + b".", True, "subprocess"),
        # __reduce__ reaching through allowed modules' attributes (modules are never values)
        "module_through_lazyflow_dtypes": (P5 + g("lazyflow._core.dtypes", "np") + b".", False, "dtypes.np"),
        "module_through_lazyflow_builtins": (
            P5 + g("lazyflow._core.dtypes", "builtins") + b".",
            False,
            "dtypes.builtins",
        ),
        "numpy_dtypes_module_wholesale": (P5 + g("numpy.dtypes", "Float32DType") + b".", False, "numpy.dtypes"),
        "allowed_value_not_callable_str": (P5 + call1(g("builtins", "str"), s("x")) + b".", False, "call"),
        "allowed_value_not_callable_scalar_type": (P5 + call1(g("numpy", "float32"), s("1")) + b".", False, "call"),
        # numpy internals
        "numpy_reconstruct_non_ndarray": (
            P5
            + g("numpy._core.multiarray", "_reconstruct")
            + b"("
            + g("collections", "OrderedDict")
            + b"K\x00\x85"
            + by(b"b")
            + b"tR.",
            False,
            "_reconstruct",
        ),
        "numpy_core_reconstruct": (
            P5
            + g("numpy.core.multiarray", "_reconstruct")
            + b"("
            + g("builtins", "dict")
            + b"K\x00\x85"
            + by(b"b")
            + b"tR.",
            False,
            "_reconstruct",
        ),
        "numpy_frombuffer": (
            P5 + g("numpy", "frombuffer") + b"(" + by(b"\0" * 8) + s("O") + b"tR.",
            False,
            "frombuffer",
        ),
        "numpy_load": (P5 + call1(g("numpy", "load"), s(marker)) + b".", False, "numpy.load"),
        "numpy_dtype_object": (P5 + call1(g("numpy", "dtype"), s("O")) + b".", False, "numpy.dtype expects"),
        "numpy_dtype_structured_object": (
            P5 + g("numpy", "dtype") + b"(]" + s("a") + s("O") + b"\x86atR.",
            False,
            "numpy.dtype expects",
        ),
        "numpy_dtype_comma_string": (P5 + call1(g("numpy", "dtype"), s("f4,O")) + b".", False, "numpy.dtype"),
        "numpy_dtype_subarray": (P5 + call1(g("numpy", "dtype"), s("(1000000000,)f8")) + b".", False, "numpy.dtype"),
        "numpy_dtype_align_true": (P5 + g("numpy", "dtype") + b"(" + s("f4") + b"\x88\x88tR.", False, "numpy.dtype"),
        "numpy_dtype_state_hasobject": (
            P5
            + call1(g("numpy", "dtype"), s("f8"))
            + b"(K\x03"
            + s("<")
            + b"NNNJ\xff\xff\xff\xffJ\xff\xff\xff\xff"
            + b"K?tb.",
            False,
            "dtype state",
        ),
        "numpy_dtype_state_fields": (
            P5
            + call1(g("numpy", "dtype"), s("f8"))
            + b"(K\x03"
            + s("|")
            + b"N"
            + s("a")
            + b"\x85}K\x08K\x08K\x00"
            + b"tb.",
            False,
            "dtype state",
        ),
        "numpy_scalar_object_dtype": (
            P5 + g("numpy._core.multiarray", "scalar") + b"(" + call1(g("numpy", "dtype"), s("O")) + s("x") + b"tR.",
            False,
            "numpy.dtype expects",
        ),
        "numpy_scalar_wrong_length": (
            P5
            + g("numpy._core.multiarray", "scalar")
            + b"("
            + call1(g("numpy", "dtype"), s("f8"))
            + by(b"\0" * 3)
            + b"tR.",
            False,
            "numpy scalar expects",
        ),
        "numpy_scalar_non_dtype": (
            P5 + g("numpy._core.multiarray", "scalar") + b"(" + s("f8") + by(b"\0" * 8) + b"tR.",
            False,
            "numpy scalar expects",
        ),
        # copyreg, functools, operator, nested pickles
        "copyreg__reconstructor": (
            P5 + g("copyreg", "_reconstructor") + b"(" + g("builtins", "dict") + g("builtins", "dict") + b"}tR.",
            False,
            "copyreg",
        ),
        "copyreg___newobj__": (
            P5 + g("copyreg", "__newobj__") + b"(" + g("builtins", "dict") + b"tR.",
            False,
            "copyreg",
        ),
        "functools_partial_eval": (
            P5 + g("functools", "partial") + b"(" + g("builtins", "eval") + s(code) + b"tR)R.",
            True,
            "functools.partial",
        ),
        "operator_attrgetter": (P5 + call1(g("operator", "attrgetter"), s("__class__")) + b".", False, "operator"),
        "operator_methodcaller": (
            P5 + g("operator", "methodcaller") + b"(" + s("get") + s("eval") + b"tR.",
            False,
            "operator",
        ),
        "nested_pickle_loads": (P5 + call1(g("pickle", "loads"), by(inner)) + b".", True, "pickle.loads"),
        "nested__pickle_loads": (P5 + call1(g("_pickle", "loads"), by(inner)) + b".", True, "_pickle.loads"),
        "defaultdict_factory_eval": (
            P5 + call1(g("collections", "defaultdict"), g("builtins", "eval")) + b".",
            False,
            "builtins.eval",
        ),
        "defaultdict_factory_not_allowlisted": (
            P5 + call1(g("collections", "defaultdict"), by(b"x")) + b".",
            False,
            "defaultdict expects",
        ),
        # BUILD / __setstate__ on allowed classes
        "build_ordered_dict___class__": (
            P5 + od + b"}" + s("__class__") + g("collections", "deque") + b"sb.",
            False,
            "attribute '__class__'",
        ),
        "build_ordered_dict___dict__": (P5 + od + b"}" + s("__dict__") + b"}sb.", False, "attribute '__dict__'"),
        "build_ordered_dict_shadows_method": (
            P5 + od + b"}" + s("keys") + g("builtins", "int") + b"sb.",
            False,
            "attribute 'keys'",
        ),
        "build_ordered_dict_slotstate": (
            P5 + od + b"N}" + s("__class__") + g("collections", "deque") + b"s\x86b.",
            False,
            "dict of attributes",
        ),
        "build_on_device_instance": (
            P5 + call1(g("lazyflow._core.device", "Device"), s("cpu")) + b"}" + s("type") + s("evil") + b"sb.",
            False,
            "BUILD",
        ),
        "build_on_class_object": (
            P5 + g("lazyflow._core.device", "Device") + b"N}" + s("__reduce__") + g("builtins", "int") + b"s\x86b.",
            False,
            "BUILD",
        ),
        "build_on_function": (
            P5 + g("lazyflow._core.dtypes", "to_dtype") + b"}" + s("__defaults__") + s("x") + b"\x85sb.",
            False,
            "BUILD",
        ),
        "build_on_plain_dict": (P5 + b"}}" + s("a") + b"K\x01sb.", False, "BUILD"),
        "build_on_deque": (P5 + g("collections", "deque") + b")R}" + s("a") + b"K\x01sb.", False, "BUILD"),
        # opcodes outside the allowlist
        "EXT1_registry": (P5 + b"\x82\xf0" + s(cmd) + b"\x85R.", True, "EXT1"),
        "EXT2_registry": (P5 + b"\x83\xf1\x00" + s(cmd) + b"\x85R.", True, "EXT2"),
        "EXT4_registry": (P5 + b"\x84\xf2\x00\x00\x00" + s(cmd) + b"\x85R.", True, "EXT4"),
        "INST_opcode": (P5 + b"(" + s(cmd) + b"ios\nsystem\n.", True, "INST"),
        "OBJ_opcode": (P5 + b"(" + g("collections", "OrderedDict") + b"o.", False, "OBJ"),
        "PERSID_text": (P5 + b"Pabc\n.", False, "PERSID"),
        "BINPERSID_unknown": (P5 + s("x") + b"Q.", False, "persistent id|tensor reference"),
        "STACK_GLOBAL_int_operand": (P5 + b"K\x01" + s("system") + b"\x93.", False, "STACK_GLOBAL"),
        "STACK_GLOBAL_bytes_operands": (P5 + by(b"os") + by(b"system") + b"\x93.", False, "STACK_GLOBAL"),
        "STACK_GLOBAL_tuple_operand": (P5 + s("os") + b")\x93.", False, "STACK_GLOBAL"),
        "NEWOBJ_builtin_dict": (P5 + g("builtins", "dict") + b")\x81.", False, "NEWOBJ"),
        "NEWOBJ_EX_ordered_dict": (P5 + g("collections", "OrderedDict") + b")}\x92.", False, "NEWOBJ"),
        "protocol_2_global": (b"\x80\x02cos\nsystem\n" + s(cmd) + b"\x85R.", True, "protocol 2"),
        "protocol_0_text": (b"cos\nsystem\n(S'" + cmd.encode() + b"'\ntR.", True, "protocol 4/5"),
        "unknown_opcode": (P5 + b"\xff.", False, "not a pickle opcode"),
        # resource bounds
        "hash_of_shared_tuple_dag": (_dag_key(40), False, "nested"),  # 2**40 nodes to hash, 41 objects
        "hash_of_deep_tuple_chain": (_deep_key(100_000), False, "nested"),
        "bytes_length_beyond_data": (P5 + b"\x8e" + struct.pack("<Q", 1 << 62) + b".", False, "truncated"),
        "long4_negative_length": (P5 + b"\x8b\xff\xff\xff\xff.", False, "truncated"),
        "memo_get_missing": (P5 + b"h\x05.", False, "malformed"),
        "stop_with_empty_stack": (P5 + b".", False, "malformed"),
        "reduce_args_not_tuple": (P5 + g("builtins", "slice") + b"K\x01R.", False, "REDUCE arguments"),
    }


def frame(payload: bytes) -> bytes:
    """lazyflow's metadata framing, written here independently: magic, CRC-32, length, payload."""
    return _MAGIC + struct.pack("<IQ", zlib.crc32(payload), len(payload)) + payload


def _register_extensions():
    import copyreg

    for code, (module, name) in (
        (0xF0, ("os", "system")),
        (0xF1, ("posix", "system")),
        (0xF2, ("subprocess", "getoutput")),
    ):
        copyreg.add_extension(module, name, code)


def run_pickle(d: str) -> dict:
    """Fire each gadget at plain pickle.loads; report which ones ran their code."""
    _register_extensions()
    out = {}
    for name, (_, live, _) in gadgets("@").items():
        if not live:
            continue
        marker = os.path.join(d, f"pickle-{name}")
        try:
            pickle.loads(gadgets(marker)[name][0])
        except Exception:
            pass
        out[name] = os.path.exists(marker)
    return out


def run_lazyflow(d: str) -> dict:
    import lazyflow as lf
    from lazyflow.checkpoint import _layout, _store, _unpickler

    _register_extensions()  # the copyreg extension registry must not be consulted
    ckpt = os.path.join(d, "ckpt")
    lf.save({"w": lf.ones(2), "step": 1}, ckpt)
    meta_file = os.path.join(_layout.resolve(ckpt, 1), _store.META, _store.META_FILE)
    record = pickle.loads(open(meta_file, "rb").read()[20:])  # the honest record (lazyflow wrote it)
    out = {}
    for name in gadgets("@"):
        marker = os.path.join(d, f"lf-{name}")
        payload = gadgets(marker)[name][0]
        results = {}
        _attempt(results, "loads", lambda p=payload: _unpickler.loads(p, None, weights_only=True))
        _attempt(results, "load_record", lambda p=payload: _unpickler.load_record(p, "record"))
        with open(meta_file, "wb") as f:
            f.write(frame(pickle.dumps({**record, "structure": payload}, 5)))
        _attempt(results, "lf.load(structure)", lambda: lf.load(ckpt))
        with open(meta_file, "wb") as f:
            f.write(frame(payload))
        _attempt(results, "lf.load(record)", lambda: lf.load(ckpt))
        _attempt(results, "inspect(record)", lambda: lf.checkpoint.inspect(ckpt))
        out[name] = {"results": results, "ran": os.path.exists(marker)}
    return out


def _attempt(results: dict, path: str, fn) -> None:
    import lazyflow as lf

    try:
        fn()
        results[path] = ["loaded", "", False, False]
    except BaseException as e:
        results[path] = [
            type(e).__name__,
            str(e)[:400],
            isinstance(e, lf.CheckpointError),
            isinstance(e, pickle.UnpicklingError),
        ]


def run_torch(d: str) -> dict:
    import warnings

    import torch

    warnings.filterwarnings("ignore")
    _register_extensions()

    def legacy(payload: bytes):
        f = io.BytesIO()
        for v in (
            0x1950A86A20F9469CFC6C,
            1001,
            {"protocol_version": 1001, "little_endian": True, "type_sizes": {"short": 2, "int": 4, "long": 4}},
        ):
            pickle.dump(v, f, 2)
        f.write(payload)
        pickle.dump([], f, 2)
        f.seek(0)
        return f

    out = {"_sanity": repr(torch.load(legacy(pickle.dumps({"a": (1, "b")}, 2)), weights_only=True))}
    for name in gadgets("@"):
        marker = os.path.join(d, f"torch-{name}")
        try:
            torch.load(legacy(gadgets(marker)[name][0]), weights_only=True)
            verdict = "loaded"
        except pickle.UnpicklingError:
            verdict = "refused"
        except Exception as e:
            verdict = f"error:{type(e).__name__}"
        out[name] = {"verdict": verdict, "ran": os.path.exists(marker)}
    return out


if __name__ == "__main__":
    mode, directory = sys.argv[1], sys.argv[2]
    result = {"pickle": run_pickle, "lazyflow": run_lazyflow, "torch": run_torch}[mode](directory)
    print("RESULT " + json.dumps(result))
