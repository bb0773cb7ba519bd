"""Checkpoints: ``lf.save`` / ``lf.load`` on orbax-checkpoint with pickled metadata.

One layout for eager and graph mode (a state dict is the same whichever mode produced it). Tensor bytes go
through orbax (small tensors packed per dtype, sharded tensors written shard by shard, never gathered);
the structure and every non-tensor value go into a pickled metadata file that references tensors by key and
holds a CRC-32 per tensor. Saves are atomic (a crash leaves the old or the new checkpoint), loads are safe
by default (``weights_only=True``). The on-disk format is documented in ``docs/checkpoint-format.md``.
"""

from ._allowlist import add_safe_globals, clear_safe_globals, get_safe_globals
from ._load import load, load_tensors
from ._meta import FORMAT_VERSION, SavedSharding, TensorInfo, inspect
from ._save import SaveHandle, save
from .manager import CheckpointManager

__all__ = [
    "save",
    "load",
    "load_tensors",
    "inspect",
    "CheckpointManager",
    "SaveHandle",
    "TensorInfo",
    "SavedSharding",
    "FORMAT_VERSION",
    "add_safe_globals",
    "get_safe_globals",
    "clear_safe_globals",
]
