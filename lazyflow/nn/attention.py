"""``lf.nn.attention``: torch.nn.attention's backend selection for ``F.scaled_dot_product_attention``.

``sdpa_kernel`` sets ``lf.backends.cuda``'s attention switches for a block, as torch's does, and changes no number:
XLA compiles attention into a kernel of its own choosing (see ``lazyflow.backends.cuda``).
"""

from __future__ import annotations

from collections.abc import Iterable

from .._core.errors import ArgumentError
from ..backends.cuda import SDPBackend, select_sdp

__all__ = ["SDPBackend", "sdpa_kernel", "WARN_FOR_UNFUSED_KERNELS"]

WARN_FOR_UNFUSED_KERNELS = False


def sdpa_kernel(backends: SDPBackend | Iterable[SDPBackend], set_priority: bool = False):
    """A context manager enabling exactly ``backends`` (one or a list of :class:`SDPBackend`) for the block
    (``set_priority`` accepted as torch's: the order would rank them).

    Raises:
        ArgumentError: an entry that is not an ``SDPBackend``.
    """
    chosen = [backends] if isinstance(backends, SDPBackend) else list(backends)
    for b in chosen:
        if not isinstance(b, SDPBackend):
            raise ArgumentError(f"sdpa_kernel: backends must be lf.nn.attention.SDPBackend members, got {b!r}")
    return select_sdp({b: b in chosen for b in SDPBackend})
