"""``Module``: the base class of every layer, with PyTorch's registration, traversal and state_dict contracts.

A module keeps its state only in Parameters and buffers (``_parameters`` / ``_buffers``), never in plain
tensor attributes: graph mode swaps their ``_value`` for tracers during a trace and writes the results back
into the same objects, and ``load_state_dict`` updates those same objects in place.
"""

from __future__ import annotations

import difflib
import itertools
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from typing import Any, NamedTuple

import jax
import numpy as np

from .._core import dtypes as D
from .._core.errors import CheckpointError, DTypeError
from .._core.formats import channels_last, channels_last_3d, check_memory_format
from .._core.placement import sharding_of
from .._creation import empty_like
from .._functional.inplace import zero_grads
from .._ingress import array as owned_array
from .._tensor import Tensor, _make, _rebind
from ..autograd import no_grad
from ._backward_hooks import call_with_backward_hooks
from .parameter import Buffer, Parameter

__all__ = ["Module", "RemovableHandle", "IncompatibleKeys"]


class IncompatibleKeys(NamedTuple):
    """What ``load_state_dict`` returns: the keys the module expected but did not get, and the reverse."""

    missing_keys: list[str]
    unexpected_keys: list[str]

    def __repr__(self) -> str:
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return f"_IncompatibleKeys(missing_keys={self.missing_keys}, unexpected_keys={self.unexpected_keys})"

    __str__ = __repr__


class RemovableHandle:
    """Returned by the ``register_*_hook`` methods: ``handle.remove()`` unregisters the hook."""

    _next_id = itertools.count()

    def __init__(self, hooks_dict: dict, *extra_dicts: dict):
        self.hooks_dict_ref = weakref.ref(hooks_dict)
        self.extra_dict_refs = tuple(weakref.ref(d) for d in extra_dicts)
        self.id = next(RemovableHandle._next_id)

    def remove(self) -> None:
        """Unregister the hook (a second call does nothing)."""
        for ref in (self.hooks_dict_ref, *self.extra_dict_refs):
            d = ref()
            if d is not None and self.id in d:
                del d[self.id]

    def __enter__(self) -> RemovableHandle:
        return self

    def __exit__(self, *exc) -> None:
        self.remove()


class _HookDict(OrderedDict):
    """An OrderedDict that weakref can point at (plain dicts cannot be weakly referenced)."""


_STRUCTURE = [0]  # bumped by every change of any module's parameter, buffer or child dict


def structure_version() -> int:
    """A number that changes whenever any module gains, loses or replaces a parameter, buffer or child.

    Compiled programs cache what they gather from a module tree (its modules and state tensors) under this number,
    so a call walks the tree only after the tree changed. Tensors' shapes, dtypes and ``requires_grad`` are not
    covered: callers still compare those."""
    return _STRUCTURE[0]


class _Store(dict):
    """A module's ``_parameters`` / ``_buffers`` / ``_modules`` dict: every change bumps :func:`structure_version`.
    Pickled as a plain dict (checkpoints never name this class); ``Module.__setstate__`` makes it a store again."""

    __slots__ = ()

    def __setitem__(self, key, value) -> None:
        _STRUCTURE[0] += 1
        dict.__setitem__(self, key, value)

    def __delitem__(self, key) -> None:
        _STRUCTURE[0] += 1
        dict.__delitem__(self, key)

    def pop(self, *args):
        _STRUCTURE[0] += 1
        return dict.pop(self, *args)

    def popitem(self):
        _STRUCTURE[0] += 1
        return dict.popitem(self)

    def clear(self) -> None:
        _STRUCTURE[0] += 1
        dict.clear(self)

    def update(self, *args, **kwargs) -> None:
        _STRUCTURE[0] += 1
        dict.update(self, *args, **kwargs)

    def setdefault(self, key, default=None):
        _STRUCTURE[0] += 1
        return dict.setdefault(self, key, default)

    def __ior__(self, other):
        self.update(other)
        return self

    def __reduce__(self):
        return (dict, (dict(self),))


def walk(modules) -> tuple[list, list] | None:
    """``(modules, state)`` of a module forest: every module once (depth first, as ``modules()``), and every
    parameter and buffer once, in that order. ``None`` when a module's dicts are not stores (someone replaced one
    with a plain dict): then nothing may be cached."""
    mods: list = []
    seen_m: set = set()
    state: list = []
    seen_t: set = set()
    for root in modules:
        for m in root.modules():
            if id(m) in seen_m:
                continue
            seen_m.add(id(m))
            mods.append(m)
            for store in (m._parameters, m._buffers):
                if type(store) is not _Store:
                    return None
                for t in store.values():
                    if t is not None and id(t) not in seen_t:
                        seen_t.add(id(t))
                        state.append(t)
            if type(m._modules) is not _Store:
                return None
    return mods, state


def _addindent(s: str, num_spaces: int) -> str:
    lines = s.split("\n")
    if len(lines) == 1:
        return s
    first = lines.pop(0)
    return first + "\n" + "\n".join(num_spaces * " " + line for line in lines)


def _check_name(name, kind: str) -> None:
    if not isinstance(name, str):
        raise TypeError(f"{kind} name should be a string, got {type(name).__name__}")
    if name == "":
        raise KeyError(f'{kind} name can\'t be empty string ""')
    if "." in name:
        raise KeyError(f'{kind} name can\'t contain ".", got: {name}')


def _type_name(value) -> str:
    if isinstance(value, Tensor):
        return f"lazyflow.Tensor ({value.dtype.name})"
    return type(value).__module__ + "." + type(value).__qualname__


class Module:
    """Base class for all neural-network modules (``torch.nn.Module``).

    Subclasses call ``super().__init__()`` first, assign Parameters, sub-Modules and buffers as attributes,
    and define ``forward``; calling the module runs the forward pre-hooks, ``forward`` and the forward hooks.

    >>> class Net(lf.nn.Module):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.fc = lf.nn.Linear(4, 2)
    ...     def forward(self, x):
    ...         return self.fc(x).relu()
    """

    training: bool
    _version: int = 1
    call_super_init: bool = False

    def __init__(self, *args, **kwargs) -> None:
        if args or kwargs:
            raise TypeError(f"{type(self).__name__}.__init__() got unexpected arguments {args} {kwargs}")
        d = self.__dict__
        d["training"] = True
        d["_parameters"] = _Store()
        d["_buffers"] = _Store()
        d["_non_persistent_buffers_set"] = set()
        d["_modules"] = _Store()
        d["_forward_hooks"] = _HookDict()
        d["_forward_hooks_with_kwargs"] = _HookDict()
        d["_forward_hooks_always_called"] = _HookDict()
        d["_forward_pre_hooks"] = _HookDict()
        d["_forward_pre_hooks_with_kwargs"] = _HookDict()
        d["_backward_hooks"] = _HookDict()
        d["_backward_pre_hooks"] = _HookDict()

    def forward(self, *args, **kwargs):
        """The computation; every subclass defines it."""
        raise NotImplementedError(f'Module [{type(self).__name__}] is missing the required "forward" function')

    # ------------------------------------------------------------------ calling
    def __call__(self, *args, **kwargs):
        d = self.__dict__
        if not (d.get("_forward_pre_hooks") or d.get("_forward_hooks")):
            if d.get("_backward_hooks") or d.get("_backward_pre_hooks"):
                return call_with_backward_hooks(self, self.forward, args, kwargs)
            return self.forward(*args, **kwargs)
        return self._call_with_hooks(args, kwargs)

    def _call_with_hooks(self, args, kwargs):
        for hid, hook in list(self._forward_pre_hooks.items()):
            if hid in self._forward_pre_hooks_with_kwargs:
                res = hook(self, args, kwargs)
                if res is not None:
                    if not (isinstance(res, tuple) and len(res) == 2):
                        raise RuntimeError(
                            "forward pre-hook with kwargs must return None or a tuple of "
                            f"(new_args, new_kwargs), but got {res!r}"
                        )
                    args, kwargs = res
            else:
                res = hook(self, args)
                if res is not None:
                    args = res if isinstance(res, tuple) else (res,)
        try:
            if self.__dict__.get("_backward_hooks") or self.__dict__.get("_backward_pre_hooks"):
                result = call_with_backward_hooks(self, self.forward, args, kwargs)
            else:
                result = self.forward(*args, **kwargs)
        except Exception:
            for hid, hook in list(self._forward_hooks.items()):
                if hid in self._forward_hooks_always_called:
                    try:
                        if hid in self._forward_hooks_with_kwargs:
                            hook(self, args, kwargs, None)
                        else:
                            hook(self, args, None)
                    except Exception:
                        pass
            raise
        for hid, hook in list(self._forward_hooks.items()):
            if hid in self._forward_hooks_with_kwargs:
                res = hook(self, args, kwargs, result)
            else:
                res = hook(self, args, result)
            if res is not None:
                result = res
        return result

    def register_forward_pre_hook(
        self, hook: Callable, *, prepend: bool = False, with_kwargs: bool = False
    ) -> RemovableHandle:
        """Run ``hook(module, args)`` (or ``hook(module, args, kwargs)``) before every ``forward``.

        Args:
            hook: returns None, or new positional args (a single value is wrapped in a tuple); with
                ``with_kwargs=True`` it returns None or ``(args, kwargs)``.
            prepend: run before the hooks already registered.
            with_kwargs: pass the keyword arguments too.
        Returns:
            a handle whose ``remove()`` unregisters the hook.
        """
        handle = RemovableHandle(self._forward_pre_hooks, self._forward_pre_hooks_with_kwargs)
        self._forward_pre_hooks[handle.id] = hook
        if with_kwargs:
            self._forward_pre_hooks_with_kwargs[handle.id] = True
        if prepend:
            self._forward_pre_hooks.move_to_end(handle.id, last=False)
        return handle

    def register_forward_hook(
        self, hook: Callable, *, prepend: bool = False, with_kwargs: bool = False, always_call: bool = False
    ) -> RemovableHandle:
        """Run ``hook(module, args, output)`` (or ``hook(module, args, kwargs, output)``) after ``forward``.

        Args:
            hook: returns None or a replacement output.
            prepend: run before the hooks already registered.
            with_kwargs: pass the keyword arguments too.
            always_call: also run (with output None) when ``forward`` raises.
        Returns:
            a handle whose ``remove()`` unregisters the hook.
        """
        handle = RemovableHandle(
            self._forward_hooks, self._forward_hooks_with_kwargs, self._forward_hooks_always_called
        )
        self._forward_hooks[handle.id] = hook
        if with_kwargs:
            self._forward_hooks_with_kwargs[handle.id] = True
        if always_call:
            self._forward_hooks_always_called[handle.id] = True
        if prepend:
            self._forward_hooks.move_to_end(handle.id, last=False)
        return handle

    def register_full_backward_hook(self, hook: Callable, prepend: bool = False) -> RemovableHandle:
        """Run ``hook(module, grad_input, grad_output)`` when the gradients w.r.t. the module's positional tensor
        inputs have been computed; a returned tuple replaces ``grad_input`` (torch's semantics; see
        ``lazyflow/nn/_backward_hooks.py``). Works eagerly and in ``lf.nn.Graph``; calling a hooked module inside
        ``lf.compile`` or an ``lf.func`` transform raises ``GraphError``.

        Returns:
            a handle whose ``remove()`` unregisters the hook.
        """
        return self._add_backward_hook(self.__dict__.setdefault("_backward_hooks", _HookDict()), hook, prepend)

    def register_full_backward_pre_hook(self, hook: Callable, prepend: bool = False) -> RemovableHandle:
        """Run ``hook(module, grad_output)`` when the gradients w.r.t. the module's outputs have been computed,
        before the gradients w.r.t. its inputs; a returned tuple replaces ``grad_output``.

        Returns:
            a handle whose ``remove()`` unregisters the hook.
        """
        return self._add_backward_hook(self.__dict__.setdefault("_backward_pre_hooks", _HookDict()), hook, prepend)

    def _add_backward_hook(self, hooks: _HookDict, hook: Callable, prepend: bool) -> RemovableHandle:
        handle = RemovableHandle(hooks)
        hooks[handle.id] = hook
        if prepend:
            hooks.move_to_end(handle.id, last=False)
        return handle

    # ------------------------------------------------------------------ attribute routing
    def __getattr__(self, name: str) -> Any:
        d = self.__dict__
        for store in ("_parameters", "_buffers", "_modules"):
            s = d.get(store)
            if s is not None and name in s:
                return s[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __setattr__(self, name: str, value: Any) -> None:
        d = self.__dict__
        params = d.get("_parameters")
        if isinstance(value, Parameter):
            if params is None:
                raise AttributeError("cannot assign parameters before Module.__init__() call")
            self._forget(name, keep="_parameters")
            self.register_parameter(name, value)
            return
        if params is not None and name in params:
            if value is not None:
                raise TypeError(
                    f"cannot assign '{_type_name(value)}' as parameter '{name}' "
                    "(lazyflow.nn.Parameter or None expected)"
                )
            self.register_parameter(name, value)
            return
        modules = d.get("_modules")
        if isinstance(value, Module):
            if modules is None:
                raise AttributeError("cannot assign module before Module.__init__() call")
            self._forget(name, keep="_modules")
            modules[name] = value
            return
        if modules is not None and name in modules:
            if value is not None:
                raise TypeError(
                    f"cannot assign '{_type_name(value)}' as child module '{name}' "
                    "(lazyflow.nn.Module or None expected)"
                )
            modules[name] = value
            return
        buffers = d.get("_buffers")
        if isinstance(value, Buffer) or (buffers is not None and name in buffers):
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(
                    f"cannot assign '{_type_name(value)}' as buffer '{name}' (lazyflow.Tensor or None expected)"
                )
            if buffers is None:
                raise AttributeError("cannot assign buffer before Module.__init__() call")
            if isinstance(value, Buffer):
                persistent = value.persistent
            else:
                persistent = name not in self._non_persistent_buffers_set
            self._forget(name, keep="_buffers")
            self.register_buffer(name, value, persistent)
            return
        object.__setattr__(self, name, value)

    def _forget(self, name: str, keep: str) -> None:
        d = self.__dict__
        d.pop(name, None)
        for store in ("_parameters", "_buffers", "_modules"):
            if store != keep:
                d[store].pop(name, None)
        if keep != "_buffers":
            d["_non_persistent_buffers_set"].discard(name)

    def __delattr__(self, name: str) -> None:
        d = self.__dict__
        if name in d.get("_parameters", ()):
            del d["_parameters"][name]
        elif name in d.get("_buffers", ()):
            del d["_buffers"][name]
            d["_non_persistent_buffers_set"].discard(name)
        elif name in d.get("_modules", ()):
            del d["_modules"][name]
        else:
            object.__delattr__(self, name)

    def __dir__(self):
        keys = list(super().__dir__())
        keys += list(self._parameters) + list(self._modules) + list(self._buffers)
        return sorted(k for k in set(keys) if not k[0].isdigit())

    # ------------------------------------------------------------------ registration
    def register_buffer(self, name: str, tensor: Tensor | None, persistent: bool = True) -> None:
        """Add a buffer: state that is not a parameter (running statistics, step counters).

        Args:
            name: attribute name.
            tensor: the buffer (or None: the name is registered but holds nothing).
            persistent: whether the buffer is part of ``state_dict``.
        Raises:
            AttributeError: called before ``Module.__init__``.
            KeyError: a bad name, or an attribute that already exists under it.
            TypeError: ``tensor`` is neither a Tensor nor None.
        """
        if "_buffers" not in self.__dict__:
            raise AttributeError("cannot assign buffer before Module.__init__() call")
        _check_name(name, "buffer")
        if hasattr(self, name) and name not in self._buffers:
            raise KeyError(f"attribute '{name}' already exists")
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(
                f"cannot assign '{_type_name(tensor)}' object to buffer '{name}' (lazyflow Tensor or None required)"
            )
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def register_parameter(self, name: str, param: Parameter | None) -> None:
        """Add a parameter (``param=None`` registers the name with no value, e.g. ``bias=False``).

        Raises:
            AttributeError: called before ``Module.__init__``.
            KeyError: a bad name, or an attribute that already exists under it.
            TypeError: ``param`` is not a Parameter, or is not a leaf.
        """
        if "_parameters" not in self.__dict__:
            raise AttributeError("cannot assign parameter before Module.__init__() call")
        _check_name(name, "parameter")
        if hasattr(self, name) and name not in self._parameters:
            raise KeyError(f"attribute '{name}' already exists")
        if param is not None:
            if not isinstance(param, Parameter):
                raise TypeError(
                    f"cannot assign '{_type_name(param)}' object to parameter '{name}' "
                    "(lazyflow.nn.Parameter or None required)"
                )
            if param.grad_fn is not None:
                raise ValueError(
                    f"Cannot assign non-leaf Tensor to parameter '{name}'. Model parameters must "
                    "be created explicitly; to express '{name}' as a function of another Tensor, "
                    "compute the value in the forward() method."
                )
        self._parameters[name] = param

    def add_module(self, name: str, module: Module | None) -> None:
        """Add a child module, reachable as ``self.<name>``.

        Raises:
            TypeError: ``module`` is not a Module (or None).
            KeyError: a bad name, or an attribute that already exists under it.
        """
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{_type_name(module)} is not a Module subclass")
        _check_name(name, "module")
        if hasattr(self, name) and name not in self._modules:
            raise KeyError(f"attribute '{name}' already exists")
        self._modules[name] = module

    def register_module(self, name: str, module: Module | None) -> None:
        """Alias of :meth:`add_module`."""
        self.add_module(name, module)

    def get_submodule(self, target: str) -> Module:
        """The submodule at dotted path ``target`` (``""`` is this module).

        Raises:
            AttributeError: a path component is missing or is not a Module.
        """
        if target == "":
            return self
        mod = self
        walked = []
        for item in target.split("."):
            if not isinstance(mod, Module) or item not in mod._modules:
                where = ".".join(walked) or type(self).__name__
                raise AttributeError(
                    f"{where} has no submodule `{item}` (looking up '{target}'; children: "
                    f"{list(mod._modules) if isinstance(mod, Module) else []})"
                )
            mod = mod._modules[item]
            walked.append(item)
        if not isinstance(mod, Module):
            raise AttributeError(f"`{target}` is not an nn.Module")
        return mod

    def set_submodule(self, target: str, module: Module) -> None:
        """Replace (or add) the submodule at dotted path ``target``."""
        if target == "":
            raise ValueError("Cannot set the submodule without a target name!")
        if not isinstance(module, Module):
            raise TypeError(f"{_type_name(module)} is not a Module subclass")
        parent_path, _, name = target.rpartition(".")
        _check_name(name, "module")
        self.get_submodule(parent_path)._modules[name] = module

    def get_parameter(self, target: str) -> Parameter:
        """The parameter at dotted path ``target`` (``"layer.0.weight"``).

        Raises:
            AttributeError: the path does not name a parameter.
        """
        mod_path, _, name = target.rpartition(".")
        mod = self.get_submodule(mod_path)
        if name not in mod._parameters:
            close = difflib.get_close_matches(target, [n for n, _ in self.named_parameters()], n=3)
            raise AttributeError(
                f"{mod._get_name()} has no parameter `{name}` (looking up '{target}')"
                + (f"; did you mean {close}?" if close else "")
            )
        return mod._parameters[name]

    def get_buffer(self, target: str) -> Tensor:
        """The buffer at dotted path ``target``.

        Raises:
            AttributeError: the path does not name a buffer.
        """
        mod_path, _, name = target.rpartition(".")
        mod = self.get_submodule(mod_path)
        if name not in mod._buffers:
            raise AttributeError(f"{mod._get_name()} has no buffer `{name}` (looking up '{target}')")
        return mod._buffers[name]

    # ------------------------------------------------------------------ traversal
    def _named_members(self, get_members_fn, prefix="", recurse=True, remove_duplicate: bool = True):
        memo = set()
        modules = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) if recurse else [(prefix, self)]
        for module_prefix, module in modules:
            for k, v in get_members_fn(module):
                if v is None or v in memo:
                    continue
                if remove_duplicate:
                    memo.add(v)
                yield (module_prefix + ("." if module_prefix else "") + k, v)

    def parameters(self, recurse: bool = True) -> Iterator[Parameter]:
        """This module's parameters (and its descendants' when ``recurse``), each once, in torch's order."""
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_parameters(
        self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True
    ) -> Iterator[tuple[str, Parameter]]:
        """``(dotted name, parameter)`` pairs in torch's order (depth first, own parameters first)."""
        yield from self._named_members(
            lambda m: m._parameters.items(), prefix=prefix, recurse=recurse, remove_duplicate=remove_duplicate
        )

    def buffers(self, recurse: bool = True) -> Iterator[Tensor]:
        """This module's buffers (persistent or not), in torch's order."""
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def named_buffers(
        self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True
    ) -> Iterator[tuple[str, Tensor]]:
        """``(dotted name, buffer)`` pairs in torch's order."""
        yield from self._named_members(
            lambda m: m._buffers.items(), prefix=prefix, recurse=recurse, remove_duplicate=remove_duplicate
        )

    def children(self) -> Iterator[Module]:
        """The direct child modules, each once."""
        for _, m in self.named_children():
            yield m

    def named_children(self) -> Iterator[tuple[str, Module]]:
        """``(name, child)`` pairs of the direct children, each module once."""
        memo = set()
        for name, module in self._modules.items():
            if module is not None and module not in memo:
                memo.add(module)
                yield name, module

    def modules(self) -> Iterator[Module]:
        """This module and all its descendants, depth first, each once."""
        for _, m in self.named_modules():
            yield m

    def named_modules(
        self, memo: set | None = None, prefix: str = "", remove_duplicate: bool = True
    ) -> Iterator[tuple[str, Module]]:
        """``(dotted name, module)`` for this module (name ``prefix``) and every descendant."""
        if memo is None:
            memo = set()
        if self in memo:
            return
        if remove_duplicate:
            memo.add(self)
        yield prefix, self
        for name, module in self._modules.items():
            if module is None:
                continue
            sub = prefix + ("." if prefix else "") + name
            yield from module.named_modules(memo, sub, remove_duplicate)

    # ------------------------------------------------------------------ state_dict
    def _save_to_state_dict(self, destination: dict, prefix: str, keep_vars: bool) -> None:
        """Put this module's own parameters and persistent buffers (not its children's) in ``destination``."""
        for name, param in self._parameters.items():
            if param is not None:
                destination[prefix + name] = param if keep_vars else param.detach()
        for name, buf in self._buffers.items():
            if buf is not None and name not in self._non_persistent_buffers_set:
                destination[prefix + name] = buf if keep_vars else buf.detach()

    def state_dict(
        self, *args, destination: dict | None = None, prefix: str = "", keep_vars: bool = False
    ) -> dict[str, Any]:
        """Parameters and persistent buffers under flat dotted keys, in torch's order.

        Args:
            destination: a dict to fill (a new OrderedDict when None).
            prefix: prepended to every key.
            keep_vars: return the Parameter/buffer objects themselves instead of detached tensors.
        Returns:
            the filled dict.
        """
        if args:  # torch's deprecated positional form state_dict(destination, prefix, keep_vars)
            names = ("destination", "prefix", "keep_vars")
            vals = dict(zip(names, args))
            destination = vals.get("destination", destination)
            prefix = vals.get("prefix", prefix)
            keep_vars = vals.get("keep_vars", keep_vars)
        if destination is None:
            destination = OrderedDict()
        self._save_to_state_dict(destination, prefix, keep_vars)
        for name, module in self._modules.items():
            if module is not None:
                module.state_dict(destination=destination, prefix=prefix + name + ".", keep_vars=keep_vars)
        return destination

    def _load_from_state_dict(
        self,
        state_dict: Mapping,
        prefix: str,
        local_metadata: dict,
        strict: bool,
        missing_keys: list,
        unexpected_keys: list,
        error_msgs: list,
    ) -> None:
        """Load this module's own parameters and persistent buffers from ``state_dict`` (torch's hook).

        Missing keys go to ``missing_keys``, keys under ``prefix`` that name nothing here to
        ``unexpected_keys``, shape mismatches to ``error_msgs``. Values are written into the existing
        objects (identity kept) unless ``local_metadata["assign"]`` is set.
        """
        persistent = {k: v for k, v in self._buffers.items() if k not in self._non_persistent_buffers_set}
        local_state = {k: v for k, v in itertools.chain(self._parameters.items(), persistent.items()) if v is not None}
        assign = local_metadata.get("assign", False)
        for name, target in local_state.items():
            key = prefix + name
            if key not in state_dict:
                if strict:
                    missing_keys.append(key)
                continue
            value = state_dict[key]
            try:
                arr = _as_array(value)
            except (TypeError, ValueError) as e:
                error_msgs.append(
                    f'While copying the parameter named "{key}", whose dimensions in the model '
                    f"are {tuple(target.shape)}, an exception occurred : {e}."
                )
                continue
            if tuple(arr.shape) != tuple(target.shape):
                error_msgs.append(
                    f"size mismatch for {key}: copying a param with shape {tuple(arr.shape)} from "
                    f"checkpoint, the shape in current model is {tuple(target.shape)}."
                )
                continue
            if assign:
                new = _make(_placed(arr, target, cast=False))
                if name in self._parameters:
                    self._parameters[name] = Parameter(new, requires_grad=target.requires_grad)
                else:
                    self._buffers[name] = new
            else:
                _write_into(target, arr)
        if strict:
            for key in state_dict.keys():
                if key.startswith(prefix):
                    head = key[len(prefix) :].split(".", 1)[0]
                    if head not in self._modules and head not in local_state:
                        unexpected_keys.append(key)

    def load_state_dict(
        self, state_dict: Mapping[str, Any], strict: bool = True, assign: bool = False
    ) -> IncompatibleKeys:
        """Copy parameters and persistent buffers from ``state_dict`` into this module.

        Values may be lazyflow Tensors, numpy arrays or anything ``numpy.asarray`` accepts (so
        ``{k: v.numpy() for k, v in torch_model.state_dict().items()}`` loads). Values are cast to each
        parameter's dtype and written into the existing Parameter/buffer objects, so optimizers and compiled
        wrappers holding them stay valid.

        Args:
            state_dict: flat dotted keys to values.
            strict: raise when keys are missing or unexpected.
            assign: replace the Parameter/buffer objects by the loaded values (keeping the values' dtype)
                instead of writing into them.
        Returns:
            ``(missing_keys, unexpected_keys)`` as a named tuple.
        Raises:
            CheckpointError: one error listing every problem: missing and unexpected keys (with near
                matches) when ``strict``, and shape mismatches always.
        """
        if not isinstance(state_dict, Mapping):
            raise TypeError(f"Expected state_dict to be dict-like, got {type(state_dict).__name__}.")
        missing: list[str] = []
        unexpected: list[str] = []
        errors: list[str] = []
        metadata = getattr(state_dict, "_metadata", None)
        # our own shallow copy (torch's rule): a module's loading hook may add keys, never to the caller's mapping
        state_dict = OrderedDict(state_dict)

        def load(module, prefix=""):
            local = {} if metadata is None else dict(metadata.get(prefix[:-1], {}))
            if assign:
                local["assign"] = True
            module._load_from_state_dict(state_dict, prefix, local, True, missing, unexpected, errors)
            for name, child in module._modules.items():
                if child is not None:
                    load(child, prefix + name + ".")

        with no_grad():
            load(self)
        if strict:
            if unexpected:
                known = list(self.state_dict(keep_vars=True).keys())
                parts = []
                for k in unexpected:
                    close = difflib.get_close_matches(k, known, n=1, cutoff=0.6)
                    parts.append(f'"{k}"' + (f' (did you mean "{close[0]}"?)' if close else ""))
                errors.insert(0, "Unexpected key(s) in state_dict: " + ", ".join(parts) + ". ")
            if missing:
                errors.insert(0, "Missing key(s) in state_dict: " + ", ".join(f'"{k}"' for k in missing) + ". ")
        if errors:
            raise CheckpointError(f"Error(s) in loading state_dict for {self._get_name()}:\n\t" + "\n\t".join(errors))
        return IncompatibleKeys(missing, unexpected)

    # ------------------------------------------------------------------ modes and conversion
    def train(self, mode: bool = True) -> Module:
        """Set training mode (``mode=True``) or evaluation mode on this module and all descendants."""
        if not isinstance(mode, bool):
            raise ValueError(f"training mode is expected to be boolean, got {type(mode).__name__}")
        for m in self.modules():
            m.__dict__["training"] = mode
        return self

    def eval(self) -> Module:
        """Evaluation mode: ``train(False)`` (dropout off, batch norm uses running statistics)."""
        return self.train(False)

    def requires_grad_(self, requires_grad: bool = True) -> Module:
        """Set ``requires_grad`` on every parameter."""
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset the gradients of every parameter: to None (default), or to zeros in place."""
        zero_grads(self.parameters(), set_to_none)

    def apply(self, fn: Callable[[Module], None]) -> Module:
        """Call ``fn`` on every descendant (children first) and then on this module."""
        for module in self.children():
            module.apply(fn)
        fn(self)
        return self

    def _apply(self, fn: Callable[[Tensor], Tensor], recurse: bool = True) -> Module:
        """Replace the value of every parameter, buffer and gradient by ``fn(value)``, in place."""
        if recurse:
            for module in self.children():
                module._apply(fn)
        with no_grad():
            for store in (self._parameters, self._buffers):
                for t in store.values():
                    if t is None:
                        continue
                    _convert(t, fn(t))
                    if t.grad is not None:
                        _convert(t.grad, fn(t.grad))
        return self

    def to(self, *args, **kwargs) -> Module:
        """Move and/or cast parameters and buffers in place: ``to(device)``, ``to(dtype)``,
        ``to(device, dtype)``, ``to(tensor)``, keywords ``device``, ``dtype``, ``non_blocking``, ``memory_format``.
        A floating or complex dtype applies to floating and complex tensors only (integer buffers keep theirs; a
        complex tensor cast to a floating dtype keeps its real part, as in torch). ``memory_format`` is checked on
        the 4-D (``channels_last``) or 5-D (``channels_last_3d``) tensors and changes no value (lazyflow has no
        strides: see ``lazyflow._core.formats``).

        Raises:
            DTypeError: a dtype that is neither floating nor complex (a TypeError, as torch's).
            ArgumentError: a ``memory_format`` that is not one.
        """
        dtype = kwargs.pop("dtype", None)
        device = kwargs.pop("device", None)
        kwargs.pop("non_blocking", None)
        fmt = kwargs.pop("memory_format", None)
        if kwargs:
            raise TypeError(f"to() got unexpected keyword arguments {sorted(kwargs)}")
        for a in args:
            if isinstance(a, Tensor):
                dtype, device = a.dtype, a.device
            else:
                try:
                    dtype = D.to_dtype(a)
                except (TypeError, ValueError, KeyError):
                    device = a
        if dtype is not None:
            dtype = D.to_dtype(dtype)
            if not (dtype.is_floating_point or dtype.is_complex):
                raise DTypeError(
                    f"nn.Module.to only accepts floating point or complex dtypes, but got desired dtype={dtype}"
                )
        check_memory_format(fmt, None, "nn.Module.to()")
        rank = {channels_last: 4, channels_last_3d: 5}.get(fmt)  # type: ignore[call-overload]

        def convert(t):
            if rank is not None and t.ndim == rank:
                t = t.contiguous(memory_format=fmt)
            if device is not None:
                t = t.to(device)
            if dtype is not None and (t.is_floating_point() or t.is_complex()):
                if t.is_complex() and not dtype.is_complex:
                    t = t.real  # torch keeps the real part (and warns that the imaginary part is dropped)
                t = t.to(dtype)
            return t

        return self._apply(convert)

    def to_empty(self, *, device, recurse: bool = True) -> Module:
        """Move parameters and buffers to ``device`` without copying their values (torch's ``to_empty``: the new
        storage is uninitialised there, zeros here -- XLA has no uninitialised buffers). For a model built
        somewhere cheap and then filled by ``load_state_dict`` or an init function on its device.

        Raises:
            DeviceError: a device JAX does not have.
        """
        return self._apply(lambda t: empty_like(t, device=device), recurse=recurse)

    def _cast_floats(self, dtype) -> Module:
        return self._apply(lambda t: t.to(dtype) if t.is_floating_point() else t)

    def float(self) -> Module:
        """Cast floating parameters and buffers to float32."""
        return self._cast_floats(D.float32)

    def double(self) -> Module:
        """Cast floating parameters and buffers to float64."""
        return self._cast_floats(D.float64)

    def half(self) -> Module:
        """Cast floating parameters and buffers to float16."""
        return self._cast_floats(D.float16)

    def bfloat16(self) -> Module:
        """Cast floating parameters and buffers to bfloat16."""
        return self._cast_floats(D.bfloat16)

    def cpu(self) -> Module:
        """Move parameters and buffers to the CPU."""
        return self._apply(lambda t: t.cpu())

    def cuda(self, device=None) -> Module:
        """Move parameters and buffers to a CUDA device."""
        return self._apply(lambda t: t.cuda(device))

    def type(self, dst_type) -> Module:
        """Cast every parameter and buffer to ``dst_type``."""
        return self._apply(lambda t: t.to(dst_type))

    # ------------------------------------------------------------------ repr
    def _get_name(self) -> str:
        return type(self).__name__

    def extra_repr(self) -> str:
        """The module-specific part of ``repr`` (constructor arguments); subclasses override it."""
        return ""

    def __repr__(self) -> str:
        extra = self.extra_repr()
        extra_lines = extra.split("\n") if extra else []
        child_lines = [f"({key}): " + _addindent(repr(module), 2) for key, module in self._modules.items()]
        lines = extra_lines + child_lines
        main = self._get_name() + "("
        if lines:
            if len(extra_lines) == 1 and not child_lines:
                main += extra_lines[0]
            else:
                main += "\n  " + "\n  ".join(lines) + "\n"
        return main + ")"

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        for k in ("_parameters", "_buffers", "_modules"):
            v = self.__dict__.get(k)
            if v is not None and type(v) is not _Store:
                self.__dict__[k] = _Store(v)
        _STRUCTURE[0] += 1
        for k, v in (
            ("_forward_hooks_with_kwargs", {}),
            ("_forward_hooks_always_called", {}),
            ("_forward_pre_hooks_with_kwargs", {}),
            ("_backward_hooks", _HookDict()),
            ("_backward_pre_hooks", _HookDict()),
            ("_non_persistent_buffers_set", set()),
        ):
            self.__dict__.setdefault(k, v)


# ---------------------------------------------------------------- helpers for loading values in place
def _as_array(value):
    """A jax or numpy array holding ``value`` (a Tensor, numpy array, or anything numpy.asarray takes)."""
    if isinstance(value, Tensor):
        return value._value
    if isinstance(value, jax.Array):
        return value
    arr = np.asarray(value)
    if arr.dtype == object:
        raise TypeError(f"cannot convert a {type(value).__name__} to an array")
    return arr


def _placed(arr, target: Tensor, cast: bool = True):
    """``arr`` as a new jax array that lazyflow owns, on ``target``'s placement, with ``target``'s dtype when ``cast``
    (a copy even of a jax array: ``target`` may later donate its buffer to an in-place kernel)."""
    return owned_array(arr, target.dtype if cast else None, sharding_of(target._meta[2]))


def _write_into(target: Tensor, arr) -> None:
    _rebind(target, _placed(arr, target))


def _convert(target: Tensor, new: Tensor) -> None:
    """torch's ``_apply``: ``target.data = fn(target)``: a real conversion gives ``target`` new storage (aliases
    taken before, e.g. ``state_dict()`` values, keep the old dtype and value); a no-op keeps the storage."""
    if new is not target and new._value is not target._value:
        target.data = new
