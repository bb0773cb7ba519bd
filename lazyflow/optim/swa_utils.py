"""Stochastic weight averaging and EMA (``torch.optim.swa_utils``): ``AveragedModel``, ``SWALR``, ``update_bn``
and the averaging functions, with torch's update formulas (foreach ``lerp`` on accelerators, the running-mean
formula on the CPU, as torch chooses) and state dict (the averaged copy under ``module.``, plus ``n_averaged``)."""

from __future__ import annotations

import itertools
import math
import warnings
from collections.abc import Callable, Iterable
from copy import deepcopy
from typing import Any

import numpy as np

from .._core import dtypes as D
from .._creation import tensor
from .._tensor import Tensor
from ..autograd.grad_mode import no_grad
from ..nn.module import Module
from ..nn.modules.normalization import _BatchNorm
from .lr_scheduler import LRScheduler
from .lr_scheduler._base import _per_group
from .optimizer import Optimizer

__all__ = [
    "AveragedModel",
    "update_bn",
    "SWALR",
    "get_ema_multi_avg_fn",
    "get_swa_multi_avg_fn",
    "get_ema_avg_fn",
    "get_swa_avg_fn",
]


def _check_decay(decay: float) -> None:
    if decay < 0.0 or decay > 1.0:
        raise ValueError(f"Invalid decay value {decay} provided. Please provide a value in [0,1] range.")


def get_ema_multi_avg_fn(decay: float = 0.999):
    """In-place EMA over lists: ``ema = lerp(ema, current, 1 - decay)``."""
    _check_decay(decay)

    def ema_update(ema_params, current_params, _num_averaged) -> None:
        with no_grad():
            for e, c in zip(ema_params, current_params):
                if e.is_floating_point():
                    e.lerp_(c, 1 - decay)
                else:
                    e.copy_(e * decay + c * (1 - decay))

    return ema_update


def get_swa_multi_avg_fn():
    """In-place running mean over lists: ``avg = lerp(avg, current, 1 / (n + 1))``."""

    def swa_update(averaged_params, current_params, num_averaged) -> None:
        if isinstance(num_averaged, Tensor):  # torch divides by the int64 tensor: a float32 weight
            w = float(np.float32(1.0) / np.float32(int(num_averaged.item()) + 1))
        else:
            w = 1 / (num_averaged + 1)
        with no_grad():
            for a, c in zip(averaged_params, current_params):
                if a.is_floating_point():
                    a.lerp_(c, w)
                else:
                    a.add_(c - a, alpha=w)

    return swa_update


def get_ema_avg_fn(decay: float = 0.999):
    """Per tensor EMA: returns ``decay * ema + (1 - decay) * current``."""
    _check_decay(decay)

    def ema_update(ema_param: Tensor, current_param: Tensor, num_averaged):
        with no_grad():
            return decay * ema_param + (1 - decay) * current_param

    return ema_update


def get_swa_avg_fn():
    """Per tensor running mean: returns ``avg + (current - avg) / (n + 1)``."""

    def swa_update(averaged_param: Tensor, current_param: Tensor, num_averaged):
        with no_grad():
            return averaged_param + (current_param - averaged_param) / (num_averaged + 1)

    return swa_update


class AveragedModel(Module):
    """A copy of ``model`` whose parameters (and buffers, with ``use_buffers``) are a running average of
    ``model``'s, updated by :meth:`update_parameters` (SWA by default; EMA with ``multi_avg_fn=
    get_ema_multi_avg_fn(decay)``).

    Args:
        model: the model to average (deep-copied).
        device: where the copy lives (``model.to(device)``).
        avg_fn: ``avg_fn(averaged, current, n_averaged) -> new averaged`` per tensor.
        multi_avg_fn: ``multi_avg_fn(averaged_list, current_list, n_averaged)`` updating in place.
        use_buffers: average buffers too (otherwise they are copied from ``model`` at each update).
    Raises:
        ValueError: both ``avg_fn`` and ``multi_avg_fn``.
    """

    def __init__(
        self,
        model: Module,
        device=None,
        avg_fn: Callable | None = None,
        multi_avg_fn: Callable | None = None,
        use_buffers: bool = False,
    ) -> None:
        super().__init__()
        if avg_fn is not None and multi_avg_fn is not None:
            raise ValueError("Only one of avg_fn and multi_avg_fn should be provided")
        self.module = deepcopy(model)
        if device is not None:
            self.module = self.module.to(device)
        self.register_buffer("n_averaged", tensor(0, dtype=D.int64, device=device))
        self.avg_fn = avg_fn
        self.multi_avg_fn = multi_avg_fn
        self.use_buffers = use_buffers

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    def update_parameters(self, model: Module) -> None:
        """Fold ``model``'s current parameters into the average (the first call copies them)."""
        if self.use_buffers:
            mine = list(itertools.chain(self.module.parameters(), self.module.buffers()))
            theirs = list(itertools.chain(model.parameters(), model.buffers()))
        else:
            mine, theirs = list(self.parameters()), list(model.parameters())
        n = int(self.n_averaged.item())
        with no_grad():
            current = [p.detach() for p in theirs]
            if n == 0:
                for a, c in zip(mine, current):
                    a.copy_(c)
            elif self.avg_fn is not None:
                for a, c in zip(mine, current):
                    a.copy_(self.avg_fn(a.detach(), c, self.n_averaged))
            elif self.multi_avg_fn is not None:
                self.multi_avg_fn(mine, current, self.n_averaged)
            else:  # torch: foreach lerp on accelerators, the plain running-mean formula on the CPU
                on_cpu = [i for i, a in enumerate(mine) if a.device.type == "cpu"]
                cpu = set(on_cpu)
                avg = get_swa_avg_fn()
                for i in on_cpu:
                    mine[i].copy_(avg(mine[i].detach(), current[i], self.n_averaged))
                rest = [i for i in range(len(mine)) if i not in cpu]
                if rest:
                    get_swa_multi_avg_fn()([mine[i] for i in rest], [current[i] for i in rest], self.n_averaged)
            if not self.use_buffers:  # buffers follow the model
                for b, mb in zip(self.module.buffers(), model.buffers()):
                    b.copy_(mb.detach())
            self.n_averaged.add_(1)


def update_bn(loader: Iterable[Any], model: Module, device=None) -> None:
    """Recompute every BatchNorm's running statistics with one pass over ``loader`` (a cumulative average:
    momentum ``None`` for the pass); a batch that is a list/tuple contributes its first element."""
    momenta = {}
    for m in model.modules():
        if isinstance(m, _BatchNorm):
            m.reset_running_stats()
            momenta[m] = m.momentum
    if not momenta:
        return
    was_training = model.training
    model.train()
    for m in momenta:
        m.momentum = None
    with no_grad():
        for batch in loader:
            if isinstance(batch, (list, tuple)):
                batch = batch[0]
            if device is not None:
                batch = batch.to(device)
            model(batch)
    for m, momentum in momenta.items():
        m.momentum = momentum
    model.train(was_training)


class SWALR(LRScheduler):
    """Anneal each group's lr to ``swa_lr`` over ``anneal_epochs`` (cosine or linear), then hold it.

    Raises:
        ValueError: an unknown ``anneal_strategy`` or a negative/non-int ``anneal_epochs``.
    """

    def __init__(
        self,
        optimizer: Optimizer,
        swa_lr: float | list[float],
        anneal_epochs: int = 10,
        anneal_strategy: str = "cos",
        last_epoch: int = -1,
    ) -> None:
        for lr, group in zip(_per_group("swa_lr", optimizer, swa_lr), optimizer.param_groups):
            group["swa_lr"] = lr
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(f"anneal_strategy must be one of 'cos' or 'linear', instead got {anneal_strategy}")
        self._anneal_strategy = anneal_strategy
        if not isinstance(anneal_epochs, int) or anneal_epochs < 0:
            raise ValueError(f"anneal_epochs must be equal or greater than 0, got {anneal_epochs}")
        self.anneal_epochs = anneal_epochs
        super().__init__(optimizer, last_epoch)

    def anneal_func(self, t: float) -> float:
        return (1 - math.cos(math.pi * t)) / 2 if self._anneal_strategy == "cos" else t

    @staticmethod
    def _get_initial_lr(lr, swa_lr, alpha):
        return swa_lr if alpha == 1 else (lr - alpha * swa_lr) / (1 - alpha)

    def get_lr(self) -> list:
        if not self._get_lr_called_within_step:
            warnings.warn(
                "To get the last learning rate computed by the scheduler, please use `get_last_lr()`.",
                UserWarning,
                stacklevel=2,
            )
        step = self._step_count - 1
        if self.anneal_epochs == 0:
            step = max(1, step)
        prev_alpha = self.anneal_func(max(0, min(1, (step - 1) / max(1, self.anneal_epochs))))
        groups = self.optimizer.param_groups
        prev_lrs = [self._get_initial_lr(g["lr"], g["swa_lr"], prev_alpha) for g in groups]
        alpha = self.anneal_func(max(0, min(1, step / max(1, self.anneal_epochs))))
        return [g["swa_lr"] * alpha + lr * (1 - alpha) for g, lr in zip(groups, prev_lrs)]
