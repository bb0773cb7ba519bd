"""``lazyflow.nn.init``: in-place parameter initialisation with torch's names and distributions.

Every function runs without gradient recording, writes into the given tensor (its identity is kept) and
draws from a lazyflow :class:`~lazyflow.Generator` (the default one unless ``generator`` is given).
"""

from __future__ import annotations

import math

import numpy as np

from .. import _functional as _F
from .. import _sample
from .._core.context import state
from .._core.errors import ShapeError
from .._creation import _gen, eye, rand
from .._functional import inplace as _inplace
from .._tensor import Tensor
from ..autograd import no_grad
from ..ops.table import REGISTRY as R

_COPY_INTO = R["copy_into"]

__all__ = [
    "calculate_gain",
    "uniform_",
    "normal_",
    "trunc_normal_",
    "constant_",
    "ones_",
    "zeros_",
    "eye_",
    "dirac_",
    "xavier_uniform_",
    "xavier_normal_",
    "kaiming_uniform_",
    "kaiming_normal_",
    "orthogonal_",
    "sparse_",
]

_LINEAR_FNS = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d")


def calculate_gain(nonlinearity: str, param: float | None = None) -> float:
    """The recommended gain for a nonlinearity (torch's table: relu sqrt(2), tanh 5/3, selu 3/4, ...).

    Args:
        nonlinearity: the ``nn.functional`` name.
        param: the negative slope for ``"leaky_relu"`` (default 0.01).
    Raises:
        ValueError: an unknown nonlinearity or a non-numeric slope.
    """
    if nonlinearity in _LINEAR_FNS or nonlinearity == "sigmoid":
        return 1
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif isinstance(param, (int, float)) and not isinstance(param, bool):
            slope = param
        else:
            raise ValueError(f"negative_slope {param} not a valid number")
        return math.sqrt(2.0 / (1 + slope**2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(
        f"Unsupported nonlinearity {nonlinearity}; expected one of {list(_LINEAR_FNS)}, "
        "'sigmoid', 'tanh', 'relu', 'leaky_relu', 'selu'"
    )


def _calculate_fan_in_and_fan_out(tensor: Tensor) -> tuple[int, int]:
    """``(fan_in, fan_out)`` of a weight ``(out, in, *kernel)``: ``in * prod(kernel)``, ``out * prod(kernel)``.

    Raises:
        ValueError: fewer than 2 dimensions.
    """
    if tensor.ndim < 2:
        raise ValueError(
            "Fan in and fan out can not be computed for tensor with fewer than 2 dimensions "
            f"(got shape {list(tensor.shape)})"
        )
    receptive = 1
    for s in tensor.shape[2:]:
        receptive *= s
    return tensor.shape[1] * receptive, tensor.shape[0] * receptive


def _calculate_correct_fan(tensor: Tensor, mode: str) -> int:
    mode = mode.lower()
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"Mode {mode} not supported, please use one of fan_in, fan_out")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def _write(tensor: Tensor, value: Tensor | np.ndarray) -> Tensor:
    with no_grad():
        return _inplace.copy_(tensor, value)


def uniform_(tensor: Tensor, a: float = 0.0, b: float = 1.0, generator=None) -> Tensor:
    """Fill with samples from U(a, b)."""
    with no_grad():
        return _inplace.uniform_(tensor, a, b, generator=generator)


def normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0, generator=None) -> Tensor:
    """Fill with samples from N(mean, std**2)."""
    with no_grad():
        return _inplace.normal_(tensor, mean, std, generator=generator)


def trunc_normal_(
    tensor: Tensor, mean: float = 0.0, std: float = 1.0, a: float = -2.0, b: float = 2.0, generator=None
) -> Tensor:
    """Fill with samples from N(mean, std**2) truncated to [a, b] (inverse-CDF sampling, one pass).

    Raises:
        ValueError: ``a >= b`` or ``std <= 0``.
    """
    if not a < b:
        raise ValueError(f"trunc_normal_: expected a < b, got a={a}, b={b}")
    if std <= 0:
        raise ValueError(f"trunc_normal_: expected std > 0, got {std}")
    with no_grad():
        return _inplace._normal_within(tensor, mean, std, (a, b), generator=generator)


def constant_(tensor: Tensor, val: float) -> Tensor:
    """Fill with ``val``."""
    with no_grad():
        if _sample.eager(tensor) and _sample.exact_fill(val, tensor.dtype):  # no kernel per shape
            return _sample.write(tensor, _sample.constant(tensor.shape, tensor.dtype, val), _COPY_INTO)
        return _F.fill_(tensor, val)


def ones_(tensor: Tensor) -> Tensor:
    """Fill with ones."""
    return constant_(tensor, 1)


def zeros_(tensor: Tensor) -> Tensor:
    """Fill with zeros."""
    return constant_(tensor, 0)


def eye_(tensor: Tensor) -> Tensor:
    """Fill a 2-D tensor with the identity matrix.

    Raises:
        ShapeError: not 2-D.
    """
    if tensor.ndim != 2:
        raise ShapeError(f"eye_: only 2-D tensors are supported, got shape {list(tensor.shape)}")
    return _write(tensor, eye(tensor.shape[0], tensor.shape[1], dtype=tensor.dtype))


def dirac_(tensor: Tensor, groups: int = 1) -> Tensor:
    """Fill a 3/4/5-D convolution weight with the Dirac delta (identity convolution per group).

    Raises:
        ShapeError: not 3-, 4- or 5-D, or ``out_channels`` not divisible by ``groups``.
    """
    if tensor.ndim not in (3, 4, 5):
        raise ShapeError(f"dirac_: only 3, 4 or 5-D tensors are supported, got shape {list(tensor.shape)}")
    if tensor.shape[0] % groups:
        raise ShapeError(f"dirac_: dim 0 ({tensor.shape[0]}) must be divisible by groups ({groups})")
    out_per_group = tensor.shape[0] // groups
    min_dim = min(out_per_group, tensor.shape[1])
    w = np.zeros(tensor.shape, tensor.dtype.np)
    centre = tuple(s // 2 for s in tensor.shape[2:])
    for g in range(groups):
        for d in range(min_dim):
            w[(g * out_per_group + d, d, *centre)] = 1
    return _write(tensor, w)


def xavier_uniform_(tensor: Tensor, gain: float = 1.0, generator=None) -> Tensor:
    """Glorot uniform: U(-b, b) with ``b = gain * sqrt(6 / (fan_in + fan_out))``."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    bound = math.sqrt(3.0) * std
    return uniform_(tensor, -bound, bound, generator)


def xavier_normal_(tensor: Tensor, gain: float = 1.0, generator=None) -> Tensor:
    """Glorot normal: N(0, std**2) with ``std = gain * sqrt(2 / (fan_in + fan_out))``."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return normal_(tensor, 0.0, std, generator)


def kaiming_uniform_(
    tensor: Tensor, a: float = 0, mode: str = "fan_in", nonlinearity: str = "leaky_relu", generator=None
) -> Tensor:
    """He uniform: U(-b, b) with ``b = gain(nonlinearity, a) * sqrt(3 / fan_mode)``.

    A zero-element tensor is left as it is (like torch).
    """
    if 0 in tensor.shape:
        return tensor
    fan = _calculate_correct_fan(tensor, mode)
    bound = math.sqrt(3.0) * calculate_gain(nonlinearity, a) / math.sqrt(fan)
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(
    tensor: Tensor, a: float = 0, mode: str = "fan_in", nonlinearity: str = "leaky_relu", generator=None
) -> Tensor:
    """He normal: N(0, std**2) with ``std = gain(nonlinearity, a) / sqrt(fan_mode)``."""
    if 0 in tensor.shape:
        return tensor
    fan = _calculate_correct_fan(tensor, mode)
    std = calculate_gain(nonlinearity, a) / math.sqrt(fan)
    return normal_(tensor, 0.0, std, generator)


def orthogonal_(tensor: Tensor, gain: float = 1, generator=None) -> Tensor:
    """A (semi-)orthogonal matrix (QR of a Gaussian matrix, sign-corrected), trailing dims flattened.

    Raises:
        ValueError: fewer than 2 dimensions.
    """
    if tensor.ndim < 2:
        raise ValueError(f"Only tensors with 2 or more dimensions are supported, got shape {list(tensor.shape)}")
    if tensor.numel() == 0:
        return tensor
    with no_grad():
        return state.interp.apply_inplace(R["orthogonal_into"], tensor, (tensor, *_gen(generator)._next(), float(gain)))


def sparse_(tensor: Tensor, sparsity: float, std: float = 0.01, generator=None) -> Tensor:
    """A 2-D sparse matrix: N(0, std**2) entries with a fraction ``sparsity`` of each column zeroed.

    Raises:
        ShapeError: not 2-D.
    """
    if tensor.ndim != 2:
        raise ShapeError(f"sparse_: only 2-D tensors are supported, got shape {list(tensor.shape)}")
    rows = tensor.shape[0]
    num_zeros = int(math.ceil(sparsity * rows))
    with no_grad():
        _inplace.normal_(tensor, 0.0, std, generator=generator)
        if num_zeros:
            # a random permutation of the rows per column: zero the rows ranked below num_zeros
            ranks = _F.argsort(_F.argsort(rand(tensor.shape, generator=generator), dim=0), dim=0)
            _inplace.copy_(tensor, _F.where(ranks < num_zeros, 0.0, tensor))
    return tensor


def _reset_fan_in_(weight: Tensor, bias: Tensor | None) -> None:
    """torch's default for Linear and Conv layers: weight ~ kaiming_uniform_(a=sqrt(5)), bias ~ U(+-1/sqrt(fan_in))."""
    kaiming_uniform_(weight, a=math.sqrt(5))
    if bias is not None:
        fan_in, _ = _calculate_fan_in_and_fan_out(weight)
        bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
        uniform_(bias, -bound, bound)
