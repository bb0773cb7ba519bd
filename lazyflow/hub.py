"""``lf.hub``: torch.hub's weight downloads and local hub entry points.

``load_state_dict_from_url(url)`` downloads a model zoo's weights file once into ``<hub dir>/checkpoints``
(the same directory torch uses: ``$TORCH_HOME/hub``, else ``$XDG_CACHE_HOME/torch/hub``, else
``~/.cache/torch/hub``; ``set_dir`` changes it), so weights torch already downloaded are read from there, and loads
it with :func:`lazyflow.load` (PyTorch ``.pth`` files, safetensors, lazyflow's own format). With ``check_hash``
the file name's ``-<hex>.`` part must be a prefix of the file's SHA-256, as in torch. The download lands in a
temporary file next to its target and is renamed into place only once complete (and its hash checked): an
interrupted download never leaves a truncated file where the next call would read it.

One deliberate difference: ``weights_only`` defaults to True (torch's ``load_state_dict_from_url`` defaults to
False, which unpickles arbitrary objects from a URL); pass ``weights_only=False`` for files that hold pickled
modules.

``load``/``list``/``help`` run a hub directory's ``hubconf.py`` (``source="local"``); GitHub repositories are
not fetched: their ``hubconf.py`` files import torch, which lazyflow never does.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import sys
import tempfile
import urllib.parse
import urllib.request
from builtins import list as _list
from typing import Any

from ._core.errors import ArgumentError, CheckpointError, LazyflowError, NotSupportedError
from .checkpoint import load as _load

__all__ = ["get_dir", "set_dir", "download_url_to_file", "load_state_dict_from_url", "load", "list", "help"]

HASH_REGEX = re.compile(r"-([a-f0-9]*)\.")  # torch's: the hash prefix in a weights file's name
_READ = 1 << 20
_hub_dir: _list[str] = []


class HashMismatchError(CheckpointError):
    """A downloaded file's SHA-256 does not start with the prefix its name (or the caller) promised."""


class IncompleteDownloadError(LazyflowError, OSError):
    """The server sent fewer bytes than it announced (a dropped connection): nothing was kept."""


def get_dir() -> str:
    """The hub directory: the one ``set_dir`` chose, else torch's (``$TORCH_HOME/hub``, else
    ``$XDG_CACHE_HOME/torch/hub``, else ``~/.cache/torch/hub``)."""
    if _hub_dir:
        return _hub_dir[0]
    home = os.getenv("TORCH_HOME") or os.path.join(os.getenv("XDG_CACHE_HOME", "~/.cache"), "torch")
    return os.path.join(os.path.expanduser(home), "hub")


def set_dir(d: str | os.PathLike) -> None:
    """Use ``d`` as the hub directory for this process."""
    _hub_dir[:] = [os.path.expanduser(os.fspath(d))]


def download_url_to_file(url: str, dst: str, hash_prefix: str | None = None, progress: bool = True) -> None:
    """Download ``url`` to the file ``dst``: into a temporary file in ``dst``'s directory, renamed to ``dst`` once
    complete. With ``hash_prefix``, the file's SHA-256 hex digest must start with it.

    Raises:
        HashMismatchError: the digest does not start with ``hash_prefix`` (nothing is written at ``dst``).
        IncompleteDownloadError: fewer bytes arrived than the server announced (an OSError; nothing written).
        OSError: the download or the write fails (``urllib.error.URLError`` for an unreachable URL); no file is
            left at ``dst``.
    """
    dst = os.path.expanduser(os.fspath(dst))
    folder = os.path.dirname(os.path.abspath(dst))
    os.makedirs(folder, exist_ok=True)
    digest = hashlib.sha256() if hash_prefix is not None else None
    request = urllib.request.Request(url, headers={"User-Agent": "lazyflow.hub"})
    fd, tmp = tempfile.mkstemp(prefix=os.path.basename(dst) + ".", suffix=".partial", dir=folder)
    try:
        with os.fdopen(fd, "wb") as out, urllib.request.urlopen(request) as resp:
            total = int(resp.headers.get("Content-Length") or 0)
            done = 0
            while chunk := resp.read(_READ):
                out.write(chunk)
                if digest is not None:
                    digest.update(chunk)
                done += len(chunk)
                if progress and total:
                    sys.stderr.write(f"\r{done / total:6.1%} of {total / 1e6:.1f} MB")
            if progress and total:
                sys.stderr.write("\n")
            if total and done != total:
                raise IncompleteDownloadError(
                    f"{url}: the download stopped after {done} of {total} bytes; nothing was kept, try again"
                )
        if digest is not None and not digest.hexdigest().startswith(hash_prefix or ""):
            raise HashMismatchError(
                f'{url}: invalid hash value (expected "{hash_prefix}", got "{digest.hexdigest()}"); the download '
                "was discarded"
            )
        os.replace(tmp, dst)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def load_state_dict_from_url(
    url: str,
    model_dir: str | None = None,
    map_location=None,
    progress: bool = True,
    check_hash: bool = False,
    file_name: str | None = None,
    weights_only: bool = True,
) -> Any:
    """The object stored in the file at ``url`` (typically a state dict), downloaded once into ``model_dir``
    (default ``<get_dir()>/checkpoints``) under ``file_name`` (default: the URL's last path part) and loaded with
    :func:`lazyflow.load` (``map_location``, ``weights_only`` as there; ``weights_only`` defaults to True here,
    torch's to False). ``check_hash``: the file name's ``-<hex>.`` part must prefix its SHA-256 (checked on
    download, as torch does).

    Raises:
        ArgumentError: ``check_hash`` with a file name that has no ``-<hex>.`` part.
        HashMismatchError: the downloaded file's digest does not match.
        CheckpointError: the file is not one lazyflow reads (or holds objects ``weights_only`` refuses).
    """
    folder = os.path.expanduser(model_dir) if model_dir else os.path.join(get_dir(), "checkpoints")
    os.makedirs(folder, exist_ok=True)
    name = file_name or os.path.basename(urllib.parse.urlparse(url).path)
    if not name:
        raise ArgumentError(f"load_state_dict_from_url: cannot tell a file name from {url!r}; pass file_name=")
    cached = os.path.join(folder, name)
    if not os.path.exists(cached):
        prefix = None
        if check_hash:
            m = HASH_REGEX.search(name)
            if m is None:
                raise ArgumentError(
                    f"load_state_dict_from_url: check_hash=True needs a file name holding its hash as "
                    f"'<name>-<sha256 prefix>.<ext>', got {name!r}"
                )
            prefix = m.group(1)
        if progress:
            sys.stderr.write(f'Downloading: "{url}" to {cached}\n')
        download_url_to_file(url, cached, prefix, progress=progress)
    return _load(cached, map_location=map_location, weights_only=weights_only)


def _hubconf(repo_or_dir: str, source: str):
    if source not in ("github", "local"):
        raise ArgumentError(f'Unknown source: "{source}". Allowed values: "github" | "local".')
    if source == "github" and not os.path.isdir(repo_or_dir):
        raise NotSupportedError(
            f"lf.hub: GitHub repositories ({repo_or_dir!r}) are not fetched -- their hubconf.py imports torch. Clone "
            "it, change its imports to lazyflow, and call lf.hub.load(path, model, source='local')"
        )
    path = os.path.join(os.path.expanduser(repo_or_dir), "hubconf.py")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"lf.hub: no hubconf.py in {repo_or_dir!r}")
    spec = importlib.util.spec_from_file_location("hubconf", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, os.path.dirname(path))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(os.path.dirname(path))
    missing = [d for d in getattr(module, "dependencies", []) if importlib.util.find_spec(d) is None]
    if missing:
        raise RuntimeError(f"Missing dependencies: {', '.join(missing)}")
    return module


def _entry(module, model: str):
    fn = getattr(module, model, None) if isinstance(model, str) and not model.startswith("_") else None
    if fn is None or not callable(fn):
        raise RuntimeError(f"Cannot find callable {model} in hubconf")
    return fn


def load(repo_or_dir: str, model: str, *args, source: str = "github", trust_repo=None, force_reload: bool = False,
         verbose: bool = True, skip_validation: bool = False, **kwargs) -> Any:  # fmt: skip
    """``hubconf.py``'s entry point ``model`` of the directory ``repo_or_dir``, called with ``*args, **kwargs``
    (torch.hub.load with ``source="local"``; a directory path is read as local whatever ``source`` says).

    Raises:
        NotSupportedError: a GitHub repository (not a directory).
        FileNotFoundError: the directory has no ``hubconf.py``.
        RuntimeError: a missing dependency the hubconf lists, or no callable ``model`` in it (torch's messages).
    """
    return _entry(_hubconf(repo_or_dir, source), model)(*args, **kwargs)


def list(github: str, force_reload: bool = False, skip_validation: bool = False, trust_repo=None,
         verbose: bool = True, source: str = "github") -> _list[str]:  # fmt: skip
    """The entry points (public callables) of a hub directory's ``hubconf.py``."""
    module = _hubconf(github, source)
    return [n for n in dir(module) if callable(getattr(module, n)) and not n.startswith("_")]


def help(github: str, model: str, force_reload: bool = False, skip_validation: bool = False, trust_repo=None,
         source: str = "github") -> str:  # fmt: skip
    """The docstring of the entry point ``model`` of a hub directory's ``hubconf.py``."""
    return _entry(_hubconf(github, source), model).__doc__ or ""
