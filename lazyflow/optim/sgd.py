"""Stochastic gradient descent (``torch.optim.SGD``)."""

from __future__ import annotations

from typing import Any

from .._tensor import Tensor, _make
from . import _functional as F
from .optimizer import Optimizer, _check_flags, _check_lr, _check_nonneg, _state_array

__all__ = ["SGD"]


class SGD(Optimizer):
    """Stochastic gradient descent with optional (Nesterov) momentum and L2 weight decay.

    Args:
        params: parameters or param groups to optimize.
        lr: learning rate (default 1e-3).
        momentum: momentum factor (default 0).
        dampening: dampening for momentum (default 0).
        weight_decay: L2 penalty (default 0).
        nesterov: use Nesterov momentum (needs ``momentum > 0`` and ``dampening == 0``).
        maximize: maximize the objective instead of minimizing.
        foreach, fused: accepted for torch compatibility; every group always runs as one compiled program.
        differentiable: must be False (autograd through ``step()`` is not supported).
    Raises:
        ValueError: a negative lr, momentum or weight_decay, or an invalid Nesterov setting.
    >>> opt = lf.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    """

    _dynamic = ("lr", "momentum", "dampening", "weight_decay")
    _static = ("nesterov", "maximize")
    _state_keys = ("momentum_buffer",)

    def __init__(
        self,
        params,
        lr: float | Tensor = 1e-3,
        momentum: float = 0,
        dampening: float = 0,
        weight_decay: float | Tensor = 0,
        nesterov: bool = False,
        *,
        maximize: bool = False,
        foreach: bool | None = None,
        differentiable: bool = False,
        fused: bool | None = None,
    ) -> None:
        _check_lr(lr)
        _check_nonneg("momentum value", momentum)
        _check_nonneg("weight_decay value", weight_decay)
        _check_flags(differentiable, foreach, fused)
        defaults = {
            "lr": lr,
            "momentum": momentum,
            "dampening": dampening,
            "weight_decay": weight_decay,
            "nesterov": nesterov,
            "maximize": maximize,
            "foreach": foreach,
            "differentiable": differentiable,
            "fused": fused,
        }
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        super().__init__(params, defaults)

    def _derived_static(self, group: dict) -> dict[str, Any]:
        return {"has_momentum": bool(group["momentum"] != 0), "has_weight_decay": bool(group["weight_decay"] != 0)}

    def _new_state(self, p, group):
        # with no dampening a zero buffer's first update, ``0 * momentum + 1 * grad``, is exactly torch's lazy
        # ``buffer = grad``: starting with it keeps the step program's inputs the same from the first step on (a
        # buffer appearing at step 2 would compile the program again)
        if group["momentum"] != 0 and group["dampening"] == 0:
            return {"momentum_buffer": _make(_state_array(p))}
        return {}

    def _update(self, hyper, params, grads, states):
        return F.sgd(params, grads, states, **hyper)
