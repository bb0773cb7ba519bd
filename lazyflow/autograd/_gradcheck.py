"""``gradcheck`` / ``gradgradcheck``: the tape's gradients against central finite differences (torch's checks).

Every differentiable input (a floating Tensor that requires grad) is perturbed element by element by ``+-eps``
(``fast_mode``: along one random direction), giving the numerical Jacobian of every floating output; the analytical
one comes from ``lf.autograd.grad`` with one-hot (``fast_mode``: random) output gradients. They must agree within
``atol + rtol * |numerical|``, as ``torch.allclose`` decides. Use float64 inputs: with float32 the differences of
an ``eps=1e-6`` step are mostly rounding.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from .._core.context import state
from .._core.errors import ArgumentError, LazyflowError
from .._tensor import Tensor, _make
from .function import grad as _grad

__all__ = ["gradcheck", "gradgradcheck", "GradcheckError"]


class GradcheckError(LazyflowError, RuntimeError):
    """The analytical and numerical Jacobians differ (torch's ``torch.autograd.gradcheck.GradcheckError``)."""


def _as_tuple(x) -> tuple:
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def _outputs(func, args) -> list:
    return [o for o in _as_tuple(func(*args)) if isinstance(o, Tensor) and o.dtype.is_floating_point]


def _evaluate(func, inputs, i: int, new_value) -> list[np.ndarray]:
    args = list(inputs)
    args[i] = _make(new_value).requires_grad_(inputs[i].requires_grad)  # func may differentiate (gradgradcheck)
    return [np.asarray(o._value, np.float64).ravel() for o in _outputs(func, args)]


def _numerical(func, inputs, diff, eps: float, direction=None) -> list[list[np.ndarray]]:
    """``J[o][k]``: the Jacobian of output o w.r.t. differentiable input ``diff[k]`` (rows: output elements), or with
    ``direction`` (one vector per input) the directional derivative of each output, as a column."""
    jac: list[list] = []
    for k, i in enumerate(diff):
        x = inputs[i]._value
        flat = np.asarray(x).ravel()
        if direction is not None:
            u = direction[k].reshape(x.shape).astype(x.dtype)
            plus, minus = _evaluate(func, inputs, i, x + eps * u), _evaluate(func, inputs, i, x - eps * u)
            cols = [((p - m) / (2 * eps))[:, None] for p, m in zip(plus, minus)]
        else:
            cols_per_out: list[list] | None = None
            for j in range(flat.size):
                d = np.zeros(flat.size, np.asarray(x).dtype)
                d[j] = eps
                d = jnp.asarray(d.reshape(x.shape))
                plus, minus = _evaluate(func, inputs, i, x + d), _evaluate(func, inputs, i, x - d)
                if cols_per_out is None:
                    cols_per_out = [[] for _ in plus]
                for o, (p, m) in enumerate(zip(plus, minus)):
                    cols_per_out[o].append((p - m) / (2 * eps))
            if cols_per_out is None:  # an empty input
                cols = [np.zeros((int(np.prod(s)), 0)) for s in _outputs_shape(func, inputs)]
            else:
                cols = [np.stack(c, axis=1) for c in cols_per_out]
        for o, c in enumerate(cols):
            if len(jac) <= o:
                jac.append([None] * len(diff))
            jac[o][k] = c
    return jac


def _outputs_shape(func, inputs):
    prev = state.grad_enabled
    state.grad_enabled = False
    try:
        return [tuple(o.shape) for o in _outputs(func, inputs)]
    finally:
        state.grad_enabled = prev


def _analytical(func, inputs, diff, vectors=None) -> list[list[np.ndarray]]:
    """Rows of the Jacobian from the tape (or, with ``vectors`` per output, one vector-Jacobian row per output)."""
    outs = _outputs(func, inputs)
    xs = [inputs[i] for i in diff]
    jac = []
    for o_idx, o in enumerate(outs):
        n = int(np.prod(o.shape))
        rows: list[list] = [[] for _ in diff]
        units = [vectors[o_idx]] if vectors is not None else [np.eye(n, dtype=np.float64)[r] for r in range(n)]
        for u in units:
            if not o._rg:
                gs = [None] * len(xs)
            else:
                go = _make(jnp.asarray(u.reshape(o.shape), o._value.dtype))
                gs = _grad(o, xs, grad_outputs=[go], retain_graph=True, allow_unused=True)
            for k, (g, x) in enumerate(zip(gs, xs)):
                size = int(np.prod(x.shape))
                rows[k].append(np.zeros(size) if g is None else np.asarray(g._value, np.float64).ravel())
        jac.append([np.stack(r) if r else np.zeros((0, int(np.prod(x.shape)))) for r, x in zip(rows, xs)])
    return jac


def _fail(msg: str, raise_exception: bool) -> bool:
    if raise_exception:
        raise GradcheckError(msg)
    return False


def gradcheck(
    func,
    inputs,
    *,
    eps: float = 1e-6,
    atol: float = 1e-5,
    rtol: float = 1e-3,
    raise_exception: bool = True,
    nondet_tol: float = 0.0,
    check_undefined_grad: bool = True,
    check_grad_dtypes: bool = False,
    check_batched_grad: bool = False,
    check_batched_forward_grad: bool = False,
    check_forward_ad: bool = False,
    check_backward_ad: bool = True,
    fast_mode: bool = False,
    masked: bool | None = None,
) -> bool:
    """Check the gradients of ``func(*inputs)`` against finite differences (``torch.autograd.gradcheck``).

    Args:
        func: takes the inputs, returns a Tensor or a tuple of Tensors.
        inputs: a Tensor or a tuple of arguments; the floating Tensors that require grad are checked.
        eps, atol, rtol: the finite-difference step and the tolerance ``|a - n| <= atol + rtol * |n|``.
        raise_exception: raise :class:`GradcheckError` on a mismatch (else return False).
        fast_mode: compare ``v^T J u`` for random ``u``, ``v`` instead of whole Jacobians (one pair of evaluations
            per input instead of one per element).
        nondet_tol, check_undefined_grad, check_grad_dtypes, check_batched_grad, check_batched_forward_grad,
        check_forward_ad, masked: accepted for torch's signature; lazyflow checks reverse mode only.
    Returns:
        True when every Jacobian matches.
    Raises:
        GradcheckError: a mismatch (names the output and input index), or no input requires grad.
        ArgumentError: ``check_forward_ad=True`` or ``check_backward_ad=False`` (only reverse mode is checked).
    """
    if check_forward_ad or not check_backward_ad:
        raise ArgumentError(
            "gradcheck: lazyflow checks reverse-mode gradients only; pass check_forward_ad=False, "
            "check_backward_ad=True"
        )
    inputs = _as_tuple(inputs)
    diff = [i for i, a in enumerate(inputs) if isinstance(a, Tensor) and a.requires_grad and a.dtype.is_floating_point]
    if not diff:
        raise GradcheckError(
            "gradcheck expects at least one input tensor to require gradient, but none of them have requires_grad=True"
        )
    if fast_mode:
        rng = np.random.default_rng(0)
        us = [rng.standard_normal(int(np.prod(inputs[i].shape))) for i in diff]
        vs = [rng.standard_normal(int(np.prod(s))) for s in _outputs_shape(func, inputs)]
        num = _numerical(func, inputs, diff, eps, direction=us)
        ana = _analytical(func, inputs, diff, vectors=vs)
        for o, (nrow, arow) in enumerate(zip(num, ana)):
            for k in range(len(diff)):
                n_val = float(vs[o] @ nrow[k][:, 0]) if nrow[k].size else 0.0
                a_val = float(arow[k][0] @ us[k]) if arow[k].size else 0.0
                if not abs(a_val - n_val) <= atol + rtol * abs(n_val):
                    return _fail(
                        f"Jacobian mismatch for output {o} with respect to input {diff[k]} (fast mode, v^T J u),\n"
                        f"numerical:{n_val}\nanalytical:{a_val}\n",
                        raise_exception,
                    )
        return True
    num = _numerical(func, inputs, diff, eps)
    ana = _analytical(func, inputs, diff)
    for o, (nrow, arow) in enumerate(zip(num, ana)):
        for k in range(len(diff)):
            n, a = nrow[k], arow[k]
            if n.shape != a.shape:
                n = n.reshape(a.shape)
            if not np.all(np.abs(a - n) <= atol + rtol * np.abs(n)):
                return _fail(
                    f"Jacobian mismatch for output {o} with respect to input {diff[k]},\nnumerical:{n}\n"
                    f"analytical:{a}\n",
                    raise_exception,
                )
    return True


def gradgradcheck(
    func,
    inputs,
    grad_outputs=None,
    *,
    eps: float = 1e-6,
    atol: float = 1e-5,
    rtol: float = 1e-3,
    gen_non_contig_grad_outputs: bool = False,
    raise_exception: bool = True,
    nondet_tol: float = 0.0,
    check_undefined_grad: bool = True,
    check_grad_dtypes: bool = False,
    check_batched_grad: bool = False,
    check_fwd_over_rev: bool = False,
    check_rev_over_rev: bool = True,
    fast_mode: bool = False,
    masked: bool = False,
) -> bool:
    """Check second derivatives (``torch.autograd.gradgradcheck``): :func:`gradcheck` of the map
    ``(inputs, grad_outputs) -> lf.autograd.grad(func(inputs), inputs, grad_outputs, create_graph=True)``.

    ``grad_outputs`` defaults to fixed pseudo-random tensors (requiring grad) shaped like the outputs.
    """
    inputs = _as_tuple(inputs)
    diff = [i for i, a in enumerate(inputs) if isinstance(a, Tensor) and a.requires_grad and a.dtype.is_floating_point]
    shapes = _outputs_shape(func, inputs)
    if grad_outputs is None:
        keys = jax.random.split(jax.random.PRNGKey(0), max(len(shapes), 1))
        outs = _outputs(func, inputs)
        grad_outputs = tuple(
            _make(jax.random.normal(k, s, o._value.dtype)).requires_grad_(True) for k, s, o in zip(keys, shapes, outs)
        )
    grad_outputs = _as_tuple(grad_outputs)
    n_go = len(grad_outputs)

    def new_func(*args):
        xs, gos = args[: len(args) - n_go], args[len(args) - n_go :]
        outs = [o for o in _outputs(func, xs) if o._rg]
        gos = [g for g, o in zip(gos, _outputs(func, xs)) if o._rg]
        if not outs:
            return ()
        gs = _grad(outs, [xs[i] for i in diff], grad_outputs=gos, create_graph=True, allow_unused=True)
        return tuple(g for g in gs if g is not None)

    return gradcheck(
        new_func,
        inputs + grad_outputs,
        eps=eps,
        atol=atol,
        rtol=rtol,
        raise_exception=raise_exception,
        nondet_tol=nondet_tol,
        fast_mode=fast_mode,
    )
