"""Normalization layers' functional forms with ``torch.nn.functional``'s signatures.

Each is one primitive of ``lazyflow.ops.nn`` (one eager kernel). ``batch_norm`` in training mode also
updates ``running_mean``/``running_var`` in place (``copy_`` under ``no_grad``), exactly like torch's
``F.batch_norm``, so graph mode writes the new values back into the same buffer objects.
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence

import numpy as np

from ..._core.context import state
from ..._core.errors import DTypeError, ShapeError
from ..._tensor import Tensor
from ...autograd import no_grad
from ...ops.table import REGISTRY as R

__all__ = ["batch_norm", "layer_norm", "group_norm", "rms_norm"]

_BATCH_NORM = R["batch_norm"]
_LAYER_NORM = R["layer_norm"]
_GROUP_NORM = R["group_norm"]
_RMS_NORM = R["rms_norm"]


def _check_float(fn: str, x: Tensor) -> None:
    if not isinstance(x, Tensor):
        raise TypeError(f"{fn}: expected a lazyflow Tensor as input, got {type(x).__name__}")
    if not x.dtype.is_floating_point:
        raise DTypeError(f"{fn}: expected a floating-point input, got {x.dtype.name} (cast with .float())")


def _check_vec(fn: str, name: str, t, shape: tuple) -> None:
    if t is not None and tuple(t.shape) != tuple(shape):
        raise ShapeError(f"{fn}: expected {name} of shape {list(shape)}, got {list(t.shape)}")


def batch_norm(
    input: Tensor,
    running_mean: Tensor | None,
    running_var: Tensor | None,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    training: bool = False,
    momentum: float | Tensor = 0.1,
    eps: float = 1e-5,
) -> Tensor:
    """Batch normalization over every dim but the channel dim 1.

    Args:
        input: ``(N, C, *)``.
        running_mean, running_var: ``(C,)`` buffers or None. When ``training`` they are updated in place:
            ``running = (1 - momentum) * running + momentum * batch_stat`` (the variance unbiased).
        weight, bias: ``(C,)`` affine parameters or None.
        training: normalise with the batch statistics (else with the running ones).
        momentum: the running-average factor (a float, or a 0-d tensor such as ``1 / num_batches``).
        eps: added to the variance.
    Returns:
        the normalised tensor, shaped like ``input``.
    Raises:
        ShapeError: a rank below 2, buffers/parameters not of shape ``(C,)``, or a single value per channel
            in training.
        ValueError: eval mode without running statistics.
    """
    _check_float("batch_norm", input)
    if input.ndim < 2:
        raise ShapeError(f"batch_norm: expected an input of shape (N, C, *), got {list(input.shape)}")
    c = input.shape[1]
    for name, t in (("running_mean", running_mean), ("running_var", running_var), ("weight", weight), ("bias", bias)):
        _check_vec("batch_norm", name, t, (c,))
    eps = builtins.float(eps)
    if training:
        if input.numel() // c <= 1:
            raise ShapeError(
                f"batch_norm: expected more than 1 value per channel when training, got input "
                f"of shape {list(input.shape)}"
            )
        if running_mean is None or running_var is None:
            return state.interp.apply(_BATCH_NORM, (input, weight, bias, None, None, 0.0), (True, eps, False))
        m = momentum if isinstance(momentum, Tensor) else builtins.float(momentum)
        y, new_mean, new_var = state.interp.apply(
            _BATCH_NORM, (input, weight, bias, running_mean, running_var, m), (True, eps, True)
        )
        with no_grad():
            running_mean.copy_(new_mean)
            running_var.copy_(new_var)
        return y
    if running_mean is None or running_var is None:
        raise ValueError("batch_norm: running_mean and running_var must be given in evaluation mode (training=False)")
    return state.interp.apply(_BATCH_NORM, (input, weight, bias, running_mean, running_var, 0.0), (False, eps, False))


def _norm_shape(fn: str, input: Tensor, normalized_shape) -> tuple[int, ...]:
    if isinstance(normalized_shape, (builtins.int, np.integer)):
        ns = (builtins.int(normalized_shape),)
    else:
        ns = tuple(builtins.int(i) for i in normalized_shape)
    if len(ns) == 0 or input.ndim < len(ns) or tuple(input.shape[input.ndim - len(ns) :]) != ns:
        raise ShapeError(
            f"{fn}: given normalized_shape={list(ns)}, expected input with shape [*, "
            f"{', '.join(map(str, ns))}], but got input of size {list(input.shape)}"
        )
    return ns


def layer_norm(
    input: Tensor,
    normalized_shape: int | Sequence[int],
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    eps: float = 1e-5,
) -> Tensor:
    """Layer normalization over the trailing ``normalized_shape`` dims (biased variance).

    Args:
        input: ``(*, *normalized_shape)``.
        normalized_shape: the trailing shape to normalise over.
        weight, bias: affine parameters of shape ``normalized_shape``, or None.
        eps: added to the variance.
    Returns:
        a tensor shaped like ``input``.
    Raises:
        ShapeError: the input's trailing shape or the parameters' shapes differ from ``normalized_shape``.
    """
    _check_float("layer_norm", input)
    ns = _norm_shape("layer_norm", input, normalized_shape)
    _check_vec("layer_norm", "weight", weight, ns)
    _check_vec("layer_norm", "bias", bias, ns)
    return state.interp.apply(_LAYER_NORM, (input, weight, bias), (len(ns), builtins.float(eps)))


def group_norm(
    input: Tensor, num_groups: int, weight: Tensor | None = None, bias: Tensor | None = None, eps: float = 1e-5
) -> Tensor:
    """Group normalization: per sample, normalise each group of ``C / num_groups`` channels.

    Args:
        input: ``(N, C, *)``.
        num_groups: number of groups; must divide ``C``.
        weight, bias: per-channel affine ``(C,)`` or None.
        eps: added to the variance.
    Returns:
        a tensor shaped like ``input``.
    Raises:
        ShapeError: a rank below 2, ``C`` not divisible by ``num_groups``, or parameters not ``(C,)``.
    """
    _check_float("group_norm", input)
    if input.ndim < 2:
        raise ShapeError(f"group_norm: expected an input of shape (N, C, *), got {list(input.shape)}")
    num_groups = builtins.int(num_groups)
    c = input.shape[1]
    if num_groups < 1 or c % num_groups:
        raise ShapeError(
            f"group_norm: expected the number of channels {c} (input of shape "
            f"{list(input.shape)}) to be divisible by num_groups={num_groups}"
        )
    _check_vec("group_norm", "weight", weight, (c,))
    _check_vec("group_norm", "bias", bias, (c,))
    return state.interp.apply(_GROUP_NORM, (input, weight, bias), (num_groups, builtins.float(eps)))


def rms_norm(
    input: Tensor, normalized_shape: int | Sequence[int], weight: Tensor | None = None, eps: float | None = None
) -> Tensor:
    """Root-mean-square normalization ``x / sqrt(mean(x**2) + eps) * weight`` over the trailing dims.

    Args:
        input: ``(*, *normalized_shape)``.
        normalized_shape: the trailing shape to normalise over.
        weight: elementwise scale of shape ``normalized_shape`` or None.
        eps: added to the mean square; None uses the machine epsilon of the input's dtype (like torch).
    Returns:
        a tensor shaped like ``input``.
    Raises:
        ShapeError: the input's trailing shape or the weight's shape differs from ``normalized_shape``.
    """
    _check_float("rms_norm", input)
    ns = _norm_shape("rms_norm", input, normalized_shape)
    _check_vec("rms_norm", "weight", weight, ns)
    if eps is None:
        import jax.numpy as jnp

        eps = builtins.float(jnp.finfo(input.dtype.to_jax()).eps)
    return state.interp.apply(_RMS_NORM, (input, weight), (len(ns), builtins.float(eps)))
