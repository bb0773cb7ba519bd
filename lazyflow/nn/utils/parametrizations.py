"""``nn.utils.parametrizations``: ``weight_norm`` and ``spectral_norm`` as parametrizations (torch's modules,
buffers and state_dict keys: ``parametrizations.weight.original0/original1``, ``parametrizations.weight.original``
plus ``parametrizations.weight.0._u/_v``)."""

from __future__ import annotations

from ..._creation import empty
from ..._tensor import Tensor
from ...autograd import no_grad
from ..module import Module
from ..modules.conv import _ConvTransposeNd
from . import parametrize
from ._norm_utils import norm_except_dim, normalize, weight_norm_value, weight_to_matrix

__all__ = ["weight_norm", "spectral_norm"]


class _WeightNorm(Module):
    def __init__(self, dim: int | None = 0) -> None:
        super().__init__()
        self.dim = -1 if dim is None else dim

    def forward(self, weight_g: Tensor, weight_v: Tensor) -> Tensor:
        return weight_norm_value(weight_v, weight_g, self.dim)

    def right_inverse(self, weight: Tensor) -> tuple[Tensor, Tensor]:
        return norm_except_dim(weight, 2, self.dim), weight


def weight_norm(module: Module, name: str = "weight", dim: int | None = 0) -> Module:
    """Reparametrize ``module.<name>`` as ``g * v / ||v||`` (magnitude ``original0``, direction ``original1``).

    Args:
        dim: the dim kept by the norm (one magnitude per slice along it); None: one magnitude for the whole tensor.
    Returns:
        ``module``.
    >>> m = lf.nn.utils.parametrizations.weight_norm(lf.nn.Linear(20, 40))
    >>> m.parametrizations.weight.original0.shape
    (40, 1)
    """
    return parametrize.register_parametrization(module, name, _WeightNorm(dim), unsafe=True)


class _SpectralNorm(Module):
    def __init__(self, weight: Tensor, n_power_iterations: int = 1, dim: int = 0, eps: float = 1e-12) -> None:
        super().__init__()
        ndim = weight.ndim
        if dim >= ndim or dim < -ndim:
            raise IndexError(f"Dimension out of range (expected to be in range of [-{ndim}, {ndim - 1}] but got {dim})")
        if n_power_iterations <= 0:
            raise ValueError(
                f"Expected n_power_iterations to be positive, but got n_power_iterations={n_power_iterations}"
            )
        self.dim = dim if dim >= 0 else dim + ndim
        self.eps = eps
        if ndim > 1:
            self.n_power_iterations = n_power_iterations
            mat = weight_to_matrix(weight.detach(), self.dim)
            h, w = mat.shape
            self.register_buffer("_u", normalize(empty(h, dtype=weight.dtype).normal_(0, 1), eps))
            self.register_buffer("_v", normalize(empty(w, dtype=weight.dtype).normal_(0, 1), eps))
            self._power_method(mat, 15)

    def _power_method(self, weight_mat: Tensor, n_power_iterations: int) -> None:
        with no_grad():
            for _ in range(n_power_iterations):
                self._u.copy_(normalize(weight_mat.mv(self._v), self.eps))
                self._v.copy_(normalize(weight_mat.t().mv(self._u), self.eps))

    def forward(self, weight: Tensor) -> Tensor:
        if weight.ndim == 1:
            return normalize(weight, self.eps)
        mat = weight_to_matrix(weight, self.dim)
        if self.training:
            self._power_method(mat.detach(), self.n_power_iterations)
        u, v = self._u.clone(), self._v.clone()
        sigma = (u * mat.mv(v)).sum()
        return weight / sigma

    def right_inverse(self, value: Tensor) -> Tensor:
        return value


def spectral_norm(
    module: Module, name: str = "weight", n_power_iterations: int = 1, eps: float = 1e-12, dim: int | None = None
) -> Module:
    """Divide ``module.<name>`` by its spectral norm, estimated by power iteration (one step per training forward;
    the ``_u``/``_v`` buffers are updated in place, also under ``lf.compile``).

    Args:
        n_power_iterations: power-iteration steps per training forward.
        eps: the normalization epsilon.
        dim: the output dim (default 0, or 1 for transposed convolutions).
    Returns:
        ``module``.
    Raises:
        ValueError: ``module`` has no tensor ``name``, or ``n_power_iterations <= 0``.
    """
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(f"Module '{module._get_name()}' has no parameter or buffer with name '{name}'")
    if dim is None:
        dim = 1 if isinstance(module, _ConvTransposeNd) else 0
    return parametrize.register_parametrization(module, name, _SpectralNorm(weight, n_power_iterations, dim, eps))
