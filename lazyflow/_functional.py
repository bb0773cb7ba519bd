"""Every tensor op as a function with torch's signature; the same functions become Tensor methods.

Each function validates and normalises its arguments (dims, shapes, dtypes) in Python, then makes exactly
one call into the active interpreter with a primitive from the op table. Composite ops (``std_mean``,
``chunk`` ...) are written here once on top of primitives and need no backward rule.
"""

from __future__ import annotations

import builtins
import math

import numpy as np

from ._core import dtypes as D
from ._core.context import state
from ._core.errors import DTypeError, IndexOutOfRangeError, ShapeError
from ._tensor import Tensor, _dim
from .ops.table import REGISTRY as R

__all__ = [  # the public ops, re-exported as lazyflow.<name>
    "abs", "absolute", "acos", "add", "addcdiv", "addcmul", "all", "amax", "amin", "any", "arccos", "arcsin",
    "arctan", "argmax", "argmin", "argsort", "argwhere", "asin", "atan", "atan2", "bitwise_and",
    "bitwise_not", "bitwise_or", "bitwise_xor", "bmm", "broadcast_shapes", "broadcast_tensors",
    "broadcast_to", "cat", "ceil", "chunk", "clamp", "clip", "clone", "concat", "concatenate", "cos", "cosh",
    "cumprod", "cumsum", "diagonal", "div", "divide", "dot", "einsum", "eq", "erf", "erfinv", "exp", "exp2",
    "expand", "expm1", "flatten", "flip", "fliplr", "flipud", "floor", "floor_divide", "fmod", "gather",
    "ge", "gelu", "greater", "greater_equal", "gt", "hstack", "index_add", "index_select", "isfinite",
    "isinf", "isnan", "le", "lerp", "less", "less_equal", "log", "log1p", "log2", "log10", "log_softmax",
    "logical_and", "logical_not", "logical_or", "logical_xor", "logsumexp", "lt", "masked_fill",
    "masked_select", "matmul", "max", "maximum", "mean", "min", "minimum", "mm", "movedim", "moveaxis",
    "mul", "multiply", "mv", "ne", "neg", "negative", "nonzero", "norm", "not_equal", "outer", "permute",
    "pow", "prod", "reciprocal", "relu", "remainder", "repeat_interleave", "reshape", "roll", "round",
    "rsqrt", "scatter", "scatter_add", "scatter_reduce", "sigmoid", "sign", "silu", "sin", "sinh", "softmax",
    "softplus", "sort", "split", "sqrt", "square", "squeeze", "stack", "std", "std_mean", "sub", "subtract",
    "sum", "swapaxes", "swapdims", "t", "take_along_dim", "tan", "tanh", "tensor_split", "tile", "topk",
    "transpose", "tril", "triu", "true_divide", "trunc", "unbind", "unflatten", "unsqueeze", "var",
    "var_mean", "vstack", "where",
]

_SCALARS = (builtins.int, builtins.float, builtins.bool)


def _apply(op, args, statics=()):
    return state.interp.apply(op, args, statics)


def _inplace(op, target, args, statics=()):
    return state.interp.apply_inplace(op, target, args, statics)


def _dims(dim, ndim):
    """Normalise ``dim`` (None, int or sequence) to None or a sorted tuple of non-negative ints."""
    if dim is None:
        return None
    if isinstance(dim, (builtins.int, np.integer)):
        return (_dim(builtins.int(dim), ndim),)
    out = tuple(sorted({_dim(builtins.int(d), ndim) for d in dim}))
    if len(out) != len(tuple(dim)):
        raise ValueError(f"dim {tuple(dim)} appears multiple times in the list of dims")
    return out if out else None


def _t(x):
    if isinstance(x, Tensor):
        return x
    from ._creation import as_tensor

    return as_tensor(x)


# ---------------------------------------------------------------- elementwise
def _unary(name):
    o = R[name]

    def f(input: Tensor) -> Tensor:  # noqa: A002
        return state.interp.apply(o, (input,), ())

    f.__name__ = name
    f.__doc__ = f"Elementwise ``{name}`` (torch.{name})."
    return f


_UNARY = ["exp", "log", "log1p", "expm1", "sqrt", "rsqrt", "sin", "cos", "tan", "tanh", "sigmoid", "erf",
          "erfinv", "log2", "log10", "reciprocal", "silu", "asin", "acos", "atan", "sinh", "cosh", "exp2",
          "neg", "abs", "sign", "square", "relu", "floor", "ceil", "trunc", "isnan", "isinf", "isfinite",
          "logical_not", "bitwise_not", "logsigmoid"]
for _n in _UNARY:
    globals()[_n] = _unary(_n)
negative = neg  # noqa: F821
absolute = abs  # noqa: A001,F821
arcsin, arccos, arctan = asin, acos, atan  # noqa: F821
fix = trunc  # noqa: F821


def round(input: Tensor, *, decimals: int = 0) -> Tensor:  # noqa: A001,A002
    return _apply(R["round"], (input,), (builtins.int(decimals),))


def gelu(input: Tensor, approximate: str = "none") -> Tensor:  # noqa: A002
    """GELU, exact (``"none"``) or with the tanh approximation (``"tanh"``)."""
    if approximate not in ("none", "tanh"):
        raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    return _apply(R["gelu"], (input,), (approximate,))


def softplus(input: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor:  # noqa: A002
    return _apply(R["softplus"], (input,), (builtins.float(beta), builtins.float(threshold)))


def leaky_relu(input: Tensor, negative_slope: float = 0.01) -> Tensor:  # noqa: A002
    return _apply(R["leaky_relu"], (input,), (builtins.float(negative_slope),))


def elu(input: Tensor, alpha: float = 1.0) -> Tensor:  # noqa: A002
    return _apply(R["elu"], (input,), (builtins.float(alpha),))


def hardtanh(input: Tensor, min_val: float = -1.0, max_val: float = 1.0) -> Tensor:  # noqa: A002
    return _apply(R["hardtanh"], (input,), (builtins.float(min_val), builtins.float(max_val)))


def nan_to_num(input: Tensor, nan: float = 0.0, posinf=None, neginf=None) -> Tensor:  # noqa: A002
    return _apply(R["nan_to_num"], (input,), (nan, posinf, neginf))


def _binary(name):
    o = R[name]

    def f(input, other) -> Tensor:  # noqa: A002
        return state.interp.apply(o, (input, other), ())

    f.__name__ = name
    return f


for _n in ["mul", "floor_divide", "remainder", "fmod", "pow", "atan2", "maximum", "minimum", "eq", "ne",
           "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor", "bitwise_and", "bitwise_or",
           "bitwise_xor"]:
    globals()[_n] = _binary(_n)
multiply = mul  # noqa: F821
greater, greater_equal, less, less_equal, not_equal = gt, ge, lt, le, ne  # noqa: F821
fmax, fmin = maximum, minimum  # noqa: F821

_ADD, _SUB, _MUL = R["add"], R["sub"], R["mul"]


def add(input, other, *, alpha=1) -> Tensor:  # noqa: A002
    """``input + alpha * other`` with torch's type promotion."""
    if alpha != 1:
        other = other * alpha
    return state.interp.apply(_ADD, (input, other), ())


def sub(input, other, *, alpha=1) -> Tensor:  # noqa: A002
    """``input - alpha * other``."""
    if alpha != 1:
        other = other * alpha
    if isinstance(input, Tensor) and input.dtype is D.bool_ and (
            not isinstance(other, Tensor) or other.dtype is D.bool_):
        raise DTypeError("subtraction of bool tensors is not supported; use logical_xor or ~")
    return state.interp.apply(_SUB, (input, other), ())


subtract = sub


def div(input, other, *, rounding_mode: str | None = None) -> Tensor:  # noqa: A002
    """True division (``rounding_mode=None``), ``"trunc"`` or ``"floor"`` rounding."""
    if rounding_mode is None:
        return _apply(R["div"], (input, other))
    if rounding_mode == "trunc":
        return _apply(R["div_trunc"], (input, other))
    if rounding_mode == "floor":
        return _apply(R["floor_divide"], (input, other))
    raise ValueError(f"div expected rounding_mode to be one of None, 'trunc', or 'floor' but found "
                     f"{rounding_mode!r}")


divide = true_divide = div


def where(condition, input=None, other=None) -> Tensor:  # noqa: A002
    """``input`` where ``condition`` else ``other`` (``where(cond)`` alone is ``nonzero(as_tuple=True)``)."""
    if input is None and other is None:
        return nonzero(condition, as_tuple=True)
    condition = _t(condition)
    if condition.dtype is not D.bool_:
        condition = condition.bool()
    return _apply(R["where"], (condition, input, other))


def clamp(input: Tensor, min=None, max=None) -> Tensor:  # noqa: A001,A002
    """Clamp into ``[min, max]`` (either may be None, a scalar or a tensor)."""
    if min is None and max is None:
        raise ValueError("clamp: at least one of 'min' or 'max' must not be None")
    return _apply(R["clamp"], (input, min, max))


clip = clamp


def lerp(input, end, weight) -> Tensor:  # noqa: A002
    return _apply(R["lerp"], (input, end, weight))


def addcmul(input, tensor1, tensor2, *, value=1) -> Tensor:  # noqa: A002
    return _apply(R["addcmul"], (input, tensor1, tensor2), (value,))


def addcdiv(input, tensor1, tensor2, *, value=1) -> Tensor:  # noqa: A002
    return _apply(R["addcdiv"], (input, tensor1, tensor2), (value,))


# ---------------------------------------------------------------- linear algebra
def matmul(input: Tensor, other: Tensor) -> Tensor:  # noqa: A002
    """Matrix product with torch's broadcasting rules."""
    a, b = _t(input), _t(other)
    if a.ndim == 0 or b.ndim == 0:
        raise ShapeError(f"matmul: both arguments need at least 1 dimension, got shapes {list(a.shape)} "
                         f"and {list(b.shape)}")
    ka = a.shape[-1]
    kb = b.shape[-2] if b.ndim > 1 else b.shape[0]
    if ka != kb:
        raise ShapeError(f"matmul: shapes {list(a.shape)} and {list(b.shape)} cannot be multiplied "
                         f"({ka} != {kb})")
    return state.interp.apply(_MATMUL, (a, b), ())


_MATMUL = R["matmul"]


def mm(input: Tensor, mat2: Tensor) -> Tensor:  # noqa: A002
    if input.ndim != 2 or mat2.ndim != 2:
        raise ShapeError(f"mm expects 2-D tensors, got shapes {list(input.shape)} and {list(mat2.shape)}")
    return matmul(input, mat2)


def bmm(input: Tensor, mat2: Tensor) -> Tensor:  # noqa: A002
    if input.ndim != 3 or mat2.ndim != 3 or input.shape[0] != mat2.shape[0]:
        raise ShapeError(f"bmm expects 3-D tensors with equal batch sizes, got shapes {list(input.shape)} "
                         f"and {list(mat2.shape)}")
    return matmul(input, mat2)


def mv(input: Tensor, vec: Tensor) -> Tensor:  # noqa: A002
    return matmul(input, vec)


def dot(input: Tensor, other: Tensor) -> Tensor:  # noqa: A002
    if input.ndim != 1 or other.ndim != 1:
        raise ShapeError(f"dot expects 1-D tensors, got shapes {list(input.shape)} and {list(other.shape)}")
    return matmul(input, other)


def outer(input: Tensor, vec2: Tensor) -> Tensor:  # noqa: A002
    return _apply(R["outer"], (input, vec2))


def einsum(equation: str, *operands) -> Tensor:
    """Einstein summation: ``einsum("ij,jk->ik", a, b)``."""
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    return _apply(R["einsum"], tuple(_t(o) for o in operands), (equation.replace(" ", ""),))


# ---------------------------------------------------------------- reductions
def _reduce(name, input, dim, keepdim, *extra):  # noqa: A002
    return _apply(R[name], (input,), (_dims(dim, input.ndim), builtins.bool(keepdim), *extra))


def sum(input: Tensor, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:  # noqa: A001,A002
    """Sum over ``dim`` (int or tuple; all dims when None). Integer and bool inputs sum to int64."""
    return _apply(R["sum"], (input,), (_dims(dim, input.ndim), builtins.bool(keepdim),
                                       None if dtype is None else D.to_dtype(dtype)))


def prod(input: Tensor, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:  # noqa: A002
    return _apply(R["prod"], (input,), (_dims(dim, input.ndim), builtins.bool(keepdim),
                                        None if dtype is None else D.to_dtype(dtype)))


def mean(input: Tensor, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:  # noqa: A002
    """Mean over ``dim``; floating inputs only (like torch), or pass ``dtype``."""
    if dtype is not None:
        input = input.to(dtype)
    if not input.dtype.is_floating_point:
        raise DTypeError(f"mean(): could not infer output dtype. Input dtype must be floating point, "
                         f"got {input.dtype}; pass dtype= or convert with .float()")
    return _reduce("mean", input, dim, keepdim)


def amax(input: Tensor, dim=(), keepdim: bool = False) -> Tensor:  # noqa: A002
    return _reduce("amax", input, None if dim == () else dim, keepdim)


def amin(input: Tensor, dim=(), keepdim: bool = False) -> Tensor:  # noqa: A002
    return _reduce("amin", input, None if dim == () else dim, keepdim)


class _MinMax(tuple):
    """``(values, indices)`` named like torch's return type."""

    @property
    def values(self):
        return self[0]

    @property
    def indices(self):
        return self[1]


def max(input: Tensor, dim=None, keepdim: bool = False):  # noqa: A001,A002
    """Maximum of all elements; with ``dim``: ``(values, indices)``; with a tensor: elementwise."""
    if isinstance(dim, Tensor):
        return maximum(input, dim)  # noqa: F821
    if dim is None:
        return _reduce("amax", input, None, False)
    return _MinMax(_apply(R["max_dim"], (input,), (_dim(dim, input.ndim), builtins.bool(keepdim))))


def min(input: Tensor, dim=None, keepdim: bool = False):  # noqa: A001,A002
    """Minimum of all elements; with ``dim``: ``(values, indices)``; with a tensor: elementwise."""
    if isinstance(dim, Tensor):
        return minimum(input, dim)  # noqa: F821
    if dim is None:
        return _reduce("amin", input, None, False)
    return _MinMax(_apply(R["min_dim"], (input,), (_dim(dim, input.ndim), builtins.bool(keepdim))))


def argmax(input: Tensor, dim=None, keepdim: bool = False) -> Tensor:  # noqa: A002
    return _apply(R["argmax"], (input,), (None if dim is None else _dim(dim, input.ndim), builtins.bool(keepdim)))


def argmin(input: Tensor, dim=None, keepdim: bool = False) -> Tensor:  # noqa: A002
    return _apply(R["argmin"], (input,), (None if dim is None else _dim(dim, input.ndim), builtins.bool(keepdim)))


def _correction(unbiased, correction):
    if correction is not None:
        return builtins.int(correction) if builtins.float(correction).is_integer() else correction
    return 1 if unbiased in (None, True) else 0


def var(input: Tensor, dim=None, unbiased=None, keepdim: bool = False, *, correction=None) -> Tensor:  # noqa: A002
    """Variance with Bessel's correction by default (``correction=1``)."""
    if isinstance(unbiased, builtins.bool) is False and unbiased is not None and dim is None:
        dim, unbiased = unbiased, None
    if not input.dtype.is_floating_point:
        raise DTypeError(f"var: expected a floating tensor, got {input.dtype}")
    return _apply(R["var"], (input,), (_dims(dim, input.ndim), _correction(unbiased, correction),
                                       builtins.bool(keepdim)))


def std(input: Tensor, dim=None, unbiased=None, keepdim: bool = False, *, correction=None) -> Tensor:  # noqa: A002
    """Standard deviation with Bessel's correction by default."""
    if isinstance(unbiased, builtins.bool) is False and unbiased is not None and dim is None:
        dim, unbiased = unbiased, None
    if not input.dtype.is_floating_point:
        raise DTypeError(f"std: expected a floating tensor, got {input.dtype}")
    return _apply(R["std"], (input,), (_dims(dim, input.ndim), _correction(unbiased, correction),
                                       builtins.bool(keepdim)))


def var_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None):  # noqa: A002
    return var(input, dim, unbiased, keepdim, correction=correction), mean(input, dim, keepdim)


def std_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None):  # noqa: A002
    return std(input, dim, unbiased, keepdim, correction=correction), mean(input, dim, keepdim)


def logsumexp(input: Tensor, dim, keepdim: bool = False) -> Tensor:  # noqa: A002
    return _reduce("logsumexp", input, dim, keepdim)


def norm(input: Tensor, p="fro", dim=None, keepdim: bool = False, dtype=None) -> Tensor:  # noqa: A002
    """Vector p-norm over ``dim`` (all elements when None); ``"fro"`` is the 2-norm."""
    if dtype is not None:
        input = input.to(dtype)
    if p is None:
        p = "fro"
    if isinstance(p, (builtins.int, builtins.float)) and not isinstance(p, builtins.bool):
        p = builtins.float(p) if not builtins.float(p).is_integer() or math.isinf(p) else builtins.int(p)
    elif p != "fro":
        raise ValueError(f"norm: unsupported p={p!r}; use a number, inf or 'fro'")
    return _apply(R["norm"], (input,), (p, _dims(dim, input.ndim), builtins.bool(keepdim)))


def all(input: Tensor, dim=None, keepdim: bool = False) -> Tensor:  # noqa: A001,A002
    return _reduce("all", input, dim, keepdim)


def any(input: Tensor, dim=None, keepdim: bool = False) -> Tensor:  # noqa: A001,A002
    return _reduce("any", input, dim, keepdim)


def cumsum(input: Tensor, dim: int, *, dtype=None) -> Tensor:  # noqa: A002
    return _apply(R["cumsum"], (input,), (_dim(dim, input.ndim), None if dtype is None else D.to_dtype(dtype)))


def cumprod(input: Tensor, dim: int, *, dtype=None) -> Tensor:  # noqa: A002
    return _apply(R["cumprod"], (input,), (_dim(dim, input.ndim), None if dtype is None else D.to_dtype(dtype)))


def softmax(input: Tensor, dim: int | None = None, dtype=None) -> Tensor:  # noqa: A002
    """Softmax along ``dim``."""
    if dtype is not None:
        input = input.to(dtype)
    if dim is None:
        dim = 0 if input.ndim in (0, 1, 3) else 1
    return _apply(R["softmax"], (input,), (_dim(dim, input.ndim),))


def log_softmax(input: Tensor, dim: int | None = None, dtype=None) -> Tensor:  # noqa: A002
    """Log-softmax along ``dim``."""
    if dtype is not None:
        input = input.to(dtype)
    if dim is None:
        dim = 0 if input.ndim in (0, 1, 3) else 1
    return _apply(R["log_softmax"], (input,), (_dim(dim, input.ndim),))


def cast(input: Tensor, dtype) -> Tensor:  # noqa: A002
    d = D.to_dtype(dtype)
    d.to_jax()
    return _apply(R["cast"], (input,), (d,))


def clone(input: Tensor, *, memory_format=None) -> Tensor:  # noqa: A002
    """A copy with its own buffer; gradients flow back to ``input``."""
    return _apply(R["copy"], (input,))


def _device_copy(src: Tensor, moved: Tensor) -> Tensor:
    """Connect a device-moved value to ``src``'s graph (gradient is the identity)."""
    out = _apply(R["copy"], (src,))
    out._value = moved._value
    out._meta = moved._meta
    return out


# ---------------------------------------------------------------- shape ops
def _infer_shape(shape, numel, what):
    shape = [builtins.int(s) for s in shape]
    neg = [i for i, s in enumerate(shape) if s == -1]
    if len(neg) > 1:
        raise ShapeError(f"{what}: only one dimension can be inferred, got {shape}")
    if builtins.any(s < -1 for s in shape):
        raise ShapeError(f"{what}: invalid shape dimension in {shape}")
    known = 1
    for s in shape:
        if s != -1:
            known *= s
    if neg:
        if known == 0 or numel % known:
            raise ShapeError(f"{what}: shape {shape} is invalid for input of size {numel}")
        shape[neg[0]] = numel // known
    elif known != numel:
        raise ShapeError(f"{what}: shape {shape} is invalid for input of size {numel}")
    return tuple(shape)


def _shape_args(shape):
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        return tuple(shape[0])
    return shape


def reshape(input: Tensor, *shape) -> Tensor:  # noqa: A002
    """Same data, new shape (one ``-1`` is inferred). Never aliases ``input`` for writes."""
    shape = _infer_shape(_shape_args(shape), input.numel(), "reshape")
    if shape == input.shape:
        return _apply(R["reshape"], (input,), (shape,)) if input._rg else input.detach()
    return _apply(R["reshape"], (input,), (shape,))


def view(input: Tensor, *shape) -> Tensor:  # noqa: A002
    """``reshape`` (lazyflow has no storage views; see the README) or ``view(dtype)`` reinterpretation."""
    if len(shape) == 1 and (isinstance(shape[0], D.DType)):
        raise DTypeError("view(dtype) reinterpretation is not supported; use .to(dtype)")
    return reshape(input, *shape)


def view_as(input: Tensor, other: Tensor) -> Tensor:  # noqa: A002
    return reshape(input, other.shape)


def reshape_as(input: Tensor, other: Tensor) -> Tensor:  # noqa: A002
    return reshape(input, other.shape)


def flatten(input: Tensor, start_dim: int = 0, end_dim: int = -1) -> Tensor:  # noqa: A002
    if input.ndim == 0:
        return reshape(input, 1)
    s, e = _dim(start_dim, input.ndim), _dim(end_dim, input.ndim)
    if s > e:
        raise ValueError(f"flatten() has invalid args: start_dim {start_dim} cannot come after end_dim {end_dim}")
    shp = input.shape
    return reshape(input, shp[:s] + (math.prod(shp[s:e + 1]),) + shp[e + 1:])


def unflatten(input: Tensor, dim: int, sizes) -> Tensor:  # noqa: A002
    d = _dim(dim, input.ndim)
    sizes = _infer_shape(sizes, input.shape[d], "unflatten")
    return reshape(input, input.shape[:d] + sizes + input.shape[d + 1:])


def squeeze(input: Tensor, dim=None) -> Tensor:  # noqa: A002
    if dim is None:
        return reshape(input, tuple(s for s in input.shape if s != 1))
    dims = _dims(dim, input.ndim) or ()
    return reshape(input, tuple(s for i, s in enumerate(input.shape) if not (i in dims and s == 1)))


def unsqueeze(input: Tensor, dim: int) -> Tensor:  # noqa: A002
    d = _dim(dim, input.ndim + 1)
    return reshape(input, input.shape[:d] + (1,) + input.shape[d:])


def permute(input: Tensor, *dims) -> Tensor:  # noqa: A002
    dims = _shape_args(dims)
    if len(dims) != input.ndim:
        raise ShapeError(f"permute: number of dims {len(dims)} doesn't match the tensor's {input.ndim} "
                         f"(shape {list(input.shape)})")
    nd = tuple(_dim(d, input.ndim) for d in dims)
    if len(set(nd)) != len(nd):
        raise ValueError(f"permute: repeated dim in {tuple(dims)}")
    if nd == tuple(range(input.ndim)):
        return reshape(input, input.shape)
    return _apply(R["permute"], (input,), (nd,))


def transpose(input: Tensor, dim0: int, dim1: int) -> Tensor:  # noqa: A002
    if input.ndim == 0:
        return reshape(input, ())
    a, b = _dim(dim0, input.ndim), _dim(dim1, input.ndim)
    p = list(range(input.ndim))
    p[a], p[b] = p[b], p[a]
    return permute(input, *p)


swapaxes = swapdims = transpose


def t(input: Tensor) -> Tensor:  # noqa: A002
    if input.ndim > 2:
        raise ShapeError(f"t() expects a tensor with <= 2 dimensions, but self is {input.ndim}D")
    return transpose(input, 0, 1) if input.ndim == 2 else reshape(input, input.shape)


def movedim(input: Tensor, source, destination) -> Tensor:  # noqa: A002
    src = [source] if isinstance(source, builtins.int) else list(source)
    dst = [destination] if isinstance(destination, builtins.int) else list(destination)
    src = [_dim(s, input.ndim) for s in src]
    dst = [_dim(d, input.ndim) for d in dst]
    order = [i for i in range(input.ndim) if i not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return permute(input, *order)


moveaxis = movedim


def expand(input: Tensor, *sizes) -> Tensor:  # noqa: A002
    sizes = _shape_args(sizes)
    if len(sizes) < input.ndim:
        raise ShapeError(f"expand: the number of sizes provided ({len(sizes)}) must be greater or equal to "
                         f"the number of dimensions in the tensor ({input.ndim})")
    shp = (1,) * (len(sizes) - input.ndim) + input.shape
    out = []
    for s, cur in zip(sizes, shp):
        s = builtins.int(s)
        if s == -1:
            s = cur
        if cur != 1 and cur != s:
            raise ShapeError(f"expand: the expanded size of the tensor ({s}) must match the existing size "
                             f"({cur}) at non-singleton dimension; target sizes {list(sizes)}, tensor "
                             f"shape {list(input.shape)}")
        out.append(s)
    out = tuple(out)
    if out == input.shape:
        return reshape(input, out)
    return _apply(R["expand"], (input,), (out,))


def broadcast_to(input: Tensor, size) -> Tensor:  # noqa: A002
    return expand(input, *size)


def expand_as(input: Tensor, other: Tensor) -> Tensor:  # noqa: A002
    return expand(input, *other.shape)


def broadcast_tensors(*tensors):
    shape = broadcast_shapes(*[t.shape for t in tensors])
    return tuple(expand(t, *shape) for t in tensors)


def broadcast_shapes(*shapes):
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        raise ShapeError(f"shapes {[list(s) for s in shapes]} cannot be broadcast together") from None


def repeat(input: Tensor, *sizes) -> Tensor:  # noqa: A002
    """torch's ``repeat``: tile the tensor ``sizes`` times along each dim."""
    sizes = tuple(builtins.int(s) for s in _shape_args(sizes))
    if len(sizes) < input.ndim:
        raise ShapeError(f"repeat: number of repeat dims ({len(sizes)}) can not be smaller than number of "
                         f"tensor dims ({input.ndim})")
    return _apply(R["tile"], (input,), (sizes,))


def tile(input: Tensor, dims) -> Tensor:  # noqa: A002
    dims = tuple(builtins.int(s) for s in dims)
    if len(dims) < input.ndim:
        dims = (1,) * (input.ndim - len(dims)) + dims
    return _apply(R["tile"], (input,), (dims,))


def repeat_interleave(input: Tensor, repeats: int, dim=None) -> Tensor:  # noqa: A002
    if isinstance(repeats, Tensor):
        repeats = repeats.item() if repeats.numel() == 1 else tuple(repeats.tolist())
    return _apply(R["repeat_interleave"], (input,), (repeats, None if dim is None else _dim(dim, input.ndim)))


def cat(tensors, dim: int = 0) -> Tensor:
    """Concatenate along ``dim``; all shapes must match except in ``dim``."""
    ts = [_t(x) for x in tensors]
    if not ts:
        raise ValueError("cat expects a non-empty list of tensors")
    ts = [x for x in ts if not (x.ndim == 1 and x.shape[0] == 0)] or ts[:1]
    nd = ts[0].ndim
    d = _dim(dim, nd)
    for x in ts:
        if x.ndim != nd or builtins.any(a != b for i, (a, b) in enumerate(zip(x.shape, ts[0].shape)) if i != d):
            raise ShapeError(f"cat: sizes of tensors must match except in dimension {d}; got shapes "
                             f"{[list(y.shape) for y in ts]}")
    if len(ts) == 1:
        return clone(ts[0])
    return _apply(R["cat"], tuple(ts), (d,))


concat = concatenate = cat


def stack(tensors, dim: int = 0) -> Tensor:
    """Stack equally-shaped tensors along a new dimension ``dim``."""
    ts = [_t(x) for x in tensors]
    if not ts:
        raise ValueError("stack expects a non-empty list of tensors")
    for x in ts:
        if x.shape != ts[0].shape:
            raise ShapeError(f"stack expects each tensor to be equal size, got shapes "
                             f"{[list(y.shape) for y in ts]}")
    return _apply(R["stack"], tuple(ts), (_dim(dim, ts[0].ndim + 1),))


def hstack(tensors):
    ts = [_t(x) for x in tensors]
    return cat(ts, 0 if ts[0].ndim == 1 else 1)


def vstack(tensors):
    return cat([x if x.ndim > 1 else x.reshape(1, -1) for x in map(_t, tensors)], 0)


def split(tensor: Tensor, split_size_or_sections, dim: int = 0):
    """Split into chunks of ``split_size`` (int) or of the given sizes (list)."""
    d = _dim(dim, tensor.ndim)
    n = tensor.shape[d]
    if isinstance(split_size_or_sections, (builtins.int, np.integer)):
        s = builtins.int(split_size_or_sections)
        if s <= 0:
            raise ValueError(f"split expects split_size be positive, got {s}")
        sizes = [s] * (n // s) + ([n % s] if n % s else [])
        if not sizes:
            sizes = [0]
    else:
        sizes = [builtins.int(s) for s in split_size_or_sections]
        if builtins.sum(sizes) != n:
            raise ShapeError(f"split_with_sizes expects split_sizes to sum exactly to {n} (input tensor's size "
                             f"at dimension {d}), but got split_sizes={sizes}")
    return _apply(R["split"], (tensor,), (tuple(sizes), d))


def chunk(input: Tensor, chunks: int, dim: int = 0):  # noqa: A002
    if chunks <= 0:
        raise ValueError(f"chunk expects `chunks` to be greater than 0, got: {chunks}")
    n = input.shape[_dim(dim, input.ndim)]
    return split(input, max(1, math.ceil(n / chunks)), dim)


def tensor_split(input: Tensor, sections: int, dim: int = 0):  # noqa: A002
    d = _dim(dim, input.ndim)
    n = input.shape[d]
    q, r = divmod(n, sections)
    return split(input, [q + 1] * r + [q] * (sections - r), d)


def unbind(input: Tensor, dim: int = 0):  # noqa: A002
    d = _dim(dim, input.ndim)
    parts = split(input, 1, d)
    return tuple(squeeze(p, d) for p in parts)


def flip(input: Tensor, dims) -> Tensor:  # noqa: A002
    dims = (dims,) if isinstance(dims, builtins.int) else tuple(dims)
    return _apply(R["flip"], (input,), (_dims(dims, input.ndim) or (),))


def fliplr(input: Tensor) -> Tensor:  # noqa: A002
    return flip(input, (1,))


def flipud(input: Tensor) -> Tensor:  # noqa: A002
    return flip(input, (0,))


def roll(input: Tensor, shifts, dims=None) -> Tensor:  # noqa: A002
    if dims is None:
        return roll(flatten(input), shifts, 0).reshape(input.shape)
    shifts = (shifts,) if isinstance(shifts, builtins.int) else tuple(shifts)
    dims = (dims,) if isinstance(dims, builtins.int) else tuple(dims)
    if len(shifts) != len(dims):
        raise ValueError(f"roll: shifts {shifts} and dims {dims} must have the same length")
    return _apply(R["roll"], (input,), (shifts, tuple(_dim(d, input.ndim) for d in dims)))


def _check_index(index, what):
    index = _t(index)
    if index.dtype.is_floating_point or index.dtype is D.bool_:
        raise DTypeError(f"{what}(): Expected dtype int64 for index, got {index.dtype}")
    return index


def _check_bounds(index, size, what):
    from ._tensor import _Tracer

    if isinstance(index._value, _Tracer) or index.numel() == 0:
        return
    a = np.asarray(index._value)
    lo, hi = builtins.int(a.min()), builtins.int(a.max())
    if lo < -size or hi >= size:
        bad = hi if hi >= size else lo
        raise IndexOutOfRangeError(f"{what}(): index {bad} is out of bounds for dimension with size {size}")


def gather(input: Tensor, dim: int, index: Tensor, *, sparse_grad: bool = False) -> Tensor:  # noqa: A002
    """Values of ``input`` along ``dim`` at ``index`` (same rank as input)."""
    d = _dim(dim, input.ndim)
    index = _check_index(index, "gather")
    if index.ndim != input.ndim:
        raise ShapeError(f"gather(): index {list(index.shape)} must have the same number of dimensions as "
                         f"input {list(input.shape)}")
    _check_bounds(index, input.shape[d], "gather")
    return _apply(R["gather"], (input, index), (d,))


def take_along_dim(input: Tensor, indices: Tensor, dim: int) -> Tensor:  # noqa: A002
    return gather(input, dim, indices)


def scatter(input: Tensor, dim: int, index: Tensor, src=None, *, value=None, reduce=None) -> Tensor:  # noqa: A002
    """Out-of-place scatter: write ``src`` (tensor or scalar) into ``input`` at ``index`` along ``dim``."""
    if src is None:
        src = value
    d = _dim(dim, input.ndim)
    index = _check_index(index, "scatter")
    _check_bounds(index, input.shape[d], "scatter")
    return _apply(R["scatter"], (input, index, src), (d, reduce))


def scatter_add(input: Tensor, dim: int, index: Tensor, src: Tensor) -> Tensor:  # noqa: A002
    return scatter(input, dim, index, src, reduce="add")


def scatter_reduce(input, dim, index, src, reduce, *, include_self=True):  # noqa: A002
    if not include_self:
        raise ValueError("scatter_reduce(include_self=False) is not supported")
    return scatter(input, dim, index, src, reduce=reduce)


def index_select(input: Tensor, dim: int, index: Tensor) -> Tensor:  # noqa: A002
    d = _dim(dim, input.ndim)
    index = _check_index(index, "index_select")
    if index.ndim > 1:
        raise ShapeError(f"index_select(): index should be a vector, got shape {list(index.shape)}")
    _check_bounds(index, input.shape[d], "index_select")
    return _apply(R["index_select"], (input, index), (d,))


def index_add(input: Tensor, dim: int, index: Tensor, source: Tensor, *, alpha=1) -> Tensor:  # noqa: A002
    d = _dim(dim, input.ndim)
    index = _check_index(index, "index_add")
    _check_bounds(index, input.shape[d], "index_add")
    return _apply(R["index_add"], (input, index, source), (d, alpha))


def masked_fill(input: Tensor, mask: Tensor, value) -> Tensor:  # noqa: A002
    """``value`` where ``mask`` is True, else ``input`` (mask broadcasts)."""
    mask = _t(mask)
    if mask.dtype is not D.bool_:
        raise DTypeError(f"masked_fill only supports boolean masks, but got mask with dtype {mask.dtype}")
    if isinstance(value, Tensor) and value.ndim != 0:
        raise ShapeError(f"masked_fill only supports a 0-dimensional value tensor, got shape {value.shape}")
    return _apply(R["masked_fill"], (input, mask, value))


def masked_select(input: Tensor, mask: Tensor) -> Tensor:  # noqa: A002
    input, mask = broadcast_tensors(input, _t(mask))
    return input[mask]


def nonzero(input: Tensor, *, as_tuple: bool = False):  # noqa: A002
    """Indices of non-zero elements (data-dependent shape: eager only)."""
    from ._creation import tensor
    from ._tensor import _concrete

    _concrete(input, "nonzero()")
    nz = np.nonzero(np.asarray(input._value))
    if as_tuple:
        return tuple(tensor(z.astype(np.int64), dtype=D.default_int()) for z in nz)
    return tensor(np.stack(nz, axis=1).astype(np.int64) if nz else np.zeros((0, 0), np.int64),
                  dtype=D.default_int())


def argwhere(input: Tensor) -> Tensor:  # noqa: A002
    return nonzero(input)


def sort(input: Tensor, dim: int = -1, descending: bool = False, stable: bool = False):  # noqa: A002
    """``(values, indices)`` sorted along ``dim``."""
    return _MinMax(_apply(R["sort"], (input,), (_dim(dim, input.ndim), builtins.bool(descending),
                                                 builtins.bool(stable))))


def argsort(input: Tensor, dim: int = -1, descending: bool = False, stable: bool = False) -> Tensor:  # noqa: A002
    return sort(input, dim, descending, stable)[1]


def topk(input: Tensor, k: int, dim: int = -1, largest: bool = True, sorted: bool = True):  # noqa: A001,A002
    """The ``k`` largest (or smallest) ``(values, indices)`` along ``dim``."""
    d = _dim(dim, input.ndim)
    if not 0 <= k <= (input.shape[d] if input.ndim else 1):
        raise IndexOutOfRangeError(f"topk: k ({k}) is out of range for dimension {d} of size "
                                   f"{input.shape[d] if input.ndim else 1}")
    return _MinMax(_apply(R["topk"], (input,), (builtins.int(k), d, builtins.bool(largest), builtins.bool(sorted))))


def tril(input: Tensor, diagonal: int = 0) -> Tensor:  # noqa: A002
    if input.ndim < 2:
        raise ShapeError(f"tril: input tensor must have at least 2 dimensions, got shape {input.shape}")
    return _apply(R["tril"], (input,), (builtins.int(diagonal),))


def triu(input: Tensor, diagonal: int = 0) -> Tensor:  # noqa: A002
    if input.ndim < 2:
        raise ShapeError(f"triu: input tensor must have at least 2 dimensions, got shape {input.shape}")
    return _apply(R["triu"], (input,), (builtins.int(diagonal),))


def diagonal(input: Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor:  # noqa: A002
    return _apply(R["diagonal"], (input,), (offset, _dim(dim1, input.ndim), _dim(dim2, input.ndim)))


def one_hot(tensor: Tensor, num_classes: int = -1) -> Tensor:
    """One-hot encoding (int64) of an integer tensor."""
    tensor = _t(tensor)
    if tensor.dtype.is_floating_point or tensor.dtype is D.bool_:
        raise DTypeError(f"one_hot is only applicable to index tensors, got {tensor.dtype}")
    if num_classes == -1:
        num_classes = builtins.int(tensor.max().item()) + 1 if tensor.numel() else 0
    _check_bounds(tensor, num_classes, "one_hot")
    return _apply(R["one_hot"], (tensor,), (builtins.int(num_classes),))


def pad(input: Tensor, pad, mode: str = "constant", value=None) -> Tensor:  # noqa: A002
    """torch.nn.functional.pad: ``pad`` lists (left, right) pairs from the last dimension backwards."""
    pad = tuple(builtins.int(p) for p in pad)
    if len(pad) % 2 or len(pad) // 2 > input.ndim:
        raise ShapeError(f"pad: padding length {len(pad)} must be even and at most 2 * ndim "
                         f"({2 * input.ndim}) for input of shape {list(input.shape)}")
    if mode not in ("constant", "reflect", "replicate", "circular"):
        raise ValueError(f"pad: unsupported mode {mode!r}; expected constant, reflect, replicate or circular")
    return _apply(R["pad"], (input,), (pad, mode, 0.0 if value is None else value))


# ---------------------------------------------------------------- in-place
def _ip(name):
    o = R[name]

    def f(self: Tensor, *args) -> Tensor:
        return state.interp.apply_inplace(o, self, (self, *args), ())

    f.__name__ = name + "_"
    return f


def add_(self: Tensor, other, *, alpha=1) -> Tensor:
    if alpha != 1:
        other = other * alpha
    return state.interp.apply_inplace(_ADD, self, (self, other), ())


def sub_(self: Tensor, other, *, alpha=1) -> Tensor:
    if alpha != 1:
        other = other * alpha
    return state.interp.apply_inplace(_SUB, self, (self, other), ())


def mul_(self: Tensor, other) -> Tensor:
    return state.interp.apply_inplace(_MUL, self, (self, other), ())


def div_(self: Tensor, other, *, rounding_mode=None) -> Tensor:
    o = {None: R["div"], "trunc": R["div_trunc"], "floor": R["floor_divide"]}[rounding_mode]
    return _inplace(o, self, (self, other))


def zero_(self: Tensor) -> Tensor:
    return fill_(self, 0)


def fill_(self: Tensor, value) -> Tensor:
    if isinstance(value, Tensor):
        if value.ndim != 0:
            raise ShapeError(f"fill_ only supports a 0-dimension value tensor, got shape {list(value.shape)}")
        return copy_(self, value)
    return _inplace(_COPY_INTO, self, (self, value))


def copy_(self: Tensor, src, non_blocking: bool = False) -> Tensor:
    """Copy ``src`` (broadcast, cast to this dtype) into this tensor."""
    src = _t(src)
    try:
        broadcast_shapes(src.shape, self.shape)
    except ShapeError:
        raise ShapeError(f"copy_: the source of shape {list(src.shape)} cannot be broadcast to "
                         f"{list(self.shape)}") from None
    return _inplace(_COPY_INTO, self, (self, src))


_COPY_INTO = R["copy_into"]


def clamp_(self: Tensor, min=None, max=None) -> Tensor:  # noqa: A002
    return _inplace(R["clamp"], self, (self, min, max))


def masked_fill_(self: Tensor, mask, value) -> Tensor:
    mask = _t(mask)
    if mask.dtype is not D.bool_:
        raise DTypeError(f"masked_fill_ only supports boolean masks, but got mask with dtype {mask.dtype}")
    return _inplace(R["masked_fill"], self, (self, mask, value))


def index_add_(self: Tensor, dim: int, index, source, *, alpha=1) -> Tensor:
    d = _dim(dim, self.ndim)
    index = _check_index(index, "index_add_")
    _check_bounds(index, self.shape[d], "index_add_")
    return _inplace(R["index_add"], self, (self, index, source), (d, alpha))


def scatter_(self: Tensor, dim, index, src=None, *, value=None, reduce=None) -> Tensor:
    d = _dim(dim, self.ndim)
    index = _check_index(index, "scatter_")
    _check_bounds(index, self.shape[d], "scatter_")
    return _inplace(R["scatter"], self, (self, index, value if src is None else src), (d, reduce))


def scatter_add_(self: Tensor, dim, index, src) -> Tensor:
    return scatter_(self, dim, index, src, reduce="add")


def uniform_(self: Tensor, a: float = 0.0, b: float = 1.0, *, generator=None) -> Tensor:
    from ._creation import _gen

    return _inplace(_UNIFORM_INTO, self, (self, *_gen(generator)._next(), builtins.float(a), builtins.float(b)))


def normal_(self: Tensor, mean: float = 0.0, std: float = 1.0, *, generator=None) -> Tensor:
    from ._creation import _gen

    return _inplace(_NORMAL_INTO, self, (self, *_gen(generator)._next(), builtins.float(mean),
                                         builtins.float(std)))


def bernoulli_(self: Tensor, p=0.5, *, generator=None) -> Tensor:
    from ._creation import bernoulli, full_like

    probs = p if isinstance(p, Tensor) else full_like(self, builtins.float(p), dtype=D.float32)
    return copy_(self, bernoulli(probs.to(D.float32) if not probs.dtype.is_floating_point else probs,
                                 generator=generator))


_UNIFORM_INTO = R["uniform_into"]
_NORMAL_INTO = R["normal_into"]


def exponential_(self: Tensor, lambd: float = 1.0, *, generator=None) -> Tensor:
    uniform_(self, 0.0, 1.0, generator=generator)
    with _NoGrad():
        r = -log1p(-self) / lambd  # noqa: F821
    self._value, self._meta = r._value, r._meta
    return self


class _NoGrad:
    def __enter__(self):
        self.p = state.grad_enabled
        state.grad_enabled = False

    def __exit__(self, *e):
        state.grad_enabled = self.p
