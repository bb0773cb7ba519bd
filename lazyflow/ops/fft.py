"""Discrete Fourier transforms: complex-to-complex, real-to-complex (one-sided) and complex-to-real, over any
dims, with torch's (= numpy's) ``s`` (pad or trim), ``dim`` and ``norm``. ``jax.numpy.fft`` implements them and
``jax.vjp`` differentiates them; the hermitian transforms (hfft/ihfft) are composites in ``lazyflow.fft``."""

from __future__ import annotations

import jax.numpy as jnp

from .._core import dtypes as D
from .._core.errors import DTypeError
from .table import op


def _input_dtype(d):
    """torch: integer/bool inputs are promoted to the default float dtype first; float16/bfloat16 to float32 (JAX has
    no half-precision FFT; torch supports it on CUDA only)."""
    if not d.is_inexact:
        return D.get_default_dtype() if D.get_default_dtype() is D.float64 else D.float32
    if d in (D.float16, D.bfloat16):
        return D.float32
    return d


def _to_complex(descs, statics):
    return [D.to_complex(_input_dtype(descs[0][1]))]


def _to_real(name: str):
    def rule(descs, statics):
        d = descs[0][1]
        if d.is_complex:
            raise DTypeError(f"{name} expects a real input tensor, but got {d.name}; use fft/fftn for complex input")
        return [_input_dtype(d)]

    return rule


@op("fft_c2c", static=("s", "dim", "norm", "inverse"), dtypes=_to_complex, linear=True)
def _fft_c2c(x, *, s, dim, norm, inverse):
    return (jnp.fft.ifftn if inverse else jnp.fft.fftn)(x, s=s, axes=dim, norm=norm)


@op("fft_r2c", static=("s", "dim", "norm"), dtypes=_to_real("rfft"), linear=True)
def _fft_r2c(x, *, s, dim, norm):
    return jnp.fft.rfftn(x, s=s, axes=dim, norm=norm)


@op("fft_c2r", static=("s", "dim", "norm"), dtypes=_to_complex, linear=True)
def _fft_c2r(x, *, s, dim, norm):
    return jnp.fft.irfftn(x, s=s, axes=dim, norm=norm)
