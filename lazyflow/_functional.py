"""Every tensor op as a function with torch's signature; the same functions become Tensor methods.

Each function validates and normalises its arguments (dims, shapes, dtypes) in Python, then makes exactly
one call into the active interpreter with a primitive from the op table. Composite ops (``std_mean``,
``chunk`` ...) are written here once on top of primitives and need no backward rule.
"""

from __future__ import annotations

import builtins
import collections
import math

import numpy as np

from ._core import dtypes as D
from ._core.context import state
from ._core.errors import DTypeError, IndexOutOfRangeError, OpError, ShapeError
from ._tensor import Tensor, _dim
from .ops.table import REGISTRY as R

__all__ = [  # the public ops, re-exported as lazyflow.<name>
    "abs", "absolute", "acos", "add", "addcdiv", "addcmul", "all", "amax", "amin", "any", "arccos", "arcsin",
    "arctan", "argmax", "argmin", "argsort", "argwhere", "asin", "atan", "atan2", "bitwise_and",
    "bitwise_left_shift", "bitwise_not", "bitwise_or", "bitwise_right_shift", "bitwise_xor", "bmm",
    "broadcast_shapes", "broadcast_tensors", "broadcast_to", "can_cast", "cat", "ceil", "chunk", "clamp", "clamp_",
    "clip", "clip_", "clone", "concat", "concatenate", "cos", "cosh", "cumprod", "cumsum", "diagonal", "div",
    "divide", "dot", "einsum", "eq", "erf", "erfinv", "exp", "exp2", "expand", "expand_as", "expm1", "fill_",
    "fix", "flatten", "flip", "fliplr", "flipud", "floor", "floor_divide", "fmax", "fmin", "fmod", "gather", "ge",
    "gelu", "greater", "greater_equal", "gt", "hstack", "index_add", "index_select", "isfinite", "isinf", "isnan",
    "le", "lerp", "less", "less_equal", "log", "log10", "log1p", "log2", "log_softmax", "logical_and",
    "logical_not", "logical_or", "logical_xor", "logsumexp", "lt", "masked_fill", "masked_select", "matmul", "max",
    "maximum", "mean", "min", "minimum", "mm", "moveaxis", "movedim", "mul", "multiply", "mv", "nan_to_num",
    "narrow", "ne", "neg", "negative", "nonzero", "norm", "not_equal", "one_hot", "outer", "pad", "permute", "pow",
    "prod", "reciprocal", "relu", "remainder", "repeat", "repeat_interleave", "reshape", "reshape_as",
    "result_type", "roll", "round", "rsqrt", "scatter", "scatter_add", "scatter_reduce", "sigmoid", "sign", "silu",
    "sin", "sinh", "softmax", "softplus", "sort", "split", "sqrt", "square", "squeeze", "stack", "std", "std_mean",
    "sub", "subtract", "sum", "swapaxes", "swapdims", "t", "take_along_dim", "tan", "tanh", "tensor_split", "tile",
    "topk", "transpose", "tril", "triu", "true_divide", "trunc", "unbind", "unflatten", "unsqueeze", "var",
    "var_mean", "view", "view_as", "vstack", "where", "zero_",
]

_SCALARS = (builtins.int, builtins.float, builtins.bool)


def _apply(op, args, statics=()):
    return state.interp.apply(op, args, statics)


def _inplace(op, target, args, statics=()):
    return state.interp.apply_inplace(op, target, args, statics)


def _dims(dim, ndim):
    """Normalise ``dim`` (None, int or sequence) to None or a sorted tuple of non-negative ints.

    A 0-d tensor accepts dim 0 / -1 like torch; reducing it over that dim is reducing it over nothing,
    which for a single element is the same as reducing over everything (None).
    """
    if dim is None:
        return None
    if isinstance(dim, (builtins.int, np.integer)):
        d = _dim(builtins.int(dim), ndim)
        return None if ndim == 0 else (d,)
    dim = tuple(dim)
    out = tuple(sorted({_dim(builtins.int(d), ndim) for d in dim}))
    if len(out) != len(dim):
        raise OpError(f"dim {dim} appears multiple times in the list of dims")
    return out if out and ndim else None


def _on_scalar(input, fn, dim):
    """Run a one-dim op ``fn(x, d)`` on a 0-d ``input`` as on its 1-element view (torch accepts dim 0/-1)."""
    _dim(dim, 0)
    out = fn(reshape(input, 1), 0)
    if isinstance(out, _MinMax):
        return _MinMax(*(reshape(o, ()) for o in out))
    if isinstance(out, tuple):
        return tuple(reshape(o, ()) for o in out)
    return reshape(out, ())


def _t(x):
    if isinstance(x, Tensor):
        return x
    from ._creation import as_tensor

    return as_tensor(x)


# ---------------------------------------------------------------- type promotion
def _promotion_item(x):
    if isinstance(x, Tensor):
        return (x.dtype, x.ndim)
    if isinstance(x, np.generic):
        x = x.item()
    if isinstance(x, (builtins.bool, builtins.int, builtins.float)):
        return builtins.bool if isinstance(x, builtins.bool) else builtins.int if isinstance(
            x, builtins.int) else builtins.float
    raise DTypeError(f"result_type expects Tensors or Python numbers, got {type(x).__name__}")


def result_type(tensor, other) -> D.DType:
    """The dtype torch's promotion gives an arithmetic op on ``tensor`` and ``other`` (``torch.result_type``).

    Dimensioned tensors outrank 0-d tensors, which outrank Python scalars, within the same category
    (bool < integer < floating); a higher category always wins.

    Args:
        tensor: a Tensor or Python number.
        other: a Tensor or Python number.
    Returns:
        A lazyflow dtype.
    Raises:
        DTypeError: an operand that is neither.
    >>> lf.result_type(lf.tensor([1, 2], dtype=lf.int8), 2.5)
    lazyflow.float32
    """
    return D.result_type(_promotion_item(tensor), _promotion_item(other))


def can_cast(from_: D.DType, to: D.DType) -> bool:
    """Whether torch allows an in-place result of dtype ``from_`` to be stored into a ``to`` tensor
    (``torch.can_cast``): never floating into integer/bool, nor integer into bool."""
    from_, to = D.to_dtype(from_), D.to_dtype(to)
    if from_.is_floating_point:
        return to.is_floating_point
    if from_ is not D.bool_:
        return to is not D.bool_
    return True


# ---------------------------------------------------------------- elementwise
_UNARY_DOC = {
    "exp": "e to the power of each element", "log": "natural logarithm", "log1p": "``log(1 + x)``",
    "expm1": "``exp(x) - 1``", "sqrt": "square root", "rsqrt": "``1 / sqrt(x)``", "sin": "sine",
    "cos": "cosine", "tan": "tangent", "tanh": "hyperbolic tangent", "sigmoid": "logistic sigmoid",
    "erf": "the error function", "erfinv": "inverse error function", "log2": "base-2 logarithm",
    "log10": "base-10 logarithm", "reciprocal": "``1 / x``", "silu": "``x * sigmoid(x)``",
    "asin": "arcsine", "acos": "arccosine", "atan": "arctangent", "sinh": "hyperbolic sine",
    "cosh": "hyperbolic cosine", "exp2": "``2 ** x``", "neg": "``-x``", "abs": "absolute value",
    "sign": "-1, 0 or 1 by sign", "square": "``x * x``", "relu": "``max(x, 0)``", "floor": "round down",
    "ceil": "round up", "trunc": "round towards zero", "isnan": "whether each element is NaN (bool)",
    "isinf": "whether each element is +-inf (bool)", "isfinite": "whether each element is finite (bool)",
    "logical_not": "``not x`` (bool)", "bitwise_not": "bitwise ``~x`` of an integer or bool tensor",
    "logsigmoid": "``log(sigmoid(x))``, computed stably",
}


def _unary(name):
    o = R[name]
    floating = o.dtypes == "float"

    def f(input: Tensor) -> Tensor:  # noqa: A002
        return state.interp.apply(o, (input,), ())

    f.__name__ = f.__qualname__ = name
    f.__doc__ = (
        f"Elementwise {_UNARY_DOC[name]} (``torch.{name}``).\n\n"
        f"Args:\n    input: a tensor{' (integer/bool inputs compute in the default float dtype)' if floating else ''}."
        f"\nReturns:\n    A new tensor of the same shape."
        f"\nRaises:\n    DTypeError: a dtype the function is not defined for.\n")
    return f


_UNARY = list(_UNARY_DOC)
for _n in _UNARY:
    globals()[_n] = _unary(_n)
negative = neg
absolute = abs  # noqa: A001
arcsin, arccos, arctan = asin, acos, atan
fix = trunc


def round(input: Tensor, *, decimals: int = 0) -> Tensor:  # noqa: A001,A002
    """Round to ``decimals`` decimal places, halves to even (like torch).

    Args:
        input: the tensor.
        decimals: number of decimal places (negative rounds to tens, hundreds...).
    Returns:
        A tensor of input's dtype.
    """
    return _apply(R["round"], (input,), (builtins.int(decimals),))


def gelu(input: Tensor, approximate: str = "none") -> Tensor:  # noqa: A002
    """GELU ``x * Phi(x)``, exact (``"none"``) or with the tanh approximation (``"tanh"``).

    Raises:
        OpError: ``approximate`` is neither ``"none"`` nor ``"tanh"``.
    """
    if approximate not in ("none", "tanh"):
        raise OpError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    return _apply(R["gelu"], (input,), (approximate,))


def softplus(input: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor:  # noqa: A002
    """``log(1 + exp(beta * x)) / beta``, and ``x`` itself where ``beta * x > threshold``."""
    return _apply(R["softplus"], (input,), (builtins.float(beta), builtins.float(threshold)))


def leaky_relu(input: Tensor, negative_slope: float = 0.01) -> Tensor:  # noqa: A002
    """``x`` where ``x >= 0``, else ``negative_slope * x``."""
    return _apply(R["leaky_relu"], (input,), (builtins.float(negative_slope),))


def elu(input: Tensor, alpha: float = 1.0) -> Tensor:  # noqa: A002
    """``x`` where ``x > 0``, else ``alpha * (exp(x) - 1)``."""
    return _apply(R["elu"], (input,), (builtins.float(alpha),))


def hardtanh(input: Tensor, min_val: float = -1.0, max_val: float = 1.0) -> Tensor:  # noqa: A002
    """``input`` clamped into ``[min_val, max_val]``."""
    return _apply(R["hardtanh"], (input,), (builtins.float(min_val), builtins.float(max_val)))


def nan_to_num(input: Tensor, nan: float = 0.0, posinf: float | None = None,  # noqa: A002
               neginf: float | None = None) -> Tensor:
    """NaN, +inf and -inf replaced by ``nan``, ``posinf`` and ``neginf`` (default: the dtype's extremes)."""
    return _apply(R["nan_to_num"], (input,), (nan, posinf, neginf))


_BINARY_DOC = {
    "mul": "``input * other``", "floor_divide": "``input // other`` (rounds towards -inf, like Python)",
    "remainder": "Python-style modulus ``input % other`` (sign of ``other``)",
    "fmod": "C-style remainder (sign of ``input``)", "pow": "``input ** other``",
    "atan2": "the angle of the point ``(other, input)``", "maximum": "elementwise maximum (NaN propagates)",
    "minimum": "elementwise minimum (NaN propagates)", "fmax": "elementwise maximum ignoring NaN",
    "fmin": "elementwise minimum ignoring NaN", "eq": "``input == other`` (bool)",
    "ne": "``input != other`` (bool)", "lt": "``input < other`` (bool)", "le": "``input <= other`` (bool)",
    "gt": "``input > other`` (bool)", "ge": "``input >= other`` (bool)",
    "logical_and": "``input and other`` on truth values (bool)",
    "logical_or": "``input or other`` on truth values (bool)",
    "logical_xor": "``input xor other`` on truth values (bool)", "bitwise_and": "bitwise ``&`` (integer/bool)",
    "bitwise_or": "bitwise ``|`` (integer/bool)", "bitwise_xor": "bitwise ``^`` (integer/bool)",
    "bitwise_left_shift": "``input << other`` (integers)", "bitwise_right_shift": "``input >> other`` (integers)",
}


def _binary(name):
    o = R[name]

    def f(input, other) -> Tensor:  # noqa: A002
        return state.interp.apply(o, (input, other), ())

    f.__name__ = f.__qualname__ = name
    f.__doc__ = (
        f"Elementwise {_BINARY_DOC[name]} (``torch.{name}``), broadcasting, with torch's type promotion.\n\n"
        "Args:\n    input: a tensor or Python scalar.\n    other: a tensor or Python scalar.\n"
        "Returns:\n    A tensor of the broadcast shape.\n"
        "Raises:\n    ShapeError: shapes that do not broadcast.\n    DTypeError: a dtype the op is not defined for.\n")
    return f


for _n in _BINARY_DOC:
    globals()[_n] = _binary(_n)
multiply = mul
greater, greater_equal, less, less_equal, not_equal = gt, ge, lt, le, ne

_ADD, _SUB, _MUL = R["add"], R["sub"], R["mul"]


def add(input, other, *, alpha=1) -> Tensor:  # noqa: A002
    """``input + alpha * other``, broadcasting, with torch's type promotion.

    Args:
        input: a tensor or Python scalar.
        other: a tensor or Python scalar.
        alpha: multiplier of ``other``.
    Returns:
        A tensor of the broadcast shape and promoted dtype.
    Raises:
        ShapeError: shapes that do not broadcast.
    >>> lf.add(lf.tensor([1, 2]), 1.5)
    tensor([2.5000, 3.5000])
    """
    if alpha != 1:
        other = other * alpha
    return state.interp.apply(_ADD, (input, other), ())


def _is_bool(x) -> bool:
    return isinstance(x, builtins.bool) or (isinstance(x, Tensor) and x.dtype is D.bool_)


def sub(input, other, *, alpha=1) -> Tensor:  # noqa: A002
    """``input - alpha * other`` (same arguments as :func:`add`).

    Raises:
        DTypeError: a bool operand (torch refuses; use ``logical_xor`` or ``~``).
        ShapeError: shapes that do not broadcast.
    """
    if _is_bool(input) or _is_bool(other):
        raise DTypeError("sub: subtraction with a bool operand is not supported; use logical_xor or ~ "
                         f"(got {_kind(input)} - {_kind(other)})")
    if alpha != 1:
        other = other * alpha
    return state.interp.apply(_SUB, (input, other), ())


def _kind(x) -> str:
    return f"Tensor({x.dtype.name}, shape={list(x.shape)})" if isinstance(x, Tensor) else repr(x)


subtract = sub


def div(input, other, *, rounding_mode: str | None = None) -> Tensor:  # noqa: A002
    """``input / other``: true division (always floating), or ``rounding_mode="trunc"`` / ``"floor"``.

    Raises:
        OpError: an unknown ``rounding_mode``.
        ShapeError: shapes that do not broadcast.
    """
    if rounding_mode is None:
        return _apply(R["div"], (input, other))
    if rounding_mode == "trunc":
        return _apply(R["div_trunc"], (input, other))
    if rounding_mode == "floor":
        return _apply(R["floor_divide"], (input, other))
    raise OpError(f"div expected rounding_mode to be one of None, 'trunc', or 'floor' but found "
                  f"{rounding_mode!r}")


divide = true_divide = div


def where(condition, input=None, other=None) -> Tensor:  # noqa: A002
    """``input`` where ``condition`` else ``other``, broadcasting all three.

    Args:
        condition: a bool tensor (other dtypes are tested for non-zero).
        input: values where the condition holds (tensor or scalar).
        other: values elsewhere (tensor or scalar).
    Returns:
        A tensor of the promoted dtype of ``input`` and ``other``; ``where(condition)`` alone is
        ``nonzero(condition, as_tuple=True)``.
    Raises:
        ShapeError: shapes that do not broadcast.
    """
    if input is None and other is None:
        return nonzero(condition, as_tuple=True)
    condition = _t(condition)
    if condition.dtype is not D.bool_:
        condition = condition.bool()
    return _apply(R["where"], (condition, input, other))


def clamp(input: Tensor, min=None, max=None) -> Tensor:  # noqa: A001,A002
    """Clamp into ``[min, max]``; either bound may be None, a scalar or a tensor (broadcast).

    Raises:
        OpError: both bounds are None.
    """
    if min is None and max is None:
        raise OpError("clamp: at least one of 'min' or 'max' must not be None")
    return _apply(R["clamp"], (input, min, max))


clip = clamp


def lerp(input, end, weight) -> Tensor:  # noqa: A002
    """``input + weight * (end - input)`` (``weight`` a scalar or tensor)."""
    return _apply(R["lerp"], (input, end, weight))


def addcmul(input, tensor1, tensor2, *, value=1) -> Tensor:  # noqa: A002
    """``input + value * tensor1 * tensor2``."""
    return _apply(R["addcmul"], (input, tensor1, tensor2), (value,))


def addcdiv(input, tensor1, tensor2, *, value=1) -> Tensor:  # noqa: A002
    """``input + value * tensor1 / tensor2``."""
    return _apply(R["addcdiv"], (input, tensor1, tensor2), (value,))


# ---------------------------------------------------------------- linear algebra
def matmul(input: Tensor, other: Tensor) -> Tensor:  # noqa: A002
    """Matrix product with torch's rules: 1-D operands are vectors, batch dimensions broadcast.

    Args:
        input: a tensor with at least one dimension.
        other: a tensor with at least one dimension.
    Returns:
        The product, of the promoted dtype.
    Raises:
        ShapeError: a 0-d operand, inner sizes that differ, or batch shapes that do not broadcast.
    >>> (lf.ones(2, 3) @ lf.ones(3)).shape
    (2,)
    """
    if isinstance(input, Tensor) and isinstance(other, Tensor):  # hot path: plain 2-D product, shapes that fit
        sa, sb = input._meta[0], other._meta[0]
        if len(sa) == 2 and len(sb) == 2 and sa[1] == sb[0]:
            return state.interp.apply(_MATMUL, (input, other), ())
    a, b = _t(input), _t(other)
    if a.ndim == 0 or b.ndim == 0:
        raise ShapeError(f"matmul: both arguments need at least 1 dimension, got shapes {list(a.shape)} "
                         f"and {list(b.shape)}")
    ka = a.shape[-1]
    kb = b.shape[-2] if b.ndim > 1 else b.shape[0]
    if ka != kb:
        raise ShapeError(f"matmul: shapes {list(a.shape)} and {list(b.shape)} cannot be multiplied "
                         f"({ka} != {kb})")
    if a.ndim > 2 or b.ndim > 2:
        try:
            np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
        except ValueError:
            raise ShapeError(f"matmul: batch dimensions of shapes {list(a.shape)} and {list(b.shape)} do not "
                             "broadcast") from None
    return state.interp.apply(_MATMUL, (a, b), ())


_MATMUL = R["matmul"]


def mm(input: Tensor, mat2: Tensor) -> Tensor:  # noqa: A002
    """Product of two matrices (2-D only; see :func:`matmul`).

    Raises:
        ShapeError: an operand that is not 2-D, or inner sizes that differ.
    """
    if input.ndim != 2 or mat2.ndim != 2:
        raise ShapeError(f"mm expects 2-D tensors, got shapes {list(input.shape)} and {list(mat2.shape)}")
    return matmul(input, mat2)


def bmm(input: Tensor, mat2: Tensor) -> Tensor:  # noqa: A002
    """Batched matrix product of ``(b, n, m)`` and ``(b, m, p)`` tensors (no broadcasting).

    Raises:
        ShapeError: operands that are not 3-D, batch sizes or inner sizes that differ.
    """
    if input.ndim != 3 or mat2.ndim != 3 or input.shape[0] != mat2.shape[0]:
        raise ShapeError(f"bmm expects 3-D tensors with equal batch sizes, got shapes {list(input.shape)} "
                         f"and {list(mat2.shape)}")
    return matmul(input, mat2)


def mv(input: Tensor, vec: Tensor) -> Tensor:  # noqa: A002
    """Matrix-vector product of a 2-D and a 1-D tensor.

    Raises:
        ShapeError: wrong ranks or sizes.
    """
    if input.ndim != 2 or vec.ndim != 1:
        raise ShapeError(f"mv expects a 2-D and a 1-D tensor, got shapes {list(input.shape)} and "
                         f"{list(vec.shape)}")
    return matmul(input, vec)


def dot(input: Tensor, other: Tensor) -> Tensor:  # noqa: A002
    """Inner product of two 1-D tensors of equal length.

    Raises:
        ShapeError: wrong ranks or sizes.
    """
    if input.ndim != 1 or other.ndim != 1:
        raise ShapeError(f"dot expects 1-D tensors, got shapes {list(input.shape)} and {list(other.shape)}")
    return matmul(input, other)


def outer(input: Tensor, vec2: Tensor) -> Tensor:  # noqa: A002
    """Outer product ``input[i] * vec2[j]`` of two 1-D tensors.

    Raises:
        ShapeError: an operand that is not 1-D.
    """
    if input.ndim != 1 or vec2.ndim != 1:
        raise ShapeError(f"outer expects 1-D tensors, got shapes {list(input.shape)} and {list(vec2.shape)}")
    return _apply(R["outer"], (input, vec2))


def einsum(equation: str, *operands) -> Tensor:
    """Einstein summation, e.g. ``einsum("bij,bjk->bik", a, b)`` (operands may also come as one list).

    Raises:
        ShapeError: the equation does not fit the operands' ranks or sizes.
    """
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    return _apply(R["einsum"], tuple(_t(o) for o in operands), (equation.replace(" ", ""),))


# ---------------------------------------------------------------- reductions
def _opt_dtype(dtype):
    return None if dtype is None else D.to_dtype(dtype)


def _reduce(name, input, dim, keepdim, *extra):  # noqa: A002
    return _apply(R[name], (input,), (_dims(dim, input.ndim), builtins.bool(keepdim), *extra))


def sum(input: Tensor, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:  # noqa: A001,A002
    """Sum of elements over ``dim``.

    Args:
        input: the tensor.
        dim: an int or a tuple of ints; None (or ``()``) reduces every dimension.
        keepdim: keep reduced dimensions with size 1.
        dtype: accumulate and return in this dtype.
    Returns:
        The sum; integer and bool inputs sum to int64 like torch.
    Raises:
        IndexOutOfRangeError: a dim outside ``[-ndim, ndim)``.
    >>> lf.tensor([[1, 2], [3, 4]]).sum(1)
    tensor([3, 7])
    """
    if dim is None and keepdim is False and dtype is None:  # hot path: the full reduction
        return state.interp.apply(_SUM, (input,), _SUM_ALL)
    return _apply(_SUM, (input,), (_dims(dim, input.ndim), builtins.bool(keepdim), _opt_dtype(dtype)))


_SUM = R["sum"]
_SUM_ALL = (None, False, None)


def prod(input: Tensor, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:  # noqa: A002
    """Product of elements over ``dim`` (int, tuple or None for all); integers multiply in int64.

    Args/Returns/Raises: as :func:`sum`.
    """
    return _apply(R["prod"], (input,), (_dims(dim, input.ndim), builtins.bool(keepdim), _opt_dtype(dtype)))


def mean(input: Tensor, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:  # noqa: A002
    """Mean over ``dim`` (int, tuple or None for all).

    Raises:
        DTypeError: an integer or bool input without ``dtype=`` (torch refuses to guess the result type).
        IndexOutOfRangeError: a dim out of range.
    """
    if dtype is not None:
        input = input.to(dtype)  # noqa: A001
    if not input.dtype.is_floating_point:
        raise DTypeError(f"mean(): could not infer output dtype. Input dtype must be floating point, "
                         f"got {input.dtype}; pass dtype= or convert with .float()")
    return _reduce("mean", input, dim, keepdim)


def amax(input: Tensor, dim=(), keepdim: bool = False) -> Tensor:  # noqa: A002
    """Maximum over ``dim`` (int or tuple; ``()`` means all dims); gradient split evenly between ties."""
    return _reduce("amax", input, dim, keepdim)


def amin(input: Tensor, dim=(), keepdim: bool = False) -> Tensor:  # noqa: A002
    """Minimum over ``dim`` (int or tuple; ``()`` means all dims)."""
    return _reduce("amin", input, dim, keepdim)


# ``(values, indices)`` like torch.return_types; a namedtuple, so graph mode can return it (a JAX pytree)
_MinMax = collections.namedtuple("return_types", ["values", "indices"])


def _extreme(name, input, dim, keepdim):  # noqa: A002
    if input.ndim == 0:
        return _on_scalar(input, lambda x, d: _extreme(name, x, d, keepdim), dim)
    d = _dim(dim, input.ndim)
    if input.shape[d] == 0:
        raise IndexOutOfRangeError(f"{name[:3]}(): cannot reduce over dimension {d} of size 0 "
                                   f"(input shape {list(input.shape)})")
    return _MinMax(*_apply(R[name], (input,), (d, builtins.bool(keepdim))))


def max(input: Tensor, dim=None, keepdim: bool = False):  # noqa: A001,A002
    """The largest element; with ``dim``: ``(values, indices)`` along it; with a tensor: elementwise maximum.

    Args:
        input: the tensor.
        dim: None (all elements), an int, or a Tensor ``other`` (then ``maximum(input, other)``).
        keepdim: keep the reduced dimension with size 1.
    Returns:
        A tensor, or a ``(values, indices)`` tuple with ``.values`` / ``.indices``.
    Raises:
        IndexOutOfRangeError: ``dim`` out of range.
    """
    if isinstance(dim, Tensor):
        return maximum(input, dim)
    if dim is None:
        return _reduce("amax", input, None, False)
    return _extreme("max_dim", input, dim, keepdim)


def min(input: Tensor, dim=None, keepdim: bool = False):  # noqa: A001,A002
    """The smallest element; with ``dim``: ``(values, indices)``; with a tensor: elementwise minimum.

    Args/Returns/Raises: as :func:`max`.
    """
    if isinstance(dim, Tensor):
        return minimum(input, dim)
    if dim is None:
        return _reduce("amin", input, None, False)
    return _extreme("min_dim", input, dim, keepdim)


def _arg(name, input, dim, keepdim):  # noqa: A002
    if dim is not None and input.ndim == 0:
        return _on_scalar(input, lambda x, d: _arg(name, x, d, keepdim), dim)
    return _apply(R[name], (input,), (None if dim is None else _dim(dim, input.ndim), builtins.bool(keepdim)))


def argmax(input: Tensor, dim: int | None = None, keepdim: bool = False) -> Tensor:  # noqa: A002
    """Index (int64) of the largest element, over the flattened tensor or along ``dim``."""
    return _arg("argmax", input, dim, keepdim)


def argmin(input: Tensor, dim: int | None = None, keepdim: bool = False) -> Tensor:  # noqa: A002
    """Index (int64) of the smallest element, over the flattened tensor or along ``dim``."""
    return _arg("argmin", input, dim, keepdim)


def _moments(name, input, dim, unbiased, keepdim, correction):  # noqa: A002
    if isinstance(dim, builtins.bool):  # torch's legacy var(input, unbiased)
        dim, unbiased = None, dim
    if unbiased is not None and correction is not None:
        raise OpError(f"{name}: pass either unbiased or correction, not both")
    if correction is None:
        correction = 0 if unbiased is False else 1
    elif builtins.float(correction).is_integer():
        correction = builtins.int(correction)
    if not input.dtype.is_floating_point:
        raise DTypeError(f"{name}(): expected a floating point input, got {input.dtype}")
    return _apply(R[name], (input,), (_dims(dim, input.ndim), correction, builtins.bool(keepdim)))


def var(input: Tensor, dim=None, unbiased: bool | None = None, keepdim: bool = False, *,  # noqa: A002
        correction=None) -> Tensor:
    """Variance over ``dim``, divided by ``N - correction`` (default 1, Bessel; ``unbiased=False`` is 0).

    Args:
        input: a floating tensor.
        dim: int, tuple, or None for all elements (``var(x, False)`` is torch's legacy ``unbiased`` form).
        unbiased: legacy switch between ``correction=1`` (True) and ``0`` (False).
        keepdim: keep reduced dimensions.
        correction: the difference between sample size and degrees of freedom.
    Raises:
        DTypeError: integer or bool input.
        IndexOutOfRangeError: a dim out of range.
    """
    return _moments("var", input, dim, unbiased, keepdim, correction)


def std(input: Tensor, dim=None, unbiased: bool | None = None, keepdim: bool = False, *,  # noqa: A002
        correction=None) -> Tensor:
    """Standard deviation over ``dim``: the square root of :func:`var` (same arguments)."""
    return _moments("std", input, dim, unbiased, keepdim, correction)


def var_mean(input: Tensor, dim=None, unbiased: bool | None = None, keepdim: bool = False, *,  # noqa: A002
             correction=None) -> tuple[Tensor, Tensor]:
    """``(var(input, ...), mean(input, ...))`` over the same dims."""
    if isinstance(dim, builtins.bool):
        dim, unbiased = None, dim
    return var(input, dim, unbiased, keepdim, correction=correction), mean(input, dim, keepdim)


def std_mean(input: Tensor, dim=None, unbiased: bool | None = None, keepdim: bool = False, *,  # noqa: A002
             correction=None) -> tuple[Tensor, Tensor]:
    """``(std(input, ...), mean(input, ...))`` over the same dims."""
    if isinstance(dim, builtins.bool):
        dim, unbiased = None, dim
    return std(input, dim, unbiased, keepdim, correction=correction), mean(input, dim, keepdim)


def logsumexp(input: Tensor, dim, keepdim: bool = False) -> Tensor:  # noqa: A002
    """``log(sum(exp(input), dim))`` computed stably; integer inputs give the default float dtype."""
    return _reduce("logsumexp", input, dim, keepdim)


def norm(input: Tensor, p="fro", dim=None, keepdim: bool = False, dtype=None) -> Tensor:  # noqa: A002
    """Vector p-norm over ``dim`` (all elements when None); ``"fro"`` and None mean the 2-norm.

    Args:
        input: the tensor.
        p: a number (including ``inf``, ``-inf`` and 0, the count of non-zeros) or ``"fro"``.
        dim: int, tuple or None.
        keepdim: keep reduced dimensions.
        dtype: cast the input to this dtype first.
    Raises:
        OpError: an unsupported ``p`` (matrix norms such as ``"nuc"`` are not implemented).
    """
    if dtype is not None:
        input = input.to(dtype)  # noqa: A001
    if p is None:
        p = "fro"
    if isinstance(p, (builtins.int, builtins.float)) and not isinstance(p, builtins.bool):
        p = builtins.float(p) if not builtins.float(p).is_integer() or math.isinf(p) else builtins.int(p)
    elif p != "fro":
        raise OpError(f"norm: unsupported p={p!r}; use a number, inf, -inf or 'fro'")
    return _apply(R["norm"], (input,), (p, _dims(dim, input.ndim), builtins.bool(keepdim)))


def _logical_reduce(name, input, dim, keepdim):  # noqa: A002
    if dim is not None and not isinstance(dim, (builtins.int, np.integer)) and len(tuple(dim)) == 0:
        return ne(input, 0) if input.dtype is not D.bool_ else input  # torch: an empty dim list reduces nothing
    return _reduce(name, input, dim, keepdim)


def all(input: Tensor, dim=None, keepdim: bool = False) -> Tensor:  # noqa: A001,A002
    """Whether every element (over ``dim``: int, tuple or None) is non-zero; a bool tensor."""
    return _logical_reduce("all", input, dim, keepdim)


def any(input: Tensor, dim=None, keepdim: bool = False) -> Tensor:  # noqa: A001,A002
    """Whether any element (over ``dim``: int, tuple or None) is non-zero; a bool tensor."""
    return _logical_reduce("any", input, dim, keepdim)


def _scan(name, input, dim, dtype):  # noqa: A002
    if input.ndim == 0:
        return _on_scalar(input, lambda x, d: _scan(name, x, d, dtype), dim)
    return _apply(R[name], (input,), (_dim(dim, input.ndim), _opt_dtype(dtype)))


def cumsum(input: Tensor, dim: int, *, dtype=None) -> Tensor:  # noqa: A002
    """Running sum along ``dim`` (integers accumulate in int64 unless ``dtype`` says otherwise).

    Raises:
        IndexOutOfRangeError: ``dim`` out of range.
    """
    return _scan("cumsum", input, dim, dtype)


def cumprod(input: Tensor, dim: int, *, dtype=None) -> Tensor:  # noqa: A002
    """Running product along ``dim``."""
    return _scan("cumprod", input, dim, dtype)


def _softmax_like(name, input, dim, dtype):  # noqa: A002
    if dtype is not None:
        input = input.to(dtype)  # noqa: A001
    if dim is None:  # torch's legacy implicit choice
        dim = 0 if input.ndim in (0, 1, 3) else 1
    if input.ndim == 0:
        return _on_scalar(input, lambda x, d: _softmax_like(name, x, d, None), dim)
    return _apply(R[name], (input,), (_dim(dim, input.ndim),))


def softmax(input: Tensor, dim: int | None = None, dtype=None) -> Tensor:  # noqa: A002
    """``exp(x) / sum(exp(x))`` along ``dim``.

    Args:
        input: the tensor (integers are computed in the default float dtype).
        dim: the dimension that sums to one.
        dtype: cast to this dtype first.
    Raises:
        IndexOutOfRangeError: ``dim`` out of range.
    """
    return _softmax_like("softmax", input, dim, dtype)


def log_softmax(input: Tensor, dim: int | None = None, dtype=None) -> Tensor:  # noqa: A002
    """``log(softmax(x))`` along ``dim``, computed stably (same arguments as :func:`softmax`)."""
    return _softmax_like("log_softmax", input, dim, dtype)


def cast(input: Tensor, dtype) -> Tensor:  # noqa: A002
    """``input`` converted to ``dtype`` (differentiable between floating types); see ``Tensor.to``."""
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
    """The same elements in a new shape (one ``-1`` is inferred): ``reshape(2, 3)`` or ``reshape((2, 3))``.

    lazyflow has no storage views: the result never aliases ``input`` for writes.

    Raises:
        ShapeError: the element counts differ, or more than one ``-1``.
    """
    shape = _infer_shape(_shape_args(shape), input.numel(), "reshape")
    if shape == input.shape:
        return _apply(R["reshape"], (input,), (shape,)) if input._rg else input.detach()
    return _apply(R["reshape"], (input,), (shape,))


def view(input: Tensor, *shape) -> Tensor:  # noqa: A002
    """``reshape`` under torch's other name (a copy-on-write value, not a storage view; see the README).

    Raises:
        ShapeError: as :func:`reshape`.
        DTypeError: ``view(dtype)`` bit reinterpretation, which lazyflow does not support.
    """
    if len(shape) == 1 and (isinstance(shape[0], D.DType)):
        raise DTypeError("view(dtype) reinterpretation is not supported; use .to(dtype)")
    return reshape(input, *shape)


def view_as(input: Tensor, other: Tensor) -> Tensor:  # noqa: A002
    """``input`` reshaped to ``other.shape``."""
    return reshape(input, other.shape)


def reshape_as(input: Tensor, other: Tensor) -> Tensor:  # noqa: A002
    """``input`` reshaped to ``other.shape``."""
    return reshape(input, other.shape)


def flatten(input: Tensor, start_dim: int = 0, end_dim: int = -1) -> Tensor:  # noqa: A002
    """Merge dimensions ``start_dim..end_dim`` (inclusive) into one; a 0-d input becomes 1-D.

    Raises:
        IndexOutOfRangeError: a dim out of range.
        OpError: ``start_dim`` after ``end_dim``.
    """
    if input.ndim == 0:
        return reshape(input, 1)
    s, e = _dim(start_dim, input.ndim), _dim(end_dim, input.ndim)
    if s > e:
        raise OpError(f"flatten() has invalid args: start_dim {start_dim} cannot come after end_dim {end_dim}")
    shp = input.shape
    return reshape(input, shp[:s] + (math.prod(shp[s:e + 1]),) + shp[e + 1:])


def unflatten(input: Tensor, dim: int, sizes) -> Tensor:  # noqa: A002
    """Split dimension ``dim`` into ``sizes`` (one ``-1`` is inferred).

    Raises:
        ShapeError: ``sizes`` does not multiply to the size of ``dim``.
    """
    d = _dim(dim, input.ndim)
    sizes = _infer_shape(sizes, input.shape[d], "unflatten")
    return reshape(input, input.shape[:d] + sizes + input.shape[d + 1:])


def squeeze(input: Tensor, dim=None) -> Tensor:  # noqa: A002
    """Drop size-1 dimensions: all of them, or those among ``dim`` (int or tuple); other sizes stay."""
    if dim is None:
        return reshape(input, tuple(s for s in input.shape if s != 1))
    dims = _dims(dim, input.ndim) or ()
    return reshape(input, tuple(s for i, s in enumerate(input.shape) if not (i in dims and s == 1)))


def unsqueeze(input: Tensor, dim: int) -> Tensor:  # noqa: A002
    """Insert a size-1 dimension at ``dim`` (in ``[-ndim-1, ndim]``)."""
    d = _dim(dim, input.ndim + 1)
    return reshape(input, input.shape[:d] + (1,) + input.shape[d:])


def permute(input: Tensor, *dims) -> Tensor:  # noqa: A002
    """Reorder dimensions: ``permute(2, 0, 1)`` or ``permute((2, 0, 1))``.

    Raises:
        ShapeError: not one entry per dimension.
        OpError: a repeated dimension.
    """
    dims = _shape_args(dims)
    if len(dims) != input.ndim:
        raise ShapeError(f"permute: number of dims {len(dims)} doesn't match the tensor's {input.ndim} "
                         f"(shape {list(input.shape)})")
    nd = tuple(_dim(d, input.ndim) for d in dims)
    if len(set(nd)) != len(nd):
        raise OpError(f"permute: repeated dim in {tuple(dims)}")
    if nd == tuple(range(input.ndim)):
        return reshape(input, input.shape)
    return _apply(R["permute"], (input,), (nd,))


def transpose(input: Tensor, dim0: int, dim1: int) -> Tensor:  # noqa: A002
    """Swap dimensions ``dim0`` and ``dim1``."""
    if input.ndim == 0:
        _dim(dim0, 0), _dim(dim1, 0)
        return reshape(input, ())
    a, b = _dim(dim0, input.ndim), _dim(dim1, input.ndim)
    p = list(range(input.ndim))
    p[a], p[b] = p[b], p[a]
    return permute(input, *p)


swapaxes = swapdims = transpose


def t(input: Tensor) -> Tensor:  # noqa: A002
    """Transpose of a matrix (0-D and 1-D tensors are returned as they are).

    Raises:
        ShapeError: more than 2 dimensions.
    """
    if input.ndim > 2:
        raise ShapeError(f"t() expects a tensor with <= 2 dimensions, but self is {input.ndim}D")
    return transpose(input, 0, 1) if input.ndim == 2 else reshape(input, input.shape)


def movedim(input: Tensor, source, destination) -> Tensor:  # noqa: A002
    """Move dimension(s) ``source`` to position(s) ``destination``; the others keep their order."""
    src = [source] if isinstance(source, builtins.int) else list(source)
    dst = [destination] if isinstance(destination, builtins.int) else list(destination)
    if len(src) != len(dst):
        raise ShapeError(f"movedim: source {src} and destination {dst} must have the same number of dims")
    src = [_dim(s, input.ndim) for s in src]
    dst = [_dim(d, input.ndim) for d in dst]
    order = [i for i in range(input.ndim) if i not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return permute(input, *order)


moveaxis = movedim


def expand(input: Tensor, *sizes) -> Tensor:  # noqa: A002
    """Broadcast size-1 dimensions to ``sizes`` (``-1`` keeps a size; new leading dims may be added).

    Raises:
        ShapeError: fewer sizes than dimensions, a non-singleton size that differs, or ``-1`` for a new
            leading dimension.
    """
    sizes = tuple(builtins.int(s) for s in _shape_args(sizes))
    if len(sizes) < input.ndim:
        raise ShapeError(f"expand: the number of sizes provided ({len(sizes)}) must be greater or equal to "
                         f"the number of dimensions in the tensor ({input.ndim})")
    lead = len(sizes) - input.ndim
    shp = (1,) * lead + input.shape
    out = []
    for i, (s, cur) in enumerate(zip(sizes, shp)):
        if s == -1:
            if i < lead:
                raise ShapeError(f"expand: the expanded size -1 isn't allowed in a leading, non-existing "
                                 f"dimension {i}; target sizes {list(sizes)}, tensor shape {list(input.shape)}")
            s = cur
        if s < 0 or (cur != 1 and cur != s):
            raise ShapeError(f"expand: the expanded size of the tensor ({s}) must match the existing size "
                             f"({cur}) at non-singleton dimension {i}; target sizes {list(sizes)}, tensor "
                             f"shape {list(input.shape)}")
        out.append(s)
    out = tuple(out)
    if out == input.shape:
        return reshape(input, out)
    return _apply(R["expand"], (input,), (out,))


def broadcast_to(input: Tensor, size) -> Tensor:  # noqa: A002
    """``input`` broadcast to ``size`` (see :func:`expand`)."""
    return expand(input, *size)


def expand_as(input: Tensor, other: Tensor) -> Tensor:  # noqa: A002
    """``input`` expanded to ``other.shape``."""
    return expand(input, *other.shape)


def broadcast_shapes(*shapes) -> tuple:
    """The shape that ``shapes`` broadcast to (torch's rules, which are numpy's).

    Raises:
        ShapeError: shapes that do not broadcast.
    """
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        raise ShapeError(f"shapes {[list(s) for s in shapes]} cannot be broadcast together") from None


def broadcast_tensors(*tensors) -> tuple:
    """The tensors expanded to their common broadcast shape."""
    shape = broadcast_shapes(*[t.shape for t in tensors])
    return tuple(expand(t, *shape) for t in tensors)


def _check_reps(reps, what):
    if builtins.any(r < 0 for r in reps):
        raise ShapeError(f"{what}: repeats must be non-negative, got {list(reps)}")


def repeat(input: Tensor, *sizes) -> Tensor:  # noqa: A002
    """Tile the tensor ``sizes[i]`` times along each dimension (``Tensor.repeat``; extra sizes add leading dims).

    Raises:
        ShapeError: fewer sizes than dimensions, or a negative size.
    """
    sizes = tuple(builtins.int(s) for s in _shape_args(sizes))
    if len(sizes) < input.ndim:
        raise ShapeError(f"repeat: number of repeat dims ({len(sizes)}) can not be smaller than number of "
                         f"tensor dims ({input.ndim})")
    _check_reps(sizes, "repeat")
    return _apply(R["tile"], (input,), (sizes,))


def tile(input: Tensor, *dims) -> Tensor:  # noqa: A002
    """Like :func:`repeat`, but fewer ``dims`` than dimensions are padded with leading 1s.

    Raises:
        ShapeError: a negative repetition.
    """
    dims = tuple(builtins.int(s) for s in _shape_args(dims))
    _check_reps(dims, "tile")
    if len(dims) < input.ndim:
        dims = (1,) * (input.ndim - len(dims)) + dims
    return _apply(R["tile"], (input,), (dims,))


def repeat_interleave(input: Tensor, repeats, dim: int | None = None) -> Tensor:  # noqa: A002
    """Repeat each element ``repeats`` times (int, or one count per element) along ``dim``.

    With ``dim=None`` the input is flattened first. Counts given as a tensor are read eagerly.

    Raises:
        ShapeError: a negative count, or a count list whose length differs from the dimension.
    """
    if isinstance(repeats, Tensor):
        repeats = repeats.item() if repeats.ndim == 0 else tuple(repeats.tolist())
    elif not isinstance(repeats, (builtins.int, np.integer)):
        repeats = tuple(builtins.int(r) for r in repeats)
    n = input.numel() if dim is None else input.shape[_dim(dim, input.ndim)]
    reps = repeats if isinstance(repeats, tuple) else (repeats,)
    _check_reps(reps, "repeat_interleave")
    if isinstance(repeats, tuple) and len(repeats) not in (1, n):
        raise ShapeError(f"repeat_interleave: repeats must have the same size as input along dim ({n}), "
                         f"got {len(repeats)}")
    if isinstance(repeats, tuple) and len(repeats) == 1:
        repeats = repeats[0]
    return _apply(R["repeat_interleave"], (input,), (builtins.int(repeats) if not isinstance(repeats, tuple)
                                                      else repeats, None if dim is None else _dim(dim, input.ndim)))


def _tensor_list(tensors, what):
    if isinstance(tensors, Tensor):
        raise OpError(f"{what} expects a list or tuple of tensors, got a single Tensor of shape "
                      f"{list(tensors.shape)}")
    ts = [_t(x) for x in tensors]
    if not ts:
        raise OpError(f"{what} expects a non-empty list of tensors")
    return ts


def cat(tensors, dim: int = 0) -> Tensor:
    """Concatenate along ``dim``; shapes must match except in ``dim`` (dtypes promote like torch).

    Args:
        tensors: a sequence of tensors (1-D empty tensors are skipped, like torch).
        dim: the dimension to join along.
    Raises:
        ShapeError: ranks or sizes outside ``dim`` differ.
        OpError: an empty list.
    """
    ts = _tensor_list(tensors, "cat")
    ts = [x for x in ts if not (x.ndim == 1 and x.shape[0] == 0)] or ts[:1]
    nd = ts[0].ndim
    if nd == 0:
        raise ShapeError("cat: zero-dimensional tensor cannot be concatenated; unsqueeze it first")
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
    """Join equally-shaped tensors along a new dimension ``dim``.

    Raises:
        ShapeError: shapes differ.
        OpError: an empty list.
    """
    ts = _tensor_list(tensors, "stack")
    for x in ts:
        if x.shape != ts[0].shape:
            raise ShapeError(f"stack expects each tensor to be equal size, got shapes "
                             f"{[list(y.shape) for y in ts]}")
    return _apply(R["stack"], tuple(ts), (_dim(dim, ts[0].ndim + 1),))


def hstack(tensors) -> Tensor:
    """Concatenate along dimension 1 (dimension 0 for 1-D tensors)."""
    ts = _tensor_list(tensors, "hstack")
    return cat(ts, 0 if ts[0].ndim == 1 else 1)


def vstack(tensors) -> Tensor:
    """Concatenate along dimension 0, 1-D tensors first becoming rows."""
    return cat([x if x.ndim > 1 else x.reshape(1, -1) for x in _tensor_list(tensors, "vstack")], 0)


def split(tensor: Tensor, split_size_or_sections, dim: int = 0) -> tuple:
    """Split into pieces of ``split_size`` (int; the last may be smaller) or of the listed sizes.

    Raises:
        ShapeError: sizes that do not sum to the dimension.
        OpError: a non-positive split size.
    """
    d = _dim(dim, tensor.ndim)
    n = tensor.shape[d]
    if isinstance(split_size_or_sections, (builtins.int, np.integer)):
        s = builtins.int(split_size_or_sections)
        if s <= 0 and not (s == 0 and n == 0):
            raise OpError(f"split expects split_size be positive, got {s}")
        sizes = [s] * (n // s) + ([n % s] if n % s else []) if s else [0]
        if not sizes:
            sizes = [0]
    else:
        sizes = [builtins.int(s) for s in split_size_or_sections]
        if builtins.sum(sizes) != n or builtins.any(s < 0 for s in sizes):
            raise ShapeError(f"split_with_sizes expects split_sizes to sum exactly to {n} (input tensor's size "
                             f"at dimension {d}), but got split_sizes={sizes}")
    out = _apply(R["split"], (tensor,), (tuple(sizes), d))
    return out if isinstance(out, tuple) else (out,)


def chunk(input: Tensor, chunks: int, dim: int = 0) -> tuple:  # noqa: A002
    """Split into ``chunks`` pieces of ``ceil(size / chunks)`` (fewer pieces when that covers the dimension).

    Raises:
        OpError: ``chunks`` < 1.
    """
    if chunks <= 0:
        raise OpError(f"chunk expects `chunks` to be greater than 0, got: {chunks}")
    n = input.shape[_dim(dim, input.ndim)]
    return split(input, builtins.max(1, math.ceil(n / chunks)), dim)


def tensor_split(input: Tensor, indices_or_sections, dim: int = 0) -> tuple:  # noqa: A002
    """Split into ``n`` nearly equal pieces (an int: the first ``size % n`` get one more), or at the listed indices.

    Raises:
        OpError: a section count < 1.
    """
    d = _dim(dim, input.ndim)
    n = input.shape[d]
    if isinstance(indices_or_sections, (builtins.int, np.integer)):
        sections = builtins.int(indices_or_sections)
        if sections < 1:
            raise OpError(f"tensor_split: number of sections must be at least 1, got {sections}")
        q, r = divmod(n, sections)
        return split(input, [q + 1] * r + [q] * (sections - r), d)
    bounds = [builtins.min(builtins.max(builtins.int(i) + (n if i < 0 else 0), 0), n) for i in indices_or_sections]
    edges = [0] + bounds + [n]
    sizes = [builtins.max(0, b - a) for a, b in zip(edges[:-1], edges[1:])]
    starts = edges[:-1]
    return tuple(narrow(input, d, builtins.min(s, n), sz) for s, sz in zip(starts, sizes))


def narrow(input: Tensor, dim: int, start: int, length: int) -> Tensor:  # noqa: A002
    """The slice ``start : start + length`` along ``dim``.

    Raises:
        IndexOutOfRangeError: the slice leaves the dimension.
    """
    d = _dim(dim, input.ndim)
    n = input.shape[d]
    if start < 0:
        start += n
    if not (0 <= start <= n and 0 <= length and start + length <= n):
        raise IndexOutOfRangeError(f"narrow: start {start} + length {length} exceeds dimension {d} of size {n}")
    return input[(slice(None),) * d + (slice(start, start + length),)]


def unbind(input: Tensor, dim: int = 0) -> tuple:  # noqa: A002
    """The slices along ``dim``, each without that dimension."""
    d = _dim(dim, input.ndim)
    if input.shape[d] == 0:
        return ()
    parts = split(input, 1, d)
    return tuple(squeeze(p, d) for p in parts)


def flip(input: Tensor, *dims) -> Tensor:  # noqa: A002
    """Reverse the order of elements along ``dims``: ``flip(0, 1)`` or ``flip((0, 1))``."""
    dims = _shape_args(dims)
    if len(dims) == 1 and isinstance(dims[0], (builtins.int, np.integer)):
        dims = (builtins.int(dims[0]),)
    return _apply(R["flip"], (input,), (_dims(tuple(dims), input.ndim) or (),))


def fliplr(input: Tensor) -> Tensor:  # noqa: A002
    """Reverse dimension 1 (needs at least 2 dims)."""
    if input.ndim < 2:
        raise ShapeError(f"fliplr: input must be >= 2-d, got shape {list(input.shape)}")
    return flip(input, (1,))


def flipud(input: Tensor) -> Tensor:  # noqa: A002
    """Reverse dimension 0 (needs at least 1 dim)."""
    if input.ndim < 1:
        raise ShapeError("flipud: input must be >= 1-d, got a 0-d tensor")
    return flip(input, (0,))


def roll(input: Tensor, shifts, dims=None) -> Tensor:  # noqa: A002
    """Shift elements circularly by ``shifts`` along ``dims`` (the flattened tensor when ``dims`` is None).

    Raises:
        OpError: ``shifts`` and ``dims`` of different lengths.
    """
    if dims is None:
        if not isinstance(shifts, (builtins.int, np.integer)):
            shifts = tuple(shifts)
            if len(shifts) != 1:
                raise OpError(f"roll: shifts {shifts} need dims when there is more than one")
            shifts = shifts[0]
        return roll(flatten(input), shifts, 0).reshape(input.shape)
    shifts = (builtins.int(shifts),) if isinstance(shifts, (builtins.int, np.integer)) else tuple(shifts)
    dims = (builtins.int(dims),) if isinstance(dims, (builtins.int, np.integer)) else tuple(dims)
    if len(shifts) != len(dims):
        raise OpError(f"roll: shifts {shifts} and dims {dims} must have the same length")
    if input.ndim == 0:
        return reshape(input, ())
    return _apply(R["roll"], (input,), (shifts, tuple(_dim(d, input.ndim) for d in dims)))


def _check_index(index, what):
    index = _t(index)
    if index.dtype.is_floating_point or index.dtype is D.bool_:
        raise DTypeError(f"{what}(): Expected dtype int64 for index, got {index.dtype}")
    return index


def _check_bounds(index, size, what, dim=None):
    """Eager bounds check of an index tensor (graph mode cannot read values; JAX would clamp silently)."""
    from ._tensor import _Tracer

    if isinstance(index._value, _Tracer) or index.numel() == 0:
        return
    a = np.asarray(index._value)
    lo, hi = builtins.int(a.min()), builtins.int(a.max())
    if lo < 0 or hi >= size:
        bad = hi if hi >= size else lo
        where = "" if dim is None else f" {dim}"
        raise IndexOutOfRangeError(f"{what}(): index {bad} is out of bounds for dimension{where} with size {size}")


def _check_index_shape(index, other, d, what, other_name):
    if index.ndim != other.ndim or builtins.any(
            i > o for k, (i, o) in enumerate(zip(index.shape, other.shape)) if k != d):
        raise ShapeError(f"{what}(): index of shape {list(index.shape)} must have the same number of dimensions "
                         f"as {other_name} {list(other.shape)} and be no larger outside dimension {d}")


def gather(input: Tensor, dim: int, index: Tensor, *, sparse_grad: bool = False) -> Tensor:  # noqa: A002
    """``out[i][j][k] = input[i][index[i][j][k]][k]`` for ``dim=1`` (and likewise for other dims).

    Args:
        input: the source tensor.
        dim: the dimension to index along.
        index: an integer tensor of the same rank, no larger than ``input`` outside ``dim``.
    Returns:
        A tensor with ``index``'s shape.
    Raises:
        DTypeError: a non-integer index.
        ShapeError: an index of another rank or larger outside ``dim``.
        IndexOutOfRangeError: an index outside ``[0, input.shape[dim])``.
    """
    d = _dim(dim, input.ndim)
    index = _check_index(index, "gather")
    _check_index_shape(index, input, d, "gather", "input")
    _check_bounds(index, input.shape[d] if input.ndim else 1, "gather", d)
    return _apply(R["gather"], (input, index), (d,))


def take_along_dim(input: Tensor, indices: Tensor, dim: int) -> Tensor:  # noqa: A002
    """:func:`gather` with torch's ``take_along_dim`` argument order."""
    return gather(input, dim, indices)


def _scatter(what, input, dim, index, src, reduce):  # noqa: A002
    d = _dim(dim, input.ndim)
    index = _check_index(index, what)
    _check_index_shape(index, input, d, what, "self")
    if isinstance(src, Tensor) and src.ndim:
        _check_index_shape(index, src, -1, what, "src")
    _check_bounds(index, input.shape[d] if input.ndim else 1, what, d)
    if reduce not in (None, "add", "sum", "multiply", "prod", "amax", "amin"):
        raise OpError(f"{what}(): reduce must be one of 'add', 'multiply', 'sum', 'prod', 'amax', 'amin', "
                      f"got {reduce!r}")
    return d, index


def scatter(input: Tensor, dim: int, index: Tensor, src=None, *, value=None, reduce=None) -> Tensor:  # noqa: A002
    """Out-of-place scatter: a copy of ``input`` with ``src`` written at ``index`` along ``dim``.

    ``out[i][index[i][j]] = src[i][j]`` for ``dim=1``; with ``reduce="add"``/``"multiply"`` the values are
    combined with what is there instead.

    Args:
        input: the destination values.
        dim: the dimension to scatter along.
        index: an integer tensor of input's rank.
        src: a tensor (at least index's size) or a scalar; ``value=`` is torch's scalar spelling.
        reduce: None, ``"add"``/``"sum"``, ``"multiply"``/``"prod"``, ``"amax"`` or ``"amin"``.
    Raises:
        DTypeError, ShapeError, IndexOutOfRangeError: as :func:`gather`.
        OpError: an unknown ``reduce``.
    """
    if src is None:
        src = value
    d, index = _scatter("scatter", input, dim, index, src, reduce)
    return _apply(R["scatter"], (input, index, src), (d, reduce))


def scatter_add(input: Tensor, dim: int, index: Tensor, src: Tensor) -> Tensor:  # noqa: A002
    """:func:`scatter` with ``reduce="add"``: duplicates in ``index`` accumulate."""
    return scatter(input, dim, index, src, reduce="add")


def scatter_reduce(input: Tensor, dim: int, index: Tensor, src: Tensor, reduce: str, *,  # noqa: A002
                   include_self: bool = True) -> Tensor:
    """:func:`scatter` combining with ``reduce`` (``"sum"``, ``"prod"``, ``"amax"``, ``"amin"``).

    Raises:
        OpError: ``include_self=False`` (not implemented) or an unknown ``reduce``.
    """
    if not include_self:
        raise OpError("scatter_reduce(include_self=False) is not supported")
    return scatter(input, dim, index, src, reduce=reduce)


def index_select(input: Tensor, dim: int, index: Tensor) -> Tensor:  # noqa: A002
    """The slices of ``input`` at positions ``index`` (a 1-D integer tensor) along ``dim``.

    Raises:
        DTypeError: a non-integer index.
        ShapeError: an index with more than one dimension.
        IndexOutOfRangeError: an index outside ``[0, input.shape[dim])``.
    """
    d = _dim(dim, input.ndim)
    index = _check_index(index, "index_select")
    if index.ndim > 1:
        raise ShapeError(f"index_select(): index should be a vector, got shape {list(index.shape)}")
    _check_bounds(index, input.shape[d] if input.ndim else 1, "index_select", d)
    return _apply(R["index_select"], (input, index), (d,))


def _index_add_checks(what, input, dim, index, source):  # noqa: A002
    d = _dim(dim, input.ndim)
    index = _check_index(index, what)
    source = _t(source)
    if index.ndim > 1:
        raise ShapeError(f"{what}(): index should be a vector, got shape {list(index.shape)}")
    want = input.shape[:d] + (index.numel(),) + input.shape[d + 1:]
    if source.shape != want and not (source.ndim == 0 and index.numel() == 1):
        raise ShapeError(f"{what}(): source of shape {list(source.shape)} must have shape {list(want)} (input "
                         f"{list(input.shape)} with dimension {d} of size len(index) = {index.numel()})")
    _check_bounds(index, input.shape[d] if input.ndim else 1, what, d)
    return d, index, source


def index_add(input: Tensor, dim: int, index: Tensor, source: Tensor, *, alpha=1) -> Tensor:  # noqa: A002
    """A copy of ``input`` with ``alpha * source[k]`` added at position ``index[k]`` along ``dim``.

    Raises:
        ShapeError: ``source`` is not input's shape with ``len(index)`` along ``dim``.
        IndexOutOfRangeError: an index outside the dimension.
    """
    d, index, source = _index_add_checks("index_add", input, dim, index, source)
    return _apply(R["index_add"], (input, index, source), (d, alpha))


def _check_mask(mask, what):
    mask = _t(mask)
    if mask.dtype is not D.bool_:
        raise DTypeError(f"{what} only supports boolean masks, but got mask with dtype {mask.dtype}")
    return mask


def masked_fill(input: Tensor, mask: Tensor, value) -> Tensor:  # noqa: A002
    """``value`` where ``mask`` is True, else ``input``; the mask broadcasts to input's shape.

    Raises:
        DTypeError: a non-bool mask.
        ShapeError: a non-scalar value tensor, or a mask that does not broadcast.
    """
    mask = _check_mask(mask, "masked_fill")
    if isinstance(value, Tensor) and value.ndim != 0:
        raise ShapeError(f"masked_fill only supports a 0-dimensional value tensor, got shape {list(value.shape)}")
    return _apply(R["masked_fill"], (input, mask, value))


def masked_select(input: Tensor, mask: Tensor) -> Tensor:  # noqa: A002
    """The elements where ``mask`` (broadcast) is True, as a 1-D tensor (data-dependent size: eager only)."""
    input, mask = broadcast_tensors(input, _check_mask(mask, "masked_select"))  # noqa: A001
    return input[mask]


def nonzero(input: Tensor, *, as_tuple: bool = False):  # noqa: A002
    """Indices (int64) of non-zero elements: an ``(n, ndim)`` tensor, or one 1-D tensor per dim.

    Raises:
        GraphError: inside graph mode (the result's size depends on the values).
    """
    from ._creation import tensor
    from ._tensor import _concrete

    _concrete(input, "nonzero()")
    nz = np.nonzero(np.asarray(input._value).reshape(input.shape or (1,)))
    if as_tuple:
        return tuple(tensor(z.astype(np.int64), dtype=D.default_int()) for z in nz[:input.ndim or 1])
    out = np.stack(nz, axis=1).astype(np.int64)
    return tensor(out[:, :input.ndim] if input.ndim == 0 else out, dtype=D.default_int())


def argwhere(input: Tensor) -> Tensor:  # noqa: A002
    """``nonzero(input)``: an ``(n, ndim)`` int64 tensor of indices."""
    return nonzero(input)


def sort(input: Tensor, dim: int = -1, descending: bool = False, stable: bool = False):  # noqa: A002
    """``(values, indices)`` sorted along ``dim``, ascending unless ``descending`` (ties keep their order).

    Raises:
        IndexOutOfRangeError: ``dim`` out of range.
    """
    if input.ndim == 0:
        return _on_scalar(input, lambda x, d: sort(x, d, descending, stable), dim)
    return _MinMax(*_apply(R["sort"], (input,), (_dim(dim, input.ndim), builtins.bool(descending),
                                                 builtins.bool(stable))))


def argsort(input: Tensor, dim: int = -1, descending: bool = False, stable: bool = False) -> Tensor:  # noqa: A002
    """The int64 indices that sort ``input`` along ``dim`` (see :func:`sort`)."""
    return sort(input, dim, descending, stable)[1]


def topk(input: Tensor, k: int, dim: int = -1, largest: bool = True, sorted: bool = True):  # noqa: A001,A002
    """The ``k`` largest (or smallest) ``(values, indices)`` along ``dim``, in sorted order.

    Raises:
        IndexOutOfRangeError: ``k`` larger than the dimension, or ``dim`` out of range.
    """
    if input.ndim == 0:
        return _on_scalar(input, lambda x, d: topk(x, k, d, largest, sorted), dim)
    d = _dim(dim, input.ndim)
    if not 0 <= k <= input.shape[d]:
        raise IndexOutOfRangeError(f"topk: k ({k}) is out of range for dimension {d} of size {input.shape[d]}")
    return _MinMax(*_apply(R["topk"], (input,), (builtins.int(k), d, builtins.bool(largest), builtins.bool(sorted))))


def tril(input: Tensor, diagonal: int = 0) -> Tensor:  # noqa: A002
    """The lower triangle of the last two dims (elements above ``diagonal`` set to 0).

    Raises:
        ShapeError: fewer than 2 dimensions.
    """
    if input.ndim < 2:
        raise ShapeError(f"tril: input tensor must have at least 2 dimensions, got shape {list(input.shape)}")
    return _apply(R["tril"], (input,), (builtins.int(diagonal),))


def triu(input: Tensor, diagonal: int = 0) -> Tensor:  # noqa: A002
    """The upper triangle of the last two dims (elements below ``diagonal`` set to 0).

    Raises:
        ShapeError: fewer than 2 dimensions.
    """
    if input.ndim < 2:
        raise ShapeError(f"triu: input tensor must have at least 2 dimensions, got shape {list(input.shape)}")
    return _apply(R["triu"], (input,), (builtins.int(diagonal),))


def diagonal(input: Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor:  # noqa: A002
    """The diagonal of the ``(dim1, dim2)`` planes, moved to the last dimension.

    Raises:
        OpError: ``dim1 == dim2``.
    """
    d1, d2 = _dim(dim1, input.ndim), _dim(dim2, input.ndim)
    if d1 == d2:
        raise OpError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    return _apply(R["diagonal"], (input,), (builtins.int(offset), d1, d2))


def one_hot(tensor: Tensor, num_classes: int = -1) -> Tensor:
    """One-hot encoding (int64) of a non-negative integer tensor, adding a last dimension of ``num_classes``.

    Args:
        tensor: class indices.
        num_classes: the number of classes; ``-1`` means ``tensor.max() + 1`` (eager only).
    Raises:
        DTypeError: a floating or bool tensor.
        IndexOutOfRangeError: a class outside ``[0, num_classes)``.
    """
    tensor = _t(tensor)
    if tensor.dtype.is_floating_point or tensor.dtype is D.bool_:
        raise DTypeError(f"one_hot is only applicable to index tensors, got {tensor.dtype}")
    if num_classes == -1:
        num_classes = builtins.int(tensor.max().item()) + 1 if tensor.numel() else 0
    _check_bounds(tensor, num_classes, "one_hot")
    return _apply(R["one_hot"], (tensor,), (builtins.int(num_classes),))


def pad(input: Tensor, pad, mode: str = "constant", value: float | None = None) -> Tensor:  # noqa: A002
    """``torch.nn.functional.pad``: ``pad`` lists (before, after) pairs from the last dimension backwards.

    Args:
        input: the tensor.
        pad: ``(left, right)``, ``(left, right, top, bottom)``... (negative values crop in constant mode).
        mode: ``"constant"``, ``"reflect"``, ``"replicate"`` or ``"circular"``.
        value: the fill value of constant mode (0 by default).
    Raises:
        ShapeError: an odd or too long ``pad``; reflect padding not smaller than the dimension.
        OpError: an unknown mode.
    """
    pad = tuple(builtins.int(p) for p in pad)
    if len(pad) % 2 or len(pad) // 2 > input.ndim:
        raise ShapeError(f"pad: padding length {len(pad)} must be even and at most 2 * ndim "
                         f"({2 * input.ndim}) for input of shape {list(input.shape)}")
    if mode not in ("constant", "reflect", "replicate", "circular"):
        raise OpError(f"pad: unsupported mode {mode!r}; expected constant, reflect, replicate or circular")
    if mode != "constant":
        for i in range(len(pad) // 2):
            n = input.shape[input.ndim - 1 - i]
            lo, hi = pad[2 * i], pad[2 * i + 1]
            if (mode == "reflect" and builtins.max(lo, hi) >= n) or (mode == "circular" and builtins.max(lo, hi) > n) \
                    or builtins.min(lo, hi) < 0 or n == 0:
                raise ShapeError(f"pad: {mode} padding ({lo}, {hi}) is invalid for dimension "
                                 f"{input.ndim - 1 - i} of size {n} (input shape {list(input.shape)})")
    return _apply(R["pad"], (input,), (pad, mode, 0.0 if value is None else value))


# ---------------------------------------------------------------- in-place
def _ip(name):
    o = R[name]

    def f(self: Tensor, *args) -> Tensor:
        return state.interp.apply_inplace(o, self, (self, *args), ())

    f.__name__ = f.__qualname__ = name + "_"
    f.__doc__ = (f"In-place :func:`{name}`: stores the result in ``self`` and returns it.\n\n"
                 "Raises:\n    ShapeError: the result would not have self's shape (no broadcasting of self).\n"
                 "    DTypeError: the result's dtype cannot be cast to self's (e.g. float into int).\n"
                 "    AutogradError: self is a leaf that requires grad (outside ``lf.no_grad()``).\n")
    return f


def add_(self: Tensor, other, *, alpha=1) -> Tensor:
    """In-place :func:`add` (``self += alpha * other``); returns ``self``.

    Raises:
        ShapeError: ``other`` does not broadcast to self's shape.
        DTypeError: a floating result for an integer ``self``.
        AutogradError: self is a leaf that requires grad.
    """
    if alpha != 1:
        other = other * alpha
    return state.interp.apply_inplace(_ADD, self, (self, other), ())


def sub_(self: Tensor, other, *, alpha=1) -> Tensor:
    """In-place :func:`sub` (``self -= alpha * other``); errors as :func:`add_` and :func:`sub`."""
    if _is_bool(self) or _is_bool(other):
        raise DTypeError(f"sub_: subtraction with a bool operand is not supported (got {_kind(self)} - "
                         f"{_kind(other)})")
    if alpha != 1:
        other = other * alpha
    return state.interp.apply_inplace(_SUB, self, (self, other), ())


def mul_(self: Tensor, other) -> Tensor:
    """In-place :func:`mul`; errors as :func:`add_`."""
    return state.interp.apply_inplace(_MUL, self, (self, other), ())


_DIV_OPS = {None: R["div"], "trunc": R["div_trunc"], "floor": R["floor_divide"]}


def div_(self: Tensor, other, *, rounding_mode: str | None = None) -> Tensor:
    """In-place :func:`div`; true division into an integer tensor raises DTypeError, like torch."""
    o = _DIV_OPS.get(rounding_mode)
    if o is None:
        raise OpError(f"div_ expected rounding_mode to be one of None, 'trunc', or 'floor' but found "
                      f"{rounding_mode!r}")
    return _inplace(o, self, (self, other))


def zero_(self: Tensor) -> Tensor:
    """Fill ``self`` with zeros in place; returns ``self``."""
    return fill_(self, 0)


def fill_(self: Tensor, value) -> Tensor:
    """Fill ``self`` with ``value`` (a scalar or 0-d tensor) in place; returns ``self``.

    Raises:
        ShapeError: a value tensor with dimensions.
    """
    if isinstance(value, Tensor):
        if value.ndim != 0:
            raise ShapeError(f"fill_ only supports a 0-dimension value tensor, got shape {list(value.shape)}")
        return copy_(self, value)
    return _inplace(_COPY_INTO, self, (self, value))


def copy_(self: Tensor, src, non_blocking: bool = False) -> Tensor:
    """Copy ``src`` (broadcast to self's shape, cast to self's dtype) into ``self``; returns ``self``.

    Raises:
        ShapeError: ``src`` does not broadcast to self's shape.
    """
    src = _t(src)
    if not _broadcasts(src.shape, self.shape) or broadcast_shapes(src.shape, self.shape) != self.shape:
        raise ShapeError(f"copy_: the source of shape {list(src.shape)} cannot be broadcast to "
                         f"{list(self.shape)}")
    return _inplace(_COPY_INTO, self, (self, src))


def _broadcasts(a, b) -> bool:
    try:
        np.broadcast_shapes(a, b)
    except ValueError:
        return False
    return True


_COPY_INTO = R["copy_into"]


def clamp_(self: Tensor, min=None, max=None) -> Tensor:  # noqa: A002
    """In-place :func:`clamp`; returns ``self``.

    Raises:
        OpError: both bounds are None.
    """
    if min is None and max is None:
        raise OpError("clamp_: at least one of 'min' or 'max' must not be None")
    return _inplace(R["clamp"], self, (self, min, max))


clip_ = clamp_


def masked_fill_(self: Tensor, mask, value) -> Tensor:
    """In-place :func:`masked_fill`; returns ``self``."""
    mask = _check_mask(mask, "masked_fill_")
    if isinstance(value, Tensor) and value.ndim != 0:
        raise ShapeError(f"masked_fill_ only supports a 0-dimensional value tensor, got shape {list(value.shape)}")
    return _inplace(R["masked_fill"], self, (self, mask, value))


def index_add_(self: Tensor, dim: int, index, source, *, alpha=1) -> Tensor:
    """In-place :func:`index_add`: ``self[..., index[k], ...] += alpha * source[..., k, ...]``; returns ``self``."""
    d, index, source = _index_add_checks("index_add_", self, dim, index, source)
    return _inplace(R["index_add"], self, (self, index, source), (d, alpha))


def scatter_(self: Tensor, dim: int, index, src=None, *, value=None, reduce=None) -> Tensor:
    """In-place :func:`scatter`; returns ``self``."""
    if src is None:
        src = value
    d, index = _scatter("scatter_", self, dim, index, src, reduce)
    return _inplace(R["scatter"], self, (self, index, src), (d, reduce))


def scatter_add_(self: Tensor, dim: int, index, src) -> Tensor:
    """In-place :func:`scatter_add`; returns ``self``."""
    return scatter_(self, dim, index, src, reduce="add")


def uniform_(self: Tensor, a: float = 0.0, b: float = 1.0, *, generator=None) -> Tensor:
    """Fill ``self`` with samples uniform on ``[a, b)`` in place (from ``generator`` or the default one)."""
    from ._creation import _gen

    return _inplace(_UNIFORM_INTO, self, (self, *_gen(generator)._next(), builtins.float(a), builtins.float(b)))


def normal_(self: Tensor, mean: float = 0.0, std: float = 1.0, *, generator=None) -> Tensor:
    """Fill ``self`` with normal samples of ``mean`` and ``std`` in place.

    Raises:
        OpError: a negative ``std``.
    """
    from ._creation import _gen

    if std < 0:
        raise OpError(f"normal_ expects std >= 0.0, got std={std}")
    return _inplace(_NORMAL_INTO, self, (self, *_gen(generator)._next(), builtins.float(mean),
                                         builtins.float(std)))


def bernoulli_(self: Tensor, p=0.5, *, generator=None) -> Tensor:
    """Fill ``self`` with 0/1 samples, 1 with probability ``p`` (a scalar or a tensor broadcast to self).

    Raises:
        OpError: a scalar ``p`` outside ``[0, 1]``.
    """
    from ._creation import bernoulli, full

    if not isinstance(p, Tensor):
        if not 0.0 <= p <= 1.0:
            raise OpError(f"bernoulli_ expects p to be in [0, 1], got p={p}")
        probs = full(self.shape, builtins.float(p), dtype=self.dtype if self.dtype.is_floating_point else None)
    else:
        probs = expand(p if p.dtype.is_floating_point else p.to(D.get_default_dtype()), *self.shape)
    return copy_(self, bernoulli(probs, generator=generator))


_UNIFORM_INTO = R["uniform_into"]
_NORMAL_INTO = R["normal_into"]


def exponential_(self: Tensor, lambd: float = 1.0, *, generator=None) -> Tensor:
    """Fill ``self`` with exponential samples of rate ``lambd`` in place."""
    from ._creation import rand

    u = rand(self.shape, generator=generator, dtype=self.dtype)
    with _NoGrad():
        return copy_(self, -log1p(-u) / lambd)


class _NoGrad:
    def __enter__(self):
        self.p = state.grad_enabled
        state.grad_enabled = False

    def __exit__(self, *e):
        state.grad_enabled = self.p
