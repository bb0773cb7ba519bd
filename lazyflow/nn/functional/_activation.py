"""Activation functions with ``torch.nn.functional``'s signatures (the ``inplace`` flags included)."""

from __future__ import annotations

from ... import _functional as _F
from ..._core.context import state
from ..._core.errors import ShapeError
from ..._tensor import Tensor
from ...ops.table import REGISTRY as R

__all__ = [
    "relu",
    "relu_",
    "relu6",
    "leaky_relu",
    "leaky_relu_",
    "elu",
    "elu_",
    "selu",
    "selu_",
    "celu",
    "celu_",
    "gelu",
    "silu",
    "mish",
    "tanh",
    "sigmoid",
    "hardtanh",
    "hardtanh_",
    "hardsigmoid",
    "hardswish",
    "softplus",
    "softsign",
    "logsigmoid",
    "tanhshrink",
    "threshold",
    "threshold_",
    "softmax",
    "log_softmax",
    "softmin",
    "glu",
]


def _run(name: str, input: Tensor, statics: tuple, inplace: bool) -> Tensor:
    if inplace:
        return state.interp.apply_inplace(R[name], input, (input,), statics)
    return state.interp.apply(R[name], (input,), statics)


def relu(input: Tensor, inplace: bool = False) -> Tensor:
    """``max(input, 0)`` elementwise.

    Args:
        input: any tensor.
        inplace: overwrite ``input`` (not allowed on a leaf that requires grad).
    Returns:
        the result (``input`` itself when ``inplace``).
    """
    return _run("relu", input, (), inplace)


def relu_(input: Tensor) -> Tensor:
    """In-place :func:`relu`."""
    return _run("relu", input, (), True)


def relu6(input: Tensor, inplace: bool = False) -> Tensor:
    """``min(max(input, 0), 6)`` elementwise."""
    return hardtanh(input, 0.0, 6.0, inplace)


def leaky_relu(input: Tensor, negative_slope: float = 0.01, inplace: bool = False) -> Tensor:
    """``input`` where positive, else ``negative_slope * input``."""
    return _run("leaky_relu", input, (float(negative_slope),), inplace)


def leaky_relu_(input: Tensor, negative_slope: float = 0.01) -> Tensor:
    """In-place :func:`leaky_relu`."""
    return _run("leaky_relu", input, (float(negative_slope),), True)


def elu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """``input`` where positive, else ``alpha * (exp(input) - 1)``."""
    return _run("elu", input, (float(alpha),), inplace)


def elu_(input: Tensor, alpha: float = 1.0) -> Tensor:
    """In-place :func:`elu`."""
    return _run("elu", input, (float(alpha),), True)


_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def selu(input: Tensor, inplace: bool = False) -> Tensor:
    """``scale * elu(input, alpha)`` with the self-normalising constants."""
    out = elu(input, _SELU_ALPHA) * _SELU_SCALE
    return input.copy_(out) if inplace else out


def celu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """``max(0, x) + min(0, alpha * (exp(x / alpha) - 1))``."""
    if alpha == 0:
        raise ValueError("ZeroDivisionError: alpha cannot be 0 for CELU")
    out = elu(input / alpha) * alpha
    return input.copy_(out) if inplace else out


def selu_(input: Tensor) -> Tensor:
    """In-place :func:`selu` (``torch.selu_``)."""
    return selu(input, True)


def celu_(input: Tensor, alpha: float = 1.0) -> Tensor:
    """In-place :func:`celu` (``torch.celu_``)."""
    return celu(input, alpha, True)


def gelu(input: Tensor, approximate: str = "none") -> Tensor:
    """Gaussian error linear unit, exact (``"none"``) or with the tanh approximation (``"tanh"``)."""
    return _F.gelu(input, approximate)


def silu(input: Tensor, inplace: bool = False) -> Tensor:
    """``input * sigmoid(input)``."""
    return _run("silu", input, (), inplace)


def mish(input: Tensor, inplace: bool = False) -> Tensor:
    """``input * tanh(softplus(input))``."""
    out = input * _F.tanh(_F.softplus(input))
    return input.copy_(out) if inplace else out


def tanh(input: Tensor) -> Tensor:
    """Hyperbolic tangent."""
    return _F.tanh(input)


def sigmoid(input: Tensor) -> Tensor:
    """``1 / (1 + exp(-input))``."""
    return _F.sigmoid(input)


def hardtanh(input: Tensor, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False) -> Tensor:
    """Clamp into ``[min_val, max_val]``.

    Raises:
        ValueError: ``max_val < min_val``.
    """
    if max_val < min_val:
        raise ValueError(f"hardtanh: max_val ({max_val}) cannot be less than min_val ({min_val})")
    return _run("hardtanh", input, (float(min_val), float(max_val)), inplace)


def hardtanh_(input: Tensor, min_val: float = -1.0, max_val: float = 1.0) -> Tensor:
    """In-place :func:`hardtanh`."""
    return hardtanh(input, min_val, max_val, True)


def hardsigmoid(input: Tensor, inplace: bool = False) -> Tensor:
    """``relu6(x + 3) / 6``."""
    out = hardtanh(input + 3.0, 0.0, 6.0) / 6.0
    return input.copy_(out) if inplace else out


def hardswish(input: Tensor, inplace: bool = False) -> Tensor:
    """``x * relu6(x + 3) / 6``."""
    out = input * (hardtanh(input + 3.0, 0.0, 6.0) / 6.0)
    return input.copy_(out) if inplace else out


def softplus(input: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    """``log(1 + exp(beta * x)) / beta``, linear above ``threshold``."""
    return _F.softplus(input, beta, threshold)


def softsign(input: Tensor) -> Tensor:
    """``x / (1 + |x|)``."""
    return input / (_F.abs(input) + 1.0)


def logsigmoid(input: Tensor) -> Tensor:
    """``log(sigmoid(x))``, computed stably."""
    return _F.elementwise.logsigmoid(input)


def tanhshrink(input: Tensor) -> Tensor:
    """``x - tanh(x)``."""
    return input - _F.tanh(input)


def threshold(input: Tensor, threshold: float, value: float, inplace: bool = False) -> Tensor:
    """``value`` where ``input <= threshold``, else ``input`` (NaN stays NaN and keeps its gradient, like torch)."""
    out = _F.where(input <= threshold, value, input)
    return input.copy_(out) if inplace else out


def threshold_(input: Tensor, threshold: float, value: float) -> Tensor:
    """In-place :func:`threshold` (``torch.threshold_``)."""
    return input.copy_(_F.where(input <= threshold, value, input))


def softmax(input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype=None) -> Tensor:
    """Softmax along ``dim`` (cast to ``dtype`` first when given)."""
    return _F.softmax(input, dim, dtype)


def log_softmax(input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype=None) -> Tensor:
    """Log-softmax along ``dim`` (cast to ``dtype`` first when given)."""
    return _F.log_softmax(input, dim, dtype)


def softmin(input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype=None) -> Tensor:
    """``softmax(-input, dim)``."""
    return _F.softmax(-input, dim, dtype)


def glu(input: Tensor, dim: int = -1) -> Tensor:
    """Gated linear unit: ``a * sigmoid(b)`` with ``a, b`` the halves of ``input`` along ``dim``.

    Raises:
        ShapeError: the size along ``dim`` is odd.
    """
    if input.shape[dim] % 2:
        raise ShapeError(
            f"glu: halving dimension {dim} must be even, got size {input.shape[dim]} (input shape {list(input.shape)})"
        )
    a, b = _F.chunk(input, 2, dim)
    return a * _F.sigmoid(b)
