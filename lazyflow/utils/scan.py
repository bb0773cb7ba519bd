"""``lf.utils.scan.ScanLayers``: a ``ModuleList`` of identical blocks that compiles as one ``lax.scan`` body.

Calling it applies the blocks in order (``x = block(x)``). Eagerly that is a plain loop. Inside compiled code that JAX
differentiates (``lf.compile``, ``lf.func.functional_call`` under a JAX transform) the blocks' parameters and buffers
are stacked on a new leading axis and ONE block is traced as the body of ``lax.scan``: the program holds one copy of
the block, so tracing and compiling cost about one block instead of N. With ``checkpoint=True`` the body is
``jax.checkpoint``-ed (the usual layer-remat of a scanned transformer). It stays a ``ModuleList``: indexing,
iteration and ``state_dict`` keys (``"h.0.ln_1.weight"``...) are unchanged.
"""

from __future__ import annotations

from collections.abc import Iterable

import jax
import jax.numpy as jnp

from .._core.context import state
from .._core.errors import ArgumentError
from .._tensor import Tensor, _make
from ..nn.module import Module
from ..nn.modules.container import ModuleList

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
        if len(blocks) < 2 or not state.tracing or state.grad_enabled:
            # eager, or a trace that records its own tape (lf.nn.Graph): the loop (same numbers)
            for b in blocks:
                x = b(x)
            return x
        return self._scan(blocks, x)

    def _scan(self, blocks, x):
        n = len(blocks)
        per_block = [_named_state(b) for b in blocks]
        names = [k for k, _ in per_block[0]]
        stacked = [jnp.stack([ts[j][1]._value for ts in per_block]) for j in range(len(names))]
        template = blocks[0]
        slots = [_slot(template, k) for k in names]
        outer_rng = state.rng_hook
        ctx = state.trace_ctx
        counts = []

        def body(carry, xs):
            i, vals = xs
            saved = []
            rng = _LayerRng(outer_rng, n, i) if outer_rng is not None else None
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
        y, _ = jax.lax.scan(fn, x._value, (jnp.arange(n, dtype=jnp.int32), stacked))
        if outer_rng is not None and counts:  # the body drew k outer offsets; layers used k * (n + 1) in all
            outer_rng.count += counts[-1] * n
        return _make(y)


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
