"""``DistributedDataParallel``: torch's DDP over lazyflow's eager collectives.

At construction rank 0's parameters and buffers are broadcast to every rank. After each backward (outside
:meth:`~DistributedDataParallel.no_sync`), the gradients are averaged over the ranks in one flat all-reduce per
dtype: a post-accumulate-grad hook on each parameter queues the reduction, which the autograd engine runs once
when the backward has finished (torch reduces buckets while the backward still runs; the result is the same).
Inside an ``lf.nn.Graph`` step the same collectives compile into the step (``lazyflow.distributed.traced``).
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Iterator

import jax
import jax.core
import jax.numpy as jnp

from ..._core.errors import NotSupportedError
from ..._core.placement import sharding_of
from ..._tensor import Tensor, _make, _rebind
from ...autograd.engine import queue_callback, register_post_accumulate_grad_hook
from ...distributed.collectives import all_reduce, broadcast
from ...distributed.groups import ProcessGroup, ReduceOp, group_of
from ..module import Module

__all__ = ["DistributedDataParallel"]


def _traced(tensors) -> bool:
    return any(isinstance(t._value, jax.core.Tracer) for t in tensors)


def coalesced(tensors: list[Tensor], collective) -> None:
    """Run ``collective(flat)`` on one flat tensor per dtype holding every tensor of that dtype, and write the
    pieces back into the tensors (same objects)."""
    by_dtype: dict = {}
    for t in tensors:
        by_dtype.setdefault(t._value.dtype, []).append(t)
    for group in by_dtype.values():
        traced = _traced(group)  # inside compiled code: traced values, no placement
        put = (lambda v, s: v) if traced else jax.device_put
        flat = _make(jnp.concatenate([jnp.ravel(put(t._value, jax.local_devices()[0])) for t in group]))
        collective(flat)
        offset = 0
        for t in group:
            n = t._value.size
            piece = flat._value[offset : offset + n].reshape(t._value.shape)
            _rebind(t, put(piece, sharding_of(t._meta[2])))
            offset += n


class DistributedDataParallel(Module):
    """Wrap ``module`` for data-parallel training with one process per rank (torch.nn.parallel's DDP).

    ``ddp(x)`` calls ``module(x)``. After ``loss.backward()`` every parameter's ``.grad`` is the average over the
    ranks of their gradients, so an optimizer stepping on ``ddp.parameters()`` keeps the replicas equal. A
    parameter that got no gradient on a rank contributes zeros there (and has a ``.grad`` afterwards).

    ``ddp.state_dict()`` keys carry the ``module.`` prefix, as torch's DDP (a checkpoint of a torch DDP model loads
    with ``ddp.load_state_dict``); ``ddp.module.state_dict()`` has none. To load a DDP checkpoint into a plain
    model, strip the prefix with ``lf.nn.modules.utils.consume_prefix_in_state_dict_if_present(sd, "module.")``.

    Args:
        module: the model (the same architecture on every rank).
        device_ids, output_device, dim, bucket_cap_mb, find_unused_parameters, check_reduction,
            gradient_as_bucket_view, static_graph: accepted for torch compatibility and ignored.
        broadcast_buffers: broadcast rank 0's buffers before each forward (torch's default).
        init_sync: broadcast rank 0's parameters and buffers at construction (torch's default).
        process_group: the group to average over (default: every rank).
    Raises:
        DistributedNotInitializedError: before ``init_process_group``.

    >>> ddp = lf.nn.parallel.DistributedDataParallel(model)
    >>> loss_fn(ddp(x), y).backward()  # grads averaged over the ranks
    """

    def __init__(
        self,
        module: Module,
        device_ids=None,
        output_device=None,
        dim: int = 0,
        broadcast_buffers: bool = True,
        init_sync: bool = True,
        process_group: ProcessGroup | None = None,
        bucket_cap_mb=None,
        find_unused_parameters: bool = False,
        check_reduction: bool = False,
        gradient_as_bucket_view: bool = False,
        static_graph: bool = False,
        **kwargs,
    ) -> None:
        super().__init__()
        if not isinstance(module, Module):
            raise TypeError(f"DistributedDataParallel wraps an lf.nn.Module, got {type(module).__name__}")
        group = group_of(process_group, "DistributedDataParallel")
        self.module = module
        self.process_group = process_group
        self.broadcast_buffers = broadcast_buffers
        self.require_backward_grad_sync = True
        self._src = group.ranks[0]
        self._grad_params = [p for p in module.parameters() if p.requires_grad]
        self._queued = [False]
        state = list(module.parameters()) + list(module.buffers())
        if _traced(state):
            raise NotSupportedError(_IN_TRACE)
        if state and init_sync:
            coalesced(state, lambda flat: broadcast(flat, self._src, group=process_group))
        me = weakref.ref(self)  # the parameters' hooks must not keep a discarded wrapper alive

        def on_grad(p: Tensor) -> None:
            ddp = me()
            if ddp is not None:
                ddp._on_grad(p)

        hooks = [register_post_accumulate_grad_hook(p, on_grad) for p in self._grad_params]
        weakref.finalize(self, lambda: [h.remove() for h in hooks])

    def forward(self, *args, **kwargs):
        buffers = list(self.module.buffers())
        if self.broadcast_buffers and buffers:
            coalesced(buffers, lambda flat: broadcast(flat, self._src, group=self.process_group))
        return self.module(*args, **kwargs)

    @contextlib.contextmanager
    def no_sync(self) -> Iterator[None]:
        """Backwards inside skip the averaging (gradients accumulate locally); the first backward after the block
        averages the accumulated gradients (torch's gradient-accumulation pattern)."""
        previous = self.require_backward_grad_sync
        self.require_backward_grad_sync = False
        try:
            yield
        finally:
            self.require_backward_grad_sync = previous

    def _on_grad(self, p: Tensor) -> None:
        if self.require_backward_grad_sync and not self._queued[0]:
            self._queued[0] = True
            queue_callback(self._reduce_grads)

    def _reduce_grads(self) -> None:
        self._queued[0] = False
        params = [p for p in self._grad_params if p.is_floating_point()]
        for p in params:
            if p.grad is None:
                p.grad = _make(jax.device_put(jnp.zeros(p._value.shape, p._value.dtype), sharding_of(p._meta[2])))
        grads = [p.grad for p in params if p.grad is not None]
        coalesced(grads, lambda flat: all_reduce(flat, ReduceOp.AVG, group=self.process_group))


_IN_TRACE = (
    "DistributedDataParallel(...) inside lf.compile / nn.Graph: construct the wrapper eagerly (it broadcasts rank "
    "0's weights once), then use it inside the compiled step, where its averaging is compiled in"
)
