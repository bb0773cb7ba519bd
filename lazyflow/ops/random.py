"""Random primitives. Each takes ``(seed, offset)`` as dynamic operands and derives its key inside the
kernel, so an eager random op is one kernel launch and graph mode can feed a traced offset."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from .._core.config import x64_enabled
from .table import op


def key_of(seed, offset):
    k = jax.random.key(0)
    k = jax.random.fold_in(k, jnp.asarray(seed, jnp.uint32))
    return jax.random.fold_in(k, jnp.asarray(offset, jnp.uint32))


@op("uniform", static=("shape", "dtype"), dtypes="none", differentiable=False)
def _uniform(seed, offset, low, high, *, shape, dtype):
    u = jax.random.uniform(key_of(seed, offset), shape, dtype.to_jax())
    return (low + u * (high - low)).astype(dtype.to_jax())


@op("normal", static=("shape", "dtype"), dtypes="none", differentiable=False)
def _normal(seed, offset, mean, std, *, shape, dtype):
    z = jax.random.normal(key_of(seed, offset), shape, dtype.to_jax())
    return (mean + z * std).astype(dtype.to_jax())


@op("randint", static=("shape", "dtype"), dtypes="none", differentiable=False)
def _randint(seed, offset, low, high, *, shape, dtype):
    return jax.random.randint(key_of(seed, offset), shape, low, high, dtype.to_jax())


@op("randperm", static=("n", "dtype"), dtypes="none", differentiable=False)
def _randperm(seed, offset, *, n, dtype):
    return jax.random.permutation(key_of(seed, offset), n).astype(dtype.to_jax())


@op("bernoulli", dtypes="none", differentiable=False)
def _bernoulli(seed, offset, p):
    u = jax.random.uniform(key_of(seed, offset), jnp.shape(p), jnp.result_type(p))
    return (u < p).astype(jnp.result_type(p))


@op("multinomial", static=("num_samples", "replacement"), dtypes="none", differentiable=False)
def _multinomial(seed, offset, probs, *, num_samples, replacement):
    key = key_of(seed, offset)
    logits = jnp.log(probs.astype(jnp.float32))
    if replacement:
        shape = probs.shape[:-1] + (num_samples,)
        out = jax.random.categorical(key, logits[..., None, :], axis=-1, shape=shape)
    else:
        g = jax.random.gumbel(key, probs.shape, jnp.float32)
        out = jnp.argsort(-(logits + g), axis=-1)[..., :num_samples]
    return out.astype(jnp.int64 if x64_enabled() else jnp.int32)


@op("dropout", static=("p",), dtypes="none")
def _dropout(seed, offset, x, *, p):
    keep = jax.random.bernoulli(key_of(seed, offset), 1.0 - p, jnp.shape(x))
    return jnp.where(keep, x / (1.0 - p), jnp.zeros((), x.dtype)).astype(x.dtype)


@op("uniform_into", dtypes="none", differentiable=False)
def _uniform_into(x, seed, offset, lo, hi):
    ft = x.dtype if jnp.issubdtype(x.dtype, jnp.floating) else jnp.float32
    u = jax.random.uniform(key_of(seed, offset), x.shape, ft)
    return (lo + u * (hi - lo)).astype(x.dtype)


@op("normal_into", dtypes="none", differentiable=False)
def _normal_into(x, seed, offset, mean, std):
    z = jax.random.normal(key_of(seed, offset), x.shape, x.dtype)
    return (mean + z * std).astype(x.dtype)
