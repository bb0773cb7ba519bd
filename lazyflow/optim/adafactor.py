"""Adafactor (``torch.optim.Adafactor``): the class and its pure update, like torch's ``optim/_adafactor.py``.

A parameter with two or more dimensions keeps a factored second moment: ``row_var`` (its shape with the last
dimension 1) and ``col_var`` (the second-to-last dimension 1); a vector or a scalar keeps a full ``variance``. The
state names, shapes and the update follow torch 2.13's single-tensor implementation.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .._core.errors import ShapeError
from .._tensor import Tensor, _make
from ._functional import _lerp, _scalar_dtype
from .optimizer import Optimizer, _check_flags, _replicated, _scalar_state, _Tracer

__all__ = ["Adafactor", "adafactor"]


def _norm(x):
    return jnp.sqrt(jnp.sum(x * x))


def adafactor(
    params: list,
    grads: list,
    states: list[dict],
    *,
    lr,
    beta2_decay,
    d,
    weight_decay,
    eps: tuple,
    maximize: bool,
    has_weight_decay: bool,
) -> tuple[list, list]:
    """Adafactor's update, operation by operation as torch's single-tensor implementation.

    torch computes the step-dependent scalars (``step ** beta2_decay``, the relative step size, the RMS of the
    parameter and of the update) as Python floats; here they are float64 when x64 is on (else float32) and cast to
    the parameter's dtype where torch hands them to a tensor op.

    Args:
        params, grads: arrays. states: dicts with ``step`` (0-d) and ``row_var``/``col_var`` (two or more
            dimensions) or ``variance``.
        lr, beta2_decay, d, weight_decay: hyperparameters (numbers or tracers). eps: ``(eps1 or None, eps2)``.
        maximize: torch's flag. has_weight_decay: ``weight_decay != 0``.
    Returns:
        ``(new_params, new_states)``.
    """
    sd = _scalar_dtype()
    eps1_given, eps2 = eps
    new_params, new_states = [], []
    for p, g, st in zip(params, grads, states):
        dt = p.dtype
        eps1 = float(jnp.finfo(dt).eps) if eps1_given is None else eps1_given
        if maximize:
            g = -g
        step = st["step"] + 1
        s = step.astype(sd)
        one_minus_beta2_t = s ** jnp.asarray(beta2_decay, sd)
        rho_t = jnp.minimum(jnp.asarray(lr, sd), 1 / jnp.sqrt(s))
        alpha = jnp.maximum(jnp.asarray(eps2, sd), _norm(p).astype(sd) / np.sqrt(max(p.size, 1))) * rho_t
        if has_weight_decay:
            p = p * (1 - lr * weight_decay)
        w = one_minus_beta2_t.astype(dt)
        new = {"step": step}
        if g.ndim > 1:
            row_mean = jnp.square(jnp.sqrt(jnp.sum(g * g, axis=-1, keepdims=True))) / g.shape[-1]
            row_var = _lerp(st["row_var"], row_mean, w)
            col_mean = jnp.square(jnp.sqrt(jnp.sum(g * g, axis=-2, keepdims=True))) / g.shape[-2]
            col_var = _lerp(st["col_var"], col_mean, w)
            var_estimate = jnp.matmul(row_var, col_var, precision=jax.lax.Precision.HIGHEST)
            var_estimate = var_estimate / jnp.maximum(jnp.mean(row_var, axis=-2, keepdims=True), eps1)
            new.update(row_var=row_var, col_var=col_var)
        else:
            var_estimate = _lerp(st["variance"], g * g, w)
            new["variance"] = var_estimate
        update = jax.lax.rsqrt(jnp.maximum(var_estimate, eps1 * eps1)) * g
        denom = jnp.maximum(1.0, _norm(update).astype(sd) / (np.sqrt(max(update.size, 1)) * jnp.asarray(d, sd)))
        p = p + (-alpha / denom).astype(dt) * update
        new_params.append(p)
        new_states.append(new)
    return new_params, new_states


def _zeros(like: Tensor, shape: tuple[int, ...]):
    """A zero state of ``shape`` in ``like``'s dtype and placement (replicated: a factored shape would not fit the
    parameter's sharding)."""
    v = like._value
    if isinstance(v, _Tracer):
        return jnp.zeros(shape, v.dtype)
    return jax.device_put(np.zeros(shape, v.dtype), _replicated(v.sharding) if v.committed else None)


def _factor_shapes(shape: tuple[int, ...]) -> dict[str, tuple[int, ...]]:
    if len(shape) > 1:
        return {"row_var": (*shape[:-1], 1), "col_var": (*shape[:-2], 1, shape[-1])}
    return {"variance": shape}


class Adafactor(Optimizer):
    """Adafactor: a factored second moment (row and column averages) and a relative step size.

    Args:
        params: parameters or param groups to optimize.
        lr: the largest step size (default 1e-2): the step is ``min(lr, 1/sqrt(step))`` times the parameter's RMS.
        beta2_decay: the second moment's average weight is ``step ** beta2_decay`` (default -0.8).
        eps: ``(eps1, eps2)``: eps1 bounds the second moment from below (None: the dtype's machine epsilon), eps2
            the parameter RMS (default ``(None, 1e-3)``).
        d: clipping threshold of the update's RMS (default 1.0).
        weight_decay: decoupled weight decay (default 0).
        foreach: accepted for torch compatibility (every group runs as one compiled program).
        maximize: maximize the objective instead of minimizing.
    Raises:
        ValueError: lr < 0, beta2_decay > 0, a negative epsilon, d < 1 or weight_decay < 0 (torch's messages).
    >>> opt = lf.optim.Adafactor(model.parameters(), lr=1e-2)
    """

    _complex_as_real = False  # torch: "Adafactor does not support complex parameters"

    _dynamic = ("lr", "beta2_decay", "d", "weight_decay")
    _static = ("maximize",)
    _state_keys = None  # row_var/col_var are not shaped like their parameter: _load_value checks them

    def __init__(
        self,
        params,
        lr: float | Tensor = 1e-2,
        beta2_decay: float = -0.8,
        eps: tuple[float | None, float] = (None, 1e-3),
        d: float = 1.0,
        weight_decay: float = 0.0,
        *,
        foreach: bool | None = None,
        maximize: bool = False,
    ) -> None:
        if isinstance(lr, Tensor) and lr.numel() != 1:
            raise ValueError(f"Tensor lr must be 1-element, got shape {list(lr.shape)}")
        if not 0.0 <= lr:
            raise ValueError(f"Learning rate should be >= 0 but is: {lr}")
        if not 0.0 >= beta2_decay:
            raise ValueError(f"beta2_decay should be <= 0 but is: {beta2_decay}")
        if not isinstance(eps, (tuple, list)) or len(eps) != 2:
            raise ValueError(f"eps must be a pair (eps1 or None, eps2), got {eps!r}")
        if eps[0] is not None and not 0.0 <= eps[0]:
            raise ValueError(f"epsilon1 should be >= 0 but is: {eps[0]}")
        if not 0.0 <= eps[1]:
            raise ValueError(f"epsilon2 should be >= 0 but is: {eps[1]}")
        if not 1.0 <= d:
            raise ValueError(f"Clipping threshold d should be >= 1 but is: {d}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"weight_decay should be >= 0 but is: {weight_decay}")
        _check_flags(False, foreach, None)
        defaults = {
            "lr": lr,
            "beta2_decay": beta2_decay,
            "eps": eps,
            "d": d,
            "weight_decay": weight_decay,
            "foreach": foreach,
            "maximize": maximize,
        }
        super().__init__(params, defaults)

    def _new_state(self, p, group):
        state = {"step": _scalar_state(like=p)}
        for name, shape in _factor_shapes(tuple(p.shape)).items():
            state[name] = _make(_zeros(p, shape))
        return state

    def _derived_static(self, group: dict) -> dict[str, Any]:
        # eps holds None (eps1 from the dtype): a static flag, as a tuple (a loaded group may hold a list)
        return {"has_weight_decay": bool(group["weight_decay"] != 0), "eps": tuple(group["eps"])}

    def _update(self, hyper, params, grads, states):
        return adafactor(params, grads, states, **hyper)

    def _load_value(self, p: Tensor, index, name, value):
        if name != "step":
            expected = _factor_shapes(tuple(p.shape))
            if name not in expected:
                raise ValueError(
                    f"loaded state of parameter {index} has an entry {name!r} that Adafactor does not use for a "
                    f"parameter of shape {list(p.shape)} (expected names: {['step', *expected]})"
                )
            shape = tuple(np.shape(value._value if isinstance(value, Tensor) else value))
            if shape != expected[name]:
                raise ShapeError(
                    f"loaded optimizer state {name!r} of parameter {index} has shape {list(shape)}, but Adafactor "
                    f"keeps {list(expected[name])} for a parameter of shape {list(p.shape)}"
                )
        return super()._load_value(p, index, name, value)
