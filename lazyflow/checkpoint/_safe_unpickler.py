"""The ``weights_only`` unpickler: a small pickle machine of lazyflow's own (as torch's weights-only loader).

:mod:`pickle`'s unpickler only lets a subclass filter ``find_class``; it still applies ``BUILD`` to any object,
resolves dotted names and consults the ``copyreg`` extension registry. This machine runs a pickle itself:

* only the opcodes that protocol 4 and 5 pickles of plain data use (no ``INST``/``OBJ``, no ``EXT1/2/4``, no
  text ``PERSID``, no out-of-band buffers, no protocol 0-3 text opcodes);
* globals come from the exact table of :mod:`._allowlist` -- nothing is imported, no dotted name resolved;
* ``REDUCE`` calls only the allowlist's argument-checking constructors and the types added with
  ``add_safe_globals``; ``NEWOBJ`` creates added types only;
* ``BUILD`` (``__setstate__``) applies to dtypes this load built (their byte order only), to ``OrderedDict``
  attributes that shadow nothing (torch's ``_metadata``), and to added types;
* appends/setitems/additems go to lists, deques, dicts, sets and added types only;
* hashing is bounded: a dict key or set member may be nested 64 levels deep, and a load hashes at most
  ``max(2**20, 8 * len(pickle))`` tuple/frozenset nodes (a pickle can share one tuple 2**100 times).

Everything else raises :class:`CheckpointUnpicklingError` before it is called or applied.
"""

from __future__ import annotations

import collections
import pickle
import pickletools
import struct
from collections.abc import Callable
from typing import Any, cast

import numpy as np

from .._core.errors import CheckpointUnpicklingError
from . import _allowlist as A

_CODE2OP = {o.code: o for o in pickletools.opcodes}  # pickletools.code2op, which the stubs do not declare

__all__ = ["SafeUnpickler", "Profile", "LAZYFLOW", "KEY_DEPTH", "HASH_BUDGET"]

MIN_PROTOCOL, MAX_PROTOCOL = 4, 5  # lazyflow writes 5; 4 is pickle.dumps' default before Python 3.14
KEY_DEPTH = 64
HASH_BUDGET = 1 << 20

_MARK = object()  # what MARK pushes onto the stack
(
    _BINGET,
    _MEMOIZE,
    _MARK_OP,
    _BININT1,
    _SHORT_BINUNICODE,
    _NONE,
    _NEWFALSE,
    _NEWTRUE,
    _EMPTY_DICT,
    _EMPTY_LIST,
    _BININT2,
    _BININT,
    _SETITEMS,
    _APPEND,
) = (
    op[0]
    for op in (
        pickle.BINGET,
        pickle.MEMOIZE,
        pickle.MARK,
        pickle.BININT1,
        pickle.SHORT_BINUNICODE,
        pickle.NONE,
        pickle.NEWFALSE,
        pickle.NEWTRUE,
        pickle.EMPTY_DICT,
        pickle.EMPTY_LIST,
        pickle.BININT2,
        pickle.BININT,
        pickle.SETITEMS,
        pickle.APPEND,
    )
)
_I4, _U2, _U4, _U8, _F8 = (struct.Struct(f).unpack_from for f in ("<i", "<H", "<I", "<Q", ">d"))


class Profile:
    """What one kind of pickle may contain: its globals table, the calls ``REDUCE`` may make, the lowest
    protocol, and extra opcodes (PyTorch's protocol 2 pickles memoize with ``BINPUT``/``LONG_BINPUT``)."""

    def __init__(
        self,
        name: str,
        globals_table: dict[tuple[str, str], Any],
        calls: dict[int, tuple[Any, Callable]],
        *,
        min_protocol: int = MIN_PROTOCOL,
        extra_ops: dict[int, Callable[[SafeUnpickler], None]] | None = None,
        allowed_doc: str = ("containers, numbers, strings, numeric numpy and lazyflow dtypes, devices, tensors"),
    ):
        self.name = name
        self.globals = globals_table
        self.calls = calls
        self.min_protocol = min_protocol
        self.dispatch = {**_DISPATCH_BASE, **(extra_ops or {})}
        self.allowed_doc = allowed_doc
        self.writer, self.writes = ("lazyflow", MAX_PROTOCOL) if name == "metadata" else ("torch.save", 2)


class _Stop(Exception):
    def __init__(self, value):
        self.value = value


class SafeUnpickler:
    """One load. ``allow_globals=False`` admits plain values only (the metadata record)."""

    def __init__(
        self,
        data: bytes,
        persistent_load: Callable[[Any], Any] | None,
        where: str,
        *,
        allow_globals: bool,
        profile: Profile | None = None,
    ):
        self.profile = profile or LAZYFLOW
        self.data = bytes(data)
        self.pos = 0
        self.where = where
        self.allow_globals = allow_globals
        self.load_pid = persistent_load
        self.stack: list = []
        self.memo: dict[int, Any] = {}
        self.built: dict[int, Any] = {}  # id -> dtype this load created (BUILD may set its byte order)
        self.costs: dict[int, tuple] = {}  # id(tuple/frozenset) -> (obj, nodes, height)
        self.budget = max(HASH_BUDGET, 8 * len(self.data))

    def fail(self, msg: str):
        raise CheckpointUnpicklingError(f"{self.where}: {msg}")

    def load(self) -> Any:
        data = self.data
        lo, what = self.profile.min_protocol, self.profile.name
        span = "4/5" if lo == 4 else f"{lo}..{MAX_PROTOCOL}"
        if data[:1] != pickle.PROTO or len(data) < 2:
            self.fail(
                f"the {what} is not a protocol {span} pickle "
                f"({self.profile.writer} writes protocol {self.profile.writes})"
            )
        if not lo <= data[1] <= MAX_PROTOCOL:
            self.fail(
                f"the {what} is a protocol {data[1]} pickle; {self.profile.writer} writes protocol "
                f"{self.profile.writes} and reads {lo}..{MAX_PROTOCOL}"
            )
        data, stack, memo, dispatch, n = self.data, self.stack, self.memo, self.profile.dispatch, len(self.data)
        push = stack.append
        pos = 2
        # The most frequent opcodes of a state dict's pickle run inline (no call, no attribute access); the
        # rest go through _DISPATCH with self.pos synchronised.
        try:
            while True:
                op = data[pos]
                pos += 1
                if op == _BINGET:
                    push(memo[data[pos]])
                    pos += 1
                elif op == _MEMOIZE:
                    if stack[-1] is _MARK:
                        break
                    memo[len(memo)] = stack[-1]
                elif op == _MARK_OP:
                    push(_MARK)
                elif op == _BININT1:
                    push(data[pos])
                    pos += 1
                elif op == _SHORT_BINUNICODE:
                    end = pos + 1 + data[pos]
                    if end > n:
                        break
                    push(data[pos + 1 : end].decode("utf-8", "surrogatepass"))
                    pos = end
                elif op == _NONE:
                    push(None)
                elif op == _NEWFALSE:
                    push(False)
                elif op == _NEWTRUE:
                    push(True)
                elif op == _EMPTY_DICT:
                    push({})
                elif op == _EMPTY_LIST:
                    push([])
                elif op == _BININT2:
                    push(data[pos] | data[pos + 1] << 8)
                    pos += 2
                elif op == _BININT:
                    push(_I4(data, pos)[0])
                    pos += 4
                elif op == _SETITEMS:  # plain dicts with str/int keys inline, the rest as op_setitems
                    self.pos = pos
                    items = self.pop_mark()
                    target = stack[-1]
                    if type(target) is dict and all(type(k) is str or type(k) is int for k in items[::2]):
                        target.update(zip(items[::2], items[1::2]))
                    else:
                        self.op_setitems(items)
                elif op == _APPEND and type(stack[-2]) is list and stack[-1] is not _MARK:
                    stack[-2].append(stack.pop())
                else:
                    fn = dispatch.get(op)
                    self.pos = pos
                    if fn is None:
                        self.refuse_opcode(op)
                    fn(self)
                    pos = self.pos
        except _Stop as stop:
            return stop.value
        except (IndexError, KeyError, UnicodeDecodeError, struct.error):  # a read past the end, a pop from an
            pass  # empty stack, a missing memo entry, a string that is not UTF-8
        self.fail(f"the metadata pickle is truncated or malformed (at byte {pos} of {n})")

    def refuse_opcode(self, op: int):
        info = _CODE2OP.get(chr(op))
        name = f"{info.name} ({bytes([op])!r})" if info else f"{bytes([op])!r} (not a pickle opcode)"
        self.fail(
            f"weights_only load refused the opcode {name} at byte {self.pos - 1}: lazyflow's metadata never "
            "contains it. If you trust where this checkpoint came from, load it with weights_only=False"
        )

    # ---------------------------------------------------------------- reading
    def take(self, n: int) -> bytes:
        end = self.pos + n
        if n < 0 or end > len(self.data):
            self.fail(f"the metadata pickle is truncated (needs {n} bytes at byte {self.pos} of {len(self.data)})")
        out = self.data[self.pos : end]
        self.pos = end
        return out

    def unpack(self, fn, size: int):
        if self.pos + size > len(self.data):
            self.fail(f"the metadata pickle is truncated (needs {size} bytes at byte {self.pos} of {len(self.data)})")
        v = fn(self.data, self.pos)[0]
        self.pos += size
        return v

    def pop(self):
        v = self.stack.pop()
        if v is _MARK:
            self.fail(f"the metadata pickle is malformed (a MARK where a value was expected, byte {self.pos})")
        return v

    def top(self):
        v = self.stack[-1]
        if v is _MARK:
            self.fail(f"the metadata pickle is malformed (a MARK where a value was expected, byte {self.pos})")
        return v

    def pop_mark(self) -> list:
        stack = self.stack
        for i in range(len(stack) - 1, -1, -1):
            if stack[i] is _MARK:
                items = stack[i + 1 :]
                del stack[i:]
                return items
        self.fail(f"the metadata pickle is malformed (no MARK before byte {self.pos})")

    # ---------------------------------------------------------------- values
    def op_stop(self):
        value = self.pop()
        if self.stack:
            self.fail("the metadata pickle is malformed (values left on the stack at STOP)")
        raise _Stop(value)

    def op_frame(self):
        self.take(8)  # the next frame's length: the data are in memory already

    def op_pop(self):
        if self.stack[-1] is _MARK:
            self.pop_mark()
        else:
            self.stack.pop()

    def op_text(self, n: int):
        try:
            self.stack.append(self.take(n).decode("utf-8", "surrogatepass"))
        except UnicodeDecodeError:
            self.fail(f"a string ending at byte {self.pos} is not UTF-8")

    def op_long(self, n: int):
        self.stack.append(int.from_bytes(self.take(n), "little", signed=True))

    def op_tuple_n(self, k: int):
        stack = self.stack
        if len(stack) < k or any(x is _MARK for x in stack[len(stack) - k :]):
            self.fail(f"the metadata pickle is malformed (TUPLE{k} at byte {self.pos})")
        items = tuple(stack[len(stack) - k :])
        del stack[len(stack) - k :]
        stack.append(items)

    # ---------------------------------------------------------------- containers
    def op_appends(self, items: list):
        target = self.top()
        t = type(target)
        if t is list or t is collections.deque:
            target.extend(items)
        elif A.user_object(t):
            extend = getattr(target, "extend", None)
            if extend is not None:
                extend(items)
            else:
                for item in items:
                    target.append(item)
        else:
            self.fail(
                f"weights_only load refused APPENDS to {_describe(target)} (lists and deques only, and types "
                "added with add_safe_globals)"
            )

    def op_setitems(self, items: list):
        target = self.top()
        t = type(target)
        if len(items) % 2:
            self.fail("the metadata pickle is malformed (SETITEMS with an odd number of items)")
        if not (t is dict or t is collections.OrderedDict or t is collections.defaultdict or A.user_object(t)):
            self.fail(
                f"weights_only load refused SETITEMS on {_describe(target)} (dicts only, and types added "
                "with add_safe_globals)"
            )
        check = self.check_hashable
        for i in range(0, len(items), 2):
            k = items[i]
            if type(k) is tuple or type(k) is frozenset:
                check(k)
            target[k] = items[i + 1]

    def op_additems(self, items: list):
        target = self.top()
        t = type(target)
        for item in items:
            self.check_hashable(item)
        if t is set:
            target.update(items)
        elif A.user_object(t):
            for item in items:
                target.add(item)
        else:
            self.fail(f"weights_only load refused ADDITEMS on {_describe(target)}")

    def op_frozenset(self):
        items = self.pop_mark()
        for item in items:
            self.check_hashable(item)
        self.stack.append(frozenset(items))

    # ---------------------------------------------------------------- globals, calls, state
    def op_global(self):
        end = self.data.find(b"\n", self.pos)
        end2 = self.data.find(b"\n", end + 1) if end >= 0 else -1
        if end2 < 0:
            self.fail("the metadata pickle is truncated (a GLOBAL without its two lines)")
        try:
            module, name = self.take(end - self.pos).decode(), self.take(end2 - end)[1:].decode()
        except UnicodeDecodeError:
            self.fail("a GLOBAL name is not UTF-8")
        self.pos += 1
        self.stack.append(self.find_class(module, name))

    def op_stack_global(self):
        name, module = self.pop(), self.pop()
        if type(module) is not str or type(name) is not str:
            self.fail(
                f"weights_only load refused STACK_GLOBAL with the operands {A.short(module)}, {A.short(name)} "
                "(expected two strings)"
            )
        self.stack.append(self.find_class(module, name))

    def find_class(self, module: str, name: str):
        full = f"{module}.{name}"
        if not self.allow_globals:
            self.fail(
                f"the metadata record refers to the global '{full}'; the record holds plain values only "
                "(dicts, lists, tuples, strings, bytes, numbers), never a global"
            )
        obj = A.user_global(full)  # the exact registered name: nothing is resolved
        if obj is not None:
            return obj
        table = self.profile.globals
        if "." not in name and (module, name) in table:
            return table[(module, name)]
        why = (
            (
                "dotted names are never resolved (an attribute walk reaches anything: 'numpy.dtypes' + "
                "'__builtins__.get' reaches eval)"
            )
            if "." in name
            else (f"it is not one of the types lazyflow allows ({self.profile.allowed_doc})")
        )
        self.fail(
            f"weights_only load refused the global '{full}': {why}. Unpickling it could run arbitrary code. "
            "If you trust where this checkpoint came from, load it with weights_only=False, or allow the type "
            "with lf.checkpoint.add_safe_globals([...])"
        )

    def op_reduce(self):
        args = self.pop()
        func = self.top()
        if type(args) is not tuple:
            self.fail(f"the metadata pickle is malformed (REDUCE arguments are {_describe(args)})")
        hit = self.profile.calls.get(id(func))
        if hit is not None and hit[0] is func:
            try:
                result = hit[1](*args)
            except A.BadArguments as e:
                self.fail(f"weights_only load refused a call: {e}")
            if func is np.dtype:
                self.built[id(result)] = result
        elif A.user_object(func):
            result = func(*args)
        else:
            self.fail(
                f"weights_only load refused to call {_describe(func)}: it calls only the constructors of the "
                "allowlisted types"
            )
        self.stack[-1] = result

    def op_newobj(self, with_kwargs: bool):
        kwargs = self.pop() if with_kwargs else {}
        args, cls = self.pop(), self.pop()
        if type(args) is not tuple or type(kwargs) is not dict or not all(type(k) is str for k in kwargs):
            self.fail("the metadata pickle is malformed (NEWOBJ arguments)")
        if not (isinstance(cls, type) and A.user_object(cls)):
            self.fail(
                f"weights_only load refused to create {_describe(cls)} with NEWOBJ: only types added with "
                "add_safe_globals are created that way. If you trust where this checkpoint came from, load it "
                "with weights_only=False"
            )
        self.stack.append(cls.__new__(cls, *args, **kwargs))

    def op_build(self):
        state = self.pop()
        inst = self.top()
        t = type(inst)
        if self.built.get(id(inst)) is inst:
            self.build_dtype(inst, state)
        elif t is collections.OrderedDict:
            self.check_attrs(state, inst, shadow_ok=False)
            inst.__dict__.update(state)
        elif A.user_object(t):
            setstate = getattr(t, "__setstate__", None)
            if setstate is not None:
                setstate(inst, state)
                return
            slots = None
            if type(state) is tuple and len(state) == 2:
                state, slots = state
            if state:
                self.check_attrs(state, inst, shadow_ok=True)
                inst.__dict__.update(state)
            if slots:
                self.check_attrs(slots, inst, shadow_ok=True)
                for k, v in slots.items():
                    setattr(inst, k, v)
        else:
            self.fail(
                f"weights_only load refused BUILD (__setstate__) on {_describe(inst)}: it sets state only on "
                "dtypes it built, on OrderedDict attributes and on types added with add_safe_globals"
            )

    def check_attrs(self, state, inst, *, shadow_ok: bool):
        if type(state) is not dict:
            self.fail(f"BUILD state for {_describe(inst)} must be a dict of attributes, got {_describe(state)}")
        for k in state:
            if (
                type(k) is not str
                or (k.startswith("__") and k.endswith("__"))
                or (not shadow_ok and hasattr(type(inst), k))
            ):
                self.fail(
                    f"weights_only load refused to set the attribute {A.short(k)} on {_describe(inst)} (plain "
                    "attributes only: no dunder names, nothing that shadows the type's own)"
                )

    def build_dtype(self, dt: np.dtype, state):
        expected = dt.__reduce__()[2]
        if not (
            type(state) is tuple
            and len(state) == len(expected)
            and state[0] == expected[0]
            and state[1] in ("<", ">", "=", "|")
            and (state[1] == "|") == (expected[1] == "|")
            and all(type(a) is type(b) and a == b for a, b in zip(state[2:], expected[2:]))
        ):
            self.fail(
                f"weights_only load refused the dtype state {A.short(state)} for {dt} (only the byte order "
                "may differ from numpy's own)"
            )
        cast(Any, dt).__setstate__(state)  # np.dtype has __setstate__ at runtime; numpy's stubs omit it

    def op_binpersid(self):
        pid = self.pop()
        if self.load_pid is None:
            self.fail(f"unexpected persistent id {A.short(pid)} in the metadata record")
        self.stack.append(self.load_pid(pid))

    # ---------------------------------------------------------------- hashing bounds
    def check_hashable(self, key) -> None:
        """Refuse keys whose hash recurses too deep or costs too much (a shared tuple is hashed once per use)."""
        if type(key) is not tuple and type(key) is not frozenset:
            return
        nodes, height = self.cost(key, 0)
        self.budget -= nodes
        if height > KEY_DEPTH or self.budget < 0:
            self.fail(
                f"weights_only load refused a dict key or set member nested {height} levels deep with {nodes} "
                f"nodes (a load allows {KEY_DEPTH} levels and {max(HASH_BUDGET, 8 * len(self.data))} hashed "
                "nodes in all)"
            )

    def cost(self, obj, depth: int) -> tuple[int, int]:
        if type(obj) is not tuple and type(obj) is not frozenset:
            return 1, 0
        hit = self.costs.get(id(obj))
        if hit is not None and hit[0] is obj:
            return hit[1], hit[2]
        if depth > KEY_DEPTH:
            return 1, KEY_DEPTH + 1
        nodes, height = 1, 0
        for x in obj:
            n, h = self.cost(x, depth + 1)
            nodes += n
            height = max(height, h + 1)
            if height > KEY_DEPTH:
                break
        self.costs[id(obj)] = (obj, nodes, height)
        return nodes, height


def _describe(obj) -> str:
    """A name for ``obj`` in messages, without calling anything of ``obj`` (no repr, no __getattr__)."""
    if isinstance(obj, type):
        return f"'{obj.__module__}.{obj.__qualname__}'"
    if type(obj).__name__ in ("function", "builtin_function_or_method"):
        return f"'{getattr(obj, '__module__', '?')}.{getattr(obj, '__qualname__', '?')}'"
    return f"a {type(obj).__module__}.{type(obj).__qualname__}"


def _memo_put(u: SafeUnpickler, index: int) -> None:
    """``BINPUT``/``LONG_BINPUT`` (protocol 2's memo writes): the index must be the next free one, so a pickle
    cannot overwrite an object already handed out."""
    if u.stack[-1] is _MARK or index != len(u.memo):
        u.fail(f"the pickle is malformed (a memo write to index {index} at byte {u.pos}, expected {len(u.memo)})")
    u.memo[index] = u.stack[-1]


PROTOCOL2_OPS: dict[int, Callable[[SafeUnpickler], None]] = {
    pickle.BINPUT[0]: lambda u: _memo_put(u, u.take(1)[0]),
    pickle.LONG_BINPUT[0]: lambda u: _memo_put(u, u.unpack(_U4, 4)),
}

S = SafeUnpickler
_DISPATCH_BASE: dict[int, Callable[[SafeUnpickler], None]] = {
    op[0]: fn
    for op, fn in {
        pickle.STOP: S.op_stop,
        pickle.FRAME: S.op_frame,
        pickle.POP: S.op_pop,
        pickle.POP_MARK: lambda u: u.pop_mark(),
        pickle.BININT: lambda u: u.stack.append(u.unpack(_I4, 4)),
        pickle.BININT2: lambda u: u.stack.append(u.unpack(_U2, 2)),
        pickle.LONG1: lambda u: u.op_long(u.take(1)[0]),
        pickle.LONG4: lambda u: u.op_long(u.unpack(_I4, 4)),
        pickle.BINFLOAT: lambda u: u.stack.append(u.unpack(_F8, 8)),
        pickle.BINUNICODE: lambda u: u.op_text(u.unpack(_U4, 4)),
        pickle.BINUNICODE8: lambda u: u.op_text(u.unpack(_U8, 8)),
        pickle.SHORT_BINBYTES: lambda u: u.stack.append(u.take(u.take(1)[0])),
        pickle.BINBYTES: lambda u: u.stack.append(u.take(u.unpack(_U4, 4))),
        pickle.BINBYTES8: lambda u: u.stack.append(u.take(u.unpack(_U8, 8))),
        pickle.BYTEARRAY8: lambda u: u.stack.append(bytearray(u.take(u.unpack(_U8, 8)))),
        pickle.EMPTY_TUPLE: lambda u: u.stack.append(()),
        pickle.TUPLE: lambda u: u.stack.append(tuple(u.pop_mark())),
        pickle.TUPLE1: lambda u: u.op_tuple_n(1),
        pickle.TUPLE2: lambda u: u.op_tuple_n(2),
        pickle.TUPLE3: lambda u: u.op_tuple_n(3),
        pickle.APPEND: lambda u: u.op_appends([u.pop()]),
        pickle.APPENDS: lambda u: u.op_appends(u.pop_mark()),
        pickle.SETITEM: lambda u: u.op_setitems(list(reversed([u.pop(), u.pop()]))),
        pickle.SETITEMS: lambda u: u.op_setitems(u.pop_mark()),
        pickle.EMPTY_SET: lambda u: u.stack.append(set()),
        pickle.ADDITEMS: lambda u: u.op_additems(u.pop_mark()),
        pickle.FROZENSET: S.op_frozenset,
        pickle.LONG_BINGET: lambda u: u.stack.append(u.memo[u.unpack(_U4, 4)]),
        pickle.GLOBAL: S.op_global,
        pickle.STACK_GLOBAL: S.op_stack_global,
        pickle.REDUCE: S.op_reduce,
        pickle.NEWOBJ: lambda u: u.op_newobj(False),
        pickle.NEWOBJ_EX: lambda u: u.op_newobj(True),
        pickle.BUILD: S.op_build,
        pickle.BINPERSID: S.op_binpersid,
    }.items()
}
del S
LAZYFLOW = Profile("metadata", A.GLOBALS, A.CALLS)
