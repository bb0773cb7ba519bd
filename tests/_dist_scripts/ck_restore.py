"""One process restoring the checkpoint that 2 processes x 4 devices wrote (ck_save.py train), on 1 or 4 devices.

``ck_restore.py PATH EXPECTED.json`` (run with 1 or 4 virtual devices). EXPECTED is rank 0's RESULT of the saving
run: the saved values, gathered from both processes. Checks print OK/FAIL lines (see _checks.py).

Training then continues from the checkpoint (eagerly on 1 device, FSDP-style over the 4-device mesh) and must
follow the uninterrupted trajectory of a plain-JAX reference (jax.grad + torch's Adam rule) started from the
same initial weights.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile

import jax
import jax.numpy as jnp
import numpy as np
from _checks import check, main
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import lazyflow as lf
from lazyflow import nn
from lazyflow.checkpoint import _layout

F = nn.functional
D = lf.distributed
PATH = sys.argv[1]
EXP = json.load(open(sys.argv[2]))
NDEV = len(jax.devices())
PARAMS = {k: np.array(v, np.float32) for k, v in EXP["params"].items()}
OPT = {k: np.array(v, np.float32) for k, v in EXP["optim"].items()}
KEYS = ["0.weight", "0.bias", "2.weight", "2.bias"]


def model():
    lf.manual_seed(0)
    return nn.Sequential(nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 3))


def batches(n, b=16):
    rng = np.random.default_rng(2)
    return [(rng.standard_normal((b, 64)).astype(np.float32), rng.integers(0, 3, b)) for _ in range(n)]


def reference(steps):
    """Plain JAX: `steps` Adam steps (lr 1e-2, torch's rule) from the initial weights, full global batches."""
    p = {k: jnp.asarray(v.numpy()) for k, v in model().state_dict().items()}

    def loss_fn(p, x, y):
        z = jnp.tanh(x @ p["0.weight"].T + p["0.bias"]) @ p["2.weight"].T + p["2.bias"]
        return -jnp.mean(jax.nn.log_softmax(z)[jnp.arange(len(y)), y])

    m = {k: jnp.zeros_like(v) for k, v in p.items()}
    v2 = {k: jnp.zeros_like(v) for k, v in p.items()}
    losses = []
    for t, (x, y) in enumerate(batches(steps), 1):
        loss, g = jax.value_and_grad(loss_fn)(p, x, y)
        losses.append(float(loss))
        for k in p:
            m[k] = 0.9 * m[k] + 0.1 * g[k]
            v2[k] = 0.999 * v2[k] + 0.001 * g[k] ** 2
            p[k] = p[k] - (1e-2 / (1 - 0.9**t)) * m[k] / (jnp.sqrt(v2[k]) / np.sqrt(1 - 0.999**t) + 1e-8)
    return np.array(losses), {k: np.asarray(v) for k, v in p.items()}


REF_LOSSES, REF_PARAMS = reference(5)


class Step(nn.Graph):
    def __init__(self, m, o):
        super().__init__()
        self.m = m
        self.add_optimizer(o)

    def build(self, x, y):
        loss = F.cross_entropy(self.m(x), y)
        loss.backward()
        return loss


def _same_values(out):
    for k in KEYS:
        np.testing.assert_array_equal(out["model"][k].numpy(), PARAMS[k], err_msg=k)
    for i, s in out["optim"]["state"].items():
        for n, v in s.items():
            if n != "step":
                np.testing.assert_array_equal(v.numpy(), OPT[f"{i}.{n}"], err_msg=f"{i}.{n}")
    assert out["step"] == 3 and out["losses"] == EXP["losses"]


def _continue(m, o, graph_mesh=None):
    """Two more steps from the restored state; the whole trajectory must follow the reference."""
    losses = list(EXP["losses"])
    st = None
    if graph_mesh is not None:
        st = Step(m, o)
        st.config.data_parallel(graph_mesh, "data")
        st.config.shard_parameters(graph_mesh, "data")
    for x, y in batches(5)[3:]:
        if st is None:
            o.zero_grad()
            loss = F.cross_entropy(m(lf.tensor(x)), lf.tensor(y))
            loss.backward()
            o.step()
        else:
            loss = st(lf.tensor(x), lf.tensor(y))
        losses.append(loss.item())
    rel = np.abs(np.array(losses) - REF_LOSSES) / np.abs(REF_LOSSES)
    assert rel.max() <= 1e-5, (losses, REF_LOSSES)
    for k, v in m.state_dict().items():
        np.testing.assert_allclose(v.numpy(), REF_PARAMS[k], rtol=1e-5, atol=2e-6, err_msg=k)


def _restore_into(out):
    m = model()
    m.load_state_dict(out["model"])
    o = lf.optim.Adam(m.parameters(), lr=1e-2)
    o.load_state_dict(out["optim"])
    return m, o


def _shard_bytes(k):
    """The bytes of device k's shard of 0.weight (rows 8k..8k+7 of the (64, 64) weight split over 8 devices; 2 KB,
    above OCDBT's inline-value size, so stored uncompressed in a data file of the process that wrote it)."""
    return np.ascontiguousarray(PARAMS["0.weight"][8 * k : 8 * k + 8]).tobytes()


def _files_holding(root, data):
    hits = []
    for d, _, fs in os.walk(root):
        for f in fs:
            if data in open(os.path.join(d, f), "rb").read():
                hits.append(os.path.relpath(os.path.join(d, f), root))
    return hits


@check
def saving_processes_recorded():
    assert EXP["meta_writes"] == 1  # rank 0's count; the test checks rank 1 wrote none
    assert EXP["devices"] != list(range(8))  # two processes' global device ids, not one process's


@check
def the_saved_values_match():
    """Trained values (rel. to the reference after 3 steps) are what was saved: 2-process training was right."""
    np.testing.assert_allclose(EXP["losses"], REF_LOSSES[:3], rtol=1e-5)


if NDEV == 1:

    @check
    def one_device_needs_a_placement():
        try:
            lf.load(PATH)
        except lf.CheckpointError as e:
            assert "do not exist here" in str(e) and "map_location" in str(e), str(e)
        else:
            raise AssertionError("loading onto the saving processes' devices should fail here")

    @check
    def one_device_same_values():
        out = lf.load(PATH, map_location="cpu")
        for k in KEYS:
            assert not out["model"][k].is_sharded and out["model"][k].device == lf.device("cpu")
        _same_values(out)

    @check
    def one_device_resumes_the_trajectory():
        m, o = _restore_into(lf.load(PATH, map_location="cpu"))
        _continue(m, o)

    @check
    def each_process_wrote_only_its_own_shards():
        vdir = _layout.resolve(PATH, 1)
        for k in range(8):
            hits = _files_holding(os.path.join(vdir, "tensors"), _shard_bytes(k))
            assert len(hits) == 1 and f"ocdbt.process_{k // 4}{os.sep}" in hits[0], (k, hits)

    @check
    def corrupted_shard_raises_checkpoint_error():
        tmp = tempfile.mkdtemp()
        try:
            bad = os.path.join(tmp, "ckpt")
            shutil.copytree(PATH, bad)
            shard = _shard_bytes(6)  # written by process 1
            vdir = _layout.resolve(bad, 1)
            (hit,) = _files_holding(os.path.join(vdir, "tensors"), shard)
            full = os.path.join(vdir, "tensors", hit)
            data = bytearray(open(full, "rb").read())
            data[data.find(shard) + 9] ^= 0x01
            open(full, "wb").write(data)
            try:
                lf.load(bad, map_location="cpu")
            except lf.CheckpointError as e:
                assert "'model.0.weight'" in str(e) and "corrupted" in str(e), str(e)
            else:
                raise AssertionError("a flipped bit in a shard was not detected")
            part = lf.checkpoint.load_tensors(bad, ["model.2.weight"], map_location="cpu")
            np.testing.assert_array_equal(part["model.2.weight"].numpy(), PARAMS["2.weight"])
        finally:
            shutil.rmtree(tmp)

else:
    MESH = D.Mesh((4,), ("data",))

    def _onto_mesh(key, info):
        return NamedSharding(MESH, info.sharding.spec) if info.sharding is not None else None

    @check
    def four_devices_same_values_resharded():
        out = lf.load(PATH, sharding=_onto_mesh, map_location="cpu")
        w = out["model"]["0.weight"]
        assert w.sharding == NamedSharding(MESH, P("data", None))
        for sh in w.jax().addressable_shards:  # 16 rows per device now (8 per device when saved)
            assert sh.data.shape == (16, 64)
            np.testing.assert_array_equal(np.asarray(sh.data), PARAMS["0.weight"][sh.index])
        _same_values(out)

    @check
    def four_devices_resume_fsdp_training():
        m, o = _restore_into(lf.load(PATH, sharding=_onto_mesh, map_location="cpu"))
        _continue(m, o, graph_mesh=MESH)
        assert m[0].weight.sharding == NamedSharding(MESH, P("data", None))


if __name__ == "__main__":
    main()
