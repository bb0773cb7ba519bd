"""Rprop (``torch.optim.Rprop``): the class and its pure update, like torch's ``optim/rprop.py``."""

from __future__ import annotations

import jax.numpy as jnp

from .._tensor import Tensor, _make
from .optimizer import Optimizer, _check_flags, _check_lr, _scalar_state, _state_array

__all__ = ["Rprop", "rprop"]


def rprop(
    params: list,
    grads: list,
    states: list[dict],
    *,
    etaminus,
    etaplus,
    step_size_min,
    step_size_max,
    maximize: bool,
) -> tuple[list, list]:
    """Rprop's update, operation by operation as torch's single-tensor implementation: each element's step size grows
    by ``etaplus`` while its gradient keeps its sign and shrinks by ``etaminus`` when it flips (that step is skipped).

    Args:
        params, grads: arrays. states: dicts with ``step``, ``prev`` (the previous masked gradient) and
            ``step_size``.
        etaminus, etaplus, step_size_min, step_size_max: hyperparameters (numbers or tracers).
        maximize: torch's flag.
    Returns:
        ``(new_params, new_states)``.
    """
    new_params, new_states = [], []
    for p, g, st in zip(params, grads, states):
        dt = p.dtype
        if maximize:
            g = -g
        sign = jnp.sign(g * st["prev"])
        # torch overwrites sign > 0, then < 0, then == 0 in place; NaN stays NaN
        factor = jnp.where(sign > 0, jnp.asarray(etaplus, dt), sign)
        factor = jnp.where(sign < 0, jnp.asarray(etaminus, dt), factor)
        factor = jnp.where(sign == 0, jnp.ones((), dt), factor)
        step_size = jnp.clip(st["step_size"] * factor, step_size_min, step_size_max)
        g = jnp.where(sign < 0, jnp.zeros((), dt), g)  # a sign flip: no step now, no flip test next time
        new_params.append(p + (-1 * jnp.sign(g)) * step_size)
        new_states.append({"step": st["step"] + 1, "prev": g, "step_size": step_size})
    return new_params, new_states


class Rprop(Optimizer):
    """Resilient backpropagation: per-element step sizes adapted from the signs of successive gradients.

    ``lr`` is every step size's starting value (state ``step_size`` is created from it at a parameter's first
    step, as in torch; changing ``lr`` later has no effect).

    Args:
        params: parameters or param groups to optimize.
        lr: initial step size (default 1e-2).
        etas: (etaminus, etaplus), the factors a step size is multiplied by (default (0.5, 1.2)).
        step_sizes: (min, max) allowed step sizes (default (1e-6, 50)).
        capturable, foreach: accepted for torch compatibility (every group runs as one compiled program).
        maximize: maximize the objective instead of minimizing.
        differentiable: must be False.
    Raises:
        ValueError: a negative lr, or etas not with 0 < etaminus < 1 < etaplus.
    >>> opt = lf.optim.Rprop(model.parameters(), lr=0.01)
    """

    _dynamic = ("etas", "step_sizes")
    _static = ("maximize",)
    _state_keys = ("prev", "step_size")

    def __init__(
        self,
        params,
        lr: float | Tensor = 1e-2,
        etas: tuple[float, float] = (0.5, 1.2),
        step_sizes: tuple[float, float] = (1e-6, 50),
        *,
        capturable: bool = False,
        foreach: bool | None = None,
        maximize: bool = False,
        differentiable: bool = False,
    ) -> None:
        _check_lr(lr)
        if not 0.0 < etas[0] < 1.0 < etas[1]:
            raise ValueError(f"Invalid eta values: {etas[0]}, {etas[1]} (expected 0 < etaminus < 1 < etaplus)")
        _check_flags(differentiable, foreach, None)
        defaults = {
            "lr": lr,
            "etas": etas,
            "step_sizes": step_sizes,
            "foreach": foreach,
            "maximize": maximize,
            "differentiable": differentiable,
            "capturable": capturable,
        }
        super().__init__(params, defaults)

    def _new_state(self, p, group):
        lr = float(group["lr"])
        return {
            "step": _scalar_state(like=p),
            "prev": _make(_state_array(p)),
            # torch: a complex parameter is two real ones, so the imaginary part gets the initial step size too
            "step_size": _make(_state_array(p, complex(lr, lr) if p.dtype.is_complex else lr)),
        }

    def _update(self, hyper, params, grads, states):
        hyper = dict(hyper)
        etaminus, etaplus = hyper.pop("etas")
        step_size_min, step_size_max = hyper.pop("step_sizes")
        return rprop(
            params,
            grads,
            states,
            etaminus=etaminus,
            etaplus=etaplus,
            step_size_min=step_size_min,
            step_size_max=step_size_max,
            **hyper,
        )
