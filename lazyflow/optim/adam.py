"""Adam (``torch.optim.Adam``)."""

from __future__ import annotations

from typing import Any

from .._tensor import Tensor, _make
from . import _functional as F
from .optimizer import Optimizer, _check_betas, _check_flags, _check_lr, _check_nonneg, _scalar_state, _state_array

__all__ = ["Adam"]


class Adam(Optimizer):
    """Adam, with optional AMSGrad and L2 (or, with ``decoupled_weight_decay``, AdamW) weight decay.

    Args:
        params: parameters or param groups to optimize.
        lr: learning rate (default 1e-3).
        betas: coefficients of the running averages of the gradient and its square (default (0.9, 0.999)).
        eps: term added to the denominator (default 1e-8).
        weight_decay: weight decay (default 0).
        amsgrad: use the AMSGrad variant.
        maximize: maximize the objective instead of minimizing.
        decoupled_weight_decay: decay the weights directly (AdamW) instead of adding an L2 gradient.
        foreach, fused, capturable: accepted for torch compatibility (always one compiled program per group).
        differentiable: must be False.
    Raises:
        ValueError: a negative lr, eps or weight_decay, or betas outside [0, 1).
    >>> opt = lf.optim.Adam(model.parameters(), lr=1e-3)
    """

    _dynamic = ("lr", "betas", "eps", "weight_decay")
    _static = ("amsgrad", "maximize", "decoupled_weight_decay")
    _state_keys = ("exp_avg", "exp_avg_sq", "max_exp_avg_sq")

    def __init__(
        self,
        params,
        lr: float | Tensor = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0,
        amsgrad: bool = False,
        *,
        foreach: bool | None = None,
        maximize: bool = False,
        capturable: bool = False,
        differentiable: bool = False,
        fused: bool | None = None,
        decoupled_weight_decay: bool = False,
    ) -> None:
        _check_lr(lr)
        _check_nonneg("epsilon value", eps)
        _check_betas(betas)
        _check_nonneg("weight_decay value", weight_decay)
        _check_flags(differentiable, foreach, fused)
        defaults = {
            "lr": lr,
            "betas": tuple(betas),
            "eps": eps,
            "weight_decay": weight_decay,
            "amsgrad": amsgrad,
            "maximize": maximize,
            "foreach": foreach,
            "capturable": capturable,
            "differentiable": differentiable,
            "fused": fused,
            "decoupled_weight_decay": decoupled_weight_decay,
        }
        super().__init__(params, defaults)

    def _new_state(self, p, group):
        state = {"step": _scalar_state(like=p), "exp_avg": _make_like(p), "exp_avg_sq": _make_like(p)}
        if group["amsgrad"]:
            state["max_exp_avg_sq"] = _make_like(p)
        return state

    def _init_state(self, group_index, params=None):
        super()._init_state(group_index, params)
        group = self.param_groups[group_index]
        if group["amsgrad"]:  # amsgrad switched on after the first step: torch would fail, we start the max
            for p in params if params is not None else self._params_with_grad(group):
                st = self.state.get(p)
                if st and "max_exp_avg_sq" not in st:
                    st["max_exp_avg_sq"] = _make_like(p)

    def _derived_static(self, group: dict) -> dict[str, Any]:
        return {"has_weight_decay": bool(group["weight_decay"] != 0)}

    def _update(self, hyper, params, grads, states):
        hyper = dict(hyper)
        beta1, beta2 = hyper.pop("betas")
        return F.adam(params, grads, states, beta1=beta1, beta2=beta2, **hyper)


def _make_like(p):
    return _make(_state_array(p))
