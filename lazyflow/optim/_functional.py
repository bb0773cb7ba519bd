"""Pure optimizer updates over lists of JAX arrays (torch's ``torch.optim._functional``).

Each function takes the parameters, gradients and per-parameter state dicts of one parameter group and
returns ``(new_params, new_states)``; it never mutates anything, so the eager ``Optimizer.step`` jits it as
one program per group and graph mode traces it inside a training step unchanged. Hyperparameters may be
Python numbers or JAX tracers; the keyword-only booleans are static Python flags.

The arithmetic follows torch's single-tensor CPU implementations operation by operation (same order of
multiplications and additions, same ``lerp`` formula), and scalar bias corrections are computed in float64
where JAX's x64 mode is on, like torch computes them in Python floats, so results track torch's closely.
"""

from __future__ import annotations

import jax.numpy as jnp

from .._core.config import x64_enabled

__all__ = ["sgd", "adam", "rmsprop", "adagrad"]


def _scalar_dtype():
    """The dtype of scalar hyperparameter math: float64 when x64 is on (torch uses Python floats)."""
    return jnp.float64 if x64_enabled() else jnp.float32


def _lerp(start, end, weight):
    """torch's CPU ``lerp``: ``start + w * (end - start)`` when ``|w| < 0.5``, else ``end - (end - start) *
    (1 - w)`` (accurate near both ends). ``weight`` is a scalar, so the choice is made on scalars and
    the arrays see one select: ``end - d * (1 - w) == end + d * (w - 1)`` exactly (negation is exact)."""
    small = jnp.abs(weight) < 0.5
    diff = end - start
    return jnp.where(small, start, end) + jnp.where(small, weight, weight - 1) * diff


def sgd(
    params: list,
    grads: list,
    states: list[dict],
    *,
    lr,
    momentum,
    dampening,
    weight_decay,
    nesterov: bool,
    maximize: bool,
    has_momentum: bool,
    has_weight_decay: bool,
) -> tuple[list, list]:
    """SGD with optional momentum, dampening, Nesterov momentum and L2 weight decay.

    The first step of a parameter without ``"momentum_buffer"`` state initialises the buffer to the
    gradient (torch's lazy buffer); the returned state then has the key.

    Args:
        params: parameter arrays. grads: their gradients. states: per-parameter state dicts.
        lr, momentum, dampening, weight_decay: hyperparameters (numbers or tracers).
        nesterov, maximize: torch's flags. has_momentum: ``momentum != 0``.
        has_weight_decay: ``weight_decay != 0``.
    Returns:
        ``(new_params, new_states)``.
    """
    new_params, new_states = [], []
    for p, g, st in zip(params, grads, states):
        if maximize:
            g = -g
        if has_weight_decay:
            g = g + weight_decay * p
        st = dict(st)
        if has_momentum:
            buf = st.get("momentum_buffer")
            buf = g if buf is None else buf * momentum + (1 - dampening) * g
            st["momentum_buffer"] = buf
            g = g + momentum * buf if nesterov else buf
        new_params.append(p - lr * g)
        new_states.append(st)
    return new_params, new_states


def adam(
    params: list,
    grads: list,
    states: list[dict],
    *,
    lr,
    beta1,
    beta2,
    eps,
    weight_decay,
    amsgrad: bool,
    maximize: bool,
    decoupled_weight_decay: bool,
    has_weight_decay: bool,
) -> tuple[list, list]:
    """Adam (and AdamW with ``decoupled_weight_decay=True``), with optional AMSGrad.

    Args:
        params, grads: arrays. states: dicts with ``step``, ``exp_avg``, ``exp_avg_sq`` and, with amsgrad,
            ``max_exp_avg_sq``.
        lr, beta1, beta2, eps, weight_decay: hyperparameters (numbers or tracers).
        amsgrad, maximize, decoupled_weight_decay: torch's flags. has_weight_decay: ``weight_decay != 0``.
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
            if decoupled_weight_decay:
                p = p * (1 - lr * weight_decay)
            else:
                g = g + weight_decay * p
        exp_avg = _lerp(st["exp_avg"], g, 1 - beta1)
        exp_avg_sq = st["exp_avg_sq"] * beta2 + (1 - beta2) * g * g
        s = step.astype(sd)
        bias_correction1 = 1 - jnp.asarray(beta1, sd) ** s
        bias_correction2 = 1 - jnp.asarray(beta2, sd) ** s
        step_size = (lr / bias_correction1).astype(dt)
        bias_correction2_sqrt = jnp.sqrt(bias_correction2).astype(dt)
        new = {"step": step, "exp_avg": exp_avg, "exp_avg_sq": exp_avg_sq}
        if amsgrad:
            second = jnp.maximum(st["max_exp_avg_sq"], exp_avg_sq)
            new["max_exp_avg_sq"] = second
        else:
            second = exp_avg_sq
        denom = jnp.sqrt(second) / bias_correction2_sqrt + eps
        new_params.append(p + (-step_size) * exp_avg / denom)
        new_states.append(new)
    return new_params, new_states


def rmsprop(
    params: list,
    grads: list,
    states: list[dict],
    *,
    lr,
    alpha,
    eps,
    weight_decay,
    momentum,
    centered: bool,
    maximize: bool,
    has_momentum: bool,
    has_weight_decay: bool,
) -> tuple[list, list]:
    """RMSprop with optional momentum and centering.

    Args:
        params, grads: arrays. states: dicts with ``step``, ``square_avg``, plus ``momentum_buffer`` when
            ``momentum > 0`` and ``grad_avg`` when centered.
        lr, alpha, eps, weight_decay, momentum: hyperparameters (numbers or tracers).
        centered, maximize: torch's flags. has_momentum: ``momentum > 0``.
        has_weight_decay: ``weight_decay != 0``.
    Returns:
        ``(new_params, new_states)``.
    """
    new_params, new_states = [], []
    for p, g, st in zip(params, grads, states):
        if maximize:
            g = -g
        new = dict(st)
        new["step"] = st["step"] + 1
        if has_weight_decay:
            g = g + weight_decay * p
        square_avg = st["square_avg"] * alpha + (1 - alpha) * g * g
        new["square_avg"] = square_avg
        if centered:
            grad_avg = _lerp(st["grad_avg"], g, 1 - alpha)
            new["grad_avg"] = grad_avg
            avg = jnp.sqrt(square_avg + (-1) * grad_avg * grad_avg)
        else:
            avg = jnp.sqrt(square_avg)
        avg = avg + eps
        if has_momentum:
            buf = st["momentum_buffer"] * momentum + g / avg
            new["momentum_buffer"] = buf
            p = p + (-lr) * buf
        else:
            p = p + (-lr) * g / avg
        new_params.append(p)
        new_states.append(new)
    return new_params, new_states


def adagrad(
    params: list,
    grads: list,
    states: list[dict],
    *,
    lr,
    lr_decay,
    weight_decay,
    eps,
    maximize: bool,
    has_weight_decay: bool,
) -> tuple[list, list]:
    """Adagrad with learning-rate decay.

    Args:
        params, grads: arrays. states: dicts with ``step`` and ``sum``.
        lr, lr_decay, weight_decay, eps: hyperparameters (numbers or tracers).
        maximize: torch's flag. has_weight_decay: ``weight_decay != 0``.
    Returns:
        ``(new_params, new_states)``.
    """
    sd = _scalar_dtype()
    new_params, new_states = [], []
    for p, g, st in zip(params, grads, states):
        step = st["step"] + 1
        if maximize:
            g = -g
        if has_weight_decay:
            g = g + weight_decay * p
        clr = (lr / (1 + (step.astype(sd) - 1) * lr_decay)).astype(p.dtype)
        total = st["sum"] + g * g
        std = jnp.sqrt(total) + eps
        new_params.append(p + (-clr) * g / std)
        new_states.append({"step": step, "sum": total})
    return new_params, new_states
