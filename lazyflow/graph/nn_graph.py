"""``lf.nn.Graph``: a whole training step -- forward, backward, optimizer update -- as one XLA program.

Subclass it, assign the modules (the same objects eager code uses; parameters are shared), register optimizers
with :meth:`Graph.add_optimizer`, and write :meth:`Graph.build` the way an eager step is written
(``loss.backward()`` included). Calling the graph traces ``build`` once per input signature through the op table,
appends the optimizers' own pure update functions, and jits the lot with parameter and optimizer-state buffers
donated. After each call the parameters, buffers and optimizer state hold exactly what the eager step would have
produced, in the eager layout, so ``model.state_dict()`` / ``opt.state_dict()`` serve both modes.
"""

from __future__ import annotations

import sys
import time
import warnings
from collections import OrderedDict, namedtuple

import jax
import jax.numpy as jnp

from .._core.context import state
from .._core.errors import GraphError
from .._core.placement import sharding_of
from .._creation import default_generator
from .._tensor import Tensor, _make, _meta_of
from ..amp import _AutocastInterpreter
from ..nn.module import Module
from .functionalize import RngCounter, flatten_out, install, restore, rng_inputs, wrap_args
from .mesh_config import MeshConfig
from .trace import Tracing

__all__ = ["Graph", "GraphConfig", "GraphInfo"]

GraphInfo = namedtuple("GraphInfo", "traces compiles hits variants")
_is_tensor = lambda x: isinstance(x, Tensor)  # noqa: E731
_getrefcount = sys.getrefcount
# Donation is an optimisation lazyflow asks for on every step; XLA declining it for a buffer is not the user's
# concern (and filtering per call would cost more than the dispatch), so this one message is silenced once.
warnings.filterwarnings("ignore", message="Some donated buffers were not usable")


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
        from .._core import dtypes as D

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
        return (self.amp_dtype, self.grad_acc_steps, self._mesh_key())

    def __repr__(self) -> str:
        return (f"GraphConfig(amp={self.amp_dtype.name if self.amp_dtype else None}, "
                f"gradient_accumulation_steps={self.grad_acc_steps})")


class _Step:
    __slots__ = ("kernel", "kernel_nodonate", "out_tree", "out_metas", "n_rng", "written_bufs", "info", "plan")


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

    def __init__(self, *, cache_size_limit: int = 8):
        d = self.__dict__
        d["_modules"] = OrderedDict()
        d["_optimizers"] = []
        d["config"] = GraphConfig()
        d["_steps"] = OrderedDict()
        d["_limit"] = cache_size_limit
        d["_traces"] = d["_compiles"] = d["_hits"] = 0
        d["_debug"] = 0
        d["_lifted"] = []

    def __setattr__(self, name, value):
        if isinstance(value, Module):
            self.__dict__["_modules"][name] = value
        object.__setattr__(self, name, value)

    def add_optimizer(self, optimizer, *, lr_sch=None, is_sparse: bool = False) -> None:
        """Update ``optimizer``'s parameters inside the step (after ``build``), then step ``lr_sch`` once per call."""
        if not hasattr(optimizer, "_update") or not hasattr(optimizer, "param_groups"):
            raise TypeError(f"add_optimizer expects an lf.optim optimizer, got {type(optimizer).__name__}")
        self._optimizers.append((optimizer, lr_sch))

    def build(self, *args, **kwargs):
        """The step, written as eager code; must return Tensors (or containers of them)."""
        raise NotImplementedError(f"{type(self).__name__} must define build()")

    def debug(self, v_level: int = 0, *, ranks=None, max_py_stack_depth: int = 2) -> None:
        """Print what gets compiled: 0 = off, 1 = compile events and timings, 2 = also the traced program (jaxpr),
        3 = also the optimized HLO text."""
        self.__dict__["_debug"] = int(v_level)

    def cache_info(self) -> GraphInfo:
        return GraphInfo(self._traces, self._compiles, self._hits, len(self._steps))

    def __repr__(self) -> str:
        lines = [f"({type(self).__name__}:nn.Graph)"]
        for n, m in self._modules.items():
            lines.append(f"  (MODULE:{n}): " + repr(m).replace("\n", "\n  "))
        for i, (o, s) in enumerate(self._optimizers):
            lines.append(f"  (OPTIMIZER:{i}): {type(o).__name__} over {sum(len(g['params']) for g in o.param_groups)}"
                         f" parameters" + (f", lr scheduler {type(s).__name__}" if s is not None else ""))
        lines.append(f"  (CONFIG): {self.config!r}")
        return "\n".join(lines)

    # ------------------------------------------------------------------ state gathering
    def _gather(self):
        """Everything the step reads: optimized parameters (donated), other parameters, buffers, optimizer
        state, and per param group a plan entry ``(optimizer, group index, positions, state keys, static)``."""
        index, opt_params, plan, hyper = {}, [], [], []
        for opt, _ in self._optimizers:
            for gi, group in enumerate(opt.param_groups):
                ps = [p for p in group["params"] if p._rg]
                opt._init_state(gi, ps)
                pos = []
                for p in ps:
                    i = index.get(id(p))
                    if i is None:
                        i = index[id(p)] = len(opt_params)
                        opt_params.append(p)
                    pos.append(i)
                keys = tuple(tuple(sorted(k for k, v in opt.state.get(p, {}).items() if isinstance(v, Tensor)))
                             for p in ps)
                dyn, static = opt._split_hyper(group)
                hyper.append(dyn)
                plan.append((opt, gi, tuple(pos), keys, static))
        seen = set(index)
        other, buffers = [], []
        for m in self._modules.values():
            for sub in m.modules():
                for t in sub._parameters.values():
                    if t is not None and id(t) not in seen:
                        seen.add(id(t))
                        other.append(t)
                for t in sub._buffers.values():
                    if t is not None and id(t) not in seen:
                        seen.add(id(t))
                        buffers.append(t)
        opt_state = []
        for opt, _gi, pos, keys, _ in plan:
            for p, ks in zip((opt_params[i] for i in pos), keys):
                st = opt.state[p] if ks else {}
                opt_state.extend(st[k] for k in ks)
        return opt_params, other, buffers, opt_state, hyper, plan

    # ------------------------------------------------------------------ calling
    def __call__(self, *args, **kwargs):
        if state.tracing:
            raise GraphError("a Graph cannot be called inside another compiled program")
        leaves, tree = jax.tree_util.tree_flatten((args, kwargs), is_leaf=_is_tensor)
        opt_params, other, buffers, opt_state, hyper, plan = self._gather()
        lifted = self._lifted
        leaves = self.config._place(opt_params + other + opt_state, buffers + lifted, leaves)
        key = (tree, tuple(t._meta if isinstance(t, Tensor) else ("py", type(t), t) for t in leaves),
               tuple(t._meta for t in opt_params), tuple((t._meta, t._rg) for t in other),
               tuple(t._meta for t in buffers), tuple(t._meta for t in opt_state), tuple(p[1:] for p in plan),
               tuple(tuple(sorted(h)) for h in hyper), tuple(t._meta for t in lifted),
               tuple(m.training for mod in self._modules.values() for m in mod.modules()), self.config._key())
        step = self._steps.get(key)
        if step is None:
            step = self._build_step(tree, leaves, opt_params, other, buffers, plan, lifted, opt_state)
            self._steps[key] = step
            self.__dict__["_compiles"] += 1
            if len(self._steps) > self._limit:
                self._steps.popitem(last=False)
        else:
            self._steps.move_to_end(key)
            self.__dict__["_hits"] += 1
        return self._run(step, leaves, opt_params, other, buffers, opt_state, hyper, plan, lifted)

    def _build_step(self, tree, leaves, opt_params, other, buffers, plan, lifted, opt_state):
        step = _Step()
        info = {}
        cfg = self.config
        n_acc = cfg.grad_acc_steps
        n_bufs = len(buffers)
        readonly = {id(t) for t in lifted}
        has_opt = bool(plan)
        where = f"{type(self).__name__}.build"
        params = opt_params + other
        constrain = None
        if cfg.mesh is not None:
            sh_opt = [sharding_of(p._meta[2]) for p in opt_params]
            sh_buf = [sharding_of(b._meta[2]) for b in buffers]
            sh_state = [sharding_of(t._meta[2]) for t in opt_state]

            def constrain(vals, shardings):
                return [v if s is None else jax.lax.with_sharding_constraint(v, s) for v, s in zip(vals, shardings)]

        def pure(opt_vals, state_vals, hyper_vals, other_vals, buf_vals, lifted_vals, arg_vals, seed, offset):
            self.__dict__["_traces"] += 1
            rng = RngCounter(seed, offset)
            all_t = params + buffers + lifted
            saved = install(all_t, list(opt_vals) + list(other_vals) + list(buf_vals) + list(lifted_vals))
            prev_grad = state.grad_enabled
            try:
                for p in params:
                    p.grad = None
                with Tracing(readonly, rng) as ctx:
                    if cfg.amp_dtype is not None:
                        state.interp = _AutocastInterpreter(state.interp, cfg.amp_dtype)
                    state.grad_enabled = True
                    outs = []
                    for k in range(n_acc):
                        vals = arg_vals if n_acc == 1 else [_micro(v, k, n_acc) for v in arg_vals]
                        a, kw = jax.tree_util.tree_unflatten(tree, wrap_args(leaves, vals))
                        outs.append(self.build(*a, **kw))
                    out_vals, out_tree = flatten_out(outs[0], where)
                    if n_acc > 1:
                        per = [flatten_out(o, where)[0] for o in outs]
                        out_vals = [None if v is None else (
                            jnp.mean(jnp.stack([p[i] for p in per]), 0) if jnp.issubdtype(v.dtype, jnp.inexact)
                            else per[-1][i]) for i, v in enumerate(out_vals)]
                state.grad_enabled = False
                grads = [None if p.grad is None else p.grad._value for p in opt_params]
                if n_acc > 1:
                    grads = [None if g is None else g / n_acc for g in grads]
                new_opt_vals = [p._value for p in opt_params]
                new_state = list(state_vals)  # passed through unless updated
                updates = []  # per group: (live positions in the group, new state dicts)
                cursor = 0
                for (opt, _gi, pos, keys, static), dyn in zip(plan, hyper_vals):
                    offsets = []
                    for ks in keys:
                        offsets.append(cursor)
                        cursor += len(ks)
                    live = [j for j, i in enumerate(pos) if grads[i] is not None]
                    states = [{k: state_vals[offsets[j] + n] for n, k in enumerate(keys[j])} for j in live]
                    new_p, new_s = opt._update({**dyn, **dict(static)}, [new_opt_vals[pos[j]] for j in live],
                                               [grads[pos[j]] for j in live], states)
                    for j, v in zip(live, new_p):
                        new_opt_vals[pos[j]] = v
                    extra = []
                    for j, sd in zip(live, new_s):
                        for n, k in enumerate(keys[j]):
                            new_state[offsets[j] + n] = sd[k]
                        extra.append({k: v for k, v in sd.items() if k not in keys[j]})
                    updates.append((tuple(live), extra))
                new_bufs = [b._value for b in buffers]
                written = tuple(i for i in range(n_bufs) if new_bufs[i] is not buf_vals[i])
                if constrain is not None:  # keep every piece of state where it lives: no drift, no recompiles
                    new_opt_vals = constrain(new_opt_vals, sh_opt)
                    new_state = constrain(new_state, sh_state)
                    new_bufs = constrain(new_bufs, sh_buf)
                info.update(out_tree=out_tree, n_rng=rng.count, written=written, captured=dict(ctx.captured),
                            live=[u[0] for u in updates])
                return (out_vals, new_opt_vals, new_state, [u[1] for u in updates],
                        [new_bufs[i] for i in written])
            finally:
                state.grad_enabled = prev_grad
                restore(saved)

        step.kernel = jax.jit(pure, donate_argnums=(0, 1) if has_opt else ())
        step.kernel_nodonate = jax.jit(pure) if has_opt else step.kernel
        step.info = info
        step.out_tree = None
        step.plan = plan
        return step

    def _run(self, step, leaves, opt_params, other, buffers, opt_state, hyper, plan, lifted):
        opt_vals = [p._value for p in opt_params]
        state_vals = [t._value for t in opt_state]
        # donate only when nothing else holds these buffers (a detach()ed copy, a pending async checkpoint...)
        donate = all(_getrefcount(v) <= 3 for v in opt_vals) and all(_getrefcount(v) <= 3 for v in state_vals)
        kernel = step.kernel if donate else step.kernel_nodonate
        arg_vals = [x._value for x in leaves if isinstance(x, Tensor)]
        seed, offset = rng_inputs()
        t0 = time.perf_counter()
        first = step.out_tree is None
        call_args = (opt_vals, state_vals, hyper, [t._value for t in other], [b._value for b in buffers],
                     [t._value for t in lifted], arg_vals, seed, offset)
        if first and self._debug >= 2:
            traced = kernel.trace(*call_args)
            print(f"[lf.nn.Graph {type(self).__name__}] traced program:\n{traced.jaxpr}")
            if self._debug >= 3:
                print(f"[lf.nn.Graph {type(self).__name__}] optimized HLO:\n{traced.lower().compile().as_text()}")
        outs, new_opt, new_state, extras, new_bufs = kernel(*call_args)
        del call_args
        del opt_vals, state_vals
        if first:
            info = step.info
            step.out_tree, step.n_rng, step.written_bufs = info["out_tree"], info["n_rng"], info["written"]
            step.out_metas = [None if o is None else _meta_of(o) for o in outs]
            step.plan = [(entry, live) for entry, live in zip(plan, info["live"])]
            if self._debug:
                print(f"[lf.nn.Graph {type(self).__name__}] traced and compiled variant #{self._compiles} in "
                      f"{time.perf_counter() - t0:.3f} s")
            known = opt_params + other + buffers + lifted
            captured = [t for t in info["captured"].values() if all(t is not s for s in known)]
            if captured:
                self.__dict__["_lifted"] = lifted + captured
                self._steps.clear()
        for p, v in zip(opt_params, new_opt):
            if p._value is not v:
                p._value = v
                p._version += 1
        for t, v in zip(opt_state, new_state):
            if t._value is not v:
                t._value = v
                t._version += 1
        for ((opt, _gi, pos, _keys, _), live), extra in zip(step.plan, extras):
            for j, ex in zip(live, extra):
                if ex:
                    p = opt_params[pos[j]]
                    st = opt.state[p]  # a defaultdict, like torch's
                    for k, v in ex.items():
                        st[k] = _make(v, _meta_of(v))
        for i, v in zip(step.written_bufs, new_bufs):
            b = buffers[i]
            b._value = v
            b._version += 1
        for p in opt_params:
            p.grad = None
        if step.n_rng:
            default_generator._offset += step.n_rng
        for _, sch in self._optimizers:
            if sch is not None:
                sch.step()
        res = [None if o is None else _make(o, m) for o, m in zip(outs, step.out_metas)]
        return jax.tree_util.tree_unflatten(step.out_tree, res)


def _micro(v, k, n):
    b = v.shape[0]
    if b % n:
        raise GraphError(f"gradient accumulation: batch size {b} is not divisible by {n} micro-batches")
    m = b // n
    return jax.lax.slice_in_dim(v, k * m, (k + 1) * m, axis=0)
