"""Primitives for the basic nn layers where a composite would cost several dispatches on the hot path
(``nll_loss``, ``embedding`` with its sparse-style backward) or needs a kernel of its own (fused gradient
clipping, orthogonal init, embedding renormalisation)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

from .random import key_of
from .table import op


def _embedding_grad(weight, flat, g, padding_idx, scale_grad_by_freq):
    g = g.reshape(-1, weight.shape[1]).astype(weight.dtype)
    if scale_grad_by_freq:
        counts = jnp.zeros((weight.shape[0],), weight.dtype).at[flat].add(1)
        g = g / counts[flat][:, None]
    if padding_idx is not None:
        g = jnp.where((flat == padding_idx)[:, None], jnp.zeros((), g.dtype), g)
    return jnp.zeros_like(weight).at[flat].add(g)


@op("embedding", static=("padding_idx", "scale_grad_by_freq"), dtypes="none")
def _embedding(weight, idx, *, padding_idx, scale_grad_by_freq):
    if padding_idx is None and not scale_grad_by_freq:
        return jnp.take(weight, idx, axis=0)

    # a custom VJP inside the implementation (not an OpDef rule), so graph mode's whole-program
    # jax.vjp sees it too: the padding row gets no gradient, scale_grad_by_freq divides by frequency
    @jax.custom_vjp
    def lookup(w, i):
        return jnp.take(w, i, axis=0)

    def fwd(w, i):
        return jnp.take(w, i, axis=0), (w, i)

    def bwd(res, g):
        w, i = res
        return _embedding_grad(w, i.reshape(-1), g, padding_idx, scale_grad_by_freq), None

    lookup.defvjp(fwd, bwd)
    return lookup(weight, idx)


@op("embedding_renorm", static=("norm_type",), dtypes="none", differentiable=False)
def _embedding_renorm(weight, idx, max_norm, *, norm_type):
    used = jnp.zeros((weight.shape[0],), bool).at[idx.reshape(-1)].set(True)
    norms = jnp.linalg.norm(weight, ord=norm_type, axis=1)
    scale = jnp.where(used & (norms > max_norm), max_norm / (norms + 1e-7), 1.0)
    return (weight * scale[:, None]).astype(weight.dtype)


@op("nll_loss", static=("ignore_index", "reduction"), dtypes="none")
def _nll_loss(logp, target, weight, *, ignore_index, reduction):
    cdim = 0 if logp.ndim == 1 else 1
    mask = target != ignore_index
    safe = jnp.where(mask, target, 0)
    # the target's entry as a masked sum, not a gather: its backward is one fused select instead of zeros
    # plus a scatter-add over the whole (N, C) input (XLA:CPU's scatter is a slow serial loop); the sum adds
    # exact zeros to one entry, so the value is the gathered one bit for bit
    hit = lax.broadcasted_iota(safe.dtype, logp.shape, cdim) == jnp.expand_dims(safe, cdim)
    picked = jnp.sum(jnp.where(hit, logp, jnp.zeros((), logp.dtype)), axis=cdim)
    zero = jnp.zeros((), logp.dtype)
    w = mask.astype(logp.dtype) if weight is None else jnp.where(mask, weight.astype(logp.dtype)[safe], zero)
    loss = -picked * w
    if reduction == "none":
        return loss
    if reduction == "sum":
        return loss.sum()
    total, count = loss.sum(), w.sum()
    # every target ignored: torch's mean is 0/0 = NaN with a zero gradient (autodiff's would be 0 * inf = NaN)
    none = count == 0
    return jnp.where(none, lax.stop_gradient(total) / count, total / jnp.where(none, jnp.ones((), count.dtype), count))


def _vector_norm(g, p):
    a = jnp.abs(g)
    if p == float("inf"):
        return a.max() if a.size else jnp.zeros((), g.dtype)
    if p == 0:
        return (a != 0).sum().astype(g.dtype)
    if p == 1:
        return a.sum()
    if p == 2:
        return jnp.sqrt((a * a).sum())
    return (a**p).sum() ** (1.0 / p)


@op("clip_grad_norm", static=("norm_type",), dtypes="none", differentiable=False)
def _clip_grad_norm(max_norm, *grads, norm_type):
    # torch: the norm of the per-tensor norms, then one coefficient min(max_norm / (total + 1e-6), 1)
    norms = jnp.stack([_vector_norm(g, norm_type).astype(jnp.result_type(*grads)) for g in grads])
    total = _vector_norm(norms, norm_type)
    coef = jnp.minimum(max_norm / (total + 1e-6), 1.0)
    return (total, *[(g * coef.astype(g.dtype)).astype(g.dtype) for g in grads])


@op("clip_grad_value", dtypes="none", differentiable=False)
def _clip_grad_value(clip_value, *grads):
    return tuple(jnp.clip(g, -clip_value, clip_value).astype(g.dtype) for g in grads)


@op("orthogonal_into", dtypes="none", differentiable=False)
def _orthogonal_into(x, seed, offset, gain):
    rows = x.shape[0]
    cols = x.size // rows
    ft = x.dtype if jnp.issubdtype(x.dtype, jnp.floating) and x.dtype.itemsize >= 4 else jnp.float32
    flat = jax.random.normal(key_of(seed, offset), (rows, cols), ft)
    if rows < cols:
        flat = flat.T
    q, r = jnp.linalg.qr(flat)
    q = q * jnp.sign(jnp.diagonal(r))[None, :]
    if rows < cols:
        q = q.T
    return (q * gain).reshape(x.shape).astype(x.dtype)
