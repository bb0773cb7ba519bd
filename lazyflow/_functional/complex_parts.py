"""Complex numbers: parts (``real``/``imag``, ``view_as_real``/``view_as_complex``), construction (``complex``,
``polar``), ``angle``, ``conj`` and ``sgn``, and the ``Tensor.real``/``Tensor.imag`` properties.

torch returns views for ``real``, ``imag``, ``view_as_real``, ``view_as_complex`` and ``conj`` (a lazy conjugate
bit); JAX arrays have no strided views, so here each returns a new tensor with the same values. Writing *through*
the result (``z.real.mul_(2)``) therefore does not change ``z``; assigning the property does: ``z.real = x`` and
``z.imag = x`` replace that part of ``z`` in place (an ordinary in-place write: version counter, aliases, graph
write-back), as in torch. ``is_conj()`` is always False: ``conj`` conjugates at once.
"""

from __future__ import annotations

from .._core import dtypes as D
from .._core.context import state
from .._core.errors import DTypeError, ShapeError
from .._tensor import Tensor
from ..ops.table import REGISTRY as R
from ._common import _t
from .inplace import copy_

__all__ = [
    "real",
    "imag",
    "view_as_real",
    "view_as_complex",
    "view_as_real_copy",
    "view_as_complex_copy",
    "complex",
    "polar",
    "angle",
    "conj",
    "conj_physical",
    "resolve_conj",
]

NOT_METHODS = frozenset(
    {"complex", "polar", "view_as_real", "view_as_complex", "view_as_real_copy", "view_as_complex_copy", "real", "imag"}
)


def _arg(fn: str, x) -> Tensor:
    if not isinstance(x, Tensor):
        raise DTypeError(f"{fn}(): argument 'input' must be a Tensor, got {type(x).__name__}; wrap it in lf.tensor")
    return x


def real(input: Tensor) -> Tensor:
    """The real part of a complex tensor (a real tensor itself for real dtypes, as torch).

    >>> lf.real(lf.tensor([1 + 2j]))
    tensor([1.])
    """
    x = _arg("real", input)
    return state.interp.apply(R["real"], (x,), ()) if x.dtype.is_complex else x


def imag(input: Tensor) -> Tensor:
    """The imaginary part of a complex tensor.

    Raises:
        DTypeError: a real tensor (torch: "imag is not implemented for tensors with non-complex dtypes").
    """
    x = _arg("imag", input)
    if not x.dtype.is_complex:
        raise DTypeError(f"imag is not implemented for tensors with non-complex dtypes (got {x.dtype.name})")
    return state.interp.apply(R["imag"], (x,), ())


def view_as_real(input: Tensor) -> Tensor:
    """A complex tensor as a real one with a trailing dim of size 2 (real, imaginary): ``[..., 2]``.

    Raises:
        DTypeError: a real tensor.
    """
    x = _arg("view_as_real", input)
    if not x.dtype.is_complex:
        raise DTypeError(f"view_as_real is only supported for complex tensors, got {x.dtype.name}")
    return state.interp.apply(R["view_as_real"], (x,), ())


def view_as_complex(input: Tensor) -> Tensor:
    """A real ``[..., 2]`` tensor (real, imaginary pairs) as a complex tensor of shape ``[...]``.

    Raises:
        DTypeError: not float32/float64 (torch: only float and double).
        ShapeError: the last dim is not of size 2.
    """
    x = _arg("view_as_complex", input)
    if x.dtype not in (D.float32, D.float64):
        raise DTypeError(
            f"view_as_complex is only supported for float and double tensors, but got a tensor of scalar type "
            f"{x.dtype.name}; convert with .float() or .double()"
        )
    if x.ndim == 0 or x.shape[-1] != 2:
        raise ShapeError(f"view_as_complex: tensor must have a last dimension of size 2, got shape {list(x.shape)}")
    return state.interp.apply(R["view_as_complex"], (x,), ())


def view_as_real_copy(input: Tensor) -> Tensor:
    """:func:`view_as_real` (a new tensor either way here)."""
    return view_as_real(input)


def view_as_complex_copy(input: Tensor) -> Tensor:
    """:func:`view_as_complex` (a new tensor either way here)."""
    return view_as_complex(input)


def complex(real: Tensor, imag: Tensor) -> Tensor:
    """The complex tensor ``real + 1j * imag`` (broadcast); both float32 (-> complex64) or both float64.

    Raises:
        DTypeError: parts of different or non-float32/float64 dtypes.
    """
    return state.interp.apply(R["complex"], (_arg("complex", real), _arg("complex", imag)), ())


def polar(abs: Tensor, angle: Tensor) -> Tensor:
    """The complex tensor ``abs * (cos(angle) + 1j * sin(angle))`` (broadcast); float32 or float64 parts.

    Raises:
        DTypeError: parts of different or non-float32/float64 dtypes.
    """
    return state.interp.apply(R["polar"], (_arg("polar", abs), _arg("polar", angle)), ())


def angle(input: Tensor) -> Tensor:
    """The argument (phase) of each element in radians, a real tensor; for real inputs 0 or pi (integer inputs
    compute in the default float dtype). The gradient at 0 is 0, as torch."""
    return state.interp.apply(R["angle"], (_arg("angle", input),), ())


def conj(input: Tensor) -> Tensor:
    """The complex conjugate (a new tensor: there is no lazy conjugate bit); a real tensor itself, as torch."""
    x = _arg("conj", input)
    return state.interp.apply(R["conj"], (x,), ()) if x.dtype.is_complex else x


def conj_physical(input: Tensor) -> Tensor:
    """The complex conjugate as a new tensor (a copy for real dtypes)."""
    x = _arg("conj_physical", input)
    return state.interp.apply(R["conj"], (x,), ()) if x.dtype.is_complex else x.clone()


def resolve_conj(input: Tensor) -> Tensor:
    """``input``: conjugation is never lazy here, so there is no conjugate bit to resolve."""
    return input


def _real_prop(self: Tensor) -> Tensor:
    return real(self)


def _imag_prop(self: Tensor) -> Tensor:
    return imag(self)


def _set_real(self: Tensor, value) -> None:
    v = _t(value)
    copy_(self, complex(_broadcast_part(self, v), imag(self)) if self.dtype.is_complex else v)


def _set_imag(self: Tensor, value) -> None:
    if not self.dtype.is_complex:
        raise DTypeError(f"imag is not implemented for tensors with non-complex dtypes (got {self.dtype.name})")
    copy_(self, complex(real(self), _broadcast_part(self, _t(value))))


def _broadcast_part(self: Tensor, v: Tensor) -> Tensor:
    return v.to(D.to_real(self.dtype)).expand(*self.shape)


def _conj_physical_(self: Tensor) -> Tensor:
    return copy_(self, conj(self)) if self.dtype.is_complex else self


METHOD_ONLY = {"conj_physical_": _conj_physical_}
PROPERTIES = {"real": property(_real_prop, _set_real), "imag": property(_imag_prop, _set_imag)}
"""Tensor properties (attached by lazyflow._methods): ``z.real``, ``z.imag``, assignable."""
