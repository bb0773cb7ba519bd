"""Convolution pieces shared by the lowerings and the backward rule: output sizes, im2col patches, and the
weight gradient computed without XLA's backprop-filter convolution.

XLA:CPU runs the weight gradient of a convolution (the "backprop filter" convolution, whose kernel is the
output's whole spatial extent) on one thread, and it collapses on large activations: the small CNN's 3x3
32->64 conv at 32x32, batch 32, spent 520-750 ms there against ~160 ms for the same gradient as nine batched
matmuls (benchmarks/ab_conv_rule.py, BENCHMARKS.md "the conv backward rule"). ``shift`` is plain dots over
strided slices, so XLA runs it on its multi-threaded GEMM: one batched matmul per kernel offset,
``dw[:, :, a, b] = sum_n dy[n] @ x_ab[n]^T`` where ``x_ab`` is the padded input sliced at that offset (with
stride and dilation); nothing 9x the input is built. It batches over N (one matmul per sample, then a sum): a
single dot contracting over N*P has an output of only O x C, which Eigen's GEMM does not split across threads.
(An im2col form of dw -- patch matrix times dy -- was measured too and did not win; see BENCHMARKS.md.)
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Sequence

import jax.numpy as jnp
from jax import lax

__all__ = ["DW_FORMULATIONS", "conv_out_size", "dw_formulation", "dw_shift", "patches"]


def conv_out_size(size: int, k: int, s: int, lo: int, hi: int, d: int) -> int:
    """Output length of a convolution/pooling window along one dimension."""
    return (size + lo + hi - d * (k - 1) - 1) // s + 1


def _offset_slices(x, kernel, stride, padding: Sequence[tuple[int, int]], dilation) -> tuple[Iterator, tuple]:
    """The strided slice of padded ``x`` under each kernel offset (row-major offsets), each ``(N, C, *out)``."""
    nd = len(kernel)
    xp = jnp.pad(x, ((0, 0), (0, 0)) + tuple(padding)) if any(p != (0, 0) for p in padding) else x
    out = tuple(conv_out_size(x.shape[2 + i], kernel[i], stride[i], *padding[i], dilation[i]) for i in range(nd))

    def gen():
        for offs in itertools.product(*(range(k) for k in kernel)):
            start = (0, 0) + tuple(o * d for o, d in zip(offs, dilation))
            limit = xp.shape[:2] + tuple(o * d + s * (n - 1) + 1 for o, d, s, n in zip(offs, dilation, stride, out))
            yield lax.slice(xp, start, limit, (1, 1) + tuple(stride))

    return gen(), out


def patches(x, kernel, stride, padding: Sequence[tuple[int, int]], dilation):
    """im2col from strided slices: ``(N, C, prod(kernel), *out_spatial)`` (C-major, then kernel offsets)."""
    cols, out = _offset_slices(x, kernel, stride, padding, dilation)
    cols = list(cols)
    return (cols[0][:, :, None] if len(cols) == 1 else jnp.stack(cols, axis=2)), out


# per-sample products (N x O/g x C/g per kernel offset) are kept only while this small; past it the O x C output
# is large enough for the GEMM to split across threads itself, so one dot contracts over N and positions at once
# (batch 256, 512 channels would otherwise hold 9 x 256 MB of per-sample products)
_PER_SAMPLE_MAX = 1 << 20


def dw_shift(x, dy, w_shape, *, stride, padding, dilation, groups):
    """Weight gradient as one batched matmul per kernel offset (see the module docstring)."""
    n, c = x.shape[:2]
    o, g = w_shape[0], groups
    p = math.prod(dy.shape[2:])
    d = dy.reshape(n, g, o // g, p)
    slices, _ = _offset_slices(x, w_shape[2:], stride, padding, dilation)
    per_sample = n * (o // g) * (c // g) <= _PER_SAMPLE_MAX
    spec = "ngop,ngip->ngoi" if per_sample else "ngop,ngip->goi"
    dw = jnp.stack([jnp.einsum(spec, d, s.reshape(n, g, c // g, p)) for s in slices], axis=-1)
    if per_sample:
        dw = dw.sum(0)
    return dw.reshape(w_shape)  # (g, O/g, C/g, prod(kernel)) -> (O, C/g, *kernel)


DW_FORMULATIONS = {"shift": dw_shift}


def dw_formulation(x_shape, w_shape, stride, padding: Sequence[tuple[int, int]], dilation, groups) -> str:
    """How the weight gradient of an ``xla``-lowered convolution is computed: ``"shift"`` or ``"xla"`` (XLA's
    backprop-filter convolution), from interleaved A/B rounds on 2 shared CPU cores (BENCHMARKS.md, session 6).

    ``shift`` when the output has at least 16384 positions over the batch (N * out_h * out_w) and the input at
    least 16 channels per group: XLA's single-threaded filter convolution is slowest there (the small CNN's 3x3
    32->64 at 32x32, batch 32: its whole Graph step took 0.53x the time). ``xla`` everywhere else: ResNet's
    64@56 at batch 2 (6272 positions), the 3-channel stems and the im2col form of dw did not win consistently.
    """
    kernel = w_shape[2:]
    out = [conv_out_size(x_shape[2 + i], kernel[i], stride[i], *padding[i], dilation[i]) for i in range(len(kernel))]
    if groups == 1 and w_shape[1] >= 16 and x_shape[0] * math.prod(out) >= 16384:
        return "shift"
    return "xla"
