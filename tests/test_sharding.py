"""tests/_sharding.py: a plain ``pytest`` shares its files with a worker session, runs every test once, runs the
serial files alone at the end, and fails when a test in either session fails."""

import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

from _sharding import SERIAL, claim, order

HERE = Path(__file__).resolve().parent


def test_files_are_offered_longest_first_unknown_ones_at_the_default():
    got = order(
        ["a/test_x.py", "test_y.py", "test_z.py", "test_new.py"], {"test_x.py": 30, "test_y.py": 1, "test_z.py": 30}
    )
    assert got == ["a/test_x.py", "test_z.py", "test_new.py", "test_y.py"]


def test_each_file_is_claimed_exactly_once_under_racing_sessions(tmp_path):
    files = [f"tests/test_{i}.py" for i in range(200)]
    won: list[list[str]] = [[] for _ in range(8)]
    start = threading.Barrier(8)

    def session(k):
        start.wait()
        won[k].extend(f for f in files if claim(str(tmp_path), f))

    threads = [threading.Thread(target=session, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    flat = [f for w in won for f in w]
    assert sorted(flat) == sorted(files)  # every file once, none twice


def _project(tmp_path, fail_in_worker=False):
    (tmp_path / "conftest.py").write_text(
        f"import sys\nsys.path.insert(0, {str(HERE)!r})\n"
        "from _sharding import pytest_collection_modifyitems, pytest_runtestloop, pytest_sessionfinish, "
        "pytest_terminal_summary\n"
    )
    names = [f"test_f{i}.py" for i in range(6)] + [SERIAL[0]]
    for name in names:
        body = f"""
            import os, time
            def test_a():
                t0 = time.monotonic()
                time.sleep(0.6)
                with open(os.path.join({str(tmp_path)!r}, "ran.txt"), "a") as f:
                    f.write(f"{name} {{os.getpid()}} {{t0}} {{time.monotonic()}}\\n")
            def test_b():
                assert not ({fail_in_worker!r} and "LAZYFLOW_TEST_SHARD_CLAIMS" in os.environ), "planted failure"
        """
        (tmp_path / name).write_text(textwrap.dedent(body))
    return names


def _run(tmp_path, **env):
    env = {**os.environ, **env}
    for k in ("LAZYFLOW_TEST_SHARD_CLAIMS", "PYTEST_ADDOPTS"):
        env.pop(k, None)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=", str(tmp_path)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


def _ran(tmp_path):
    rows = [ln.split() for ln in (tmp_path / "ran.txt").read_text().splitlines()]
    return [(name, int(pid), float(t0), float(t1)) for name, pid, t0, t1 in rows]


def test_two_sessions_run_every_file_once_and_the_serial_file_alone(tmp_path):
    names = _project(tmp_path)
    proc = _run(tmp_path, LAZYFLOW_TEST_WORKERS="2")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    ran = _ran(tmp_path)
    assert sorted(r[0] for r in ran) == sorted(names)  # each file once
    pids = {r[1] for r in ran}
    assert len(pids) == 2 and os.getpid() not in pids  # both sessions ran files
    serial = next(r for r in ran if r[0] == SERIAL[0])
    assert all(r[3] <= serial[2] for r in ran if r is not serial)  # every other file had ended when it began
    assert "worker session (exit code 0)" in proc.stdout


def test_a_failure_in_the_worker_alone_fails_the_run_and_is_reported(tmp_path):
    _project(tmp_path, fail_in_worker=True)
    proc = _run(tmp_path, LAZYFLOW_TEST_WORKERS="2")
    assert proc.returncode == 1, proc.stdout
    assert "planted failure" in proc.stdout and "worker session (exit code 1)" in proc.stdout


def test_one_worker_setting_keeps_one_session(tmp_path):
    names = _project(tmp_path, fail_in_worker=True)
    proc = _run(tmp_path, LAZYFLOW_TEST_WORKERS="1")
    assert proc.returncode == 0, proc.stdout
    ran = _ran(tmp_path)
    assert len({r[1] for r in ran}) == 1 and sorted(r[0] for r in ran) == sorted(names)
    assert "worker session" not in proc.stdout


def test_a_bad_worker_count_is_a_clear_error(tmp_path):
    _project(tmp_path)
    proc = _run(tmp_path, LAZYFLOW_TEST_WORKERS="two")
    assert proc.returncode != 0
    assert "LAZYFLOW_TEST_WORKERS must be a whole number, got 'two'" in proc.stdout + proc.stderr


def test_last_failed_runs_keep_one_session(tmp_path):
    # --lf reads the .pytest_cache the worker does not use: such a run stays in one session (and does not fail)
    names = _project(tmp_path, fail_in_worker=True)
    env = {**os.environ, "LAZYFLOW_TEST_WORKERS": "2"}
    for k in ("LAZYFLOW_TEST_SHARD_CLAIMS", "PYTEST_ADDOPTS"):
        env.pop(k, None)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "--lf", "-o", "addopts=", str(tmp_path)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    ran = _ran(tmp_path)
    assert len({r[1] for r in ran}) == 1 and sorted(r[0] for r in ran) == sorted(names)
