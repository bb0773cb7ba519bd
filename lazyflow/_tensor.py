"""The Tensor: a JAX array plus autograd state, with PyTorch's names.

The same class serves eager and graph mode: in graph mode ``_value`` is a JAX tracer. Every op goes
through the active interpreter (``_core.context.state.interp``). Methods that are plain ops are attached by
``lazyflow._functional`` so each op is written once, as a function, and shared by ``lf.f(x)`` and ``x.f()``.

Aliases: ``detach()`` and ``.data`` share their source's storage as in torch: an in-place update of either (or
an optimizer step, ``load_state_dict``, a compiled step's write-back) is seen through the other, so
``m.weight.data.normal_()``, ``p.detach().zero_()`` and ``model.state_dict()[k].copy_(v)`` change the model. The
tensors sharing a storage form a group (:func:`_publish` hands a new value to all of them; ``Parameter(t)`` and
``p.data = t`` join ``t``'s group too); each member carries a version-counter identity (``detach()`` shares its
source's, ``.data`` gets its own, as torch). Other views --
``view``/``reshape``/slicing -- do not alias for writes (JAX has no strided storage views).
"""

from __future__ import annotations

import builtins
import weakref
from typing import TYPE_CHECKING

import jax
import jax.core
import numpy as np

from ._core import dtypes as D
from ._core import formats as _F
from ._core.context import state
from ._core.device import Device, default_device, from_jax_device, to_jax_device
from ._core.errors import AutogradError, DTypeError, GraphError, IndexOutOfRangeError, ShapeError, user_frame
from ._core.placement import pid_of, sharding_of
from ._core.size import Size
from .ops.table import REGISTRY as _R

__all__ = ["Tensor", "from_jax"]

_new = object.__new__
_Tracer = jax.core.Tracer


def _meta_of(value):
    if isinstance(value, _Tracer):
        return (Size(value.shape), D.from_jax_dtype(value.dtype), 0)
    return (Size(value.shape), D.from_jax_dtype(value.dtype), pid_of(value))


def _make(value, meta=None, cls=None):
    """The one function that creates a Tensor (or a subclass ``cls``): wraps a jax value without checks (meta
    computed when not given), as a leaf with no gradient."""
    t = _new(cls or Tensor)
    t._value = value
    t._meta = _meta_of(value) if meta is None else meta
    t._rg = False
    t.grad = None
    t._node = None
    t._oidx = 0
    t._version = 0
    t._peers = None
    t._retain = False
    return t


def _rebind(t, value, meta=None) -> None:
    """The one way a Tensor's value changes in place: the same object gets ``value`` (meta computed when not given)
    and its version goes up, so a tape node that saved the old value notices (torch's saved-tensor check). The
    tensors sharing its storage (``detach()``/``.data`` aliases) get the value too."""
    t._value = value
    t._meta = _meta_of(value) if meta is None else meta
    t._version += 1
    if t._peers is not None:
        _publish(t)


def _publish(t) -> None:
    """``t`` got a new value in place: every live tensor sharing its storage gets the same value and meta. Those
    sharing ``t``'s version counter (``detach()`` aliases, as torch) get a version bump; ``.data`` aliases have a
    counter of their own (torch: writing through ``p.data`` between forward and backward is not an error, and the
    backward sees the new value). Values never cross a trace boundary: a traced value is given only to tensors
    holding traced values, a concrete one only to concrete holders."""
    peers = t._peers
    v, m = t._value, t._meta
    traced = isinstance(v, _Tracer)
    vc = None
    for r, c in peers:
        if r() is t:
            vc = c
            break
    dead = False
    for r, c in peers:
        o = r()
        if o is None:
            dead = True
        elif o is not t and isinstance(o._value, _Tracer) == traced:
            o._value, o._meta = v, m
            if c is vc:
                o._version += 1
    if dead:
        peers[:] = [e for e in peers if e[0]() is not None]
        if len(peers) == 1:  # every alias is gone: later writes to t publish nothing
            t._peers = None
            peers.clear()


_COUNTERS = iter(range(1 << 62))  # version-counter identities: (ref, counter) entries of a group


def _alias(t, share_version: bool = True) -> Tensor:
    """A new leaf sharing ``t``'s storage (``detach()``, ``.data``): writes to either are seen through both. With
    ``share_version`` (``detach()``) it also shares ``t``'s version counter; ``.data`` gets one of its own. Inside a
    trace the group holds traced values only for the trace (``p.data.clamp_()`` in a compiled step writes ``p``)."""
    v = t._value
    # inside a trace the alias is also cut for a compiled jax.vjp, as torch's detach cuts the gradient
    out = _make(jax.lax.stop_gradient(v) if isinstance(v, _Tracer) else v, t._meta)
    _join(out, t, share_version)
    return out


def _join(out, t, share_version: bool) -> None:
    """``out`` (holding ``t``'s value) starts sharing ``t``'s storage: ``Parameter(t)``, ``p.data = t``, aliases."""
    peers = t._peers
    vc = None
    if peers is None:
        vc = next(_COUNTERS)
        peers = t._peers = [(weakref.ref(t), vc)]
    else:
        for r, c in peers:
            if r() is t:
                vc = c
                break
        if len(peers) >= 16:  # keep a group that is aliased in a loop (p.detach() per step) small
            peers[:] = [e for e in peers if e[0]() is not None]
    if share_version and vc is not None:
        out._version = t._version
    else:
        vc = next(_COUNTERS)
        out._version = 0
    peers.append((weakref.ref(out), vc))
    out._peers = peers


def _leave(t) -> None:
    """``t`` gets storage of its own (``t.data = other``): it stops sharing with its former aliases."""
    peers = t._peers
    if peers is not None:
        peers[:] = [e for e in peers if e[0]() is not None and e[0]() is not t]
        t._peers = None


def _deepcopy_alias(src, out, memo) -> None:
    """``out`` (a deepcopy of ``src``) joins the copy of ``src``'s alias group made by this same deepcopy, so
    aliases copied together stay aliases of each other (as torch's deepcopy keeps shared storages shared), while
    nothing is shared with the originals."""
    peers = src._peers
    vc = None
    for r, c in peers:
        if r() is src:
            vc = c
            break
    if vc is None:
        return
    group = memo.get(id(peers))
    if group is None:
        group = memo[id(peers)] = ([], {})
        memo.setdefault(id(memo), []).append(peers)  # keep the original alive while the memo lives (copy's rule)
    new_peers, counters = group
    if vc not in counters:
        counters[vc] = next(_COUNTERS)
    new_peers.append((weakref.ref(out), counters[vc]))
    out._peers = new_peers


def from_jax(array) -> Tensor:
    """Wrap a ``jax.Array`` as a Tensor without copying.

    >>> t = lf.from_jax(jnp.ones(3))
    """
    if not isinstance(array, (jax.Array, _Tracer)):
        raise TypeError(f"from_jax expects a jax.Array, got {type(array).__name__}")
    if getattr(array, "weak_type", False):
        array = jax.numpy.asarray(array, array.dtype)
    return _make(array)


class Tensor:
    """An n-dimensional array with autograd, PyTorch's API, backed by a JAX array."""

    __slots__ = (
        "_value",
        "_meta",
        "_rg",
        "grad",
        "_node",
        "_oidx",
        "_version",
        "_retain",
        "_peers",
        "__weakref__",
    )

    if TYPE_CHECKING:  # attached by lazyflow._methods (the op functions); declared here for the methods below

        def unbind(self, dim: int = 0) -> tuple[Tensor, ...]: ...

        def permute(self, *dims: int) -> Tensor: ...

        def transpose(self, dim0: int, dim1: int) -> Tensor: ...

    __array_priority__ = 1000

    # ------------------------------------------------------------------ metadata
    @property
    def shape(self) -> Size:
        s = self._meta[0]
        return s if s.__class__ is Size else Size(s)

    @property
    def dtype(self) -> D.DType:
        return self._meta[1]

    @property
    def ndim(self) -> int:
        return len(self._meta[0])

    def dim(self) -> int:
        return len(self._meta[0])

    def size(self, dim: int | None = None):
        if dim is None:
            s = self._meta[0]
            return s if s.__class__ is Size else Size(s)
        return self._meta[0][_dim(dim, self.ndim)]

    def numel(self) -> int:
        n = 1
        for s in self._meta[0]:
            n *= s
        return n

    nelement = numel

    def element_size(self) -> int:
        return self.dtype.itemsize

    @property
    def sharding(self):
        """The JAX sharding of the underlying array (None for a traced value)."""
        return sharding_of(self._meta[2])

    @property
    def is_sharded(self) -> bool:
        s = self.sharding
        return s is not None and len(s.device_set) > 1

    @property
    def device(self) -> Device:
        s = sharding_of(self._meta[2])
        if s is None:
            return default_device()
        return from_jax_device(min(s.device_set, key=lambda d: d.id))

    @property
    def is_cuda(self) -> bool:
        return self.device.type == "cuda"

    def is_floating_point(self) -> bool:
        return self._meta[1].is_floating_point

    # ------------------------------------------------------------------ autograd state
    @property
    def requires_grad(self) -> bool:
        return self._rg

    @requires_grad.setter
    def requires_grad(self, flag: bool) -> None:
        self.requires_grad_(flag)

    def requires_grad_(self, requires_grad: bool = True) -> Tensor:
        if requires_grad and not self._meta[1].is_inexact:
            raise DTypeError(f"only floating point and complex tensors can require gradients, got {self.dtype}")
        if not requires_grad and self._node is not None:
            raise AutogradError("you can only change requires_grad flags of leaf variables")
        self._rg = bool(requires_grad)
        return self

    @property
    def is_leaf(self) -> bool:
        return self._node is None

    @property
    def grad_fn(self):
        return self._node

    def retain_grad(self) -> None:
        if not self._rg:
            raise AutogradError("can't retain_grad on a tensor that does not require grad")
        if self._node is not None:
            self._retain = True

    @property
    def retains_grad(self) -> bool:
        return self._retain

    def detach(self) -> Tensor:
        """A new leaf sharing this tensor's storage, cut from the graph: an in-place update of either is seen
        through the other (torch's semantics)."""
        return _alias(self)

    def detach_(self) -> Tensor:
        self._node = None
        self._rg = False
        return self

    # ------------------------------------------------------------------ conversion
    def jax(self):
        """The underlying ``jax.Array`` (no copy). JAX arrays are immutable, so sharing it is safe -- except with
        donation: passing it to a ``jax.jit(..., donate_argnums=...)`` function deletes the buffer this tensor still
        uses (JAX then raises "Array has been deleted" on its next use); donate ``jnp.array(t.jax(), copy=True)``."""
        return self._value

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        """Export the tensor's buffer through DLPack (no copy, as ``jax.Array.__dlpack__``): the consumer sees the
        tensor's current value and must not write to it (``torch.from_dlpack(t).clone()`` before writing)."""
        _concrete(self, "__dlpack__")
        kw = {
            k: v
            for k, v in (("stream", stream), ("max_version", max_version), ("dl_device", dl_device), ("copy", copy))
            if v is not None
        }
        return self._value.__dlpack__(**kw)

    def __dlpack_device__(self):
        """The DLPack device of the tensor's buffer (``(device type, device id)``)."""
        _concrete(self, "__dlpack_device__")
        return self._value.__dlpack_device__()

    def numpy(self, *, force: bool = False) -> np.ndarray:
        """A numpy array with the tensor's values (a copy: later in-place updates never show in it).

        Args:
            force: allow a tensor that requires grad (torch's ``numpy(force=True)``: detach, then convert).
        Raises:
            AutogradError: the tensor requires grad while grad mode is on (as torch: call ``detach()`` first).
            GraphError: a traced tensor (graph mode has no values yet).
        """
        _concrete(self, "numpy()")
        if self._rg and not force and state.grad_enabled:
            raise AutogradError(
                "Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() "
                "instead (or numpy(force=True), or read it under lf.no_grad())"
            )
        return np.array(self._value)

    def __array__(self, dtype=None, copy=None):
        _concrete(self, "__array__")
        a = np.array(self._value)
        return a if dtype is None else a.astype(dtype)

    def item(self):
        _concrete(self, "item()")
        if self.numel() != 1:
            raise ValueError(f"item() needs a tensor with one element, got shape {self.shape}")
        return np.asarray(self._value).reshape(()).item()

    def tolist(self):
        _concrete(self, "tolist()")
        return np.asarray(self._value).tolist()

    def __len__(self) -> int:
        if not self._meta[0]:
            raise TypeError("len() of a 0-d tensor")
        return self._meta[0][0]

    def __iter__(self):
        if not self._meta[0]:
            raise TypeError("iteration over a 0-d tensor")
        return iter(self.unbind(0))

    def __bool__(self) -> bool:
        _concrete(self, "bool() of a tensor (Python control flow such as `if tensor:` on a tensor value)")
        if self.numel() != 1:
            raise RuntimeError(f"Boolean value of Tensor with more than one value is ambiguous (shape {self.shape})")
        return builtins.bool(self.item())

    def __float__(self) -> float:
        _concrete(self, "float() of a tensor")
        return builtins.float(self.item())

    def __int__(self) -> int:
        _concrete(self, "int() of a tensor")
        return builtins.int(self.item())

    def __index__(self) -> int:
        if self._meta[1].is_inexact or self.numel() != 1:
            raise TypeError("only integer tensors of a single element can be converted to an index")
        return builtins.int(self.item())

    def __format__(self, format_spec: str) -> str:
        """``f"{loss:.4f}"`` as in torch: a 0-d Tensor formats its Python value (``item()``); anything else -- more
        elements, or a subclass such as Parameter -- formats as ``str(t)`` with an empty spec and raises TypeError
        with any other.

        Raises:
            TypeError: a format spec for a tensor that is not 0-d.
            GraphError: a traced 0-d tensor (graph mode has no value to format yet).
        """
        if not self._meta[0] and type(self) is Tensor:
            return format(self.item(), format_spec)
        return object.__format__(self, format_spec)

    def __hash__(self) -> int:
        return id(self)

    # __repr__/__str__ (torch-style printing) are attached by lazyflow._methods

    def __reduce__(self):
        _concrete(self, "pickle")
        return (_rebuild, (np.asarray(self._value), self.dtype.name, self._rg))

    def __deepcopy__(self, memo):
        t = _make(self._value, self._meta, type(self))
        t._rg = self._rg
        if self.grad is not None:
            t.grad = _make(self.grad._value, self.grad._meta)  # a copy shares no storage with the original
        if self._peers is not None:
            _deepcopy_alias(self, t, memo)
        memo[id(self)] = t
        return t

    def to(self, *args, **kwargs) -> Tensor:
        """``to(dtype)``, ``to(device)``, ``to(device, dtype)``, ``to(other)`` or ``to(sharding)``; keywords
        ``dtype``, ``device``, ``non_blocking``, ``copy`` (a new tensor even when nothing converts; otherwise
        ``self`` comes back unchanged, sharing its storage, as in torch) and ``memory_format`` (checked as torch
        checks it; lazyflow has no strides, so it changes no value: see ``lazyflow._core.formats``)."""
        dtype = kwargs.pop("dtype", None)
        device = kwargs.pop("device", None)
        kwargs.pop("non_blocking", None)
        copy = kwargs.pop("copy", False)
        # a physical-layout request: checked as torch checks it, no value changes (lazyflow._core.formats)
        _F.check_memory_format(kwargs.pop("memory_format", None), self.ndim, "Tensor.to()")
        if kwargs:
            raise TypeError(f"to() got unexpected keyword arguments {sorted(kwargs)}")
        for a in args:
            if isinstance(a, Tensor):
                dtype, device = a.dtype, a.device
            elif isinstance(a, (D.DType, np.dtype)) or a in (builtins.float, builtins.int, builtins.bool):
                dtype = a
            elif isinstance(a, str) and a.removeprefix("torch.") in _DTYPE_NAMES:
                dtype = a
            else:
                device = a
        t = self
        if device is not None:
            t = _to_device(t, device)
        if dtype is not None:
            dtype = D.to_dtype(dtype)
            if dtype is not t.dtype:
                dtype.to_jax()  # a named error for a 64-bit dtype while x64 is off
                t = state.interp.apply(_R["cast"], (t,), (dtype,))
        if copy and t is self:  # torch: copy=True gives a new tensor even when nothing converts
            t = state.interp.apply(_R["copy"], (t,), ())
        return t

    def cpu(self) -> Tensor:
        return self.to("cpu")

    def cuda(self, device=None) -> Tensor:
        return self.to("cuda" if device is None else Device("cuda", device) if isinstance(device, int) else device)

    def type_as(self, other: Tensor) -> Tensor:
        return self.to(other.dtype)

    # type() (torch's tensor-type names) is attached by lazyflow._methods from lazyflow._legacy

    def float(self) -> Tensor:
        return self.to(D.float32)

    def double(self) -> Tensor:
        return self.to(D.float64)

    def half(self) -> Tensor:
        return self.to(D.float16)

    def cfloat(self) -> Tensor:
        return self.to(D.complex64)

    def cdouble(self) -> Tensor:
        return self.to(D.complex128)

    def bfloat16(self) -> Tensor:
        return self.to(D.bfloat16)

    def long(self) -> Tensor:
        return self.to(D.int64)

    def int(self) -> Tensor:
        return self.to(D.int32)

    def short(self) -> Tensor:
        return self.to(D.int16)

    def char(self) -> Tensor:
        return self.to(D.int8)

    def bool(self) -> Tensor:
        return self.to(D.bool_)

    def byte(self) -> Tensor:
        return self.to(D.uint8)

    def contiguous(self, memory_format=None) -> Tensor:
        """``self``: a lazyflow tensor is dense (``memory_format`` is checked as torch checks it and changes no
        value: see ``lazyflow._core.formats``)."""
        _F.check_memory_format(memory_format, self.ndim, "Tensor.contiguous()")
        return self

    def is_contiguous(self, memory_format=None) -> bool:
        """True for the default format; for a channels-last one, whether this tensor's row-major strides
        (``stride()``) are also laid out that way (torch's test on the same strides)."""
        _F.check_memory_format(memory_format, None, "Tensor.is_contiguous()")
        return _F.is_contiguous_as(self._meta[0], memory_format)

    def data_ptr(self) -> int:
        return self._value.unsafe_buffer_pointer()

    @property
    def data(self) -> Tensor:
        """This tensor's storage as a tensor outside autograd: in-place updates of it change this tensor too
        (``p.data.normal_(0, 0.02)``); assigning ``t.data = other`` makes ``t`` share ``other``'s storage (its
        former aliases keep the old value). As in torch a ``.data`` alias has a version counter of its own: writing
        through it between forward and backward is not an error (the backward sees the new value)."""
        return _alias(self, share_version=False)

    @data.setter
    def data(self, other: Tensor) -> None:
        _leave(self)
        _rebind(self, other._value, other._meta)
        if other is not self:
            _join(self, other, share_version=False)  # torch: self now shares other's storage, its own counter

    @property
    def T(self) -> Tensor:
        return self.permute(*reversed(range(self.ndim)))

    @property
    def mT(self) -> Tensor:
        return self.transpose(-2, -1)


_DTYPE_NAMES = {
    "float16",
    "bfloat16",
    "float32",
    "float64",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "bool",
    "complex64",
    "complex128",
    "cfloat",
    "cdouble",
    "half",
    "float",
    "double",
    "short",
    "int",
    "long",
}


def _rebuild(array, dtype_name, requires_grad):
    t = _make(jax.numpy.asarray(array, D.to_dtype(dtype_name).to_jax()))
    if requires_grad:
        t._rg = True
    return t


def _concrete(t, what):
    if isinstance(t._value, _Tracer):
        raise GraphError(
            f"{what} needs a concrete value, but this tensor is traced in graph mode (lf.compile / "
            f"lf.nn.Graph) at {user_frame()}; keep that part eager, use lf.where for data-dependent "
            "choices, or return the tensor from the compiled function"
        )


def _check_divisible(t, sharding) -> None:
    spec, mesh = getattr(sharding, "spec", None), getattr(sharding, "mesh", None)
    if spec is None or mesh is None:
        return
    if len(spec) > len(t.shape):
        raise ShapeError(f"to({sharding}): the spec has {len(spec)} entries for a tensor of shape {list(t.shape)}")
    for dim, axes in enumerate(spec):
        if axes is None:
            continue
        names = (axes,) if isinstance(axes, str) else tuple(axes)
        size = 1
        for a in names:
            size *= mesh.shape[a]
        if t.shape[dim] % size:
            raise ShapeError(
                f"to(sharding): dim {dim} of size {t.shape[dim]} is not divisible by mesh axes {names} "
                f"(size {size}); tensor shape {list(t.shape)}"
            )


def _to_device(t, device):
    if isinstance(device, jax.sharding.Sharding):
        _check_divisible(t, device)
        target = device
    else:
        target = to_jax_device(device)
        if isinstance(t._value, _Tracer):
            return t
        if t._meta[2] and sharding_of(t._meta[2]).device_set == {target}:
            return t
    moved = jax.device_put(t._value, target)
    if not t._rg:
        return _make(moved)
    # connect the moved value to t's graph: a copy node (gradient: the identity) carrying the moved value
    out = state.interp.apply(_R["copy"], (t,), ())
    out._value = moved
    out._meta = _meta_of(moved)
    return out


def _dim(d, ndim) -> int:
    """Normalise a (possibly negative) dim; IndexError like torch when out of range."""
    n = ndim if ndim > 0 else 1
    if not -n <= d < n:
        raise IndexOutOfRangeError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {d})")
    return d + n if d < 0 else d
