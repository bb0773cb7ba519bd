"""``lf.backends.cuda``: ``is_built()``, the ``matmul`` switches and the attention-backend switches.

The scaled-dot-product-attention switches (``enable_flash_sdp``, ``sdp_kernel``, ``nn.attention.sdpa_kernel``...)
keep the values you set, as torch's do, and change no number: XLA compiles ``F.scaled_dot_product_attention`` into
one kernel of its choosing whatever is enabled (torch's CPU build also runs attention with any selection).
"""

from __future__ import annotations

import contextlib
import enum
import warnings
from collections.abc import Iterator

from .._core.device import devices_of
from .._core.precision import get_float32_matmul_precision, set_float32_matmul_precision

__all__ = [
    "is_built",
    "matmul",
    "SDPBackend",
    "flash_sdp_enabled",
    "enable_flash_sdp",
    "mem_efficient_sdp_enabled",
    "enable_mem_efficient_sdp",
    "math_sdp_enabled",
    "enable_math_sdp",
    "cudnn_sdp_enabled",
    "enable_cudnn_sdp",
    "sdp_kernel",
    "is_flash_attention_available",
]


class SDPBackend(enum.IntEnum):
    """torch's attention backends (``torch.nn.attention.SDPBackend``), with torch's values."""

    ERROR = -1
    MATH = 0
    FLASH_ATTENTION = 1
    EFFICIENT_ATTENTION = 2
    CUDNN_ATTENTION = 3
    OVERRIDEABLE = 4

    def __str__(self) -> str:
        return f"SDPBackend.{self.name}"


_SDP = dict.fromkeys(SDPBackend, True)  # which backends are enabled (torch's default: all)


def flash_sdp_enabled() -> bool:
    """Whether the flash-attention backend is enabled (a recorded switch; see the module docstring)."""
    return _SDP[SDPBackend.FLASH_ATTENTION]


def enable_flash_sdp(enabled: bool) -> None:
    """Enable or disable the flash-attention backend (recorded; XLA picks the kernel)."""
    _SDP[SDPBackend.FLASH_ATTENTION] = bool(enabled)


def mem_efficient_sdp_enabled() -> bool:
    """Whether the memory-efficient attention backend is enabled."""
    return _SDP[SDPBackend.EFFICIENT_ATTENTION]


def enable_mem_efficient_sdp(enabled: bool) -> None:
    """Enable or disable the memory-efficient attention backend (recorded; XLA picks the kernel)."""
    _SDP[SDPBackend.EFFICIENT_ATTENTION] = bool(enabled)


def math_sdp_enabled() -> bool:
    """Whether the math (reference) attention backend is enabled."""
    return _SDP[SDPBackend.MATH]


def enable_math_sdp(enabled: bool) -> None:
    """Enable or disable the math attention backend (recorded; XLA picks the kernel)."""
    _SDP[SDPBackend.MATH] = bool(enabled)


def cudnn_sdp_enabled() -> bool:
    """Whether the cuDNN attention backend is enabled."""
    return _SDP[SDPBackend.CUDNN_ATTENTION]


def enable_cudnn_sdp(enabled: bool) -> None:
    """Enable or disable the cuDNN attention backend (recorded; XLA picks the kernel)."""
    _SDP[SDPBackend.CUDNN_ATTENTION] = bool(enabled)


def is_flash_attention_available() -> bool:
    """Whether a fused flash-attention kernel exists here: False without a GPU (as torch's CPU build)."""
    return is_built()


@contextlib.contextmanager
def select_sdp(enabled: dict) -> Iterator[None]:
    """Set the attention-backend switches in ``enabled`` for the block and restore all of them after it."""
    saved = dict(_SDP)
    _SDP.update(enabled)
    try:
        yield
    finally:
        _SDP.update(saved)


def sdp_kernel(
    enable_flash: bool = True, enable_math: bool = True, enable_mem_efficient: bool = True, enable_cudnn: bool = True
):
    """torch's deprecated context manager (warns as torch does; use ``lf.nn.attention.sdpa_kernel``)."""
    warnings.warn(
        "`lf.backends.cuda.sdp_kernel()` is deprecated (as torch's). Use `lf.nn.attention.sdpa_kernel()` instead.",
        FutureWarning,
        stacklevel=2,
    )
    return select_sdp(
        {
            SDPBackend.FLASH_ATTENTION: enable_flash,
            SDPBackend.MATH: enable_math,
            SDPBackend.EFFICIENT_ATTENTION: enable_mem_efficient,
            SDPBackend.CUDNN_ATTENTION: enable_cudnn,
        }
    )


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
