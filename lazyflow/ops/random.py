"""Random primitives. Each takes ``(seed, offset)`` as dynamic operands and derives its key inside the
kernel, so an eager random op is one kernel launch and graph mode can feed a traced offset.

Uniform and normal samples are a function of the flat element index: element ``i`` of a sample is a word of
``threefry2x32(key, i // 2)`` mapped to the distribution (see :func:`_unit`). A sample
of any shape is therefore the first elements of a longer flat one, which is how eager construction fills parameters
of every shape with the fixed-length ``*_chunk`` kernels (one compile per distribution and dtype, see
``lazyflow/_sample.py``) and still draws exactly the numbers the per-shape ops draw in graph mode.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.extend.random import threefry2x32_p

from .._core.config import x64_enabled
from .table import op

CHUNK = 1 << 16  # elements per call of a *_chunk kernel
_SQRT2 = math.sqrt(2.0)


def key_of(seed, offset):
    k = jax.random.key(0)
    k = jax.random.fold_in(k, jnp.asarray(seed, jnp.uint32))
    return jax.random.fold_in(k, jnp.asarray(offset, jnp.uint32))


def _unit(seed, offset, base, n: int, dtype):
    """``n`` floats of ``dtype`` uniform on [0, 1): elements ``base .. base + n`` (``base`` even) of the flat sample.

    Counter ``j`` of threefry2x32 under the key gives the random words of elements ``2j`` and ``2j + 1`` (both words of
    the pair for a 64-bit dtype, one element per counter); the words become floats as in ``jax.random.uniform``: random
    mantissa bits under the exponent of 1.0, minus one.
    """
    k1, k2 = jax.random.key_data(key_of(seed, offset))
    ft = jnp.dtype(dtype)
    nbits, nmant = jnp.finfo(ft).bits, jnp.finfo(ft).nmant
    ut = {16: jnp.uint16, 32: jnp.uint32, 64: jnp.uint64}[nbits]
    base = jnp.asarray(base, jnp.uint32)
    if nbits == 64:
        idx = lax.iota(jnp.uint32, n) + base
        b1, b2 = threefry2x32_p.bind(k1, k2, jnp.zeros_like(idx), idx)
        bits = (b1.astype(ut) << ut(32)) | b2.astype(ut)
        shift = 64 - nmant
    else:
        idx = lax.iota(jnp.uint32, (n + 1) // 2) + (base >> jnp.uint32(1))
        b1, b2 = threefry2x32_p.bind(k1, k2, jnp.zeros_like(idx), idx)
        words = jnp.stack([b1, b2], axis=1).reshape(-1)[:n]
        if nmant < 8:  # bfloat16: 8 random bits, as jax.random
            bits, shift = (words >> jnp.uint32(24)).astype(ut), 8 - nmant
        else:
            bits, shift = (words >> jnp.uint32(32 - nbits)).astype(ut), nbits - nmant
    one = np.array(1.0, ft).view(ut)
    return lax.bitcast_convert_type((bits >> ut(shift)) | one, ft) - jnp.asarray(1.0, ft)


def _uniform_values(u, low, high, out):
    return (low + u * (high - low)).astype(out)


def _normal_values(u, mean, std, ulo, uhi, a, b, out):
    """N(mean, std**2) by inverse CDF from ``u`` mapped onto [ulo, uhi) (a sub-interval of (-1, 1): truncation),
    clamped to [a, b] (rounding can step outside by an ulp)."""
    ft = u.dtype
    ulo, uhi = jnp.asarray(ulo, ft), jnp.asarray(uhi, ft)
    v = jnp.maximum(ulo, u * (uhi - ulo) + ulo)
    z = jnp.asarray(_SQRT2, ft) * lax.erf_inv(v)
    return jnp.clip(mean + z * std, a, b).astype(out)


def full_range(ft):
    """The [ulo, uhi) of an untruncated normal: (nextafter(-1, 0), 1), as ``jax.random.normal``."""
    return float(np.nextafter(np.array(-1.0, ft), np.array(0.0, ft))), 1.0


def _float_of(dtype):
    return dtype if jnp.issubdtype(dtype, jnp.floating) else jnp.float32


@op("uniform", static=("shape", "dtype"), dtypes="none", differentiable=False)
def _uniform(seed, offset, low, high, *, shape, dtype):
    jt = dtype.to_jax()
    u = _unit(seed, offset, 0, math.prod(shape), jt)
    return _uniform_values(u, low, high, jt).reshape(shape)


@op("normal", static=("shape", "dtype"), dtypes="none", differentiable=False)
def _normal(seed, offset, mean, std, *, shape, dtype):
    jt = dtype.to_jax()
    u = _unit(seed, offset, 0, math.prod(shape), jt)
    return _normal_values(u, mean, std, *full_range(jt), -jnp.inf, jnp.inf, jt).reshape(shape)


@op("uniform_chunk", static=("n", "dtype"), dtypes="none", differentiable=False)
def _uniform_chunk(seed, offset, base, low, high, *, n, dtype):
    """Elements ``base .. base + n`` of the flat sample that :func:`_uniform_into` draws for a tensor of ``dtype``."""
    jt = dtype.to_jax()
    return _uniform_values(_unit(seed, offset, base, n, _float_of(jt)), low, high, jt)


@op("normal_chunk", static=("n", "dtype"), dtypes="none", differentiable=False)
def _normal_chunk(seed, offset, base, mean, std, ulo, uhi, a, b, *, n, dtype):
    """Elements ``base .. base + n`` of the flat sample that :func:`_normal_into` draws."""
    jt = dtype.to_jax()
    return _normal_values(_unit(seed, offset, base, n, jt), mean, std, ulo, uhi, a, b, jt)


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
    u = _unit(seed, offset, 0, x.size, _float_of(x.dtype))
    return _uniform_values(u, lo, hi, x.dtype).reshape(x.shape)


@op("normal_into", dtypes="none", differentiable=False)
def _normal_into(x, seed, offset, mean, std, ulo, uhi, a, b):
    u = _unit(seed, offset, 0, x.size, x.dtype)
    return _normal_values(u, mean, std, ulo, uhi, a, b, x.dtype).reshape(x.shape)
