"""``lf.nn.modules.utils``: state-dict helpers with torch's names, and the argument normalisers model files import
from torch's private names (``from torch.nn.modules.utils import _pair``)."""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["consume_prefix_in_state_dict_if_present"]


def _ntuple(n: int, name: str = "parse"):
    """A function turning a scalar into an ``n``-tuple of it and any iterable into a tuple (torch's ``_ntuple``)."""

    def parse(x):
        return tuple(x) if isinstance(x, Iterable) else (x,) * n

    parse.__name__ = name
    return parse


_single = _ntuple(1, "_single")
_pair = _ntuple(2, "_pair")
_triple = _ntuple(3, "_triple")
_quadruple = _ntuple(4, "_quadruple")


def _reverse_repeat_tuple(t, n: int) -> tuple:
    """``t`` reversed with each entry repeated ``n`` times: a conv's padding as ``F.pad`` takes it."""
    return tuple(x for x in reversed(t) for _ in range(n))


def _list_with_default(out_size, defaults: list[int]):
    """``out_size`` with each None replaced by the matching trailing entry of ``defaults`` (adaptive pooling's
    output size); an int passes through.

    Raises:
        ValueError: ``defaults`` not longer than ``out_size`` (torch's check).
    """
    if isinstance(out_size, int):
        return out_size
    if len(defaults) <= len(out_size):
        raise ValueError(f"Input dimension should be at least {len(out_size) + 1}")
    return [v if v is not None else d for v, d in zip(out_size, defaults[-len(out_size) :])]


def consume_prefix_in_state_dict_if_present(state_dict: dict, prefix: str) -> None:
    """Strip ``prefix`` from the keys of ``state_dict`` that start with it, in place (torch's helper): a
    ``DistributedDataParallel`` checkpoint (keys ``module.x``) then loads into the plain model.

    Args:
        state_dict: the state dict (its key order is kept).
        prefix: e.g. ``"module."``.

    >>> sd = ddp.state_dict(); consume_prefix_in_state_dict_if_present(sd, "module."); model.load_state_dict(sd)
    """
    for key in list(state_dict.keys()):
        if key.startswith(prefix):
            state_dict[key[len(prefix) :]] = state_dict.pop(key)
    metadata = getattr(state_dict, "_metadata", None)
    if metadata is not None:
        for key in list(metadata.keys()):
            # '' is the wrapper's own entry (kept), 'module' the model's, 'module.x.y' the rest
            if key and (key == prefix.replace(".", "") or key.startswith(prefix)):
                metadata[key[len(prefix) :]] = metadata.pop(key)
