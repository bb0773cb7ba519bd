"""``lf.amp.GradScaler``: dynamic loss scaling for float16 training, with torch.amp.GradScaler's contract.

Multiply the loss by a scale before ``backward`` (so small float16 gradients do not flush to zero), divide the
gradients by it before the optimizer step, skip the step when any gradient is inf/NaN, and adapt the scale: halve it
(``backoff_factor``) after a skipped step, double it (``growth_factor``) after ``growth_interval`` clean steps. The
scale and its growth tracker follow torch's float32 arithmetic step for step, so a run and its ``state_dict`` match
torch's. Without a GPU, ``GradScaler()`` (device ``"cuda"``) warns and disables itself, as torch's CPU build does;
``GradScaler("cpu")`` scales on the CPU.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable
from typing import Any

import numpy as np

from ._core import dtypes as D
from ._core.device import devices_of
from ._functional import stack
from ._tensor import Tensor
from .autograd.grad_mode import no_grad

__all__ = ["GradScaler"]

_READY, _UNSCALED, _STEPPED = "ready", "unscaled", "stepped"


class GradScaler:
    """Dynamic loss scaling (torch.amp.GradScaler's signature and semantics).

    Args:
        device: ``"cuda"`` (default; disabled with a warning when there is no GPU) or ``"cpu"``.
        init_scale: the first scale.
        growth_factor: multiplies the scale after ``growth_interval`` steps without inf/NaN (> 1).
        backoff_factor: multiplies the scale after a step with inf/NaN gradients (< 1).
        growth_interval: clean steps between growths.
        enabled: False makes every method a pass-through (``step`` just calls ``optimizer.step()``).
    >>> scaler = lf.amp.GradScaler("cpu")
    >>> scaler.scale(loss).backward()
    >>> scaler.step(opt)        # skipped when a gradient is inf/NaN
    >>> scaler.update()
    """

    def __init__(
        self,
        device: str = "cuda",
        init_scale: float = 2.0**16,
        growth_factor: float = 2.0,
        backoff_factor: float = 0.5,
        growth_interval: int = 2000,
        enabled: bool = True,
    ) -> None:
        self._device = device
        self._enabled = bool(enabled)
        if device == "cuda" and self._enabled and not devices_of("cuda"):
            warnings.warn(
                "lf.amp.GradScaler is enabled, but CUDA is not available.  Disabling.", UserWarning, stacklevel=2
            )
            self._enabled = False
        if self._enabled:
            if growth_factor <= 1.0:
                raise ValueError(f"The growth factor must be > 1.0, got {growth_factor}")
            if backoff_factor >= 1.0:
                raise ValueError(f"The backoff factor must be < 1.0, got {backoff_factor}")
        self._scale = np.float32(init_scale)
        self._growth_factor = float(growth_factor)
        self._backoff_factor = float(backoff_factor)
        self._growth_interval = int(growth_interval)
        self._growth_tracker = 0
        self._states: dict[int, dict[str, Any]] = {}

    # -- the loop's three calls --------------------------------------------------------------------------------
    def scale(self, outputs):
        """``outputs`` (a tensor, or a list/tuple/iterable of them, nested) multiplied by the scale."""
        if not self._enabled:
            return outputs
        if isinstance(outputs, Tensor):
            return outputs * float(self._scale)
        if isinstance(outputs, Iterable) and not isinstance(outputs, (str, bytes)):
            scaled = map(self.scale, outputs)
            return type(outputs)(scaled) if isinstance(outputs, (list, tuple)) else scaled
        raise ValueError(f"outputs must be a Tensor or an iterable of Tensors, got {type(outputs).__name__}")

    def unscale_(self, optimizer) -> None:
        """Divide ``optimizer``'s gradients by the scale in place (e.g. before ``clip_grad_norm_``) and record
        whether any is inf/NaN. At most once per optimizer between two ``update()`` calls, and before ``step``.

        Raises:
            RuntimeError: called twice, or after ``step``, since the last ``update()``.
            ValueError: a float16 gradient (keep float32 master parameters, as torch requires).
        """
        if not self._enabled:
            return
        st = self._state(optimizer)
        if st["stage"] == _UNSCALED:
            raise RuntimeError("unscale_() has already been called on this optimizer since the last update().")
        if st["stage"] == _STEPPED:
            raise RuntimeError("unscale_() is being called after step().")
        inv = float(np.float32(1.0 / np.float64(self._scale)))  # torch: reciprocal in float64, then float32
        flags = []
        with no_grad():
            for group in optimizer.param_groups:
                for p in group["params"]:
                    g = p.grad
                    if g is None:
                        continue
                    if g.dtype == D.float16:
                        raise ValueError("Attempting to unscale FP16 gradients.")
                    if g.dtype in (D.float32, D.float64):
                        g.mul_(inv)
                    else:  # torch computes in float32 and rounds once
                        g.copy_(g.float() * inv)
                    flags.append((~g.isfinite()).any())
        st["found_inf"] = bool(stack(flags).any().item()) if flags else False
        st["stage"] = _UNSCALED

    def step(self, optimizer, *args, **kwargs):
        """``optimizer.step(*args, **kwargs)`` after unscaling its gradients (unless ``unscale_`` did), skipped
        when any was inf/NaN; returns what ``step`` returned, or None when skipped.

        Raises:
            RuntimeError: a ``closure`` argument, or a second ``step`` before ``update()``.
        """
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError("Closure use is not currently supported if GradScaler is enabled.")
        st = self._state(optimizer)
        if st["stage"] == _STEPPED:
            raise RuntimeError("step() has already been called since the last update().")
        if st["stage"] == _READY:
            self.unscale_(optimizer)
        ret = None if st["found_inf"] else optimizer.step(*args, **kwargs)
        st["stage"] = _STEPPED
        return ret

    def update(self, new_scale: float | Tensor | None = None) -> None:
        """Adapt the scale from the steps since the last update (or set ``new_scale``) and start a new round.

        Raises:
            RuntimeError: no optimizer was unscaled/stepped since the last update.
            ValueError: ``new_scale`` is a tensor of more than one element or one that requires grad.
        """
        if not self._enabled:
            return
        if new_scale is not None:
            if isinstance(new_scale, Tensor):
                if new_scale.numel() != 1 or new_scale.requires_grad:
                    raise ValueError(
                        "new_scale should be a float or a 1-element tensor with requires_grad=False, got a tensor "
                        f"of shape {list(new_scale.shape)} (requires_grad={new_scale.requires_grad})"
                    )
                new_scale = float(new_scale.item())
            self._scale = np.float32(new_scale)
        else:
            recorded = [st["found_inf"] for st in self._states.values() if st["found_inf"] is not None]
            if not recorded:
                raise RuntimeError(
                    "No inf checks were recorded prior to update(): call scaler.step(optimizer) (or "
                    "scaler.unscale_(optimizer)) after backward and before update()"
                )
            if any(recorded):
                self._scale = np.float32(np.float64(self._scale) * self._backoff_factor)
                self._growth_tracker = 0
            else:
                successful = self._growth_tracker + 1
                if successful == self._growth_interval:
                    grown = np.float32(np.float64(self._scale) * self._growth_factor)
                    if np.isfinite(grown):
                        self._scale = grown
                    self._growth_tracker = 0
                else:
                    self._growth_tracker = successful
        self._states = {}

    # -- queries and state ---------------------------------------------------------------------------------------
    def _state(self, optimizer) -> dict[str, Any]:
        return self._states.setdefault(id(optimizer), {"stage": _READY, "found_inf": None})

    def is_enabled(self) -> bool:
        return self._enabled

    def get_scale(self) -> float:
        """The current scale (1.0 when disabled)."""
        return float(self._scale) if self._enabled else 1.0

    def get_growth_factor(self) -> float:
        return self._growth_factor

    def set_growth_factor(self, new_factor: float) -> None:
        self._growth_factor = float(new_factor)

    def get_backoff_factor(self) -> float:
        return self._backoff_factor

    def set_backoff_factor(self, new_factor: float) -> None:
        self._backoff_factor = float(new_factor)

    def get_growth_interval(self) -> int:
        return self._growth_interval

    def set_growth_interval(self, new_interval: int) -> None:
        self._growth_interval = int(new_interval)

    def state_dict(self) -> dict[str, Any]:
        """torch's layout: ``scale``, ``growth_factor``, ``backoff_factor``, ``growth_interval``,
        ``_growth_tracker`` (``{}`` when disabled)."""
        if not self._enabled:
            return {}
        return {
            "scale": self.get_scale(),
            "growth_factor": self._growth_factor,
            "backoff_factor": self._backoff_factor,
            "growth_interval": self._growth_interval,
            "_growth_tracker": self._growth_tracker,
        }

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned (torch's or lazyflow's).

        Raises:
            RuntimeError: an empty dict (saved from a disabled scaler).
            KeyError: a key is missing.
        """
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise RuntimeError(
                "The source state dict is empty, possibly because it was saved from a disabled instance of GradScaler."
            )
        missing = [
            k
            for k in ("scale", "growth_factor", "backoff_factor", "growth_interval", "_growth_tracker")
            if k not in state_dict
        ]
        if missing:
            raise KeyError(f"GradScaler.load_state_dict: missing keys {missing}; got {sorted(state_dict)}")
        self._scale = np.float32(state_dict["scale"])
        self._growth_factor = float(state_dict["growth_factor"])
        self._backoff_factor = float(state_dict["backoff_factor"])
        self._growth_interval = int(state_dict["growth_interval"])
        self._growth_tracker = int(state_dict["_growth_tracker"])

    def __repr__(self) -> str:
        return f"GradScaler(device={self._device!r}, scale={self.get_scale()}, enabled={self._enabled})"
