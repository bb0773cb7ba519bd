"""Checkpoints: ``lf.save`` / ``lf.load`` on orbax-checkpoint with pickled metadata.

One layout for eager and graph mode (a state dict is the same whichever mode produced it). Tensor bytes go
through orbax (small tensors packed per dtype, sharded tensors written shard by shard, never gathered);
the structure and every non-tensor value go into a pickled metadata file that references tensors by key and
holds a CRC-32 per tensor. Saves are atomic (a crash leaves the old or the new checkpoint), loads are safe
by default (``weights_only=True``). The on-disk format is documented in ``docs/checkpoint-format.md``.

``lf.load`` also reads PyTorch's ``torch.save`` files and safetensors (one file or sharded), and ``lf.save``
writes a single file (lazyflow's layout zipped, for ``.pt``/``.pth``/``.bin``/``.ckpt`` paths and open files),
PyTorch's format (``format="torch"``) or safetensors (``.safetensors`` paths): see ``_formats.py``.
"""

from ._allowlist import add_safe_globals, clear_safe_globals, get_safe_globals
from ._formats import FORMATS, detect_format, load, save
from ._inspect import inspect
from ._load import load_tensors
from ._meta import FORMAT_VERSION, SavedSharding, TensorInfo
from ._safetensors import metadata as safetensors_metadata
from ._save import SaveHandle
from .manager import CheckpointManager

__all__ = [
    "save",
    "load",
    "load_tensors",
    "inspect",
    "detect_format",
    "FORMATS",
    "safetensors_metadata",
    "CheckpointManager",
    "SaveHandle",
    "TensorInfo",
    "SavedSharding",
    "FORMAT_VERSION",
    "add_safe_globals",
    "get_safe_globals",
    "clear_safe_globals",
]
