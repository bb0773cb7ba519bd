"""The one graph-mode pipeline: ``lf.compile`` runs on it directly, ``lf.nn.Graph`` through four hooks.

A compiled callable keeps a bounded LRU of *variants*, one per signature: the structure of the arguments, each
tensor argument's (shape, dtype, placement), Python arguments by value, the state tensors' metas, which of them
need gradients, the structure and array shapes of the auxiliary inputs, the train/eval flags of the module tree,
the mesh, the index-check switch and the default dtype. A call whose inputs match the last call's in every one of
these (compared field by field against a :class:`_Replay` record, most by identity) *replays* that variant without
building or hashing the key; anything that differs takes the keyed path. A variant is traced once through the op
table (:func:`.functionalize.trace_pure`) and jitted; parameters, buffers and tensors captured from outside are
*inputs* of the program (never constants), so eager updates, ``load_state_dict`` and optimizer steps are seen
without retracing. State written by the program comes
back as outputs and is written into the same tensor objects by one loop; the random-number offset advances by the
number of draws traced. With gradients enabled (``lf.compile``) the forward runs as one compiled ``jax.vjp`` and the
tape gets a single node whose backward is the compiled VJP of the whole forward. Index checks that need values
(a traced index out of range) are deferred (:mod:`lazyflow._core.checks`): a program that donates and recorded any
gets a second program, reduced to the checks' summary and the arrays it reads, which runs first; a failed check
raises eager's error before the step runs (nothing donated or written). A program that donates nothing (``lf.compile``,
with or without gradients) returns the summary beside its outputs, read after the call; a failed check writes
nothing back.

What a subclass adds (``lf.nn.Graph``: backward and the optimizers' ``functional_update`` inside the program):

* ``_state()``: its state tensors; the first ``n`` are *carried*: donated to the program and always written back (a
  buffer something else also references is donated as a copy, :func:`lazyflow._core.refs.owned`).
* ``_aux()``: ``(donated, kept)`` pytrees of arrays passed beside the state (optimizer state, hyperparameters).
* ``_body(call, arg_vals, donated, kept)``: runs inside the trace; returns ``(out, aux_out)``.
* ``_after(aux_out)``: stores ``aux_out`` once the program has run.
"""

from __future__ import annotations

import operator
import threading
import time
import warnings
from collections import OrderedDict, namedtuple
from typing import Any, cast

import jax
import jax.numpy as jnp
import numpy as np
from jax.extend.core import ClosedJaxpr, jaxpr_as_fun

from .._core.checks import failure, index_checks_enabled, summarize
from .._core.context import state
from .._core.dtypes import get_default_dtype
from .._core.errors import AutogradError, GraphError, NotSupportedError
from .._core.placement import sharding_of
from .._core.refs import owned
from .._creation import default_generator
from .._tensor import Tensor, _make, _meta_of, _publish
from ..autograd.node import Node
from ..distributed.groups import group_of
from ..distributed.program import SpmdProgram
from ..distributed.traced import NeedsSpmd, spmd_summary
from .dynamic import NotRowLocal, bucket, cut_rows, pad_rows, probe_sizes, prune, row_axes
from .functionalize import rng_inputs, trace_pure, wrap_args
from .host_eval import HostCheck, host_checker
from .mesh_config import MeshConfig

__all__ = ["CompileInfo", "CompiledFunction"]

CompileInfo = namedtuple("CompileInfo", "traces compiles hits variants fallbacks checked")
# Donation is an optimisation asked for whenever it is safe; XLA declining it for a buffer is not the user's concern
# (and filtering per call would cost more than the dispatch), so this one message is silenced once.
warnings.filterwarnings("ignore", message="Some donated buffers were not usable")
_PY_SCALARS = frozenset((float, int, bool, complex))
_NO_AUX = (None, None)
_NO_REPLAY_AUX = ([], [], None, [])  # never mutated (the pipeline builds new lists)
_NO_STATE: list = []  # a plain function's own state: none (one list, so that calls can compare it by identity)
_RETRY = object()  # _run: the call must run again (see there)
_MISS = object()  # _replay_call: the last call's variant does not apply, take the keyed path
_meta_of_t = operator.attrgetter("_meta")
_rg_of_t = operator.attrgetter("_rg")
_value_of_t = operator.attrgetter("_value")

_is_tensor = lambda x: isinstance(x, Tensor)


_FLAT_TREES: dict = {}


def _flat_tree(n: int):
    """The structure ``tree_flatten`` gives ``((t1, ..., tn), {})`` for ``n`` tensors (cached per ``n``)."""
    tree = _FLAT_TREES.get(n)
    if tree is None:
        tree = _FLAT_TREES[n] = jax.tree_util.tree_structure(((0,) * n, {}))
    return tree


def _leaf_key(x):
    if isinstance(x, Tensor):
        return x._meta
    try:
        hash(x)
    except TypeError:
        return ("id", id(x))
    return ("py", type(x), x)


class _IdSet:
    def __init__(self, items):
        self._ids = {id(t) for t in items}

    def __contains__(self, t):
        return id(t) in self._ids


def _aux_key(a):
    return type(a) if type(a) in _PY_SCALARS else (a.shape, a.dtype)


def _rows(leaves):
    """The common first dimension of the tensor arguments (``None``: no tensors, a 0-d one, or sizes differ)."""
    n = None
    for x in leaves:
        if isinstance(x, Tensor):
            shape = x._meta[0]
            if not shape or (n is not None and shape[0] != n):
                return None
            n = shape[0]
    return n if n else None


class _Family:
    """``dynamic=True``: one signature modulo the batch size -- its outputs' batch axes once proved row-local
    (``None``: not provable, ``reason`` says why) and the batch sizes compiled for it."""

    __slots__ = ("axes", "reason", "sizes", "wasteful")

    def __init__(self):
        self.axes: list | None = None
        self.reason: str | None = None
        self.sizes: set[int] = set()
        self.wasteful: dict[int, int] = {}  # batch size -> calls padded to more than twice its rows


class _Variant:
    __slots__ = (
        "kernel",
        "fwd",
        "bwd",
        "out_tree",
        "out_metas",
        "n_rng",
        "written",
        "info",
        "n_carry",
        "diff",
        "connect",
        "donates",
        "messages",
        "check",
    )

    def __init__(self, n_carry, diff, connect, donates):
        self.kernel = self.fwd = self.bwd = self.check = None
        self.out_tree = self.out_metas = None
        self.messages = ()  # the deferred checks' (message, error); empty: the program has no check output
        self.n_rng = 0
        self.written = ()
        self.info = None
        self.n_carry, self.diff, self.connect, self.donates = n_carry, diff, connect, donates


class _CallEntry:
    """The tape entry of one compiled call: backward is the compiled VJP with residuals from this call."""

    __slots__ = ("variant", "vjp_fn", "diff", "name")

    def __init__(self, variant, vjp_fn, n):
        self.variant, self.vjp_fn = variant, vjp_fn
        self.diff = tuple(range(n))
        self.name = "compiled"

    def bwd_call(self, vals, gs, diff=None):
        return self.variant.bwd(self.vjp_fn, list(gs))

    def bwd_op(self, diff=None):
        raise AutogradError(
            "create_graph=True (double backward) through an lf.compile'd call is not supported; "
            "differentiate the eager module instead"
        )


class _Replay:
    """What the last call's variant was chosen by, in the form a call can compare cheaply (lists compared with
    ``==``: identity first, element by element, in C). A call that matches every field runs that variant without
    building and hashing the key (:meth:`CompiledFunction._replay_call`)."""

    __slots__ = (
        "v",
        "key",
        "tree",
        "leaf_keys",
        "arg_rg",
        "grad",
        "checks",
        "dtype",
        "own",
        "lifted",
        "all_state",
        "metas",
        "rg",
        "extra",
        "k_tree",
        "k_keys",
    )


class CompiledFunction:
    """A compiled plain function of tensors (see :func:`lazyflow.compile`), and the pipeline every compiled
    program runs on (see the module docstring)."""

    _trace_grad = False  # True: the traced code records its own tape (nn.Graph calls backward inside the program)

    def __init__(
        self,
        fn,
        *,
        cache_size_limit: int = 8,
        recompile_limit: int | None = 8,
        on_recompile_limit: str = "eager",
        name: str | None = None,
        where: str | None = None,
        dynamic: bool | None = None,
    ):
        if on_recompile_limit not in ("eager", "raise"):
            raise ValueError(f"on_recompile_limit must be 'eager' or 'raise', got {on_recompile_limit!r}")
        for nm, v in (("cache_size_limit", cache_size_limit), ("recompile_limit", recompile_limit)):
            if not (isinstance(v, int) and v >= 1) and not (v is None and nm == "recompile_limit"):
                raise ValueError(f"{nm} must be a positive int, got {v!r}")
        self._fn = fn
        self._name = name or getattr(fn, "__qualname__", type(fn).__name__)
        self._where = where or f"lf.compile({self._name})"
        self._variants: OrderedDict = OrderedDict()
        self._limit = cache_size_limit
        self._recompile_limit = recompile_limit
        self._on_limit = on_recompile_limit
        self._traces = self._compiles = self._hits = self._fallbacks = 0
        self._checked = 0  # calls whose deferred index checks were read back on the host
        self._warned = False
        self._last_key = None
        self._replay: _Replay | None = None  # the last call's variant and what chose it
        self._lifted: list[Tensor] = []  # tensors captured from outside, lifted to inputs
        self._debug = 0
        self.__wrapped__ = fn
        self.__doc__ = getattr(fn, "__doc__", None)
        self.config = MeshConfig()  # .data_parallel(mesh, axis) / .shard_parameters(mesh, axis)
        if dynamic not in (None, False, True):
            raise ValueError(f"dynamic must be None, False or True, got {dynamic!r}")
        self._dynamic = bool(dynamic)
        self._families: OrderedDict = OrderedDict()  # dynamic=True: signature modulo batch size -> _Family
        self._spmd = False  # the program calls collectives: it runs as a shard_map over every process

    # -- hooks (see the module docstring); CompiledModule overrides the state ones, nn.Graph all of them
    def _state(self) -> tuple[list[Tensor], int]:
        """The program's own state tensors (no duplicates) and how many leading ones are carried. The same list
        object while nothing changed (a replayed call compares it by identity); never mutated by the pipeline."""
        return _NO_STATE, 0

    def _aux(self):
        """``(donated, kept)`` array pytrees. A donated leaf referenced by more than its owner's slot and the
        container built here is donated as a copy."""
        return _NO_AUX

    def _body(self, call, arg_vals, donated, kept):
        """Inside the trace: ``call(arg_vals)`` runs the user's function on traced arguments."""
        return call(arg_vals), None

    def _after(self, aux_out) -> None:
        """After the program ran and the state was written back."""

    def _extra_key(self):
        return ()

    def _param_set(self):
        """Identity set of the state tensors that are parameters (sharded by shard_parameters)."""
        return _IdSet(())

    def _eager_call(self, args, kwargs):
        return self._fn(*args, **kwargs)

    def cache_info(self) -> CompileInfo:
        """Counters: traces, compiles (XLA programs built), hits, live variants, eager fallbacks, and calls whose
        deferred index checks were read back (a program without traced indexing has none)."""
        return CompileInfo(
            self._traces, self._compiles, self._hits, len(self._variants), self._fallbacks, self._checked
        )

    def __call__(self, *args, **kwargs):
        if state.tracing:  # nested inside another trace: just inline
            return self._eager_call(args, kwargs)
        if not kwargs and all(map(_is_tensor, args)):  # the common call: tensors only, no pytree walk
            leaves, tree = list(args), _flat_tree(len(args))
        else:
            leaves, tree = jax.tree_util.tree_flatten((args, kwargs), is_leaf=_is_tensor)
        if self._dynamic and self.config.mesh is None and not self._spmd:
            n = _rows(leaves)
            if n is not None:
                return self._dynamic_call(args, kwargs, leaves, tree, n)
        return self._call(args, kwargs, leaves, tree)

    def _dynamic_call(self, args, kwargs, leaves, tree, n):
        """``dynamic=True``: run the program compiled for the smallest size that holds ``n`` rows on padded
        arguments and cut the outputs back, where the program is proved row-local (:mod:`.dynamic`)."""
        fkey = (
            tree,
            tuple(
                (x._meta[0][1:], x._meta[1], x._meta[2], x._rg) if isinstance(x, Tensor) else _leaf_key(x)
                for x in leaves
            ),
            tuple(t._meta for t in self._state()[0]),
            self._extra_key(),
            state.grad_enabled,
            index_checks_enabled(),
        )
        fam = self._families.get(fkey)
        if fam is None:
            fam = self._families[fkey] = self._prove(leaves, tree)
            if len(self._families) > self._limit:
                self._families.popitem(last=False)
        if fam.axes is None:
            return self._call(args, kwargs, leaves, tree)
        p = bucket(fam.sizes, n, fam.wasteful.get(n, 0))
        if p > 2 * n:
            fam.wasteful[n] = fam.wasteful.get(n, 0) + 1
        if p != n:
            leaves = [pad_rows(x, p) if isinstance(x, Tensor) else x for x in leaves]
            args, kwargs = jax.tree_util.tree_unflatten(tree, leaves)
        out = self._call(args, kwargs, leaves, tree)
        fam.sizes.add(p)
        if p == n:
            return out
        outs, otree = jax.tree_util.tree_flatten(out, is_leaf=lambda x: x is None or isinstance(x, Tensor))
        axes = iter(fam.axes)
        cut = []
        for o in outs:
            ax = next(axes) if isinstance(o, Tensor) else None
            cut.append(cut_rows(o, ax[0], n * ax[1]) if ax is not None else o)
        return jax.tree_util.tree_unflatten(otree, cut)

    def _prove(self, leaves, tree) -> _Family:
        """Trace (no compile) at two probe batch sizes and prove every output row depends on its own input row
        only; on failure warn once, naming why, and compile each batch size exactly."""
        fam = _Family()
        own, n_carry = self._state()
        all_state = own + self._lifted if self._lifted else own
        tensors = [x for x in leaves if isinstance(x, Tensor)]
        b1 = None
        try:
            if n_carry or self._aux() is not _NO_AUX:
                raise NotRowLocal("a training step updates state from the whole batch")
            b1, b2 = probe_sizes({d for t in all_state for d in t.shape} | {d for x in tensors for d in x.shape[1:]})
            seed, offset = rng_inputs()
            traced = []
            for b in (b1, b2):
                v = _Variant(0, None, False, False)
                self._build(v, tree, leaves, all_state)
                arg_vals = [jax.ShapeDtypeStruct((b, *x.shape[1:]), x._value.dtype) for x in tensors]
                kernel: Any = v.kernel
                jx = kernel.trace([], [t._value for t in all_state], [], [], arg_vals, seed, offset).jaxpr
                traced.append((jx, v.info))
            (j1, i1), (j2, i2) = traced
            if i1["n_rng"] != i2["n_rng"]:
                raise NotRowLocal("the number of random draws depends on the batch size")
            n_out, n_written, summary = len(j1.out_avals), len(i1["written"]), bool(i1["messages"])
            axes = row_axes(j1, j2, b1, b2, [True] * (n_out - summary) + [False] * summary)
            if any(a is not None for a in axes[:n_written]):
                raise NotRowLocal("the program writes state with a batch axis")
            fam.axes = axes[n_written:]
        except NotRowLocal as e:
            fam.reason = str(e)
        except NeedsSpmd:  # compiled per batch size, like any program with collectives
            self._spmd = True
            fam.reason = "it calls collectives"
            return fam
        except Exception as e:  # the function does not trace at another batch size (shape asserts, ...)
            fam.reason = f"it does not trace at batch size {b1} ({type(e).__name__}: {e})"
        if fam.reason is not None:
            warnings.warn(
                f"lf.compile({self._name}, dynamic=True): each batch size is compiled on its own, since padding "
                f"the batch could change results: {fam.reason}",
                stacklevel=4,
            )
        return fam

    def _call(self, args, kwargs, leaves, tree):
        r = self._replay
        if r is not None:
            out = self._replay_call(r, leaves, tree)
            if out is not _MISS:
                return out
        self._replay = None
        own, n_carry = self._state()
        lifted = self._lifted
        all_state = own + lifted if lifted else own
        if self.config.mesh is not None:
            ps = self._param_set()
            leaves = self.config._place([t for t in own if t in ps], [t for t in all_state if t not in ps], leaves)
        aux = self._aux()
        if aux is _NO_AUX:
            d_leaves, d_tree, k_leaves, k_tree = [], None, [], None
        else:
            d_leaves, d_tree = jax.tree_util.tree_flatten(aux[0])
            k_leaves, k_tree = jax.tree_util.tree_flatten(aux[1])
        del aux
        tensor_leaves = [x for x in leaves if isinstance(x, Tensor)]
        connect = False
        if self._trace_grad or state.grad_enabled:
            diff = (
                tuple(i for i, t in enumerate(all_state) if t._rg),
                () if self._trace_grad else tuple(i for i, t in enumerate(tensor_leaves) if t._rg),
            )
            connect = not self._trace_grad and bool(diff[0] or diff[1])
        else:
            diff = None
        leaf_keys = [_leaf_key(x) for x in leaves]
        extra = self._extra_key()
        k_keys = [_aux_key(a) for a in k_leaves]
        key = (
            tree,
            tuple(leaf_keys),
            (n_carry, tuple(t._meta for t in all_state)),
            (diff, connect),
            extra,
            (d_tree, k_tree, tuple(_aux_key(a) for a in d_leaves), tuple(k_keys)),
            self.config._mesh_key(),
            index_checks_enabled(),
            self._spmd,
            get_default_dtype(),
        )
        if self._spmd:
            self._check_spmd(connect)
        donates = bool(n_carry or d_leaves) and not self._spmd  # (shard_map programs donate nothing)
        v = self._variants.get(key)
        if v is None:
            v = self._new_variant(
                key, tree, leaves, all_state, (d_tree, k_tree), _Variant(n_carry, diff, connect, donates)
            )
            if v is None:
                self._fallbacks += 1
                return self._eager_call(args, kwargs)
        else:
            self._variants.move_to_end(key)
            self._hits += 1
        try:
            out = self._run(v, tensor_leaves, all_state, d_leaves, k_leaves, d_tree is not None)
        except NeedsSpmd:
            if self._spmd:
                raise
            # the trace met a collective: trace again as a shard_map over every process (nothing ran yet)
            self._spmd = True
            self._variants.pop(key, None)
            self._compiles -= 1
            return self._call(args, kwargs, leaves, tree)
        if out is _RETRY:  # captured tensors that need gradients are inputs now: run the call again with them
            return self._call(args, kwargs, leaves, tree)
        if self.config.mesh is None and not self._spmd and key in self._variants:
            r = _Replay()
            r.v, r.key, r.tree, r.leaf_keys = v, key, tree, leaf_keys
            r.arg_rg = [x._rg for x in tensor_leaves] if (state.grad_enabled and not self._trace_grad) else None
            r.grad, r.checks, r.dtype = state.grad_enabled, index_checks_enabled(), get_default_dtype()
            r.own, r.lifted, r.all_state = own, lifted, all_state
            r.metas, r.rg = list(map(_meta_of_t, all_state)), list(map(_rg_of_t, all_state))
            r.extra, r.k_tree, r.k_keys = extra, k_tree, k_keys
            self._replay = r
        return out

    # -- replay: the last call's variant, when nothing that chose it changed
    def _replay_aux(self):
        """``(donated leaves, kept leaves, kept structure, kept leaves' keys)`` for a replayed call, or ``None`` when
        that cannot be told cheaply (the keyed path then runs). The base class has no auxiliary inputs
        (nn.Graph overrides it)."""
        return _NO_REPLAY_AUX

    def _replay_after(self, aux_leaves) -> None:
        """``_after`` for a replayed call, given the program's flat auxiliary outputs."""

    def _replay_call(self, r: _Replay, leaves, tree):
        """Run the last call's variant if every input of its key is unchanged: the argument structure and metas,
        grad mode, index-check switch, default dtype, the state list (same tensors, metas, requires_grad),
        ``_extra_key`` (train/eval flags, Graph config), and the auxiliary inputs' structure. Anything else:
        ``_MISS``."""
        if (
            tree != r.tree
            or state.grad_enabled is not r.grad
            or index_checks_enabled() is not r.checks
            or get_default_dtype() is not r.dtype
            or self.config.mesh is not None
        ):
            return _MISS
        own, _ = self._state()
        if own is not r.own or self._lifted is not r.lifted:
            return _MISS
        all_state = r.all_state
        if list(map(_meta_of_t, all_state)) != r.metas or list(map(_rg_of_t, all_state)) != r.rg:
            return _MISS
        if [x._meta if isinstance(x, Tensor) else _leaf_key(x) for x in leaves] != r.leaf_keys:
            return _MISS
        tensor_leaves = [x for x in leaves if isinstance(x, Tensor)]
        if r.arg_rg is not None and list(map(_rg_of_t, tensor_leaves)) != r.arg_rg:
            return _MISS
        if self._extra_key() != r.extra:
            return _MISS
        aux = self._replay_aux()
        if aux is None:
            return _MISS
        d_leaves, k_leaves, k_tree, k_keys = aux
        del aux
        if k_tree != r.k_tree or k_keys != r.k_keys:
            return _MISS
        self._hits += 1
        return self._run(r.v, tensor_leaves, all_state, d_leaves, k_leaves, k_tree is not None, replay=True)

    def _check_spmd(self, connect: bool) -> None:
        if self.config.mesh is not None:
            raise NotSupportedError(
                f"{self._where} calls collectives and also has config.data_parallel/shard_parameters: use one of "
                "the two (explicit collectives run the program once per process, over every process)"
            )
        if connect:
            raise NotSupportedError(
                f"{self._where} calls collectives and its outputs need gradients: lf.compile cannot carry a "
                "backward through collectives out of the call; call it under lf.no_grad(), or put the backward "
                "inside the compiled step (lf.nn.Graph, where DistributedDataParallel averages the gradients)"
            )

    def _new_variant(self, key, tree, leaves, all_state, aux_trees, v):
        if self._recompile_limit is not None and self._compiles >= self._recompile_limit:
            what = _what_changed(self._last_key, key)
            if not self._warned:
                self._warned = True
                warnings.warn(
                    f"lf.compile({self._name}): recompile limit ({self._recompile_limit}) reached; "
                    f"{what}. "
                    + ("Running eagerly from now on for new signatures." if self._on_limit == "eager" else ""),
                    stacklevel=3,
                )
            if self._on_limit == "raise":
                raise GraphError(
                    f"lf.compile({self._name}): recompile limit ({self._recompile_limit}) reached; "
                    f"{what}; raise the limit with lf.compile(..., recompile_limit=N)"
                )
            return None
        self._build(v, tree, leaves, all_state, aux_trees)
        self._compiles += 1
        self._last_key = key
        self._variants[key] = v
        if len(self._variants) > self._limit:
            self._variants.popitem(last=False)
        return v

    def _build(self, v, tree, leaves, all_state, aux_trees=(None, None)):
        """Trace-on-first-call programs for ``v``. The auxiliary inputs travel as flat leaf lists (``aux_trees``:
        their structures, part of the key) and the auxiliary outputs come back flat (``info["aux_tree"]``)."""
        fn, body, where = self._fn, self._body, self._where
        d_tree, k_tree = aux_trees
        info = {}
        readonly = {id(t) for t in self._lifted}
        n_carry, n_state = v.n_carry, len(all_state)
        checks_on = index_checks_enabled()
        spmd = self._spmd
        shardings = None
        if self.config.mesh is not None:  # keep every piece of state where it lives: no drift, no recompiles
            shardings = [sharding_of(t._meta[2]) for t in all_state]

        def call(arg_vals):
            args, kwargs = jax.tree_util.tree_unflatten(tree, wrap_args(leaves, arg_vals))
            return fn(*args, **kwargs)

        def pure(state_vals, d_leaves, k_leaves, arg_vals, seed, offset):
            self._traces += 1
            donated = None if d_tree is None else jax.tree_util.tree_unflatten(d_tree, d_leaves)
            kept = None if k_tree is None else jax.tree_util.tree_unflatten(k_tree, k_leaves)
            out_vals, out_tree, new_state, n_rng, captured, aux_out, deferred = trace_pure(
                lambda: body(call, arg_vals, donated, kept),
                all_state,
                readonly,
                state_vals,
                seed,
                offset,
                grad=self._trace_grad,
                where=where,
                checks=checks_on,
            )
            written = tuple(range(n_carry)) + tuple(
                i
                for i in range(n_carry, n_state)
                if id(all_state[i]) not in readonly and new_state[i] is not state_vals[i]
            )
            new = [new_state[i] for i in written]
            aux_leaves, aux_tree = jax.tree_util.tree_flatten(aux_out)
            summary = None
            folded = False
            if deferred:
                # read on the host after the call: a failed check writes nothing back (torch raises before
                # updating anything). A program that donates gets a separate check program instead, run first
                # (see _run): selecting the old values into its donated outputs where a check failed makes XLA
                # copy the optimizer state every step (the parameter update rereads the old state), which costs
                # more than the check program (BENCHMARKS.md, session 7 overhead helper)
                _, summary = summarize(deferred)
                if spmd:  # every rank raises the first failing rank's error, or none does (nothing is donated)
                    summary = spmd_summary(summary)
                    folded = True
                else:
                    folded = not v.donates
            if shardings is not None:
                new = [
                    jax.lax.with_sharding_constraint(x, shardings[i]) if shardings[i] is not None else x
                    for i, x in zip(written, new)
                ]
            info.update(
                folded=folded,
                aux_tree=aux_tree,
                out_tree=out_tree,
                n_rng=n_rng,
                written=written,
                captured=captured,
                messages=tuple((c.message, c.error) for c in deferred),
            )
            return out_vals, (new, aux_leaves, summary)

        def kernel(carried, rest, donated, kept, arg_vals, seed, offset):
            out_vals, (new, aux_out, summary) = pure(list(carried) + list(rest), donated, kept, arg_vals, seed, offset)
            # donated outputs first, in the donated inputs' order: JAX pairs each output with the first unused
            # donated input of its shape, so every buffer is updated where it lives
            return new[:n_carry], aux_out, new[n_carry:], out_vals, summary

        if spmd:
            v.kernel = SpmdProgram(kernel, group_of(None, where), where)
        else:
            v.kernel = jax.jit(kernel, donate_argnums=(0, 2) if v.donates else ())
        v.info = info
        if v.connect:
            ds, da = v.diff

            def fwd(dvals, state_vals, donated, kept, arg_vals, seed, offset):
                def f(d):
                    sv, av = list(state_vals), list(arg_vals)
                    for j, i in enumerate(ds):
                        sv[i] = d[j]
                    for j, i in enumerate(da):
                        av[i] = d[len(ds) + j]
                    return pure(sv, donated, kept, av, seed, offset)

                outs, vjp_fn, (new, aux_out, summary) = jax.vjp(f, dvals, has_aux=True)
                return outs, new, aux_out, vjp_fn, summary

            v.fwd = jax.jit(fwd)

    def _run(self, v, tensor_leaves, all_state, d_leaves, k_leaves, has_aux, replay=False):
        """Run variant ``v``: ``d_leaves``/``k_leaves`` are the donated/kept auxiliary inputs, flat (the caller's
        lists hold the only other reference to each donated array besides its owner)."""
        arg_vals = list(map(_value_of_t, tensor_leaves))
        seed, offset = rng_inputs()
        first = v.out_tree is None
        t0 = time.perf_counter()
        diff_tensors = None
        if v.connect:
            diff_tensors = [all_state[i] for i in v.diff[0]] + [tensor_leaves[i] for i in v.diff[1]]
            outs, new, aux_out, vjp_fn, summary = v.fwd(
                list(map(_value_of_t, diff_tensors)),
                list(map(_value_of_t, all_state)),
                d_leaves,
                k_leaves,
                arg_vals,
                seed,
                offset,
            )
            if v.bwd is None:
                v.bwd = _make_bwd(outs)
        else:
            n = v.n_carry
            rest = list(map(_value_of_t, all_state[n:]))
            if v.donates:  # a buffer something else holds (an alias, a snapshot...) is donated as a copy
                carried = owned(list(map(_value_of_t, all_state[:n])))
                donated = owned(d_leaves)
            else:
                carried = list(map(_value_of_t, all_state[:n]))
                donated = d_leaves
            del d_leaves
            call_args = (carried, rest, donated, k_leaves, arg_vals, seed, offset)
            spmd = isinstance(v.kernel, SpmdProgram)
            later = None
            if first and v.check is None and not spmd:
                traced = v.kernel.trace(*call_args)  # the trace says whether the program checks values
                if v.info["messages"] and not v.info["folded"]:
                    v.check = _check_program(traced.jaxpr)
                    step = _without_summary(traced)
                    if step is not None:  # the check program computes the summary: the step need not
                        v.kernel = step
                        traced = step.trace(*call_args)
                    flat = carried + rest + donated + k_leaves + arg_vals + [seed, offset]
                    if isinstance(v.check[0], HostCheck):  # checked with numpy now: the step compiles alone
                        later = v.check[0].signature([flat[i] for i in v.check[1]])
                    else:
                        _compile_both(traced, v.check[0], [flat[i] for i in v.check[1]])
                    del flat
                del traced
            if v.check is not None:
                # a program that donates: a program of the checks alone (XLA drops the rest, and the call passes
                # only the arrays it reads) runs first, so a failed check raises before anything is donated or
                # changed -- torch raises before updating anything too
                self._checked += 1
                run, inputs = v.check
                flat = carried + rest + donated + k_leaves + arg_vals
                flat.append(seed)
                flat.append(offset)
                error = failure(v.info["messages"], run(*[flat[i] for i in inputs]))
                del flat
                if error is not None:
                    raise error
            del carried, rest, donated
            if first and self._debug >= 2:
                self._print_program(v.kernel, call_args)
            new, aux_out, rest_new, outs, summary = v.kernel(*call_args)
            if later is not None:  # the step has compiled: the check program's turn, in the background
                cast(HostCheck, cast(tuple, v.check)[0]).compile_in_background(later)
            if v.check is not None:
                summary = None  # read above
            del call_args
            new += rest_new
        if first:
            info = v.info
            v.out_tree, v.n_rng, v.written, v.messages = (
                info["out_tree"],
                info["n_rng"],
                info["written"],
                info["messages"],
            )
            v.out_metas = [None if o is None else _meta_of(o) for o in outs]
            if self._debug:
                print(
                    f"[{self._where}] traced and compiled variant #{self._compiles} in {time.perf_counter() - t0:.3f} s"
                    + (f", {len(v.messages)} deferred index checks" if v.messages else "")
                )
            captured = [t for t in info["captured"].values() if all(t is not s for s in all_state)]
            if captured:
                # this call ran with the captured values baked in (correct now); lift them to inputs from now on
                self._lifted = self._lifted + captured
                self._variants.clear()
                if state.grad_enabled and not self._trace_grad and any(t._rg for t in captured):
                    # but its outputs carry no gradient to them: nothing was written back yet, so run it again
                    return _RETRY
        if summary is not None:
            self._checked += 1
            error = failure(v.messages, summary)
            if error is not None:  # nothing written back, no optimizer state loaded, no RNG offset advanced
                raise error
        for i, val in zip(v.written, new):
            t = all_state[i]
            t._value = val
            t._version += 1
            if t._peers is not None:  # detach()/.data aliases the user holds see the step (as in torch)
                _publish(t)
        if v.n_rng:
            default_generator._offset += v.n_rng
        if replay:
            self._replay_after(aux_out)
        elif has_aux:
            self._after(jax.tree_util.tree_unflatten(v.info["aux_tree"], aux_out))
        else:
            self._after(None)
        res = [None if o is None else _make(o, m) for o, m in zip(outs, v.out_metas)]
        if diff_tensors is not None:
            entry = _CallEntry(v, vjp_fn, len(diff_tensors))
            tnode = Node(entry, tuple(diff_tensors), tuple(t._version for t in diff_tensors), len(res))
            for i, t in enumerate(res):
                if t is not None and t._meta[1].is_inexact:
                    t._rg, t._node, t._oidx = True, tnode, i
        return jax.tree_util.tree_unflatten(v.out_tree, res)

    def _print_program(self, kernel, call_args) -> None:
        traced = kernel.trace(*call_args)
        print(f"[{self._where}] traced program:\n{traced.jaxpr}")
        if self._debug >= 3:
            print(f"[{self._where}] optimized HLO:\n{traced.lower().compile().as_text()}")


def _compile_both(traced, check_run, check_args) -> None:
    """Compile a first call's two programs at once: the checks in a thread while this thread compiles the step
    (XLA compiles without holding the GIL), so the first call waits for the longer one, not the sum. Both land in
    the programs' own jit caches, where the calls that follow find them. Best effort: a failure here is left to the
    calls that follow, which compile again and raise as they always do. (A check of small integer inputs,
    ``host_eval.HostCheck``, does not come here: the first call checks with numpy, and its program compiles after
    the step.)"""

    def checks():
        try:
            check_run.lower(*check_args).compile()
        except Exception:  # the real call below recompiles and raises
            pass

    worker = threading.Thread(target=checks, name="lazyflow-check-compile", daemon=True)
    worker.start()
    try:
        traced.lower().compile()
    except Exception:  # the real call recompiles and raises
        pass
    finally:
        worker.join()


def _without_summary(traced):
    """The donating step (traced as ``traced``) without its last output, the checks' summary, which its
    check program computes before it runs: the same arguments, donations and outputs (None for the summary), and
    none of the summary's reductions in the step (an MLP step: 7 of its 41 kernels, i.e. compile time and a few
    microseconds per call). None where JAX cannot prune a jaxpr (the step keeps computing the summary)."""
    closed = traced.jaxpr
    n_out = len(closed.jaxpr.outvars)
    pruned = prune(closed.jaxpr, [True] * (n_out - 1) + [False])
    if pruned is None:
        return None
    fn = jaxpr_as_fun(ClosedJaxpr(pruned[0], closed.consts))
    out_tree = jax.tree_util.tree_structure(traced.out_info)

    def step(*args):
        return jax.tree_util.tree_unflatten(out_tree, [*fn(*jax.tree_util.tree_leaves(args)), None])

    step.__name__ = step.__qualname__ = "kernel"
    return jax.jit(step, donate_argnums=(0, 2))  # as the kernel's (a check program exists for donating steps only)


def _check_program(closed_jaxpr):
    """The traced program reduced to its last output, the deferred checks' summary: ``(run, inputs)``, where
    ``run(*[leaves[i] for i in inputs])`` computes the summary from the call's flattened arguments. Dead code and
    unused inputs are removed (JAX's jaxpr DCE; without it, XLA's), so what runs is the index reductions and whatever
    computes the indices, and the call passes only the arrays they read."""
    jaxpr = closed_jaxpr.jaxpr
    inputs = list(range(len(jaxpr.invars)))
    last = -1  # without pruning: the whole program's inputs, XLA removes the dead code
    pruned = prune(jaxpr, [False] * (len(jaxpr.outvars) - 1) + [True], all_inputs=False)
    if pruned is not None:
        closed_jaxpr = ClosedJaxpr(pruned[0], closed_jaxpr.consts)
        inputs = [i for i, u in enumerate(pruned[1]) if u]
        last = 0
    fn = jaxpr_as_fun(closed_jaxpr)

    def compiled():
        return jax.jit(lambda *flat: fn(*flat)[last])

    if pruned is not None:  # checks of a few small integer inputs: numpy until the program compiled (host_eval)
        host = host_checker(closed_jaxpr, compiled)
        if host is not None:
            return host, inputs
    return compiled(), inputs


def _make_bwd(outs):
    shapes = [None if o is None else (o.shape, o.dtype) for o in outs]

    def bwd(vjp_fn, cts):
        full = []
        for c, sd in zip(cts, shapes):
            if sd is None:
                full.append(None)
            elif not jnp.issubdtype(sd[1], jnp.inexact):
                full.append(np.zeros(sd[0], jax.dtypes.float0))
            elif c is None:
                full.append(jnp.zeros(sd[0], sd[1]))
            else:
                full.append(c)
        return tuple(vjp_fn(full)[0])

    return jax.jit(bwd)


def _what_changed(old, new) -> str:
    if old is None:
        return "a new input signature appeared"
    if old[0] != new[0]:
        return "the structure of the arguments changed"
    for i, (a, b) in enumerate(zip(old[1], new[1])):
        if a != b:
            if isinstance(a, tuple) and len(a) == 3 and not isinstance(a[0], str):
                return f"tensor argument {i} changed from shape {list(a[0])}/{a[1].name} to {list(b[0])}/{b[1].name}"
            return f"argument {i} changed from {a[-1]!r} to {b[-1]!r}"
    if old[2] != new[2]:
        return "a parameter/buffer changed shape or dtype"
    if old[3] != new[3]:
        return "gradient mode / requires_grad changed"
    if old[4] != new[4]:
        return "the module switched between train and eval"
    return "the input signature changed"
