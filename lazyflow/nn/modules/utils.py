"""``lf.nn.modules.utils``: state-dict helpers with torch's names."""

from __future__ import annotations

__all__ = ["consume_prefix_in_state_dict_if_present"]


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
