"""The compile cache across runs: XLA executables kept on disk, so a second process compiles nothing it compiled
before (eager kernels, ``lf.compile`` and ``lf.nn.Graph`` programs alike -- all of them are ``jax.jit`` programs).

lazyflow installs its own store behind JAX's persistent compilation cache (JAX computes the key: the program, the
compile options, the XLA flags, jax/jaxlib versions, the backend). The store adds what the plain file cache lacks:

* **Never a wrong kernel.** Entries live under a directory named by a fingerprint of everything that could make an
  executable unusable here (lazyflow/jax/jaxlib versions, ``XLA_FLAGS``, lazyflow's x64 switch, the CPU model and
  its instruction-set flags). Each entry carries a SHA-256 of its bytes; a damaged or truncated entry is deleted and
  recompiled, never loaded.
* **Safe under concurrent processes.** An entry is written to a private temporary file and renamed into place, so a
  reader sees a whole entry or none; eviction only unlinks files, which readers tolerate.
* **Bounded.** At most ``max_bytes`` (default 2 GiB) on disk after each of this process's writes (other processes'
  writes are seen at the next rescan); the least recently used entries go first.
* **Never in the way.** An unwritable or full directory, or any failure of the store, costs a recompile and one
  warning per process, not an error.
* **Trusted content.** An executable is code: the directory is created private (0700), and one that other users
  can write to is refused with a warning.

Configuration (read at import; :func:`lazyflow.config.set_compile_cache` changes it later, before compiling):
``LAZYFLOW_COMPILE_CACHE=0`` switches it off; ``LAZYFLOW_COMPILE_CACHE_DIR`` relocates it (default
``$XDG_CACHE_HOME/lazyflow`` or ``~/.cache/lazyflow``); ``LAZYFLOW_COMPILE_CACHE_MAX_BYTES`` bounds it. A JAX cache
directory the user set (``JAX_COMPILATION_CACHE_DIR``) is left to JAX.
"""

from __future__ import annotations

import hashlib
import os
import platform
import stat
import threading
import warnings
from dataclasses import dataclass
from pathlib import Path

import jax

from .version import __version__

_MAGIC = b"LFXC1\n"
_SUFFIX = ".xc"
_DEFAULT_MAX_BYTES = 2 << 30
_EVICT_EVERY = 64  # puts between two scans of the directory's size (other processes write too)


@dataclass
class CompileCacheInfo:
    """Counters of this process's use of the cache (``lf.config.compile_cache_info()``)."""

    enabled: bool
    directory: str | None
    hits: int = 0
    misses: int = 0
    writes: int = 0
    corrupted: int = 0
    write_errors: int = 0
    evictions: int = 0
    max_bytes: int = _DEFAULT_MAX_BYTES


def _cpu_fingerprint() -> str:
    model = flags = ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if not model and line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                elif not flags and line.startswith(("flags", "Features")):
                    flags = line.split(":", 1)[1].strip()
                if model and flags:
                    break
    except OSError:
        pass
    return f"{platform.machine()}|{platform.processor()}|{model}|{flags}"


def fingerprint() -> str:
    """What an executable on disk must have been built under to be usable in this process."""
    import jaxlib

    parts = [
        __version__,
        jax.__version__,
        getattr(jaxlib, "__version__", "?"),
        os.environ.get("XLA_FLAGS", ""),
        os.environ.get("LAZYFLOW_X64", "1"),
        _cpu_fingerprint(),
    ]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:20]


def default_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "lazyflow"


class _Warn:
    """One warning per kind per process."""

    def __init__(self):
        self.seen: set[str] = set()

    def __call__(self, kind: str, msg: str) -> None:
        if kind not in self.seen:
            self.seen.add(kind)
            warnings.warn(f"lazyflow compile cache: {msg}", RuntimeWarning, stacklevel=3)


_warn = _Warn()


def _private_dir(path: Path) -> bool:
    """Create ``path`` (0700) if needed; False (with a warning) when it cannot be used safely."""
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = path.stat()
    except OSError as e:
        _warn("dir", f"cannot use {path} ({e}); compiling without it")
        return False
    if hasattr(os, "getuid") and (st.st_uid != os.getuid() or st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)):
        _warn(
            "unsafe",
            f"{path} is writable by other users or owned by another user; executables loaded from it could run "
            "their code, so it is not used (make it private, or set LAZYFLOW_COMPILE_CACHE_DIR)",
        )
        return False
    return True


def _jax_base():
    from jax._src import compilation_cache_interface

    return compilation_cache_interface.CacheInterface


class Store(_jax_base()):  # pyright: ignore[reportGeneralTypeIssues]  # JAX's interface, resolved at import
    """JAX's cache interface over a directory of checksummed, atomically written entries."""

    def __init__(self, path: Path, info: CompileCacheInfo):
        self._path = path
        self.info = info
        self._lock = threading.Lock()
        self._puts = 0
        self._approx = 0  # bytes on disk at the last scan plus this process's writes since
        self._writable = True

    def _file(self, key: str) -> Path:
        return self._path / (key + _SUFFIX)

    def get(self, key: str) -> bytes | None:
        if getattr(_bypass, "on", False):
            return None
        return self.read(key)

    def put(self, key: str, value: bytes) -> None:
        if not getattr(_bypass, "on", False):
            self.write(key, value)

    def read(self, key: str) -> bytes | None:
        """The entry under ``key`` when it is whole (checksum verified), else None (a damaged one is removed)."""
        f = self._file(key)
        try:
            blob = f.read_bytes()
        except FileNotFoundError:
            self.info.misses += 1
            return None
        except OSError as e:
            self.info.misses += 1
            _warn("read", f"cannot read {f} ({e}); recompiling")
            return None
        head = len(_MAGIC) + 32
        value = blob[head:]
        if blob[: len(_MAGIC)] != _MAGIC or hashlib.sha256(value).digest() != blob[len(_MAGIC) : head]:
            self.info.corrupted += 1
            self.info.misses += 1
            _warn("corrupt", f"damaged entry {f.name} removed; recompiling it")
            try:
                f.unlink()
            except OSError:
                pass
            return None
        try:
            os.utime(f)  # least recently used goes first
        except OSError:
            pass
        self.info.hits += 1
        return value

    def discard(self, key: str) -> None:
        """Remove an entry found unusable after its checksum passed (written for another program): a miss."""
        self.info.hits -= 1
        self.info.misses += 1
        self.info.corrupted += 1
        _warn("foreign", f"unusable entry {key} removed; recompiling it")
        try:
            self._file(key).unlink()
        except OSError:
            pass

    def write(self, key: str, value: bytes) -> None:
        """Store ``value`` under ``key``: a private temporary file renamed into place (readers see all or none)."""
        if not self._writable:
            return
        f = self._file(key)
        tmp = self._path / f".{key}.{os.getpid()}.{threading.get_ident()}.tmp"
        try:
            with open(tmp, "wb") as out:
                out.write(_MAGIC + hashlib.sha256(value).digest() + value)
            os.replace(tmp, f)
        except OSError as e:
            self.info.write_errors += 1
            _warn("write", f"cannot write to {self._path} ({e}); this process keeps compiling without saving")
            self._writable = False
            try:
                tmp.unlink()
            except OSError:
                pass
            return
        self.info.writes += 1
        with self._lock:
            self._puts += 1
            self._approx += len(value) + 38
            # rescan when this process's writes may have passed the bound, and now and then for other processes'
            scan = self._approx > self.info.max_bytes or self._puts % _EVICT_EVERY == 1
        if scan:
            self.evict()

    def evict(self) -> None:
        """Remove least recently used entries until the directory holds at most ``max_bytes``."""
        entries = []
        total = 0
        try:
            for e in os.scandir(self._path):
                if e.name.endswith(_SUFFIX):
                    st = e.stat()
                    entries.append((st.st_mtime, st.st_size, e.path))
                    total += st.st_size
        except OSError:
            return
        entries.sort()
        for _, size, p in entries:
            if total <= self.info.max_bytes:
                break
            try:
                os.unlink(p)
                self.info.evictions += 1
            except OSError:
                pass
            total -= size
        with self._lock:
            self._approx = total

    def clear(self) -> None:
        for e in os.scandir(self._path):
            if e.name.endswith(_SUFFIX) or e.name.endswith(".tmp"):
                try:
                    os.unlink(e.path)
                except OSError:
                    pass


_info = CompileCacheInfo(enabled=False, directory=None)
# Set (per thread) while lazyflow compiles a program it stores under a key of its own (the eager kernel store):
# JAX's lookup and write are skipped then, so a program is kept once and counted once
_bypass = threading.local()


def active_store() -> Store | None:
    """The store JAX compiles through now (None: the cache is off, or the user gave JAX a directory of their own)."""
    store = _jax_cache_module()._cache
    return store if isinstance(store, Store) else None


def info() -> CompileCacheInfo:
    return _info


def _jax_cache_module():
    from jax._src import compilation_cache

    return compilation_cache


def configure(enabled: bool, directory: str | os.PathLike | None = None, max_bytes: int | None = None) -> None:
    """Switch the cache on (in ``directory``, or the default) or off; takes effect for programs compiled afterwards.
    ``max_bytes=None`` means the default bound (``LAZYFLOW_COMPILE_CACHE_MAX_BYTES``, else 2 GiB), not the previous one.

    Raises:
        ValueError: ``max_bytes`` below 1.
    """
    global _info
    if max_bytes is not None and max_bytes < 1:
        raise ValueError(f"compile cache max_bytes must be >= 1, got {max_bytes}")
    cc = _jax_cache_module()
    new = CompileCacheInfo(enabled=False, directory=None, max_bytes=max_bytes or _env_max_bytes())
    with cc._cache_initialized_mutex:
        cc._cache = None
        cc._cache_initialized = False
        cc._cache_checked = False
        cc._cache_used = False
    if not enabled:
        jax.config.update("jax_compilation_cache_dir", None)
        _info = new
        return
    root = Path(directory) if directory is not None else default_root()
    path = root / f"xla-{fingerprint()}"
    if not (_private_dir(root) and _private_dir(path)):
        jax.config.update("jax_compilation_cache_dir", None)
        _info = new
        return
    new.enabled, new.directory = True, str(path)
    store = Store(path, new)
    jax.config.update("jax_compilation_cache_dir", str(path))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    # JAX would point XLA's GPU autotuning cache into the directory, which puts the directory's path into every key:
    # left off, keys depend on the program only and a cache directory can be moved or copied
    jax.config.update("jax_persistent_cache_enable_xla_caches", "")
    with cc._cache_initialized_mutex:
        cc._cache = store
        cc._cache_initialized = True
    _info = new


def _env_max_bytes() -> int:
    """``LAZYFLOW_COMPILE_CACHE_MAX_BYTES`` when set (a positive integer), else the default (2 GiB)."""
    limit = os.environ.get("LAZYFLOW_COMPILE_CACHE_MAX_BYTES")
    return int(limit) if limit else _DEFAULT_MAX_BYTES


def install_default() -> None:
    """At import: the cache as the environment says, unless the user gave JAX a cache directory of their own."""
    if os.environ.get("JAX_COMPILATION_CACHE_DIR") or getattr(jax.config, "jax_compilation_cache_dir", None):
        return
    if os.environ.get("LAZYFLOW_COMPILE_CACHE", "1") == "0":
        return
    try:
        configure(True, os.environ.get("LAZYFLOW_COMPILE_CACHE_DIR") or None, _env_max_bytes())
    except Exception as e:  # a JAX without the hooks this needs, a bad setting: run without the cache
        _warn("install", f"not enabled ({type(e).__name__}: {e})")
