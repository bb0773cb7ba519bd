"""``nn.utils.parametrize``: make a module's parameter or buffer a function of other tensors (torch's design).

``register_parametrization(module, "weight", P())`` moves ``module.weight`` to
``module.parametrizations.weight.original`` (same Parameter object; ``original0``, ``original1``... when ``P``'s
``right_inverse`` returns several tensors) and turns ``weight`` into a property that computes
``P(original)`` on every access. The module's class becomes a generated subclass ``Parametrized<Class>`` (one per
instance, as torch's), so state_dict keys, reprs and graph mode see exactly torch's structure: a compiled
forward reads the property inside the trace, so it differentiates through the parametrization.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence

from ..._core.errors import OpError, ShapeError
from ..._tensor import Tensor
from ...autograd import no_grad
from ..module import Module
from ..modules.container import ModuleDict, ModuleList
from ..parameter import Parameter

__all__ = [
    "ParametrizationList",
    "register_parametrization",
    "remove_parametrizations",
    "is_parametrized",
    "type_before_parametrizations",
    "cached",
]

_cache_depth = 0
_cache: dict[tuple[int, str], Tensor] = {}


@contextlib.contextmanager
def cached() -> Iterator[None]:
    """Inside the block, each parametrized tensor is computed once per module and reused (torch's ``cached``)."""
    global _cache_depth
    _cache_depth += 1
    try:
        yield
    finally:
        _cache_depth -= 1
        if _cache_depth == 0:
            _cache.clear()


def _same_kind(original: Tensor, value: Tensor) -> Tensor:
    """``value`` registered like ``original`` was: a Parameter (keeping requires_grad) or a plain tensor."""
    if isinstance(original, Parameter):
        return Parameter(value.detach(), original.requires_grad)
    return value.detach()


class ParametrizationList(ModuleList):
    """The parametrizations of one tensor, applied in order, and the unconstrained ``original`` tensor(s).

    Args:
        modules: the parametrizations (each a Module).
        original: the tensor being parametrized; ``modules[0].right_inverse`` (when defined) maps it to the
            stored originals.
        unsafe: skip the shape/dtype consistency checks.
    """

    def __init__(self, modules: Sequence[Module], original: Tensor, unsafe: bool = False) -> None:
        if len(modules) == 0:
            raise ValueError("ParametrizationList requires one or more modules.")
        super().__init__(modules)
        self.unsafe = unsafe
        new = original
        with no_grad():
            for m in reversed(list(self)):
                if hasattr(m, "right_inverse"):
                    new = m.right_inverse(new)
        if isinstance(new, Tensor):
            self.is_tensor = True
            self.ntensors = 1
            if not unsafe and (tuple(new.shape) != tuple(original.shape) or new.dtype != original.dtype):
                raise ShapeError(
                    "right_inverse may not change the shape or dtype of the tensor unless unsafe=True: "
                    f"{list(original.shape)} {original.dtype.name} -> {list(new.shape)} {new.dtype.name}"
                )
            if new is not original and tuple(new.shape) == tuple(original.shape) and new.dtype == original.dtype:
                with no_grad():
                    original.copy_(new)
                new = original
            self._register_original("original", original if new is original else _same_kind(original, new))
        else:
            if not isinstance(new, (tuple, list)) or not all(isinstance(t, Tensor) for t in new):
                raise TypeError(
                    f"'right_inverse' must return a Tensor or a sequence of tensors, got {type(new).__name__}"
                )
            self.is_tensor = False
            self.ntensors = len(new)
            for i, t in enumerate(new):
                self._register_original(f"original{i}", _same_kind(original, t))
        if not unsafe:
            z = self()
            if not isinstance(z, Tensor):
                raise TypeError(f"A parametrization must return a tensor, got {type(z).__name__}.")
            if tuple(z.shape) != tuple(original.shape) or z.dtype != original.dtype:
                raise ShapeError(
                    "Registering a parametrization may not change the shape or dtype of the tensor unless "
                    f"unsafe=True: original {list(original.shape)} {original.dtype.name}, parametrized "
                    f"{list(z.shape)} {z.dtype.name}"
                )

    def _register_original(self, name: str, t: Tensor) -> None:
        if isinstance(t, Parameter):
            self.register_parameter(name, t)
        else:
            self.register_buffer(name, t)

    def right_inverse(self, value: Tensor) -> None:
        """Set the originals so that the parametrized tensor becomes ``value`` (each ``right_inverse``, in
        reverse order); called by ``module.<name> = value``.

        Raises:
            OpError (a RuntimeError, as torch): a parametrization without ``right_inverse``.
        """
        with no_grad():
            for m in reversed(list(self)):
                if not hasattr(m, "right_inverse"):
                    raise OpError(f"parametrization {type(m).__name__} does not implement right_inverse.")
                value = m.right_inverse(value)
            if self.is_tensor:
                if not isinstance(value, Tensor):
                    raise TypeError(f"`right_inverse` should return a tensor. Got {type(value).__name__}")
                self.original.copy_(value)
            else:
                if len(value) != self.ntensors:
                    raise ValueError(
                        f"'right_inverse' must return a sequence of {self.ntensors} tensors, got {len(value)}"
                    )
                for i, t in enumerate(value):
                    getattr(self, f"original{i}").copy_(t)

    def forward(self) -> Tensor:
        if self.is_tensor:
            x = self[0](self.original)
        else:
            x = self[0](*(getattr(self, f"original{i}") for i in range(self.ntensors)))
        for m in list(self)[1:]:
            x = m(x)
        return x


def _property(name: str) -> property:
    def get(self):
        plist = self.parametrizations[name]
        if _cache_depth:
            key = (id(self), name)
            if key not in _cache:
                _cache[key] = plist()
            return _cache[key]
        return plist()

    def set(self, value):
        self.parametrizations[name].right_inverse(value)

    return property(get, set)


def is_parametrized(module: Module, tensor_name: str | None = None) -> bool:
    """Whether ``module`` has a parametrization (on ``tensor_name``, when given)."""
    plists = module.__dict__.get("_modules", {}).get("parametrizations")
    if not isinstance(plists, ModuleDict):
        return False
    return len(plists) > 0 if tensor_name is None else tensor_name in plists


def type_before_parametrizations(module: Module) -> type:
    """The module's class before parametrizations swapped it for ``Parametrized<Class>``."""
    return type(module).__bases__[0] if is_parametrized(module) else type(module)


def register_parametrization(
    module: Module, tensor_name: str, parametrization: Module, *, unsafe: bool = False
) -> Module:
    """Parametrize ``module.<tensor_name>`` (a parameter or buffer) by ``parametrization``.

    A second registration on the same name appends to its :class:`ParametrizationList`.

    Args:
        module: the module owning the tensor.
        tensor_name: the parameter or buffer's name.
        parametrization: a Module mapping the original tensor(s) to the new value; an optional
            ``right_inverse(value)`` maps a value back to the original(s).
        unsafe: allow a parametrization that changes the shape or dtype.
    Returns:
        ``module``.
    Raises:
        ValueError: ``tensor_name`` is neither a parameter nor a buffer of ``module``.
        ShapeError: (not ``unsafe``) the parametrization changes the tensor's shape or dtype.
    """
    if not isinstance(parametrization, Module):
        raise TypeError(f"parametrization must be a lazyflow.nn.Module, got {type(parametrization).__name__}")
    parametrization.train(module.training)
    if is_parametrized(module, tensor_name):
        plist = module.parametrizations[tensor_name]
        if not unsafe:
            y = getattr(module, tensor_name)
            x = parametrization(y)
            if not isinstance(x, Tensor) or tuple(x.shape) != tuple(y.shape) or x.dtype != y.dtype:
                raise ShapeError(
                    "Registering a parametrization may not change the shape or dtype of the tensor unless "
                    f"unsafe=True: {list(y.shape)} {y.dtype.name} -> "
                    f"{list(x.shape) if isinstance(x, Tensor) else type(x).__name__}"
                )
        plist.append(parametrization)
        plist.unsafe |= unsafe
        return module
    params, buffers = module._parameters, module._buffers
    if tensor_name in params and params[tensor_name] is not None:
        original = params[tensor_name]
    elif tensor_name in buffers and buffers[tensor_name] is not None:
        original = buffers[tensor_name]
    else:
        raise ValueError(
            f"Module '{module._get_name()}' does not have a parameter, a buffer, or a parametrized element with "
            f"name '{tensor_name}'"
        )
    plist = ParametrizationList([parametrization], original, unsafe=unsafe)
    delattr(module, tensor_name)
    if not is_parametrized(module):
        cls = type(module)
        module.__class__ = type(f"Parametrized{cls.__name__}", (cls,), {})
        module.parametrizations = ModuleDict()
    module.parametrizations[tensor_name] = plist
    setattr(type(module), tensor_name, _property(tensor_name))
    return module


def remove_parametrizations(module: Module, tensor_name: str, leave_parametrized: bool = True) -> Module:
    """Undo :func:`register_parametrization` on ``tensor_name``.

    Args:
        leave_parametrized: keep the current parametrized value (else restore the original tensor).
    Returns:
        ``module``.
    Raises:
        ValueError: no parametrization on ``tensor_name``, or ``leave_parametrized=False`` with several originals.
    """
    if not is_parametrized(module, tensor_name):
        raise ValueError(f"Module {module._get_name()} does not have a parametrization on {tensor_name}")
    plist = module.parametrizations[tensor_name]
    if plist.is_tensor:
        original = plist.original
        if leave_parametrized:
            with no_grad():
                t = getattr(module, tensor_name)
            if tuple(t.shape) == tuple(original.shape) and t.dtype == original.dtype:
                with no_grad():
                    original.copy_(t)
            else:
                original = _same_kind(original, t)
    else:
        if not leave_parametrized:
            raise ValueError(
                "Cannot leave unparametrized (`leave_parametrized=False`) a tensor parametrized in terms "
                "of a sequence of tensors."
            )
        with no_grad():
            t = getattr(module, tensor_name)
        original = (
            Parameter(t.detach(), plist.original0.requires_grad)
            if isinstance(plist.original0, Parameter)
            else t.detach()
        )
    delattr(type(module), tensor_name)
    del module.parametrizations[tensor_name]
    if isinstance(original, Parameter):
        module.register_parameter(tensor_name, original)
    else:
        module.register_buffer(tensor_name, original)
    if not is_parametrized(module):
        delattr(module, "parametrizations")
        module.__class__ = type(module).__bases__[0]
    return module
