"""``lf.backends.cuda``: ``is_built()`` and the ``matmul`` switches."""

from __future__ import annotations

from .._core.device import devices_of
from .._core.precision import get_float32_matmul_precision, set_float32_matmul_precision

__all__ = ["is_built", "matmul"]


def is_built() -> bool:
    """Whether this JAX can run on CUDA GPUs (it has GPU devices); False on a CPU-only install, as torch's CPU build."""
    return bool(devices_of("cuda"))


class _Matmul:
    """``lf.backends.cuda.matmul``.

    Attributes:
        allow_tf32: whether float32 matmuls may use TensorFloat-32 -- the same setting as
            ``lf.get_float32_matmul_precision() != 'highest'`` (torch links them too): True sets ``'high'``, False
            ``'highest'``, and JAX's ``jax_default_matmul_precision`` follows. On CPU it changes no number.
        allow_fp16_reduced_precision_reduction, allow_bf16_reduced_precision_reduction: flags with torch's default
            (True); XLA decides the accumulation precision of half-precision matmuls itself.
    """

    __slots__ = ("allow_fp16_reduced_precision_reduction", "allow_bf16_reduced_precision_reduction")

    def __init__(self) -> None:
        self.allow_fp16_reduced_precision_reduction = True
        self.allow_bf16_reduced_precision_reduction = True

    @property
    def allow_tf32(self) -> bool:
        return get_float32_matmul_precision() != "highest"

    @allow_tf32.setter
    def allow_tf32(self, value: bool) -> None:
        set_float32_matmul_precision("high" if value else "highest")


matmul = _Matmul()
