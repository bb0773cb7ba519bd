"""The suite on every core: a plain ``pytest`` run splits its test files between itself and one worker process.

Most of the suite's time is XLA compiling small programs, one core at a time (a cold run: ~60% of it). So the
session that ``pytest`` starts (the main one) keeps about half of the collected files and starts a worker, a second
``pytest`` with the same arguments, on the other half; both run at once. Files are split whole (module fixtures run
once) and balanced by the per-file times in ``tests/durations.json`` (a file not listed counts as ``_DEFAULT_S``).

Files in ``SERIAL`` run last in the main session, after the worker has finished: they start process worlds of their
own (distributed launches of 2-4 ranks with their timeouts), which should not compete with a second session.

The worker's output is printed at the end of the main session's summary, and the run fails when either failed.
``LAZYFLOW_TEST_WORKERS=1`` runs everything in one session (as does a run of a single file); the worker writes no
``.pytest_cache`` (so ``--lf`` remembers only the main session's failures). Regenerate the table from a run with
``--durations=0``: ``python tests/_sharding.py LOG``.
"""

from __future__ import annotations

import atexit
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

_HERE = Path(__file__).resolve().parent
_ENV_FILES = "LAZYFLOW_TEST_SHARD_FILES"  # set in the worker: the file holding its test files, one per line
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


def split(costs: dict[str, float]) -> tuple[list[str], list[str]]:
    """Longest first, each file to the lighter side: (the main session's files, the worker's)."""
    sides: tuple[list[str], list[str]] = ([], [])
    load = [0.0, 0.0]
    for f in sorted(costs, key=lambda f: (-costs[f], f)):
        i = 0 if load[0] <= load[1] else 1
        sides[i].append(f)
        load[i] += costs[f]
    return sides


def _deselect(config, items, keep) -> None:
    kept = [it for it in items if keep(it)]
    dropped = [it for it in items if not keep(it)]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
    items[:] = kept


@pytest.hookimpl(trylast=True)  # after -k / -m have deselected
def pytest_collection_modifyitems(session, config, items):
    listed = os.environ.get(_ENV_FILES)
    if listed is not None:  # the worker: only its files
        mine = set(Path(listed).read_text().split())
        _deselect(config, items, lambda it: _file_of(it) in mine)
        return
    if config.option.collectonly or _workers() < 2:
        return
    files = list(dict.fromkeys(_file_of(it) for it in items))
    parallel = [f for f in files if Path(f).name not in SERIAL]
    if len(parallel) < 2:
        return
    known = _durations()
    costs = {f: float(known.get(Path(f).name, _DEFAULT_S)) for f in parallel}
    mine, theirs = split(costs)
    mine_set = set(mine)
    their_set = set(theirs)
    _deselect(config, items, lambda it: _file_of(it) not in their_set)
    items.sort(key=lambda it: Path(_file_of(it)).name in SERIAL)  # stable: serial files last, order kept otherwise
    serial_first = next((it.nodeid for it in items if _file_of(it) not in mine_set), None)

    fd, listing = tempfile.mkstemp(prefix="lazyflow-shard-", suffix=".txt")
    with os.fdopen(fd, "w") as f:
        f.write("\n".join(theirs))
    log = open(listing[:-4] + ".log", "w+")
    args = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *config.invocation_params.args]
    proc = subprocess.Popen(
        args,
        cwd=config.invocation_params.dir,
        env={**os.environ, _ENV_FILES: listing},
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    atexit.register(_stop, proc)
    _state.update(proc=proc, log=log, listing=listing, files=len(theirs), serial_first=serial_first)


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


def pytest_runtest_setup(item):
    if item.nodeid == _state.get("serial_first"):
        _wait_worker()  # the serial files run alone


@pytest.hookimpl(tryfirst=True)  # before the terminal reporter prints the summary
def pytest_sessionfinish(session, exitstatus):
    proc = _state.get("proc")
    if proc is None:
        return
    if exitstatus == pytest.ExitCode.INTERRUPTED:
        _stop(proc)
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
    for p in (_state["listing"], log.name):
        try:
            os.unlink(p)
        except OSError:
            pass
    tr = terminalreporter
    tr.section(f"worker session ({_state['files']} files, exit code {_state.get('rc')})", sep="=")
    tr.write(out if out.endswith("\n") else out + "\n")


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
