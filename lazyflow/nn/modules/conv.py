"""Convolution layers with torch's constructor signatures, parameter names, shapes and initialisation."""

from __future__ import annotations

from collections.abc import Sequence

from ... import _functional as _F
from ..._core.errors import ShapeError
from ..._creation import empty
from ..._tensor import Tensor
from .. import functional as F
from .. import init
from ..module import Module
from ..parameter import Parameter

__all__ = ["Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d"]

_PADDING_MODES = ("zeros", "reflect", "replicate", "circular")


def layer_shape_error(layer: Module, expected: str, got: Tensor) -> ShapeError:
    """A ShapeError naming the layer (with its arguments), the expected and the received shape."""
    return ShapeError(
        f"{layer._get_name()}({layer.extra_repr()}): expected input of shape {expected}, got "
        f"input of shape {list(got.shape)}"
    )


def _tuple(v, n: int, what: str) -> tuple[int, ...]:
    if isinstance(v, int):
        return (v,) * n
    t = tuple(int(i) for i in v)
    if len(t) == 1:
        t = t * n
    if len(t) != n:
        raise ValueError(f"expected {what} to be an int or a tuple of {n} ints, got {v!r}")
    return t


class _ConvNd(Module):
    _nd = 2
    _transposed = False

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size,
        stride,
        padding,
        dilation,
        transposed: bool,
        output_padding,
        groups: int,
        bias: bool,
        padding_mode: str,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__()
        nd = self._nd
        if groups <= 0:
            raise ValueError("groups must be a positive integer")
        if in_channels % groups != 0:
            raise ValueError("in_channels must be divisible by groups")
        if out_channels % groups != 0:
            raise ValueError("out_channels must be divisible by groups")
        if padding_mode not in _PADDING_MODES:
            raise ValueError(f"padding_mode must be one of {_PADDING_MODES}, but got padding_mode='{padding_mode}'")
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = _tuple(kernel_size, nd, "kernel_size")
        self.stride = _tuple(stride, nd, "stride")
        self.dilation = _tuple(dilation, nd, "dilation")
        if isinstance(padding, str):
            if padding not in ("same", "valid"):
                raise ValueError(f"Invalid padding string {padding!r}, should be one of ['valid', 'same']")
            if padding == "same" and any(s != 1 for s in self.stride):
                raise ValueError("padding='same' is not supported for strided convolutions")
            self.padding = padding
        else:
            self.padding = _tuple(padding, nd, "padding")
        self.transposed = transposed
        self.output_padding = _tuple(output_padding, nd, "output_padding")
        self.groups = groups
        self.padding_mode = padding_mode
        # F.pad order: (left, right) pairs from the last dim backwards
        if isinstance(self.padding, str):
            pads = []
            for d, k in zip(self.dilation, self.kernel_size):
                total = d * (k - 1)
                pads.append((total // 2, total - total // 2))
            self._reversed_padding_repeated_twice = [p for lo, hi in reversed(pads) for p in (lo, hi)]
        else:
            self._reversed_padding_repeated_twice = [p for x in reversed(self.padding) for p in (x, x)]
        if transposed:
            shape = (in_channels, out_channels // groups, *self.kernel_size)
        else:
            shape = (out_channels, in_channels // groups, *self.kernel_size)
        self.weight = Parameter(empty(shape, device=device, dtype=dtype))
        if bias:
            self.bias = Parameter(empty(out_channels, device=device, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Re-draw weight ~ kaiming_uniform_(a=sqrt(5)) and bias ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in))."""
        init._reset_fan_in_(self.weight, self.bias)

    def extra_repr(self) -> str:
        nd = self._nd
        s = "{in_channels}, {out_channels}, kernel_size={kernel_size}, stride={stride}"
        if self.padding != (0,) * nd:
            s += ", padding={padding}"
        if self.dilation != (1,) * nd:
            s += ", dilation={dilation}"
        if self.output_padding != (0,) * nd:
            s += ", output_padding={output_padding}"
        if self.groups != 1:
            s += ", groups={groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += ", padding_mode={padding_mode}"
        return s.format(**self.__dict__)

    def _check_input(self, input: Tensor) -> None:
        nd = self._nd
        sp = {1: "L", 2: "H, W", 3: "D, H, W"}[nd]
        if (
            not isinstance(input, Tensor)
            or input.ndim not in (nd + 1, nd + 2)
            or input.shape[-nd - 1] != self.in_channels
        ):
            if not isinstance(input, Tensor):
                raise TypeError(f"{self._get_name()}: expected a lazyflow Tensor, got {type(input).__name__}")
            raise layer_shape_error(self, f"(N, {self.in_channels}, {sp}) or ({self.in_channels}, {sp})", input)

    def __setstate__(self, state: dict) -> None:
        super().__setstate__(state)
        if not hasattr(self, "padding_mode"):
            self.padding_mode = "zeros"


class _Conv(_ConvNd):
    _fn = staticmethod(F.conv2d)

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int | Sequence[int],
        stride: int | Sequence[int] = 1,
        padding: str | int | Sequence[int] = 0,
        dilation: int | Sequence[int] = 1,
        groups: int = 1,
        bias: bool = True,
        padding_mode: str = "zeros",
        device=None,
        dtype=None,
    ) -> None:
        super().__init__(
            in_channels,
            out_channels,
            kernel_size,
            stride,
            padding,
            dilation,
            False,
            0,
            groups,
            bias,
            padding_mode,
            device,
            dtype,
        )

    def _conv_forward(self, input: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
        if self.padding_mode != "zeros":
            x = _F.pad(input, self._reversed_padding_repeated_twice, mode=self.padding_mode)
            return self._fn(x, weight, bias, self.stride, 0, self.dilation, self.groups)
        return self._fn(input, weight, bias, self.stride, self.padding, self.dilation, self.groups)

    def forward(self, input: Tensor) -> Tensor:
        self._check_input(input)
        return self._conv_forward(input, self.weight, self.bias)


class Conv1d(_Conv):
    """1-D convolution over ``(N, C_in, L)`` (or unbatched ``(C_in, L)``).

    Args:
        in_channels, out_channels: channel counts.
        kernel_size, stride, dilation: int or 1-tuple.
        padding: int, 1-tuple, ``"valid"`` or ``"same"`` (stride 1 only).
        groups: blocked connections; must divide both channel counts.
        bias: learn an additive bias.
        padding_mode: ``"zeros"``, ``"reflect"``, ``"replicate"`` or ``"circular"``.
    Attributes:
        weight: ``(out_channels, in_channels / groups, k)``, kaiming_uniform_(a=sqrt(5)) like torch.
        bias: ``(out_channels,)``, U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
    Raises:
        ValueError: bad constructor arguments. ShapeError (on call): wrong rank or channel count.
    """

    _nd = 1
    _fn = staticmethod(F.conv1d)


class Conv2d(_Conv):
    """2-D convolution over ``(N, C_in, H, W)`` (or unbatched ``(C_in, H, W)``).

    Args:
        in_channels, out_channels: channel counts.
        kernel_size, stride, dilation: int or pair.
        padding: int, pair, ``"valid"`` or ``"same"`` (stride 1 only).
        groups: blocked connections; must divide both channel counts.
        bias: learn an additive bias.
        padding_mode: ``"zeros"``, ``"reflect"``, ``"replicate"`` or ``"circular"``.
    Attributes:
        weight: ``(out_channels, in_channels / groups, kH, kW)``, kaiming_uniform_(a=sqrt(5)) like torch.
        bias: ``(out_channels,)``, U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
    Raises:
        ValueError: bad constructor arguments. ShapeError (on call): wrong rank or channel count.

    >>> lf.nn.Conv2d(3, 8, 3, padding=1)(lf.randn(2, 3, 16, 16)).shape
    (2, 8, 16, 16)
    """

    _nd = 2
    _fn = staticmethod(F.conv2d)


class Conv3d(_Conv):
    """3-D convolution over ``(N, C_in, D, H, W)``; arguments as :class:`Conv2d` with triples."""

    _nd = 3
    _fn = staticmethod(F.conv3d)


class _ConvTransposeNd(_ConvNd):
    _fn = staticmethod(F.conv_transpose2d)

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int | Sequence[int],
        stride: int | Sequence[int] = 1,
        padding: int | Sequence[int] = 0,
        output_padding: int | Sequence[int] = 0,
        groups: int = 1,
        bias: bool = True,
        dilation: int | Sequence[int] = 1,
        padding_mode: str = "zeros",
        device=None,
        dtype=None,
    ) -> None:
        if padding_mode != "zeros":
            raise ValueError(f'Only "zeros" padding mode is supported for {type(self).__name__}')
        if isinstance(padding, str):
            raise ValueError(f"{type(self).__name__} does not support string padding {padding!r}")
        super().__init__(
            in_channels,
            out_channels,
            kernel_size,
            stride,
            padding,
            dilation,
            True,
            output_padding,
            groups,
            bias,
            padding_mode,
            device,
            dtype,
        )

    def _output_padding(self, input: Tensor, output_size) -> tuple[int, ...]:
        if output_size is None:
            return self.output_padding
        nd = self._nd
        out = [int(s) for s in output_size]
        if len(out) == nd + 2 or len(out) == nd + 1:
            out = out[-nd:]
        if len(out) != nd:
            raise ValueError(f"output_size must have {nd} or {nd + 2} elements (got {len(out)})")
        res = []
        for d in range(nd):
            in_size = input.shape[input.ndim - nd + d]
            lo = (
                (in_size - 1) * self.stride[d]
                - 2 * int(self.padding[d])
                + self.dilation[d] * (self.kernel_size[d] - 1)
                + 1
            )
            hi = lo + self.stride[d] - 1
            if not lo <= out[d] <= hi:
                raise ShapeError(
                    f"{self._get_name()}: requested an output size of {out}, but valid sizes range "
                    f"from {lo} to {hi} along spatial dim {d} (for an input of shape "
                    f"{list(input.shape)})"
                )
            res.append(out[d] - lo)
        return tuple(res)

    def forward(self, input: Tensor, output_size: Sequence[int] | None = None) -> Tensor:
        padding = self.padding
        if isinstance(padding, str):  # __init__ refuses one; this catches one assigned later
            raise ValueError(f"{type(self).__name__} does not support string padding {padding!r}")
        self._check_input(input)
        op = self._output_padding(input, output_size)
        return self._fn(input, self.weight, self.bias, self.stride, padding, op, self.groups, self.dilation)


class ConvTranspose1d(_ConvTransposeNd):
    """1-D transposed convolution over ``(N, C_in, L)``; arguments as :class:`ConvTranspose2d`."""

    _nd = 1
    _fn = staticmethod(F.conv_transpose1d)


class ConvTranspose2d(_ConvTransposeNd):
    """2-D transposed convolution ("deconvolution") over ``(N, C_in, H, W)``.

    Args:
        in_channels, out_channels: channel counts.
        kernel_size, stride, padding, dilation: int or pair.
        output_padding: extra size on one side of the output (smaller than stride or dilation).
        groups: blocked connections.
        bias: learn an additive bias.
        padding_mode: only ``"zeros"``.
    Attributes:
        weight: ``(in_channels, out_channels / groups, kH, kW)``, kaiming_uniform_(a=sqrt(5)).
        bias: ``(out_channels,)``.
    Raises:
        ValueError: bad constructor arguments. ShapeError (on call): wrong rank, channel count, or an
            ``output_size`` out of the reachable range.
    """

    _nd = 2
    _fn = staticmethod(F.conv_transpose2d)


class ConvTranspose3d(_ConvTransposeNd):
    """3-D transposed convolution over ``(N, C_in, D, H, W)``; arguments as :class:`ConvTranspose2d` (triples)."""

    _nd = 3
    _fn = staticmethod(F.conv_transpose3d)
