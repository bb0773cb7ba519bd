"""The ``Optimizer`` base class: torch's API as a stateful shell around a pure update function.

Two layers (torch's ``SGD.step()`` over ``torch.optim._functional.sgd`` is the model):

* The PUBLIC functional protocol -- ``functional_state()``, ``functional_hyperparams()``,
  ``functional_update(params, grads, state, hyper)``, ``load_functional_state(state)`` -- documented on
  :class:`Optimizer`. Eager ``step()`` runs ``functional_update`` as one jitted program per call, ``lf.nn.Graph``
  traces it inside its training-step program, and a user's own ``jax.jit`` loop can call it too.
* The hooks a subclass (a new optimizer) implements:

  * ``_update(hyper, params, grads, states) -> (new_params, new_states)`` -- PURE, over lists of JAX arrays of
    ONE parameter group. ``hyper`` maps each hyperparameter name to a number or a JAX tracer (``lr``,
    ``momentum``, ``betas``, ``eps``, ...) and each static flag name to a Python value (``nesterov``,
    ``amsgrad``, ``maximize``, and derived flags such as ``has_momentum``). ``states[i]`` maps torch's state
    names (``"step"``, ``"momentum_buffer"``, ``"exp_avg"``...) to arrays; the returned state dicts may hold
    keys the input lacked (SGD creates its momentum buffer on the first step, like torch). It must depend only
    on its arguments: compiled programs are cached per (class, argument structure).
  * ``_dynamic`` / ``_static`` / ``_derived_static(group)``: which group keys are traceable values and which
    are static flags (``_split_hyper(group)`` returns both; ``_hyper(group)`` merges them into the dict
    ``_update`` takes).
  * ``_new_state(p, group)`` and, where state appears later, ``_init_state(group_index, params=None)``: the
    state torch creates before its update (Adam's ``step``/``exp_avg``/``exp_avg_sq``...), for ``params``
    (default: the group's parameters that have a gradient) that have none yet.
"""

from __future__ import annotations

import builtins
import copy
import threading
import warnings
from collections import defaultdict, namedtuple
from itertools import chain
from typing import Any, cast

import jax
import jax.core
import jax.numpy as jnp
import numpy as np

from .._core import dtypes as D
from .._core.errors import OpError, ShapeError
from .._core.placement import pid_of
from .._core.refs import owned
from .._tensor import Tensor, _make, _meta_of, _publish
from ..autograd import enable_grad
from ..eager import kernel_store as _kstore

__all__ = ["Optimizer", "Hyperparameters", "required", "cache_info", "clear_cache"]

_Tracer = jax.core.Tracer


class _RequiredParameter:
    """Singleton marking a hyperparameter every param group must specify."""

    def __repr__(self) -> str:
        return "<required parameter>"


required = _RequiredParameter()

CacheInfo = namedtuple("CacheInfo", "traces entries")


class _Stats:
    traces = 0


_stats = _Stats()
_programs: dict = {}
_owner = threading.local()


def cache_info() -> CacheInfo:
    """Counters of the eager optimizer-program cache.

    Returns:
        ``CacheInfo(traces, entries)``: how many times ``functional_update`` was traced for ``step()`` (each
        trace is followed by one XLA compilation) and how many jitted programs exist (one per class, plus one
        without donation for a step called inside a trace; each holds its own compilations per argument
        structure, static flags included).
    """
    return CacheInfo(_stats.traces, len(_programs))


def clear_cache() -> None:
    """Drop every cached optimizer program and reset the counters."""
    _programs.clear()
    _stats.traces = 0


def _program(cls, donate: bool) -> Any:
    """The jitted ``functional_update`` of ``cls`` that ``step()`` runs (parameters and state donated or not)."""
    key = (cls, donate)
    fn = _programs.get(key)
    if fn is None:

        def run(params, grads, states, hyper):
            _stats.traces += 1
            return _owner.opt.functional_update(params, grads, states, hyper)

        if not donate:  # called inside a trace: the caller's program holds it
            fn = _programs[key] = jax.jit(run)
        else:
            fn = _programs[key] = _kstore.Program(run, _store_ident(cls), (0, 2))
    return fn


def _store_ident(cls) -> str | None:
    """The kernel store's name for ``cls``'s step program: only lazyflow's own optimizer classes (their code is in
    the store's source hash, and their update reads nothing from the instance); None for anything else (a user's
    subclass: its program goes through JAX's cache)."""
    mro = [c for c in cls.__mro__ if c is not object]
    if not all(c.__module__.startswith("lazyflow.") for c in mro):
        return None
    for name in ("_update", "_update_complex", "functional_update"):
        if not getattr(getattr(cls, name, None), "__module__", "").startswith("lazyflow."):
            return None
    return f"optim:{cls.__module__}.{cls.__qualname__}"


def _check_kinds(cls, index, params, states, new_params, new_states) -> None:
    """At trace time: every updated array keeps its shape and dtype (the write-back relies on it). ``index``: the
    parameters' numbers, for the message."""
    if len(new_params) != len(params) or len(new_states) != len(states):
        raise OpError(
            f"{cls.__name__}._update returned {len(new_params)} parameters and {len(new_states)} states "
            f"for {len(params)} parameters"
        )
    pairs = [("parameter", i, a, b) for i, (a, b) in enumerate(zip(params, new_params))]
    pairs += [
        (f"state {k!r} of parameter", i, old[k], new[k])
        for i, (old, new) in enumerate(zip(states, new_states))
        for k in old
        if k in new
    ]
    for what, i, a, b in pairs:
        if tuple(a.shape) != tuple(b.shape) or a.dtype != b.dtype:
            raise OpError(
                f"{cls.__name__}._update changed {what} {index[i]} from {a.dtype}{list(a.shape)} to "
                f"{b.dtype}{list(b.shape)}; an update must keep shapes and dtypes"
            )


@jax.tree_util.register_pytree_node_class
class Hyperparameters:
    """One parameter group's hyperparameters, as :meth:`Optimizer.functional_update` takes them.

    A JAX pytree: the numbers (``lr``, ``betas``, ``weight_decay``...) are its leaves, the flags (``nesterov``,
    ``amsgrad``, ``maximize``...) and the group's number of parameters are its static structure. Passed to a
    ``jax.jit`` function, a new learning rate is a new argument value (no retrace) and a new flag is a new
    structure (a retrace, never a stale program). Made by :meth:`Optimizer.functional_hyperparams`.

    Attributes:
        values: ``{name: number, tuple of numbers or 0-d array}``.
        flags: ``((name, value), ...)`` static flags.
        size: how many consecutive entries of the flat parameter list belong to this group.
    """

    __slots__ = ("values", "flags", "size")

    def __init__(self, values: dict[str, Any], flags: tuple, size: int) -> None:
        self.values, self.flags, self.size = values, flags, size

    def tree_flatten(self):
        return (self.values,), (self.flags, self.size)

    @classmethod
    def tree_unflatten(cls, aux, children) -> Hyperparameters:
        return cls(children[0], *aux)

    def as_dict(self) -> dict[str, Any]:
        """Values and flags in one dict: the ``hyper`` argument of a subclass's ``_update``."""
        return {**self.values, **dict(self.flags)}

    def __repr__(self) -> str:
        return f"Hyperparameters({self.as_dict()}, size={self.size})"


def _dynamic_value(name: str, v):
    if type(v) is builtins.float:
        return v
    if isinstance(v, Tensor):
        return v._value
    if isinstance(v, (builtins.bool, np.bool_)):
        return builtins.float(v)
    if isinstance(v, (builtins.int, builtins.float, np.integer, np.floating)):
        return builtins.float(v)
    if isinstance(v, (tuple, list)):
        return tuple(_dynamic_value(name, x) for x in v)
    if isinstance(v, (jax.Array, _Tracer)):
        return v
    raise TypeError(
        f"optimizer hyperparameter {name!r} must be a number, a tuple of numbers or a 0-d "
        f"Tensor, got {type(v).__name__}"
    )


def _state_array(like: Tensor, fill: builtins.float | builtins.complex = 0.0):
    """A new array shaped, typed and placed like ``like`` (filled with ``fill``)."""
    v = like._value
    if isinstance(v, _Tracer):
        return jnp.full(v.shape, fill, v.dtype)
    # built on the host (no kernel, so no compile, per parameter shape), and committed to a device only when the
    # parameter is: a committed state next to uncommitted parameters would make the step program's outputs
    # committed, and the next step would compile the program again for them
    return jax.device_put(np.full(v.shape, fill, v.dtype), v.sharding if v.committed else None)


def _scalar_state(value: builtins.float = 0.0, *, like: Tensor | None = None):
    """torch's ``state["step"]``: a 0-d float32 tensor (float64 when that is the default dtype); committed to the
    device of ``like`` (its parameter) when that is committed, for the reason given in :func:`_state_array`."""
    d = D.float64 if D.get_default_dtype() is D.float64 else D.float32
    arr = np.asarray(value, d.np)
    v = None if like is None else like._value
    if v is None or isinstance(v, _Tracer):
        return _make(jnp.asarray(arr))
    return _make(jax.device_put(arr, _replicated(v.sharding) if v.committed else None))


def _replicated(sharding):
    """A 0-d value's placement next to a parameter placed by ``sharding``: the same devices, not split."""
    if isinstance(sharding, jax.sharding.NamedSharding):
        return jax.sharding.NamedSharding(sharding.mesh, jax.sharding.PartitionSpec())
    return sharding


def _check_lr(lr) -> None:
    if isinstance(lr, Tensor) and lr.numel() != 1:
        raise ValueError(f"Tensor lr must be 1-element, got shape {list(lr.shape)}")
    if not 0.0 <= lr:
        raise ValueError(f"Invalid learning rate: {lr} (expected lr >= 0)")


def _check_nonneg(what: str, value) -> None:
    if not 0.0 <= value:
        raise ValueError(f"Invalid {what}: {value} (expected >= 0)")


def _check_betas(betas) -> None:
    if not isinstance(betas, (tuple, list)) or len(betas) != 2:
        raise ValueError(f"betas must be a pair (beta1, beta2), got {betas!r}")
    for i, b in enumerate(betas):
        if not 0.0 <= b < 1.0:
            raise ValueError(f"Invalid beta parameter at index {i}: {b} (expected 0 <= beta < 1)")


def _check_flags(differentiable: bool, foreach, fused) -> None:
    if differentiable:
        raise ValueError("differentiable=True is not supported: lazyflow's optimizer step is not recorded by autograd")
    if fused and foreach:
        raise RuntimeError("`fused` and `foreach` cannot be `True` together.")


class Optimizer:
    """Base class of all optimizers (``torch.optim.Optimizer``).

    Subclasses set ``_dynamic`` (group keys passed to ``_update`` as traceable values), ``_static`` (group
    keys passed as static flags), optionally ``_derived_static(group)``, ``_state_keys`` (state names
    that must be shaped like their parameter, validated by ``load_state_dict``), ``_new_state(p, group)``
    and the pure ``_update`` (see the module docstring).

    **The functional protocol** (state in, state out) is what ``step()``, ``lf.nn.Graph`` and a user's own
    ``jax.jit`` training loop all run. Parameters are numbered as in ``state_dict()``: every param group's
    ``params``, in order, as one flat list.

    * ``functional_state() -> state``: a list with one ``{name: jax.Array}`` dict per parameter (torch's
      names: ``"step"``, ``"exp_avg"``...), empty where a parameter has no state yet. Creates the state torch
      creates before a parameter's first update, for parameters that require grad (as ``step()`` would).
    * ``functional_hyperparams() -> hyper``: one :class:`Hyperparameters` pytree per param group, read from
      ``param_groups`` now (so after a scheduler's ``step()``, call it again).
    * ``functional_update(params, grads, state, hyper) -> (new_params, new_state)``: PURE. ``params`` and
      ``grads`` are flat lists of arrays (a ``None`` gradient leaves that parameter and its state unchanged);
      the result has the same layout. Traceable: call it inside ``jax.jit``, ``jax.lax.scan``...
    * ``load_functional_state(state)``: store a state back into the optimizer (the same state Tensor objects),
      so ``state_dict()`` and eager ``step()`` continue from it.

    Args:
        params: an iterable of Tensors, of ``(name, Tensor)`` pairs, or of dicts defining param groups.
        defaults: default hyperparameters, used for groups that do not set them.
    Raises:
        TypeError: ``params`` is a single Tensor or contains a non-Tensor.
        ValueError: an empty parameter list, a non-leaf Tensor, or a parameter in two groups.

    >>> opt = lf.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    >>> params = [p.jax() for p in model.parameters()]
    >>> state, hyper = opt.functional_state(), opt.functional_hyperparams()
    >>> grads = jax.grad(loss_fn)(params, x, y)
    >>> params, state = opt.functional_update(params, grads, state, hyper)
    """

    _dynamic: tuple[str, ...] = ()
    _static: tuple[str, ...] = ()
    _state_keys: tuple[str, ...] | None = None
    _scalar_state_keys: tuple[str, ...] = ("step",)

    def __init__(self, params, defaults: dict[str, Any]) -> None:
        self.defaults = defaults
        self.state: defaultdict = defaultdict(dict)
        self.param_groups: list[dict[str, Any]] = []
        if isinstance(params, Tensor):
            raise TypeError(
                "params argument given to the optimizer should be an iterable of Tensors or "
                f"dicts, but got a Tensor of shape {list(params.shape)}; wrap it in a list"
            )
        param_groups = list(params)
        if len(param_groups) == 0:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(param_groups[0], dict):
            param_groups = [{"params": param_groups}]
        for group in param_groups:
            self.add_param_group(group)

    # ------------------------------------------------------------------ torch's public API
    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """Add a parameter group (a dict with ``"params"`` and optional hyperparameter overrides).

        Args:
            param_group: the group; missing hyperparameters take the optimizer's defaults.
        Raises:
            TypeError: not a dict, params given as a set, or a non-Tensor parameter.
            ValueError: a required hyperparameter is missing, a non-leaf Tensor, or a parameter already
                in another group.
        """
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, but got {type(param_group).__name__}")
        param_group = dict(param_group)
        params = param_group["params"]
        if isinstance(params, Tensor):
            params = [params]
        elif isinstance(params, set):
            raise TypeError(
                "optimizer parameters need to be organized in ordered collections, but the "
                "ordering of tensors in sets will change between runs. Please use a list instead."
            )
        else:
            params = list(params)
        names = [p[0] for p in params if isinstance(p, tuple)]
        params = [p[1] if isinstance(p, tuple) else p for p in params]
        if names:
            if len(names) != len(params):
                raise ValueError("all optimizer params should be with/without names. Some param names are missing")
            param_group["param_names"] = names
        param_group["params"] = params
        for p in params:
            if not isinstance(p, Tensor):
                raise TypeError(f"optimizer can only optimize Tensors, but one of the params is {type(p).__name__}")
            if not (p.is_leaf or p.retains_grad):
                raise ValueError("can't optimize a non-leaf Tensor")
        for name, default in self.defaults.items():
            if default is required and name not in param_group:
                raise ValueError(f"parameter group didn't specify a value of required optimization parameter {name}")
            param_group.setdefault(name, default)
        if len({id(p) for p in params}) != len(params):
            warnings.warn(
                "optimizer contains a parameter group with duplicate parameters; in future, this will cause an error",
                stacklevel=3,
            )
        seen = {id(p) for g in self.param_groups for p in g["params"]}
        if any(id(p) in seen for p in params):
            raise ValueError("some parameters appear in more than one parameter group")
        if self.param_groups and ("param_names" in param_group) != ("param_names" in self.param_groups[0]):
            raise ValueError("all optimizer param groups should be with/without names.")
        self.param_groups.append(param_group)

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset the gradients of all optimized parameters.

        Args:
            set_to_none: set ``.grad`` to None (default) instead of filling it with zeros.
        """
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                if set_to_none:
                    p.grad = None
                else:
                    g = p.grad
                    if g._node is not None:
                        g.detach_()
                    else:
                        g._rg = False
                    g.zero_()

    def step(self, closure=None):
        """Perform one optimization step: ``functional_update`` over every parameter with a gradient, as one
        compiled program (parameter and state buffers donated; one that something else references, such as a
        ``p.jax()`` or a ``state_dict()`` snapshot, is donated as a copy, so nothing held is deleted; ``detach()``
        aliases share the parameter's storage and show the update, as in torch).

        Args:
            closure: optional callable that re-evaluates the model and returns the loss (run with
                gradients enabled).
        Returns:
            The closure's result, or None.
        """
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        plist, params, grads, states, hyper = [], [], [], [], []
        for index, group in enumerate(self.param_groups):
            ps = self._params_with_grad(group)
            if not ps:
                continue
            self._init_state(index, ps)
            arrays = self._group_arrays(group, ps)
            for out, part in zip((plist, params, grads, states), arrays):
                out += part
            hyper.append(self._hyperparameters(group, len(ps)))
        if not plist:
            return loss
        del arrays, part  # their lists reference the buffers too: drop them before the ownership check
        donate = not isinstance(params[0], _Tracer)
        if donate:  # a buffer something else holds (an alias, a state_dict() snapshot...) is donated as a copy
            params = owned(params)
            flat = owned([a for st in states for a in st.values()], holders=2)
            it = iter(flat)
            states = [{k: next(it) for k in st} for st in states]
            del flat, it
        fn = _program(type(self), donate)
        _owner.opt = self
        try:
            if donate:  # the executable loaded for this instance; another structure: the jitted step takes over
                new_params, new_states = fn.call(id(self), params, grads, states, hyper)
            else:
                new_params, new_states = fn(params, grads, states, hyper)
        finally:
            _owner.opt = None
        del params, states
        self._write_back(plist, new_params, new_states, same_meta=True)
        return loss

    # ------------------------------------------------------------------ the functional protocol
    def functional_state(self) -> list[dict[str, jax.Array]]:
        """Every parameter's state as arrays (see the class docstring).

        Returns:
            One dict per parameter (state_dict numbering), ``{}`` for a parameter without state.
        """
        for index, group in enumerate(self.param_groups):
            self._init_state(index, [p for p in group["params"] if p.requires_grad])
        empty: dict = {}
        return [
            {k: v._value for k, v in self.state.get(p, empty).items() if isinstance(v, Tensor)}
            for p in self._flat_params()
        ]

    def functional_hyperparams(self) -> list[Hyperparameters]:
        """Every param group's hyperparameters as they are now, one :class:`Hyperparameters` per group."""
        return [self._hyperparameters(g, len(g["params"])) for g in self.param_groups]

    def functional_update(
        self, params: list, grads: list, state: list[dict], hyper: list[Hyperparameters]
    ) -> tuple[list, list[dict]]:
        """One optimizer step as a pure function of arrays (see the class docstring).

        Args:
            params: the parameters' arrays, flat, in state_dict numbering.
            grads: their gradients (same layout); ``None`` skips a parameter.
            state: ``functional_state()`` or a previous call's result.
            hyper: ``functional_hyperparams()``.
        Returns:
            ``(new_params, new_state)`` in the layout of ``params`` and ``state``.
        Raises:
            ValueError: the lists disagree in length with each other or with the groups in ``hyper``.
            OpError: the update changed a parameter's or a state's shape or dtype.
        """
        n = sum(h.size for h in hyper)
        if not len(params) == len(grads) == len(state) == n:
            raise ValueError(
                f"functional_update: got {len(params)} parameters, {len(grads)} gradients and "
                f"{len(state)} states, but the param groups in hyper hold {n} parameters; pass "
                "flat lists in the optimizer's numbering (every group's params, in order)"
            )
        new_params, new_state = list(params), list(state)
        start = 0
        for h in hyper:
            live = [i for i in range(start, start + h.size) if grads[i] is not None]
            start += h.size
            if not live:
                continue
            ps, ss = [params[i] for i in live], [state[i] for i in live]
            gs = [grads[i] for i in live]
            if any(jnp.iscomplexobj(p) for p in ps):
                nps, nss = self._update_complex(h.as_dict(), ps, gs, ss)
            else:
                nps, nss = self._update(h.as_dict(), ps, gs, ss)
            _check_kinds(type(self), live, ps, ss, nps, nss)
            for i, p, old, st in zip(live, nps, ss, nss):
                # a name the update left out keeps its value (torch keeps state it does not touch), so every
                # donated state buffer comes back
                new_params[i], new_state[i] = p, st if old.keys() <= st.keys() else {**old, **st}
        return new_params, new_state

    def load_functional_state(self, state: list[dict], *, same_meta: bool = False) -> None:
        """Store ``state`` (``functional_update``'s result) into the optimizer: existing state Tensors are rebound
        to the new arrays (same objects, version bumped), new names become new Tensors.

        Args:
            state: one dict per parameter, in ``functional_state()``'s layout.
            same_meta: the caller guarantees each array has the shape, dtype and placement of the state it
                replaces (a compiled step's outputs for its own donated inputs), so nothing is re-read from it.
        Raises:
            ValueError: ``state`` does not hold one dict per parameter.
        """
        plist = self._flat_params()
        if len(state) != len(plist):
            raise ValueError(f"load_functional_state: got {len(state)} states for {len(plist)} parameters")
        self._write_state(plist, state, _assign_same if same_meta else _assign)

    def state_dict(self) -> dict[str, Any]:
        """The optimizer state in torch's layout.

        Returns:
            ``{"state": {index: {name: Tensor}}, "param_groups": [{...hyperparameters..., "params":
            [indices]}]}`` where indices number the parameters in group order. State tensors are
            snapshots (later steps never change them) that share memory with the optimizer's arrays.
        """
        mapping: dict[int, int] = {}
        start = 0
        groups = []
        for g in self.param_groups:
            packed = {k: v for k, v in g.items() if k != "params"}
            for i, p in enumerate(g["params"], start):
                mapping.setdefault(id(p), i)
            packed["params"] = [mapping[id(p)] for p in g["params"]]
            start += len(packed["params"])
            groups.append(packed)
        state = {}
        for p, s in self.state.items():
            key = mapping[id(p)] if isinstance(p, Tensor) else p
            state[key] = {k: (_make(v._value, v._meta) if isinstance(v, Tensor) else v) for k, v in s.items()}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Load a state produced by ``state_dict()`` (of lazyflow, or torch's with arrays as numpy).

        Values may be lazyflow Tensors, numpy arrays or anything ``numpy.asarray`` accepts; floating
        state is cast to its parameter's dtype and placement, ``"step"`` keeps its dtype.

        Args:
            state_dict: ``{"state": ..., "param_groups": ...}``.
        Raises:
            ValueError: a missing section, a different number of groups or of parameters in a group, state
                for an unknown parameter index, or a state name this optimizer does not use.
            ShapeError: a state array whose shape differs from its parameter's.
        """
        if not isinstance(state_dict, dict) or "state" not in state_dict or "param_groups" not in state_dict:
            got = sorted(state_dict) if isinstance(state_dict, dict) else type(state_dict).__name__
            raise ValueError(f"expected an optimizer state dict with keys 'state' and 'param_groups', got {got}")
        saved_groups = copy.deepcopy(state_dict["param_groups"])
        groups = self.param_groups
        if len(groups) != len(saved_groups):
            raise ValueError(
                f"loaded state dict has {len(saved_groups)} parameter groups, but the optimizer has {len(groups)}"
            )
        for i, (g, s) in enumerate(zip(groups, saved_groups)):
            if len(g["params"]) != len(s["params"]):
                raise ValueError(
                    f"loaded state dict contains a parameter group that doesn't match the size of "
                    f"optimizer's group: group {i} has {len(s['params'])} parameters in the state "
                    f"dict and {len(g['params'])} in the optimizer"
                )
        id_map = dict(
            zip(
                chain.from_iterable(s["params"] for s in saved_groups), chain.from_iterable(g["params"] for g in groups)
            )
        )
        state: defaultdict = defaultdict(dict)
        for k, values in state_dict["state"].items():
            if k not in id_map:
                raise ValueError(
                    f"loaded state dict has state for parameter index {k!r}, but its param_groups "
                    f"list only indices {sorted(id_map, key=str)}"
                )
            p = id_map[k]
            if not isinstance(values, dict):
                raise ValueError(f"state of parameter {k} must be a dict, got {type(values).__name__}")
            state[p] = {name: self._load_value(p, k, name, v) for name, v in values.items()}
        new_groups = []
        for g, s in zip(groups, saved_groups):
            s["params"] = g["params"]
            if "param_names" in g and "param_names" not in s:
                s["param_names"] = g["param_names"]
            for name, default in self.defaults.items():
                s.setdefault(name, default)
            self._fix_loaded_group(s)
            new_groups.append(s)
        self.state = state
        self.param_groups = new_groups

    def __repr__(self) -> str:
        out = self.__class__.__name__ + " ("
        for i, group in enumerate(self.param_groups):
            out += f"\nParameter Group {i}\n"
            for key in sorted(group):
                if key != "params":
                    out += f"    {key}: {group[key]}\n"
        return out + ")"

    def __getstate__(self) -> dict[str, Any]:
        return {"defaults": self.defaults, "state": self.state, "param_groups": self.param_groups}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    # ------------------------------------------------------------------ hooks (see module docstring)
    def _update(self, hyper: dict, params: list, grads: list, states: list[dict]) -> tuple[list, list]:
        raise NotImplementedError(f"{type(self).__name__} must implement _update")

    # torch steps a complex parameter as the real pairs of view_as_real (its elementwise rules -- squares, signs,
    # maxima -- then act on the real and imaginary parts apart); False where torch refuses complex parameters
    _complex_as_real = True

    def _update_complex(self, hyper: dict, params: list, grads: list, states: list[dict]) -> tuple[list, list]:
        """``_update`` on the real views of complex parameters, gradients and state, viewed back afterwards (the
        state keeps the parameter's complex dtype, as torch's state_dict does)."""
        if not self._complex_as_real:
            raise D.DTypeError(f"{type(self).__name__} does not support complex parameters")

        def real(a):
            return jnp.stack([a.real, a.imag], axis=-1) if jnp.iscomplexobj(a) else a

        def back(a, like):
            return jax.lax.complex(a[..., 0], a[..., 1]).astype(like.dtype) if jnp.iscomplexobj(like) else a

        nps, nss = self._update(
            hyper,
            [real(p) for p in params],
            [real(g) for g in grads],
            [{k: real(v) for k, v in st.items()} for st in states],
        )
        nps = [back(n, p) for n, p in zip(nps, params)]
        nss = [{k: back(v, old[k]) if k in old else v for k, v in st.items()} for st, old in zip(nss, states)]
        return nps, nss

    def _new_state(self, p: Tensor, group: dict) -> dict[str, Tensor]:
        """The state torch creates for ``p`` before its first update (empty by default)."""
        return {}

    def _derived_static(self, group: dict) -> dict[str, Any]:
        """Static flags computed from the group (e.g. ``has_momentum``)."""
        return {}

    def _fix_loaded_group(self, group: dict) -> None:
        """Adjust a group loaded by ``load_state_dict`` (AdamW forces decoupled weight decay)."""

    def _params_with_grad(self, group: dict) -> list[Tensor]:
        return [p for p in group["params"] if p.grad is not None]

    def _split_hyper(self, group: dict) -> tuple[dict[str, Any], tuple]:
        dynamic = {k: _dynamic_value(k, group[k]) for k in self._dynamic}
        static = tuple((k, group[k]) for k in self._static) + tuple(self._derived_static(group).items())
        return dynamic, static

    def _hyper(self, group: dict) -> dict[str, Any]:
        return self._hyperparameters(group, len(group["params"])).as_dict()

    def _hyperparameters(self, group: dict, size: int) -> Hyperparameters:
        dynamic, static = self._split_hyper(group)
        return Hyperparameters(dynamic, static, size)

    def _flat_params(self) -> list[Tensor]:
        return [p for g in self.param_groups for p in g["params"]]

    def _init_state(self, group_index: int, params: list[Tensor] | None = None) -> None:
        group = self.param_groups[group_index]
        if params is None:
            params = self._params_with_grad(group)
        for p in params:
            if not self.state.get(p):
                new = self._new_state(p, group)
                if new:
                    self.state[p] = new

    def _group_arrays(self, group: dict, params: list[Tensor] | None = None):
        plist = self._params_with_grad(group) if params is None else list(params)
        empty: dict = {}
        # plist holds parameters with a gradient (the caller's params come from _params_with_grad too)
        return (
            plist,
            [p._value for p in plist],
            [cast(Tensor, p.grad)._value for p in plist],
            [{k: t._value for k, t in self.state.get(p, empty).items()} for p in plist],
        )

    def _write_back(
        self, plist: list[Tensor], new_params: list, new_states: list[dict], *, same_meta: bool = False
    ) -> None:
        """Store results into the same objects. ``same_meta``: the caller guarantees every value has its
        target's shape, dtype and placement (eager step: the program maps each array to its own kind)."""
        assign = _assign_same if same_meta else _assign
        for p, value in zip(plist, new_params):
            assign(p, value)
        self._write_state(plist, new_states, assign)

    def _write_state(self, plist: list[Tensor], new_states: list[dict], assign) -> None:
        state = self.state
        for p, new in zip(plist, new_states):
            st = state.get(p)
            if st is None:
                if not new:
                    continue
                st = state[p] = {}
            for k, a in new.items():
                t = st.get(k)
                if t is None:
                    st[k] = _make(a)
                elif t._value is not a:
                    assign(t, a)

    def _load_value(self, p: Tensor, index, name, value):
        if isinstance(value, Tensor):
            arr = value._value
        elif isinstance(value, (jax.Array, np.ndarray, np.generic, builtins.int, builtins.float)):
            arr = value
        else:
            return value  # non-tensor state is kept as is, like torch
        shape = tuple(np.shape(arr))
        if name in self._scalar_state_keys:
            if shape != ():
                raise ShapeError(
                    f"loaded optimizer state {name!r} of parameter {index} must be a scalar, got shape {list(shape)}"
                )
            if isinstance(arr, (builtins.int, builtins.float)) or not np.issubdtype(np.asarray(arr).dtype, np.floating):
                return _scalar_state(builtins.float(arr))
            dtype = np.dtype(arr.dtype)
        else:
            if self._state_keys is not None and name not in self._state_keys:
                raise ValueError(
                    f"loaded state of parameter {index} has an entry {name!r} that "
                    f"{type(self).__name__} does not use (expected names: "
                    f"{list(self._scalar_state_keys) + list(self._state_keys)})"
                )
            if shape != tuple(p.shape) and self._state_keys is not None:
                raise ShapeError(
                    f"loaded optimizer state {name!r} of parameter {index} has shape {list(shape)}, "
                    f"but the parameter has shape {list(p.shape)}"
                )
            dtype = p.dtype.to_jax() if p.is_floating_point() else np.asarray(arr).dtype
        if isinstance(arr, jax.Array):
            # a copy, as torch's load_state_dict deep-copies: sharing the buffer would let this optimizer's step
            # donate (delete) an array the given state dict -- or the optimizer it came from -- still holds
            out = jnp.array(arr, dtype=dtype, copy=True)
        else:
            out = jnp.asarray(np.array(arr, dtype=dtype, copy=True))  # private copy: JAX may alias numpy memory
        pv = p._value
        if not isinstance(pv, _Tracer) and name not in self._scalar_state_keys:
            out = jax.device_put(out, pv.sharding)
        return _make(out)


def _assign(t: Tensor, value) -> None:
    """Replace ``t``'s value in place (same object), keeping its meta when shape, dtype and placement are unchanged."""
    meta = t._meta
    if (
        isinstance(value, _Tracer)
        or meta is None
        or tuple(value.shape) != meta[0]
        or value.dtype != meta[1].np
        or (value.sharding is not getattr(t._value, "sharding", None) and pid_of(value) != meta[2])
    ):
        meta = _meta_of(value)
    t._value = value
    t._meta = meta
    t._version += 1
    if t._peers is not None:
        _publish(t)


def _assign_same(t: Tensor, value) -> None:
    t._value = value
    t._version += 1
    if t._peers is not None:
        _publish(t)
