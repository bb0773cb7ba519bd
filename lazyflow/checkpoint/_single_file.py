"""The lazyflow layout in one file: the checkpoint directory stored (uncompressed) in a zip archive.

``lf.save(obj, "ckpt.pt")`` (suffix ``.pt``/``.pth``/``.bin``/``.ckpt``) or ``lf.save(obj, f)`` for an open binary
file writes the directory ``lf.save`` would write into a temporary place, then zips it under the member prefix
``lazyflow-checkpoint/``. ``lf.load`` unpacks it into a private temporary directory (member names checked: no
absolute path, no ``..``, nothing outside the prefix; stored members only, so nothing unpacks larger than the file;
zip's CRC-32 checked per member) and loads it there with
the directory loader, so the per-tensor checksums and the ``weights_only`` allowlist apply unchanged.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import zipfile
from typing import IO, Any

from .._core.errors import CheckpointError
from . import _load, _multi, _save

__all__ = ["PREFIX", "SUFFIXES", "save_single", "load_single", "is_single"]

PREFIX = "lazyflow-checkpoint/"
SUFFIXES = (".pt", ".pth", ".bin", ".ckpt")
_MAX_MEMBERS = 1 << 16


def is_single(zf: zipfile.ZipFile) -> bool:
    """Whether a zip archive holds a lazyflow checkpoint (every member under :data:`PREFIX`)."""
    names = zf.namelist()
    return bool(names) and all(n.startswith(PREFIX) for n in names)


def save_single(obj: Any, out: IO[bytes], where: str) -> None:
    """Write ``obj`` as a lazyflow checkpoint zipped into the binary file ``out``.

    Raises:
        CheckpointError: as :func:`lf.save`; several processes (a single file is written by one process).
    """
    if _multi.count() > 1:
        raise CheckpointError(
            f"{where}: a single-file checkpoint is written by one process; with several processes save to a "
            "directory (sharded tensors are written shard by shard there)"
        )
    tmp = tempfile.mkdtemp(prefix="lazyflow-single-")
    try:
        ckpt = os.path.join(tmp, "ckpt")
        try:
            _save.save(obj, ckpt)
        except CheckpointError as e:
            raise type(e)(str(e).replace(f"'{ckpt}'", where)) from e
        with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as zf:
            for root, dirs, files in os.walk(ckpt):
                dirs.sort()
                for name in sorted(files):
                    full = os.path.join(root, name)
                    rel = os.path.relpath(full, ckpt).replace(os.sep, "/")
                    zf.write(full, PREFIX + rel)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _extract(zf: zipfile.ZipFile, dest: str, where: str) -> None:
    infos = zf.infolist()
    if len(infos) > _MAX_MEMBERS:
        raise CheckpointError(f"{where}: {len(infos)} members in the archive; a lazyflow checkpoint has far fewer")
    for info in infos:
        name = info.filename
        rel = name[len(PREFIX) :]
        parts = rel.split("/")
        if (
            not name.startswith(PREFIX)
            or rel.startswith("/")
            or "\\" in rel
            or any(p in ("", ".", "..") for p in parts[:-1])
            or parts[-1] in (".", "..")
        ):
            raise CheckpointError(f"{where}: the archive member {name!r} points outside the checkpoint")
        if info.is_dir():
            continue
        if info.compress_type != zipfile.ZIP_STORED:  # stored only: what unpacks is what the file holds (no bomb)
            raise CheckpointError(
                f"{where}: the archive member {name!r} is compressed; lazyflow writes its single files uncompressed"
            )
        target = os.path.join(dest, *parts)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        try:
            with zf.open(info) as src, open(target, "wb") as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
        except Exception as e:  # zipfile raises BadZipFile, zlib.error, EOFError, NotImplementedError...
            raise CheckpointError(
                f"{where}: the archive member {name!r} cannot be read ({type(e).__name__}: {e}); the file is "
                "damaged or truncated"
            ) from e


def load_single(zf: zipfile.ZipFile, where: str, *, map_location, sharding, weights_only: bool) -> Any:
    """The object in a single-file lazyflow checkpoint (every checksum verified, as a directory load).

    Raises:
        CheckpointError: a member outside the checkpoint, a damaged or truncated member, or as :func:`lf.load`.
    """
    tmp = tempfile.mkdtemp(prefix="lazyflow-single-")
    try:
        _extract(zf, tmp, where)
        try:
            return _load.load(tmp, map_location=map_location, sharding=sharding, weights_only=weights_only)
        except CheckpointError as e:
            raise type(e)(str(e).replace(tmp, where)) from e
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
