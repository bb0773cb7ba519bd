"""A process that starts an asynchronous save and then ends in one of several ways.

``python exit_paths.py PATH HOW``: saves ``{"v": 1.0...}`` at PATH (committed), starts an asynchronous save
of ``{"v": 2.0..., "big": ...}`` kept pending for about a second (its commit sleeps first), prints
"started", then ends by HOW:

* ``end`` (the script runs out), ``sys_exit`` (``sys.exit(0)``), ``raise`` (an uncaught exception),
  ``sigterm`` (SIGTERM to itself);
* ``fail_end`` / ``fail_sigterm``: the same with a save whose commit fails (EROFS), never waited for;
* ``fail_collected``: first an asynchronous save whose version directory cannot be created (EROFS, as on
  a read-only filesystem: this used to block the exit for 300 s), caught; then the failing save, its error
  collected with ``wait()``; then a normal end.
"""

import errno
import os
import signal
import sys
import time

import lazyflow as lf
from lazyflow.checkpoint import _layout

path, how = sys.argv[1], sys.argv[2]
lf.save({"v": lf.full((4,), 1.0)}, path)

real_fsync_tree = _layout.fsync_tree


def slow_fsync_tree(root):
    time.sleep(1.0)  # the save is still pending when the main thread ends
    real_fsync_tree(root)


def failing_commit(self, version):
    time.sleep(1.0)
    raise OSError(errno.EROFS, "Read-only file system (simulated)", self.path)


_layout.fsync_tree = slow_fsync_tree
if how.startswith("fail"):
    _layout.Transaction.commit = failing_commit
state = {"v": lf.full((4,), 2.0), "big": lf.arange(2_000_000, dtype=lf.float32)}
if how == "fail_collected":
    real_makedirs = os.makedirs

    def makedirs(p, *args, **kwargs):
        if "orbax-checkpoint-tmp" in os.fspath(p):
            raise OSError(errno.EROFS, "Read-only file system (simulated)", os.fspath(p))
        return real_makedirs(p, *args, **kwargs)

    os.makedirs = makedirs
    try:
        lf.save(state, path, async_save=True)
    except lf.CheckpointWriteError as e:
        print(f"directory creation failed at the call: errno={e.errno}", flush=True)
    os.makedirs = real_makedirs

handle = lf.save(state, path, async_save=True)
print("started", flush=True)

if how == "sys_exit":
    sys.exit(0)
elif how == "raise":
    raise RuntimeError("the training loop crashed")
elif how in ("sigterm", "fail_sigterm"):
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(60)  # interrupted: the handler finishes the save, then SIGTERM ends the process
    print("still alive after SIGTERM", flush=True)
elif how == "fail_collected":
    try:
        handle.wait()
    except lf.CheckpointWriteError as e:
        print(f"collected errno={e.errno}", flush=True)
