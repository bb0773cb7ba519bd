"""``lf.save`` / ``lf.load`` over every format: lazyflow's directory, lazyflow's single file, PyTorch's zip
format and safetensors (one file, or sharded with an index). The format is read from the bytes, never trusted
from a file name, when loading; when saving it is the ``format`` argument, else inferred from the target.
"""

from __future__ import annotations

import io
import os
import zipfile
from collections.abc import Callable, Mapping
from typing import IO, Any, Literal, TypeGuard, cast

import jax

from .._core.errors import CheckpointError
from . import _layout, _load, _safetensors, _save, _single_file, _torch_format, _torch_writer
from ._meta import TensorInfo
from ._save import SaveHandle

__all__ = ["load", "save", "detect_format", "FORMATS"]

FORMATS = ("lazyflow", "lazyflow-file", "torch", "safetensors", "safetensors-sharded")
Format = Literal["lazyflow", "torch", "safetensors"]
_ZIP_MAGIC = b"PK\x03\x04"


def _is_file_object(x) -> TypeGuard[IO[bytes]]:
    return hasattr(x, "read") or hasattr(x, "write")


def _abspath(x) -> str:
    return os.path.abspath(os.fspath(cast("str | os.PathLike[str]", x)))


def _sniff(head: bytes, zf_open: Callable[[], zipfile.ZipFile], where: str) -> str:
    if head[:4] == _ZIP_MAGIC or head[:4] == b"PK\x05\x06":
        try:
            with zf_open() as zf:
                if _single_file.is_single(zf):
                    return "lazyflow-file"
                _torch_format.find_archive(zf, where)
                return "torch"
        except CheckpointError:
            raise
        except Exception as e:  # BadZipFile, but a damaged directory can raise others (ValueError, EOFError...)
            raise CheckpointError(
                f"{where}: a zip archive that cannot be read ({e}); the file is truncated or damaged"
            ) from e
    if head[:2] == b"\x80\x02" or head[:1] == b"\x80" and len(head) > 1 and head[1] < 6:
        raise CheckpointError(
            f"{where} is a bare pickle: PyTorch's legacy format (torch < 1.6, or _use_new_zipfile_serialization="
            "False); lazyflow reads the zip format only: re-save it with torch.save(obj, path) in torch >= 1.6"
        )
    if len(head) >= 10 and head[8:9] == b"{":
        return "safetensors"
    raise CheckpointError(
        f"{where} is not a checkpoint lazyflow knows: expected a lazyflow checkpoint (a directory or a single "
        "file), a PyTorch .pt/.pth file or a .safetensors file" + (" (the file is empty)" if not head else "")
    )


def detect_format(source: str | os.PathLike | IO[bytes]) -> str:
    """Which format ``lf.load`` finds at ``source`` (one of :data:`FORMATS`).

    ``"lazyflow"`` (a checkpoint directory), ``"lazyflow-file"`` (the same layout in one file),
    ``"torch"`` (``torch.save``'s zip format), ``"safetensors"``, ``"safetensors-sharded"`` (an index json, or a
    directory holding ``model.safetensors.index.json``). Reads only the first bytes and the zip directory.

    Raises:
        CheckpointError: nothing there, or a file of none of these formats.

    >>> lf.checkpoint.detect_format("resnet18.pth")
    'torch'
    """
    if _is_file_object(source):
        f = source
        pos = f.tell()
        try:
            head = f.read(16)
            f.seek(pos)
            return _sniff(head, lambda: zipfile.ZipFile(f), "the file object")
        finally:
            f.seek(pos)
    path = _abspath(source)
    if os.path.isdir(path):
        return "safetensors-sharded" if os.path.isfile(os.path.join(path, _safetensors.INDEX_NAME)) else "lazyflow"
    if not os.path.exists(path):
        raise CheckpointError(f"no checkpoint at '{path}': the path does not exist")
    if path.endswith(".index.json"):
        return "safetensors-sharded"
    with open(path, "rb") as fh:
        head = fh.read(16)
    return _sniff(head, lambda: zipfile.ZipFile(path), f"'{path}'")


def load(
    f: str | os.PathLike | IO[bytes],
    *,
    map_location: Any = None,
    sharding: jax.sharding.Sharding | Callable[[str, TensorInfo], Any] | None = None,
    weights_only: bool = True,
    mmap: bool = False,
) -> Any:
    """Load a checkpoint: lazyflow's (directory or single file), a ``torch.save`` file, or safetensors.

    The format is found from the contents (:func:`detect_format`). Tensors come back as lazyflow Tensors,
    owning their memory (nothing aliases the file or a buffer the caller holds), except with ``mmap=True``.

    Args:
        f: a path (directory, ``.pt``/``.pth``/``.safetensors`` file, ``*.index.json``) or an open binary file
            / ``io.BytesIO``.
        map_location: where tensors go, as in ``torch.load``: a device (``"cpu"``, ``"cuda:0"``, a Device), a dict
            ``{saved location: device}``, or (PyTorch and safetensors files) a function ``(storage, location)``
            returning the storage (CPU), ``storage.cuda(i)``/``storage.to(device)``, or None (saved location).
            None keeps the saved device (safetensors: the CPU).
        sharding: lazyflow checkpoints only: a ``jax.sharding.Sharding`` or function, see the directory loader.
        weights_only: unpickle with an allowlist (default; torch's allowlist for PyTorch files). False is for
            lazyflow checkpoints you trust; a PyTorch file refuses it (its classes need torch).
        mmap: PyTorch files only: map the file's stored tensor records instead of reading them (the tensors
            may then share the file's pages, as in torch).
    Returns:
        The saved object (a ``{name: Tensor}`` dict for safetensors).
    Raises:
        CheckpointError: an unknown, truncated or damaged file (naming the file and the key), a refused pickle
            (:class:`CheckpointUnpicklingError`), an argument the format does not take.

    >>> model.load_state_dict(lf.load("resnet18.pth"))
    """
    if _is_file_object(f):
        data = f.read()  # the file's bytes become the load's own: nothing aliases the caller's buffer
        if not isinstance(data, bytes):
            raise CheckpointError(f"lf.load expects a binary file (opened 'rb'), got {type(data).__name__} from read()")
        name = getattr(f, "name", None)
        f = io.BytesIO(data)
        f.name = name if isinstance(name, str) else "BytesIO"  # type: ignore[attr-defined]
    fmt = detect_format(f)
    if fmt in ("lazyflow", "lazyflow-file") and mmap:
        raise CheckpointError("lf.load(mmap=True) maps PyTorch files; lazyflow checkpoints are read, not mapped")
    if fmt not in ("lazyflow", "lazyflow-file") and sharding is not None:
        raise CheckpointError(f"lf.load(sharding=...) applies to lazyflow checkpoints; this is a {fmt} file")
    if fmt.startswith("safetensors") and mmap:
        raise CheckpointError("lf.load(mmap=True) maps PyTorch files; safetensors are read (copied) here")
    if _is_file_object(f):
        return _load_file_object(cast(io.BytesIO, f), fmt, map_location, sharding, weights_only)
    path = _abspath(f)
    where = f"'{path}'"
    if fmt == "lazyflow":
        return _load.load(path, map_location=map_location, sharding=sharding, weights_only=weights_only)
    if fmt == "safetensors-sharded":
        index = os.path.join(path, _safetensors.INDEX_NAME) if os.path.isdir(path) else path
        return _safetensors.load_index(index, f"'{index}'", map_location)
    if fmt == "safetensors":
        return _safetensors.load_safetensors(path, where, map_location)
    with _open_zip(path, where) as zf:
        if fmt == "lazyflow-file":
            return _single_file.load_single(
                zf, where, map_location=map_location, sharding=sharding, weights_only=weights_only
            )
        return _torch_format.load_torch(
            zf, where, mmap_path=path if mmap else None, map_location=map_location, weights_only=weights_only
        )


def _open_zip(source, where: str) -> zipfile.ZipFile:
    try:
        return zipfile.ZipFile(source)
    except Exception as e:  # zipfile raises BadZipFile, zlib.error, EOFError, NotImplementedError...
        raise CheckpointError(f"{where}: the zip archive cannot be read ({e}); the file is truncated or damaged") from e


def _load_file_object(f: io.BytesIO, fmt: str, map_location, sharding, weights_only: bool):
    where = f"the file object {f.name!r}"
    data = f.getvalue()
    if fmt == "safetensors":
        return _safetensors.load_safetensors_bytes(data, where, map_location)
    with _open_zip(io.BytesIO(data), where) as zf:
        if fmt == "lazyflow-file":
            return _single_file.load_single(
                zf, where, map_location=map_location, sharding=sharding, weights_only=weights_only
            )
        return _torch_format.load_torch(zf, where, mmap_path=None, map_location=map_location, weights_only=weights_only)


def save(
    obj: Any,
    f: str | os.PathLike | IO[bytes],
    *,
    async_save: bool = False,
    format: Format | None = None,
    metadata: Mapping[str, str] | None = None,
) -> SaveHandle | None:
    """Save ``obj``: a lazyflow checkpoint directory (default), one file, PyTorch's format or safetensors.

    Which one (``format`` None): a ``.safetensors`` path -> safetensors; an open binary file or a path ending in
    ``.pt``/``.pth``/``.bin``/``.ckpt`` -> the lazyflow layout in one file; any other path -> the directory
    (the form for sharded and asynchronous saves). ``format="torch"`` writes a file ``torch.load`` reads
    (``weights_only=True``); ``format="lazyflow"`` a directory, or one file for a file object / suffix above.

    Args:
        obj: what to save (safetensors: a flat ``{name: tensor}`` dict such as a ``state_dict``).
        f: the directory or file path, or an open binary file / ``io.BytesIO``.
        async_save: directories only: return a :class:`SaveHandle` at once (see the directory saver).
        format: ``"lazyflow"``, ``"torch"`` or ``"safetensors"``; None infers it as above.
        metadata: safetensors only: ``{str: str}`` stored in the file's header.
    Returns:
        None, or a :class:`SaveHandle` for ``async_save=True``.
    Raises:
        CheckpointError: an unknown format, an option the format does not take, an object the format cannot
            hold, or a failed write (a path is replaced atomically: the old file stays on failure).

    >>> lf.save(model.state_dict(), "model.pt")
    """
    if format not in (None, "lazyflow", "torch", "safetensors"):
        raise CheckpointError(f"lf.save: format must be 'lazyflow', 'torch' or 'safetensors', got {format!r}")
    is_obj = _is_file_object(f)
    path = None if is_obj else os.path.abspath(os.fspath(_layout.as_path(f, "lf.save")))
    if format is None:
        format = "safetensors" if path is not None and path.endswith(".safetensors") else "lazyflow"
    single = is_obj or format != "lazyflow" or (path is not None and path.endswith(_single_file.SUFFIXES))
    if metadata is not None and format != "safetensors":
        raise CheckpointError("lf.save(metadata=...) is stored by the safetensors format only")
    if not single:
        return _save.save(obj, path, async_save=async_save)  # type: ignore[arg-type]
    if async_save:
        raise CheckpointError(
            f"lf.save(async_save=True) writes checkpoint directories; a {format} single file is written at once "
            "(save to a directory path for an asynchronous save)"
        )
    where = f"'{path}'" if path is not None else "the file object"
    if format == "safetensors":
        _safetensors.save_safetensors(obj, path if path is not None else f, where, metadata)  # type: ignore[arg-type]
        return None
    write = (
        (lambda out: _torch_writer.write_torch(obj, out, where))
        if format == "torch"
        else (lambda out: _single_file.save_single(obj, out, where))
    )
    if path is None:
        write(f)
        return None
    _write_atomically(path, write)
    return None


def _write_atomically(path: str, write: Callable[[IO[bytes]], None]) -> None:
    if os.path.isdir(path):
        raise CheckpointError(f"lf.save: '{path}' is a directory; a single-file save needs a file path")
    if os.path.exists(path):
        try:
            detect_format(path)
        except CheckpointError:
            raise CheckpointError(
                f"lf.save: '{path}' exists and is not a checkpoint; lf.save replaces checkpoints only (remove the file "
                "or save elsewhere)"
            ) from None
    tmp = f"{path}.tmp-{os.getpid()}"
    try:
        with open(tmp, "wb") as out:
            write(out)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except OSError as e:
        raise _save._fail(path, e) from e
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
