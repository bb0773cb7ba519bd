"""Eager kernels on disk under lazyflow's own signature, so a fresh process neither traces nor lowers them again.

JAX's persistent cache (``lazyflow._core.compile_cache``) computes its key from the lowered program: a warm start
still traces and lowers every eager kernel to find it (a first ResNet-50 training step: ~60% of the warm start).
This store keys a kernel by what selects it in the eager interpreter instead -- the op, its static attributes, the
operands' shapes, dtypes, weak types and devices, donation, forward or which backward -- plus everything else the
program could depend on: the hash of lazyflow's source files, the default dtype, the JAX settings that change
tracing, ``LAZYFLOW_*`` environment settings, and (through the directory's fingerprint) lazyflow/jax/jaxlib
versions, ``XLA_FLAGS``, the x64 switch and the CPU. A hit deserializes the executable
(``jax.experimental.serialize_executable``'s format) and calls it as a ``jax.stages.Compiled``.

Entries live in the compile cache's directory (``lf.config.compile_cache_info().directory``, names ``k-*.xc``) with its
guarantees: checksummed, written by atomic rename, size-bounded, counted in the same ``hits``/``misses``/``writes``
counters, off with the cache (``LAZYFLOW_COMPILE_CACHE=0``). ``LAZYFLOW_KERNEL_CACHE=0`` turns off only this layer
(eager kernels then go through JAX's cache as every other program). Loading is defensive: the pickled wrapper may
only name the JAX classes an executable is made of (anything else is refused); the loaded executable's argument
types must equal the call's; any failure removes the entry and recompiles -- never an error, never another kernel.
Ops outside the op table, or static attributes without a stable text form, are not stored here.

The eager path's programs outside the op table (an optimizer's fused step, gradient accumulation) use the same
entries through :class:`Program`: keyed by a name the caller gives (the function and what it closes over), the
argument pytree's structure and every leaf's type, plus the same source/settings context; loaded by the same
restricted loader with the same checks.
"""

from __future__ import annotations

import hashlib
import io
import os
import pickle
from pathlib import Path

import jax
import numpy as np
from jax.experimental import serialize_executable as _se

from .._core import compile_cache as _cc
from .._core import dtypes as _D
from .._core.dtypes import DType
from .._core.size import Size
from ..ops.table import REGISTRY

_FORMAT = 1


def enabled_by_env() -> bool:
    """False when ``LAZYFLOW_KERNEL_CACHE=0`` (read once, at import)."""
    return os.environ.get("LAZYFLOW_KERNEL_CACHE", "1") != "0"


ENABLED = enabled_by_env()
# JAX settings that change what a traced function becomes
_JAX_SETTINGS = (
    "jax_enable_x64",
    "jax_default_matmul_precision",
    "jax_numpy_rank_promotion",
    "jax_numpy_dtype_promotion",
    "jax_default_prng_impl",
    "jax_threefry_partitionable",
    "jax_softmax_custom_jvp",
)
# settings that only say where and how much to cache
_ENV_IGNORED = frozenset(
    {
        "LAZYFLOW_COMPILE_CACHE",
        "LAZYFLOW_COMPILE_CACHE_DIR",
        "LAZYFLOW_COMPILE_CACHE_MAX_BYTES",
        "LAZYFLOW_KERNEL_CACHE",
    }
)
# what a serialized eager executable is made of (jax/jaxlib 0.10); a name outside this set is refused on load
_ALLOWED = frozenset(
    {
        ("jax", "P"),
        ("jax._src.core", "ManualAxisType"),
        ("jax._src.core", "MemorySpace"),
        ("jax._src.core", "ShapedArray"),
        ("jax._src.interpreters.pxla", "AllArgsInfo"),
        ("jax._src.interpreters.pxla", "UnloadedMeshExecutable"),
        ("jax._src.layout", "Layout"),
        ("jax._src.linear_util", "DebugInfo"),
        ("jax._src.mesh", "AbstractMesh"),
        ("jax._src.named_sharding", "_unpickle_named_sharding"),
        ("jax._src.sharding_impls", "_unpickle_single_device_sharding"),
        ("jax._src.stages", "ArgInfo"),
        ("jax._src.tree_util", "default_registry"),
        ("jax._src.tree_util", "tracing_registry"),
        ("jaxlib._jax", "DeviceList"),
        ("jaxlib._jax.pytree", "PyTreeDef"),
        ("numpy", "dtype"),
        # the scalar types of ml_dtypes' extension dtypes (a bfloat16 operand's dtype pickles with its type)
        *(
            ("ml_dtypes", n)
            for n in (
                "bfloat16",
                "float8_e4m3fn",
                "float8_e5m2",
                "float8_e4m3fnuz",
                "float8_e5m2fnuz",
                "float8_e4m3b11fnuz",
                "int4",
                "uint4",
            )
        ),
    }
)


class _Refused(pickle.UnpicklingError):
    pass


class _Unstable(Exception):
    pass


# a private JAX class (jax 0.10): a JAX without it leaves the store off (kernels go through JAX's cache), never
# breaks the import
_BASE_UNPICKLER: type[pickle.Unpickler] = getattr(_se, "_JaxPjrtUnpickler", pickle.Unpickler)
if _BASE_UNPICKLER is pickle.Unpickler or not hasattr(_se, "serialize"):  # pragma: no cover - another JAX
    ENABLED = False


class _Unpickler(_BASE_UNPICKLER):
    """JAX's executable unpickler, limited to the names in ``_ALLOWED``; ``dry``: executables are not deserialized
    (the check at write time that an entry will load)."""

    def __init__(self, file, dry: bool = False):
        super().__init__(file, jax.devices()[0].client)  # pyright: ignore[reportCallIssue]
        self.dry = dry

    def find_class(self, module, name):
        if (module, name) not in _ALLOWED:
            raise _Refused(f"{module}.{name}")
        return super().find_class(module, name)

    def persistent_load(self, pid):
        if self.dry and pid[0] == "exec":
            return None
        return super().persistent_load(pid)


_source_hash: str | None = None


def source_hash() -> str:
    """SHA-256 of lazyflow's Python source (paths and contents): an edited op is a new kernel."""
    global _source_hash
    if _source_hash is None:
        root = Path(__file__).resolve().parent.parent
        h = hashlib.sha256()
        for p in sorted(root.rglob("*.py")):
            h.update(str(p.relative_to(root)).encode() + b"\0")
            h.update(p.read_bytes())
        _source_hash = h.hexdigest()
    return _source_hash


_PLAIN = (int, float, bool, str, complex, type(None))


def _stable(x) -> str:
    """A text form of a static attribute or operand description that is the same in every process."""
    t = type(x)
    if t in _PLAIN:
        return f"{t.__name__}:{x!r}"
    if t in (tuple, list, Size):
        return f"{t.__name__}(" + ",".join(_stable(v) for v in x) + ")"
    if isinstance(x, DType):
        return repr(x)
    if t is type and x in _PLAIN:
        return f"type:{x.__name__}"
    if t is slice:
        return f"slice({_stable(x.start)},{_stable(x.stop)},{_stable(x.step)})"
    if x is Ellipsis:
        return "..."
    if isinstance(x, np.dtype):
        return f"np.dtype:{x.str}"
    if isinstance(x, np.generic):
        return f"np.{x.dtype.str}:{x.item()!r}"
    raise _Unstable


def _aval(v) -> str:
    if type(v) in _PLAIN:
        return f"py:{type(v).__name__}"
    sharding = getattr(v, "sharding", None)
    if not isinstance(sharding, jax.sharding.SingleDeviceSharding):  # several devices, or not an array
        raise _Unstable
    return f"{v.dtype.str}{tuple(v.shape)}w{int(v.weak_type)}@{sharding!r}"


def _setting(name: str):
    return getattr(jax.config, name, None)  # None: a setting this JAX does not have


def _context() -> list[str]:
    """What every stored program also depends on: lazyflow's source, the default dtype, JAX's tracing settings and
    lazyflow's own environment settings."""
    return [
        source_hash(),
        repr(_D.get_default_dtype()),
        *(f"{n}={_setting(n)!r}" for n in _JAX_SETTINGS),
        *sorted(f"{k}={v}" for k, v in os.environ.items() if k.startswith("LAZYFLOW_") and k not in _ENV_IGNORED),
    ]


def _on() -> bool:
    # JAX's cache switched off: so is this one
    return ENABLED and _cc.active_store() is not None and bool(_setting("jax_enable_compilation_cache"))


def _name(parts: list[str]) -> str:
    return "k-" + hashlib.sha256("\n".join(parts).encode()).hexdigest()[:40]


def key(op, statics, descs, vals, donate: bool, kind: str) -> str | None:
    """The entry name of this kernel, or None when it is not stored (cache off, an op outside the table, statics
    without a stable text form, operands not on one device)."""
    if not _on() or REGISTRY.get(op.name) is not op:
        return None
    try:
        parts = [
            f"lazyflow-kernel/{_FORMAT}",
            op.name,
            kind,
            f"donate={donate}",
            _stable(tuple(statics)),
            _stable(tuple(d[:2] if type(d) is tuple else d for d in descs)),
            ";".join(_aval(v) for v in vals),
            *_context(),
        ]
    except _Unstable:
        return None
    return _name(parts)


def program_key(ident: str, args: tuple, donate_argnums: tuple[int, ...]) -> str | None:
    """The entry name of a jitted program outside the op table (the optimizer's step, gradient accumulation):
    ``ident`` names the function and everything it closes over that changes the program; the argument pytree's
    structure (its static parts' text included) and every leaf's type are in the key. None when not stored (cache
    off, a structure whose text holds an address, leaves not on one device)."""
    if not _on():
        return None
    leaves, tree = jax.tree_util.tree_flatten(args)
    text = str(tree)
    if " at 0x" in text:  # an object's default repr: not the same in another process
        return None
    try:
        parts = [
            f"lazyflow-program/{_FORMAT}",
            ident,
            f"donate={tuple(donate_argnums)}",
            text,
            ";".join(_aval(v) for v in leaves),
            *_context(),
        ]
    except _Unstable:
        return None
    return _name(parts)


def _expected(v) -> tuple:
    a = jax.typeof(v)
    return (tuple(a.shape), a.dtype, bool(getattr(a, "weak_type", False)))


def load(name: str, vals, donate: bool):
    """``(compiled, hlo_chars)`` stored under ``name`` for operands ``vals``, or None (not there, or unusable:
    then removed and counted as corrupted)."""
    return load_program(name, tuple(vals), (0,) if donate else ())


def _donated_leaves(args: tuple, donate_argnums) -> set[int]:
    out, start = set(), 0
    for i, a in enumerate(args):
        n = len(jax.tree_util.tree_leaves(a))
        if i in donate_argnums:
            out.update(range(start, start + n))
        start += n
    return out


def load_program(name: str, args: tuple, donate_argnums: tuple[int, ...]):
    """``(compiled, hlo_chars)`` stored under ``name`` for positional arguments ``args`` (pytrees) of which
    ``donate_argnums`` are donated, or None (not there, or unusable: then removed and counted as corrupted)."""
    store = _cc.active_store()
    if store is None:
        return None
    blob = store.read(name)
    if blob is None:
        return None
    try:
        fmt, hlo_chars, out_tree, exe = _Unpickler(io.BytesIO(blob)).load()
        if fmt != _FORMAT:
            raise _Refused("format")
        unloaded, args_flat, no_kwargs = _Unpickler(io.BytesIO(exe)).load()
        in_tree = jax.tree_util.tree_structure((args, {}))
        leaves = jax.tree_util.tree_leaves(args)  # None operands are no arguments
        if len(args_flat) != len(leaves):
            raise _Refused("arity")
        donated = _donated_leaves(args, donate_argnums)
        for info, v, i in zip(args_flat, leaves, range(len(leaves))):
            a = info._aval
            if (tuple(a.shape), a.dtype, bool(a.weak_type)) != _expected(v) or info.donated != (i in donated):
                raise _Refused("argument types")
        compiled = jax.stages.Compiled(unloaded.load(), [], in_tree.unflatten(args_flat), out_tree, no_kwargs=no_kwargs)
    except Exception:  # damaged inside a valid checksum, foreign, or from a JAX that builds these differently
        store.discard(name)
        return None
    return compiled, hlo_chars


def fast_call(compiled):
    """The C++ call path a ``Compiled`` builds on its first call (the one a ``jax.jit`` hit takes), so a loaded
    kernel's hit costs what a compiled one's does; the ``Compiled`` itself where there is none."""
    return getattr(compiled, "_call", None) or compiled


def save(name: str, compiled) -> int:
    """Store ``compiled`` under ``name`` (when it round-trips through the restricted loader); returns the length of
    its optimized HLO text (the eager cache's size estimate)."""
    hlo_chars = len(compiled.as_text())
    store = _cc.active_store()
    if store is None:
        return hlo_chars
    try:
        exe, _, out_tree = _se.serialize(compiled)
        blob = pickle.dumps((_FORMAT, hlo_chars, out_tree, exe), protocol=pickle.HIGHEST_PROTOCOL)
        _Unpickler(io.BytesIO(blob), dry=True).load()
        _Unpickler(io.BytesIO(exe), dry=True).load()
    except _Refused as e:  # made of names the loader refuses: worth a word (the allowlist needs the name)
        _cc._warn("serialize", f"an eager kernel is not stored (it names {e}); it is compiled each run")
        return hlo_chars
    except Exception:  # a program this JAX cannot serialize (a sort's comparator): left to recompile, silently
        return hlo_chars
    store.write(name, blob)
    return hlo_chars


class bypass:
    """While compiling a kernel this store keeps: JAX's own cache neither looks it up nor writes it."""

    def __enter__(self):
        _cc._bypass.on = True

    def __exit__(self, *exc):
        _cc._bypass.on = False


_MAX_VARIANTS = (
    64  # signatures a Program keeps an executable for; more are left to jax.jit (never evicted: no reload churn)
)


class Program:
    """A ``jax.jit`` function whose executables are kept in this store too, one per argument structure: a fresh
    process with a warm cache loads the one it needs instead of tracing and lowering the function to find it in
    JAX's cache. ``ident`` (None: not stored) names the function and everything it closes over that changes the
    program (see :func:`program_key`).

    At most ``_MAX_VARIANTS`` signatures get an executable of their own; further ones run the jitted function.
    ``call(sig, *args)``: ``sig`` is the caller's cheap, hashable summary of the arguments (same ``sig``, same
    structure as far as the caller knows); a loaded executable refuses arguments of another type before anything
    runs (``TypeError``), and then the jitted function takes over for that ``sig``.
    """

    def __init__(self, fn, ident: str | None, donate_argnums: tuple[int, ...] = ()):
        self.jitted = jax.jit(fn, donate_argnums=donate_argnums)
        self.ident = ident
        self.donate = donate_argnums
        self.variants: dict = {}

    def call(self, sig, *args):
        fn = self.variants.get(sig)
        if fn is None:
            if len(self.variants) >= _MAX_VARIANTS:  # full: further signatures go through jax.jit's own caches
                return self.jitted(*args)
            return self._first(sig, args)
        try:
            return fn(*args)
        except TypeError:  # the executable's argument check, raised before anything runs
            if fn is self.jitted:
                raise
            self.variants[sig] = self.jitted
            return self.jitted(*args)

    def _first(self, sig, args):
        name = None if self.ident is None else program_key(self.ident, args, self.donate)
        if name is None:
            self._keep(sig, self.jitted)
            return self.jitted(*args)
        stored = load_program(name, args, self.donate)
        if stored is not None:
            compiled = stored[0]
        else:
            with bypass():
                compiled = self.jitted.lower(*args).compile()
            save(name, compiled)
        out = compiled(*args)
        self._keep(sig, fast_call(compiled))
        return out

    def _keep(self, sig, fn) -> None:
        self.variants[sig] = fn
