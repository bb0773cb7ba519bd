"""``lf.random``: torch.random's names -- the global generator's seed and state, and ``fork_rng``.

lazyflow has one generator for every device (``lf.cuda``'s RNG calls act on it too), so ``fork_rng`` saves and
restores that one state whatever ``devices`` it is given.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from ._creation import get_rng_state, initial_seed, manual_seed, seed, set_rng_state
from ._tensor_extras import thread_safe_generator

__all__ = ["set_rng_state", "get_rng_state", "manual_seed", "seed", "initial_seed", "fork_rng", "thread_safe_generator"]


@contextlib.contextmanager
def fork_rng(
    devices=None, enabled: bool = True, _caller: str = "fork_rng", _devices_kw: str = "devices", device_type=None
) -> Iterator[None]:
    """Draws inside the block do not change the draws after it: the global generator's state is saved on entry and
    restored on exit (also when the block raises). ``enabled=False`` makes it a plain block. ``devices`` and
    ``device_type`` are accepted as torch's (there is one generator for all devices here)."""
    if not enabled:
        yield
        return
    state = get_rng_state()
    try:
        yield
    finally:
        set_rng_state(state)
