"""``lf.nn.Graph``: a whole training step -- forward, backward, optimizer update -- as one XLA program.

Subclass it, assign the modules (the same objects eager code uses; parameters are shared), register optimizers
with :meth:`Graph.add_optimizer`, and write :meth:`Graph.build` the way an eager step is written
(``loss.backward()`` included). A Graph runs on the same pipeline as ``lf.compile`` (:mod:`.compile`: one trace
to a pure function, one variant cache, one capture lifting, one write-back, one RNG advance); what it adds is
here: ``build``'s tape recorded inside the trace (so ``backward`` works), the optimizers' public
``functional_update`` appended to the program, micro-batches and autocast. The optimized parameters and the
optimizer state are donated: updated in their own buffers. A buffer something else references (``p.jax()``, an
optimizer ``state_dict()`` snapshot, a pending checkpoint, a ``p.detach()``/``p.data`` alias) is donated as a copy,
so nothing held is deleted (aliases share the parameter's storage and show the new value, as in torch).
After each call the parameters, buffers and optimizer state hold exactly what the eager step would have produced,
in the eager layout, so ``model.state_dict()`` / ``opt.state_dict()`` serve both modes.
"""

from __future__ import annotations

import operator
from collections import OrderedDict, namedtuple
from typing import Any

import jax
import jax.numpy as jnp

from .._core import dtypes as D
from .._core.context import state
from .._core.errors import GraphError
from .._tensor import _publish
from ..amp import _AutocastInterpreter
from ..nn.module import Module
from ..optim.optimizer import Optimizer
from .compile import CompiledFunction, _aux_key, _IdSet
from .functionalize import flatten_out, set_traced, traced
from .mesh_config import MeshConfig
from .module import TreeCache

__all__ = ["Graph", "GraphConfig", "GraphInfo"]

GraphInfo = namedtuple("GraphInfo", "traces compiles hits variants checked")


class GraphConfig(MeshConfig):
    """Training options of a :class:`Graph` (OneFlow's ``graph.config``); ``data_parallel`` and
    ``shard_parameters`` come from :class:`MeshConfig`."""

    def __init__(self):
        super().__init__()
        self.amp_dtype = None
        self.grad_acc_steps = 1

    def enable_amp(self, mode: bool = True, *, dtype=None) -> None:
        """Mixed precision inside the step: matmuls/convs in ``dtype`` (bfloat16 by default), reductions, softmax
        and losses in float32; parameters and optimizer state stay float32 (same op lists as ``lf.autocast``)."""
        if not mode:
            self.amp_dtype = None
            return
        d = D.bfloat16 if dtype is None else D.to_dtype(dtype)
        if d not in (D.bfloat16, D.float16):
            raise D.DTypeError(f"enable_amp supports bfloat16 and float16, got {d}")
        self.amp_dtype = d

    def set_gradient_accumulation_steps(self, n: int) -> None:
        """Split each call's batch (dim 0 of every tensor argument) into ``n`` micro-batches inside the one compiled
        call; gradients are averaged over them (the same update as the full batch with a mean loss) and each
        returned floating tensor is the mean over micro-batches."""
        if not isinstance(n, int) or n < 1:
            raise ValueError(f"gradient accumulation steps must be a positive int, got {n!r}")
        self.grad_acc_steps = n

    def _key(self):
        return (self.amp_dtype, self.grad_acc_steps)

    def __repr__(self) -> str:
        return (
            f"GraphConfig(amp={self.amp_dtype.name if self.amp_dtype else None}, "
            f"gradient_accumulation_steps={self.grad_acc_steps})"
        )


class _StepProgram(CompiledFunction):
    """A Graph's program: the shared pipeline with ``build``'s backward and the optimizers' updates inside."""

    _trace_grad = True

    def __init__(self, graph, cache_size_limit: int):
        name = type(graph).__name__
        super().__init__(
            graph.build, cache_size_limit=cache_size_limit, recompile_limit=None, name=name, where=f"{name}.build"
        )
        self._graph = graph
        self.config = graph.config
        # this call's: per optimizer its parameters in its numbering, and their positions in the state
        self._opt_params: list[list] = []
        self._positions: tuple = ()
        self._all: list = []
        self._tree = TreeCache(lambda: graph._modules.values())
        self._cached: tuple | None = None
        self._flat: _FlatOptState | None = None  # the optimizers' state as one flat list, for replayed calls

    def _state(self):
        """The optimized parameters first (carried: donated, always written back), then every other parameter
        and buffer; remembers where each optimizer's parameters sit, for the trace and the key. Cached while the
        module tree (:class:`TreeCache`), the optimizers' parameter lists and their ``requires_grad`` stay."""
        self._opt_params = opt_params = [
            [p for g in opt.param_groups for p in g["params"]] for opt, _ in self._graph._optimizers
        ]
        flat = [p for ps in opt_params for p in ps]
        rg = [p._rg for p in flat]
        mods, tree_state = self._tree.get()
        c = self._cached
        if (
            c is not None
            and c[0] is tree_state
            and c[1] == rg
            and len(c[2]) == len(flat)
            and all(map(operator.is_, c[2], flat))
        ):
            return c[3], c[4]
        seen: dict = {}
        out: list = []
        for p in flat:
            if p._rg and id(p) not in seen:
                seen[id(p)] = len(out)
                out.append(p)
        n_carry = len(out)
        for p in flat:
            if id(p) not in seen:
                seen[id(p)] = len(out)
                out.append(p)
        for t in tree_state:
            if id(t) not in seen:
                seen[id(t)] = len(out)
                out.append(t)
        self._all = out
        self._positions = tuple(tuple(seen[id(p)] for p in ps) for ps in opt_params)
        self._cached = (tree_state, rg, flat, out, n_carry)
        return out, n_carry

    def _aux(self):
        """Donated: each optimizer's ``functional_state()``; kept: its ``functional_hyperparams()``."""
        self._flat = None  # the keyed path: the next replay reads the optimizers' state afresh
        cfg = self.config
        states, hypers = [], []
        for opt, _ in self._graph._optimizers:
            st = opt.functional_state()
            if cfg.mesh is not None:
                st = [{k: cfg._place_array(a) for k, a in s.items()} for s in st]
            states.append(st)
            hypers.append(opt.functional_hyperparams())
        return states, hypers

    def _body(self, call, arg_vals, donated, kept):
        graph, cfg = self._graph, self.config
        n = cfg.grad_acc_steps
        for t in self._all:
            t.grad = None
        if cfg.amp_dtype is not None:  # Tracing restores the interpreter afterwards
            state.interp = _AutocastInterpreter(state.interp, cfg.amp_dtype)
        outs = [call(arg_vals if n == 1 else [_micro(v, k, n) for v in arg_vals]) for k in range(n)]
        out = outs[0] if n == 1 else _mean_outputs(outs, self._where)
        new_states = []
        for (opt, _), ps, st, hyper in zip(graph._optimizers, self._opt_params, donated, kept):
            grads = [None if p.grad is None else p.grad._value if n == 1 else p.grad._value / n for p in ps]
            new_ps, new_st = opt.functional_update([p._value for p in ps], grads, st, hyper)
            for p, v in zip(ps, new_ps):
                if v is not p._value:
                    set_traced(p, v)
            if cfg.mesh is not None:  # optimizer state lives where a parameter of its shape lives
                new_st = [
                    {k: jax.lax.with_sharding_constraint(v, cfg._param_sharding(v.shape)) for k, v in s.items()}
                    for s in new_st
                ]
            new_states.append(new_st)
        return out, new_states

    def _after(self, aux_out) -> None:
        graph = self._graph
        for (opt, _), new_st in zip(graph._optimizers, aux_out):
            # the program's outputs for its own state inputs: same shapes and dtypes (placement pinned by the
            # mesh's sharding constraint in _body)
            opt.load_functional_state(new_st, same_meta=True)
        for ps in self._opt_params:
            for p in ps:
                p.grad = None
        for _, sch in graph._optimizers:
            if sch is not None:
                sch.step()

    def _replay_aux(self):
        """The donated optimizer state as flat arrays read from the state Tensors themselves (no dicts built), and
        the hyperparameters (read every call: a scheduler's or a user's new lr is a new input value, not a
        retrace); ``None`` when the state may have changed shape (then the keyed path runs)."""
        opts = self._graph._optimizers
        f = self._flat
        if f is None:
            f = self._flat = _FlatOptState.build(opts, self._opt_params, self._replay)
            if f is None:
                return None
        if not f.valid(opts, self._opt_params):
            self._flat = None
            return None
        hy = f.hyper
        if hy is None or not hy.same(opts):
            hy = f.hyper = _Hyper(opts)
        return list(map(_value_of_t, f.tensors)), hy.leaves, hy.tree, hy.keys

    def _replay_after(self, aux_leaves) -> None:
        for t, a in zip(self._flat.tensors if self._flat is not None else (), aux_leaves):
            t._value = a  # the program's output for this very input: same shape, dtype and placement
            t._version += 1
            if t._peers is not None:
                _publish(t)
        for ps in self._opt_params:
            for p in ps:
                p.grad = None
        for _, sch in self._graph._optimizers:
            if sch is not None:
                sch.step()

    def _extra_key(self):
        return (
            tuple([m.training for m in self._tree.get()[0]]),
            self.config._key(),
            self._positions,
        )

    def _param_set(self):
        return _IdSet(
            [p for ps in self._opt_params for p in ps]
            + [p for m in self._graph._modules.values() for p in m.parameters()]
        )

    def _eager_call(self, args, kwargs):
        raise GraphError("a Graph cannot be called inside another compiled program")


_value_of_t = operator.attrgetter("_value")
_meta_of_t = operator.attrgetter("_meta")


def _default_protocol(opt) -> bool:
    cls = type(opt)
    return (
        isinstance(opt, Optimizer)
        and cls.functional_state is Optimizer.functional_state
        and cls.load_functional_state is Optimizer.load_functional_state
        and cls._flat_params is Optimizer._flat_params
    )


class _FlatOptState:
    """The optimizers' state Tensors in the order their arrays enter the step program (``functional_state()``
    flattened), and what tells that the optimizers still hold exactly these: the same ``state`` mapping, per
    parameter the same dict of the same size, under each name the same Tensor with the same meta, and parameters
    without state that would still get none. A replayed call reads the arrays from these Tensors and writes the
    program's new state back into them (what ``load_functional_state`` does, without the dicts)."""

    __slots__ = ("tensors", "metas", "guards", "hyper")

    @classmethod
    def build(cls, opts, opt_params, replay) -> _FlatOptState | None:
        if replay is None or len(opts) != len(opt_params) or not all(_default_protocol(o) for o, _ in opts):
            return None
        states = [opt.functional_state() for opt, _ in opts]
        leaves, tree = jax.tree_util.tree_flatten(states)
        aux = replay.key[5]  # (d_tree, k_tree, donated leaves' keys, kept leaves' keys)
        if tree != aux[0] or tree != replay.v.info.get("aux_tree") or len(leaves) != len(aux[2]):
            return None
        if any(a.shape != k[0] or a.dtype != k[1] for a, k in zip(leaves, aux[2])):
            return None
        self = cls()
        self.tensors, self.guards, self.hyper = [], [], None
        for (opt, _), ps, st in zip(opts, opt_params, states):
            table = opt.state
            dicts = list(map(table.get, ps))
            live = [d for d in dicts if d is not None]
            pair_dicts, pair_keys = [], []
            for d, arrays in zip(dicts, st):
                for k in sorted(arrays):
                    pair_dicts.append(d)
                    pair_keys.append(k)
                    self.tensors.append(d[k])
            empty = [(p, g) for g in opt.param_groups for p in g["params"] if p._rg and not table.get(p)]
            self.guards.append((table, list(ps), dicts, live, list(map(len, live)), pair_dicts, pair_keys, empty))
        if any(t._value is not a for t, a in zip(self.tensors, leaves)):
            return None
        self.metas = list(map(_meta_of_t, self.tensors))
        return self

    def valid(self, opts, opt_params) -> bool:
        if len(opts) != len(self.guards):
            return False
        it = iter(self.tensors)
        for (opt, _), ps, (table, plist, dicts, live, lens, pair_dicts, pair_keys, empty) in zip(
            opts, opt_params, self.guards
        ):
            if (
                opt.state is not table
                or len(ps) != len(plist)
                or not all(map(operator.is_, ps, plist))
                or not all(map(operator.is_, map(table.get, ps), dicts))
                or list(map(len, live)) != lens
                or not all(map(operator.is_, map(dict.get, pair_dicts, pair_keys), it))
                or any(table.get(p) or opt._new_state(p, g) for p, g in empty)
            ):
                return False
        return list(map(_meta_of_t, self.tensors)) == self.metas


_IMMUTABLE = frozenset((float, int, bool, str, type(None)))


class _Hyper:
    """The optimizers' ``functional_hyperparams()``, flat, and the param groups they were read from: reused while
    every group is the same dict holding the same objects, all of them immutable numbers, strings or tuples of
    them (a Tensor or list value, which can change in place, is read every call)."""

    __slots__ = ("leaves", "tree", "keys", "groups")

    def __init__(self, opts) -> None:
        kept = [opt.functional_hyperparams() for opt, _ in opts]
        self.leaves, self.tree = jax.tree_util.tree_flatten(kept)
        self.keys = [_aux_key(a) for a in self.leaves]
        groups = []
        for opt, _ in opts:
            if type(opt).functional_hyperparams is not Optimizer.functional_hyperparams:
                self.groups = None
                return
            pg = opt.param_groups
            for g in pg:
                for k, v in g.items():
                    if k not in ("params", "param_names") and not _immutable(v):
                        self.groups = None
                        return
            groups.append((pg, list(pg), [(list(g.values()), len(g["params"])) for g in pg]))
        self.groups = groups

    def same(self, opts) -> bool:
        groups = self.groups
        if groups is None or len(groups) != len(opts):
            return False
        for (opt, _), (pg, dicts, snaps) in zip(opts, groups):
            if opt.param_groups is not pg or len(pg) != len(dicts):
                return False
            for g, g0, (vals, n) in zip(pg, dicts, snaps):
                if g is not g0 or len(g) != len(vals) or len(g["params"]) != n:
                    return False
                if not all(map(operator.is_, g.values(), vals)):
                    return False
        return True


def _immutable(v) -> bool:
    if type(v) is tuple:
        return all(type(x) in _IMMUTABLE for x in v)
    return type(v) in _IMMUTABLE


class Graph:
    """Base class of compiled training/inference steps (OneFlow's ``nn.Graph``).

    >>> class TrainStep(lf.nn.Graph):
    ...     def __init__(self, model, opt):
    ...         super().__init__()
    ...         self.model = model
    ...         self.add_optimizer(opt)
    ...     def build(self, x, y):
    ...         loss = lf.nn.functional.cross_entropy(self.model(x), y)
    ...         loss.backward()
    ...         return loss
    >>> loss = TrainStep(model, opt)(x, y)
    """

    # Set through ``__dict__`` in ``__init__`` (``__setattr__`` registers Modules).
    _modules: OrderedDict[str, Module]
    _optimizers: list[tuple[Any, Any]]
    config: GraphConfig
    _program: _StepProgram

    def __init__(self, *, cache_size_limit: int = 8):
        d = self.__dict__
        d["_modules"] = OrderedDict()
        d["_optimizers"] = []
        d["config"] = GraphConfig()
        d["_program"] = _StepProgram(self, cache_size_limit)

    def __setattr__(self, name, value):
        if isinstance(value, Module):
            self.__dict__["_modules"][name] = value
        object.__setattr__(self, name, value)

    def add_optimizer(self, optimizer, *, lr_sch=None, is_sparse: bool = False) -> None:
        """Update ``optimizer``'s parameters inside the step (after ``build``, through its public
        ``functional_update``), then step ``lr_sch`` once per call."""
        if not hasattr(optimizer, "functional_update") or not hasattr(optimizer, "param_groups"):
            raise TypeError(f"add_optimizer expects an lf.optim optimizer, got {type(optimizer).__name__}")
        self._optimizers.append((optimizer, lr_sch))

    def build(self, *args, **kwargs):
        """The step, written as eager code; must return Tensors (or containers of them)."""
        raise NotImplementedError(f"{type(self).__name__} must define build()")

    def __call__(self, *args, **kwargs):
        return self._program(*args, **kwargs)

    def debug(self, v_level: int = 0, *, ranks=None, max_py_stack_depth: int = 2) -> None:
        """Print what gets compiled: 0 = off, 1 = compile events and timings, 2 = also the traced program (jaxpr),
        3 = also the optimized HLO text."""
        self._program._debug = int(v_level)

    def cache_info(self) -> GraphInfo:
        """Counters: traces, compiles, hits, live variants, and calls whose deferred index checks were read back."""
        info = self._program.cache_info()
        return GraphInfo(info.traces, info.compiles, info.hits, info.variants, info.checked)

    def __repr__(self) -> str:
        lines = [f"({type(self).__name__}:nn.Graph)"]
        for n, m in self._modules.items():
            lines.append(f"  (MODULE:{n}): " + repr(m).replace("\n", "\n  "))
        for i, (o, s) in enumerate(self._optimizers):
            lines.append(
                f"  (OPTIMIZER:{i}): {type(o).__name__} over {sum(len(g['params']) for g in o.param_groups)}"
                f" parameters" + (f", lr scheduler {type(s).__name__}" if s is not None else "")
            )
        lines.append(f"  (CONFIG): {self.config!r}")
        return "\n".join(lines)


def _micro(v, k, n):
    b = v.shape[0]
    if b % n:
        raise GraphError(f"gradient accumulation: batch size {b} is not divisible by {n} micro-batches")
    m = b // n
    return jax.lax.slice_in_dim(v, k * m, (k + 1) * m, axis=0)


def _mean_outputs(outs, where: str):
    """The micro-batches' results: floating tensors averaged, others from the last micro-batch."""
    per = [flatten_out(o, where) for o in outs]
    tree = per[0][1]
    vals = [
        None
        if v is None
        else traced(jnp.mean(jnp.stack([p[0][i] for p in per]), 0))
        if jnp.issubdtype(v.dtype, jnp.inexact)
        else traced(per[-1][0][i])
        for i, v in enumerate(per[0][0])
    ]
    return jax.tree_util.tree_unflatten(tree, vals)
