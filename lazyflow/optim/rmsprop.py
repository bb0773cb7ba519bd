"""RMSprop (``torch.optim.RMSprop``)."""

from __future__ import annotations

from typing import Any

from .._tensor import Tensor, _make
from . import _functional as F
from .optimizer import Optimizer, _check_flags, _check_lr, _check_nonneg, _scalar_state, _state_array

__all__ = ["RMSprop"]


class RMSprop(Optimizer):
    """RMSprop, with optional momentum and centering.

    Args:
        params: parameters or param groups to optimize.
        lr: learning rate (default 1e-2).
        alpha: smoothing constant of the squared-gradient average (default 0.99).
        eps: term added to the denominator (default 1e-8).
        weight_decay: L2 penalty (default 0).
        momentum: momentum factor (default 0).
        centered: normalize by an estimate of the gradient's variance.
        maximize: maximize the objective instead of minimizing.
        capturable, foreach: accepted for torch compatibility. differentiable: must be False.
    Raises:
        ValueError: a negative lr, eps, momentum, weight_decay or alpha.
    >>> opt = lf.optim.RMSprop(model.parameters(), lr=1e-3, momentum=0.9)
    """

    _dynamic = ("lr", "alpha", "eps", "weight_decay", "momentum")
    _static = ("centered", "maximize")
    _state_keys = ("square_avg", "momentum_buffer", "grad_avg")

    def __init__(
        self,
        params,
        lr: float | Tensor = 1e-2,
        alpha: float = 0.99,
        eps: float = 1e-8,
        weight_decay: float = 0,
        momentum: float = 0,
        centered: bool = False,
        capturable: bool = False,
        foreach: bool | None = None,
        maximize: bool = False,
        differentiable: bool = False,
    ) -> None:
        _check_lr(lr)
        _check_nonneg("epsilon value", eps)
        _check_nonneg("momentum value", momentum)
        _check_nonneg("weight_decay value", weight_decay)
        _check_nonneg("alpha value", alpha)
        _check_flags(differentiable, foreach, None)
        defaults = {
            "lr": lr,
            "momentum": momentum,
            "alpha": alpha,
            "eps": eps,
            "centered": centered,
            "weight_decay": weight_decay,
            "capturable": capturable,
            "foreach": foreach,
            "maximize": maximize,
            "differentiable": differentiable,
        }
        super().__init__(params, defaults)

    def _new_state(self, p, group):
        state = {"step": _scalar_state(like=p), "square_avg": _make(_state_array(p))}
        if group["momentum"] > 0:
            state["momentum_buffer"] = _make(_state_array(p))
        if group["centered"]:
            state["grad_avg"] = _make(_state_array(p))
        return state

    def _init_state(self, group_index, params=None):
        super()._init_state(group_index, params)
        group = self.param_groups[group_index]
        for p in params if params is not None else self._params_with_grad(group):
            st = self.state.get(p)
            if st and group["momentum"] > 0 and "momentum_buffer" not in st:
                st["momentum_buffer"] = _make(_state_array(p))
            if st and group["centered"] and "grad_avg" not in st:
                st["grad_avg"] = _make(_state_array(p))

    def _derived_static(self, group: dict) -> dict[str, Any]:
        return {"has_momentum": bool(group["momentum"] > 0), "has_weight_decay": bool(group["weight_decay"] != 0)}

    def _update(self, hyper, params, grads, states):
        return F.rmsprop(params, grads, states, **hyper)
