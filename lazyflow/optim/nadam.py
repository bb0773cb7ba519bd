"""NAdam (``torch.optim.NAdam``): the class and its pure update, like torch's ``optim/nadam.py``."""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp

from .._tensor import Tensor, _make
from ._functional import _lerp, _scalar_dtype
from .optimizer import Optimizer, _check_betas, _check_flags, _check_lr, _check_nonneg, _scalar_state, _state_array

__all__ = ["NAdam", "nadam"]


def nadam(
    params: list,
    grads: list,
    states: list[dict],
    *,
    lr,
    beta1,
    beta2,
    eps,
    weight_decay,
    momentum_decay,
    decoupled_weight_decay: bool,
    maximize: bool,
    has_weight_decay: bool,
) -> tuple[list, list]:
    """NAdam's update (Adam with Nesterov momentum), operation by operation as torch's single-tensor implementation.

    Scalar coefficients are computed in float64 (torch: Python floats) from the float32 ``step`` and
    ``mu_product`` states, and cast to the parameter's dtype where torch passes them to a tensor op.

    Args:
        params, grads: arrays. states: dicts with ``step``, ``mu_product`` (0-d), ``exp_avg`` and ``exp_avg_sq``.
        lr, beta1, beta2, eps, weight_decay, momentum_decay: hyperparameters (numbers or tracers).
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
        bias_correction2 = 1 - jnp.asarray(beta2, sd) ** s
        if has_weight_decay:
            if decoupled_weight_decay:
                p = p * (1 - lr * weight_decay)
            else:
                g = g + weight_decay * p
        mu = beta1 * (1.0 - 0.5 * jnp.asarray(0.96, sd) ** (s * momentum_decay))
        mu_next = beta1 * (1.0 - 0.5 * jnp.asarray(0.96, sd) ** ((s + 1) * momentum_decay))
        mu_product = st["mu_product"] * mu.astype(st["mu_product"].dtype)
        exp_avg = _lerp(st["exp_avg"], g, 1 - beta1)
        exp_avg_sq = st["exp_avg_sq"] * beta2 + (1 - beta2) * g * g
        denom = jnp.sqrt(exp_avg_sq / bias_correction2.astype(dt)) + eps
        mp = mu_product.astype(sd)
        p = p + (-lr * (1.0 - mu) / (1.0 - mp)).astype(dt) * g / denom
        p = p + ((-lr * mu_next) / (1.0 - mp * mu_next)).astype(dt) * exp_avg / denom
        new_params.append(p)
        new_states.append({"step": step, "mu_product": mu_product, "exp_avg": exp_avg, "exp_avg_sq": exp_avg_sq})
    return new_params, new_states


class NAdam(Optimizer):
    """NAdam: Adam with Nesterov momentum and a momentum schedule (``momentum_decay``).

    Args:
        params: parameters or param groups to optimize.
        lr: learning rate (default 2e-3).
        betas: coefficients of the running averages of the gradient and its square (default (0.9, 0.999)).
        eps: term added to the denominator (default 1e-8).
        weight_decay: weight decay (default 0).
        momentum_decay: momentum decay psi (default 4e-3).
        decoupled_weight_decay: decay the weights directly (NAdamW) instead of adding an L2 gradient.
        foreach, capturable: accepted for torch compatibility (every group runs as one compiled program).
        maximize: maximize the objective instead of minimizing.
        differentiable: must be False.
    Raises:
        ValueError: a negative lr, eps, weight_decay or momentum_decay, or betas outside [0, 1).
    >>> opt = lf.optim.NAdam(model.parameters(), lr=2e-3)
    """

    _dynamic = ("lr", "betas", "eps", "weight_decay", "momentum_decay")
    _static = ("decoupled_weight_decay", "maximize")
    _state_keys = ("exp_avg", "exp_avg_sq")
    _scalar_state_keys = ("step", "mu_product")

    def __init__(
        self,
        params,
        lr: float | Tensor = 2e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0,
        momentum_decay: float = 4e-3,
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
        _check_nonneg("momentum_decay value", momentum_decay)
        _check_flags(differentiable, foreach, None)
        defaults = {
            "lr": lr,
            "betas": betas,
            "eps": eps,
            "weight_decay": weight_decay,
            "momentum_decay": momentum_decay,
            "decoupled_weight_decay": decoupled_weight_decay,
            "maximize": maximize,
            "foreach": foreach,
            "capturable": capturable,
            "differentiable": differentiable,
        }
        super().__init__(params, defaults)

    def _new_state(self, p, group):
        return {
            "step": _scalar_state(like=p),
            "mu_product": _scalar_state(1.0, like=p),
            "exp_avg": _make(_state_array(p)),
            "exp_avg_sq": _make(_state_array(p)),
        }

    def _derived_static(self, group: dict) -> dict[str, Any]:
        return {"has_weight_decay": bool(group["weight_decay"] != 0)}

    def _update(self, hyper, params, grads, states):
        hyper = dict(hyper)
        beta1, beta2 = hyper.pop("betas")
        return nadam(params, grads, states, beta1=beta1, beta2=beta2, **hyper)
