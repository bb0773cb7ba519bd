"""torch's legacy hook forms ``nn.utils.weight_norm`` / ``spectral_norm`` and their ``remove_*``.

``weight_norm`` replaces parameter ``weight`` by ``weight_g`` and ``weight_v``; ``spectral_norm`` by
``weight_orig`` with buffers ``weight_u``/``weight_v`` (torch's keys). ``weight`` is computed from them on every
access (torch recomputes it in a forward pre-hook; the values are the same), so a compiled forward leaves nothing
traced behind; spectral_norm's pre-hook runs the power iteration (training mode only), as torch's. The
parametrization forms in
:mod:`lazyflow.nn.utils.parametrizations` are what torch recommends for new code.
"""

from __future__ import annotations

import warnings
from typing import TypeVar

from ..._creation import empty
from ..._tensor import Tensor
from ...autograd import no_grad
from ..module import Module
from ..modules.conv import _ConvTransposeNd
from ..parameter import Parameter
from . import _derived
from ._norm_utils import norm_except_dim, normalize, weight_norm_value, weight_to_matrix

__all__ = ["weight_norm", "remove_weight_norm", "spectral_norm", "remove_spectral_norm"]

_M = TypeVar("_M", bound=Module)


class WeightNorm:
    """The forward pre-hook of :func:`weight_norm`."""

    def __init__(self, name: str, dim: int) -> None:
        self.name = name
        self.dim = dim

    def compute_weight(self, module: Module) -> Tensor:
        return weight_norm_value(getattr(module, self.name + "_v"), getattr(module, self.name + "_g"), self.dim)

    def __call__(self, module: Module, inputs) -> None:
        """Nothing to do: ``weight`` is computed on access."""


class SpectralNorm:
    """The forward pre-hook of :func:`spectral_norm` (one power-iteration step per training forward)."""

    def __init__(self, name: str, n_power_iterations: int, dim: int, eps: float) -> None:
        if n_power_iterations <= 0:
            raise ValueError(
                f"Expected n_power_iterations to be positive, but got n_power_iterations={n_power_iterations}"
            )
        self.name = name
        self.n_power_iterations = n_power_iterations
        self.dim = dim
        self.eps = eps

    def power_iteration(self, module: Module) -> None:
        """``n_power_iterations`` steps on the ``_u``/``_v`` buffers, in place (torch's order: v, then u)."""
        u, v = getattr(module, self.name + "_u"), getattr(module, self.name + "_v")
        with no_grad():
            m = weight_to_matrix(getattr(module, self.name + "_orig").detach(), self.dim)
            for _ in range(self.n_power_iterations):
                v.copy_(normalize(m.t().mv(u), self.eps))
                u.copy_(normalize(m.mv(v), self.eps))

    def compute_weight(self, module: Module) -> Tensor:
        weight = getattr(module, self.name + "_orig")
        u, v = getattr(module, self.name + "_u").clone(), getattr(module, self.name + "_v").clone()
        sigma = (u * weight_to_matrix(weight, self.dim).mv(v)).sum()
        return weight / sigma

    def __call__(self, module: Module, inputs) -> None:
        if module.training:
            self.power_iteration(module)


def _find(module: Module, kind: type, name: str):
    for hid, hook in module._forward_pre_hooks.items():
        if isinstance(hook, kind) and hook.name == name:
            return hid, hook
    raise ValueError(f"{kind.__name__.lower().replace('norm', '_norm')} of '{name}' not found in {module._get_name()}")


def _take_parameter(module: Module, name: str) -> Parameter:
    for hook in module._forward_pre_hooks.values():
        if isinstance(hook, (WeightNorm, SpectralNorm)) and hook.name == name:
            raise RuntimeError(f"Cannot register two normalization hooks on the same parameter {name}")
    weight = module._parameters.get(name)
    if weight is None:
        raise ValueError(f"Module '{module._get_name()}' has no parameter named '{name}'")
    del module._parameters[name]
    return weight


def weight_norm(module: _M, name: str = "weight", dim: int | None = 0) -> _M:
    """Replace ``module.<name>`` by magnitude ``<name>_g`` and direction ``<name>_v`` parameters (torch's legacy
    form; see :func:`lazyflow.nn.utils.parametrizations.weight_norm`).

    Raises:
        ValueError: no parameter ``name``.
        RuntimeError: ``name`` already normalized.
    """
    warnings.warn(
        "`lazyflow.nn.utils.weight_norm` is deprecated in favor of `lazyflow.nn.utils.parametrizations.weight_norm` "
        "(as torch's).",
        FutureWarning,
        stacklevel=2,
    )
    d = -1 if dim is None else dim
    weight = _take_parameter(module, name)
    fn = WeightNorm(name, d)
    module.register_parameter(name + "_g", Parameter(norm_except_dim(weight, 2, d).detach()))
    module.register_parameter(name + "_v", Parameter(weight.detach()))
    _derived.install(module, name, fn.compute_weight)
    module.register_forward_pre_hook(fn)
    return module


def remove_weight_norm(module: _M, name: str = "weight") -> _M:
    """Fold ``<name>_g``/``<name>_v`` back into one parameter ``<name>``.

    Raises:
        ValueError: ``module`` has no weight_norm on ``name``.
    """
    hid, fn = _find(module, WeightNorm, name)
    with no_grad():
        weight = fn.compute_weight(module)
    del module._forward_pre_hooks[hid]
    _derived.uninstall(module, name)
    del module._parameters[name + "_g"], module._parameters[name + "_v"]
    module.register_parameter(name, Parameter(weight.detach()))
    return module


def spectral_norm(
    module: _M, name: str = "weight", n_power_iterations: int = 1, eps: float = 1e-12, dim: int | None = None
) -> _M:
    """Divide ``module.<name>`` by its spectral norm (torch's legacy form: ``<name>_orig`` parameter and
    ``<name>_u``/``<name>_v`` buffers; see :func:`lazyflow.nn.utils.parametrizations.spectral_norm`).

    Raises:
        ValueError: no parameter ``name``, or ``n_power_iterations <= 0``.
        RuntimeError: ``name`` already normalized.
    """
    if dim is None:
        dim = 1 if isinstance(module, _ConvTransposeNd) else 0
    fn = SpectralNorm(name, n_power_iterations, dim, eps)
    weight = _take_parameter(module, name)
    with no_grad():
        mat = weight_to_matrix(weight.detach(), dim)
        h, w = mat.shape
        u = normalize(empty(h, dtype=weight.dtype).normal_(0, 1), eps)
        v = normalize(empty(w, dtype=weight.dtype).normal_(0, 1), eps)
    module.register_parameter(name + "_orig", weight)
    module.register_buffer(name + "_u", u)
    module.register_buffer(name + "_v", v)
    _derived.install(module, name, fn.compute_weight)
    module.register_forward_pre_hook(fn)
    return module


def remove_spectral_norm(module: _M, name: str = "weight") -> _M:
    """Make the spectrally-normalized ``<name>`` a plain parameter again (no power-iteration step).

    Raises:
        ValueError: ``module`` has no spectral_norm on ``name``.
    """
    hid, fn = _find(module, SpectralNorm, name)
    with no_grad():
        weight = fn.compute_weight(module)
    del module._forward_pre_hooks[hid]
    _derived.uninstall(module, name)
    del module._parameters[name + "_orig"]
    del module._buffers[name + "_u"], module._buffers[name + "_v"]
    module.register_parameter(name, Parameter(weight.detach()))
    return module
