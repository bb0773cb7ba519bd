"""InstanceNorm1d/2d/3d, LocalResponseNorm, CrossMapLRN2d and SyncBatchNorm (torch's names, buffers and reprs).

SyncBatchNorm is BatchNorm over the batch each process is given: lazyflow does not all-reduce its statistics
across processes (under ``lf.compile`` over a device mesh the traced batch is already the global one).
"""

from __future__ import annotations

import warnings

from ... import _functional as _F
from ..._core.errors import ShapeError
from ..._tensor import Tensor
from .. import functional as F
from ..module import Module
from .normalization import _BatchNorm, _NormBase

__all__ = [
    "InstanceNorm1d",
    "InstanceNorm2d",
    "InstanceNorm3d",
    "LocalResponseNorm",
    "CrossMapLRN2d",
    "SyncBatchNorm",
]


class _InstanceNorm(_NormBase):
    _spatial = 1

    def __init__(
        self,
        num_features: int,
        eps: float = 1e-5,
        momentum: float | None = 0.1,
        affine: bool = False,
        track_running_stats: bool = False,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype)

    def forward(self, input: Tensor) -> Tensor:
        if not isinstance(input, Tensor):
            raise TypeError(f"{self._get_name()}: expected a lazyflow Tensor, got {type(input).__name__}")
        s = self._spatial
        if input.ndim not in (s + 1, s + 2):
            raise ShapeError(
                f"{self._get_name()}: expected {s + 1}D (unbatched) or {s + 2}D (batched) input, got "
                f"{input.ndim}D (shape {list(input.shape)})"
            )
        feature_dim = input.ndim - s - 1
        if input.shape[feature_dim] != self.num_features:
            if self.affine:
                raise ShapeError(
                    f"{self._get_name()}: expected input's size at dim={feature_dim} to match num_features "
                    f"({self.num_features}), but got: {input.shape[feature_dim]}."
                )
            warnings.warn(
                f"input's size at dim={feature_dim} does not match num_features. You can silence this warning "
                "by not passing in num_features, which is not used because affine=False",
                stacklevel=2,
            )
        batched = input.ndim == s + 2
        x = input if batched else input.unsqueeze(0)
        out = F.instance_norm(
            x,
            self.running_mean,
            self.running_var,
            self.weight,
            self.bias,
            self.training or not self.track_running_stats,
            self.momentum if self.momentum is not None else 0.0,
            self.eps,
        )
        return out if batched else out.squeeze(0)


class InstanceNorm1d(_InstanceNorm):
    """Instance normalization of ``(N, C, L)`` or ``(C, L)`` input.

    Args:
        num_features: ``C``.
        eps: added to the variance.
        momentum: running-average factor (None: 0, as torch passes it).
        affine: learn ``weight`` (ones) and ``bias`` (zeros) per channel (default False).
        track_running_stats: keep ``running_mean``/``running_var``/``num_batches_tracked`` buffers, used in eval
            (default False: always the instance statistics).
    Raises:
        ShapeError (on call): wrong rank, or a channel count that differs with ``affine``.
    """

    _spatial = 1


class InstanceNorm2d(_InstanceNorm):
    """Instance normalization of ``(N, C, H, W)`` or ``(C, H, W)`` input; arguments as :class:`InstanceNorm1d`."""

    _spatial = 2


class InstanceNorm3d(_InstanceNorm):
    """Instance normalization of ``(N, C, D, H, W)`` / ``(C, D, H, W)``; arguments as :class:`InstanceNorm1d`."""

    _spatial = 3


class LocalResponseNorm(Module):
    """:func:`~lazyflow.nn.functional.local_response_norm` over ``size`` neighbouring channels."""

    def __init__(self, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1.0) -> None:
        super().__init__()
        self.size = size
        self.alpha = alpha
        self.beta = beta
        self.k = k

    def forward(self, input: Tensor) -> Tensor:
        return F.local_response_norm(input, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self) -> str:
        return "{size}, alpha={alpha}, beta={beta}, k={k}".format(**self.__dict__)


class CrossMapLRN2d(Module):
    """torch's legacy (Lua Torch) cross-channel LRN of ``(N, C, H, W)`` input, its forward reproduced exactly.

    torch's running-window sum never drops channel 0 once the window has passed it (a quirk of its loop); this
    layer computes the same values. The gradient is the exact derivative of that forward (torch's own backward
    uses a symmetric-window approximation instead, so gradients differ from torch's).

    Raises:
        ShapeError (on call): an input that is not 4-D.
    """

    def __init__(self, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1) -> None:
        super().__init__()
        self.size = size
        self.alpha = alpha
        self.beta = beta
        self.k = k

    def forward(self, input: Tensor) -> Tensor:
        if input.ndim != 4:
            raise ShapeError(
                f"CrossMapLRN2d: expected a 4D input (N, C, H, W), got {input.ndim}D (shape {list(input.shape)})"
            )
        c = input.shape[1]
        pre_pad = int((self.size - 1) / 2 + 1)
        cs = (input * input).cumsum(1)
        parts = []
        for ch in range(c):
            s = cs[:, min(ch + pre_pad - 1, c - 1)]
            if ch > pre_pad:
                s = s - (cs[:, ch - pre_pad] - cs[:, 0])
            parts.append(s)
        scale = _F.stack(parts, 1) * (self.alpha / self.size) + self.k
        return input * scale.pow(-self.beta)

    def extra_repr(self) -> str:
        return "{size}, alpha={alpha}, beta={beta}, k={k}".format(**self.__dict__)


class SyncBatchNorm(_BatchNorm):
    """BatchNorm over ``(N, C, *)`` input whose statistics torch reduces across processes.

    lazyflow computes them over the batch this process is given (as BatchNorm does); under ``lf.compile`` over a
    device mesh the traced batch is the global one, so the statistics are global there. ``process_group`` is
    accepted and ignored. Arguments otherwise as :class:`BatchNorm1d`.

    Raises:
        ShapeError (on call): an input of fewer than 2 dims or a different channel count.
    """

    _ranks = tuple(range(2, 33))
    _layout = "(N, C, *)"

    def __init__(
        self,
        num_features: int,
        eps: float = 1e-5,
        momentum: float | None = 0.1,
        affine: bool = True,
        track_running_stats: bool = True,
        process_group=None,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype)
        self.process_group = process_group

    @classmethod
    def convert_sync_batchnorm(cls, module: Module, process_group=None) -> Module:
        """Replace every ``BatchNorm*d`` inside ``module`` (or ``module`` itself) by a SyncBatchNorm sharing its
        parameters and buffers, as torch's; returns the converted module."""
        out = module
        if isinstance(module, _BatchNorm) and not isinstance(module, SyncBatchNorm):
            out = cls(
                module.num_features,
                module.eps,
                module.momentum,
                module.affine,
                module.track_running_stats,
                process_group,
            )
            if module.affine:
                out.weight = module.weight
                out.bias = module.bias
            out.running_mean = module.running_mean
            out.running_var = module.running_var
            out.num_batches_tracked = module.num_batches_tracked
            out.training = module.training
        for name, child in module.named_children():
            out.add_module(name, cls.convert_sync_batchnorm(child, process_group))
        return out
