"""Normalization layers: BatchNorm1d/2d/3d, LayerNorm, GroupNorm, RMSNorm (torch's names and buffers).

BatchNorm's running statistics and ``num_batches_tracked`` are buffers updated *in place* (``copy_``/``add_``
on the same Tensor objects, under ``no_grad``), so graph mode writes the new values back into them and an
optimizer or checkpoint holding them sees the update. ``momentum=None`` (cumulative average) divides by
``num_batches_tracked`` as a tensor op, with no Python branching on tensor values.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence

from ..._core import dtypes as D
from ..._creation import empty, ones, tensor, zeros
from ..._tensor import Tensor
from ...autograd import no_grad
from .. import functional as F
from .. import init
from ..module import Module
from ..parameter import Parameter
from .conv import layer_shape_error

__all__ = ["BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "LayerNorm", "GroupNorm", "RMSNorm"]


def _affine_parameters(m, affine: bool, bias: bool, shape, device, dtype) -> None:
    """``weight`` (and ``bias`` unless ``bias=False``) of ``shape`` when ``affine``, else both None, like torch."""
    if affine:
        m.weight = Parameter(empty(shape, device=device, dtype=dtype))
        if bias:
            m.bias = Parameter(empty(shape, device=device, dtype=dtype))
        else:
            m.register_parameter("bias", None)
    else:
        m.register_parameter("weight", None)
        m.register_parameter("bias", None)


def _reset_affine(m) -> None:
    if m.weight is not None:
        init.ones_(m.weight)
    if m.bias is not None:
        init.zeros_(m.bias)


class _NormBase(Module):
    def __init__(
        self,
        num_features: int,
        eps: float = 1e-5,
        momentum: float | None = 0.1,
        affine: bool = True,
        track_running_stats: bool = True,
        device=None,
        dtype=None,
        *,
        bias: bool = True,
    ) -> None:
        super().__init__()
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.affine = affine
        self.track_running_stats = track_running_stats
        if affine:
            self.weight = Parameter(empty(num_features, device=device, dtype=dtype))
            if bias:
                self.bias = Parameter(empty(num_features, device=device, dtype=dtype))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if track_running_stats:
            self.register_buffer("running_mean", zeros(num_features, device=device, dtype=dtype))
            self.register_buffer("running_var", ones(num_features, device=device, dtype=dtype))
            self.register_buffer("num_batches_tracked", tensor(0, dtype=D.int64, device=device))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)
        self.reset_parameters()

    def reset_running_stats(self) -> None:
        """Zero the running mean and the batch counter, set the running variance to one (in place)."""
        if self.track_running_stats:
            init.zeros_(self.running_mean)
            init.ones_(self.running_var)
            init.zeros_(self.num_batches_tracked)

    def reset_parameters(self) -> None:
        """Reset the running statistics, weight to ones and bias to zeros."""
        self.reset_running_stats()
        if self.affine:
            init.ones_(self.weight)
            if self.bias is not None:
                init.zeros_(self.bias)

    def extra_repr(self) -> str:
        return (
            "{num_features}, eps={eps}, momentum={momentum}, affine={affine}, bias={use_bias}, "
            "track_running_stats={track_running_stats}".format(**self.__dict__, use_bias=self.bias is not None)
        )

    def _load_from_state_dict(
        self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs
    ) -> None:
        version = local_metadata.get("version", None)
        if (version is None or version < 2) and self.track_running_stats:
            # checkpoints from before num_batches_tracked existed load with the current counter (torch's rule)
            key = prefix + "num_batches_tracked"
            if key not in state_dict:
                # load_state_dict's own copy of the caller's mapping (the caller's dict never changes)
                state_dict[key] = (  # pyright: ignore[reportIndexIssue]  # the hook's state_dict is typed Mapping
                    self.num_batches_tracked if self.num_batches_tracked is not None else tensor(0, dtype=D.int64)
                )
        super()._load_from_state_dict(
            state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs
        )


class _BatchNorm(_NormBase):
    _ranks: tuple[int, ...] = (4,)
    _layout = "(N, C, H, W)"

    def _check_input_dim(self, input: Tensor) -> None:
        if not isinstance(input, Tensor):
            raise TypeError(f"{self._get_name()}: expected a lazyflow Tensor, got {type(input).__name__}")
        if input.ndim not in self._ranks or input.shape[1] != self.num_features:
            raise layer_shape_error(self, self._layout.replace("C", str(self.num_features)), input)

    def forward(self, input: Tensor) -> Tensor:
        self._check_input_dim(input)
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            with no_grad():
                self.num_batches_tracked.add_(1)
                if self.momentum is None:  # cumulative moving average: 1 / batches seen, as a tensor
                    factor = 1.0 / self.num_batches_tracked
        bn_training = self.training or (self.running_mean is None and self.running_var is None)
        use_buffers = not self.training or self.track_running_stats
        return F.batch_norm(
            input,
            self.running_mean if use_buffers else None,
            self.running_var if use_buffers else None,
            self.weight,
            self.bias,
            bn_training,
            factor,
            self.eps,
        )


class BatchNorm1d(_BatchNorm):
    """Batch normalization over ``(N, C)`` or ``(N, C, L)``.

    Args:
        num_features: ``C``.
        eps: added to the variance.
        momentum: running-average factor; None = cumulative average over all batches seen.
        affine: learn ``weight`` (ones) and ``bias`` (zeros); ``bias=False`` (keyword) drops the bias only.
        track_running_stats: keep ``running_mean`` (zeros), ``running_var`` (ones) and ``num_batches_tracked``
            (int64) buffers; training updates them in place with the unbiased batch variance, eval uses them.
    Raises:
        ShapeError (on call): wrong rank or channel count; a single value per channel in training.
    """

    _ranks = (2, 3)
    _layout = "(N, C) or (N, C, L)"


class BatchNorm2d(_BatchNorm):
    """Batch normalization over ``(N, C, H, W)``; arguments as :class:`BatchNorm1d`.

    >>> bn = lf.nn.BatchNorm2d(8); y = bn(lf.randn(4, 8, 5, 5)); int(bn.num_batches_tracked)
    1
    """

    _ranks = (4,)
    _layout = "(N, C, H, W)"


class BatchNorm3d(_BatchNorm):
    """Batch normalization over ``(N, C, D, H, W)``; arguments as :class:`BatchNorm1d`."""

    _ranks = (5,)
    _layout = "(N, C, D, H, W)"


def _shape_tuple(normalized_shape) -> tuple[int, ...]:
    if isinstance(normalized_shape, numbers.Integral):
        return (int(normalized_shape),)
    return tuple(int(i) for i in normalized_shape)


def _check_trailing(layer: Module, input: Tensor, shape: tuple) -> None:
    if not isinstance(input, Tensor):
        raise TypeError(f"{layer._get_name()}: expected a lazyflow Tensor, got {type(input).__name__}")
    if input.ndim < len(shape) or tuple(input.shape[input.ndim - len(shape) :]) != shape:
        raise layer_shape_error(layer, f"(*, {', '.join(map(str, shape))})", input)


class LayerNorm(Module):
    """Layer normalization over the trailing ``normalized_shape`` dims.

    Args:
        normalized_shape: int or shape of the trailing dims.
        eps: added to the variance.
        elementwise_affine: learn ``weight`` (ones) and, with ``bias``, ``bias`` (zeros) of that shape.
        bias: learn the additive bias (when affine).
    Raises:
        ShapeError (on call): the trailing dims differ from ``normalized_shape``.
    """

    def __init__(
        self,
        normalized_shape: int | Sequence[int],
        eps: float = 1e-5,
        elementwise_affine: bool = True,
        bias: bool = True,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__()
        self.normalized_shape = _shape_tuple(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        _affine_parameters(self, elementwise_affine, bias, self.normalized_shape, device, dtype)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Weight to ones, bias to zeros."""
        _reset_affine(self)

    def forward(self, input: Tensor) -> Tensor:
        _check_trailing(self, input, self.normalized_shape)
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return "{normalized_shape}, eps={eps}, elementwise_affine={elementwise_affine}, bias={use_bias}".format(
            **self.__dict__, use_bias=self.bias is not None
        )


class GroupNorm(Module):
    """Group normalization: per sample, normalise each of ``num_groups`` groups of channels.

    Args:
        num_groups: must divide ``num_channels``.
        num_channels: ``C`` of the ``(N, C, *)`` input.
        eps: added to the variance.
        affine: learn per-channel ``weight`` (ones) and ``bias`` (zeros; keyword ``bias=False`` drops it).
    Raises:
        ValueError: ``num_channels`` not divisible by ``num_groups``.
        ShapeError (on call): a rank below 2 or a different channel count.
    """

    def __init__(
        self,
        num_groups: int,
        num_channels: int,
        eps: float = 1e-5,
        affine: bool = True,
        device=None,
        dtype=None,
        *,
        bias: bool = True,
    ) -> None:
        super().__init__()
        if num_channels % num_groups != 0:
            raise ValueError(f"num_channels ({num_channels}) must be divisible by num_groups ({num_groups})")
        self.num_groups = num_groups
        self.num_channels = num_channels
        self.eps = eps
        self.affine = affine
        _affine_parameters(self, affine, bias, num_channels, device, dtype)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Weight to ones, bias to zeros."""
        _reset_affine(self)

    def forward(self, input: Tensor) -> Tensor:
        if not isinstance(input, Tensor):
            raise TypeError(f"{self._get_name()}: expected a lazyflow Tensor, got {type(input).__name__}")
        if input.ndim < 2 or input.shape[1] != self.num_channels:
            raise layer_shape_error(self, f"(N, {self.num_channels}, *)", input)
        return F.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return "{num_groups}, {num_channels}, eps={eps}, affine={affine}, bias={use_bias}".format(
            **self.__dict__, use_bias=self.bias is not None
        )


class RMSNorm(Module):
    """Root-mean-square normalization over the trailing ``normalized_shape`` dims.

    Args:
        normalized_shape: int or shape of the trailing dims.
        eps: added to the mean square; None = the input dtype's machine epsilon.
        elementwise_affine: learn ``weight`` (ones) of that shape.
    Raises:
        ShapeError (on call): the trailing dims differ from ``normalized_shape``.
    """

    def __init__(
        self,
        normalized_shape: int | Sequence[int],
        eps: float | None = None,
        elementwise_affine: bool = True,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__()
        self.normalized_shape = _shape_tuple(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = Parameter(empty(self.normalized_shape, device=device, dtype=dtype))
        else:
            self.register_parameter("weight", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Weight to ones."""
        if self.elementwise_affine:
            init.ones_(self.weight)

    def forward(self, input: Tensor) -> Tensor:
        _check_trailing(self, input, self.normalized_shape)
        return F.rms_norm(input, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self) -> str:
        return "{normalized_shape}, eps={eps}, elementwise_affine={elementwise_affine}".format(**self.__dict__)
