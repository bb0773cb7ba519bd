"""Adagrad (``torch.optim.Adagrad``)."""

from __future__ import annotations

from typing import Any

from .._tensor import Tensor, _make
from . import _functional as F
from .optimizer import Optimizer, _check_flags, _check_lr, _check_nonneg, _scalar_state, _state_array

__all__ = ["Adagrad"]


class Adagrad(Optimizer):
    """Adagrad. Like torch, its state (``step`` and ``sum``) exists from construction.

    Args:
        params: parameters or param groups to optimize.
        lr: learning rate (default 1e-2).
        lr_decay: learning-rate decay (default 0).
        weight_decay: L2 penalty (default 0).
        initial_accumulator_value: starting value of the squared-gradient sums (default 0).
        eps: term added to the denominator (default 1e-10).
        foreach, fused: accepted for torch compatibility. differentiable: must be False.
        maximize: maximize the objective instead of minimizing.
    Raises:
        ValueError: a negative lr, lr_decay, weight_decay, initial_accumulator_value or eps.
    >>> opt = lf.optim.Adagrad(model.parameters(), lr=0.01)
    """

    _dynamic = ("lr", "lr_decay", "weight_decay", "eps")
    _static = ("maximize",)
    _state_keys = ("sum",)

    def __init__(
        self,
        params,
        lr: float | Tensor = 1e-2,
        lr_decay: float = 0,
        weight_decay: float = 0,
        initial_accumulator_value: float = 0,
        eps: float = 1e-10,
        foreach: bool | None = None,
        *,
        maximize: bool = False,
        differentiable: bool = False,
        fused: bool | None = None,
    ) -> None:
        _check_lr(lr)
        _check_nonneg("lr_decay value", lr_decay)
        _check_nonneg("weight_decay value", weight_decay)
        _check_nonneg("initial_accumulator_value value", initial_accumulator_value)
        _check_nonneg("epsilon value", eps)
        _check_flags(differentiable, foreach, fused)
        defaults = {
            "lr": lr,
            "lr_decay": lr_decay,
            "eps": eps,
            "weight_decay": weight_decay,
            "initial_accumulator_value": initial_accumulator_value,
            "foreach": foreach,
            "maximize": maximize,
            "differentiable": differentiable,
            "fused": fused,
        }
        super().__init__(params, defaults)
        for index, group in enumerate(self.param_groups):
            self._init_state(index, group["params"])

    def _new_state(self, p, group):
        return {"step": _scalar_state(like=p), "sum": _make(_state_array(p, float(group["initial_accumulator_value"])))}

    def _derived_static(self, group: dict) -> dict[str, Any]:
        return {"has_weight_decay": bool(group["weight_decay"] != 0)}

    def _update(self, hyper, params, grads, states):
        hyper = dict(hyper)
        hyper.pop("initial_accumulator_value", None)
        return F.adagrad(params, grads, states, **hyper)
