"""Shared test helpers: run a function of tensors in eager or graph mode, and make reproducible inputs.

``run(mode, fn, *args)`` calls ``fn(*args)`` eagerly, or through ``lf.compile(fn)`` in graph mode. Compiled
wrappers are cached per function object, so every call of the same ``fn`` (with new shapes or dtypes) reuses one
``CompiledFunction`` and only adds a variant; tests that reuse functions and shapes share compiled kernels.
"""

from __future__ import annotations

import numpy as np

import lazyflow as lf

MODES = ["eager", "graph"]

_compiled: dict = {}


def compiled(fn):
    """The cached ``lf.compile(fn)`` for ``fn`` (one CompiledFunction per function object)."""
    c = _compiled.get(fn)
    if c is None:
        c = _compiled[fn] = lf.compile(fn, cache_size_limit=64, recompile_limit=64, on_recompile_limit="raise")
    return c


def run(mode: str, fn, *args):
    """``fn(*args)`` eagerly (``mode="eager"``) or as one compiled program (``mode="graph"``)."""
    if mode == "eager":
        return fn(*args)
    if mode == "graph":
        return compiled(fn)(*args)
    raise ValueError(f"unknown mode {mode!r}; expected one of {MODES}")


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def to_np(x):
    """A Tensor (or a tuple of them) as float64/int/bool numpy arrays, for comparisons."""
    if isinstance(x, (tuple, list)):
        return type(x)(to_np(v) for v in x)
    a = np.asarray(x.float() if x.dtype is lf.bfloat16 else x)
    return a.astype(np.float64) if a.dtype.kind == "f" else a


def assert_close(actual, expected, rtol=1e-5, atol=1e-6, what=""):
    np.testing.assert_allclose(
        to_np(actual) if isinstance(actual, lf.Tensor) else actual,
        expected,
        rtol=rtol,
        atol=atol,
        equal_nan=True,
        err_msg=what,
    )
