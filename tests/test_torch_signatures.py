"""Parameter names against torch 2.13: every public lazyflow function (``lf.__all__``, ``lf.nn.functional.__all__``)
and every Tensor method of the same name takes each of its torch namesake's parameters by keyword, under torch's
name, and its positional parameters in torch's order.

torch's signatures come from torch itself: ``inspect.signature`` for torch's Python functions, and for its C++
builtins (which have none) the signature lines of their docstrings (``flip(input, dims) -> Tensor`` and each
``.. function::`` overload). Some of those docstrings name a parameter that torch itself rejects; each such erratum
is listed in ``ERRATA`` with the call that shows it, and ``test_errata_hold_in_torch`` runs that call, so an erratum
that torch fixes fails here instead of excusing lazyflow.
"""

from __future__ import annotations

import inspect
import re
import types

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import lazyflow as lf
import lazyflow.nn.functional as LF
from tests._harness import MODES, compiled

# ---------------------------------------------------------------- what is not compared, and why
SKIPPED_PARAMETERS = {
    "out": "results are new tensors: JAX arrays are immutable, so there is no output buffer to fill",
    "self": "torch.pow's scalar-base overload calls its first operand `self`; lf.pow(2, x) takes it positionally",
    "out_dtype": "torch.mm/bmm(out_dtype=) runs only on CUDA (its CPU kernel raises NotImplementedError)",
}
SKIPPED_AT = {  # (where, parameter): reason
    ("lazyflow.relu", "inplace"): "torch.relu has no inplace (its docstring is empty, so F.relu's is read); "
    "lf.nn.functional.relu takes inplace= like F.relu",
    ("Tensor.relu", "inplace"): "Tensor.relu has no inplace (relu_ is the in-place form); its docstring is empty, so "
    "the reader falls back to F.relu's signature",
    ("lazyflow.silu", "inplace"): "torch has no top-level silu, so F.silu's signature is read; lf.nn.functional.silu "
    "takes inplace= like F.silu",
    ("Tensor.view", "dtype"): "view(dtype) bit reinterpretation is not supported: lazyflow accepts the keyword and "
    "raises DTypeError naming .to(dtype) (test_view_dtype_raises)",
    **{
        (
            f"Tensor.{n}",
            "split_size_or_sections",
        ): f"torch's docstring shows {n}(split_size_or_sections) but torch takes "
        "no such keyword (only the positional value, or sections=/indices=); lazyflow names it as the top-level "
        "function does, indices_or_sections"
        for n in ("hsplit", "vsplit", "dsplit")
    },
    ("lazyflow.fork", "args"): "torch.fork(*args, **kwargs) takes the callable and its arguments positionally and "
    "passes keywords on to the callable; lazyflow's fork does the same, so no keyword is its own",
    ("Tensor.frexp", "input"): "torch's docstring shows frexp(input); the method takes no argument at all",
    (
        "Tensor.histogram",
        "input",
    ): "torch's docstring shows histogram(input, bins); the method's first argument is bins",
    ("Tensor.put", "input"): "torch's docstring shows put(input, index, source); the method's first argument is index",
    ("lazyflow.put", "input"): "torch.put has no docstring: the reader falls back to Tensor.put's, which names input "
    "twice (see Tensor.put)",
}
SKIPPED_FUNCTIONS = {
    "compile": "lf.compile is lazyflow's own tracer; torch.compile's knobs (name=, isolate_recompiles=, "
    "shapes_spec=) configure TorchDynamo/Inductor",
    "save": "lazyflow checkpoints are a directory of orbax arrays, not torch's pickle archive: no file object `f`, "
    "no pickle_module/pickle_protocol",
    "load": "reads lazyflow's checkpoint directory (see save); no file object `f`, pickle_module or mmap",
    "conv_tbc": "torch's docstring has no signature line, only Args (input, weight, bias, pad): lazyflow takes those "
    "names in that order (tests/test_torch_functions_s6.py calls it positionally against torch)",
    **{
        n: "torch documents no signature for it (an empty docstring); lazyflow's takes the copied op's parameters"
        for n in (
            "alias_copy detach_copy diagonal_copy expand_copy permute_copy select_copy slice_copy split_copy "
            "split_with_sizes_copy squeeze_copy t_copy transpose_copy unbind_copy unfold_copy unsqueeze_copy view_copy "
            "view_as_real_copy view_as_complex_copy"
        ).split()
    },
}

KEYWORD_ONLY = "keyword-only"  # torch's docstring shows a positional parameter that torch only takes by keyword
NOT_A_KEYWORD = "not-a-keyword"  # torch's docstring shows a name that torch does not take by keyword at all


def _x():
    return torch.ones(2, 2)


# (where, documented parameter): (what torch really takes, a call of torch, the value passed). For a renamed
# parameter the call is made with the documented and with the real keyword; for KEYWORD_ONLY, positionally and by
# keyword; for NOT_A_KEYWORD, by keyword and positionally.
ERRATA = {
    ("torch.broadcast_to", "shape"): ("size", lambda *a, **k: torch.broadcast_to(torch.ones(2), *a, **k), (3, 2)),
    ("Tensor.broadcast_to", "shape"): ("size", lambda *a, **k: torch.ones(2).broadcast_to(*a, **k), (3, 2)),
    ("torch.result_type", "tensor1"): ("tensor", lambda *a, **k: torch.result_type(*a, other=1.0, **k), _x()),
    ("torch.result_type", "tensor2"): ("other", lambda *a, **k: torch.result_type(_x(), *a, **k), 1.0),
    ("torch.true_divide", "dividend"): ("input", lambda *a, **k: torch.true_divide(*a, other=2.0, **k), _x()),
    ("torch.true_divide", "divisor"): ("other", lambda *a, **k: torch.true_divide(_x(), *a, **k), 2.0),
    ("torch.tensor_split", "indices_or_sections"): (
        NOT_A_KEYWORD,
        lambda *a, **k: torch.tensor_split(_x(), *a, **k),
        2,
    ),
    ("torch.from_numpy", "ndarray"): (NOT_A_KEYWORD, lambda *a, **k: torch.from_numpy(*a, **k), np.ones(2)),
    ("F.one_hot", "tensor"): ("input", lambda *a, **k: TF.one_hot(*a, num_classes=3, **k), torch.tensor([1])),
    ("torch.searchsorted", "values"): (
        "input",
        lambda *a, **k: torch.searchsorted(torch.tensor([1.0, 2.0]), *a, **k),
        torch.tensor([1.5]),
    ),
    ("Tensor.bmm", "batch2"): ("mat2", lambda *a, **k: torch.ones(1, 2, 2).bmm(*a, **k), torch.ones(1, 2, 2)),
    ("Tensor.matmul", "tensor2"): ("other", lambda *a, **k: _x().matmul(*a, **k), _x()),
    ("Tensor.dot", "other"): ("tensor", lambda *a, **k: torch.ones(2).dot(*a, **k), torch.ones(2)),
    ("Tensor.div", "value"): ("other", lambda *a, **k: _x().div(*a, **k), 2.0),
    ("Tensor.divide", "value"): ("other", lambda *a, **k: _x().divide(*a, **k), 2.0),
    ("Tensor.true_divide", "value"): ("other", lambda *a, **k: _x().true_divide(*a, **k), 2.0),
    ("Tensor.mul", "value"): ("other", lambda *a, **k: _x().mul(*a, **k), 2.0),
    ("Tensor.multiply", "value"): ("other", lambda *a, **k: _x().multiply(*a, **k), 2.0),
    ("Tensor.floor_divide", "value"): ("other", lambda *a, **k: _x().floor_divide(*a, **k), 2.0),
    ("Tensor.fmod", "divisor"): ("other", lambda *a, **k: _x().fmod(*a, **k), 2.0),
    ("Tensor.remainder", "divisor"): ("other", lambda *a, **k: _x().remainder(*a, **k), 2.0),
    ("Tensor.narrow", "dimension"): ("dim", lambda *a, **k: _x().narrow(*a, start=0, length=1, **k), 0),
    ("Tensor.where", "y"): ("other", lambda *a, **k: _x().where(_x() > 0, *a, **k), _x()),
    ("Tensor.view", "shape"): ("size", lambda *a, **k: _x().view(*a, **k), (4,)),
    ("Tensor.cumsum", "dtype"): (KEYWORD_ONLY, lambda *a, **k: _x().cumsum(0, *a, **k), torch.float64),
    ("Tensor.cumprod", "dtype"): (KEYWORD_ONLY, lambda *a, **k: _x().cumprod(0, *a, **k), torch.float64),
    ("Tensor.sum", "dtype"): (KEYWORD_ONLY, lambda *a, **k: _x().sum(0, False, *a, **k), torch.float64),
    ("Tensor.prod", "dtype"): (KEYWORD_ONLY, lambda *a, **k: _x().prod(0, False, *a, **k), torch.float64),
    ("Tensor.round", "decimals"): (KEYWORD_ONLY, lambda *a, **k: _x().round(*a, **k), 2),
    ("torch.wait", "arg0"): (NOT_A_KEYWORD, lambda *a, **k: torch.wait(*a, **k), torch.jit.fork(lambda: 1)),
    ("Tensor.nansum", "dtype"): (KEYWORD_ONLY, lambda *a, **k: _x().nansum(0, False, *a, **k), torch.float64),
    ("Tensor.index_copy", "tensor2"): ("source", lambda *a, **k: _x().index_copy(0, torch.tensor([0]), **k), _x()[:1]),
    ("torch.masked_scatter", "tensor"): ("source", lambda *a, **k: torch.masked_scatter(_x(), _x() > 0, **k), _x()),
    ("Tensor.masked_scatter", "tensor"): ("source", lambda *a, **k: _x().masked_scatter(_x() > 0, **k), _x()),
    ("Tensor.narrow_copy", "dimension"): ("dim", lambda *a, **k: _x().narrow_copy(start=0, length=1, **k), 0),
    ("Tensor.take", "indices"): ("index", lambda *a, **k: _x().take(**k), torch.tensor([0])),
    ("torch.unsafe_split", "tensor"): ("input", lambda *a, **k: torch.unsafe_split(split_size=1, **k), _x()),
    ("torch.unsafe_split", "split_size_or_sections"): (
        "split_size",
        lambda *a, **k: torch.unsafe_split(_x(), **k),
        1,
    ),
}


# ---------------------------------------------------------------- torch's signatures
def _split_top(text: str) -> list[str]:
    """``text`` split at the commas outside brackets and quotes."""
    parts, depth, cur, quote = [], 0, "", None
    for ch in text:
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
            continue
        cur += ch
    return [p.strip() for p in [*parts, cur] if p.strip()]


def parse_signature(line: str) -> list[tuple[str, str]] | None:
    """``name(a, b=1, *, c=None) -> T`` as ``[(a, "pos"), (b, "pos"), (c, "kw")]`` (``*v``: ``(v, "var")``); None for
    a line that is not a signature (a docstring's example output such as ``tensor([ 0,  1])``)."""
    body, depth = line[line.index("(") + 1 :], 1
    for i, ch in enumerate(body):
        depth += ch in "([{"
        depth -= ch in ")]}"
        if depth == 0:
            body = body[:i]
            break
    out, keyword_only = [], False
    for part in _split_top(body):
        part = part.replace("\\", "")
        if part == "*":
            keyword_only = True
        elif part.startswith("**"):
            continue
        elif part.startswith("*"):
            out.append((part[1:].split(":")[0].strip(), "var"))
            keyword_only = True
        else:
            name = re.split(r"[:=]", part)[0].strip()
            if not name.isidentifier():
                return None
            out.append((name, "kw" if keyword_only else "pos"))
    return out


def _doc_signatures(obj, name: str) -> list[list[tuple[str, str]]]:
    lines = (obj.__doc__ or "").splitlines()
    sigs = []
    for i, raw in enumerate(lines):
        line = raw.strip().removeprefix(".. function::").removeprefix(".. method::").strip()
        line = line.removeprefix("torch.linalg.").removeprefix("linalg.")  # how torch.linalg's docstrings name them
        if not line.startswith(name + "("):
            continue
        j = i
        while line.count("(") > line.count(")") and j + 1 < len(lines):  # a signature wrapped over lines
            j += 1
            line += " " + lines[j].strip()
        parsed = parse_signature(line)
        if parsed is not None:
            sigs.append(parsed)
    return sigs


_KINDS = {
    inspect.Parameter.POSITIONAL_ONLY: "posonly",
    inspect.Parameter.POSITIONAL_OR_KEYWORD: "pos",
    inspect.Parameter.KEYWORD_ONLY: "kw",
}


def torch_signatures(obj, name: str, method: bool) -> list[list[tuple[str, str]]]:
    """Every overload of a torch callable as ``[(parameter, kind)]`` (kind: ``pos``, ``kw``, ``var`` -- a C++
    varargs list, which torch also takes by keyword -- or ``posonly``); a method's own ``self`` is left out."""
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return _doc_signatures(obj, name)
    params = list(sig.parameters.values())[1 if method else 0 :]
    # a Python varargs list cannot be passed by keyword: nothing to compare for it
    return [[(p.name, _KINDS[p.kind]) for p in params if p.kind in _KINDS]]


def _with_errata(where: str, sigs):
    out = []
    for sig in sigs:
        fixed = []
        for name, kind in sig:
            real = ERRATA.get((where, name), (None,))[0]
            if real == KEYWORD_ONLY:
                fixed.append((name, "kw"))
            elif real == NOT_A_KEYWORD:
                fixed.append((name, "posonly"))
            elif real is not None:
                fixed.append((real, kind))
            else:
                fixed.append((name, kind))
        out.append(fixed)
    return out


# ---------------------------------------------------------------- what is audited
def _public_functions(module, names):
    return [n for n in names if isinstance(getattr(module, n), types.FunctionType)]


def _audit():
    """``(where, torch signatures, lazyflow callable, is_method)`` for every audited name."""
    rows = []
    for name in _public_functions(lf, lf.__all__):
        if name in SKIPPED_FUNCTIONS:
            continue
        ours = getattr(lf, name)
        theirs = getattr(torch, name, None)
        sigs = torch_signatures(theirs, name, False) if theirs is not None else []
        if theirs is not None and not sigs and hasattr(torch.Tensor, name):  # e.g. torch.masked_fill, fill_
            method_sigs = torch_signatures(getattr(torch.Tensor, name), name, True)
            sigs = [[("input", "pos"), *s] for s in method_sigs]
        if not sigs and hasattr(TF, name):  # torch.relu's docstring is empty; gelu/silu/pad live in F only
            sigs = torch_signatures(getattr(TF, name), name, False)
        if theirs is not None or hasattr(TF, name):
            rows.append((f"lazyflow.{name}", f"torch.{name}" if theirs is not None else f"F.{name}", sigs, ours, False))
        if hasattr(torch.Tensor, name) and callable(getattr(lf.Tensor, name, None)):  # not the real/imag properties
            msigs = torch_signatures(getattr(torch.Tensor, name), name, True)
            if not msigs:  # Tensor.relu/less/log_softmax have no signature line: the function's, less its input
                msigs = [s[1:] for s in sigs]
            rows.append((f"Tensor.{name}", f"Tensor.{name}", msigs, getattr(lf.Tensor, name), True))
    for name in _public_functions(LF, LF.__all__):
        if hasattr(TF, name) and name not in SKIPPED_FUNCTIONS:
            rows.append(
                (
                    f"lazyflow.nn.functional.{name}",
                    f"F.{name}",
                    torch_signatures(getattr(TF, name), name, False),
                    getattr(LF, name),
                    False,
                )
            )
    for ours_ns, theirs_ns, prefix in NAMESPACES:
        for name in _public_functions(ours_ns, ours_ns.__all__):
            theirs = getattr(theirs_ns, name, None)
            if theirs is not None:
                sigs = torch_signatures(theirs, name, False)
                rows.append(
                    (f"lazyflow.{prefix}.{name}", f"torch.{prefix}.{name}", sigs, getattr(ours_ns, name), False)
                )
    return rows


#: torch's device/runtime namespaces and their lazyflow counterparts, audited function by function
NAMESPACES = [
    (lf.cuda, torch.cuda, "cuda"),
    (lf.linalg, torch.linalg, "linalg"),
    (lf.fft, torch.fft, "fft"),
    (lf.accelerator, torch.accelerator, "accelerator"),
    (lf.jit, torch.jit, "jit"),
    (lf.backends.cuda, torch.backends.cuda, "backends.cuda"),
    (lf.backends.cudnn, torch.backends.cudnn, "backends.cudnn"),
    (lf.backends.mps, torch.backends.mps, "backends.mps"),
    (lf.backends.cpu, torch.backends.cpu, "backends.cpu"),
    (lf.func, torch.func, "func"),
    (lf.utils.checkpoint, torch.utils.checkpoint, "utils.checkpoint"),
    (lf.distributions, torch.distributions, "distributions"),
]


@pytest.mark.parametrize("ns", NAMESPACES, ids=[p for _, _, p in NAMESPACES])
def test_namespace_names_are_torchs(ns):
    """Every public name of lf.cuda, lf.accelerator, lf.jit and lf.backends.* is torch's name in the same place."""
    ours, theirs, prefix = ns
    invented = [n for n in ours.__all__ if not hasattr(theirs, n) and n not in NAMESPACE_EXTRAS]
    assert not invented, f"lf.{prefix} has names torch.{prefix} lacks: {invented}"


#: lazyflow's own names inside those namespaces, and why
NAMESPACE_EXTRAS = {
    "TiedWeightsError": "the ValueError class functional_call raises for tied names given different values",
    "VmapError": "the ValueError class lf.func.vmap raises for in_dims/out_dims or batch sizes that do not fit",
    "DeviceProperties": "the type lf.cuda.get_device_properties returns (torch's is torch._C._CudaDeviceProperties)",
}


AUDIT = _audit()
IDS = [row[0] for row in AUDIT]


#: functions whose ``**kwargs`` are not options but the user's own arguments, passed on (as torch does), and why
KWARGS_PASSED_ON = {
    "lazyflow.utils.checkpoint.checkpoint": "the keyword arguments of the checkpointed function, as torch's",
    "lazyflow.fork": "the keyword arguments of the forked function, as torch.jit.fork's",
}


def _ours(fn, method, where=""):
    params = list(inspect.signature(fn).parameters.values())[1 if method else 0 :]
    keywords = {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL)]
    if where not in KWARGS_PASSED_ON:
        assert not any(p.kind == p.VAR_KEYWORD for p in params), "**kwargs would accept any keyword: name them"
    return keywords, positional


def _skipped(ours_name, name):
    return name in SKIPPED_PARAMETERS or name.startswith("_") or (ours_name, name) in SKIPPED_AT


@pytest.mark.parametrize("row", AUDIT, ids=IDS)
def test_every_torch_parameter_is_a_keyword(row):
    where, source, sigs, fn, method = row
    assert sigs, f"no torch signature found for {source}"
    keywords, _ = _ours(fn, method, where)
    missing = sorted(
        {
            name
            for sig in _with_errata(source, sigs)
            for name, kind in sig
            if kind != "posonly" and not _skipped(where, name) and name not in keywords
        }
    )
    assert not missing, f"{where} does not take torch's {missing} by keyword ({source}{sigs})"


@pytest.mark.parametrize("row", AUDIT, ids=IDS)
def test_positional_parameters_in_torch_order(row):
    where, source, sigs, fn, method = row
    _, positional = _ours(fn, method, where)
    sigs = _with_errata(source, sigs)
    for sig in sigs:
        for i, (name, _) in enumerate(p for p in sig if p[1] != "kw"):
            if _skipped(where, name):
                break
            assert i < len(positional), f"{where}: torch takes {name!r} as positional {i}, lazyflow takes {i} at most"
            ours = positional[i]
            if ours.kind == ours.VAR_POSITIONAL:
                break  # a varargs list takes this position and everything after it
            # an overloaded torch function shares a position between overloads: lazyflow names it after one of them
            names_here = {s[i][0] for s in sigs if len(s) > i} | {doc for (w, doc) in ERRATA if w == source}
            assert ours.name == name or ours.name in names_here, (
                f"{where}: position {i} is {ours.name!r} in lazyflow, {name!r} in torch ({source}{sig})"
            )


@pytest.mark.parametrize("erratum", sorted(ERRATA), ids=[f"{w}:{p}" for w, p in sorted(ERRATA)])
def test_errata_hold_in_torch(erratum):
    """Each docstring erratum is still one: torch rejects the documented spelling and takes the real one."""
    real, call, value = ERRATA[erratum]
    documented = erratum[1]
    if real == KEYWORD_ONLY:
        with pytest.raises(TypeError):
            call(value)
        call(**{documented: value})
    elif real == NOT_A_KEYWORD:
        with pytest.raises(TypeError):
            call(**{documented: value})
        call(value)
    else:
        with pytest.raises(TypeError):
            call(**{documented: value})
        call(**{real: value})


def test_the_signature_reader_reads_torch():
    """The reader finds what the docstrings say (so that an empty reading cannot pass the tests above)."""
    assert torch_signatures(torch.flip, "flip", False) == [[("input", "pos"), ("dims", "pos")]]
    assert torch_signatures(torch.zeros, "zeros", False)[0][0] == ("size", "var")
    assert [s[1] for s in torch_signatures(torch.max, "max", False)] == [
        ("out", "kw"),
        ("dim", "pos"),
        ("other", "pos"),
    ]
    assert torch_signatures(torch.Tensor.reshape, "reshape", True) == [[("shape", "var")]]
    sdpa = torch_signatures(TF.scaled_dot_product_attention, "scaled_dot_product_attention", False)
    assert [n for n, _ in sdpa[0]] == [
        "query",
        "key",
        "value",
        "attn_mask",
        "dropout_p",
        "is_causal",
        "scale",
        "enable_gqa",
    ]
    assert torch_signatures(torch.tensor, "tensor", False) == [
        [("data", "pos"), ("dtype", "kw"), ("device", "kw"), ("requires_grad", "kw"), ("pin_memory", "kw")]
    ]
    assert torch_signatures(torch.split, "split", False) == [
        [("tensor", "pos"), ("split_size_or_sections", "pos"), ("dim", "pos")]
    ]
    assert len(AUDIT) > 300


def test_skipped_parameters_are_only_those_listed():
    """A skipped parameter is one torch really has: the reasons above are not for names nobody uses."""
    seen = {name for row in AUDIT for sig in row[2] for name, _ in sig}
    assert set(SKIPPED_PARAMETERS) <= seen
    assert {p for _, p in SKIPPED_AT} <= seen


# ---------------------------------------------------------------- the keywords work, against torch
def _inputs(m):
    x = m.arange(16.0).reshape(4, 4) - 5.5
    v = m.tensor([1.0, -2.0, 3.0, 4.0])
    return x, v


TENSOR_CASES = [
    "m.flip(x, dims=(0,))",
    "x.flip(dims=[0, 1])",
    "m.reshape(x, shape=(2, 8))",
    "x.reshape(shape=(-1,))",
    "x.view(size=(8, 2))",
    "m.permute(x, dims=(1, 0))",
    "x.permute(dims=[1, 0])",
    "x[:1].expand(size=(3, 4))",
    "x.repeat(repeats=(1, 2))",
    "m.tile(x, dims=(2,))",
    "x.tile(dims=(2, 1))",
    "m.broadcast_to(v, size=(2, 4))",
    "v.broadcast_to(size=(3, 4))",
    "m.concatenate([x, x], axis=1)",
    "m.concatenate(tensors=[v, v])",
    "m.dot(v, tensor=v)",
    "v.dot(tensor=v)",
    "m.pow(x, exponent=2)",
    "x.pow(exponent=3)",
    "m.swapaxes(x, axis0=0, axis1=1)",
    "x.swapaxes(axis0=1, axis1=0)",
    "m.swapdims(x, dim0=0, dim1=1)",
    "m.true_divide(input=x, other=2)",
    "x.true_divide(other=v)",
    "x.div(other=v)",
    "x.mul(other=v)",
    "x.fmod(other=2.5)",
    "x.remainder(other=2.5)",
    "x.floor_divide(other=2.5)",
    "x.matmul(other=x)",
    "x.narrow(dim=1, start=1, length=2)",
    "m.max(x, other=v)",
    "m.min(input=x, other=v)",
    "x.max(other=v)",
    "m.tensor_split(v, sections=3)",
    "m.tensor_split(x, indices=[1, 3], dim=1)",
    "v.tensor_split(sections=2)",
    "m.repeat_interleave(v, 2, output_size=8)",
    "v.repeat_interleave(repeats=2, dim=0, output_size=8)",
    "m.repeat_interleave(m.tensor([1, 0, 2]))",
    "m.take_along_dim(x, m.tensor([0, 5, 15]))",
    "x.take_along_dim(m.tensor([[0], [1], [2], [3]]), dim=1)",
    "x.where(x > 0, other=v)",
    "m.where(condition=x > 0, input=x, other=v)",
    "x.split(split_size=3)",
    "m.split(tensor=v, split_size_or_sections=2)",
    "m.zeros(size=(2, 3)) + x.sum()",
    "m.ones(size=[2]) * x.sum()",
    "x.new_zeros(size=(2,))",
    "x.new_ones(size=[1, 2])",
    "m.arange(end=3)",
    "m.arange(start=1, end=4)",
    "m.cumsum(x, dim=0, dtype=m.float64)",
    "x.cumsum(dim=1, dtype=m.float64)",
    "x.sum(dim=0, keepdim=True, dtype=m.float64)",
    "x.round(decimals=1)",
    "m.clamp(x, min=-1.0, max=2.0)",
    "m.softmax(x, dim=1, dtype=m.float64)",
    "m.one_hot(input=m.tensor([1, 0]), num_classes=3)",
    "m.from_numpy(np.ones(2, np.float32))",
    "m.gather(x, dim=1, index=m.tensor([[0], [1], [2], [3]]))",
    "m.index_select(x, dim=0, index=m.tensor([2, 0]))",
    "m.unflatten(v, dim=0, sizes=(2, 2))",
]


def _torch_expr(expr: str) -> str:
    return expr.replace("m.one_hot(", "m.nn.functional.one_hot(")


def _eval(expr, m, x, v):
    return eval(expr, {"m": m, "np": np, "x": x, "v": v})


def _same(ours, theirs, where):
    if isinstance(theirs, (tuple, list)):
        assert len(ours) == len(theirs), where
        for a, b in zip(ours, theirs):
            _same(a, b, where)
        return
    assert isinstance(ours, lf.Tensor), where
    assert str(ours.dtype).split(".")[-1] == str(theirs.dtype).split(".")[-1], f"{where}: {ours.dtype} {theirs.dtype}"
    np.testing.assert_allclose(
        np.asarray(ours.detach().to(lf.float64)), theirs.double().numpy(), rtol=1e-6, err_msg=where
    )


_FUNCS: dict = {}
EAGER_ONLY = {  # expression: why graph mode does not run it
    "m.from_numpy(np.ones(2, np.float32))": "no tensor input: nothing is traced",
    "m.repeat_interleave(m.tensor([1, 0, 2]))": "the result's size depends on the counts' values "
    "(test_repeat_interleave_of_counts_needs_values_in_graph_mode)",
}


@pytest.mark.parametrize(
    ("expr", "mode"), [(e, m) for e in TENSOR_CASES for m in MODES if m == "eager" or e not in EAGER_ONLY]
)
def test_torch_keywords_give_torch_results(expr, mode):
    theirs = _eval(_torch_expr(expr), torch, *_inputs(torch))
    if mode == "eager":
        ours = _eval(expr, lf, *_inputs(lf))
    else:
        fn = _FUNCS.setdefault(expr, lambda x, v: _eval(expr, lf, x, v))
        ours = compiled(fn)(*_inputs(lf))
    _same(ours, theirs, f"{expr} [{mode}]")


OTHER_CASES = [
    "m.empty(size=(3,)).shape",
    "m.rand(size=(2, 3)).shape",
    "m.randn(size=(2,)).dtype",
    "m.randint(high=3, size=(2,)).shape",
    "m.randint(low=1, high=3, size=(2,)).dtype",
    "m.rand_like(x, generator=None).shape",
    "m.randint_like(x, high=5).dtype",
    "m.promote_types(type1=m.int8, type2=m.float32)",
    "m.result_type(tensor=x, other=1.5)",
    "m.can_cast(from_=m.float32, to=m.int32)",
]


@pytest.mark.parametrize("expr", OTHER_CASES)
def test_torch_keywords_of_creation_and_dtype_functions(expr):
    ours, theirs = _eval(expr, lf, *_inputs(lf)), _eval(expr, torch, *_inputs(torch))
    if isinstance(theirs, torch.dtype):
        assert str(ours).split(".")[-1] == str(theirs).split(".")[-1]
    else:
        assert ours == (tuple(theirs) if isinstance(theirs, torch.Size) else theirs)


BOTH_SPELLINGS = [
    "m.zeros(2, size=(2,))",
    "x.reshape(16, shape=(16,))",
    "x.view(16, size=(16,))",
    "x.permute(1, 0, dims=(1, 0))",
    "x.flip(0, dims=(0,))",
    "m.rand(2, size=(2,))",
    "m.tensor_split(v, 2, sections=2)",
]


@pytest.mark.parametrize("expr", BOTH_SPELLINGS)
def test_both_spellings_at_once_is_a_type_error_like_torch(expr):
    with pytest.raises(TypeError):
        _eval(expr, torch, *_inputs(torch))
    with pytest.raises(TypeError, match="multiple values|exactly one"):
        _eval(expr, lf, *_inputs(lf))


def test_view_dtype_raises():
    x = lf.ones(2)
    for call in (lambda: x.view(lf.int32), lambda: x.view(dtype=lf.int32)):
        with pytest.raises(lf.DTypeError, match=r"\.to\(dtype\)"):
            call()


def test_repeat_interleave_of_counts_needs_values_in_graph_mode():
    with pytest.raises(lf.GraphError, match="tolist"):
        lf.compile(lambda c: lf.repeat_interleave(c))(lf.tensor([1, 0, 2]))


def test_repeat_interleave_output_size_is_checked():
    with pytest.raises(RuntimeError):
        torch.repeat_interleave(torch.tensor([1, 2]), 2, output_size=5)
    with pytest.raises(lf.ShapeError, match="output_size=5 .* 4"):
        lf.repeat_interleave(lf.tensor([1, 2]), 2, output_size=5)
