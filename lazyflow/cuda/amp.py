"""``lf.cuda.amp.autocast``: torch's deprecated spelling of ``lf.autocast("cuda", ...)``."""

from __future__ import annotations

import warnings

from .._core import dtypes as D
from .._core.device import devices_of
from ..amp import GradScaler as _GradScaler
from ..amp import autocast as _autocast

__all__ = ["autocast", "GradScaler"]


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


class GradScaler(_GradScaler):
    """``lf.amp.GradScaler("cuda", ...)``, torch.cuda.amp's deprecated spelling (it warns so, like torch; without a
    GPU the scaler disables itself with a warning)."""

    def __init__(
        self,
        init_scale: float = 2.0**16,
        growth_factor: float = 2.0,
        backoff_factor: float = 0.5,
        growth_interval: int = 2000,
        enabled: bool = True,
    ) -> None:
        warnings.warn(
            "`lf.cuda.amp.GradScaler(args...)` is deprecated. Please use `lf.amp.GradScaler('cuda', args...)` instead.",
            FutureWarning,
            stacklevel=2,
        )
        super().__init__("cuda", init_scale, growth_factor, backoff_factor, growth_interval, enabled)
