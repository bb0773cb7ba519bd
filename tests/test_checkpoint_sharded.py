"""Sharded tensors (jax NamedSharding over 8 forced host devices, in subprocesses): saved shard by shard
without being gathered, loaded back with the saved sharding, another mesh/partitioning, or onto one device,
including in a process with fewer devices than the saving one (where orbax alone fails "Topology
mismatch"). Values are compared with the numpy arrays they were made from."""

import os
import subprocess
import sys
import textwrap

import pytest

COMMON = textwrap.dedent("""
    import os, sys
    import numpy as np
    import jax
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
    import lazyflow as lf
    from lazyflow.checkpoint import _layout, _meta

    path = sys.argv[1]
    W = np.arange(64 * 48, dtype=np.float32).reshape(64, 48) / 7
    E = np.arange(32 * 16, dtype=np.int32).reshape(32, 16)
    R = np.linspace(-1, 1, 40, dtype=np.float32)
    SMALL = np.array([1.5, 2.5, 3.5], np.float32)

    def ok(name):
        print("OK", name, flush=True)

    def ids(sharding):
        return [d.id for d in sharding.mesh.devices.flat]
""")

SAVE = COMMON + textwrap.dedent("""
    assert len(jax.devices()) == 8
    mesh = Mesh(np.array(jax.devices()).reshape(4, 2), ("x", "y"))
    w = lf.from_jax(jax.device_put(W, NamedSharding(mesh, P("x", "y"))))
    e = lf.from_jax(jax.device_put(E, NamedSharding(mesh, P(None, "x"))))
    r = lf.from_jax(jax.device_put(R, NamedSharding(mesh, P())))  # replicated on all 8: stored once
    assert w.is_sharded and e.is_sharded and r.is_sharded

    # saving must never gather a sharded array into one host buffer: forbid it while lf.save runs
    from jax._src.array import ArrayImpl
    orig = ArrayImpl.__array__
    def no_gather(self, *a, **k):
        if len(self.sharding.device_set) > 1:
            raise AssertionError("a sharded array was gathered to the host during lf.save")
        return orig(self, *a, **k)
    ArrayImpl.__array__ = no_gather
    lf.save({"w": w, "e": e, "r": r, "small": lf.tensor(SMALL), "meta": {"step": 3}}, path)
    ArrayImpl.__array__ = orig
    ok("saved_without_gather")

    info = lf.checkpoint.inspect(path)
    assert info["w"].sharding.spec == P("x", "y") and info["w"].sharding.mesh_shape == (4, 2)
    assert info["w"].sharding.axis_names == ("x", "y") and info["w"].sharding.device_ids == tuple(range(8))
    assert info["e"].sharding.spec == P(None, "x") and info["small"].sharding is None
    assert info["w"].storage == "array" and info["w"].shape == (64, 48)
    ok("inspect_lists_saved_sharding")

    _, meta = _meta.read_meta(path)
    crc = {en["key"]: en["crc"] for en in meta["entries"]}
    assert len(crc["w"]) == 8 and len(crc["r"]) == 1  # one checksum per saved shard, replicas once
    ok("one_checksum_per_saved_shard")

    out = lf.load(path)
    assert out["meta"] == {"step": 3}
    for k, ref, spec in (("w", W, P("x", "y")), ("e", E, P(None, "x")), ("r", R, P())):
        s = out[k].sharding
        assert isinstance(s, NamedSharding) and s.spec == spec and ids(s) == list(range(8)), (k, s)
        assert s.mesh.axis_names == ("x", "y")
        np.testing.assert_array_equal(out[k].numpy(), ref)
    np.testing.assert_array_equal(out["small"].numpy(), SMALL)
    ok("load_with_saved_sharding")

    mesh2 = Mesh(np.array(jax.devices()[::-1]).reshape(2, 4), ("a", "b"))
    def by_key(key, info):
        if key == "w":
            return NamedSharding(mesh2, P("b", "a"))
        if key == "e":
            return NamedSharding(mesh2, P("a"))
        return None  # the rest keeps its saved placement
    out = lf.load(path, sharding=by_key)
    assert out["w"].sharding.spec == P("b", "a") and ids(out["w"].sharding) == list(range(7, -1, -1))
    assert out["e"].sharding.spec == P("a") and out["r"].sharding.spec == P()
    for k, ref in (("w", W), ("e", E), ("r", R)):
        np.testing.assert_array_equal(out[k].numpy(), ref)
    ok("load_onto_another_mesh_and_partitioning")

    everywhere = NamedSharding(mesh2, P())
    out = lf.load(path, sharding=everywhere)  # one sharding for every tensor, unsharded ones included
    for k, ref in (("w", W), ("e", E), ("r", R), ("small", SMALL)):
        assert out[k].sharding == everywhere, k
        np.testing.assert_array_equal(out[k].numpy(), ref)
    ok("load_with_one_sharding_for_all")

    for loc in ("cpu", jax.devices()[3]):
        out = lf.load(path, map_location=loc)
        for k, ref in (("w", W), ("e", E), ("r", R)):
            assert len(out[k].sharding.device_set) == 1, (k, out[k].sharding)
            np.testing.assert_array_equal(out[k].numpy(), ref)
        assert out["w"].jax().devices() == {jax.devices()[3] if loc != "cpu" else jax.devices()[0]}
    ok("load_onto_one_device")

    part = lf.checkpoint.load_tensors(path, ["e"], sharding=lambda k, i: NamedSharding(mesh2, P(None, "b")))
    assert part["e"].sharding.spec == P(None, "b")
    np.testing.assert_array_equal(part["e"].numpy(), E)
    ok("partial_load_of_a_sharded_tensor")

    # async save of sharded tensors; in-place update right away
    p2 = path + "_async"
    h = lf.save({"w": w}, p2, async_save=True)
    w.mul_(3.0)
    h.wait()
    np.testing.assert_array_equal(lf.load(p2)["w"].numpy(), W)
    np.testing.assert_allclose(w.numpy(), W * 3)
    ok("async_save_of_sharded_tensor")
""")

CORRUPT = COMMON + textwrap.dedent("""
    # corrupt one shard of 'w' on disk: found by content in the orbax data files
    shard = np.ascontiguousarray(W[16:32, 24:48]).tobytes()[200:400]  # device (1, 1) of the 4x2 mesh
    vdir = _layout.resolve(path, 1)
    hit = False
    for d, _, fs in os.walk(os.path.join(vdir, "tensors")):
        for f in fs:
            full = os.path.join(d, f)
            data = bytearray(open(full, "rb").read())
            at = data.find(shard)
            if at >= 0:
                data[at + 50] ^= 0x10
                open(full, "wb").write(data)
                hit = True
    assert hit
    for kw in ({}, {"map_location": "cpu"}):
        try:
            lf.load(path, **kw)
        except lf.CheckpointError as ex:
            assert "'w'" in str(ex) and "corrupted" in str(ex) and "'e'" not in str(ex), str(ex)
        else:
            raise AssertionError("corruption not detected")
    np.testing.assert_array_equal(lf.checkpoint.load_tensors(path, ["e"])["e"].numpy(), E)
    ok("corrupted_shard_names_its_tensor")
""")

FEWER = COMMON + textwrap.dedent("""
    assert len(jax.devices()) == 2
    try:
        lf.load(path)
    except lf.CheckpointError as ex:
        msg = str(ex)
        assert "'w'" in msg and "do not exist here" in msg and "map_location" in msg, msg
    else:
        raise AssertionError("loading onto missing devices did not fail")
    ok("missing_devices_named")

    out = lf.load(path, map_location="cpu")
    for k, ref in (("w", W), ("e", E), ("r", R), ("small", SMALL)):
        np.testing.assert_array_equal(out[k].numpy(), ref)
    ok("fewer_devices_onto_one_device")

    mesh = Mesh(np.array(jax.devices()), ("d",))
    out = lf.load(path, sharding=lambda k, info: NamedSharding(mesh, P("d")) if info.sharding else None,
                  map_location="cpu")
    assert out["w"].sharding.spec == P("d") and len(out["w"].sharding.device_set) == 2
    for k, ref in (("w", W), ("e", E), ("r", R)):
        np.testing.assert_array_equal(out[k].numpy(), ref)
    ok("fewer_devices_onto_a_smaller_mesh")
""")


MULTI = COMMON + textwrap.dedent("""
    # two processes (jax.distributed) with 4 devices each; path holds the 8-device single-process checkpoint
    lf.distributed.init_process_group()
    assert jax.process_count() == 2 and len(jax.devices()) == 8 and len(jax.local_devices()) == 4
    mesh = Mesh(np.array(jax.devices()).reshape(4, 2), ("x", "y"))
    glob = lambda a, spec: lf.from_jax(jax.make_array_from_callback(a.shape, NamedSharding(mesh, spec),
                                                                    lambda i: a[i]))
    mp = path + "_multi"
    w = glob(W, P("x", "y"))
    lf.save({"w": w, "e": glob(E, P("y")), "small": lf.tensor(SMALL), "step": 7}, mp)
    _, meta = _meta.read_meta(mp)
    crc = {en["key"]: en["crc"] for en in meta["entries"]}
    assert len(crc["w"]) == 8 and len(crc["e"]) == 2  # every process's shards, each region once
    out = lf.load(mp)
    assert out["step"] == 7 and out["w"].sharding.spec == P("x", "y")
    for k, ref in (("w", W), ("e", E)):
        for sh in out[k].jax().addressable_shards:
            np.testing.assert_array_equal(np.asarray(sh.data), ref[sh.index])
    np.testing.assert_array_equal(out["small"].numpy(), SMALL)
    ok("multi_process_save_and_load")

    out = lf.load(mp, map_location="cpu")  # each process gets the whole tensor on its own first device
    assert out["w"].jax().devices() == {jax.local_devices()[0]}
    np.testing.assert_array_equal(out["w"].numpy(), W)
    ok("multi_process_load_onto_local_device")

    h = lf.save({"w": w}, mp + "_async", async_save=True)
    w.add_(1.0)
    h.wait()
    for sh in lf.load(mp + "_async")["w"].jax().addressable_shards:
        np.testing.assert_array_equal(np.asarray(sh.data), W[sh.index])
    ok("multi_process_async_save")

    # the single-process 8-device checkpoint, loaded by two processes over their global mesh
    out = lf.load(path, sharding=lambda k, info: NamedSharding(mesh, P(None, "x")) if k == "e" else None,
                  map_location="cpu")
    for sh in out["e"].jax().addressable_shards:
        np.testing.assert_array_equal(np.asarray(sh.data), E[sh.index])
    np.testing.assert_array_equal(out["w"].numpy(), W)
    ok("single_process_checkpoint_loaded_by_two_processes")
""")

FROM_MULTI = COMMON + textwrap.dedent("""
    # one process, 8 devices: the two-process checkpoint (saved over devices 0-3 and 2048-2051)
    mp = path + "_multi"
    try:
        lf.load(mp)
    except lf.CheckpointError as ex:
        assert "do not exist here" in str(ex), str(ex)
    else:
        raise AssertionError("devices of the other processes should not be found here")
    mesh = Mesh(np.array(jax.devices()).reshape(2, 4), ("a", "b"))
    out = lf.load(mp, sharding=lambda k, info: NamedSharding(mesh, P("b")) if info.sharding else None,
                  map_location="cpu")
    np.testing.assert_array_equal(out["w"].numpy(), W)
    np.testing.assert_array_equal(out["e"].numpy(), E)
    assert out["step"] == 7
    ok("multi_process_checkpoint_loaded_by_one_process")
""")


def _run_multi(script: str, path: str) -> str:
    env = {
        **os.environ,
        "XLA_FLAGS": "--xla_force_host_platform_device_count=4",
        "PYTHONPATH": os.pathsep.join(sys.path),
        "JAX_PLATFORMS": "cpu",
    }
    with open(path + "_script.py", "w") as f:
        f.write(script)
    p = subprocess.run(
        [sys.executable, "-m", "lazyflow.distributed.run", "--nproc", "2", path + "_script.py", path],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    if p.returncode != 0:
        raise AssertionError(f"multi-process run failed:\n{p.stdout[-4000:]}\n{p.stderr[-4000:]}")
    oks = [line.split("] ", 1)[1] for line in p.stdout.splitlines() if "] OK " in line]
    return "\n".join(o for o in oks if o.startswith("OK")) + "\n"


def _run(script: str, path: str, devices: int) -> str:
    env = {
        **os.environ,
        "XLA_FLAGS": f"--xla_force_host_platform_device_count={devices}",
        "PYTHONPATH": os.pathsep.join(sys.path),
        "JAX_PLATFORMS": "cpu",
    }
    p = subprocess.run([sys.executable, "-c", script, path], capture_output=True, text=True, env=env, timeout=300)
    if p.returncode != 0:
        raise AssertionError(f"subprocess failed:\n{p.stdout}\n{p.stderr[-4000:]}")
    return p.stdout


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("sharded") / "ckpt")
    out = _run(SAVE, path, 8) + _run(FEWER, path, 2) + _run_multi(MULTI, path) + _run(FROM_MULTI, path, 8)
    out += _run(CORRUPT, path, 8)
    return {line.split()[1] for line in out.splitlines() if line.startswith("OK ")}


@pytest.mark.parametrize(
    "check",
    [
        "saved_without_gather",
        "inspect_lists_saved_sharding",
        "one_checksum_per_saved_shard",
        "load_with_saved_sharding",
        "load_onto_another_mesh_and_partitioning",
        "load_with_one_sharding_for_all",
        "load_onto_one_device",
        "partial_load_of_a_sharded_tensor",
        "async_save_of_sharded_tensor",
        "missing_devices_named",
        "fewer_devices_onto_one_device",
        "fewer_devices_onto_a_smaller_mesh",
        "corrupted_shard_names_its_tensor",
        "multi_process_save_and_load",
        "multi_process_load_onto_local_device",
        "multi_process_async_save",
        "single_process_checkpoint_loaded_by_two_processes",
        "multi_process_checkpoint_loaded_by_one_process",
    ],
)
def test_sharded(results, check):
    assert check in results
