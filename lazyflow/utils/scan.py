"""``lf.utils.scan.ScanLayers``: a ``ModuleList`` of identical blocks that compiles as one ``lax.scan`` body.

Calling it applies the blocks in order (``x = block(x)``). Eagerly that is a plain loop. Inside compiled code
(``lf.compile``, an ``lf.nn.Graph`` step, ``lf.func.functional_call`` under a JAX transform) the blocks' parameters
and buffers are stacked on a new leading axis and ONE block is traced as the body of ``lax.scan``: the program holds
one copy of the block, so tracing costs about one block instead of N (inside a Graph the scan is one tape node whose
backward is ``jax.vjp`` of the scan). With ``checkpoint=True`` the body is
``jax.checkpoint``-ed (the usual layer-remat of a scanned transformer). It stays a ``ModuleList``: indexing,
iteration and ``state_dict`` keys (``"h.0.ln_1.weight"``...) are unchanged.
"""

from __future__ import annotations

from collections.abc import Iterable

import jax
import jax.numpy as jnp

from .._core.context import state
from .._core.errors import ArgumentError, GraphError
from .._creation import default_generator
from .._tensor import Tensor, _make
from ..nn.module import Module
from ..nn.modules.container import ModuleList
from .jax import JaxFunction

__all__ = ["ScanLayers"]


def _named_state(block: Module) -> list[tuple[str, Tensor]]:
    return list(block.named_parameters()) + list(block.named_buffers())


def _signature(block: Module):
    return (type(block), tuple((k, tuple(t.shape), t.dtype) for k, t in _named_state(block)))


class _LayerRng:
    """Random draws inside the scan body: the k-th draw reserves one outer offset ``base_k = o + k`` and layer ``i``
    uses ``base_k + k * n + i`` = ``o + k * (n + 1) + i``: distinct per layer and per draw."""

    def __init__(self, outer, n, i):
        self.outer, self.n, self.i, self.count = outer, n, i, 0

    def __call__(self, gen):
        seed, base = self.outer(gen)  # one outer draw reserves this position
        k = self.count
        self.count += 1
        return seed, base + jnp.uint32(k * self.n) + self.i.astype(jnp.uint32)


class ScanLayers(ModuleList):
    """Blocks of one class with parameters and buffers of equal names, shapes and dtypes, applied in order.

    Args:
        modules: the blocks (e.g. an existing ``ModuleList``'s modules).
        checkpoint: in compiled code, rematerialise each block in backward (``jax.checkpoint`` of the body).
    Raises:
        ArgumentError: blocks that differ in class or in their parameters' names, shapes or dtypes.

    >>> model.transformer.h = lf.utils.scan.ScanLayers(model.transformer.h)
    """

    def __init__(self, modules: Iterable[Module] | None = None, *, checkpoint: bool = False) -> None:
        super().__init__(modules)
        self.__dict__["_scan_checkpoint"] = bool(checkpoint)
        blocks = list(self)
        if blocks:
            ref = _signature(blocks[0])
            for i, b in enumerate(blocks[1:], 1):
                if _signature(b) != ref:
                    raise ArgumentError(
                        f"ScanLayers: block {i} ({type(b).__name__}) differs from block 0 ({type(blocks[0]).__name__}) "
                        "in class or in its parameters' names, shapes or dtypes; use a ModuleList for unequal blocks"
                    )

    def forward(self, x: Tensor) -> Tensor:
        blocks = list(self)
        if len(blocks) < 2 or not state.tracing:
            for b in blocks:  # eager: the loop
                x = b(x)
            return x
        if state.grad_enabled:  # a trace that records its own tape (lf.nn.Graph): the scan as one tape node
            return self._scan_node(blocks, x)
        per_block = [_named_state(b) for b in blocks]  # JAX differentiates the program (lf.compile, functional_call)
        stacked = [jnp.stack([ts[j][1]._value for ts in per_block]) for j in range(len(per_block[0]))]
        outer = state.rng_hook
        y, draws = self._scan(blocks, x._value, stacked, outer)
        if outer is not None:  # the body drew k outer offsets; layers used k * (n + 1) in all
            outer.count += draws * len(blocks)
        return _make(y)

    def _scan_node(self, blocks, x):
        """Inside an ``lf.nn.Graph``: one op whose inputs are ``x`` and every block's parameters and buffers, whose
        forward is the scan and whose backward is ``jax.vjp`` of it (gradients reach each block's own tensors).
        The backward re-runs the scan: its random draws replay the forward's offsets (:class:`_Replay`)."""
        per_block = [_named_state(b) for b in blocks]
        tensors = [t for ts in per_block for _, t in ts]
        n, p = len(blocks), len(per_block[0])
        outer = state.rng_hook
        start = outer.count if outer is not None else 0
        draws: list[int] = []

        def scan_blocks(xv, *vals):
            prev = state.grad_enabled
            state.grad_enabled = False  # JAX differentiates this function: no tape inside it
            try:
                stacked = [jnp.stack([vals[b * p + j] for b in range(n)]) for j in range(p)]
                y, k = self._scan(blocks, xv, stacked, _Replay(outer, start) if outer is not None else None)
            finally:
                state.grad_enabled = prev
            draws.append(k)
            return y

        out = JaxFunction(scan_blocks, name="ScanLayers")(x, *tensors)
        if outer is not None and draws:
            outer.count = start + draws[0] * (n + 1)
        return out

    def _scan(self, blocks, xv, stacked, outer):
        """``lax.scan`` of block 0 (its tensors swapped for each layer's slice of ``stacked``) over ``xv``;
        returns ``(y, random draws per layer)``."""
        n = len(blocks)
        names = [k for k, _ in _named_state(blocks[0])]
        template = blocks[0]
        slots = [_slot(template, k) for k in names]
        ctx = state.trace_ctx
        counts = []

        def body(carry, xs):
            i, vals = xs
            saved = []
            rng = _LayerRng(outer, n, i) if outer is not None else None
            prev_hook = state.rng_hook
            state.rng_hook = rng
            readonly = []
            try:
                for (d, key), v in zip(slots, vals):
                    t = _make(v)
                    saved.append((d, key, d[key]))
                    d[key] = t
                    readonly.append(id(t))
                ctx.readonly.update(readonly)  # in-place writes to a stacked buffer would be lost: refuse them
                out = template(_make(carry))
            finally:
                ctx.readonly.difference_update(readonly)
                state.rng_hook = prev_hook
                for d, key, old in reversed(saved):
                    d[key] = old
            if not isinstance(out, Tensor) or tuple(out.shape) != tuple(carry.shape) or out._value.dtype != carry.dtype:
                raise ArgumentError(
                    "ScanLayers: each block must return one tensor of its input's shape and dtype, got "
                    f"{type(out).__name__}"
                )
            counts.append(rng.count if rng is not None else 0)
            return out._value, None

        fn = jax.checkpoint(body) if self.__dict__.get("_scan_checkpoint") else body
        y, _ = jax.lax.scan(fn, xv, (jnp.arange(n, dtype=jnp.int32), stacked))
        return y, (counts[-1] if counts else 0)


class _Replay:
    """The outer random-offset counter as seen by one scan: the j-th draw gets ``start + j`` whenever the scan is
    traced (the forward, and again in the backward), so both see the same masks."""

    def __init__(self, outer, start: int):
        self.outer, self.start, self.count = outer, start, 0

    def __call__(self, gen):
        if gen is not default_generator:
            raise GraphError(
                "a random op inside ScanLayers uses a non-default lf.Generator; inside compiled code use the "
                "default generator (lf.manual_seed)"
            )
        j = self.count
        self.count += 1
        return self.outer.seed, self.outer.offset + jnp.uint32(self.start + j)


def _slot(module: Module, dotted: str):
    """The dict holding ``dotted`` (a parameter or buffer of ``module``) and its key there."""
    *path, name = dotted.split(".")
    m = module
    for p in path:
        m = m._modules[p]
    for store in ("_parameters", "_buffers"):
        d = getattr(m, store)
        if name in d:
            return d, name
    raise KeyError(dotted)
