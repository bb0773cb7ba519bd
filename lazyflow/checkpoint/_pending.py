"""Asynchronous saves when the process ends: finished first, and a failure is never silent.

A pending ``lf.save(..., async_save=True)`` used to be lost when the process ended without ``wait()``,
with exit status 0: at shutdown Python stops the ``concurrent.futures`` pools (orbax's background commit
needs them) before it joins threads, so the commit failed and its error went nowhere. Now:

* **Normal end, ``sys.exit(...)``, an uncaught exception**: a hook that runs before those pools stop (the
  hook ``concurrent.futures`` itself uses, ``threading._register_atexit``) waits for every pending save.
  A save that failed and whose error nobody collected (``SaveHandle.wait()`` / ``exception()``) is printed
  on stderr and the process exits with status 1 at once (``os._exit``: later exit handlers do not run).
* **SIGTERM**: at the first asynchronous save started from the main thread, if SIGTERM still has its
  default action, lazyflow installs a handler. On SIGTERM it prints how many saves it is finishing, waits
  for them, reports failures as above, restores the default action and sends itself SIGTERM again: the
  process still ends "killed by SIGTERM" (status 143 in a shell), with its checkpoints complete. Like any
  Python signal handler it runs when the main thread next executes Python code (a long XLA computation
  delays it). A SIGTERM handler of the program's own is left alone (its ``sys.exit`` takes the path above).
* **SIGKILL, ``os._exit``, power loss**: nothing can run; the crash safety of ``lf.save`` leaves the
  previous checkpoint (or none, for a first save) at the path.
"""

from __future__ import annotations

import atexit
import os
import signal
import sys
import threading

__all__ = ["track", "settle", "collected", "drain"]

_lock = threading.RLock()  # re-entrant: the SIGTERM handler may interrupt the main thread holding it
_tracked: list = []  # SaveHandles still running, or failed with an error nobody collected
_hooked = False


def track(handle) -> None:
    """Follow ``handle`` until it finishes (or, failed, until its error is collected)."""
    global _hooked
    with _lock:
        _tracked.append(handle)
        if not _hooked:
            _hooked = True
            try:  # runs before concurrent.futures shuts its pools down (atexit would run after)
                getattr(threading, "_register_atexit", atexit.register)(_at_exit)
            except RuntimeError:  # interpreter shutdown has begun: the save runs inside it
                pass
    if threading.current_thread() is threading.main_thread():
        try:
            if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
                signal.signal(signal.SIGTERM, _on_sigterm)
        except (ValueError, OSError, AttributeError):  # no SIGTERM here, or not settable
            pass


def _discard(handle) -> None:
    try:
        _tracked.remove(handle)
    except ValueError:
        pass


def settle(handle) -> None:
    """``handle`` finished: forget it, unless it failed and its error was not collected yet."""
    with _lock:
        if handle._error is None or handle._collected:
            _discard(handle)


def collected(handle) -> None:
    """The failure of ``handle`` reached the program (``wait()`` raised it, ``exception()`` returned it)."""
    with _lock:
        handle._collected = True
        _discard(handle)


def drain() -> list[str]:
    """Wait for every tracked save; returns a message per failure nobody collected (and forgets them)."""
    with _lock:
        handles = list(_tracked)
    messages = []
    for h in handles:
        h._done.wait()
        if h._error is not None and not h._collected:
            messages.append(
                f"lazyflow: the asynchronous checkpoint save to '{h.path}' FAILED and its error was never "
                f"collected with SaveHandle.wait(): {type(h._error).__name__}: {h._error}"
            )
        collected(h)
    return messages


def _report(messages: list[str]) -> None:
    for m in messages:
        print(m, file=sys.stderr)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass


def _at_exit() -> None:
    messages = drain()
    if messages:
        _report(messages + ["lazyflow: exiting with status 1: a checkpoint was not saved (see above)"])
        os._exit(1)


def _on_sigterm(signum, frame) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    with _lock:
        running = [h.path for h in _tracked if not h.done()]
    if running:
        _report(
            [
                f"lazyflow: SIGTERM: finishing {len(running)} asynchronous checkpoint save(s) before exiting: "
                + ", ".join(f"'{p}'" for p in running)
            ]
        )
    _report(drain())
    os.kill(os.getpid(), signal.SIGTERM)  # the default action now: the process ends as SIGTERM ends it
