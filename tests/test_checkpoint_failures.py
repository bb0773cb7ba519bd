"""A failed save never looks like a success, never blocks the next save or the exit, and a pending save
survives the end of the process -- plus reads that race another process's save, and long names.

Failures are produced two ways: really (a read-only and a full tmpfs in a private mount namespace,
``/proc``; those need ``unshare -rm``), and by making the operating system calls raise ``OSError(EROFS)``
(always available; root ignores chmod, so permission bits cannot stand in for either).
"""

import errno
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import lazyflow as lf
from lazyflow.checkpoint import _layout, _store, load_tensors

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPTS = os.path.join(HERE, "_ckpt_scripts")
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([os.path.dirname(HERE)] + sys.path)}


def _v(path):
    return np.asarray(lf.load(path)["v"]).tolist()


def _in_thread(fn, timeout=90):
    """``fn()`` in a thread; (finished, exception). A deadlocked save shows as finished=False, not a hung test."""
    box = {}

    def run():
        try:
            fn()
        except BaseException as e:
            box["error"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(timeout)
    return not t.is_alive(), box.get("error")


def _erofs(*args, **kwargs):
    raise OSError(errno.EROFS, "Read-only file system (simulated)")


# ------------------------------------------------------------------------------------------ item 3: async failures
def test_failed_async_save_raises_the_real_error_even_when_cleanup_fails_too(tmp_path, monkeypatch):
    """The commit fails with EROFS and so does every removal of the partial save: wait() raises the commit's
    error (the cleanup's failure is appended, never raised instead), the handle says failed, the old
    checkpoint loads, and the next save works and removes the leftovers."""
    c = tmp_path / "c"
    lf.save({"v": lf.full((3,), 1.0)}, c)
    monkeypatch.setattr(_layout.Transaction, "commit", lambda self, version: _erofs())
    monkeypatch.setattr(_layout, "_remove", _erofs)
    handle = lf.save({"v": lf.full((3,), 2.0)}, c, async_save=True)
    with pytest.raises(
        lf.CheckpointWriteError,
        match=r"'.*c' failed: OSError: \[Errno 30\].*Removing the partial "
        r"save failed too",
    ) as ei:
        handle.wait(timeout=60)
    assert isinstance(ei.value, OSError) and ei.value.errno == errno.EROFS
    assert handle.done() and handle.exception() is ei.value and "failed" in repr(handle)
    monkeypatch.undo()
    assert _v(c) == [1.0] * 3
    lf.save({"v": lf.full((3,), 3.0)}, c)
    _layout.wait_for_cleanups()
    assert _v(c) == [3.0] * 3 and len(os.listdir(c)) == 2


# ------------------------------------------------------------------------------------------ item 4: sync failures
def test_failed_sync_save_releases_the_path_lock_and_names_path_and_cause(tmp_path, monkeypatch):
    c = tmp_path / "c"
    lf.save({"v": lf.full((3,), 1.0)}, c)
    monkeypatch.setattr(_store, "write", _erofs)
    monkeypatch.setattr(_layout, "_remove", _erofs)
    for _ in range(2):  # the second attempt used to wait forever for the lock the first one kept
        done, error = _in_thread(lambda: lf.save({"v": lf.full((3,), 2.0)}, c))
        assert done, "a save after a failed save deadlocked"
        assert isinstance(error, lf.CheckpointWriteError) and error.errno == errno.EROFS, error
        assert str(c) in str(error) and "Read-only file system" in str(error)
    monkeypatch.undo()
    done, error = _in_thread(lambda: lf.save({"v": lf.full((3,), 3.0)}, c))
    assert done and error is None
    assert _v(c) == [3.0] * 3


def test_real_failures_without_privileges_release_the_lock(tmp_path):
    """/proc refuses new directories (even for root); a path under a file has no directory to go to."""
    for path, cls in (("/proc/lazyflow-ckpt", lf.CheckpointWriteError), (tmp_path / "file" / "c", lf.CheckpointError)):
        (tmp_path / "file").write_text("x")
        for _ in range(2):
            done, error = _in_thread(lambda p=path: lf.save({"v": lf.ones(2)}, p))
            assert done and isinstance(error, cls), error
            assert str(path) in str(error)


def _unshare_available() -> bool:
    if shutil.which("unshare") is None:
        return False
    return (
        subprocess.run(
            ["unshare", "-rm", "sh", "-c", "mount -t tmpfs tmpfs /mnt 2>/dev/null || mount -t tmpfs tmpfs /tmp"],
            capture_output=True,
        ).returncode
        == 0
    )


@pytest.mark.skipif(
    not _unshare_available(),
    reason="needs user+mount namespaces (unshare -rm) for a real "
    "read-only/full filesystem; the EROFS tests above cover the same paths without them",
)
def test_real_read_only_and_full_filesystems(tmp_path):
    """Items 3, 4 and 6 on real filesystems: every save to a read-only tmpfs raises CheckpointWriteError with
    errno 30 (the second sync save does not deadlock; the async save fails at the call instead of leaving
    orbax waiting 300 s), an async save that fills a 3 MiB tmpfs raises from wait(), the previous checkpoints
    load, and the process exits promptly."""
    t0 = time.monotonic()
    proc = subprocess.run(
        ["unshare", "-rm", sys.executable, os.path.join(SCRIPTS, "readonly_fs.py"), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=180,
        env=ENV,
    )
    elapsed = time.monotonic() - t0
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, proc.stderr[-3000:]
    out = json.loads(lines[0][len("RESULT ") :])
    for case in ("sync_1", "sync_2", "first_save_ro", "async"):
        r = out[case]
        assert not r.get("hung"), case
        assert (r["cls"], r["os_error"], r["errno"]) == ("CheckpointWriteError", True, errno.EROFS), (case, r)
        assert "Read-only file system" in r["msg"] and str(tmp_path) in r["msg"]
    assert out["after"] == [1.0] * 4
    r = out["enospc_async"]
    assert (r["cls"], r["errno"]) == ("CheckpointWriteError", errno.ENOSPC), r
    assert out["enospc_after"] == [1.0] * 4 and out["enospc_next_save"] == {"ok": True}
    assert out["enospc_final"] == [3.0] * 4
    assert elapsed < 60, f"the process took {elapsed:.0f} s to finish and exit"


# ------------------------------------------------------------------------------------------ items 5, 6: exit paths
EXITS = {  # how -> (exit status, value of "v" loaded afterwards, what stderr must say)
    "end": (0, 2.0, None),
    "sys_exit": (0, 2.0, None),
    "raise": (1, 2.0, "the training loop crashed"),
    "sigterm": (-15, 2.0, "SIGTERM: finishing 1 asynchronous checkpoint save"),
    "fail_end": (1, 1.0, "FAILED.*Errno 30.*\n.*exiting with status 1"),
    "fail_sigterm": (-15, 1.0, "SIGTERM: finishing 1.*\n.*FAILED.*Errno 30"),
    "fail_collected": (0, 1.0, None),
}


@pytest.fixture(scope="module")
def exits(tmp_path_factory):
    """Every exit path of exit_paths.py, run side by side (each subprocess mostly waits)."""
    d = tmp_path_factory.mktemp("exits")
    procs = {
        how: subprocess.Popen(
            [sys.executable, os.path.join(SCRIPTS, "exit_paths.py"), str(d / how), how],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=ENV,
        )
        for how in EXITS
    }
    t0, out = time.monotonic(), {}
    for how, p in procs.items():
        try:
            stdout, stderr = p.communicate(timeout=max(1, 150 - (time.monotonic() - t0)))
        except subprocess.TimeoutExpired:
            p.kill()
            stdout, stderr = p.communicate()
            out[how] = ("timeout", stdout, stderr, d / how)
            continue
        out[how] = (p.returncode, stdout, stderr, d / how)
    return out


@pytest.mark.parametrize("how", sorted(EXITS))
def test_pending_async_save_at_exit_completes_or_fails_loudly(exits, how):
    """After a normal end, sys.exit(0), an uncaught exception or SIGTERM with a save still pending, the new
    checkpoint is complete; a save that failed leaves the previous one and the process says so on stderr
    (and exits 1 when nobody collected the error). A failed directory creation no longer blocks the exit."""
    status, want, says = EXITS[how]
    rc, stdout, stderr, path = exits[how]
    assert rc == status, (rc, stdout[-2000:], stderr[-3000:])
    assert "started" in stdout
    assert _v(path) == [want] * 4
    if want == 2.0:
        np.testing.assert_array_equal(np.asarray(lf.load(path)["big"]), np.arange(2_000_000, dtype=np.float32))
    if says:
        assert re.search(says, stderr), stderr[-3000:]
    if how == "fail_collected":  # the program got both errors: nothing more to report at exit
        assert "directory creation failed at the call: errno=30" in stdout and "collected errno=30" in stdout
        assert "FAILED" not in stderr


# ------------------------------------------------------------------------------------------ item 11: races, names
def test_a_read_racing_a_save_that_removes_its_version_retries(tmp_path, monkeypatch):
    """The version being read is removed by another process's save (simulated: the save and its cleanup run
    in between the metadata read and the data read): the load re-reads the pointer and returns the new
    checkpoint instead of a false 'damaged' error."""
    c = tmp_path / "c"
    lf.save({"v": lf.full((3,), 1.0), "big": lf.ones(600, 600)}, c)
    real_read, real_meta, calls = _store.read_arrays, _store.read_meta, []

    def racing_read(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            lf.save({"v": lf.full((3,), 2.0), "big": lf.zeros(600, 600)}, c)
            _layout.wait_for_cleanups()  # the version being read is gone now
        return real_read(*args, **kwargs)

    monkeypatch.setattr(_store, "read_arrays", racing_read)
    out = lf.load(c)
    assert np.asarray(out["v"]).tolist() == [2.0] * 3 and float(np.asarray(out["big"]).max()) == 0.0
    assert len(calls) == 2
    calls.clear()
    lf.save({"v": lf.full((3,), 1.0), "big": lf.ones(600, 600)}, c)
    assert np.asarray(load_tensors(c, ["v", "big"])["v"]).tolist() == [2.0] * 3
    assert len(calls) == 2
    monkeypatch.setattr(_store, "read_arrays", real_read)
    calls.clear()

    def racing_meta(vdir):
        if not calls:
            calls.append(1)
            lf.save({"v": lf.full((3,), 5.0)}, c)
            _layout.wait_for_cleanups()
        return real_meta(vdir)

    monkeypatch.setattr(_store, "read_meta", racing_meta)
    assert list(lf.checkpoint.inspect(c)) == ["v"]


def test_a_damaged_checkpoint_is_not_retried(tmp_path, monkeypatch):
    c = tmp_path / "c"
    lf.save({"v": lf.full((3,), 1.0)}, c)
    calls = []

    def broken(*args, **kwargs):
        calls.append(1)
        raise ValueError("DATA_LOSS: damaged chunk")

    monkeypatch.setattr(_store, "read_arrays", broken)
    with pytest.raises(lf.CheckpointError, match="damaged or incomplete"):
        lf.load(c)
    assert len(calls) == 1


def test_loads_while_another_process_saves_never_fail(tmp_path):
    """A real race, bounded: a subprocess overwrites the checkpoint in a loop while this process loads it."""
    c = str(tmp_path / "c")
    lf.save({"tag": "A", "v": lf.full((50,), 1.0)}, c)
    writer = subprocess.Popen(
        [
            sys.executable,
            "-c",
            (
                "import sys, time, lazyflow as lf\n"
                "end = time.monotonic() + 3\n"
                "i = 0\n"
                "print('ready', flush=True)\n"
                "while time.monotonic() < end:\n"
                "    i += 1\n"
                "    lf.save({'tag': 'AB'[i % 2], 'v': lf.full((50,), float(i % 2 + 1))}, sys.argv[1])\n"
                "print(i, flush=True)\n"
            ),
            c,
        ],
        stdout=subprocess.PIPE,
        text=True,
        env=ENV,
    )
    try:
        assert writer.stdout.readline().strip() == "ready"
        loads, deadline = 0, time.monotonic() + 2
        while time.monotonic() < deadline:
            out = lf.load(c)
            assert np.asarray(out["v"]).tolist() == [{"A": 1.0, "B": 2.0}[out["tag"]]] * 50
            assert lf.checkpoint.inspect(c)["v"].shape == (50,)
            loads += 1
        saves = int(writer.communicate(timeout=60)[0].strip())
    finally:
        if writer.poll() is None:
            writer.kill()
    assert loads > 2 and saves > 2


@pytest.mark.parametrize("name", ["n" * 255, "é" * 127 + "x", "m" * 230])
def test_long_checkpoint_names_save_and_load(tmp_path, name):
    """Names up to the filesystem's limit (255 bytes) save: the staging directory of a first save hashes
    a long name (it used to exceed 255 bytes from ~217 on), overwrites work, and leftovers of a killed save
    with the hashed name are removed."""
    c = tmp_path / name
    lf.save({"v": lf.full((3,), 1.0)}, c)
    lf.save({"v": lf.full((3,), 2.0)}, c)
    assert _v(c) == [2.0] * 3
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    ).stdout.strip()
    leftover = tmp_path / (_layout.staging_prefix(name) + f"{dead}-1-aa")
    leftover.mkdir()
    assert len(leftover.name.encode()) <= 255
    lf.save({"v": lf.full((3,), 3.0)}, c)
    _layout.wait_for_cleanups()
    assert not leftover.exists() and _v(c) == [3.0] * 3


def test_a_1000_character_key_round_trips(tmp_path):
    key = "layer." + "k" * 994
    lf.save({key: lf.full((2,), 7.0), "short": lf.ones(1)}, tmp_path / "c")
    assert list(lf.checkpoint.inspect(tmp_path / "c")) == [key, "short"]
    out = lf.load(tmp_path / "c")
    assert list(out) == [key, "short"] and np.asarray(out[key]).tolist() == [7.0, 7.0]
    assert np.asarray(load_tensors(tmp_path / "c", [key])[key]).tolist() == [7.0, 7.0]
