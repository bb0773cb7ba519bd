"""Imports point one way (STYLE.md): a module never imports from a higher layer, and eager and graph never import
each other. Parsed from the source, nested (function-level) imports included."""

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1] / "lazyflow"

# lower number = lower layer; the longest matching prefix decides. The Tensor layer (2.x) is ordered file by file so
# that no loop can come back: _tensor.py sits directly on the op table and imports nothing else of the Tensor layer.
LAYERS = {
    "lazyflow._core": 0,
    "lazyflow.ops": 1,
    "lazyflow._tensor": 2.0,
    "lazyflow._ingress": 2.1,  # the one way user data enters (copies user memory)
    "lazyflow.autograd.node": 2.2,
    "lazyflow.autograd.grad_mode": 2.2,
    "lazyflow.autograd.engine": 2.3,
    "lazyflow.autograd._custom": 2.35,  # lf.autograd.Function: a tape node (eager), a jax.custom_vjp (traced)
    "lazyflow.autograd.anomaly_mode": 2.35,  # detect_anomaly: the switch nodes and the engine read
    "lazyflow.autograd.function": 2.4,
    "lazyflow.autograd._gradcheck": 2.42,  # gradcheck: the tape against finite differences
    "lazyflow.autograd": 2.45,
    "lazyflow._dispatch": 2.5,
    "lazyflow._sample": 2.55,  # eager fills built on the host (no kernel per shape)
    "lazyflow._creation": 2.6,
    "lazyflow._functional._common": 2.70,
    "lazyflow._functional.elementwise": 2.71,
    "lazyflow._functional.shape": 2.72,
    "lazyflow._functional.linalg": 2.73,
    "lazyflow._functional.reduction": 2.74,
    "lazyflow._functional.indexing": 2.75,
    "lazyflow._functional.inplace": 2.76,
    "lazyflow._functional.compare": 2.77,  # isclose, allclose, equal, count_nonzero, queries
    "lazyflow._functional.complex_parts": 2.7705,  # real/imag/view_as_real/complex/polar/angle/conj, Tensor.real
    "lazyflow._functional.combine": 2.775,  # meshgrid, combinations, block_diag, kron, diff, cdist
    "lazyflow._functional.search": 2.778,  # searchsorted, histc, unique, cummax, logcumsumexp
    "lazyflow._functional.special": 2.7781,  # acosh, lgamma, xlogy, hypot... and their in-place forms
    "lazyflow._functional.stats": 2.7782,  # median, quantile, mode, cov, histogram, bincount, trapezoid...
    "lazyflow._functional.reduce_index": 2.77825,  # index_reduce/index_reduce_: a one-hot composite
    "lazyflow._functional.arrange": 2.7783,  # atleast_*d, take/put, *_scatter, diag_embed, index_copy, *_copy...
    "lazyflow._functional.ranges": 2.7784,  # range, logspace, vander, windows, gradient, random_/cauchy_... fills
    "lazyflow._functional": 2.79,
    "lazyflow._indexing": 2.8,
    "lazyflow.linalg": 2.82,  # torch.linalg: composites over _functional and the linalg primitives
    "lazyflow._linalg_top": 2.83,  # torch.addmm/inverse/svd(some=)...: top-level names over lf.linalg
    "lazyflow.fft": 2.835,  # torch.fft: the fft_* primitives with torch's n/s, dim, norm rules
    "lazyflow._spectral": 2.837,  # stft/istft: composites over lf.fft
    "lazyflow._runtime": 2.84,  # use_deterministic_algorithms, set_default_device, num threads, Tensor.stride...
    "lazyflow._householder": 2.835,  # geqrf/orgqr/ormqr over ops.householder
    "lazyflow._tensor_extras": 2.845,  # frombuffer; Tensor.hardshrink/dense_dim/const_data_ptr
    "lazyflow._legacy": 2.85,  # torch's legacy constructors (lf.Tensor(2, 3), lf.FloatTensor) and Tensor.type()
    "lazyflow._methods": 2.9,
    "lazyflow.autograd.functional": 2.91,  # jacobian/hessian/vjp/jvp on the tape (stacks rows: above _functional)
    "lazyflow._grad_scaler": 2.93,  # torch.amp.GradScaler (duck-typed optimizers)
    "lazyflow.amp": 2.95,
    "lazyflow.multiprocessing": 2.96,  # torch.multiprocessing: stdlib multiprocessing + spawn (refuses fork)
    "lazyflow.random": 2.96,  # torch.random: the global generator's seed/state names and fork_rng
    "lazyflow.testing": 2.96,  # torch.testing: assert_close/make_tensor over Tensors and the factories
    # lf.distributions: composites over Tensor ops, _functional, linalg and the _creation draws (no nn, no graph:
    # the same code runs eagerly and inside a trace), so it sits at the top of the Tensor layer
    "lazyflow.distributions": 2.97,
    "lazyflow.eager": 3,
    "lazyflow.cuda": 3,  # torch.cuda's queries over JAX's GPUs (and cuda.amp over lazyflow.amp)
    "lazyflow.cuda._common": 3,  # lf.cuda's shared device parsing and its no-GPU errors
    "lazyflow.cuda._legacy": 3,  # lf.cuda.FloatTensor & co over lazyflow._legacy
    "lazyflow.cuda._nvml": 3,  # utilization/temperature/power via optional pynvml
    "lazyflow.cuda.memory": 3,  # torch's memory_stats keys over JAX's allocator counters
    "lazyflow.cuda.random": 3,  # the RNG calls over lazyflow's one generator
    "lazyflow.cuda.streams": 3,  # Stream/Event over XLA's one ordered queue per GPU
    "lazyflow.accelerator": 3,
    "lazyflow.backends": 3,
    "lazyflow.graph.trace": 3,
    "lazyflow.graph.functionalize": 3,
    "lazyflow.graph.dynamic": 3,
    "lazyflow.graph.compile": 3,
    "lazyflow.graph.host_eval": 3,
    "lazyflow.graph.mesh_config": 3,
    "lazyflow.distributed": 3,
    "lazyflow.distributed.run": 3,
    "lazyflow.nn": 4,
    "lazyflow.nn.attention": 4,  # sdpa_kernel over lazyflow.backends.cuda's attention switches
    "lazyflow.optim": 4,
    "lazyflow.utils": 4,
    "lazyflow.utils.jax": 4,  # to_jax/from_jax and wrap (a generated op record run by whichever interpreter is active)
    "lazyflow.utils.checkpoint": 4,  # activation checkpointing: a tape node over autograd, jax.checkpoint in traces
    "lazyflow.utils.scan": 4,  # ScanLayers: a ModuleList (nn) whose call scans inside a trace
    "lazyflow._transforms": 4.4,  # lf.func's grad/jacrev/jvp...: user code traced to JAX, JAX's transforms
    "lazyflow._vmap": 4.42,  # lf.func.vmap on jax.vmap (in_dims/out_dims, randomness, chunk_size)
    "lazyflow.func": 4.5,  # functional_call: nn modules run on graph mode's trace interpreter
    "lazyflow.graph": 5,  # graph/__init__, module.py (CompiledModule) and nn_graph.py sit above nn/optim
    "lazyflow.checkpoint": 6,
    "lazyflow.hub": 6.5,  # torch.hub: downloads weights files and loads them through lazyflow.checkpoint
    "lazyflow.config": 6,
    "lazyflow.jit": 6,  # torch.jit's entry points over lf.compile
    "lazyflow.export": 7,  # torch.export over jax.export: graph mode's trace, saved through lazyflow.checkpoint
    "lazyflow.onnx": 7,  # torch.onnx: the same trace lowered to ONNX (optional onnx extra)
    "lazyflow": 9,  # the package __init__ re-exports everything
}


def _layer(mod: str) -> int:
    best = max((p for p in LAYERS if mod == p or mod.startswith(p + ".")), key=len)
    return LAYERS[best]


def _modname(path: pathlib.Path) -> str:
    rel = path.relative_to(ROOT.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _resolve(name: str, package: str) -> str:
    """``from pkg import x``: x is a submodule if a file for it exists, else a name from pkg itself."""
    rel = pathlib.Path(*name.split(".")[1:])
    return name if (ROOT / rel).with_suffix(".py").exists() or (ROOT / rel).is_dir() else package


def _imports(path: pathlib.Path, mod: str):
    tree = ast.parse(path.read_text())
    pkg = mod if path.name == "__init__.py" else mod.rsplit(".", 1)[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
                names = [target] if node.module else [_resolve(f"{target}.{a.name}", target) for a in node.names]
            else:
                names = [node.module or ""]
            for n in names:
                if n.startswith("lazyflow"):
                    yield n, node.lineno
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("lazyflow"):
                    yield a.name, node.lineno


FILES = sorted(ROOT.rglob("*.py"))


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_imports_point_down(path):
    mod = _modname(path)
    me = _layer(mod)
    bad = []
    for target, line in _imports(path, mod):
        if target.startswith("lazyflow.eager") and mod.startswith("lazyflow.graph"):
            bad.append(f"line {line}: graph imports eager ({target})")
        if target.startswith("lazyflow.graph") and mod.startswith("lazyflow.eager"):
            bad.append(f"line {line}: eager imports graph ({target})")
        if target == "lazyflow" or mod.startswith(target + ".") or target == mod:
            continue  # the package itself / an ancestor package __init__ (checked on its own)
        if _layer(target) > me:
            bad.append(f"line {line}: {mod} (layer {me}) imports {target} (layer {_layer(target)})")
    assert not bad, "\n".join(bad)


def test_every_module_is_classified():
    """Every module matches a layer of its own (only the package __init__ falls through to "lazyflow")."""
    assert len(FILES) > 20
    unclassified = [
        m
        for m in map(_modname, FILES)
        if m != "lazyflow" and max((p for p in LAYERS if m == p or m.startswith(p + ".")), key=len) == "lazyflow"
    ]
    assert not unclassified, f"add these modules to LAYERS: {unclassified}"


def _graph():
    mods = {_modname(p): p for p in FILES}
    edges = {}
    for mod, path in mods.items():
        targets = set()
        for target, _ in _imports(path, mod):
            # `from lazyflow.x import name` where name is not a module resolves to lazyflow.x itself
            while target not in mods and "." in target:
                target = target.rsplit(".", 1)[0]
            if target != mod and target in mods:
                targets.add(target)
        edges[mod] = targets
    return edges


def _find_cycles(edges):
    state, stack_path, cycles = {}, [], []

    def visit(m):
        state[m] = 1
        stack_path.append(m)
        for t in sorted(edges[m]):
            if state.get(t) == 1:
                cycles.append(stack_path[stack_path.index(t) :] + [t])
            elif t not in state:
                visit(t)
        stack_path.pop()
        state[m] = 2

    for m in sorted(edges):
        if m not in state:
            visit(m)
    return cycles


def test_import_graph_has_no_cycle():
    """File by file, function-level imports included: no module reaches itself through its imports."""
    cycles = _find_cycles(_graph())
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_the_cycle_check_sees_a_cycle():
    """The checker itself: a loop through three files is reported, a diamond is not."""
    assert _find_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c", "a"]]
    assert _find_cycles({"a": {"b", "c"}, "b": {"d"}, "c": {"d"}, "d": set()}) == []
