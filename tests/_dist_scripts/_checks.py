"""A tiny harness for the scripts the distributed tests run in subprocesses.

Each check is a function registered with ``@check``; ``main()`` runs them all in order and prints one line per
check, ``OK <name>`` or ``FAIL <name>`` followed by the traceback, so one failing check does not hide the others.
The pytest side (``results``/``assert_ok``) runs a script once and turns each line into its own test.
"""

from __future__ import annotations

import os
import subprocess
import sys
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
_CHECKS: list = []


def check(fn):
    _CHECKS.append(fn)
    return fn


def main() -> None:
    for fn in _CHECKS:
        try:
            fn()
        except BaseException:
            print(f"FAIL {fn.__name__}\n{traceback.format_exc()}END", flush=True)
        else:
            print(f"OK {fn.__name__}", flush=True)


def names(script: str) -> list[str]:
    """The check names a script defines (parsed, not imported: collecting tests must not start JAX)."""
    import ast

    tree = ast.parse(open(os.path.join(HERE, script)).read())
    return [
        n.name
        for n in tree.body
        if isinstance(n, ast.FunctionDef) and any(isinstance(d, ast.Name) and d.id == "check" for d in n.decorator_list)
    ]


def run_script(script: str, *args: str, devices: int = 8, timeout: float = 600) -> str:
    """Run ``script`` in a fresh interpreter with ``devices`` virtual CPU devices; its stdout."""
    env = dict(os.environ, XLA_FLAGS=f"--xla_force_host_platform_device_count={devices}", JAX_PLATFORMS="cpu")
    p = subprocess.run(
        [sys.executable, os.path.join(HERE, script), *args], capture_output=True, text=True, env=env, timeout=timeout
    )
    if p.returncode:
        raise AssertionError(f"{script} exited with {p.returncode}:\n{p.stdout[-6000:]}\n{p.stderr[-6000:]}")
    return p.stdout


def outcome(out: str, name: str) -> None:
    """Raise unless ``name`` printed OK in ``out`` (its traceback when it failed)."""
    if f"OK {name}\n" in out:
        return
    i = out.find(f"FAIL {name}\n")
    if i >= 0:
        raise AssertionError(out[i : out.find("END", i)])
    raise AssertionError(f"check {name} did not run; output:\n{out[-4000:]}")
