"""The suite on every core: a plain ``pytest`` run shares its test files with one worker process.

Most of the suite's time is XLA compiling small programs, one core at a time. So the session that ``pytest``
starts (the main one) starts a worker, a second ``pytest`` with the same arguments, and both collect the same tests
and run them file by file: before running a file, a session claims it (an exclusive create in a directory both
share), so each file runs once, whole (module fixtures set up once), in whichever session is free first. Files are
offered longest first by the per-file times in ``tests/durations.json`` (a file not listed counts as
``_DEFAULT_S``); the table only orders the work, a stale one costs a little balance, never a test.

Files in ``SERIAL`` run last in the main session, after the worker has finished: they start process worlds of their
own (distributed launches of 2-4 ranks with their timeouts), which should not compete with a second session.

The worker's report is printed at the end of the main session's summary, and the run fails when either failed
(``-x`` in the main session stops the worker too). ``LAZYFLOW_TEST_WORKERS=1`` runs everything in one session, as
does a run of a single file, and ``--lf`` / ``--ff`` / ``--nf`` / ``--sw`` (they need the ``.pytest_cache`` that only
the main session writes; without them, ``.pytest_cache`` remembers the main session's failures only).
Regenerate the table from a run with ``--durations=0``: ``python tests/_sharding.py LOG``.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

_HERE = Path(__file__).resolve().parent
_ENV_CLAIMS = "LAZYFLOW_TEST_SHARD_CLAIMS"  # set in the worker: the directory both sessions claim files in
_DEFAULT_S = 10.0
SERIAL = (
    "test_distributed_checkpoint.py",
    "test_distributed_collectives.py",
    "test_distributed_multiprocess.py",
)

_state: dict = {}


def _file_of(item) -> str:
    return item.nodeid.split("::", 1)[0]


def _workers() -> int:
    raw = os.environ.get("LAZYFLOW_TEST_WORKERS", "").strip()
    if raw:
        try:
            return max(1, int(raw))
        except ValueError:
            raise ValueError(f"LAZYFLOW_TEST_WORKERS must be a whole number, got {raw!r}") from None
    return 2 if len(os.sched_getaffinity(0)) >= 2 else 1


def _durations() -> dict[str, float]:
    try:
        return json.loads((_HERE / "durations.json").read_text())
    except (OSError, ValueError):
        return {}


def order(files: list[str], durations: dict[str, float]) -> list[str]:
    """The files longest first (then by name): the order both sessions offer them in."""
    cost = {f: float(durations.get(Path(f).name, _DEFAULT_S)) for f in files}
    return sorted(files, key=lambda f: (-cost[f], f))


def claim(directory: str, file: str) -> bool:
    """True for exactly one of the sessions that ask for ``file``."""
    name = hashlib.sha1(file.encode()).hexdigest()
    try:
        os.close(os.open(os.path.join(directory, name), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return False
    return True


def _groups(items) -> dict[str, list]:
    groups: dict[str, list] = {}
    for it in items:
        groups.setdefault(_file_of(it), []).append(it)
    return groups


@pytest.hookimpl(trylast=True)  # after -k / -m have deselected
def pytest_collection_modifyitems(session, config, items):
    if os.environ.get(_ENV_CLAIMS) is not None or config.option.collectonly or _workers() < 2:
        return
    if any(getattr(config.option, o, False) for o in ("lf", "failedfirst", "newfirst", "stepwise", "stepwise_skip")):
        return  # these read and write the main session's .pytest_cache, which the worker does not use: one session
    files = list(_groups(items))
    if len([f for f in files if Path(f).name not in SERIAL]) < 2:
        return
    claims = tempfile.mkdtemp(prefix="lazyflow-shard-")
    log = open(os.path.join(claims, "worker.log"), "w+")
    args = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *config.invocation_params.args]
    proc = subprocess.Popen(
        args,
        cwd=config.invocation_params.dir,
        env={**os.environ, _ENV_CLAIMS: claims},
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    atexit.register(_stop, proc)
    atexit.register(shutil.rmtree, claims, True)
    _state.update(proc=proc, log=log, claims=claims)


def _stop(proc) -> None:
    if proc.poll() is None:
        proc.kill()
        proc.wait()


def _wait_worker() -> int | None:
    proc = _state.get("proc")
    if proc is None:
        return None
    if "rc" not in _state:
        _state["rc"] = proc.wait()
    return _state["rc"]


def pytest_runtestloop(session):
    """Run the files this session claims (the default loop when there is no worker)."""
    worker = os.environ.get(_ENV_CLAIMS)
    claims = worker or _state.get("claims")
    if claims is None or session.config.option.collectonly:
        return None  # pytest's own loop
    if session.testsfailed and not session.config.option.continue_on_collection_errors:
        return None  # pytest's own loop reports the collection errors
    groups = _groups(session.items)
    offered = order([f for f in groups if Path(f).name not in SERIAL], _durations())
    serial = [] if worker else [f for f in groups if Path(f).name in SERIAL]

    def claimed():
        for f in offered:
            if claim(claims, f):
                yield groups[f]
        if serial:
            _wait_worker()  # the serial files run alone
            yield from (groups[f] for f in serial)

    mine = claimed()
    current = next(mine, None)
    while current is not None:
        upcoming = None
        for i, item in enumerate(current):
            if i + 1 < len(current):
                nextitem = current[i + 1]
            else:  # claim the next file before the last test here, so fixtures shared with it are kept
                upcoming = next(mine, None)
                nextitem = upcoming[0] if upcoming else None
            item.config.hook.pytest_runtest_protocol(item=item, nextitem=nextitem)
            if session.shouldfail:
                raise session.Failed(session.shouldfail)
            if session.shouldstop:
                raise session.Interrupted(session.shouldstop)
        current = upcoming
    return True


@pytest.hookimpl(tryfirst=True)  # before the terminal reporter prints the summary
def pytest_sessionfinish(session, exitstatus):
    proc = _state.get("proc")
    if proc is None:
        return
    if session.shouldfail or exitstatus not in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
        _stop(proc)  # interrupted, or -x / --maxfail stopped this session
    rc = _wait_worker()
    if rc not in (0, pytest.ExitCode.NO_TESTS_COLLECTED) and session.exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter):
    log = _state.get("log")
    if log is None:
        return
    log.seek(0)
    out = log.read()
    log.close()
    terminalreporter.section(f"worker session (exit code {_state.get('rc')})", sep="=")
    terminalreporter.write(out if out.endswith("\n") else out + "\n")


def _from_log(path: str) -> dict[str, float]:
    """Per-file seconds from a ``--durations=0`` report."""
    totals: dict[str, float] = {}
    for line in Path(path).read_text().splitlines():
        parts = line.split(maxsplit=2)
        if len(parts) == 3 and parts[0].endswith("s") and parts[1] in ("setup", "call", "teardown"):
            try:
                t = float(parts[0][:-1])
            except ValueError:
                continue
            name = Path(parts[2].split("::", 1)[0]).name
            totals[name] = round(totals.get(name, 0.0) + t, 1)
    return dict(sorted(totals.items()))


if __name__ == "__main__":
    table = _from_log(sys.argv[1])
    (_HERE / "durations.json").write_text(json.dumps(table, indent=0) + "\n")
    print(f"{len(table)} files, {sum(table.values()):.0f} s")
