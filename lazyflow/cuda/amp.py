"""``lf.cuda.amp.autocast``: torch's deprecated spelling of ``lf.autocast("cuda", ...)``."""

from __future__ import annotations

import warnings

from .._core import dtypes as D
from .._core.device import devices_of
from ..amp import autocast as _autocast

__all__ = ["autocast"]


class autocast(_autocast):
    """``lf.autocast("cuda", dtype=..., enabled=...)`` with torch.cuda.amp's default dtype, float16. Like torch, it
    warns that the spelling is deprecated, and without a GPU it warns and disables itself (torch's CPU build does).
    """

    def __init__(self, enabled: bool = True, dtype: D.DType = D.float16, cache_enabled: bool = True):
        warnings.warn(
            "`lf.cuda.amp.autocast(args...)` is deprecated. Please use `lf.autocast('cuda', args...)` instead.",
            FutureWarning,
            stacklevel=2,
        )
        if enabled and not devices_of("cuda"):
            warnings.warn("CUDA is not available. Disabling autocast.", UserWarning, stacklevel=2)
            enabled = False
        super().__init__("cuda", dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)
