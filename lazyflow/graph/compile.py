"""``lf.compile``: run a function or module as one compiled XLA program per input signature.

A compiled callable keeps a bounded LRU of *variants*, one per signature: the structure of the arguments, each
tensor argument's (shape, dtype, placement), Python arguments by value, the train/eval flags of the module tree,
the state tensors' metas, and which inputs need gradients. A variant is traced once through the op table and
jitted; parameters, buffers and tensors captured from outside are *inputs* of the program (never constants), so
eager updates, ``load_state_dict`` and optimizer steps are seen without retracing. Buffers written in forward are
program outputs written back into the same tensor objects. With gradients enabled the forward runs as one
compiled ``jax.vjp`` and the tape gets a single node whose backward is the compiled VJP of the whole forward.
"""

from __future__ import annotations

import warnings
from collections import OrderedDict, namedtuple

import jax
import jax.numpy as jnp
import numpy as np

from .._core.context import state
from .._core.errors import AutogradError, GraphError
from .._creation import default_generator
from .._tensor import Tensor, _make, _meta_of
from ..autograd.node import Node
from .functionalize import rng_inputs, trace_pure
from .mesh_config import MeshConfig

__all__ = ["CompileInfo", "CompiledFunction", "compile_function"]

CompileInfo = namedtuple("CompileInfo", "traces compiles hits variants fallbacks")

_is_tensor = lambda x: isinstance(x, Tensor)  # noqa: E731


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


class _Variant:
    __slots__ = ("kernel", "fwd", "bwd", "out_tree", "out_metas", "n_rng", "written", "info", "state_tensors",
                 "diff_state", "diff_args")

    def __init__(self):
        self.kernel = self.fwd = self.bwd = None
        self.out_tree = self.out_metas = None
        self.n_rng = 0
        self.written = ()
        self.info = None


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
        raise AutogradError("create_graph=True (double backward) through an lf.compile'd call is not supported; "
                            "differentiate the eager module instead")


class CompiledFunction:
    """A compiled plain function of tensors (see :func:`lazyflow.compile`)."""

    def __init__(self, fn, *, cache_size_limit: int = 8, recompile_limit: int = 8,
                 on_recompile_limit: str = "eager", name: str | None = None):
        if on_recompile_limit not in ("eager", "raise"):
            raise ValueError(f"on_recompile_limit must be 'eager' or 'raise', got {on_recompile_limit!r}")
        for nm, v in (("cache_size_limit", cache_size_limit), ("recompile_limit", recompile_limit)):
            if not isinstance(v, int) or v < 1:
                raise ValueError(f"{nm} must be a positive int, got {v!r}")
        self._fn = fn
        self._name = name or getattr(fn, "__qualname__", type(fn).__name__)
        self._variants: OrderedDict = OrderedDict()
        self._limit = cache_size_limit
        self._recompile_limit = recompile_limit
        self._on_limit = on_recompile_limit
        self._traces = self._compiles = self._hits = self._fallbacks = 0
        self._warned = False
        self._last_key = None
        self._lifted: list[Tensor] = []  # tensors captured from outside, lifted to inputs
        self.__wrapped__ = fn
        self.__doc__ = getattr(fn, "__doc__", None)
        self.config = MeshConfig()  # .data_parallel(mesh, axis) / .shard_parameters(mesh, axis)

    # -- hooks overridden by CompiledModule
    def _state_tensors(self):
        return []

    def _extra_key(self):
        return ()

    def _param_set(self):
        """Identity set of the state tensors that are parameters (sharded by shard_parameters)."""
        return _IdSet(())

    def _eager_call(self, args, kwargs):
        return self._fn(*args, **kwargs)

    def cache_info(self) -> CompileInfo:
        """Counters: traces, compiles (XLA programs built), hits, live variants, eager fallbacks."""
        return CompileInfo(self._traces, self._compiles, self._hits, len(self._variants), self._fallbacks)

    def __call__(self, *args, **kwargs):
        if state.tracing:  # nested inside another trace: just inline
            return self._eager_call(args, kwargs)
        leaves, tree = jax.tree_util.tree_flatten((args, kwargs), is_leaf=_is_tensor)
        own = self._state_tensors()
        lifted = self._lifted
        all_state = own + lifted if lifted else own
        if self.config.mesh is not None:
            ps = self._param_set()
            leaves = self.config._place([t for t in own if t in ps], [t for t in all_state if t not in ps], leaves)
        grad = state.grad_enabled and (any(t._rg for t in all_state) or any(
            isinstance(x, Tensor) and x._rg for x in leaves))
        key = (tree, tuple(_leaf_key(x) for x in leaves), tuple(t._meta for t in all_state), grad,
               self._extra_key(), self.config._mesh_key())
        v = self._variants.get(key)
        if v is None:
            v = self._new_variant(key, leaves, all_state, grad)
            if v is None:
                self._fallbacks += 1
                return self._eager_call(args, kwargs)
        else:
            self._variants.move_to_end(key)
            self._hits += 1
        return self._run(v, leaves, all_state, grad)

    def _new_variant(self, key, leaves, all_state, grad):
        if self._compiles >= self._recompile_limit:
            what = _what_changed(self._last_key, key)
            if not self._warned:
                self._warned = True
                warnings.warn(f"lf.compile({self._name}): recompile limit ({self._recompile_limit}) reached; "
                              f"{what}. " + ("Running eagerly from now on for new signatures."
                                             if self._on_limit == "eager" else ""), stacklevel=3)
            if self._on_limit == "raise":
                raise GraphError(f"lf.compile({self._name}): recompile limit ({self._recompile_limit}) reached; "
                                 f"{what}; raise the limit with lf.compile(..., recompile_limit=N)")
            return None
        v = _Variant()
        v.state_tensors = all_state
        tensor_leaves = [x for x in leaves if isinstance(x, Tensor)]
        v.diff_state = tuple(i for i, t in enumerate(all_state) if grad and t._rg)
        v.diff_args = tuple(i for i, t in enumerate(tensor_leaves) if grad and t._rg)
        self._build(v, key[0], leaves, grad)
        self._compiles += 1
        self._last_key = key
        self._variants[key] = v
        if len(self._variants) > self._limit:
            self._variants.popitem(last=False)
        return v

    def _readonly_ids(self, all_state):
        return {id(t) for t in self._lifted}

    def _build(self, v, tree, leaves, grad):
        fn = self._fn
        info = {}
        all_state = v.state_tensors
        readonly = self._readonly_ids(all_state)
        n_state = len(all_state)
        where = f"lf.compile({self._name})"

        def pure(state_vals, arg_vals, seed, offset):
            self._traces += 1
            out_vals, out_tree, new_state, n_rng, captured = trace_pure(
                fn, all_state, readonly, state_vals, tree, leaves, arg_vals, seed, offset, grad=False,
                where=where)
            written = tuple(i for i in range(n_state) if i not in readonly and new_state[i] is not state_vals[i])
            info.update(out_tree=out_tree, n_rng=n_rng, written=written, captured=captured)
            return out_vals, [new_state[i] for i in written]

        ds, da = v.diff_state, v.diff_args

        def fwd(dvals, state_vals, arg_vals, seed, offset):
            def f(d):
                sv, av = list(state_vals), list(arg_vals)
                for j, i in enumerate(ds):
                    sv[i] = d[j]
                for j, i in enumerate(da):
                    av[i] = d[len(ds) + j]
                return pure(sv, av, seed, offset)

            outs, vjp_fn, new = jax.vjp(f, dvals, has_aux=True)
            return outs, new, vjp_fn

        v.kernel = jax.jit(pure)
        v.fwd = jax.jit(fwd)
        v.info = info

    def _run(self, v, leaves, all_state, grad):
        tensor_leaves = [x for x in leaves if isinstance(x, Tensor)]
        arg_vals = [x._value for x in tensor_leaves]
        state_vals = [t._value for t in all_state]
        seed, offset = rng_inputs()
        diff_tensors = None
        if grad and (v.diff_state or v.diff_args):
            diff_tensors = [all_state[i] for i in v.diff_state] + [tensor_leaves[i] for i in v.diff_args]
            outs, new, vjp_fn = v.fwd([t._value for t in diff_tensors], state_vals, arg_vals, seed, offset)
            if v.bwd is None:
                v.bwd = _make_bwd(outs)
        else:
            outs, new = v.kernel(state_vals, arg_vals, seed, offset)
        if v.out_tree is None:
            info = v.info
            v.out_tree, v.n_rng, v.written = info["out_tree"], info["n_rng"], info["written"]
            v.out_metas = [None if o is None else _meta_of(o) for o in outs]
            captured = [t for t in info["captured"].values() if all(t is not s for s in all_state)]
            if captured:
                # this call ran with the captured values baked in (correct now); lift them to inputs from now on
                self._lifted = self._lifted + captured
                self._variants.clear()
        for i, val in zip(v.written, new):
            t = all_state[i]
            t._value = val
            t._version += 1
        if v.n_rng:
            default_generator._offset += v.n_rng
        res = [None if o is None else _make(o, m) for o, m in zip(outs, v.out_metas)]
        if diff_tensors is not None:
            entry = _CallEntry(v, vjp_fn, len(diff_tensors))
            tnode = Node(entry, tuple(diff_tensors), tuple(t._version for t in diff_tensors), len(res))
            for i, t in enumerate(res):
                if t is not None and t._meta[1].is_floating_point:
                    t._rg, t._node, t._oidx = True, tnode, i
        return jax.tree_util.tree_unflatten(v.out_tree, res)


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


def compile_function(fn, **options) -> CompiledFunction:
    return CompiledFunction(fn, **options)
