"""Sharded checkpoints across process counts and meshes (2 processes x 4 virtual CPU devices through the launcher;
restored in 1 process on 1 device and on 4 devices).

* Saved by 2 processes after FSDP-style training over their 8 devices: only process 0 writes the metadata file
  (writes counted in each process), no multi-device array is gathered to a host while saving, and each
  device's shard of a weight lies in the OCDBT data of the process that holds it (found by content).
* Restored in 1 process on 1 device (``map_location``) and on 4 devices (``sharding=``, a 4-device mesh): the
  same values as the saving processes held; training continues (eagerly / FSDP on 4 devices) along the
  uninterrupted trajectory of a plain-JAX reference. A flipped bit in a shard written by process 1 raises
  CheckpointError naming the tensor (the checkpoint's CRC-32s); other tensors still load.
* Crash safety: while the 2 processes save two states alternately, one rank (1, then 0) is SIGKILLed at a random
  instant; the launcher stops the other with status 137, and the path holds one complete state, A or B; the next
  2-process saves to the same path work.
"""

import json
import os
import random
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import lazyflow as lf

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "_dist_scripts"))
import _checks

ENV = dict(os.environ, JAX_PLATFORMS="cpu", XLA_FLAGS="--xla_force_host_platform_device_count=4")


def _launch(*args):
    cmd = [
        sys.executable,
        "-m",
        "lazyflow.distributed.run",
        "--nproc",
        "2",
        os.path.join(HERE, "_dist_scripts", "ck_save.py"),
        *args,
    ]
    return subprocess.Popen(
        cmd, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=os.path.dirname(HERE)
    )


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    root = tmp_path_factory.mktemp("dist_ckpt")
    path = str(root / "ckpt")
    p = _launch("train", path)
    out, _ = p.communicate(timeout=300)
    assert p.returncode == 0, out[-8000:]
    res = {}
    for line in out.splitlines():
        if "] RESULT " in line:
            r = json.loads(line.split("] RESULT ", 1)[1])
            res[r["rank"]] = r
    assert sorted(res) == [0, 1], out[-4000:]
    expected = str(root / "expected.json")
    with open(expected, "w") as f:
        json.dump(res[0], f)
    return path, expected, res


def test_metadata_written_once_by_process_0(saved):
    _, _, res = saved
    assert res[0]["meta_writes"] == 1 and res[1]["meta_writes"] == 0
    assert res[0]["params"] == res[1]["params"] and res[0]["optim"] == res[1]["optim"]


EXPECTED_CHECKS = {
    1: [
        "saving_processes_recorded",
        "the_saved_values_match",
        "one_device_needs_a_placement",
        "one_device_same_values",
        "one_device_resumes_the_trajectory",
        "each_process_wrote_only_its_own_shards",
        "corrupted_shard_raises_checkpoint_error",
    ],
    4: [
        "saving_processes_recorded",
        "the_saved_values_match",
        "four_devices_same_values_resharded",
        "four_devices_resume_fsdp_training",
    ],
}


@pytest.fixture(scope="module", params=[1, 4], ids=["1device", "4devices"])
def restored(request, saved):
    path, expected, _ = saved
    return request.param, _checks.run_script("ck_restore.py", path, expected, devices=request.param, timeout=300)


def test_restore(restored):
    ndev, out = restored
    reported = [ln.split()[1] for ln in out.splitlines() if ln.startswith(("OK ", "FAIL "))]
    assert reported == EXPECTED_CHECKS[ndev], out[-4000:]
    for name in reported:
        _checks.outcome(out, name)


def _consistent(path):
    """The checkpoint at ``path`` is one complete saved state (A or B); returns its tag."""
    out = lf.load(path, map_location="cpu")
    v = {"A": 1.0, "B": 2.0}[out["tag"]]
    np.testing.assert_array_equal(out["w"].numpy(), np.full((64, 32), v, np.float32))
    np.testing.assert_array_equal(out["e"].numpy(), np.full((16, 64), v, np.float32))
    np.testing.assert_array_equal(out["small"].numpy(), np.full((5,), v, np.float32))
    assert out["step"] == int(v)
    return out["tag"]


def test_killed_rank_leaves_old_or_new_checkpoint(tmp_path):
    path = str(tmp_path / "ckpt")
    rng = random.Random()
    for victim in (1, 0):  # the second round overwrites the first round's leftovers
        p = _launch("loop", path)
        pids, saves, lines = {}, 0, []
        deadline = time.monotonic() + 240
        while saves < 2 and time.monotonic() < deadline:
            line = p.stdout.readline()
            if not line:
                break
            lines.append(line)
            if line.startswith("[rank ") and "] pid " in line:
                pids[int(line[6])] = int(line.split()[-1])
            if line.startswith(f"[rank {victim}] saved"):
                saves += 1
        assert saves == 2, "".join(lines[-60:])
        pid = pids[victim]
        delay = rng.uniform(0, 1.0)
        time.sleep(delay)
        os.kill(pid, signal.SIGKILL)
        rest, _ = p.communicate(timeout=120)
        assert p.returncode == 128 + signal.SIGKILL, (p.returncode, rest[-3000:])
        assert f"[launcher] rank {victim} exited with status 137" in rest, rest[-3000:]
        assert _consistent(path) in ("A", "B"), f"victim {victim}, killed {delay:.3f} s after its 2nd save"
