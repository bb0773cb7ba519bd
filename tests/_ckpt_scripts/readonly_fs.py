"""Saves on filesystems that really fail, inside a private mount namespace (``unshare -rm``; root or not).

``python readonly_fs.py DIR``: mounts a tmpfs on DIR/ro, saves a checkpoint there, remounts it read-only,
then tries sync saves (twice: a failed save used to keep the path lock and the second one hung) and an
asynchronous save (its directory cannot be created). A second, 3 MiB tmpfs on DIR/full takes a checkpoint,
then an asynchronous save too big for it (ENOSPC in the background: wait() must raise). Prints one JSON
line; the process must then exit promptly (it used to block for 300 s).
"""

import json
import os
import subprocess
import sys
import threading

import numpy as np

import lazyflow as lf


def outcome(fn):
    try:
        fn()
        return {"ok": True}
    except Exception as e:
        return {
            "cls": type(e).__name__,
            "checkpoint_error": isinstance(e, lf.CheckpointError),
            "os_error": isinstance(e, OSError),
            "errno": getattr(e, "errno", None),
            "msg": str(e)[:400],
        }


def with_timeout(fn, seconds=60):
    box = {}
    t = threading.Thread(target=lambda: box.update(outcome(fn)), daemon=True)
    t.start()
    t.join(seconds)
    return box if not t.is_alive() else {"hung": True}


def main(d):
    ro, full = os.path.join(d, "ro"), os.path.join(d, "full")
    os.makedirs(ro, exist_ok=True)
    os.makedirs(full, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", ro], check=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", full], check=True)
    path = os.path.join(ro, "ckpt")
    lf.save({"v": lf.full((4,), 1.0)}, path)
    subprocess.run(["mount", "-o", "remount,ro", ro], check=True)
    out = {}
    new = {"v": lf.full((4,), 2.0)}
    out["sync_1"] = with_timeout(lambda: lf.save(new, path))
    out["sync_2"] = with_timeout(lambda: lf.save(new, path))
    out["first_save_ro"] = with_timeout(lambda: lf.save(new, os.path.join(ro, "fresh")))

    def async_save():
        lf.save(new, path, async_save=True).wait(timeout=60)

    out["async"] = with_timeout(async_save)
    out["after"] = np.asarray(lf.load(path)["v"]).tolist()

    small = os.path.join(full, "ckpt")
    lf.save({"v": lf.full((4,), 1.0)}, small)

    def too_big():
        lf.save({"v": lf.full((4,), 2.0), "big": lf.ones(2_000_000)}, small, async_save=True).wait(timeout=60)

    out["enospc_async"] = with_timeout(too_big)
    out["enospc_after"] = np.asarray(lf.load(small)["v"]).tolist()
    out["enospc_next_save"] = with_timeout(lambda: lf.save({"v": lf.full((4,), 3.0)}, small))
    out["enospc_final"] = np.asarray(lf.load(small)["v"]).tolist()
    return out


if __name__ == "__main__":
    print("RESULT " + json.dumps(main(sys.argv[1])), flush=True)
