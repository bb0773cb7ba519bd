"""weights_only=True is safe for real: a gadget suite against the restricted unpickler, hostile and malformed
metadata records, and the values that must keep loading.

Every hostile input runs in a subprocess with a timeout (one per suite, see tests/_ckpt_scripts/): a gadget that
got through would run its code there, a reference cycle would loop there. The gadgets are proven real first:
the live ones run their code under plain ``pickle.loads``. torch is the oracle for "refused": it must refuse
every code-running gadget too.
"""

import collections
import json
import os
import pickle
import random
import re
import subprocess
import sys

import numpy as np
import pytest

import lazyflow as lf
from lazyflow.checkpoint import _allowlist, _unpickler

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPTS = os.path.join(HERE, "_ckpt_scripts")
sys.path.insert(0, SCRIPTS)

from gadgets import P5, g, gadgets, s
from hostile_meta import CASES

GADGETS = gadgets("@")
LIVE = [n for n, (_, live, _) in GADGETS.items() if live]


def _run(script: str, mode: list[str], tmp, timeout: int) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([os.path.dirname(HERE), SCRIPTS] + sys.path)}
    proc = subprocess.run(
        [sys.executable, os.path.join(SCRIPTS, script), *mode, str(tmp)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=SCRIPTS,
    )
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, f"{script} {mode} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return json.loads(lines[-1][len("RESULT ") :])


@pytest.fixture(scope="module")
def fired(tmp_path_factory):
    """Every gadget fired at lazyflow four ways, in one subprocess."""
    return _run("gadgets.py", ["lazyflow"], tmp_path_factory.mktemp("lf"), timeout=240)


# ------------------------------------------------------------------------------------------ the gadget suite
def test_live_gadgets_run_code_under_plain_pickle(tmp_path):
    """The suite is not a list of strawmen: each live gadget runs its code when pickle itself loads it."""
    ran = _run("gadgets.py", ["pickle"], tmp_path, timeout=60)
    assert sorted(ran) == sorted(LIVE)
    assert [n for n, r in ran.items() if not r] == []
    assert "issue17_numpy_dtypes_builtins_get" in LIVE and len(LIVE) >= 15


@pytest.mark.parametrize("name", sorted(GADGETS))
def test_gadget_is_refused_by_every_loader_without_running(fired, name):
    """_unpickler.loads(weights_only=True), the record unpickler, lf.load of a checkpoint holding it as the
    structure or as the whole record (CRC recomputed) and lf.checkpoint.inspect: each raises
    CheckpointUnpicklingError (a CheckpointError and a pickle.UnpicklingError) and nothing ran."""
    r = fired[name]
    assert not r["ran"], f"{name} ran its code"
    assert set(r["results"]) == {"loads", "load_record", "lf.load(structure)", "lf.load(record)", "inspect(record)"}
    for path, (cls, msg, is_checkpoint_error, is_unpickling_error) in r["results"].items():
        assert (cls, is_checkpoint_error, is_unpickling_error) == ("CheckpointUnpicklingError", True, True), (
            path,
            cls,
            msg,
        )
    for path in ("loads", "lf.load(structure)"):
        assert re.search(GADGETS[name][2], r["results"][path][1]), (path, r["results"][path][1])
    assert re.search(r"checkpoint '.*'", r["results"]["inspect(record)"][1])


def test_torch_refuses_every_code_running_gadget_too(tmp_path):
    """torch.load(weights_only=True) as the oracle. Where torch differs, it is stricter in format (no FRAME
    opcode) or lets something through that lazyflow refuses (a 100000-deep tuple as a dict key), never the
    reverse for a gadget that runs code."""
    out = _run("gadgets.py", ["torch"], tmp_path, timeout=120)
    assert out.pop("_sanity") == "{'a': (1, 'b')}"
    assert [n for n, v in out.items() if v["ran"]] == []
    assert {n: out[n]["verdict"] for n in LIVE} == dict.fromkeys(LIVE, "refused")


# ------------------------------------------------------------------------------------------ what must still load
class _Slots:
    __slots__ = ("x", "y")

    def __init__(self, x, y):
        self.x, self.y = x, y

    def __eq__(self, other):
        return type(other) is _Slots and (self.x, self.y) == (other.x, other.y)


class _Outer:
    class Inner:
        def __init__(self, v):
            self.v = v


def _legit_values():
    od = collections.OrderedDict([("w", 1), ("b", 2)])
    od._metadata = {"": {"version": 1}}  # torch's state_dict attribute: BUILD of a non-shadowing attribute
    rec = [1]
    rec.append(rec)  # a recursive list
    tup = ([],)
    tup[0].append(tup)  # a recursive tuple: POP_MARK
    import ml_dtypes

    return {
        "scalars": [
            np.float32(1.5),
            np.float64(-2.25),
            np.int8(-3),
            np.uint8(250),
            np.int64(2**62),
            np.bool_(True),
            np.float16(0.5),
            np.complex64(1 + 2j),
            np.uint64(2**64 - 1),
            np.array(1.0, ml_dtypes.bfloat16)[()],
        ],
        "dtypes": [
            np.dtype("f4"),
            np.dtype(">f8"),
            np.dtype("<i2"),
            np.dtype("?"),
            np.dtype(ml_dtypes.bfloat16),
            np.dtype("c16"),
        ],
        "types": [int, float, np.float32, np.int64, ml_dtypes.bfloat16, Ellipsis, NotImplemented],
        "od": od,
        "dd": collections.defaultdict(list, {"k": [1]}),
        "dq": collections.deque([1, 2], maxlen=5),
        "dq0": collections.deque([3]),
        "slice": slice(1, None, 2),
        "range": range(0, 10, 3),
        "complex": 1 - 2.5j,
        "bytes": b"\x00" * 300,
        "ba": bytearray(b"xyz"),
        "set": {1, (2, 3)},
        "fs": frozenset({"a", (1,)}),
        "big": [2**100, -(2**70), float("inf"), -0.0, "é\U0001f600" * 100, "x" * 70000],
        "keys": {(1, (2, (3,))): "tuple key", frozenset({1}): "fs key", None: 0, 1.5: 1},
        "lf": [lf.float32, lf.bfloat16, lf.Device("cpu"), lf.Device("cuda", 1)],
        "rec": rec,
        "tup": tup,
    }


@pytest.mark.parametrize("protocol", [4, 5])
def test_weights_only_loads_what_plain_pickle_loads(protocol):
    """The reference is pickle itself: every allowlisted value loads to the same thing."""
    data = pickle.dumps(_legit_values(), protocol)
    ours, ref = _unpickler.loads(data), pickle.loads(data)
    assert repr(ours) == repr(ref)
    assert [type(x) for x in ours["scalars"]] == [type(x) for x in ref["scalars"]]
    assert ours["dtypes"] == ref["dtypes"] and [d.str for d in ours["dtypes"]] == [d.str for d in ref["dtypes"]]
    assert ours["types"] == ref["types"] and ours["od"]._metadata == {"": {"version": 1}}
    assert ours["dd"]["new"] == [] and ours["dq"].maxlen == 5
    assert ours["rec"][1] is ours["rec"] and ours["tup"][0][0] is ours["tup"]


def test_a_dtype_state_never_changes_numpy_shared_dtypes():
    """numpy.dtype('f4', False, False) is numpy's singleton; a BUILD with another byte order must not reach it."""
    payload = (
        P5
        + g("numpy", "dtype")
        + b"("
        + s("f4")
        + b"\x89\x89tR"
        + b"(K\x03"
        + s(">")
        + b"NNNJ\xff\xff\xff\xffJ\xff\xff\xff\xffK\x00tb."
    )
    before = np.dtype("f4").str
    out = _unpickler.loads(payload)
    assert out.str == ">f4" and out is not np.dtype("f4")
    assert np.dtype("f4").str == before and np.dtype("float32").str == before


def test_add_safe_globals_trusts_exactly_the_registered_names():
    nested = _Outer.Inner(3)
    data = pickle.dumps({"n": nested, "s": _Slots(1, [2])}, 5)
    with pytest.raises(lf.CheckpointUnpicklingError, match=r"test_checkpoint_security\._Outer\.Inner.*dotted"):
        _unpickler.loads(data)
    lf.checkpoint.add_safe_globals([_Outer.Inner, _Slots])
    try:
        out = _unpickler.loads(data)  # the exact registered dotted name resolves to the registered object
        assert out["n"].v == 3 and out["s"] == _Slots(1, [2])
        assert (
            "tests.test_checkpoint_security._Slots" in _allowlist.allowed_globals()
            or "test_checkpoint_security._Slots" in _allowlist.allowed_globals()
        )
        with pytest.raises(lf.CheckpointUnpicklingError, match="dotted"):  # but nothing is walked from it
            _unpickler.loads(P5 + g(_Slots.__module__, "_Slots.__init__.__globals__") + b".")
    finally:
        lf.checkpoint.clear_safe_globals()
    with pytest.raises(lf.CheckpointUnpicklingError):
        _unpickler.loads(data)


def test_random_damage_to_a_pickle_raises_checkpoint_errors_only():
    """A few hundred truncations and byte flips of a real structure pickle: each loads or raises a
    CheckpointError (never KeyError/IndexError/struct.error), and none takes long (every opcode consumes
    input; hashing is bounded)."""
    data = pickle.dumps(_legit_values(), 5)
    rng = random.Random(17)
    outcomes = collections.Counter()
    for i in range(400):
        bad = bytearray(data)
        if i % 4 == 0:
            bad = bad[: rng.randrange(len(bad))]
        else:
            for _ in range(rng.randint(1, 3)):
                bad[rng.randrange(2, len(bad))] = rng.randrange(256)
        try:
            _unpickler.loads(bytes(bad))
            outcomes["loaded"] += 1
        except lf.CheckpointError:
            outcomes["refused"] += 1
    assert outcomes["refused"] > 200


# ------------------------------------------------------------------------------------------ hostile metadata
@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    """Every hostile/malformed record of hostile_meta.CASES opened three ways, in one subprocess."""
    return _run("hostile_meta.py", [], tmp_path_factory.mktemp("meta"), timeout=240)


def test_honest_checkpoint_of_the_hostile_suite_loads(hostile):
    assert hostile["_honest"] == ["a", "b", "c", "d", "n", "s"]


@pytest.mark.parametrize("case", sorted(CASES))
def test_hostile_or_malformed_metadata_raises_a_named_error_promptly(hostile, case):
    """Reference cycles (a -> b -> a), self references, chains, out-of-bounds packed ranges, names outside
    lazyflow's, missing fields, entries=None, unknown dtypes: lf.load, inspect and load_tensors each raise
    CheckpointError naming the entry, what was expected and what arrived, within seconds."""
    for call, (cls, msg, is_checkpoint_error, seconds) in hostile[case].items():
        assert is_checkpoint_error, (call, cls, msg)
        assert re.search(CASES[case][1], msg), (call, msg)
        assert seconds < 10, (call, seconds)


# ------------------------------------------------------------------------------------------ the documented claims
DOC = os.path.join(os.path.dirname(HERE), "docs", "checkpoint-format.md")


def _threat_model() -> str:
    text = open(DOC).read()
    return text[text.index("## Threat model") :]


def test_the_documented_allowlist_is_the_allowlist():
    """docs/checkpoint-format.md lists every global a weights_only load resolves, and nothing else."""
    section = _threat_model()
    listed = section[section.index("The full list") : section.index("* calls (`REDUCE`)")]
    names = set()
    for module, words in re.findall(r"`(\w+)`: `([^`]+)`", listed):  # `module`: `name name ...`
        names |= {f"{module}.{w}" for w in words.split()}
    names |= {n for n in re.findall(r"`([\w.]+\.\w+)`", listed) if n.count(".") >= 1 and " " not in n}
    names -= {
        "lf.checkpoint.add_safe_globals",
        "lf.checkpoint._allowlist.allowed_globals",
        "numpy.bool_",
        "module.qualname",
    }
    actual = {n.replace("numpy.bool_", "numpy.bool") for n in _allowlist.allowed_globals()}
    assert names == actual


def test_every_test_named_in_the_docs_exists():
    """Each claim's row in the threat model names tests; each of those exists (renaming one breaks this)."""
    import ast

    section = _threat_model()
    named, current = [], None
    for path, test in re.findall(r"`(?:(tests/[\w/]+\.py))?::(\w+)`", section):
        current = path or current
        named.append((current, test))
    assert len(named) >= 20
    defined = {}
    for path in {p for p, _ in named}:
        tree = ast.parse(open(os.path.join(os.path.dirname(HERE), path)).read())
        defined[path] = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
    assert [(p, t) for p, t in named if t not in defined[p]] == []
    readme = open(os.path.join(os.path.dirname(HERE), "README.md")).read()
    assert "docs/checkpoint-format.md" in readme and "Threat model" in readme
