"""Launcher: ``python -m lazyflow.distributed.run --nproc N script.py args...``.

Starts N processes of ``python script.py args...`` on this host with torchrun's variables set -- ``RANK``,
``LOCAL_RANK``, ``WORLD_SIZE``, ``LOCAL_WORLD_SIZE``, ``NODE_RANK``, ``MASTER_ADDR``, ``MASTER_PORT`` -- and
``LAZYFLOW_COORDINATOR=<addr>:<port>``, which is what ``lf.distributed.init_process_group()`` reads. Their output
is streamed line by line with a ``[rank k]`` prefix. As soon as one process fails, every other one is stopped
(SIGTERM to its process group, SIGKILL 5 s later) and the launcher exits with the failed process's status (0 when
all succeed; 128+n for a process killed by signal n).

One host (default): the coordinator is ``127.0.0.1`` on a free port. Several hosts: run the launcher once per
host with the same ``--nnodes``, ``--master-addr`` (host 0's address, reachable from all) and ``--master-port``,
and ``--node-rank`` 0..nnodes-1; ranks are ``node_rank * nproc + local_rank``.
"""

from __future__ import annotations

import argparse
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time

__all__ = ["launch", "main"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _pump(stream, prefix: str, out, lock: threading.Lock) -> None:
    for line in iter(stream.readline, b""):
        text = line.decode(errors="replace")
        if not text.endswith("\n"):
            text += "\n"
        with lock:
            out.write(prefix + text)
            out.flush()
    stream.close()


def _libc():
    try:
        import ctypes

        return ctypes.CDLL("libc.so.6", use_errno=True)
    except OSError:
        return None


def _parent_death_signal(libc):
    """A function for the child before exec: get SIGTERM if the launcher dies (Linux's PR_SET_PDEATHSIG), so no
    rank outlives a launcher that was killed. libc is loaded in the parent: the child only calls into it."""
    if libc is None:
        return None
    return lambda: libc.prctl(1, signal.SIGTERM)


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def _status(code: int) -> int:
    return 128 - code if code < 0 else code


def _stop(procs, grace: float = 5.0) -> None:
    for p in procs:
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
    deadline = time.monotonic() + grace
    for p in procs:
        try:
            p.wait(max(0.05, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()


def launch(
    nproc: int,
    cmd: list[str],
    *,
    nnodes: int = 1,
    node_rank: int = 0,
    master_addr: str | None = None,
    master_port: int | None = None,
    env_extra: dict | None = None,
    out=None,
) -> int:
    """Run ``cmd`` as ``nproc`` local ranks of a ``nnodes * nproc`` process job.

    Args:
        nproc: processes on this host.
        cmd: the command each process runs (e.g. ``[sys.executable, "train.py", ...]``).
        nnodes: number of hosts taking part (each runs its own launcher).
        node_rank: this host's index in ``[0, nnodes)``.
        master_addr: host 0's address (default ``127.0.0.1``; required when ``nnodes > 1``).
        master_port: the coordinator's port (default: a free port on one host, 29500 on several).
        env_extra: more environment variables for every process.
        out: where the prefixed output goes (default ``sys.stdout``).
    Returns:
        The exit status: the first failed process's, else 0.
    Raises:
        ValueError: ``nproc``/``nnodes`` below 1, ``node_rank`` out of range, or several hosts without
            ``master_addr``.
    """
    if nproc < 1 or nnodes < 1:
        raise ValueError(f"--nproc and --nnodes must be >= 1, got {nproc} and {nnodes}")
    if not 0 <= node_rank < nnodes:
        raise ValueError(f"--node-rank must be in [0, {nnodes}), got {node_rank}")
    if nnodes > 1 and not master_addr:
        raise ValueError("several hosts (--nnodes > 1) need --master-addr: host 0's address, reachable from all")
    addr = master_addr or "127.0.0.1"
    port = master_port or (_free_port() if nnodes == 1 else 29500)
    out = out or sys.stdout
    world = nnodes * nproc
    lock = threading.Lock()
    procs, pumps = [], []
    code = 0
    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _interrupt) if main_thread else None  # stop the ranks on SIGTERM too
    preexec = _parent_death_signal(_libc())
    try:
        for local in range(nproc):
            rank = node_rank * nproc + local
            env = dict(
                os.environ,
                RANK=str(rank),
                LOCAL_RANK=str(local),
                WORLD_SIZE=str(world),
                LOCAL_WORLD_SIZE=str(nproc),
                NODE_RANK=str(node_rank),
                MASTER_ADDR=addr,
                MASTER_PORT=str(port),
                LAZYFLOW_COORDINATOR=f"{addr}:{port}",
                PYTHONUNBUFFERED="1",
                **(env_extra or {}),
            )
            p = subprocess.Popen(
                cmd,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=preexec,
            )
            procs.append(p)
            t = threading.Thread(target=_pump, args=(p.stdout, f"[rank {rank}] ", out, lock), daemon=True)
            t.start()
            pumps.append(t)
        # one waiter per process: exits are seen in the order they happen, so the failure reported is the first
        # one, not a peer that died of it a few milliseconds later (e.g. of a reset connection)
        exits: queue.Queue = queue.Queue()
        for i, p in enumerate(procs):
            threading.Thread(target=lambda i=i, p=p: exits.put((i, p.wait())), daemon=True).start()
        done = 0
        while done < nproc:
            try:
                i, c = exits.get(timeout=0.1)  # a timeout, so that SIGINT/SIGTERM are handled promptly
            except queue.Empty:
                continue
            if c == 0:
                done += 1
                continue
            code = _status(c)
            pumps[i].join(1)  # its last lines (a traceback) before the launcher's
            with lock:
                out.write(
                    f"[launcher] rank {node_rank * nproc + i} exited with status {code}; stopping the "
                    f"other {nproc - 1} local process(es)\n"
                )
                out.flush()
            break
    except KeyboardInterrupt:
        code = 130
    finally:
        _stop(procs)
        # after a clean finish every line must come through (the last one may be long and the machine busy); a
        # grandchild that kept the pipe open must not hang the launcher, hence a bound, not an open-ended wait
        deadline = time.monotonic() + (60.0 if code == 0 else 2.0)
        for t in pumps:
            t.join(max(0.0, deadline - time.monotonic()))
        if main_thread:
            signal.signal(signal.SIGTERM, previous)
    return code


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point (see the module docstring); returns the exit status."""
    ap = argparse.ArgumentParser(
        prog="python -m lazyflow.distributed.run", description=(__doc__ or "").split("\n\n")[0]
    )
    ap.add_argument(
        "--nproc",
        "--nproc-per-node",
        "--nproc_per_node",
        type=int,
        required=True,
        dest="nproc",
        help="processes on this host",
    )
    ap.add_argument("--nnodes", type=int, default=1, help="hosts taking part (one launcher each)")
    ap.add_argument("--node-rank", "--node_rank", type=int, default=0, dest="node_rank", help="this host's index")
    ap.add_argument(
        "--master-addr", "--master_addr", default=None, dest="master_addr", help="host 0's address (default 127.0.0.1)"
    )
    ap.add_argument(
        "--master-port",
        "--master_port",
        "--port",
        type=int,
        default=None,
        dest="master_port",
        help="coordinator port (default: a free one on one host, 29500 on several)",
    )
    ap.add_argument("script")
    ap.add_argument("args", nargs=argparse.REMAINDER)
    a = ap.parse_args(argv)
    try:
        return launch(
            a.nproc,
            [sys.executable, a.script, *a.args],
            nnodes=a.nnodes,
            node_rank=a.node_rank,
            master_addr=a.master_addr,
            master_port=a.master_port,
        )
    except ValueError as e:
        ap.error(str(e))


if __name__ == "__main__":
    sys.exit(main())
