"""Automatic mixed precision: ``lf.autocast`` (eager and graph) with torch's CPU op lists.

Inside ``with lf.autocast(dtype=lf.bfloat16):`` matrix products and convolutions run in the low-precision dtype,
while reductions, softmax, normalisation and losses run in float32; parameters and optimizer state stay float32
(the casts are ops, so gradients flow back to the float32 parameters). It works by wrapping the active
interpreter for the duration of the block, so it costs nothing when not in use and applies equally inside a
graph-mode trace (``graph.config.enable_amp``).
"""

from __future__ import annotations

import contextlib

from ._core import dtypes as D
from ._core.context import state
from ._grad_scaler import GradScaler
from ._tensor import Tensor
from .ops.table import REGISTRY

__all__ = ["autocast", "GradScaler", "LOW_PRECISION_OPS", "FP32_OPS"]

#: ops that run in the autocast dtype (float inputs are cast down)
LOW_PRECISION_OPS = frozenset({"matmul", "linear", "einsum", "conv", "conv_transpose", "outer", "attention"})
#: ops that run in float32 (low-precision float inputs are cast up)
FP32_OPS = frozenset(
    {
        "softmax",
        "log_softmax",
        "logsumexp",
        "sum",
        "mean",
        "prod",
        "var",
        "std",
        "norm",
        "cumsum",
        "cumprod",
        "layer_norm",
        "group_norm",
        "rms_norm",
        "batch_norm",
        "exp",
        "log",
        "log1p",
        "expm1",
        "pow",
        "rsqrt",
        "sqrt",
        "erfinv",
        "softplus",
        "logsigmoid",
    }
)


class _AutocastInterpreter:
    def __init__(self, inner, dtype):
        self.inner = inner
        self.dtype = dtype
        self.name = f"autocast({inner.name}, {dtype.name})"
        self._cast = REGISTRY["cast"]

    def _to(self, args, dtype, from_pred):
        out = []
        for a in args:
            if isinstance(a, Tensor) and a._meta[1].is_floating_point and from_pred(a._meta[1]):
                a = self.inner.apply(self._cast, (a,), (dtype,))
            out.append(a)
        return tuple(out)

    def apply(self, op, args, statics=()):
        name = op.name
        if name in LOW_PRECISION_OPS:
            args = self._to(args, self.dtype, lambda d: d is not self.dtype and d.itemsize >= 4)
        elif name in FP32_OPS:
            args = self._to(args, D.float32, lambda d: d.itemsize < 4)
        return self.inner.apply(op, args, statics)

    def apply_inplace(self, op, target, args, statics=()):
        return self.inner.apply_inplace(op, target, args, statics)

    def accumulate(self, a, b):
        return self.inner.accumulate(a, b)

    def __getattr__(self, name):
        return getattr(self.inner, name)


class autocast(contextlib.ContextDecorator):
    """Mixed precision for the ops inside the block (torch.autocast's signature).

    Args:
        device_type: accepted for torch compatibility ("cpu", "cuda"); the op lists are the same.
        dtype: the low-precision dtype (``lf.bfloat16`` default, or ``lf.float16``).
        enabled: False makes the block a no-op.
    >>> with lf.autocast(dtype=lf.bfloat16):
    ...     y = model(x)          # matmuls in bfloat16, losses in float32
    """

    def __init__(self, device_type: str = "cpu", dtype=None, enabled: bool = True, cache_enabled=None):
        self.dtype = D.bfloat16 if dtype is None else D.to_dtype(dtype)
        if self.dtype not in (D.bfloat16, D.float16):
            raise D.DTypeError(f"autocast supports bfloat16 and float16, got {self.dtype}")
        self.enabled = bool(enabled)

    def __enter__(self):
        self._prev = state.interp
        if self.enabled:
            base = self._prev.inner if isinstance(self._prev, _AutocastInterpreter) else self._prev
            state.interp = _AutocastInterpreter(base, self.dtype)
        return self

    def __exit__(self, *exc):
        state.interp = self._prev
        return False
