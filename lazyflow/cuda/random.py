"""``lf.cuda.random``: torch.cuda's RNG calls over lazyflow's one generator.

lazyflow draws every device's random numbers from one generator (``lf.default_generator``), so with a GPU these
calls act on it (a GPU's state is that generator's state; ``*_all`` lists it once per GPU). Without a GPU they answer
as torch's CPU build: the seeding and state-setting calls do nothing, ``get_rng_state_all()`` is ``[]``, and
``get_rng_state()``/``initial_seed()`` raise :class:`lazyflow.NoCudaError` (an AssertionError, as in torch).
"""

from __future__ import annotations

from collections.abc import Iterable

from .._creation import get_rng_state as _get_state
from .._creation import initial_seed as _initial_seed
from .._creation import manual_seed as _manual_seed
from .._creation import seed as _seed
from .._creation import set_rng_state as _set_state
from .._tensor import Tensor
from ._common import DeviceLike, device_count, is_available, jax_device

__all__ = [
    "manual_seed",
    "manual_seed_all",
    "seed",
    "seed_all",
    "initial_seed",
    "get_rng_state",
    "get_rng_state_all",
    "set_rng_state",
    "set_rng_state_all",
]


def manual_seed(seed: int) -> None:
    """torch.cuda.manual_seed. lazyflow has one generator for every device, so with a GPU this seeds it (as
    ``lf.manual_seed`` does, CPU draws included); without one it does nothing, as torch's CPU build."""
    seed = int(seed)
    if is_available():
        _manual_seed(seed)


def manual_seed_all(seed: int) -> None:
    """torch.cuda.manual_seed_all: the same as :func:`manual_seed` (one generator serves every GPU)."""
    manual_seed(seed)


def seed() -> None:
    """Reseed the generator from the operating system's entropy with a GPU (``lf.seed()``); a no-op without one."""
    if is_available():
        _seed()


def seed_all() -> None:
    """The same as :func:`seed` (one generator serves every GPU)."""
    seed()


def initial_seed() -> int:
    """The generator's seed.

    Raises:
        NoCudaError: JAX has no GPU (an AssertionError, as torch's CPU build raises).
    """
    jax_device(None, "initial_seed()")
    return _initial_seed()


def get_rng_state(device: DeviceLike = "cuda") -> Tensor:
    """The generator's state as a uint8 tensor (``lf.get_rng_state()``).

    Raises:
        NoCudaError: JAX has no GPU (an AssertionError, as torch's CPU build raises, whatever ``device``).
        ValueRangeError: a non-cuda device or an index past the last GPU.
    """
    jax_device(device, "get_rng_state()")
    return _get_state()


def get_rng_state_all() -> list[Tensor]:
    """:func:`get_rng_state` once per GPU (``[]`` without one)."""
    return [_get_state() for _ in range(device_count())]


def set_rng_state(new_state: Tensor, device: DeviceLike = "cuda") -> None:
    """Restore the generator's state from :func:`get_rng_state`'s tensor; a no-op without a GPU (torch's CPU build
    queues it for a CUDA initialization that never comes).

    Raises:
        ValueRangeError: a non-cuda device or an index past the last GPU.
        ShapeError: not a 3-element state (see ``lf.set_rng_state``).
    """
    if is_available():
        jax_device(device, "set_rng_state()")
        _set_state(new_state)


def set_rng_state_all(new_states: Iterable[Tensor]) -> None:
    """:func:`set_rng_state` for each GPU in turn (one generator: the last state given stays); a no-op without a
    GPU."""
    for i, state in enumerate(new_states):
        set_rng_state(state, i)
