"""``instance_norm`` with ``torch.nn.functional``'s signature, written once over :func:`batch_norm` as torch's:
the ``(N, C, *)`` input is viewed as one sample of ``N * C`` channels, and the running statistics (when given and
``use_input_stats``) are updated in place with the mean over the batch of the per-instance statistics."""

from __future__ import annotations

from ..._core.errors import ShapeError
from ..._tensor import Tensor
from ...autograd import no_grad
from ._norm import _check_float, _check_vec, batch_norm

__all__ = ["instance_norm"]


def instance_norm(
    input: Tensor,
    running_mean: Tensor | None = None,
    running_var: Tensor | None = None,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    use_input_stats: bool = True,
    momentum: float = 0.1,
    eps: float = 1e-5,
) -> Tensor:
    """Normalize each channel of each sample over its spatial dims.

    Args:
        input: ``(N, C, *)`` with at least one spatial dim.
        running_mean, running_var: ``(C,)`` buffers or None; updated in place when ``use_input_stats``.
        weight, bias: ``(C,)`` affine parameters or None.
        use_input_stats: normalize with each instance's statistics (else with the running ones).
        momentum: the running-average factor.
        eps: added to the variance.
    Raises:
        ShapeError: fewer than 3 dims, one value per instance when using input statistics, or parameters
            not of shape ``(C,)``.
        ValueError: ``use_input_stats=False`` without running statistics.
    """
    _check_float("instance_norm", input)
    if input.ndim < 3:
        raise ShapeError(
            f"instance_norm: expected an input of shape (N, C, *) with a spatial dim, got {list(input.shape)}"
        )
    n, c = input.shape[0], input.shape[1]
    for name, t in (("running_mean", running_mean), ("running_var", running_var), ("weight", weight), ("bias", bias)):
        _check_vec("instance_norm", name, t, (c,))
    if use_input_stats and input.numel() // max(n * c, 1) <= 1:
        raise ShapeError(
            f"instance_norm: expected more than 1 spatial element when training, got input of shape {list(input.shape)}"
        )
    if not use_input_stats and (running_mean is None or running_var is None):
        raise ValueError("instance_norm: running_mean and running_var are needed when use_input_stats=False")
    spatial = tuple(input.shape[2:])
    x = input.reshape((1, n * c) + spatial)
    rm = running_mean.repeat(n) if running_mean is not None else None
    rv = running_var.repeat(n) if running_var is not None else None
    w = weight.repeat(n) if weight is not None else None
    b = bias.repeat(n) if bias is not None else None
    out = batch_norm(x, rm, rv, w, b, use_input_stats, momentum, eps)
    if use_input_stats and running_mean is not None and running_var is not None and rm is not None and rv is not None:
        with no_grad():
            running_mean.copy_(rm.reshape((n, c)).mean(0))
            running_var.copy_(rv.reshape((n, c)).mean(0))
    return out.reshape(tuple(input.shape))
