"""``lf.autograd.functional``: Jacobians, Hessians and vector products of a function of tensors, on the tape
(``torch.autograd.functional``: the same names, arguments, result structure and ``strict`` errors).

``inputs`` is a Tensor or a tuple of Tensors; each is detached and made to require grad (with ``create_graph``, a
copy that stays connected to the input's graph), so results are differentiable again only with ``create_graph``.
``jvp`` and ``hvp`` use the double-backward trick, as torch does. ``vectorize`` and the forward-mode strategies are
accepted and give the same values (lazyflow computes the rows one backward at a time).
"""

from __future__ import annotations

import jax.numpy as jnp

from .._core.errors import ArgumentError, AutogradError
from .._functional.shape import stack
from .._tensor import Tensor, _make
from .function import grad as _grad
from .grad_mode import enable_grad

__all__ = ["vjp", "jvp", "jacobian", "hessian", "vhp", "hvp"]


def _pair_grads(pairs, xs, create_graph):
    """Gradients w.r.t. ``xs`` of the sum of ``<output, v>`` over ``(output, v)`` pairs; None per input when no
    output requires a gradient."""
    if not pairs:
        return (None,) * len(xs)
    outs, vs = zip(*pairs)
    return _grad(list(outs), xs, grad_outputs=list(vs), create_graph=create_graph, allow_unused=True, retain_graph=True)


def _as_tuple(x, arg: str, fn: str) -> tuple[bool, tuple]:
    is_tuple = isinstance(x, (tuple, list))
    xs = tuple(x) if is_tuple else (x,)
    for i, t in enumerate(xs):
        if not isinstance(t, Tensor):
            raise ArgumentError(
                f"The {arg} given to {fn} must be either a Tensor or a tuple of Tensors but the value at index {i} "
                f"has type {type(t).__name__}."
            )
    return is_tuple, xs


def _prep(xs, create_graph: bool) -> tuple:
    out = []
    for x in xs:
        if create_graph and x.requires_grad:
            out.append(x.view_as(x))
        else:
            out.append(x.detach().requires_grad_(True))
    return tuple(out)


def _post(xs, create_graph: bool, is_tuple: bool):
    res = tuple(None if x is None else (x if create_graph else x.detach()) for x in xs)
    return res if is_tuple else res[0]


def _fill(gs, refs, strict: bool, what: str, create_graph: bool) -> tuple:
    out = []
    for i, (g, r) in enumerate(zip(gs, refs)):
        if g is None:
            if strict:
                raise AutogradError(
                    f"The {what} for input {i} is independent of the output of the user-provided function: this is "
                    "not allowed in strict mode (pass strict=False to get zeros)"
                )
            g = _make(jnp.zeros(tuple(r.shape), r._value.dtype))
        out.append(g)
    return tuple(out)


def _call(func, inputs, fn: str):
    out = func(*inputs)
    is_tuple, outs = _as_tuple(out, "outputs of the user-provided function", fn)
    return is_tuple, outs


def vjp(func, inputs, v=None, create_graph: bool = False, strict: bool = False):
    """``(func(inputs), v^T J)``: the vector-Jacobian product at ``inputs`` (``torch.autograd.functional.vjp``).

    Raises:
        AutogradError: ``v`` omitted for a non-scalar output, or (``strict``) an input the output does not use.
        ArgumentError: inputs or outputs that are not Tensors.
    """
    with enable_grad():
        in_tuple, xs = _as_tuple(inputs, "inputs", "vjp")
        xs = _prep(xs, create_graph)
        out_tuple, outs = _call(func, xs, "vjp")
        if v is None:
            if len(outs) != 1 or outs[0].numel() != 1:
                raise AutogradError(
                    "The vector v can only be None if the user-provided function returns a single Tensor with a "
                    "single element."
                )
            vs = (None,)
        else:
            _, vs = _as_tuple(v, "v", "vjp")
            if len(vs) != len(outs):
                raise AutogradError(f"v has {len(vs)} tensors but the function returned {len(outs)} outputs")
            for i, (a, o) in enumerate(zip(vs, outs)):
                if tuple(a.shape) != tuple(o.shape):
                    raise AutogradError(
                        f"Mismatch in shape: output {i} has a shape of {list(o.shape)} and v has a shape of "
                        f"{list(a.shape)}: give v the outputs' shapes"
                    )
        live = [(o, g) for o, g in zip(outs, vs) if o.requires_grad]
        gs = _pair_grads(live, xs, create_graph)
        if strict and not live:
            raise AutogradError("The output of the user-provided function does not require gradients (strict mode)")
        gs = _fill(gs, xs, strict, "gradient", create_graph)
    return _post(outs, create_graph, out_tuple), _post(gs, create_graph, in_tuple)


def jvp(func, inputs, v=None, create_graph: bool = False, strict: bool = False):
    """``(func(inputs), J v)``: the Jacobian-vector product, by the double-backward trick
    (``torch.autograd.functional.jvp``)."""
    with enable_grad():
        in_tuple, xs = _as_tuple(inputs, "inputs", "jvp")
        xs = _prep(xs, create_graph)
        if v is None:
            if len(xs) != 1 or xs[0].numel() != 1:
                raise AutogradError(
                    "The vector v can only be None if the input to the user-provided function is a single Tensor "
                    "with a single element."
                )
            vs = (_make(jnp.ones(tuple(xs[0].shape), xs[0]._value.dtype)),)
        else:
            _, vs = _as_tuple(v, "v", "jvp")
            if len(vs) != len(xs) or any(tuple(a.shape) != tuple(x.shape) for a, x in zip(vs, xs)):
                raise AutogradError("v must have one tensor per input, with that input's shape")
        out_tuple, outs = _call(func, xs, "jvp")
        dummies = tuple(_make(jnp.zeros(tuple(o.shape), o._value.dtype)).requires_grad_(True) for o in outs)
        live = [(o, d) for o, d in zip(outs, dummies) if o.requires_grad]
        if not live:
            if strict:
                raise AutogradError("The output of the user-provided function does not require gradients (strict mode)")
            res = tuple(_make(jnp.zeros(tuple(o.shape), o._value.dtype)) for o in outs)
            return _post(outs, create_graph, out_tuple), _post(res, create_graph, out_tuple)
        g1 = _grad(
            [o for o, _ in live],
            xs,
            grad_outputs=[d for _, d in live],
            create_graph=True,
            allow_unused=True,
            retain_graph=True,
        )
        pairs = [(g, a) for g, a in zip(g1, vs) if g is not None]
        if not pairs:
            gs: tuple = (None,) * len(outs)
        else:
            gs = _grad(
                [g for g, _ in pairs],
                list(dummies),
                grad_outputs=[a for _, a in pairs],
                create_graph=create_graph,
                allow_unused=True,
                retain_graph=True,
            )
        gs = _fill(gs, outs, strict, "jvp", create_graph)
    return _post(outs, create_graph, out_tuple), _post(gs, create_graph, out_tuple)


def jacobian(
    func,
    inputs,
    create_graph: bool = False,
    strict: bool = False,
    vectorize: bool = False,
    strategy: str = "reverse-mode",
):
    """The Jacobian of ``func`` at ``inputs`` (``torch.autograd.functional.jacobian``): for one input and one
    output a Tensor of shape ``output.shape + input.shape``; tuples (of tuples) when either is a tuple.

    Raises:
        ArgumentError: ``strategy`` is not "reverse-mode"/"forward-mode", or forward-mode without ``vectorize``.
        AutogradError: (``strict``) an output independent of an input.
    """
    if strategy not in ("reverse-mode", "forward-mode"):
        raise ArgumentError(f'Expected strategy to be either "forward-mode" or "reverse-mode", got {strategy!r}.')
    if strategy == "forward-mode" and not vectorize:
        raise ArgumentError(
            'torch.autograd.functional.jacobian: `strategy="forward-mode"` is only implemented for `vectorize=True`'
        )
    with enable_grad():
        in_tuple, xs = _as_tuple(inputs, "inputs", "jacobian")
        xs = _prep(xs, create_graph)
        out_tuple, outs = _call(func, xs, "jacobian")
        per_out = []
        for i, o in enumerate(outs):
            n = o.numel()
            rows: list[list] = [[] for _ in xs]
            flat = o.reshape(-1)
            for j in range(n):
                if o.requires_grad:
                    gs = _grad(flat[j], xs, retain_graph=True, create_graph=create_graph, allow_unused=True)
                else:
                    gs = (None,) * len(xs)
                for k, (g, x) in enumerate(zip(gs, xs)):
                    if g is None:
                        if strict:
                            raise AutogradError(
                                f"Output {i} of the user-provided function is independent of input {k}. This is not "
                                "allowed in strict mode."
                            )
                        g = _make(jnp.zeros(tuple(x.shape), x._value.dtype))
                    rows[k].append(g)
            jac = []
            for k, x in enumerate(xs):
                shape = tuple(o.shape) + tuple(x.shape)
                if rows[k]:
                    jac.append(stack(rows[k]).reshape(shape))
                else:
                    jac.append(_make(jnp.zeros(shape, x._value.dtype)))
            per_out.append(_post(jac, create_graph, in_tuple))
    return tuple(per_out) if out_tuple else per_out[0]


def hessian(
    func,
    inputs,
    create_graph: bool = False,
    strict: bool = False,
    vectorize: bool = False,
    outer_jacobian_strategy: str = "reverse-mode",
):
    """The Hessian of a scalar function (``torch.autograd.functional.hessian``): shape ``input.shape * 2`` for one
    input, a tuple of tuples (``[i][j]`` for inputs i, j) for several.

    Raises:
        AutogradError: the function does not return a single-element Tensor.
    """
    in_tuple, xs = _as_tuple(inputs, "inputs", "hessian")

    def jac_func(*inp):
        out = func(*inp)
        if isinstance(out, (tuple, list)) or not isinstance(out, Tensor) or out.numel() != 1:
            raise AutogradError(
                "The function given to hessian should return a single Tensor with a single element; got "
                + (f"shape {list(out.shape)}" if isinstance(out, Tensor) else type(out).__name__)
            )
        gs = (
            _grad(out.reshape(()), inp, create_graph=True, allow_unused=True)
            if out.requires_grad
            else (None,) * len(inp)
        )
        return tuple(_fill(gs, inp, strict, "gradient", True))

    res = jacobian(
        jac_func, xs, create_graph=create_graph, strict=strict, vectorize=vectorize, strategy=outer_jacobian_strategy
    )
    if not in_tuple:
        return res[0][0]
    return res


def vhp(func, inputs, v=None, create_graph: bool = False, strict: bool = False):
    """``(func(inputs), v^T H)`` for a scalar ``func`` (``torch.autograd.functional.vhp``)."""
    return _hessian_product(func, inputs, v, create_graph, strict, "vhp")


def hvp(func, inputs, v=None, create_graph: bool = False, strict: bool = False):
    """``(func(inputs), H v)`` for a scalar ``func`` (``torch.autograd.functional.hvp``); equals :func:`vhp` for
    twice continuously differentiable functions, computed by double backward as torch does."""
    return _hessian_product(func, inputs, v, create_graph, strict, "hvp")


def _hessian_product(func, inputs, v, create_graph: bool, strict: bool, name: str):
    with enable_grad():
        in_tuple, xs = _as_tuple(inputs, "inputs", name)
        xs = _prep(xs, create_graph)
        if v is None:
            if len(xs) != 1 or xs[0].numel() != 1:
                raise AutogradError(
                    "The vector v can only be None if the input to the user-provided function is a single Tensor "
                    "with a single element."
                )
            vs = (_make(jnp.ones(tuple(xs[0].shape), xs[0]._value.dtype)),)
        else:
            _, vs = _as_tuple(v, "v", name)
            if len(vs) != len(xs) or any(tuple(a.shape) != tuple(x.shape) for a, x in zip(vs, xs)):
                raise AutogradError("v must have one tensor per input, with that input's shape")
        out = func(*xs)
        if isinstance(out, (tuple, list)) or not isinstance(out, Tensor) or out.numel() != 1:
            raise AutogradError(f"The function given to {name} should return a single Tensor with a single element")
        if not out.requires_grad:
            if strict:
                raise AutogradError("The output of the user-provided function does not require gradients (strict mode)")
            zeros = tuple(_make(jnp.zeros(tuple(x.shape), x._value.dtype)) for x in xs)
            return _post((out,), create_graph, False), _post(zeros, create_graph, in_tuple)
        g1 = _grad(out.reshape(()), xs, create_graph=True, allow_unused=True)
        pairs = [(g, a) for g, a in zip(g1, vs) if g is not None]
        gs = _pair_grads(pairs, xs, create_graph)
        gs = _fill(gs, xs, strict, "vhp", create_graph)
    return _post((out,), create_graph, False), _post(gs, create_graph, in_tuple)
