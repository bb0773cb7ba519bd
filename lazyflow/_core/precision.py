"""torch's float32 matmul precision (``'highest'``, ``'high'``, ``'medium'``) over JAX's
``jax_default_matmul_precision``: the one place that reads and writes that JAX setting.

torch's three levels correspond one to one to JAX's three :class:`jax.lax.Precision` levels (HIGHEST: full float32;
HIGH: TensorFloat-32 on GPU, three bfloat16 passes on TPU; DEFAULT: one bfloat16 pass). XLA:CPU computes float32
matmuls in full precision at every level, so on CPU the setting changes no number.
"""

from __future__ import annotations

import warnings

import jax

__all__ = ["set_float32_matmul_precision", "get_float32_matmul_precision"]

_TO_JAX = {"highest": "highest", "high": "high", "medium": "default"}
# every spelling JAX accepts for the two upper levels (jax.lax's precision strings and dot algorithms); the rest are
# DEFAULT or lower, which is torch's 'medium'
_HIGHEST = frozenset({"highest", "float32", "F32_F32_F32", "F64_F64_F64"})
_HIGH = frozenset(
    {
        "high",
        "tensorfloat32",
        "bfloat16_3x",
        "TF32_TF32_F32",
        "TF32_TF32_F32_X3",
        "BF16_BF16_F32_X6",
        "BF16_BF16_F32_X9",
    }
)


def set_float32_matmul_precision(precision: str) -> None:
    """Set the internal precision of float32 matrix products (torch's names), as JAX's
    ``jax_default_matmul_precision``: ``'highest'`` -> ``'highest'``, ``'high'`` -> ``'high'`` (TensorFloat-32 on
    GPU), ``'medium'`` -> ``'default'`` (bfloat16). Programs traced afterwards use it. On CPU it changes no number.

    Args:
        precision: ``'highest'``, ``'high'`` or ``'medium'``. Anything else warns and changes nothing, as in torch.
    >>> lf.set_float32_matmul_precision("high")   # jax.config.jax_default_matmul_precision == "high"
    """
    if precision not in _TO_JAX:
        warnings.warn(
            f"{precision} is not one of 'highest', 'high', or 'medium'; the current set_float32_matmul_precision "
            "call has no effect.",
            UserWarning,
            stacklevel=2,
        )
        return
    jax.config.update("jax_default_matmul_precision", _TO_JAX[precision])


def get_float32_matmul_precision() -> str:
    """The current float32 matmul precision in torch's names, read from JAX's ``jax_default_matmul_precision``.

    While that is unset, the answer is what JAX's default level computes on JAX's default backend: ``'highest'`` on
    CPU (XLA:CPU multiplies float32 in full precision, as torch's CPU build does), ``'high'`` on GPU (XLA uses
    TensorFloat-32 there, where torch's default is ``'highest'``: set it to get torch's numbers), ``'medium'`` on TPU.
    """
    value = jax.default_matmul_precision.value  # the State behind jax.config.update("jax_default_matmul_precision")
    if value is None:
        return {"cpu": "highest", "gpu": "high"}.get(jax.default_backend(), "medium")
    if value in _HIGHEST:
        return "highest"
    return "high" if value in _HIGH else "medium"
