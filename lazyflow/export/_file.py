"""``lf.export.save`` / ``lf.export.load``: an exported program inside an ordinary lazyflow checkpoint.

The checkpoint holds one dict (``docs/checkpoint-format.md``, "Exported programs")::

    {"format": "lazyflow.export", "version": 1, "program": bytes, "sha256": hex str, "state_dict": {name: Tensor}}

The weights are ordinary checkpoint tensors (``lf.load(path)["state_dict"]`` reads them like any state dict); the
program is ``jax.export``'s serialization, checked against its SHA-256 before it is deserialized.
"""

from __future__ import annotations

import hashlib
import os

import jax.export as jex

from .._core.errors import CheckpointError
from .._tensor import Tensor
from ..checkpoint import load as _load
from ..checkpoint import save as _save
from ._program import ExportedProgram

__all__ = ["save", "load", "FORMAT", "VERSION"]

FORMAT = "lazyflow.export"
VERSION = 1


def save(ep: ExportedProgram, f: str | os.PathLike) -> None:
    """Write ``ep`` (program and weights) as a lazyflow checkpoint directory at ``f`` (atomic, like ``lf.save``).

    >>> lf.export.save(ep, "model.lfexport")
    """
    if not isinstance(ep, ExportedProgram):
        raise TypeError(f"lf.export.save expects an ExportedProgram (from lf.export.export), got {type(ep).__name__}")
    program = bytes(ep.exported.serialize())
    _save(
        {
            "format": FORMAT,
            "version": VERSION,
            "program": program,
            "sha256": hashlib.sha256(program).hexdigest(),
            "state_dict": dict(ep.state_dict),
        },
        f,
    )


def _bad(f, why: str) -> CheckpointError:
    return CheckpointError(f"lf.export.load({os.fspath(f)!r}): {why}; write the file with lf.export.save")


def load(f: str | os.PathLike) -> ExportedProgram:
    """Read a program written by :func:`save`; the result runs without the model's Python class.

    Raises:
        CheckpointError: not a lazyflow checkpoint, not an exported program, a corrupt program or weights.
    """
    obj = _load(f)  # weights_only: tensors checked against their CRC-32
    if not (isinstance(obj, dict) and obj.get("format") == FORMAT):
        raise _bad(f, "not an exported program (a checkpoint without the 'lazyflow.export' format tag)")
    if obj.get("version") != VERSION:
        raise _bad(f, f"export format version {obj.get('version')!r}; this lazyflow reads version {VERSION}")
    program, digest, sd = obj.get("program"), obj.get("sha256"), obj.get("state_dict")
    if not isinstance(program, bytes) or not isinstance(sd, dict):
        raise _bad(f, "the program bytes or the state dict are missing")
    if hashlib.sha256(program).hexdigest() != digest:
        raise _bad(f, "the program's SHA-256 does not match the one stored with it (the file is corrupt)")
    if not all(isinstance(k, str) and isinstance(v, Tensor) for k, v in sd.items()):
        raise _bad(f, "the state dict holds something other than named tensors")
    try:
        exported = jex.deserialize(bytearray(program))
    except Exception as e:  # flatbuffer parsing raises assorted errors on garbage
        raise _bad(f, f"the program does not deserialize ({type(e).__name__}: {e})") from e
    n = len(sd)
    avals = exported.in_avals[:n]
    if exported.in_tree.num_leaves < n or len(avals) != n:
        raise _bad(f, f"the program takes {len(exported.in_avals)} inputs but {n} weights are stored")
    for (k, t), av in zip(sorted(sd.items()), avals):
        if tuple(t.shape) != tuple(av.shape):
            raise _bad(f, f"weight {k!r} has shape {tuple(t.shape)}, the program expects {tuple(av.shape)}")
    return ExportedProgram(exported, sd)
