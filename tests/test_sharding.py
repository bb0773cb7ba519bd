"""tests/_sharding.py: a plain ``pytest`` splits its files between two sessions, runs every test once, and fails
when a test in either session fails."""

import itertools
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from _sharding import _DEFAULT_S, SERIAL, split

HERE = Path(__file__).resolve().parent


def test_split_is_a_partition_no_worse_than_the_best_split_plus_one_file():
    costs = {"a": 9.0, "b": 7.0, "c": 6.0, "d": 5.0, "e": 4.0, "f": 2.0, "g": 1.0}
    mine, theirs = split(costs)
    assert sorted(mine + theirs) == sorted(costs) and not set(mine) & set(theirs)
    load = max(sum(costs[f] for f in mine), sum(costs[f] for f in theirs))
    best = min(  # brute force over every subset
        max(sum(costs[f] for f in s), sum(costs.values()) - sum(costs[f] for f in s))
        for r in range(len(costs) + 1)
        for s in itertools.combinations(costs, r)
    )
    assert best <= load <= best + max(costs.values()) / 2


def _project(tmp_path, fail_in=None):
    (tmp_path / "conftest.py").write_text(
        f"import sys\nsys.path.insert(0, {str(HERE)!r})\n"
        "from _sharding import pytest_collection_modifyitems, pytest_runtest_setup, pytest_sessionfinish, "
        "pytest_terminal_summary\n"
    )
    names = ["test_one.py", "test_two.py", "test_three.py", SERIAL[0]]
    for name in names:
        body = f"""
            import os, time
            def test_a():
                with open(os.path.join({str(tmp_path)!r}, "ran.txt"), "a") as f:
                    f.write(f"{name} {{os.getpid()}} {{time.monotonic()}}\\n")
            def test_b():
                assert {name!r} != {fail_in!r}, "planted failure"
        """
        (tmp_path / name).write_text(textwrap.dedent(body))
    return names


def _run(tmp_path, **env):
    env = {**os.environ, **env}
    env.pop("LAZYFLOW_TEST_SHARD_FILES", None)
    env.pop("PYTEST_ADDOPTS", None)
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
    return {name: (int(pid), float(t)) for name, pid, t in rows}


def test_two_sessions_run_every_file_once_and_the_serial_file_alone(tmp_path):
    names = _project(tmp_path)
    proc = _run(tmp_path, LAZYFLOW_TEST_WORKERS="2")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    ran = _ran(tmp_path)
    assert sorted(ran) == sorted(names)  # each file once (a file run twice would overwrite... and count twice below)
    assert len((tmp_path / "ran.txt").read_text().splitlines()) == len(names)
    pids = {pid for pid, _ in ran.values()}
    assert len(pids) == 2 and os.getpid() not in pids
    serial_pid, serial_t = ran[SERIAL[0]]
    worker_t = [t for pid, t in ran.values() if pid != serial_pid]
    assert worker_t and max(worker_t) < serial_t  # the worker had finished before the serial file began
    assert "worker session" in proc.stdout


def test_a_failure_in_the_worker_fails_the_run_and_is_reported(tmp_path):
    names = _project(tmp_path)
    theirs = split({n: _DEFAULT_S for n in names if n not in SERIAL})[1]
    _project(tmp_path, fail_in=theirs[0])
    proc = _run(tmp_path, LAZYFLOW_TEST_WORKERS="2")
    assert proc.returncode == 1, proc.stdout
    assert "planted failure" in proc.stdout and theirs[0] in proc.stdout
    assert _ran(tmp_path)[theirs[0]][0] != _ran(tmp_path)[SERIAL[0]][0]  # it did fail in the worker


def test_one_worker_setting_keeps_one_session(tmp_path):
    names = _project(tmp_path)
    proc = _run(tmp_path, LAZYFLOW_TEST_WORKERS="1")
    assert proc.returncode == 0, proc.stdout
    assert len({pid for pid, _ in _ran(tmp_path).values()}) == 1 and len(_ran(tmp_path)) == len(names)
    assert "worker session" not in proc.stdout


def test_a_bad_worker_count_is_a_clear_error(tmp_path):
    _project(tmp_path)
    proc = _run(tmp_path, LAZYFLOW_TEST_WORKERS="two")
    assert (
        proc.returncode != 0 and "LAZYFLOW_TEST_WORKERS must be a whole number, got 'two'" in proc.stdout + proc.stderr
    )
