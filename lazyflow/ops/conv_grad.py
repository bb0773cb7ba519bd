"""Convolution pieces shared by the lowerings and the backward rule: output sizes, im2col patches, and the
weight gradient computed without XLA's backprop-filter convolution.

XLA:CPU runs the weight gradient of a convolution (the "backprop filter" convolution, whose kernel is the
output's whole spatial extent) on one thread, and it collapses on large activations: the small CNN's 3x3
32->64 conv at 32x32, batch 32, spent 520-750 ms there against ~160 ms for the same gradient as nine batched
matmuls (benchmarks/bench_conv.py, BENCHMARKS.md "conv backward"). The two formulations here are plain dots
over strided slices, so XLA runs them on its multi-threaded GEMM:

* ``shift``: one batched matmul per kernel offset, ``dw[:, :, a, b] = sum_n dy[n] @ x_ab[n]^T`` where ``x_ab``
  is the padded input sliced at that offset (with stride and dilation); nothing 9x the input is built.
* ``im2col``: the patch matrix ``(N, C*kh*kw, P)`` and one batched matmul -- cheaper when ``C*kh*kw`` is small
  (a 3-channel stem), where the per-offset dots are too thin to pay for themselves.

Both batch over N (one matmul per sample, then a sum): a single dot contracting over N*P has an output of only
O x C, which Eigen's GEMM does not split across threads.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Sequence

import jax.numpy as jnp
from jax import lax

__all__ = ["DW_FORMULATIONS", "conv_out_size", "dw_formulation", "dw_im2col", "dw_shift", "patches"]


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


def dw_shift(x, dy, w_shape, *, stride, padding, dilation, groups):
    """Weight gradient as one batched matmul per kernel offset (see the module docstring)."""
    n, c = x.shape[:2]
    o, g = w_shape[0], groups
    p = math.prod(dy.shape[2:])
    d = dy.reshape(n, g, o // g, p)
    slices, _ = _offset_slices(x, w_shape[2:], stride, padding, dilation)
    outs = [jnp.einsum("ngop,ngip->ngoi", d, s.reshape(n, g, c // g, p)) for s in slices]
    dw = jnp.stack(outs, axis=-1).sum(0)  # (g, O/g, C/g, prod(kernel))
    return dw.reshape(w_shape)


def dw_im2col(x, dy, w_shape, *, stride, padding, dilation, groups):
    """Weight gradient as the patch matrix times the output gradient, batched over samples."""
    n, c = x.shape[:2]
    o, g = w_shape[0], groups
    kk = math.prod(w_shape[2:])
    p = math.prod(dy.shape[2:])
    cols, _ = patches(x, w_shape[2:], stride, padding, dilation)
    cols = cols.reshape(n, g, (c // g) * kk, p)
    dw = jnp.einsum("ngop,ngkp->ngok", dy.reshape(n, g, o // g, p), cols).sum(0)
    return dw.reshape(w_shape)


DW_FORMULATIONS = {"shift": dw_shift, "im2col": dw_im2col}


def dw_formulation(x_shape, w_shape, stride, padding: Sequence[tuple[int, int]], dilation, groups) -> str:
    """How the weight gradient of an ``xla``-lowered convolution is computed: ``"xla"`` (XLA's backprop-filter
    convolution), ``"shift"`` or ``"im2col"`` (measured with benchmarks/bench_conv.py on 2 shared CPU cores).

    * ``im2col`` when a patch row is short (``C/g * prod(kernel) <= 256``: the 3-channel 7x7 stem, the small
      CNN's first 3x3 conv): the patch matrix is small and one GEMM beats both others;
    * ``shift`` when the output has at least 1024 positions (32x32 and larger): XLA's single-threaded filter
      convolution is slowest exactly there (3x3 32->64 at 32x32, batch 32: ~160 against 520-750 ms);
    * ``xla`` otherwise and for grouped convolutions (the formulations tie or XLA wins at 8x8..28x28).
    """
    kernel = w_shape[2:]
    if groups != 1:
        return "xla"
    out = [conv_out_size(x_shape[2 + i], kernel[i], stride[i], *padding[i], dilation[i]) for i in range(len(kernel))]
    if w_shape[1] * math.prod(kernel) <= 256:
        return "im2col"
    if math.prod(out) >= 1024:
        return "shift"
    return "xla"
