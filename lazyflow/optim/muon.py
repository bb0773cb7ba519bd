"""Muon (``torch.optim.Muon``): momentum orthogonalized by a Newton-Schulz iteration, like torch's ``optim/_muon.py``.

The iteration runs in bfloat16 as torch's does (each matmul accumulates in float32 and rounds to bfloat16, as
torch's CPU ``addmm`` does), so lazyflow and torch agree to bfloat16's precision on the update, exactly on the
momentum buffer.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from .._core.errors import ShapeError
from .._tensor import Tensor, _make
from ._functional import _lerp
from .optimizer import Optimizer, _state_array

__all__ = ["Muon", "muon", "zeropower_via_newtonschulz"]

EPS = 1e-7
DEFAULT_A, DEFAULT_B, DEFAULT_C = 3.4445, -4.7750, 2.0315
DEFAULT_NS_STEPS = 5


def _mm(a, b):
    return jnp.matmul(a, b, preferred_element_type=jnp.float32, precision=jax.lax.Precision.HIGHEST)


def _bf16(x) -> jax.Array:
    """``x`` rounded to bfloat16 where torch rounds: XLA may otherwise keep a fused intermediate in float32 (it
    allows excess precision), and the iteration amplifies that difference; ``reduce_precision`` is kept."""
    return jax.lax.reduce_precision(x.astype(jnp.float32), exponent_bits=8, mantissa_bits=7).astype(jnp.bfloat16)


def zeropower_via_newtonschulz(grad, ns_coefficients: tuple, ns_steps: int, eps) -> jax.Array:
    """The quintic Newton-Schulz iteration (torch's ``_zeropower_via_newtonschulz``): about ``U V^T`` of ``grad``'s
    SVD, in bfloat16.

    Raises:
        ValueError: ``ns_steps >= 100``, ``grad`` not 2-D, or not three coefficients (torch's checks).
    """
    if ns_steps >= 100:
        raise ValueError(f"Number of steps must be less than 100 for computational efficiency, got {ns_steps}")
    if grad.ndim != 2:
        raise ValueError(f"Input tensor gradient must be a 2D matrix, got shape {list(grad.shape)}")
    if len(ns_coefficients) != 3:
        raise ValueError(f"Coefficients must be a tuple of exactly 3 values, got {ns_coefficients!r}")
    a, b, c = ns_coefficients
    x = _bf16(grad)
    tall = grad.shape[0] > grad.shape[1]
    if tall:
        x = x.T
    norm = _bf16(jnp.sqrt(jnp.sum(jnp.square(x.astype(jnp.float32)))))
    x = _bf16(x.astype(jnp.float32) / jnp.maximum(norm, _bf16(jnp.asarray(eps, jnp.float32))).astype(jnp.float32))
    for _ in range(ns_steps):
        gram = _bf16(_mm(x, x.T))
        gram_update = _bf16(b * gram.astype(jnp.float32) + c * _mm(gram, gram))
        x = _bf16(a * x.astype(jnp.float32) + _mm(gram_update, x))
    return x.T if tall else x


def _adjust_lr(lr, adjust_lr_fn: str | None, shape: tuple[int, ...]):
    rows, cols = shape[:2]
    if adjust_lr_fn is None or adjust_lr_fn == "original":
        ratio = math.sqrt(max(1, rows / cols))
    elif adjust_lr_fn == "match_rms_adamw":
        ratio = 0.2 * math.sqrt(max(rows, cols))
    else:
        ratio = 1.0
    return lr * ratio


def muon(
    params: list,
    grads: list,
    states: list[dict],
    *,
    lr,
    weight_decay,
    momentum,
    nesterov: bool,
    ns_coefficients,
    eps,
    ns_steps: int,
    adjust_lr_fn: str | None,
) -> tuple[list, list]:
    """Muon's update, operation by operation as torch's single-tensor implementation.

    Args:
        params, grads: 2-D arrays. states: dicts with ``momentum_buffer``.
        lr, weight_decay, momentum, ns_coefficients, eps: hyperparameters (numbers or tracers).
        nesterov, ns_steps, adjust_lr_fn: torch's flags.
    Returns:
        ``(new_params, new_states)``.
    Raises:
        ValueError: a gradient that is not 2-D.
    """
    new_params, new_states = [], []
    for p, g, st in zip(params, grads, states):
        if g.ndim != 2:
            raise ValueError(f"Param gradient must be a 2D matrix, got shape {list(g.shape)}")
        dt = p.dtype
        buf = _lerp(st["momentum_buffer"], g, jnp.asarray(1 - momentum, dt))
        update = _lerp(g, buf, jnp.asarray(momentum, dt)) if nesterov else buf
        update = zeropower_via_newtonschulz(update, ns_coefficients, ns_steps, eps)
        adjusted = _adjust_lr(lr, adjust_lr_fn, tuple(p.shape))
        p = p * jnp.asarray(1 - lr * weight_decay, dt)
        p = p + jnp.asarray(-adjusted, dt) * update.astype(dt)
        new_params.append(p)
        new_states.append({"momentum_buffer": buf})
    return new_params, new_states


class Muon(Optimizer):
    """Muon: SGD momentum whose update is orthogonalized (Newton-Schulz), for the 2-D weights of hidden layers.

    Args:
        params: 2-D parameters or param groups of them (optimize biases and embeddings with e.g. AdamW).
        lr: learning rate (default 1e-3).
        weight_decay: decoupled weight decay (default 0.1).
        momentum: momentum factor (default 0.95).
        nesterov: Nesterov momentum (default True).
        ns_coefficients: the iteration's coefficients ``(a, b, c)`` (default Keller Jordan's).
        eps: lower bound of the norm the gradient is divided by (default 1e-7).
        ns_steps: Newton-Schulz iterations (default 5; fewer than 100).
        adjust_lr_fn: ``None``/``"original"`` (``sqrt(max(1, rows/cols))``) or ``"match_rms_adamw"``
            (``0.2 * sqrt(max(rows, cols))``).
    Raises:
        ValueError: lr, momentum or weight_decay < 0, an unknown ``adjust_lr_fn``, or a parameter that is not 2-D
            (torch's messages).
    >>> opt = lf.optim.Muon([p for p in model.parameters() if p.ndim == 2], lr=0.02)
    """

    _complex_as_real = False  # torch: "Muon does not support complex parameters"

    _dynamic = ("lr", "weight_decay", "momentum", "ns_coefficients", "eps")
    _static = ("nesterov", "ns_steps", "adjust_lr_fn")
    _state_keys = ("momentum_buffer",)
    _scalar_state_keys = ()

    def __init__(
        self,
        params,
        lr: float = 1e-3,
        weight_decay: float = 0.1,
        momentum: float = 0.95,
        nesterov: bool = True,
        ns_coefficients: tuple[float, float, float] = (DEFAULT_A, DEFAULT_B, DEFAULT_C),
        eps: float = EPS,
        ns_steps: int = DEFAULT_NS_STEPS,
        adjust_lr_fn: str | None = None,
    ) -> None:
        if isinstance(lr, Tensor) and lr.numel() != 1:
            raise ValueError(f"Tensor lr must be 1-element, got shape {list(lr.shape)}")
        if not 0.0 <= lr:
            raise ValueError(f"Learning rate should be >= 0 but is: {lr}")
        if not 0.0 <= momentum:
            raise ValueError(f"momentum should be >= 0 but is: {momentum}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"weight decay should be >= 0 but is: {weight_decay}")
        if adjust_lr_fn is not None and adjust_lr_fn not in ("original", "match_rms_adamw"):
            raise ValueError(
                f"Adjust learning rate function {adjust_lr_fn} is not supported (expected None, 'original' or "
                "'match_rms_adamw')"
            )
        defaults = {
            "lr": lr,
            "weight_decay": weight_decay,
            "momentum": momentum,
            "nesterov": nesterov,
            "ns_coefficients": ns_coefficients,
            "eps": eps,
            "ns_steps": ns_steps,
            "adjust_lr_fn": adjust_lr_fn,
        }
        super().__init__(params, defaults)
        for group in self.param_groups:
            for p in group["params"]:
                if p.ndim != 2:
                    raise ValueError(
                        f"Muon only supports 2D parameters whereas we found a parameter with size: {list(p.shape)}; "
                        "optimize the others with e.g. lf.optim.AdamW"
                    )

    def _new_state(self, p, group):
        return {"momentum_buffer": _make(_state_array(p))}

    def _update(self, hyper, params, grads, states):
        return muon(params, grads, states, **hyper)

    def _load_value(self, p: Tensor, index, name, value):
        if name == "momentum_buffer" and p.ndim != 2:
            raise ShapeError(f"Muon state for parameter {index}: the parameter must be 2-D, got {list(p.shape)}")
        return super()._load_value(p, index, name, value)
