"""lf.save / lf.load: round trips against the original numpy values, safe loading, integrity, partial and
broken checkpoints, async saves and CheckpointManager. (Crash safety: test_checkpoint_crash.py; sharded
tensors: test_checkpoint_sharded.py; eager/compiled/Graph interchange: test_checkpoint_interchange.py.)"""

import collections
import json
import os
import pickle
import subprocess
import sys

import jax
import numpy as np
import pytest

import lazyflow as lf
from lazyflow.checkpoint import CheckpointManager, _layout, _meta, _store, inspect, load_tensors

RNG = np.random.default_rng(0)
Point = collections.namedtuple("Point", "x y")
DTYPES = [
    ("float16", np.float16),
    ("bfloat16", None),
    ("float32", np.float32),
    ("float64", np.float64),
    ("int8", np.int8),
    ("int16", np.int16),
    ("int32", np.int32),
    ("int64", np.int64),
    ("uint8", np.uint8),
    ("bool", np.bool_),
]


def _np(t):
    return np.asarray(t.detach().numpy()) if isinstance(t, lf.Tensor) else np.asarray(t)


def _np_dtype(name):
    if name == "bfloat16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


def _values(dtype_name, shape):
    if dtype_name == "bool":
        return RNG.integers(0, 2, shape).astype(bool)
    if dtype_name.startswith(("int", "uint")):
        return RNG.integers(0, 100, shape).astype(_np_dtype(dtype_name))
    return RNG.standard_normal(shape).astype(_np_dtype(dtype_name))


def _version_dir(path):
    return _layout.resolve(str(path), _meta.FORMAT_VERSION)


def _data_files(path):
    root = os.path.join(_version_dir(path), "tensors")
    return [
        os.path.join(d, f)
        for d, _, fs in os.walk(root)
        for f in fs
        if os.sep + "d" + os.sep in os.path.join(d, f) + os.sep and "ocdbt.process" in d
    ]


def _flip_bytes_of(path, raw: bytes):
    """Flip one byte inside the stored copy of ``raw`` (found by content in the orbax data files)."""
    for f in _data_files(path):
        data = bytearray(open(f, "rb").read())
        at = data.find(raw)
        if at >= 0:
            data[at + len(raw) // 2] ^= 0x5A
            with open(f, "wb") as fh:
                fh.write(data)
            return
    raise AssertionError("tensor bytes not found in the data files")


# ------------------------------------------------------------------------------------------ round trips
# every dtype in every storage kind: packed (small), empty, own orbax array (600x600 >= 1 MiB for most)
CASES = [(d, s) for d, _ in DTYPES for s in [(), (0, 3), (3, 5)]] + [
    (d, (600, 600)) for d in ("float32", "int64", "bool", "bfloat16", "uint8")
]


@pytest.mark.parametrize("dtype_name,shape", CASES)
def test_roundtrip_dtypes_and_shapes(tmp_path, dtype_name, shape):
    ref = _values(dtype_name, shape)
    t = lf.tensor(
        ref.astype(np.float32) if dtype_name == "bfloat16" else ref,
        dtype=getattr(lf, dtype_name if dtype_name != "bool" else "bool_"),
    )
    lf.save(t, tmp_path / "c")
    out = lf.load(tmp_path / "c")
    assert type(out) is lf.Tensor
    assert out.dtype is t.dtype and out.shape == shape
    got = _np(out)
    assert got.dtype == ref.dtype
    np.testing.assert_array_equal(
        got.astype(np.float64) if dtype_name == "bfloat16" else got,
        ref.astype(np.float64) if dtype_name == "bfloat16" else ref,
    )


def test_roundtrip_nested_structure_preserves_types_order_and_values(tmp_path):
    lf.checkpoint.add_safe_globals([Point])
    try:
        w, b, big = RNG.standard_normal((3, 4)), RNG.standard_normal(4), RNG.standard_normal((700, 500))
        obj = {
            "zeta": collections.OrderedDict([("w", lf.tensor(w)), ("b", lf.tensor(b))]),
            "alpha": [lf.tensor(big, dtype=lf.float32), (1, 2.5, None, True, "s", b"raw", 3 + 4j)],
            7: {"nested": {"deep": [lf.arange(5)]}, "set": {1, 2}, "frozen": frozenset({"a"})},
            "np": RNG.standard_normal((2, 2)).astype(np.float32),
            "np_int": np.arange(6).reshape(2, 3),
            "np_scalar": np.float32(1.5),
            "np_dtype": np.dtype("int16"),
            "dtype": lf.bfloat16,
            "device": lf.device("cpu"),
            "point": Point(1, lf.ones(2)),
            "empty": {},
            "empty_list": [],
            "dd": collections.defaultdict(list, {"k": [1]}),
        }
        lf.save(obj, tmp_path / "c")
        out = lf.load(tmp_path / "c")
    finally:
        lf.checkpoint.clear_safe_globals()
    assert list(out) == [
        "zeta",
        "alpha",
        7,
        "np",
        "np_int",
        "np_scalar",
        "np_dtype",
        "dtype",
        "device",
        "point",
        "empty",
        "empty_list",
        "dd",
    ]
    assert type(out["zeta"]) is collections.OrderedDict and list(out["zeta"]) == ["w", "b"]
    np.testing.assert_array_equal(_np(out["zeta"]["w"]), w)
    np.testing.assert_array_equal(_np(out["zeta"]["b"]), b)
    np.testing.assert_array_equal(_np(out["alpha"][0]), big.astype(np.float32))
    assert out["alpha"][1] == (1, 2.5, None, True, "s", b"raw", 3 + 4j)
    np.testing.assert_array_equal(_np(out[7]["nested"]["deep"][0]), np.arange(5))
    assert out[7]["set"] == {1, 2} and out[7]["frozen"] == frozenset({"a"})
    assert type(out["np"]) is np.ndarray and out["np"].dtype == np.float32
    np.testing.assert_array_equal(out["np"], obj["np"])
    np.testing.assert_array_equal(out["np_int"], np.arange(6).reshape(2, 3))
    assert out["np_scalar"] == np.float32(1.5) and out["np_dtype"] == np.dtype("int16")
    assert out["dtype"] is lf.bfloat16 and out["device"] == lf.device("cpu")
    assert type(out["point"]).__name__ == "Point" and out["point"].x == 1
    np.testing.assert_array_equal(_np(out["point"].y), np.ones(2, np.float32))
    assert out["empty"] == {} and out["empty_list"] == [] and out["dd"]["k"] == [1]
    assert isinstance(out["dd"], collections.defaultdict) and out["dd"]["new"] == []


def test_requires_grad_shared_tensors_and_shared_storage(tmp_path):
    a = lf.randn(3, 3).requires_grad_(True)
    c = lf.randn(2)
    obj = {"a": a, "again": a, "a_detached": a.detach(), "c": c, "list": [c]}
    lf.save(obj, tmp_path / "c")
    out = lf.load(tmp_path / "c")
    assert out["a"].requires_grad and not out["a_detached"].requires_grad and not out["c"].requires_grad
    assert out["a"] is out["again"] and out["c"] is out["list"][0]
    assert out["a_detached"] is not out["a"]
    np.testing.assert_array_equal(_np(out["a_detached"]), _np(a))
    infos = inspect(tmp_path / "c")
    assert list(infos) == ["a", "a_detached", "c"]  # 'again' and 'list.0' are the same objects
    assert infos["a_detached"].storage == "same"  # bytes stored once


def test_state_dict_tensors_come_back_plain_and_parameters_as_parameters(tmp_path):
    m = lf.nn.Linear(3, 2)
    sd = m.state_dict()
    kv = m.state_dict(keep_vars=True)
    lf.save({"sd": sd, "kv": kv}, tmp_path / "c")
    out = lf.load(tmp_path / "c")
    assert type(out["sd"]) is collections.OrderedDict and list(out["sd"]) == ["weight", "bias"]
    assert all(type(v) is lf.Tensor and not v.requires_grad for v in out["sd"].values())
    assert all(type(v) is lf.nn.Parameter and v.requires_grad for v in out["kv"].values())
    for k in ("weight", "bias"):
        np.testing.assert_array_equal(_np(out["sd"][k]), _np(sd[k]))
    m2 = lf.nn.Linear(3, 2)
    m2.load_state_dict(out["sd"])
    x = lf.randn(4, 3)
    np.testing.assert_allclose(_np(m2(x)), _np(x) @ _np(sd["weight"]).T + _np(sd["bias"]), rtol=1e-6)


def test_buffers_saved_as_buffer_objects_keep_persistent_flag(tmp_path):
    buf = lf.nn.Buffer(lf.arange(3), persistent=False)
    lf.save([buf], tmp_path / "c")
    (out,) = lf.load(tmp_path / "c")
    assert type(out) is lf.nn.Buffer and out.persistent is False
    np.testing.assert_array_equal(_np(out), np.arange(3))


def test_load_places_on_map_location_and_rejects_missing_devices(tmp_path):
    lf.save({"w": lf.ones(2, 2)}, tmp_path / "c")
    cpu = jax.devices("cpu")[0]
    for loc in ("cpu", lf.device("cpu"), cpu, {"cpu": "cpu"}):
        out = lf.load(tmp_path / "c", map_location=loc)
        assert out["w"].jax().devices() == {cpu}
    with pytest.raises(lf.CheckpointError, match="map_location"):
        lf.load(tmp_path / "c", map_location="tpu:3")


def test_loaded_host_buffers_are_adopted_without_copy_and_stay_correct_after_inplace(tmp_path):
    ref = RNG.standard_normal((500, 600)).astype(np.float32)  # 1.2 MB: its own orbax array
    small = RNG.standard_normal(7).astype(np.float32)
    lf.save({"big": lf.tensor(ref), "small": lf.tensor(small)}, tmp_path / "c")
    out = lf.load(tmp_path / "c")
    out["big"].add_(1.0)  # in place, possibly donating the adopted buffer
    np.testing.assert_allclose(_np(out["big"]), ref + 1, rtol=1e-6)
    np.testing.assert_array_equal(_np(out["small"]), small)


# ------------------------------------------------------------------------------------------ packing, inspect
def test_small_tensors_are_packed_per_dtype_but_stay_addressable(tmp_path):
    vals = {f"t{i}": RNG.standard_normal(16 + i).astype(np.float32) for i in range(300)}
    ints = {f"i{i}": np.arange(i + 1) for i in range(5)}
    lf.save(
        {**{k: lf.tensor(v) for k, v in vals.items()}, **{k: lf.tensor(v) for k, v in ints.items()}}, tmp_path / "c"
    )
    _, meta = _meta.read_meta(str(tmp_path / "c"))
    assert len(meta["groups"]) == 2  # one float32 group, one int64 group: 2 orbax arrays for 305 tensors
    infos = inspect(tmp_path / "c")
    assert len(infos) == 305 and all(i.storage == "packed" for i in infos.values())
    assert infos["t7"].shape == (23,) and infos["t7"].dtype is lf.float32 and infos["t7"].nbytes == 92
    assert infos["i4"].dtype is lf.int64 and infos["i4"].sharding is None and infos["i4"].device == "cpu"
    part = load_tensors(tmp_path / "c", ["t299", "i2", "t0"])
    assert list(part) == ["t299", "i2", "t0"]
    np.testing.assert_array_equal(_np(part["t299"]), vals["t299"])
    np.testing.assert_array_equal(_np(part["i2"]), np.arange(3))
    np.testing.assert_array_equal(_np(part["t0"]), vals["t0"])


def test_large_tensors_never_enter_the_pickle(tmp_path):
    ref = RNG.standard_normal((800, 800)).astype(np.float32)
    lf.save({"w": lf.tensor(ref)}, tmp_path / "c")
    meta_file = os.path.join(_version_dir(tmp_path / "c"), _store.META, _store.META_FILE)
    assert os.path.getsize(meta_file) < 4096
    assert inspect(tmp_path / "c")["w"].storage == "array"


def test_load_tensors_unknown_key_names_close_ones(tmp_path):
    lf.save({"model": {"weight": lf.ones(2)}}, tmp_path / "c")
    with pytest.raises(lf.CheckpointError, match=r"no tensor 'model\.wieght'.*model\.weight"):
        load_tensors(tmp_path / "c", ["model.wieght"])


def test_tensor_traced_in_graph_mode_cannot_be_saved(tmp_path):
    def f(a):
        lf.save(lf.from_jax(a), tmp_path / "c")
        return a

    with pytest.raises(lf.CheckpointError, match="traced"):
        jax.jit(f)(jax.numpy.ones(3))
    assert not (tmp_path / "c").exists()


# ------------------------------------------------------------------------------------------ safe loading
class _Evil:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


class _UserThing:
    def __init__(self, v):
        self.v = v


def test_weights_only_refuses_os_system_payload_without_running_it(tmp_path):
    marker = tmp_path / "pwned"
    lf.save({"w": lf.ones(2), "evil": _Evil(marker)}, tmp_path / "c")
    with pytest.raises(lf.CheckpointError, match=r"system.*weights_only=False") as ei:
        lf.load(tmp_path / "c")
    assert "posix.system" in str(ei.value) or "os.system" in str(ei.value)
    assert not marker.exists()
    assert inspect(tmp_path / "c")["w"].shape == (2,)  # inspect never unpickles the structure


def test_weights_only_names_user_types_and_allows_them_when_asked(tmp_path):
    lf.save({"thing": _UserThing(3)}, tmp_path / "c")
    with pytest.raises(lf.CheckpointError, match=r"test_checkpoint\._UserThing.*weights_only=False"):
        lf.load(tmp_path / "c")
    assert lf.load(tmp_path / "c", weights_only=False)["thing"].v == 3
    lf.checkpoint.add_safe_globals([_UserThing])
    try:
        assert lf.load(tmp_path / "c")["thing"].v == 3
        assert _UserThing in lf.checkpoint.get_safe_globals()
    finally:
        lf.checkpoint.clear_safe_globals()


def test_tensors_inside_user_objects_are_stored_as_tensors_too(tmp_path):
    ref = RNG.standard_normal((3, 2)).astype(np.float32)
    lf.save({"thing": _UserThing(lf.tensor(ref))}, tmp_path / "c")
    info = inspect(tmp_path / "c")
    assert list(info) == ["<unnamed>.1"] and info["<unnamed>.1"].shape == (3, 2)
    out = lf.load(tmp_path / "c", weights_only=False)
    assert type(out["thing"].v) is lf.Tensor
    np.testing.assert_array_equal(_np(out["thing"].v), ref)


def test_hand_crafted_metadata_with_malicious_global_is_refused(tmp_path):
    """A metadata file written by an attacker (not by lf.save) goes through the same allowlist."""
    marker = tmp_path / "pwned2"
    lf.save({"w": lf.ones(2)}, tmp_path / "c")
    meta_file = os.path.join(_version_dir(tmp_path / "c"), _store.META, _store.META_FILE)
    outer = {
        "format": "lazyflow.checkpoint",
        "version": 1,
        "entries": [],
        "groups": {},
        "structure": pickle.dumps(_Evil(marker)),
    }
    with open(meta_file, "wb") as f:
        f.write(_meta.frame(pickle.dumps(outer)))
    with pytest.raises(lf.CheckpointError, match="system"):
        lf.load(tmp_path / "c")
    outer_evil = pickle.dumps(_Evil(marker))  # the outer record itself malicious: refused even for inspect
    with open(meta_file, "wb") as f:
        f.write(_meta.frame(outer_evil))
    with pytest.raises(lf.CheckpointError, match="system"):
        inspect(tmp_path / "c")
    assert not marker.exists()


# ------------------------------------------------------------------------------------------ integrity
def test_flipped_byte_in_a_tensor_names_that_tensor(tmp_path):
    a = RNG.standard_normal((400, 700)).astype(np.float32)
    b = RNG.standard_normal((400, 700)).astype(np.float32)
    s = np.full(300, 1234.5678, np.float32)  # a packed group above OCDBT's 1 KB inline limit: raw in a file
    lf.save({"a": lf.tensor(a), "b": lf.tensor(b), "small": lf.tensor(s), "other": lf.ones(5)}, tmp_path / "c")
    _flip_bytes_of(tmp_path / "c", b.tobytes()[1000:1400])
    with pytest.raises(lf.CheckpointError, match=r"corrupted.*'b'") as ei:
        lf.load(tmp_path / "c")
    assert "'a'" not in str(ei.value)
    np.testing.assert_array_equal(_np(load_tensors(tmp_path / "c", ["a"])["a"]), a)  # the rest is intact
    _flip_bytes_of(tmp_path / "c", s.tobytes())
    with pytest.raises(lf.CheckpointError, match=r"corrupted.*'small'"):
        load_tensors(tmp_path / "c", ["small"])
    np.testing.assert_array_equal(_np(load_tensors(tmp_path / "c", ["other"])["other"]), np.ones(5))


def test_a_flipped_byte_anywhere_never_loads_wrong_numbers(tmp_path):
    """Flip one byte at several offsets of every file of a checkpoint (tensor data inlined in compressed
    OCDBT nodes, b-tree nodes, manifests, orbax metadata, ours): each load raises CheckpointError or
    returns exactly the saved values."""
    ref = {"tiny": np.array([1.5, -2.0, 3.25], np.float32), "big": RNG.standard_normal(70_000)}
    c = tmp_path / "c"
    lf.save({k: lf.tensor(v) for k, v in ref.items()}, c)
    files = [os.path.join(d, f) for d, _, fs in os.walk(_version_dir(c)) for f in fs]
    outcomes = collections.Counter()
    for f in files:
        orig = open(f, "rb").read()
        for at in sorted({0, len(orig) // 3, len(orig) // 2, len(orig) - 1}):
            bad = bytearray(orig)
            bad[at] ^= 0xFF
            open(f, "wb").write(bad)
            try:
                out = lf.load(c)
            except lf.CheckpointError:
                outcomes["error"] += 1
            else:
                outcomes["intact"] += 1
                for k, v in ref.items():
                    np.testing.assert_array_equal(_np(out[k]), v)
            open(f, "wb").write(orig)
    assert outcomes["error"] > len(files)  # most flips are caught; the others touched unused bytes


def test_corrupted_metadata_file_is_detected(tmp_path):
    lf.save({"w": lf.ones(2)}, tmp_path / "c")
    meta_file = os.path.join(_version_dir(tmp_path / "c"), _store.META, _store.META_FILE)
    data = bytearray(open(meta_file, "rb").read())
    data[-5] ^= 1
    open(meta_file, "wb").write(data)
    with pytest.raises(lf.CheckpointError, match="metadata file is corrupted"):
        lf.load(tmp_path / "c")
    open(meta_file, "wb").write(data[:40])
    with pytest.raises(lf.CheckpointError, match="truncated"):
        lf.load(tmp_path / "c")


# ------------------------------------------------------------------------------------------ broken checkpoints
def test_missing_foreign_and_partial_directories_raise_naming_path_and_what_is_missing(tmp_path):
    with pytest.raises(lf.CheckpointError, match=r"no checkpoint at '.*nope'.*does not exist"):
        lf.load(tmp_path / "nope")
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "model.bin").write_bytes(b"x")
    with pytest.raises(lf.CheckpointError, match=r"foreign.*LAZYFLOW_CHECKPOINT.*missing.*model\.bin"):
        lf.load(foreign)
    (tmp_path / "file.pt").write_bytes(b"x")
    with pytest.raises(lf.CheckpointError, match="file.pt' is not a checkpoint lazyflow knows"):
        lf.load(tmp_path / "file.pt")
    c = tmp_path / "c"
    lf.save({"w": lf.randn(300, 300)}, c)
    vdir = _version_dir(c)
    import shutil

    shutil.rmtree(os.path.join(vdir, "tensors"))
    with pytest.raises(lf.CheckpointError, match=r"'.*c'.*reading the tensor data failed for w"):
        lf.load(c)
    shutil.rmtree(vdir)
    with pytest.raises(lf.CheckpointError, match=r"version directory 'v-.*' .* is missing"):
        lf.load(c)
    lf.save({"w": lf.ones(1)}, c)
    os.unlink(os.path.join(_version_dir(c), _store.META, _store.META_FILE))
    with pytest.raises(lf.CheckpointError, match=r"metadata file .*metadata\.lfpkl' is missing"):
        lf.load(c)


def test_saving_over_foreign_paths_is_refused_and_leaves_them_alone(tmp_path):
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "keep.txt").write_text("mine")
    with pytest.raises(lf.CheckpointError, match="not a lazyflow checkpoint"):
        lf.save(lf.ones(1), foreign)
    assert os.listdir(foreign) == ["keep.txt"]
    (tmp_path / "f").write_text("x")
    with pytest.raises(lf.CheckpointError, match="existing file"):
        lf.save(lf.ones(1), tmp_path / "f")
    (tmp_path / "f.pt").write_text("x")  # a single-file save replaces checkpoints only (tests/test_single_file.py)
    with pytest.raises(lf.CheckpointError, match="f.pt' exists and is not a checkpoint"):
        lf.save(lf.ones(1), tmp_path / "f.pt")
    assert (tmp_path / "f.pt").read_text() == "x"
    with pytest.raises(lf.CheckpointError, match="parent directory"):
        lf.save(lf.ones(1), tmp_path / "no" / "such")
    empty = tmp_path / "empty"
    empty.mkdir()
    lf.save(lf.ones(1), empty)  # an empty directory is fine
    np.testing.assert_array_equal(_np(lf.load(empty)), np.ones(1))


def test_file_objects_that_are_no_checkpoint_are_refused_by_name(tmp_path):
    """File objects hold single-file checkpoints (tests/test_single_file.py; inspect of files:
    tests/test_checkpoint_inspect_files.py); a few bytes that are no checkpoint are refused by name."""
    import io

    with pytest.raises(lf.CheckpointError, match="the file object is not a checkpoint lazyflow knows"):
        lf.load(io.BytesIO(b"x"))
    with pytest.raises(lf.CheckpointError, match="not a checkpoint lazyflow knows.*empty"):
        inspect(io.BytesIO())


def test_newer_format_version_is_refused(tmp_path):
    c = tmp_path / "c"
    lf.save(lf.ones(1), c)
    ptr = c / _layout.POINTER
    info = json.loads(ptr.read_text())
    info["version"] = _meta.FORMAT_VERSION + 1
    ptr.write_text(json.dumps(info))
    with pytest.raises(lf.CheckpointError, match="newer than the versions this lazyflow reads"):
        lf.load(c)
    info["version"] = _meta.FORMAT_VERSION
    ptr.write_text(json.dumps(info))
    meta_file = os.path.join(_version_dir(c), _store.META, _store.META_FILE)
    outer = {
        "format": "lazyflow.checkpoint",
        "version": _meta.FORMAT_VERSION + 5,
        "entries": [],
        "groups": {},
        "structure": pickle.dumps(None),
    }
    open(meta_file, "wb").write(_meta.frame(pickle.dumps(outer)))
    with pytest.raises(lf.CheckpointError, match="format version 6"):
        inspect(c)


def test_overwrite_replaces_the_version_and_cleans_leftovers(tmp_path):
    c = tmp_path / "c"
    lf.save({"v": lf.tensor([1.0])}, c)
    first = _version_dir(c)
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    ).stdout.strip()
    leftover = c / f"v-{dead}-abc-def"
    leftover.mkdir()
    sibling = tmp_path / f".c.lftmp-{dead}-x"
    sibling.mkdir()
    foreign_sibling = tmp_path / "unrelated"
    foreign_sibling.mkdir()
    lf.save({"v": lf.tensor([2.0])}, c)
    _layout.wait_for_cleanups()  # the old version is removed in the background
    assert _version_dir(c) != first and not os.path.exists(first)
    assert not leftover.exists() and not sibling.exists() and foreign_sibling.exists()
    assert sorted(os.listdir(c)) == sorted([_layout.POINTER, os.path.basename(_version_dir(c))])
    np.testing.assert_array_equal(_np(lf.load(c)["v"]), [2.0])


# ------------------------------------------------------------------------------------------ async save
def test_async_save_snapshots_before_returning_inplace_updates_do_not_leak(tmp_path):
    big_ref = RNG.standard_normal((700, 700)).astype(np.float32)  # its own orbax array
    small_ref = RNG.standard_normal(10).astype(np.float32)  # packed
    arr_ref = np.arange(12.0)
    big, small, arr = lf.tensor(big_ref), lf.tensor(small_ref), arr_ref.copy()
    handle = lf.save({"big": big, "small": small, "arr": arr}, tmp_path / "c", async_save=True)
    for _ in range(3):  # in-place updates right away (buffer donation whenever nothing else holds the array)
        big.mul_(2.0)
        small.add_(1.0)
        arr += 1
    handle.wait()
    assert handle.done() and handle.exception() is None
    out = lf.load(tmp_path / "c")
    np.testing.assert_array_equal(_np(out["big"]), big_ref)
    np.testing.assert_array_equal(_np(out["small"]), small_ref)
    np.testing.assert_array_equal(out["arr"], arr_ref)
    np.testing.assert_allclose(_np(big), big_ref * 8)  # and the training-side updates happened


def test_async_save_failure_is_reported_and_old_checkpoint_kept(tmp_path, monkeypatch):
    c = tmp_path / "c"
    lf.save({"v": lf.tensor([1.0])}, c)

    def broken_commit(self, version):
        raise OSError("disk full (simulated)")

    monkeypatch.setattr(_layout.Transaction, "commit", broken_commit)
    handle = lf.save({"v": lf.tensor([2.0])}, c, async_save=True)
    with pytest.raises(lf.CheckpointError, match="disk full"):
        handle.wait(timeout=60)
    assert isinstance(handle.exception(), lf.CheckpointError)
    monkeypatch.undo()
    np.testing.assert_array_equal(_np(lf.load(c)["v"]), [1.0])
    lf.save({"v": lf.tensor([3.0])}, c)  # the path lock was released
    np.testing.assert_array_equal(_np(lf.load(c)["v"]), [3.0])


# ------------------------------------------------------------------------------------------ manager
def test_manager_retention_latest_restore(tmp_path):
    mgr = CheckpointManager(tmp_path / "run", max_to_keep=2, keep_every=2)
    assert mgr.latest_step() is None and mgr.all_steps() == []
    with pytest.raises(lf.CheckpointError, match="no complete checkpoint"):
        mgr.restore()
    for step in range(1, 6):
        mgr.save(step, {"step": step, "w": lf.full((3,), float(step))})
    assert mgr.all_steps() == [2, 4, 5] and mgr.latest_step() == 5
    out = mgr.restore()
    assert out["step"] == 5
    np.testing.assert_array_equal(_np(out["w"]), np.full(3, 5.0, np.float32))
    assert mgr.restore(step=2, map_location="cpu")["step"] == 2
    with pytest.raises(lf.CheckpointError, match="step 3"):
        mgr.restore(step=3)
    mgr.save(6, {"step": 6}, async_save=True)
    h = mgr.save(7, {"step": 7}, async_save=True)  # first waits for step 6's save (and its retention)
    h.wait()  # retention has run when the handle reports done
    assert mgr.all_steps() == [2, 4, 6, 7]
    mgr.wait()
    assert mgr.restore()["step"] == 7
    with pytest.raises(lf.CheckpointError, match="max_to_keep"):
        CheckpointManager(tmp_path / "x", max_to_keep=0)


def test_manager_cleans_up_after_crashes(tmp_path):
    run = tmp_path / "run"
    mgr = CheckpointManager(run)
    mgr.save(1, {"step": 1})
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    ).stdout.strip()
    (run / "step_2").mkdir()  # a first save of step 2 killed before its rename: only leftovers inside
    (run / "step_2" / f"v-{dead}-1-2.orbax-checkpoint-tmp").mkdir()
    (run / f".step_3.lftmp-{dead}-aa").mkdir()  # staging dir of a killed save
    (run / f".step_1.lftmp-{dead}-bb").mkdir()  # a deletion interrupted after its rename
    (run / "notes.txt").write_text("user file")
    mgr2 = CheckpointManager(run)
    assert sorted(os.listdir(run)) == ["notes.txt", "step_1"]
    assert mgr2.all_steps() == [1] and mgr2.restore()["step"] == 1
