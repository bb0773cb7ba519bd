"""Lazy modules (``LazyLinear``, ``LazyConv*``, ``LazyConvTranspose*``, ``LazyBatchNorm*``, ``LazyInstanceNorm*``):
the input size is inferred on the first forward, with torch's ``UninitializedParameter`` semantics.

Until then the parameters (and running-statistics buffers) are :class:`UninitializedParameter` /
:class:`UninitializedBuffer` placeholders. The first call materializes them in place (the same objects: an
optimizer built before the first call keeps working, as in torch), runs ``reset_parameters`` and turns the module
into its regular class (``LazyLinear`` -> ``Linear``). Loading a state_dict first materializes them with the
loaded shapes. Run one eager forward before ``lf.compile``: shapes are decided on the host.
"""

from __future__ import annotations

from typing import Any

from ..._core import dtypes as D
from ..._core.context import state
from ..._core.errors import GraphError, ShapeError
from ..._creation import empty, tensor
from ..._tensor import Tensor, _rebind
from ...autograd import no_grad
from ..parameter import Parameter
from .conv import Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d
from .linear import Linear
from .normalization import BatchNorm1d, BatchNorm2d, BatchNorm3d
from .normalization_more import InstanceNorm1d, InstanceNorm2d, InstanceNorm3d

__all__ = [
    "UninitializedParameter",
    "UninitializedBuffer",
    "LazyModuleMixin",
    "LazyLinear",
    "LazyConv1d",
    "LazyConv2d",
    "LazyConv3d",
    "LazyConvTranspose1d",
    "LazyConvTranspose2d",
    "LazyConvTranspose3d",
    "LazyBatchNorm1d",
    "LazyBatchNorm2d",
    "LazyBatchNorm3d",
    "LazyInstanceNorm1d",
    "LazyInstanceNorm2d",
    "LazyInstanceNorm3d",
]


class _Uninitialized:
    __slots__ = ()
    cls_to_become: type = Parameter

    def materialize(self, shape, device=None, dtype=None) -> None:
        """Give the placeholder ``shape`` (uninitialized values) and make it a regular tensor of its kind."""
        if isinstance(shape, int):
            shape = (shape,)
        dt = dtype if dtype is not None else self.dtype  # pyright: ignore[reportAttributeAccessIssue]
        with no_grad():
            new = empty(tuple(shape), dtype=dt, device=device)
        _rebind(self, new._value)
        self.__class__ = self.cls_to_become

    def __repr__(self) -> str:
        return f"<{type(self).__name__}>"


class UninitializedParameter(_Uninitialized, Parameter):
    """A parameter whose shape is not known yet (torch's ``nn.parameter.UninitializedParameter``).

    Args:
        requires_grad: as :class:`Parameter`.
        device, dtype: kept for :meth:`materialize`.
    """

    __slots__ = ()
    cls_to_become = Parameter

    def __new__(cls, requires_grad: bool = True, device=None, dtype=None):
        return Parameter.__new__(cls, empty(0, dtype=dtype, device=device), requires_grad)


class UninitializedBuffer(_Uninitialized, Tensor):
    """A buffer whose shape is not known yet (torch's ``nn.parameter.UninitializedBuffer``)."""

    __slots__ = ()
    cls_to_become = Tensor

    def __new__(cls, requires_grad: bool = False, device=None, dtype=None):
        t = empty(0, dtype=dtype, device=device)
        t.__class__ = cls
        return t


def _uninitialized(t) -> bool:
    return isinstance(t, _Uninitialized)


class LazyModuleMixin:
    """Adds input-shape inference: ``initialize_parameters(*args)`` runs once, before the first forward, then the
    module becomes ``cls_to_become``."""

    cls_to_become: type | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._initialize_hook = self.register_forward_pre_hook(  # pyright: ignore[reportAttributeAccessIssue]
            self._infer_parameters, with_kwargs=True
        )

    def has_uninitialized_params(self) -> bool:
        """Whether a parameter or buffer of this module is still a placeholder."""
        own = list(self._parameters.values()) + list(self._buffers.values())  # pyright: ignore[reportAttributeAccessIssue]
        return any(_uninitialized(t) for t in own)

    def initialize_parameters(self, *args: Any, **kwargs: Any) -> None:
        raise NotImplementedError(f"initialize_parameters is not implemented for {type(self).__name__}")

    def _infer_parameters(self, module, args, kwargs):
        if state.tracing:
            raise GraphError(
                f"{type(self).__name__} is not initialized: run one eager forward (a dry run with a sample batch) "
                "before lf.compile, so that its parameter shapes are known"
            )
        self.initialize_parameters(*args, **kwargs)
        if self.has_uninitialized_params():
            raise RuntimeError(f"module {type(self).__name__} has not been fully initialized")
        self._initialize_hook.remove()
        del self._initialize_hook
        if self.cls_to_become is not None:
            self.__class__ = self.cls_to_become
        return None

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing, unexpected, errors):
        for name, t in list(self._parameters.items()) + list(self._buffers.items()):  # pyright: ignore[reportAttributeAccessIssue]
            key = prefix + name
            if _uninitialized(t) and key in state_dict:
                t.materialize(tuple(state_dict[key].shape))
        super()._load_from_state_dict(  # pyright: ignore[reportAttributeAccessIssue]
            state_dict, prefix, local_metadata, strict, missing, unexpected, errors
        )


class LazyLinear(LazyModuleMixin, Linear):
    """:class:`Linear` whose ``in_features`` is inferred from the first input's last dim."""

    cls_to_become = Linear

    def __init__(self, out_features: int, bias: bool = True, device=None, dtype=None) -> None:
        super().__init__(0, 0, False)
        self.weight = UninitializedParameter(device=device, dtype=dtype)
        self.out_features = out_features
        if bias:
            self.bias = UninitializedParameter(device=device, dtype=dtype)

    def reset_parameters(self) -> None:
        if not self.has_uninitialized_params() and self.in_features != 0:
            super().reset_parameters()

    def initialize_parameters(self, input: Tensor, *args: Any, **kwargs: Any) -> None:
        if not self.has_uninitialized_params() and self.in_features == 0:  # materialized by load_state_dict
            self.in_features = self.weight.shape[1]
        if self.has_uninitialized_params():
            if not isinstance(input, Tensor) or input.ndim == 0:
                raise ShapeError(f"LazyLinear: expected an input of shape (*, in_features), got {input!r}")
            self.in_features = input.shape[-1]
            self.weight.materialize((self.out_features, self.in_features))
            if self.bias is not None:
                self.bias.materialize((self.out_features,))
            self.reset_parameters()


class _LazyConvMixin(LazyModuleMixin):
    def reset_parameters(self) -> None:
        if not self.has_uninitialized_params() and self.in_channels != 0:  # pyright: ignore[reportAttributeAccessIssue]
            super().reset_parameters()  # pyright: ignore[reportAttributeAccessIssue]

    def initialize_parameters(self, input: Tensor, *args: Any, **kwargs: Any) -> None:
        m: Any = self
        if not self.has_uninitialized_params():
            if m.in_channels == 0:  # materialized by load_state_dict
                m.in_channels = m.weight.shape[0] if m.transposed else m.weight.shape[1] * m.groups
            return
        nd = self._nd  # pyright: ignore[reportAttributeAccessIssue]
        if not isinstance(input, Tensor) or input.ndim not in (nd + 1, nd + 2):
            raise ShapeError(
                f"{type(self).__name__}: expected a {nd + 1}D (unbatched) or {nd + 2}D (batched) input, got "
                f"{list(input.shape) if isinstance(input, Tensor) else type(input).__name__}"
            )
        s = self  # the conv attributes come from the regular class
        s.in_channels = input.shape[0 if input.ndim == nd + 1 else 1]  # pyright: ignore[reportAttributeAccessIssue]
        if s.in_channels % s.groups:  # pyright: ignore[reportAttributeAccessIssue]
            raise ValueError("in_channels must be divisible by groups")
        if s.transposed:  # pyright: ignore[reportAttributeAccessIssue]
            shape = (s.in_channels, s.out_channels // s.groups, *s.kernel_size)  # pyright: ignore[reportAttributeAccessIssue]
        else:
            shape = (s.out_channels, s.in_channels // s.groups, *s.kernel_size)  # pyright: ignore[reportAttributeAccessIssue]
        s.weight.materialize(shape)  # pyright: ignore[reportAttributeAccessIssue]
        if s.bias is not None:  # pyright: ignore[reportAttributeAccessIssue]
            s.bias.materialize((s.out_channels,))  # pyright: ignore[reportAttributeAccessIssue]
        self.reset_parameters()


def _lazy_conv(base: type, transposed: bool):
    b: Any = base

    def init_transposed(
        self,
        out_channels: int,
        kernel_size,
        stride=1,
        padding=0,
        output_padding=0,
        groups: int = 1,
        bias: bool = True,
        dilation=1,
        padding_mode: str = "zeros",
        device=None,
        dtype=None,
    ) -> None:
        b.__init__(self, 0, 0, kernel_size, stride, padding, output_padding, groups, False, dilation, padding_mode)
        _finish_conv(self, out_channels, bias, device, dtype)

    def init_conv(
        self,
        out_channels: int,
        kernel_size,
        stride=1,
        padding=0,
        dilation=1,
        groups: int = 1,
        bias: bool = True,
        padding_mode: str = "zeros",
        device=None,
        dtype=None,
    ) -> None:
        b.__init__(self, 0, 0, kernel_size, stride, padding, dilation, groups, False, padding_mode)
        _finish_conv(self, out_channels, bias, device, dtype)

    name = "Lazy" + base.__name__
    doc = (
        f""":class:`{base.__name__}` whose ``in_channels`` is inferred from the first input (dim 1, or 0 unbatched)."""
    )
    init = init_transposed if transposed else init_conv
    cls = type(name, (_LazyConvMixin, base), {"__init__": init, "cls_to_become": base, "__doc__": doc})
    cls.__module__ = __name__
    return cls


def _finish_conv(m, out_channels: int, bias: bool, device, dtype) -> None:
    m._initialize_hook = m.register_forward_pre_hook(m._infer_parameters, with_kwargs=True)
    m.weight = UninitializedParameter(device=device, dtype=dtype)
    m.out_channels = out_channels
    if bias:
        m.bias = UninitializedParameter(device=device, dtype=dtype)


LazyConv1d = _lazy_conv(Conv1d, False)
LazyConv2d = _lazy_conv(Conv2d, False)
LazyConv3d = _lazy_conv(Conv3d, False)
LazyConvTranspose1d = _lazy_conv(ConvTranspose1d, True)
LazyConvTranspose2d = _lazy_conv(ConvTranspose2d, True)
LazyConvTranspose3d = _lazy_conv(ConvTranspose3d, True)


class _LazyNormMixin(LazyModuleMixin):
    def _lazy_init(self, affine: bool, track_running_stats: bool, device, dtype) -> None:
        m: Any = self
        if affine:
            m.weight = UninitializedParameter(device=device, dtype=dtype)
            m.bias = UninitializedParameter(device=device, dtype=dtype)
        if track_running_stats:
            m.running_mean = UninitializedBuffer(device=device, dtype=dtype)
            m.running_var = UninitializedBuffer(device=device, dtype=dtype)

    def reset_parameters(self) -> None:
        if not self.has_uninitialized_params() and self.num_features != 0:  # pyright: ignore[reportAttributeAccessIssue]
            super().reset_parameters()  # pyright: ignore[reportAttributeAccessIssue]

    def initialize_parameters(self, input: Tensor, *args: Any, **kwargs: Any) -> None:
        m: Any = self
        if not self.has_uninitialized_params():
            known = [t for t in (m.weight, m.running_mean) if t is not None]
            if m.num_features == 0 and known:  # materialized by load_state_dict (else stays 0, as torch's)
                m.num_features = known[0].shape[0]
            return
        if not isinstance(input, Tensor) or input.ndim < 2:
            raise ShapeError(f"{type(self).__name__}: expected an input of shape (N, C, *), got {input!r}")
        unbatched = getattr(m, "_spatial", None) is not None and input.ndim == m._spatial + 1
        m.num_features = input.shape[0 if unbatched else 1]
        for t in (m.weight, m.bias, m.running_mean, m.running_var):
            if t is not None and _uninitialized(t):
                t.materialize((m.num_features,))
        self.reset_parameters()


def _lazy_norm(base: type):
    b: Any = base

    def __init__(
        self,
        eps: float = 1e-5,
        momentum: float | None = 0.1,
        affine: bool = True,
        track_running_stats: bool = True,
        device=None,
        dtype=None,
    ) -> None:
        b.__init__(self, 0, eps, momentum, False, False)
        self.affine = affine
        self.track_running_stats = track_running_stats
        if track_running_stats:
            self.register_buffer("num_batches_tracked", tensor(0, dtype=D.int64))
        self._initialize_hook = self.register_forward_pre_hook(self._infer_parameters, with_kwargs=True)
        self._lazy_init(affine, track_running_stats, device, dtype)

    name = "Lazy" + base.__name__
    doc = f""":class:`{base.__name__}` whose ``num_features`` is inferred from the first input's channel dim."""
    cls = type(name, (_LazyNormMixin, base), {"__init__": __init__, "cls_to_become": base, "__doc__": doc})
    cls.__module__ = __name__
    return cls


LazyBatchNorm1d = _lazy_norm(BatchNorm1d)
LazyBatchNorm2d = _lazy_norm(BatchNorm2d)
LazyBatchNorm3d = _lazy_norm(BatchNorm3d)
LazyInstanceNorm1d = _lazy_norm(InstanceNorm1d)
LazyInstanceNorm2d = _lazy_norm(InstanceNorm2d)
LazyInstanceNorm3d = _lazy_norm(InstanceNorm3d)
