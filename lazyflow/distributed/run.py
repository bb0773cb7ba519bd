"""Local launcher: ``python -m lazyflow.distributed.run --nproc N script.py args...``.

Starts N processes of ``python script.py args...`` on this host with ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK`` and
``LAZYFLOW_COORDINATOR=127.0.0.1:<free port>`` set (what ``lf.distributed.init_process_group()`` reads), streams
their output line by line with a ``[rank k]`` prefix, and stops every process as soon as one fails. The exit code
is the first failure's (0 when all succeed).
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import threading
import time


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _pump(stream, prefix: str, out) -> None:
    for line in iter(stream.readline, b""):
        out.write(prefix + line.decode(errors="replace"))
        out.flush()
    stream.close()


def launch(nproc: int, cmd: list[str], *, env_extra: dict | None = None, port: int | None = None) -> int:
    """Run ``cmd`` as ``nproc`` ranks; returns the exit code (first failure's, else 0)."""
    if nproc < 1:
        raise ValueError(f"--nproc must be >= 1, got {nproc}")
    port = port or _free_port()
    procs, pumps = [], []
    for rank in range(nproc):
        env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(nproc),
                   LAZYFLOW_COORDINATOR=f"127.0.0.1:{port}", **(env_extra or {}))
        p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        procs.append(p)
        t = threading.Thread(target=_pump, args=(p.stdout, f"[rank {rank}] ", sys.stdout), daemon=True)
        t.start()
        pumps.append(t)
    code = 0
    try:
        while True:
            codes = [p.poll() for p in procs]
            failed = [c for c in codes if c not in (None, 0)]
            if failed:
                code = failed[0]
                break
            if all(c == 0 for c in codes):
                break
            time.sleep(0.05)
    except KeyboardInterrupt:
        code = 130
    finally:
        for p in procs:
            if p.poll() is None:
                p.terminate()
        deadline = time.time() + 5
        for p in procs:
            try:
                p.wait(max(0.1, deadline - time.time()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        for t in pumps:
            t.join(1)
    if code:
        sys.stdout.write(f"[launcher] a rank exited with code {code}; stopped all {nproc} processes\n")
    return code


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m lazyflow.distributed.run", description=__doc__.split("\n\n")[0])
    ap.add_argument("--nproc", "--nproc-per-node", "--nproc_per_node", type=int, required=True, dest="nproc")
    ap.add_argument("--port", type=int, default=None, help="coordinator port (default: a free one)")
    ap.add_argument("script")
    ap.add_argument("args", nargs=argparse.REMAINDER)
    a = ap.parse_args(argv)
    return launch(a.nproc, [sys.executable, a.script, *a.args], port=a.port)


if __name__ == "__main__":
    sys.exit(main())
