"""``lf.stft`` / ``lf.istft`` (and the Tensor methods): torch's short-time Fourier transform and its inverse, written
once over the Tensor API (framing with ``unfold``, ``lf.fft``, overlap-add with ``index_add``), so they run eagerly,
under ``lf.compile``/``lf.nn.Graph`` and differentiate like their parts."""

from __future__ import annotations

import builtins
import math
import warnings

import numpy as np

from ._core import dtypes as D
from ._core.errors import DTypeError, ShapeError, ValueRangeError
from ._creation import arange, ones, zeros
from ._functional import index_add, pad, view_as_real
from ._tensor import Tensor, _Tracer
from .fft import fft, ifft, irfft, rfft

__all__ = ["stft", "istft"]


def _window(fn: str, window, win_length: int, n_fft: int, dtype) -> Tensor:
    if window is None:
        w = ones(win_length, dtype=D.to_real(dtype))
    else:
        w = window
        if w.ndim != 1 or w.shape[0] != win_length:
            raise ShapeError(
                f"{fn}: expected a 1D window tensor of size equal to win_length={win_length}, but got "
                f"window with size {list(w.shape)}"
            )
    if win_length < n_fft:
        left = (n_fft - win_length) // 2
        w = pad(w, (left, n_fft - win_length - left))
    return w


def _lengths(fn: str, n_fft: int, hop_length, win_length):
    hop = n_fft // 4 if hop_length is None else builtins.int(hop_length)
    win = n_fft if win_length is None else builtins.int(win_length)
    if n_fft <= 0 or hop <= 0 or not 0 < win <= n_fft:
        raise ValueRangeError(
            f"{fn}: expected n_fft > 0, hop_length > 0 and 0 < win_length <= n_fft, got n_fft={n_fft}, "
            f"hop_length={hop}, win_length={win}"
        )
    return hop, win


def stft(
    input: Tensor,
    n_fft: int,
    hop_length: int | None = None,
    win_length: int | None = None,
    window: Tensor | None = None,
    center: bool = True,
    pad_mode: str = "reflect",
    normalized: bool = False,
    onesided: bool | None = None,
    return_complex: bool | None = None,
    align_to_window: bool | None = None,
) -> Tensor:
    """The short-time Fourier transform of a ``[L]`` or ``[B, L]`` signal: ``[(B,) n_freq, n_frames]`` complex.

    Frames of ``n_fft`` samples ``hop_length`` apart (default ``n_fft // 4``) are multiplied by ``window`` (default
    all ones; of ``win_length``, centred in ``n_fft``) and transformed; ``center`` pads ``n_fft // 2`` on both sides
    with ``pad_mode``; ``onesided`` (default for real input and window) keeps ``n_fft // 2 + 1`` frequencies;
    ``normalized`` scales by ``n_fft ** -0.5``; ``align_to_window`` (only with ``center=False``) starts each frame
    where its window starts (zero padding of ``(n_fft - win_length) // 2`` first), as torch.

    Raises:
        DTypeError: a real input without ``return_complex`` (torch requires it: pass ``return_complex=True``).
        ValueRangeError: ``n_fft`` not in ``(0, L]`` after padding, or a bad hop/window length.
        ShapeError: an input that is not 1-D or 2-D, or a window of the wrong size.
    """
    x = input
    if not isinstance(x, Tensor):
        raise DTypeError(f"stft(): argument 'input' must be a Tensor, got {type(x).__name__}")
    if return_complex is None:
        if not x.dtype.is_complex and (window is None or not window.dtype.is_complex):
            raise DTypeError(
                "stft requires the return_complex parameter be given for real inputs (as torch); pass "
                "return_complex=True (return_complex=False is deprecated)"
            )
        return_complex = True
    if not return_complex:
        warnings.warn(
            "stft with return_complex=False is deprecated (as in torch): use return_complex=True and lf.view_as_real",
            UserWarning,
            stacklevel=2,
        )
    if center and align_to_window is not None:
        raise ValueRangeError("stft align_to_window should only be set when center = false (as in torch)")
    if x.ndim not in (1, 2):
        raise ShapeError(f"stft: expected a 1D or 2D tensor, got shape {list(x.shape)}")
    hop, win = _lengths("stft", n_fft, hop_length, win_length)
    if not x.dtype.is_inexact:
        x = x.to(D.get_default_dtype())
    batched = x.ndim == 2
    if not batched:
        x = x.unsqueeze(0)
    if center:
        p = n_fft // 2
        x = pad(x.unsqueeze(1), (p, p), mode=pad_mode).squeeze(1)
    elif align_to_window and win < n_fft:
        left = (n_fft - win) // 2
        x = pad(x, (left, n_fft - win - left))
    length = x.shape[-1]
    if not 0 < n_fft <= length:
        raise ValueRangeError(f"stft: expected 0 < n_fft <= {length} (the padded signal length), but got n_fft={n_fft}")
    w = _window("stft", window, win, n_fft, x.dtype)
    frames = x.unfold(-1, n_fft, hop) * w  # [B, n_frames, n_fft]
    complex_in = x.dtype.is_complex or w.dtype.is_complex
    one = (not complex_in) if onesided is None else builtins.bool(onesided)
    if one and complex_in:
        raise DTypeError("stft: onesided=True needs a real input and a real window; pass onesided=False")
    spec = rfft(frames, dim=-1) if one else fft(frames, dim=-1)
    if normalized:
        spec = spec * (1.0 / math.sqrt(n_fft))
    spec = spec.transpose(-1, -2)
    if not batched:
        spec = spec.squeeze(0)
    return spec if return_complex else view_as_real(spec)


def istft(
    input: Tensor,
    n_fft: int,
    hop_length: int | None = None,
    win_length: int | None = None,
    window: Tensor | None = None,
    center: bool = True,
    normalized: bool = False,
    onesided: bool | None = None,
    length: int | None = None,
    return_complex: bool = False,
) -> Tensor:
    """The inverse of :func:`stft` by windowed overlap-add (torch's ``istft``): a ``[(B,) n_freq, n_frames]`` complex
    spectrogram back to a ``[(B,) length]`` signal (default length: ``hop_length * (n_frames - 1)``, less the
    centre padding).

    Raises:
        DTypeError: a real input (pass a complex spectrogram), or ``return_complex=True`` with a onesided input.
        ValueRangeError: the window's overlap-add is zero somewhere (torch's "window overlap add min" check, done
            when the window is concrete), or bad lengths.
        ShapeError: an input that is not 2-D or 3-D, or a frequency count that does not fit ``n_fft``.
    """
    s = input
    if not isinstance(s, Tensor) or not s.dtype.is_complex:
        got = s.dtype.name if isinstance(s, Tensor) else type(s).__name__
        raise DTypeError(f"istft requires a complex-valued input tensor, got {got}; use lf.view_as_complex first")
    if s.ndim not in (2, 3):
        raise ShapeError(f"istft: expected a 2D or 3D complex tensor, got shape {list(s.shape)}")
    hop, win = _lengths("istft", n_fft, hop_length, win_length)
    batched = s.ndim == 3
    if not batched:
        s = s.unsqueeze(0)
    n_freq, n_frames = s.shape[-2], s.shape[-1]
    one = (n_freq != n_fft) if onesided is None else builtins.bool(onesided)
    if one and n_freq != n_fft // 2 + 1:
        raise ShapeError(
            f"istft: a onesided spectrogram needs n_fft // 2 + 1 = {n_fft // 2 + 1} frequencies, got {n_freq}"
        )
    if not one and n_freq != n_fft:
        raise ShapeError(f"istft: a twosided spectrogram needs n_fft = {n_fft} frequencies, got {n_freq}")
    if one and return_complex:
        raise DTypeError("istft: return_complex=True cannot come from a onesided spectrogram; pass onesided=False")
    w = _window("istft", window, win, n_fft, s.dtype)
    spec = s.transpose(-1, -2)  # [B, n_frames, n_freq]
    if normalized:
        spec = spec * math.sqrt(n_fft)
    frames = irfft(spec, n=n_fft, dim=-1) if one else ifft(spec, dim=-1)
    if not return_complex and frames.dtype.is_complex:
        frames = frames.real
    frames = frames * w
    total = n_fft + hop * (n_frames - 1)
    idx = (arange(n_frames).unsqueeze(1) * hop + arange(n_fft).unsqueeze(0)).reshape(-1)
    b = frames.shape[0]
    y = index_add(zeros(b, total, dtype=frames.dtype), 1, idx, frames.reshape(b, n_frames * n_fft))
    wsq = (w * w.conj()).real if w.dtype.is_complex else w * w
    env = index_add(zeros(total, dtype=wsq.dtype), 0, idx, wsq.expand(n_frames, n_fft).reshape(-1))
    start = n_fft // 2 if center else 0
    end = total - (n_fft // 2 if center else 0)
    if length is not None:
        end = start + builtins.int(length)
    kept_end = builtins.min(end, total)
    if not isinstance(env._value, _Tracer):
        e = np.asarray(env._value)[start:kept_end]
        if e.size and np.abs(e).min() < 1e-11:
            raise ValueRangeError(
                f"istft: window overlap add min: {np.abs(e).min():g} < 1e-11 (the window and hop_length do not "
                "satisfy the NOLA condition, so the signal cannot be recovered)"
            )
    y = y[:, start:kept_end] / env[start:kept_end]
    if end > total:
        y = pad(y, (0, end - total))
    return y if batched else y.squeeze(0)
