"""A donating step's first calls check their indices on the host, with numpy, while the XLA check program compiles
in the background.

``lazyflow.graph.compile`` reduces a donating step (``lf.nn.Graph``) to its checks' summary (the checks of
``lazyflow._core.checks`` and the arrays they read) and runs that first, so a failed check raises before anything is
donated. When the checks read only small integer inputs -- class indices of a loss, token ids of an embedding --
that program is a handful of comparisons and min/max reductions, yet XLA takes 40-100 ms to compile it, and the
first call used to wait for that compile beside the step's own (on 2 cores, an MLP step's first call: 1.24x a
hand-written ``jax.jit`` step's first call, 1.05x with the checks off). :func:`host_checker` turns such a program
into one generated numpy function: the first call compiles only the step, then the check program compiles in a
background thread, and the calls switch to it when it is ready (numpy costs ~35 us per call here, the compiled
program ~10 us).

Taken only: programs made of the primitives below, over integer and boolean values (no floating-point value
anywhere: NaN ordering and float-to-int conversion are where numpy and XLA differ), reading at most
``MAX_ELEMENTS`` input elements; anything else compiles its check program with the step, as before. A numpy error
while evaluating (an empty reduction, say) hands that call and every later one to the compiled program: a result
is never guessed.
"""

from __future__ import annotations

import atexit
import threading
import weakref
from collections.abc import Callable

import numpy as np

__all__ = ["MAX_ELEMENTS", "HostCheck", "host_checker", "stats"]

MAX_ELEMENTS = 1 << 16  # input elements a host check reads at most


class _Stats:
    host_runs = 0  # checks evaluated with numpy
    fallbacks = 0  # host checks handed to the compiled program after a numpy error
    background_compiles = 0  # check programs compiled by HostCheck.compile_in_background


stats = _Stats()

_BINARY = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "max": np.maximum,
    "min": np.minimum,
    "eq": np.equal,
    "ne": np.not_equal,
    "lt": np.less,
    "le": np.less_equal,
    "gt": np.greater,
    "ge": np.greater_equal,
    "and": np.bitwise_and,
    "or": np.bitwise_or,
    "xor": np.bitwise_xor,
}
_UNARY = {"neg": np.negative, "not": np.invert}
_REDUCE = {"reduce_min": np.min, "reduce_max": np.max, "reduce_or": np.any, "reduce_and": np.all, "reduce_sum": np.sum}
_CALLS = ("jit", "pjit", "closed_call", "core_call")


def _select_n(which, *cases):
    if which.dtype == np.bool_:
        return np.where(which, cases[1], cases[0])
    return np.choose(which, cases)  # an index past the cases raises: the compiled program takes over


def _broadcast_in_dim(x, shape, broadcast_dimensions, **_):
    kept = [1] * len(shape)
    for axis, size in zip(broadcast_dimensions, np.shape(x)):
        kept[axis] = size
    return np.broadcast_to(np.reshape(x, kept), shape)


def _dynamic_slice(x, *starts, slice_sizes, **_):
    # XLA clamps each start so that the slice lies inside the operand
    index = []
    for start, dim, size in zip(starts, x.shape, slice_sizes):
        s = min(max(int(start), 0), dim - size)
        index.append(slice(s, s + size))
    return x[tuple(index)]


def _slice(x, start_indices, limit_indices, strides=None, **_):
    strides = strides or (1,) * len(start_indices)
    return x[tuple(slice(a, b, c) for a, b, c in zip(start_indices, limit_indices, strides))]


def _iota(dtype, shape, dimension, **_):
    ramp = np.arange(shape[dimension], dtype=dtype).reshape([-1 if i == dimension else 1 for i in range(len(shape))])
    return np.broadcast_to(ramp, shape)


_OTHER: dict[str, Callable] = {
    "select_n": lambda *xs, **_: _select_n(*xs),
    "broadcast_in_dim": _broadcast_in_dim,
    "dynamic_slice": _dynamic_slice,
    "slice": _slice,
    "iota": lambda **p: _iota(**p),
    "squeeze": lambda x, dimensions, **_: np.squeeze(x, axis=tuple(dimensions)),
    "reshape": lambda x, new_sizes, **_: np.reshape(x, new_sizes),
    "concatenate": lambda *xs, dimension, **_: np.concatenate(xs, axis=dimension),
    "stack": lambda *xs, axis, **_: np.stack(xs, axis=axis),
    "argmax": lambda x, axes, **_: np.argmax(x, axis=axes[0]),
    "argmin": lambda x, axes, **_: np.argmin(x, axis=axes[0]),
    "copy": lambda x, **_: x,
    "copy_p": lambda x, **_: x,
    "convert_element_type": lambda x, **_: x,  # the cast to the output's dtype does the conversion
}


def _exact(aval) -> bool:
    dtype = getattr(aval, "dtype", None)
    return dtype is not None and (np.issubdtype(dtype, np.integer) or dtype == np.bool_)


def _inner(params):
    inner = params.get("jaxpr") or params.get("call_jaxpr")
    return getattr(inner, "jaxpr", inner), getattr(inner, "consts", ())


def _supported(jaxpr) -> bool:
    if not all(_exact(v.aval) for v in (*jaxpr.invars, *jaxpr.constvars)):
        return False
    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        if not all(_exact(v.aval) for v in (*eqn.invars, *eqn.outvars)):
            return False
        if name in _CALLS:
            inner, _ = _inner(eqn.params)
            if inner is None or not _supported(inner):
                return False
        elif name not in _BINARY and name not in _UNARY and name not in _REDUCE and name not in _OTHER:
            return False
    return True


def _cast(x, dtype):
    x = np.asarray(x)
    return x if x.dtype == dtype else x.astype(dtype)


def _codegen(closed_jaxpr) -> Callable:
    """``closed_jaxpr`` as one straight-line Python function of numpy calls, nested calls inlined (interpreting the
    equations one by one costs about twice as much)."""
    ns: dict = {"_cast": _cast, "np": np}
    lines: list[str] = []
    casts: list = []  # (line index after which, value, XLA's dtype)
    count = [0]

    def bind(obj, prefix: str) -> str:
        count[0] += 1
        ns[f"{prefix}{count[0]}"] = obj
        return f"{prefix}{count[0]}"

    def emit(jaxpr, consts, in_names) -> list[str]:
        env = {v: bind(np.asarray(c), "c") for v, c in zip(jaxpr.constvars, consts)}
        env.update(zip(jaxpr.invars, in_names))

        def ref(v) -> str:
            if hasattr(v, "val"):  # a literal
                return bind(np.asarray(v.val, v.aval.dtype), "k")
            return env[v]

        for eqn in jaxpr.eqns:
            args = [ref(v) for v in eqn.invars]
            name, params = eqn.primitive.name, eqn.params
            if name in _CALLS:
                env.update(zip(eqn.outvars, emit(*_inner(params), args)))
                continue
            if name in _BINARY:
                call = f"{bind(_BINARY[name], 'f')}({', '.join(args)})"
            elif name in _UNARY:
                call = f"{bind(_UNARY[name], 'f')}({args[0]})"
            elif name in _REDUCE:
                call = f"{bind(_REDUCE[name], 'f')}({args[0]}, axis={tuple(params['axes'])!r})"
            elif name == "select_n" and len(args) == 3 and eqn.invars[0].aval.dtype == np.bool_:
                call = f"np.where({args[0]}, {args[2]}, {args[1]})"
            elif name in ("argmax", "argmin"):
                call = f"np.{name}({args[0]}, axis={params['axes'][0]!r})"
            elif name == "squeeze":
                call = f"np.squeeze({args[0]}, axis={tuple(params['dimensions'])!r})"
            elif name == "stack":
                call = f"np.stack(({', '.join(args)},), axis={params['axis']!r})"
            elif name in ("copy", "copy_p", "convert_element_type"):
                call = args[0]
            else:
                call = f"{bind(lambda *xs, _f=_OTHER[name], _p=dict(params): _f(*xs, **_p), 'f')}({', '.join(args)})"
            count[0] += 1
            out = f"v{count[0]}"
            lines.append(f"    {out} = {call}")
            casts.append((len(lines), out, np.dtype(eqn.outvars[0].aval.dtype)))
            env[eqn.outvars[0]] = out
        return [ref(v) for v in jaxpr.outvars]

    ins = [f"a{i}" for i in range(len(closed_jaxpr.jaxpr.invars))]
    lines.extend(f"    {a} = np.asarray({a})" for a in ins)  # a CPU jax array is read in place
    (result,) = emit(closed_jaxpr.jaxpr, closed_jaxpr.consts, ins)

    def build(needed, probe: bool):
        body = list(lines)
        for i, (at, out, dtype) in reversed(list(enumerate(casts))):
            if needed[i]:  # XLA's dtype for every value (integer arithmetic wraps as XLA's does)
                body.insert(at, f"    {out} = _cast({out}, {bind(dtype, 'd')})")
            elif probe:
                body.insert(at, f"    _seen[{i}] = np.asarray({out}).dtype")
        source = f"def check({', '.join(ins)}):\n" + "\n".join(body) + f"\n    return _cast({result}, _out)\n"
        exec(compile(source, "<lazyflow host check>", "exec"), ns)  # the source is generated above from a jaxpr
        return ns["check"]

    ns["_out"] = np.dtype(closed_jaxpr.jaxpr.outvars[0].aval.dtype)
    # numpy's result dtypes follow from its operands' dtypes alone: one run on zeros finds the values numpy already
    # computes in XLA's dtype, and only the others are cast (if that run fails, every value is cast)
    ns["_seen"] = seen = {}
    try:
        with np.errstate(all="ignore"):
            build([False] * len(casts), True)(
                *[np.zeros(v.aval.shape, v.aval.dtype) for v in closed_jaxpr.jaxpr.invars]
            )
        return build([seen.get(i) != dtype for i, (_, _, dtype) in enumerate(casts)], False)
    except Exception:
        return build([True] * len(casts), False)


class HostCheck:
    """A check program that starts on the host: calls compute the summary with numpy until
    :meth:`compile_in_background` has compiled the XLA program, then run that. A numpy error hands that call and
    every later one to the compiled program (built on the spot if the thread has not finished)."""

    __slots__ = ("check", "make", "compiled", "thread")

    def __init__(self, check: Callable, make: Callable[[], Callable]) -> None:
        self.check, self.make, self.compiled, self.thread = check, make, None, None

    def __call__(self, *args):
        compiled = self.compiled
        if compiled is not None:
            return compiled(*args)
        try:
            with np.errstate(over="ignore"):
                out = self.check(*args)
        except Exception:
            stats.fallbacks += 1
            self.compiled = compiled = self.make()
            return compiled(*args)
        stats.host_runs += 1
        return out

    @staticmethod
    def signature(args) -> list:
        """``args`` as types for :meth:`compile_in_background` (no array is held: the step may donate one)."""
        import jax

        return [
            jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=a.sharding, weak_type=a.weak_type)
            if isinstance(a, jax.Array)
            else a
            for a in args
        ]

    def compile_in_background(self, shapes) -> None:
        """Compile the XLA check program for ``shapes`` (:meth:`signature`) in a daemon thread, once the step has
        compiled (so the two compiles do not share the first call's cores); calls use it once it is ready."""

        def work():
            try:
                fn = self.make()
                fn.lower(*shapes).compile()  # lands in fn's cache: its first call does not compile
            except Exception:  # left to numpy; a numpy error then compiles in the call and raises as usual
                return
            stats.background_compiles += 1
            self.compiled = fn

        self.thread = threading.Thread(target=work, name="lazyflow-check-compile-later", daemon=True)
        _pending.add(self.thread)
        self.thread.start()


_pending: weakref.WeakSet = weakref.WeakSet()


@atexit.register
def _finish_compiles() -> None:
    """The process must not exit while a background compile is inside XLA (the runtime aborts, "terminate called
    after throwing"): wait for them (small programs, well under a second each)."""
    for t in list(_pending):
        t.join(timeout=30)


def host_checker(closed_jaxpr, make: Callable[[], Callable]) -> HostCheck | None:
    """A :class:`HostCheck` computing ``closed_jaxpr``'s one output (a checks' summary) from its inputs, or None when
    the program does not qualify (see the module docstring). ``make()`` builds the compiled check program (a
    ``jax.jit`` function of the same inputs)."""
    jaxpr = closed_jaxpr.jaxpr
    if len(jaxpr.outvars) != 1 or not _supported(jaxpr):
        return None
    if sum(int(np.prod(v.aval.shape)) for v in jaxpr.invars) > MAX_ELEMENTS:
        return None
    return HostCheck(_codegen(closed_jaxpr), make)
