"""RAdam (``torch.optim.RAdam``): the class and its pure update, like torch's ``optim/radam.py``."""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp

from .._tensor import Tensor, _make
from ._functional import _lerp, _scalar_dtype
from .optimizer import Optimizer, _check_betas, _check_flags, _check_lr, _check_nonneg, _scalar_state, _state_array

__all__ = ["RAdam", "radam"]


def radam(
    params: list,
    grads: list,
    states: list[dict],
    *,
    lr,
    beta1,
    beta2,
    eps,
    weight_decay,
    decoupled_weight_decay: bool,
    maximize: bool,
    has_weight_decay: bool,
) -> tuple[list, list]:
    """RAdam's update (Adam with a rectified adaptive learning rate), operation by operation as torch's single-tensor
    implementation. torch's Python ``if rho_t > 5`` on the step count is a ``jnp.where`` here, so one program
    serves every step.

    Args:
        params, grads: arrays. states: dicts with ``step``, ``exp_avg`` and ``exp_avg_sq``.
        lr, beta1, beta2, eps, weight_decay: hyperparameters (numbers or tracers).
        decoupled_weight_decay, maximize: torch's flags. has_weight_decay: ``weight_decay != 0``.
    Returns:
        ``(new_params, new_states)``.
    """
    sd = _scalar_dtype()
    new_params, new_states = [], []
    for p, g, st in zip(params, grads, states):
        dt = p.dtype
        if maximize:
            g = -g
        step = st["step"] + 1
        s = step.astype(sd)
        if has_weight_decay:
            if decoupled_weight_decay:
                p = p * (1 - lr * weight_decay)
            else:
                g = g + weight_decay * p
        exp_avg = _lerp(st["exp_avg"], g, 1 - beta1)
        exp_avg_sq = st["exp_avg_sq"] * beta2 + (1 - beta2) * g * g
        b1, b2 = jnp.asarray(beta1, sd), jnp.asarray(beta2, sd)
        bias_correction1 = 1 - b1**s
        bias_correction2 = 1 - b2**s
        bias_corrected_exp_avg = exp_avg / bias_correction1.astype(dt)
        rho_inf = 2 / (1 - b2) - 1
        rho_t = rho_inf - 2 * s * (b2**s) / bias_correction2
        # only read where rho_t > 5, where the square root's argument is positive
        safe_rho_t = jnp.where(rho_t > 5.0, rho_t, 5.0)
        rect = jnp.sqrt((safe_rho_t - 4) * (safe_rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * safe_rho_t))
        # torch's `float / tensor` is `tensor.reciprocal() * float`
        adaptive_lr = (1 / (jnp.sqrt(exp_avg_sq) + eps)) * jnp.sqrt(bias_correction2).astype(dt)
        scaled = bias_corrected_exp_avg * lr
        update = jnp.where(rho_t > 5.0, scaled * adaptive_lr * rect.astype(dt), scaled)
        new_params.append(p - update)
        new_states.append({"step": step, "exp_avg": exp_avg, "exp_avg_sq": exp_avg_sq})
    return new_params, new_states


class RAdam(Optimizer):
    """RAdam: Adam whose adaptive learning rate is switched on and rectified by the variance of its estimate.

    Args:
        params: parameters or param groups to optimize.
        lr: learning rate (default 1e-3).
        betas: coefficients of the running averages of the gradient and its square (default (0.9, 0.999)).
        eps: term added to the denominator (default 1e-8).
        weight_decay: weight decay (default 0).
        decoupled_weight_decay: decay the weights directly (RAdamW) instead of adding an L2 gradient.
        foreach, capturable: accepted for torch compatibility (every group runs as one compiled program).
        maximize: maximize the objective instead of minimizing.
        differentiable: must be False.
    Raises:
        ValueError: a negative lr, eps or weight_decay, or betas outside [0, 1).
    >>> opt = lf.optim.RAdam(model.parameters(), lr=1e-3)
    """

    _dynamic = ("lr", "betas", "eps", "weight_decay")
    _static = ("decoupled_weight_decay", "maximize")
    _state_keys = ("exp_avg", "exp_avg_sq")

    def __init__(
        self,
        params,
        lr: float | Tensor = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0,
        decoupled_weight_decay: bool = False,
        *,
        foreach: bool | None = None,
        maximize: bool = False,
        capturable: bool = False,
        differentiable: bool = False,
    ) -> None:
        _check_lr(lr)
        _check_nonneg("epsilon value", eps)
        _check_betas(betas)
        _check_nonneg("weight_decay value", weight_decay)
        _check_flags(differentiable, foreach, None)
        defaults = {
            "lr": lr,
            "betas": betas,
            "eps": eps,
            "weight_decay": weight_decay,
            "maximize": maximize,
            "foreach": foreach,
            "capturable": capturable,
            "decoupled_weight_decay": decoupled_weight_decay,
            "differentiable": differentiable,
        }
        super().__init__(params, defaults)

    def _new_state(self, p, group):
        return {"step": _scalar_state(like=p), "exp_avg": _make(_state_array(p)), "exp_avg_sq": _make(_state_array(p))}

    def _derived_static(self, group: dict) -> dict[str, Any]:
        return {"has_weight_decay": bool(group["weight_decay"] != 0)}

    def _update(self, hyper, params, grads, states):
        hyper = dict(hyper)
        beta1, beta2 = hyper.pop("betas")
        return radam(params, grads, states, beta1=beta1, beta2=beta2, **hyper)
