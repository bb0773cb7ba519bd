"""``CompiledModule``: what ``lf.compile(module)`` returns.

The wrapper *shares* the original module's parameter, buffer and child dictionaries, so every traversal --
``state_dict``, ``load_state_dict`` (also when a plain parent holds the compiled child), ``parameters``,
``named_modules``, ``to``, ``zero_grad`` -- sees exactly the original's tensors under exactly the original's keys:
no ``_orig_mod.`` prefix, in either direction. Calls run through a :class:`CompiledFunction` whose state inputs are
the module's parameters and buffers.
"""

from __future__ import annotations

import operator
import warnings
from typing import Any

from ..nn.module import Module, structure_version, walk
from .compile import CompiledFunction, _IdSet

__all__ = ["CompiledModule", "WRAPPER_PREFIXES", "TreeCache"]

#: key prefixes other wrappers put on state_dict keys; accepted (and stripped) when every key carries one
WRAPPER_PREFIXES = ("_orig_mod.", "module.")


def module_state(modules, out: list, seen: dict) -> list:
    """Append the parameters and buffers of ``modules`` (and their children) not yet in ``seen`` to ``out``;
    ``seen`` maps ``id(tensor)`` to its position in ``out``."""
    for module in modules:
        for m in module.modules():
            for store in (m._parameters, m._buffers):
                for t in store.values():
                    if t is not None and id(t) not in seen:
                        seen[id(t)] = len(out)
                        out.append(t)
    return out


class TreeCache:
    """The modules and state tensors of a module forest, walked again only when :func:`structure_version` moved
    (a call of a compiled module or Graph then costs no tree walk)."""

    __slots__ = ("_roots", "_version", "_seen_roots", "_mods", "_state")

    def __init__(self, roots) -> None:
        self._roots = roots  # a callable returning the root modules (a Graph's may be added later)
        self._version = -1
        self._seen_roots: tuple = ()
        self._mods: list = []
        self._state: list = []

    def get(self) -> tuple[list, list]:
        """``(modules, state tensors)``, each once, in ``modules()`` order (parameters before buffers)."""
        v = structure_version()
        roots = tuple(self._roots())
        if (
            v != self._version
            or len(roots) != len(self._seen_roots)
            or not all(map(operator.is_, roots, self._seen_roots))
        ):
            w = walk(roots)
            if w is None:  # a dict that is not a store: cannot tell when it changes, so never cache
                self._version = -1
                return [m for r in roots for m in r.modules()], module_state(roots, [], {})
            self._mods, self._state = w
            self._version, self._seen_roots = v, roots
        return self._mods, self._state


class _ModuleProgram(CompiledFunction):
    def __init__(self, module, **opts):
        super().__init__(module, name=type(module).__name__, **opts)
        self._module = module
        self._tree = TreeCache(lambda: (module,))

    def _state(self):
        return self._tree.get()[1], 0  # the cached list itself: a call compares it by identity

    def _extra_key(self):
        return tuple([m.training for m in self._tree.get()[0]])

    def _param_set(self):
        return _IdSet(self._module.parameters())


def strip_wrapper_prefix(state_dict):
    """If every key carries one known wrapper prefix, return (stripped dict, prefix); else (dict, None)."""
    keys = list(state_dict.keys())
    for p in WRAPPER_PREFIXES:
        if keys and all(isinstance(k, str) and k.startswith(p) for k in keys):
            out: Any = type(state_dict)() if hasattr(state_dict, "move_to_end") else {}
            for k in keys:
                out[k[len(p) :]] = state_dict[k]
            meta = getattr(state_dict, "_metadata", None)
            if meta is not None:
                out._metadata = {(k[len(p) :] if k.startswith(p) else k): v for k, v in meta.items()}
            return out, p
    return state_dict, None


class CompiledModule(Module):
    """A module compiled by :func:`lazyflow.compile`; behaves as the original module in every respect but speed.

    Attributes:
        module: the original module (``cm.module``); its attributes are reachable on the wrapper too.
    """

    def __init__(self, module: Module, **options):
        if not isinstance(module, Module):
            raise TypeError(f"CompiledModule wraps an lf.nn.Module, got {type(module).__name__}")
        d = self.__dict__
        src = module.__dict__
        for name in ("_parameters", "_buffers", "_non_persistent_buffers_set", "_modules"):
            d[name] = src[name]  # shared, not copied: one set of tensors, one set of keys
        d["_forward_hooks"] = type(src["_forward_hooks"])()
        d["_forward_pre_hooks"] = type(src["_forward_pre_hooks"])()
        d["_forward_hooks_with_kwargs"] = {}
        d["_forward_hooks_always_called"] = {}
        d["_forward_pre_hooks_with_kwargs"] = {}
        d["module"] = module
        d["_program"] = _ModuleProgram(module, **options)

    @property
    def training(self) -> bool:  # the original's flag; a data descriptor, so it wins over __dict__
        return self.__dict__["module"].training

    @training.setter
    def training(self, mode: bool) -> None:
        self.__dict__["module"].train(mode)

    @property
    def _orig_mod(self) -> Module:
        """torch.compile's name for the original module."""
        return self.__dict__["module"]

    def forward(self, *args, **kwargs):
        return self._program(*args, **kwargs)

    @property
    def config(self):
        """Placement on a device mesh: ``cm.config.data_parallel(mesh, "data")``,
        ``cm.config.shard_parameters(mesh, "data")`` (see :class:`lazyflow.graph.mesh_config.MeshConfig`)."""
        return self.__dict__["_program"].config

    def cache_info(self):
        """Counters of compiled variants: traces, compiles, hits, variants, fallbacks."""
        return self._program.cache_info()

    def __getattr__(self, name: str):
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(self.__dict__["module"], name)

    # -- pass-through state: the original's own methods, so its overrides and hooks apply
    def state_dict(self, *args, **kwargs):
        return self.module.state_dict(*args, **kwargs)

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        """Load into the original module. Keys carrying a known wrapper prefix (``_orig_mod.``, ``module.``) on
        EVERY key are accepted: the prefix is stripped and a warning says so."""
        stripped, prefix = strip_wrapper_prefix(state_dict)
        own = self.module.state_dict(keep_vars=True)
        if prefix is not None and not any(k.startswith(prefix) for k in own):
            warnings.warn(
                f"load_state_dict: every key carried the wrapper prefix {prefix!r}; loaded them with the "
                f"prefix stripped ({len(stripped)} keys)",
                stacklevel=2,
            )
            state_dict = stripped
        return self.module.load_state_dict(state_dict, strict=strict, assign=assign)

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        return self.module._save_to_state_dict(destination, prefix, keep_vars)

    def _load_from_state_dict(self, *args, **kwargs):
        return self.module._load_from_state_dict(*args, **kwargs)

    def named_modules(self, memo=None, prefix: str = "", remove_duplicate: bool = True):
        return self.module.named_modules(memo, prefix, remove_duplicate)

    def train(self, mode: bool = True):
        self.module.train(mode)
        return self

    def extra_repr(self) -> str:
        return ""

    def __repr__(self) -> str:
        inner = repr(self.module).replace("\n", "\n  ")
        return f"CompiledModule(\n  {inner}\n)"

    def __getstate__(self):
        raise TypeError(
            "a CompiledModule is not picklable; save its state_dict() (same keys as the module) or pickle cm.module"
        )

    def __deepcopy__(self, memo):
        import copy

        opts = dict(
            cache_size_limit=self._program._limit,
            recompile_limit=self._program._recompile_limit,
            on_recompile_limit=self._program._on_limit,
        )
        return CompiledModule(copy.deepcopy(self.module, memo), **opts)
