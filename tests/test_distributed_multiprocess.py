"""Several processes on 127.0.0.1 through the launcher (``python -m lazyflow.distributed.run``), CPU collectives
(gloo over TCP), 2 virtual CPU devices per process.

* Data-parallel (and FSDP-style) Graph training in 2 processes, each feeding its half of the global batch, vs a
  plain-JAX reference (jax.grad + torch's Adam rule) and vs one-device training on the whole batch.
* The launcher: rank-prefixed output; one failing rank (non-zero exit, or an uncaught exception after joining
  the group while its peer waits in a barrier) stops every process and its status is the launcher's; the
  multi-host flags (two launchers, one per "host", on loopback) with broadcast_object_list /
  all_gather_object between them; bad arguments.
"""

import json
import os
import socket
import subprocess
import sys
import time

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPTS = os.path.join(HERE, "_dist_scripts")


def _launch(nproc, script, *args, devices=2, flags=()):
    env = dict(os.environ, XLA_FLAGS=f"--xla_force_host_platform_device_count={devices}", JAX_PLATFORMS="cpu")
    cmd = [
        sys.executable,
        "-m",
        "lazyflow.distributed.run",
        "--nproc",
        str(nproc),
        *flags,
        os.path.join(SCRIPTS, script),
        *args,
    ]
    return subprocess.Popen(
        cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=os.path.dirname(HERE)
    )


def _run(nproc, script, *args, timeout=240, **kw):
    t0 = time.monotonic()
    p = _launch(nproc, script, *args, **kw)
    try:
        out, _ = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        out, _ = p.communicate()
        raise AssertionError(f"the launcher did not finish within {timeout} s:\n{out[-6000:]}") from None
    return p.returncode, out, time.monotonic() - t0


# ------------------------------------------------------------------------------------------ training
@pytest.fixture(scope="module")
def training():
    code, out, _ = _run(2, "mp_train.py", "adam/dp", "adam/fsdp")
    assert code == 0, out[-8000:]
    results = {}
    for line in out.splitlines():
        if line.startswith("[rank ") and "] RESULT " in line:
            r = json.loads(line.split("] RESULT ", 1)[1])
            results[r["rank"]] = r
    assert sorted(results) == [0, 1], out[-4000:]
    return results


@pytest.mark.parametrize("run", ["adam/dp", "adam/fsdp"])
def test_two_processes_match_reference_and_one_device(training, run):
    for rank in (0, 1):
        got, ref, local = training[rank][run], training[rank]["adam/reference"], training[rank]["adam/local"]
        losses, ref_losses = np.array(got["losses"]), np.array(ref["losses"])
        assert np.max(np.abs(losses - ref_losses) / np.abs(ref_losses)) <= 1e-5, (losses, ref_losses)
        assert np.max(np.abs(losses - local["losses"]) / np.abs(ref_losses)) <= 1e-5, (losses, local["losses"])
        for k, v in ref["params"].items():
            np.testing.assert_allclose(got["params"][k], v, rtol=1e-5, atol=2e-6, err_msg=f"rank {rank} {k}")
        assert got["compiles"] == local["compiles"] == 1
    # the two processes hold one global result: identical losses and parameters
    assert training[0][run]["losses"] == training[1][run]["losses"]
    assert training[0][run]["params"] == training[1][run]["params"]


def test_two_process_placements(training):
    for rank in (0, 1):
        assert set(training[rank]["adam/dp"]["specs"].values()) == {"P()"}
        assert training[rank]["adam/fsdp"]["specs"] == {
            "0.weight": "P('data', None)",
            "0.bias": "P('data',)",
            "2.weight": "P(None, 'data')",
            "2.bias": "P()",
        }
        assert set(training[rank]["adam/local"]["specs"].values()) == {"single"}


# ------------------------------------------------------------------------------------------ launcher
def _pids(out):
    return {
        int(ln.split()[1][:-1]): int(ln.split()[-1])
        for ln in out.splitlines()
        if ln.startswith("[rank ") and "] pid " in ln
    }


def _gone(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return open(f"/proc/{pid}/stat").read().split()[2] == "Z"


def test_launcher_prefixes_and_stops_all_when_a_rank_exits():
    code, out, took = _run(2, "mp_misc.py", "exit", timeout=120)
    assert code == 3, out
    assert "[rank 0] hello from rank 0 of 2" in out and "[rank 1] hello from rank 1 of 2" in out
    assert "[launcher] rank 1 exited with status 3" in out
    assert all(ln.startswith(("[rank 0] ", "[rank 1] ", "[launcher] ")) for ln in out.splitlines()), out
    pids = _pids(out)
    assert sorted(pids) == [0, 1] and _gone(pids[0]), out  # rank 0 (sleeping 300 s) was stopped
    assert took < 60, took


def test_launcher_stops_all_when_a_rank_raises_after_joining():
    code, out, took = _run(2, "mp_misc.py", "raise", devices=1, timeout=200)
    assert code == 1, out
    assert "[rank 1] RuntimeError: rank 1 failed on purpose" in out
    assert "[launcher] rank 1 exited with status 1" in out
    assert "passed a barrier" not in out
    assert _gone(_pids(out)[0])
    assert took < 120, took  # not JAX's 300 s shutdown barrier


def test_launcher_multi_host_flags_on_loopback():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    flags = lambda node: (
        "--nnodes",
        "2",
        "--node-rank",
        str(node),
        "--master-addr",
        "127.0.0.1",
        "--master-port",
        str(port),
    )
    p1 = _launch(1, "mp_misc.py", "gather", devices=1, flags=flags(1))
    code0, out0, _ = _run(1, "mp_misc.py", "gather", devices=1, flags=flags(0), timeout=180)
    out1, _ = p1.communicate(timeout=60)
    assert code0 == 0 and p1.returncode == 0, (out0, out1)
    assert "[rank 0] gathered [1, 11] world 2 rank 0 node 0" in out0, out0
    assert "[rank 1] gathered [1, 11] world 2 rank 1 node 1" in out1, out1
    objects = "objects [{'from': 1}, 'x'] [('rank', 0), ('rank', 1)]"
    assert f"[rank 0] {objects}" in out0 and f"[rank 1] {objects}" in out1, (out0, out1)


def test_launcher_and_init_argument_errors(monkeypatch):
    from lazyflow._core.errors import DeviceError
    from lazyflow.distributed import init_process_group, run

    with pytest.raises(ValueError, match="nproc"):
        run.launch(0, [sys.executable, "-c", "pass"])
    with pytest.raises(ValueError, match="master-addr"):
        run.launch(1, [sys.executable, "-c", "pass"], nnodes=2, node_rank=1)
    with pytest.raises(ValueError, match="node-rank"):
        run.launch(1, [sys.executable, "-c", "pass"], nnodes=2, node_rank=2, master_addr="127.0.0.1")
    with pytest.raises(SystemExit):
        run.main(["--nproc", "1", "--nnodes", "2", "x.py"])
    for var in ("LAZYFLOW_COORDINATOR", "MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK"):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(ValueError, match="WORLD_SIZE"):
        init_process_group()
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "2")
    with pytest.raises(ValueError, match=r"rank 2 is not in \[0, 2\)"):
        init_process_group()
    import jax

    jax.devices()  # the backend is running in this process: joining a group now must be refused
    monkeypatch.setenv("RANK", "0")
    with pytest.raises(DeviceError, match="before JAX starts its backend"):
        init_process_group()


def test_launcher_delivers_every_line_of_ranks_that_exit_cleanly():
    """The last line of a rank (a long RESULT line) reaches the output even when the writer is slow: the launcher
    waits for its pumps after a clean finish (it once gave them 2 s and dropped rank 0's result under load)."""
    import io

    from lazyflow.distributed.run import launch

    class SlowOut(io.StringIO):
        def write(self, s):
            time.sleep(3)
            return super().write(s)

    line = "x" * 200_000
    out = SlowOut()
    code = launch(2, [sys.executable, "-c", "print('a'); print('x' * 200_000)"], out=out)
    assert code == 0
    got = out.getvalue().splitlines()
    for rank in (0, 1):
        assert f"[rank {rank}] {line}" in got, [g[:40] for g in got]
