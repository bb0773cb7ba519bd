"""Attach the functional ops to Tensor as methods and operators (each op is written once, as a function)."""

from __future__ import annotations

from . import _functional as F
from ._core.context import state
from ._tensor import Tensor
from .ops.table import REGISTRY as R

_METHODS = [
    *F._UNARY, "round", "gelu", "softplus", "leaky_relu", "elu", "hardtanh", "nan_to_num", "add", "sub",
    "mul", "div", "floor_divide", "remainder", "fmod", "pow", "atan2", "maximum", "minimum", "eq", "ne", "lt",
    "le", "gt", "ge", "logical_and", "logical_or", "logical_xor", "bitwise_and", "bitwise_or", "bitwise_xor",
    "clamp", "clip", "lerp", "addcmul", "addcdiv", "matmul", "mm", "bmm", "mv", "dot", "outer", "sum", "prod",
    "mean", "amax", "amin", "max", "min", "argmax", "argmin", "var", "std", "logsumexp", "norm", "all", "any",
    "cumsum", "cumprod", "softmax", "log_softmax", "clone", "reshape", "view", "view_as", "reshape_as",
    "flatten", "unflatten", "squeeze", "unsqueeze", "permute", "transpose", "t", "movedim", "moveaxis",
    "expand", "expand_as", "broadcast_to", "repeat", "tile", "repeat_interleave", "split", "chunk",
    "tensor_split", "unbind", "flip", "fliplr", "flipud", "roll", "gather", "take_along_dim", "scatter",
    "scatter_add", "scatter_reduce", "index_select", "index_add", "masked_fill", "masked_select", "nonzero",
    "argwhere", "sort", "argsort", "topk", "tril", "triu", "diagonal", "add_", "sub_", "mul_", "div_", "zero_",
    "fill_", "copy_", "clamp_", "masked_fill_", "index_add_", "scatter_", "scatter_add_", "uniform_",
    "normal_", "bernoulli_", "exponential_", "subtract", "multiply", "divide", "true_divide", "negative",
    "absolute", "swapaxes", "swapdims", "greater", "less", "greater_equal", "less_equal", "not_equal",
    "arcsin", "arccos", "arctan", "fix", "logsigmoid", "var_mean", "std_mean",
]
for _n in _METHODS:
    setattr(Tensor, _n, getattr(F, _n))

# in-place forms of elementwise ops (relu_, exp_, ...), one generic wrapper per op
for _n in ["exp", "log", "log1p", "expm1", "sqrt", "rsqrt", "sin", "cos", "tanh", "sigmoid", "relu",
           "neg", "abs", "sign", "floor", "ceil", "trunc", "reciprocal", "square", "pow", "remainder",
           "floor_divide", "fmod", "atan2", "maximum", "minimum", "lerp", "addcmul", "addcdiv", "erf", "silu",
           "logical_not", "eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or"]:
    setattr(Tensor, _n + "_", F._ip(_n))


def _addcmul_(self, t1, t2, *, value=1):
    return state.interp.apply_inplace(R["addcmul"], self, (self, t1, t2), (value,))


def _addcdiv_(self, t1, t2, *, value=1):
    return state.interp.apply_inplace(R["addcdiv"], self, (self, t1, t2), (value,))


def _lerp_(self, end, weight):
    return state.interp.apply_inplace(R["lerp"], self, (self, end, weight), ())


Tensor.addcmul_ = _addcmul_
Tensor.addcdiv_ = _addcdiv_
Tensor.lerp_ = _lerp_

_ADD, _SUB, _MUL, _DIV, _MATMUL = R["add"], R["sub"], R["mul"], R["div"], R["matmul"]


def _binop(o, reflected=False):
    if reflected:
        def f(self, other):
            return state.interp.apply(o, (other, self), ())
    else:
        def f(self, other):
            return state.interp.apply(o, (self, other), ())
    return f


Tensor.__add__ = _binop(_ADD)
Tensor.__radd__ = _binop(_ADD, True)
Tensor.__sub__ = lambda self, other: F.sub(self, other)
Tensor.__rsub__ = _binop(_SUB, True)
Tensor.__mul__ = _binop(_MUL)
Tensor.__rmul__ = _binop(_MUL, True)
Tensor.__truediv__ = _binop(_DIV)
Tensor.__rtruediv__ = _binop(_DIV, True)
Tensor.__floordiv__ = _binop(R["floor_divide"])
Tensor.__rfloordiv__ = _binop(R["floor_divide"], True)
Tensor.__mod__ = _binop(R["remainder"])
Tensor.__rmod__ = _binop(R["remainder"], True)
Tensor.__pow__ = _binop(R["pow"])
Tensor.__rpow__ = _binop(R["pow"], True)
Tensor.__matmul__ = lambda self, other: F.matmul(self, other)
Tensor.__rmatmul__ = lambda self, other: F.matmul(other, self)
Tensor.__neg__ = F.neg  # noqa: F821 - generated
Tensor.__pos__ = lambda self: self
Tensor.__abs__ = F.abs  # noqa: F821
Tensor.__eq__ = _binop(R["eq"])
Tensor.__ne__ = _binop(R["ne"])
Tensor.__lt__ = _binop(R["lt"])
Tensor.__le__ = _binop(R["le"])
Tensor.__gt__ = _binop(R["gt"])
Tensor.__ge__ = _binop(R["ge"])


def _invert(self):
    return F.logical_not(self) if self.dtype.name == "bool" else F.bitwise_not(self)  # noqa: F821


def _logic(name, bool_name):
    def f(self, other):
        return getattr(F, bool_name)(self, other) if self.dtype.name == "bool" and (
            not isinstance(other, Tensor) or other.dtype.name == "bool") else getattr(F, name)(self, other)
    return f


Tensor.__invert__ = _invert
Tensor.__and__ = Tensor.__rand__ = _logic("bitwise_and", "logical_and")
Tensor.__or__ = Tensor.__ror__ = _logic("bitwise_or", "logical_or")
Tensor.__xor__ = Tensor.__rxor__ = _logic("bitwise_xor", "logical_xor")
Tensor.__hash__ = lambda self: id(self)


def _iop(name):
    meth = getattr(Tensor, name)

    def f(self, other):
        return meth(self, other)
    return f


Tensor.__iadd__ = _iop("add_")
Tensor.__isub__ = _iop("sub_")
Tensor.__imul__ = _iop("mul_")
Tensor.__itruediv__ = _iop("div_")
Tensor.__ipow__ = _iop("pow_")
Tensor.__imod__ = _iop("remainder_")
Tensor.__ifloordiv__ = _iop("floor_divide_")
