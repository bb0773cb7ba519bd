"""ASGD (``torch.optim.ASGD``): the class and its pure update, like torch's ``optim/asgd.py``."""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp

from .._tensor import Tensor, _make
from ._functional import _scalar_dtype
from .optimizer import Optimizer, _check_flags, _check_lr, _check_nonneg, _scalar_state, _state_array

__all__ = ["ASGD", "asgd"]


def asgd(
    params: list,
    grads: list,
    states: list[dict],
    *,
    lr,
    lambd,
    alpha,
    t0,
    weight_decay,
    maximize: bool,
    has_weight_decay: bool,
) -> tuple[list, list]:
    """Averaged SGD's update, operation by operation as torch's single-tensor implementation.

    The step size ``eta`` and averaging weight ``mu`` are 0-d float32 states (torch's layout); their next values are
    computed in float64 (torch: Python floats). torch's Python ``if mu != 1`` is a ``jnp.where`` here.

    Args:
        params, grads: arrays. states: dicts with ``step``, ``eta``, ``mu`` (0-d) and ``ax`` (the average).
        lr, lambd, alpha, t0, weight_decay: hyperparameters (numbers or tracers).
        maximize: torch's flag. has_weight_decay: ``weight_decay != 0``.
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
        if has_weight_decay:
            g = g + weight_decay * p
        eta, mu, ax = st["eta"], st["mu"], st["ax"]
        eta_value = eta.astype(sd)
        p = p * (1 - lambd * eta_value).astype(dt)
        p = p + (-eta_value).astype(dt) * g
        ax = jnp.where(mu != 1, ax + (p - ax) * mu.astype(dt), p)
        s = step.astype(sd)
        new_eta = (lr / ((1 + lambd * lr * s) ** alpha)).astype(eta.dtype)
        new_mu = (1 / jnp.maximum(1.0, s - t0)).astype(mu.dtype)
        new_params.append(p)
        new_states.append({"step": step, "eta": new_eta, "mu": new_mu, "ax": ax})
    return new_params, new_states


class ASGD(Optimizer):
    """Averaged stochastic gradient descent: SGD with a decaying step size and a running average ``ax`` of the
    parameters (in ``state[p]["ax"]``; averaging starts after ``t0`` steps).

    Args:
        params: parameters or param groups to optimize.
        lr: learning rate (default 1e-2).
        lambd: decay term (default 1e-4).
        alpha: power of the eta update (default 0.75).
        t0: the step at which averaging starts (default 1e6).
        weight_decay: L2 penalty (default 0).
        foreach, capturable: accepted for torch compatibility (every group runs as one compiled program).
        maximize: maximize the objective instead of minimizing.
        differentiable: must be False.
    Raises:
        ValueError: a negative lr or weight_decay.
    >>> opt = lf.optim.ASGD(model.parameters(), lr=0.01, t0=100)
    """

    _dynamic = ("lr", "lambd", "alpha", "t0", "weight_decay")
    _static = ("maximize",)
    _state_keys = ("ax",)
    _scalar_state_keys = ("step", "eta", "mu")

    def __init__(
        self,
        params,
        lr: float | Tensor = 1e-2,
        lambd: float = 1e-4,
        alpha: float = 0.75,
        t0: float = 1e6,
        weight_decay: float = 0,
        foreach: bool | None = None,
        maximize: bool = False,
        differentiable: bool = False,
        capturable: bool = False,
    ) -> None:
        _check_lr(lr)
        _check_nonneg("weight_decay value", weight_decay)
        _check_flags(differentiable, foreach, None)
        defaults = {
            "lr": lr,
            "lambd": lambd,
            "alpha": alpha,
            "t0": t0,
            "weight_decay": weight_decay,
            "foreach": foreach,
            "maximize": maximize,
            "differentiable": differentiable,
            "capturable": capturable,
        }
        super().__init__(params, defaults)

    def _new_state(self, p, group):
        return {
            "step": _scalar_state(like=p),
            "eta": _scalar_state(float(group["lr"]), like=p),
            "mu": _scalar_state(1.0, like=p),
            "ax": _make(_state_array(p)),
        }

    def _derived_static(self, group: dict) -> dict[str, Any]:
        return {"has_weight_decay": bool(group["weight_decay"] != 0)}

    def _update(self, hyper, params, grads, states):
        return asgd(params, grads, states, **hyper)
