"""Attach the functional ops to Tensor as methods and operators (each op is written once, as a function), plus
the Tensor methods that need the layers above ``_tensor.py`` (construction from data, ``backward``, indexing), and
print tensors the way torch does. The top of the Tensor layer: nothing below imports it."""

from __future__ import annotations

import builtins
import math
from typing import cast

import numpy as np

from . import _creation as C
from . import _functional as F
from . import _householder as HH
from . import _linalg_top as LT
from . import _runtime as RT
from . import _spectral as SP
from . import _tensor_extras as TX
from ._core import dtypes as D
from ._core.context import state
from ._core.errors import AutogradError, GraphError, ValueRangeError, user_frame
from ._functional import complex_parts as CX
from ._functional.elementwise import _UNARY
from ._functional.inplace import _ip
from ._indexing import getitem, setitem
from ._legacy import legacy_new, tensor_type
from ._tensor import Tensor, _Tracer
from .autograd import engine as _engine
from .autograd.function import backward as _autograd_backward
from .ops.table import REGISTRY as R

for _n, _f in F.METHODS.items():
    setattr(Tensor, _n, _f)
for _n in LT.__all__:
    if _n not in LT.NOT_METHODS:
        setattr(Tensor, _n, getattr(LT, _n))
for _n, _f in {
    **LT.METHOD_ONLY,
    **RT.METHODS,
    **CX.PROPERTIES,
    "stft": SP.stft,
    "istft": SP.istft,
    **TX.METHODS,
    **TX.PROPERTIES,
    **HH.METHODS,
}.items():
    setattr(Tensor, _n, _f)

# in-place forms of elementwise ops (relu_, exp_, ...), one generic wrapper per op
for _n in [
    *(n for n in _UNARY if n not in ("isnan", "isinf", "isfinite", "logsigmoid")),
    "remainder",
    "floor_divide",
    "fmod",
    "atan2",
    "lerp",
    "eq",
    "ne",
    "lt",
    "le",
    "gt",
    "ge",
    "logical_and",
    "logical_or",
    "logical_xor",
    "bitwise_and",
    "bitwise_or",
    "bitwise_xor",
    "bitwise_left_shift",
    "bitwise_right_shift",
]:
    setattr(Tensor, _n + "_", _ip(_n))
Tensor.arcsin_, Tensor.arccos_, Tensor.arctan_, Tensor.negative_, Tensor.absolute_, Tensor.fix_ = (
    Tensor.asin_,
    Tensor.acos_,
    Tensor.atan_,
    Tensor.neg_,
    Tensor.abs_,
    Tensor.trunc_,
)
Tensor.multiply_, Tensor.divide_, Tensor.true_divide_, Tensor.subtract_ = (
    Tensor.mul_,
    Tensor.div_,
    Tensor.div_,
    Tensor.sub_,
)


def _addcmul_(self: Tensor, tensor1, tensor2, *, value=1) -> Tensor:
    """In-place :func:`lazyflow.addcmul`."""
    return state.interp.apply_inplace(R["addcmul"], self, (self, tensor1, tensor2), (value,))


def _addcdiv_(self: Tensor, tensor1, tensor2, *, value=1) -> Tensor:
    """In-place :func:`lazyflow.addcdiv`."""
    return state.interp.apply_inplace(R["addcdiv"], self, (self, tensor1, tensor2), (value,))


def _round_(self: Tensor, *, decimals: int = 0) -> Tensor:
    """In-place :func:`lazyflow.round`."""
    return state.interp.apply_inplace(R["round"], self, (self,), (builtins.int(decimals),))


def _where(self: Tensor, condition, other) -> Tensor:
    """``self.where(condition, other)`` is ``lf.where(condition, self, other)``."""
    return cast(Tensor, F.where(condition, self, other))  # three arguments: one tensor


def _split(self: Tensor, split_size, dim: int = 0) -> tuple:
    """``self.split(split_size, dim)``: :func:`lazyflow.split` under ``Tensor.split``'s argument names."""
    return F.split(self, split_size, dim)


def _bernoulli(self: Tensor, p=None, *, generator=None) -> Tensor:
    """Samples with probabilities ``self`` (or a scalar ``p``); see :func:`lazyflow.bernoulli`."""
    return C.bernoulli(self, p, generator=generator)


def _multinomial(self: Tensor, num_samples: int, replacement: bool = False, *, generator=None) -> Tensor:
    """Category samples from the rows of ``self``; see :func:`lazyflow.multinomial`."""
    return C.multinomial(self, num_samples, replacement, generator=generator)


def _new(creator):
    def f(self: Tensor, *args, size=None, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
        return creator(
            *args,
            size=size,
            dtype=self.dtype if dtype is None else dtype,
            device=device or self.device,
            requires_grad=requires_grad,
        )

    f.__name__ = "new_" + creator.__name__
    f.__doc__ = f"``lf.{creator.__name__}`` with this tensor's dtype and device unless given."
    return f


def _new_full(self: Tensor, size, fill_value, *, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """``lf.full`` with this tensor's dtype and device unless given."""
    return C.full(
        size,
        fill_value,
        dtype=self.dtype if dtype is None else dtype,
        device=device or self.device,
        requires_grad=requires_grad,
    )


def _new_tensor(self: Tensor, data, *, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """``lf.tensor(data)`` with this tensor's dtype and device unless given."""
    return C.tensor(
        data, dtype=self.dtype if dtype is None else dtype, device=device or self.device, requires_grad=requires_grad
    )


def _tensor_new(cls, *args, data=None, size=None, device=None, **unexpected):
    """``lf.Tensor(...)`` is torch's legacy constructor (see :func:`lazyflow._legacy.legacy_new`): data converted to
    the default float dtype, sizes giving zeros, nothing giving an empty tensor. ``Tensor.__new__(cls)`` of a subclass
    is the bare object that the subclass fills in.

    Raises:
        TypeError: a keyword other than data/size/device (``dtype=``, ``requires_grad=``: use ``lf.tensor``).
    """
    if cls is Tensor:
        if unexpected:
            raise TypeError(
                f"Tensor() got unexpected keyword arguments {sorted(unexpected)} (it takes data, size and "
                "device, like torch.Tensor); use lf.tensor(data, dtype=..., requires_grad=...)"
            )
        return legacy_new(D.get_default_dtype(), None, args, data, size, device)
    return object.__new__(cls)


def _backward(
    self: Tensor, gradient=None, retain_graph: bool | None = None, create_graph: bool = False, inputs=None
) -> None:
    """Accumulate gradients of this tensor into the ``.grad`` of the leaves it depends on."""
    _autograd_backward(self, gradient, retain_graph=retain_graph, create_graph=create_graph, inputs=inputs)


def _register_hook(self: Tensor, hook):
    """Call ``hook(grad)`` each time the gradient of this tensor is computed; a returned Tensor replaces the
    gradient. Returns a handle whose ``remove()`` unregisters it.

    Eagerly and in an ``lf.nn.Graph`` step (whose backward runs on the tape inside the program) hooks run as in
    torch. Inside ``lf.compile`` (and ``lf.func`` transforms) the program is differentiated by JAX as a whole, with no
    tape to attach a hook to: registering one there raises :class:`GraphError`.

    Raises:
        AutogradError: the tensor does not require grad.
        GraphError: called inside ``lf.compile``'s trace.
    """
    if state.tracing and not state.grad_enabled:
        raise GraphError(
            f"Tensor.register_hook inside compiled code at {user_frame()}: lf.compile (and an lf.func transform) "
            "differentiates the program with JAX as a whole, so there is no tape to hook; register the hook outside "
            "the compiled function (on its inputs or outputs), or use lf.nn.Graph, whose backward runs on the tape"
        )
    return _engine.register_hook(self, hook)


def _register_post_accumulate_grad_hook(self: Tensor, hook):
    """Call ``hook(tensor)`` after a backward has accumulated into this leaf's ``.grad``; returns a handle."""
    if self._node is not None:
        raise AutogradError("post accumulate grad hooks cannot be registered on non-leaf tensors")
    if not self._rg:
        raise AutogradError("cannot register a hook on a tensor that doesn't require gradient")
    return _engine.register_post_accumulate_grad_hook(self, hook)


Tensor.__new__ = staticmethod(_tensor_new)
Tensor.backward = _backward
Tensor.register_hook = _register_hook
Tensor.register_post_accumulate_grad_hook = _register_post_accumulate_grad_hook
Tensor.__getitem__ = getitem
Tensor.__setitem__ = setitem
Tensor.addcmul_ = _addcmul_
Tensor.addcdiv_ = _addcdiv_
Tensor.round_ = _round_
Tensor.where = _where
Tensor.split = _split
Tensor.type = tensor_type
Tensor.bernoulli = _bernoulli
Tensor.multinomial = _multinomial
Tensor.new_zeros = _new(C.zeros)
Tensor.new_ones = _new(C.ones)
Tensor.new_empty = _new(C.empty)
Tensor.new_full = _new_full
Tensor.new_tensor = _new_tensor

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
Tensor.__rsub__ = lambda self, other: F.sub(other, self)
Tensor.__mul__ = _binop(_MUL)
Tensor.__rmul__ = _binop(_MUL, True)
Tensor.__truediv__ = _binop(_DIV)
Tensor.__rtruediv__ = _binop(_DIV, True)
Tensor.__floordiv__ = _binop(R["floor_divide"])
Tensor.__rfloordiv__ = _binop(R["floor_divide"], True)
Tensor.__mod__ = _binop(R["remainder"])
Tensor.__rmod__ = _binop(R["remainder"], True)
Tensor.__pow__ = F.pow  # pyright: ignore[reportAttributeAccessIssue]  # (input, exponent) is (self, exponent)
Tensor.__rpow__ = _binop(R["pow"], True)
Tensor.__lshift__ = _binop(R["bitwise_left_shift"])
Tensor.__rlshift__ = _binop(R["bitwise_left_shift"], True)
Tensor.__rshift__ = _binop(R["bitwise_right_shift"])
Tensor.__rrshift__ = _binop(R["bitwise_right_shift"], True)
Tensor.__matmul__ = F.matmul  # pyright: ignore[reportAttributeAccessIssue]  # (input, other) is (self, other)
Tensor.__rmatmul__ = lambda self, other: F.matmul(other, self)
Tensor.__neg__ = F.neg  # pyright: ignore[reportAttributeAccessIssue]  # input is self
Tensor.__pos__ = lambda self: self
Tensor.__abs__ = F.abs  # pyright: ignore[reportAttributeAccessIssue]  # input is self
Tensor.__eq__ = _binop(R["eq"])
Tensor.__ne__ = _binop(R["ne"])
Tensor.__lt__ = _binop(R["lt"])
Tensor.__le__ = _binop(R["le"])
Tensor.__gt__ = _binop(R["gt"])
Tensor.__ge__ = _binop(R["ge"])


def _invert(self):
    return F.logical_not(self) if self.dtype is D.bool_ else F.bitwise_not(self)


def _both_bool(self, other) -> bool:
    return self.dtype is D.bool_ and (
        other.dtype is D.bool_ if isinstance(other, Tensor) else isinstance(other, builtins.bool)
    )


def _logic(name, bool_name, inplace=False):
    def f(self, other):
        n = bool_name if _both_bool(self, other) else name
        return getattr(Tensor, n + "_")(self, other) if inplace else getattr(F, n)(self, other)

    return f


Tensor.__invert__ = _invert
Tensor.__and__ = Tensor.__rand__ = _logic("bitwise_and", "logical_and")
Tensor.__or__ = Tensor.__ror__ = _logic("bitwise_or", "logical_or")
Tensor.__xor__ = Tensor.__rxor__ = _logic("bitwise_xor", "logical_xor")
Tensor.__iand__ = _logic("bitwise_and", "logical_and", True)
Tensor.__ior__ = _logic("bitwise_or", "logical_or", True)
Tensor.__ixor__ = _logic("bitwise_xor", "logical_xor", True)
Tensor.__hash__ = object.__hash__  # identity, as torch; C-level (dict lookups keyed by tensors stay cheap)


def _iop(name):
    def f(self, other):
        return getattr(Tensor, name)(self, other)

    return f


Tensor.__iadd__ = _iop("add_")
Tensor.__isub__ = _iop("sub_")
Tensor.__imul__ = _iop("mul_")
Tensor.__itruediv__ = _iop("div_")
Tensor.__ipow__ = _iop("pow_")
Tensor.__imod__ = _iop("remainder_")
Tensor.__ifloordiv__ = _iop("floor_divide_")
Tensor.__ilshift__ = _iop("bitwise_left_shift_")
Tensor.__irshift__ = _iop("bitwise_right_shift_")


# ---------------------------------------------------------------- printing, as torch/_tensor_str.py does
_PRECISION, _THRESHOLD, _EDGEITEMS, _LINEWIDTH = 4, 1000, 3, 80
_SCI_MODE: bool | None = None
_PROFILES = {"default": (4, 1000, 3, 80), "short": (2, 1000, 2, 80), "full": (4, math.inf, 3, 80)}


def set_printoptions(
    precision: int | None = None,
    threshold: float | None = None,
    edgeitems: int | None = None,
    linewidth: int | None = None,
    profile: str | None = None,
    sci_mode: bool | None = None,
) -> None:
    """How tensors print, as ``torch.set_printoptions``: digits after the point, the element count above which
    printing summarizes, the items kept at each edge then, the line width, a ``profile`` (``"default"``,
    ``"short"``, ``"full"``) setting all four, and ``sci_mode`` (True/False forces scientific notation on or off,
    None decides per tensor).

    Raises:
        ValueRangeError: an unknown profile.
    """
    global _PRECISION, _THRESHOLD, _EDGEITEMS, _LINEWIDTH, _SCI_MODE
    if profile is not None:
        if profile not in _PROFILES:
            raise ValueRangeError(f"set_printoptions: profile must be one of {sorted(_PROFILES)}, got {profile!r}")
        _PRECISION, _THRESHOLD, _EDGEITEMS, _LINEWIDTH = _PROFILES[profile]
    if precision is not None:
        _PRECISION = builtins.int(precision)
    if threshold is not None:
        _THRESHOLD = threshold
    if edgeitems is not None:
        _EDGEITEMS = builtins.int(edgeitems)
    if linewidth is not None:
        _LINEWIDTH = builtins.int(linewidth)
    _SCI_MODE = sci_mode


class _Formatter:
    """Chooses one width and notation for every element, from the non-zero finite values (torch's rule)."""

    def __init__(self, a: np.ndarray, floating: bool):
        self.floating = floating
        self.int_mode = True
        self.sci_mode = False
        self.max_width = 1
        flat = a.reshape(-1)
        if not floating:
            for v in flat.tolist():
                self.max_width = builtins.max(self.max_width, len(f"{v}"))
            return
        vals = flat.astype(np.float64)
        nz = vals[np.isfinite(vals) & (vals != 0)]
        if nz.size == 0:
            return
        mag = np.abs(nz)
        lo, hi = mag.min(), mag.max()
        self.int_mode = builtins.bool(np.all(nz == np.ceil(nz)))
        self.sci_mode = hi / lo > 1000.0 or hi > 1.0e8 or lo < 1.0e-4
        if _SCI_MODE is not None:
            self.sci_mode = _SCI_MODE
        for v in nz.tolist():
            if self.sci_mode:
                w = len(f"{v:.{_PRECISION}e}")
            elif self.int_mode:
                w = len(f"{v:.0f}") + 1
            else:
                w = len(f"{v:.{_PRECISION}f}")
            self.max_width = builtins.max(self.max_width, w)

    def format(self, v) -> str:
        if self.floating:
            if self.sci_mode:
                s = f"{v:{self.max_width}.{_PRECISION}e}"
            elif self.int_mode:
                s = f"{v:.0f}" + ("" if math.isinf(v) or math.isnan(v) else ".")
            else:
                s = f"{v:.{_PRECISION}f}"
        else:
            s = f"{v}"
        return (self.max_width - len(s)) * " " + s


class _ComplexFormatter:
    """torch's complex printing: the real and imaginary parts each get a :class:`_Formatter` of their own."""

    def __init__(self, a: np.ndarray):
        self.re, self.im = _Formatter(np.real(a), True), _Formatter(np.imag(a), True)
        self.max_width = self.re.max_width + self.im.max_width + 1

    def format(self, v) -> str:
        v = builtins.complex(v)
        im = (self.im.format(v.imag) + "j").lstrip()
        return self.re.format(v.real) + (im if im[0] in "+-" else "+" + im)


def _summarized(a: np.ndarray) -> np.ndarray:
    if a.ndim == 0:
        return a
    if a.shape[0] > 2 * _EDGEITEMS:
        a = np.concatenate([a[:_EDGEITEMS], a[-_EDGEITEMS:]])
    if a.ndim == 1:
        return a
    return np.stack([_summarized(x) for x in a])


def _vector_str(a, indent, summarize, fmt) -> str:
    per_line = builtins.max(1, math.floor((_LINEWIDTH - indent) / (fmt.max_width + 2)))
    if summarize and a.shape[0] > 2 * _EDGEITEMS:
        data = (
            [fmt.format(v) for v in a[:_EDGEITEMS].tolist()]
            + [" ..."]
            + [fmt.format(v) for v in a[-_EDGEITEMS:].tolist()]
        )
    else:
        data = [fmt.format(v) for v in a.tolist()]
    lines = [", ".join(data[i : i + per_line]) for i in range(0, len(data), per_line)]
    return "[" + ("," + "\n" + " " * (indent + 1)).join(lines) + "]"


def _array_str(a, indent, summarize, fmt) -> str:
    if a.ndim == 0:
        return fmt.format(a.item())
    if a.ndim == 1:
        return _vector_str(a, indent, summarize, fmt)
    n = a.shape[0]
    if summarize and n > 2 * _EDGEITEMS:
        rows = (
            [_array_str(a[i], indent + 1, summarize, fmt) for i in range(_EDGEITEMS)]
            + ["..."]
            + [_array_str(a[i], indent + 1, summarize, fmt) for i in range(n - _EDGEITEMS, n)]
        )
    else:
        rows = [_array_str(a[i], indent + 1, summarize, fmt) for i in range(n)]
    return "[" + ("," + "\n" * (a.ndim - 1) + " " * (indent + 1)).join(rows) + "]"


def _add_suffixes(body: str, suffixes, indent: int) -> str:
    parts = [body]
    last = len(body) - body.rfind("\n") + 1
    for s in suffixes:
        if last + len(s) + 2 > _LINEWIDTH:
            parts.append(",\n" + " " * indent + s)
            last = indent + len(s)
        else:
            parts.append(", " + s)
            last += len(s) + 2
    return "".join(parts) + ")"


def _repr(self: Tensor) -> str:
    """torch's printing: ``tensor([1.5000, 2.0000], dtype=lazyflow.float64, requires_grad=True)``."""
    prefix = "tensor("
    indent = len(prefix)
    dt = self.dtype
    if isinstance(self._value, _Tracer):
        return f"tensor(<traced {dt.name} {list(self.shape)}>)"
    suffixes = []
    dev = self.device
    if dev.type != "cpu":
        suffixes.append(f"device='{dev}'")
    if self.numel() == 0:
        if self.ndim != 1:
            suffixes.append(f"size={tuple(self.shape)}")
        if dt is not D.get_default_dtype():
            suffixes.append(f"dtype={dt!r}")
        body = "[]"
    else:
        if dt not in (D.get_default_dtype(), D.int64, D.bool_, D.default_complex()):
            suffixes.append(f"dtype={dt!r}")
        a = np.asarray(self._value)
        if dt.is_complex:
            a = a.astype(np.complex128)
        elif not dt.is_floating_point and dt is not D.bool_:
            a = a.astype(np.int64)
        elif dt.is_floating_point:
            a = a.astype(np.float64)
        summarize = a.size > _THRESHOLD
        shown = _summarized(a) if summarize else a
        fmt = _ComplexFormatter(shown) if dt.is_complex else _Formatter(shown, dt.is_floating_point)
        body = _array_str(a, indent, summarize, fmt)
    if self._node is not None:
        suffixes.append(f"grad_fn=<{self._node.name()}>")
    elif self._rg:
        suffixes.append("requires_grad=True")
    return _add_suffixes(prefix + body, suffixes, indent)


Tensor.__repr__ = Tensor.__str__ = _repr
