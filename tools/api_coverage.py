"""How much of torch 2.13's public surface lazyflow has, per category: ``python tools/api_coverage.py [--write]``.

Each category is a list of torch's public names, computed from torch itself (so the figures follow torch, not a
hand-kept list), and the same path on lazyflow. A missing name is either *deliberate* (an entry below, with its
reason: a backend-specific kernel, a layout lazyflow does not have...) or *not yet*. ``--write`` regenerates
docs/api-coverage.md; tests/test_api_coverage.py fails when that file is stale or an omission is no longer true.
Needs torch (the test extra).
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOC = os.path.join(ROOT, "docs", "api-coverage.md")
README = os.path.join(ROOT, "README.md")
_MARK = ("<!-- api-coverage -->", "<!-- /api-coverage -->")

# deliberate omissions: a regular expression over the name -> why lazyflow leaves it out
OMIT: dict[str, list[tuple[str, str]]] = {
    "torch": [
        (r"^(cudnn|miopen|mkldnn|fbgemm|native|_?nnpack)_", "a kernel of one backend library; XLA picks kernels"),
        (r"(^q_|quantize|quantized|^fake_quant|^choose_qparams|^int_repr)", "quantized tensors are not a dtype here"),
        (r"(sparse|^sspaddmm|^smm$|^hspmm$|^spmm$|coalesce)", "no sparse layouts (JAX's BCOO is experimental)"),
        (
            r"^(from_file|set_default_tensor_type|set_flush_denormal|set_num_interop_threads|get_num_interop_threads)$",
            "process-level switches of torch's own runtime (XLA owns its threads and storage)",
        ),
        (
            r"^(is_inference_mode_enabled|inference_mode|set_autocast_.*|get_autocast_.*|is_autocast_.*|"
            r"clear_autocast_cache|autocast_.*)$",
            "torch's autocast/inference-mode internals (lf.autocast is the API)",
        ),
        (
            r"^(compiled_with_cxx11_abi|is_storage|typename|get_file_path|use_deterministic_algorithms_warn_only)$",
            "describes torch's build or storages",
        ),
        (
            r"^(import_ir_module|import_ir_module_from_buffer|merge_type_from_type_comment|parse_ir|parse_schema|"
            r"parse_type_comment|unify_type_list)$",
            "TorchScript's IR, schema and type-comment parsers (lf.jit maps scripting onto lf.compile: there is no "
            "TorchScript IR)",
        ),
        (r"^(col_indices|crow_indices|indices|values)_copy$", "no sparse layouts (JAX's BCOO is experimental)"),
        (
            r"^(as_strided|as_strided_copy|as_strided_scatter|empty_strided|empty_permuted)$",
            "no strided storage: a tensor is an immutable dense jax array, so there are no strides or storage "
            "offsets to set (XLA chooses physical layouts)",
        ),
    ],
    "Tensor": [
        (
            r"(sparse|^to_dense$|^coalesce|^is_coalesced$|^smm$|^sspaddmm$|^indices$|^values$|^crow_|^col_|^row_|"
            r"^ccol_|^to_mkldnn|^is_mkldnn)",
            "no sparse/mkldnn layouts",
        ),
        (r"(^q_|quantize|^int_repr|^dequantize|^qscheme)", "quantized tensors are not a dtype here"),
        (
            r"^(storage|untyped_storage|storage_offset|storage_type|share_memory_|is_shared|"
            r"record_stream|ipu|xpu|hpu|mtia|mps|nested_tensor)$",
            "storages and device-specific moves (jax arrays are immutable buffers; .to(device) moves)",
        ),
        (
            r"^(as_strided|as_strided_|as_strided_scatter|new_empty_strided|set_|is_set_to)$",
            "no strided storage to view or re-point: a tensor is an immutable dense jax array (XLA chooses layouts)",
        ),
        (r"^chalf$", "complex32 (torch's chalf): JAX and XLA have no complex32 dtype (complex64 is the narrowest)"),
        (
            r"^to_padded_tensor$",
            "no nested (jagged) tensors: lazyflow's tensors are dense (pad lists with pad_sequence)",
        ),
        (r"^index$", "functorch's first-class dimensions (Tensor.index binds Dim objects): not provided"),
    ],
    "torch values": [
        (r"(sparse|^jagged$)", "no sparse or jagged (nested) layouts: lazyflow's tensors are dense (lf.strided)"),
        (r"(^per_(tensor|channel)_|^q(u?int)|^quint)", "quantized tensors are not a dtype here"),
        (
            r"^(bits?(\d\w*)?|float4_\w+|float8_\w+|u?int[1-7])$",
            "sub-byte, bit and float8 storage dtypes of torch's quantization kernels (torch itself runs few ops on "
            "them)",
        ),
        (r"^(complex32|chalf)$", "complex32: JAX and XLA have no complex32 dtype (complex64 is the narrowest)"),
        (
            r"^(has_lapack|has_mkl|has_openmp|has_spectral|USE_GLOBAL_DEPS|USE_RTLD_GLOBAL_WITH_LIBTORCH|"
            r"TYPE_CHECKING|PRIVATE_OPS|AVG|SUM)$",
            "describes torch's build, its import machinery or torch.monitor's aggregation types",
        ),
    ],
    "Tensor properties": [],
    "nn": [],
    "nn.functional": [
        (r"^(scaled_mm|scaled_grouped_mm)$", "float8 scaled matmuls (scale recipes, swizzles): no float8 dtypes here"),
    ],
    "optim": [(r"^(SparseAdam|swap_in_optimizer_params_and_state)$", "no sparse gradients; torch-internal helper")],
    "autograd": [(r"^(NestedIOFunction|set_multithreading_enabled|variable|Variable)$", "legacy or torch-runtime")],
    "func": [(r"^(debug_unwrap|rearrange|replace_all_batch_norm_modules_)$", "functorch internals / einops")],
    "cuda": [
        (
            r"^(nvtx|jiterator|graphs?|CUDAGraph|graph_pool_handle|make_graphed_callables|ipc_collect|"
            r"caching_allocator_.*|memory\._|cudart|check_error|tunable|gds|sparse)",
            "CUDA-runtime specifics",
        ),
        (
            r"Storage$",
            "no storages: a tensor is an immutable jax array, with no storage object to construct or share",
        ),
        (
            r"^(CUDAPluggableAllocator|change_current_allocator|get_allocator_backend|MemPool|use_mem_pool|"
            r"memory_snapshot)$",
            "XLA owns the GPU allocator: it takes no custom allocator or pool, names no backend, and exposes "
            "counters (memory_stats) but no segment snapshot",
        ),
        (
            r"^(current_blas_handle|current_solver_handle|GreenContext)$",
            "cuBLAS/cuSOLVER handles and green contexts belong to the kernels XLA picks and the streams it owns",
        ),
    ],
}


def _attributes(obj, names):
    """``(name, value)`` for the public names of ``obj`` that can be read."""
    for n in names:
        if n.startswith("_"):
            continue
        try:
            yield n, getattr(obj, n)
        except Exception:
            continue


def _public_callables(obj, names, *, classes: bool | None, documented: bool = True) -> list[str]:
    out = []
    for n, o in _attributes(obj, names):
        if inspect.ismodule(o) or not callable(o):
            continue
        if classes is not None and inspect.isclass(o) != classes:
            continue
        if documented and not (getattr(o, "__doc__", None) or "").strip():
            continue
        out.append(n)
    return sorted(set(out))


def _public_values(obj, names) -> list[str]:
    """The public attributes of ``obj`` that are neither callables nor modules: torch's constants, dtypes, memory
    formats and layouts (``torch.pi``, ``torch.float16``, ``torch.channels_last``), or Tensor's properties."""
    out = []
    for n, o in _attributes(obj, names):
        if isinstance(obj, type):  # a class: its data descriptors (properties), as they sit on the class
            o = inspect.getattr_static(obj, n, None)
            if callable(o) or isinstance(o, (staticmethod, classmethod)):
                continue
        elif inspect.ismodule(o) or callable(o):
            continue
        out.append(n)
    return sorted(set(out))


def categories(torch) -> dict[str, tuple[str, list[str]]]:
    """category -> (lazyflow path, torch's names)."""
    nn, F = torch.nn, torch.nn.functional
    return {
        "torch": ("", _public_callables(torch, torch.__all__, classes=False)),
        "Tensor": ("Tensor", _public_callables(torch.Tensor, dir(torch.Tensor), classes=False)),
        "torch values": ("", _public_values(torch, dir(torch))),
        "Tensor properties": ("Tensor", _public_values(torch.Tensor, dir(torch.Tensor))),
        "nn": ("nn", sorted(n for n in nn.modules.__all__ if inspect.isclass(getattr(nn, n, None)))),
        "nn.functional": (
            "nn.functional",
            [
                n
                for n in _public_callables(F, dir(F), classes=False)
                if getattr(getattr(F, n), "__module__", "")
                and "torch.nn.functional" in getattr(getattr(F, n), "__module__", "")
            ],
        ),
        "optim": (
            "optim",
            sorted(set(torch.optim.__all__) - {"lr_scheduler", "swa_utils"})
            + [f"lr_scheduler.{n}" for n in torch.optim.lr_scheduler.__all__]
            + [f"swa_utils.{n}" for n in torch.optim.swa_utils.__all__],
        ),
        "autograd": ("autograd", sorted(n for n in torch.autograd.__all__ if n != "grad_mode")),
        "func": ("func", sorted(torch.func.__all__)),
        "cuda": ("cuda", _public_callables(torch.cuda, torch.cuda.__all__, classes=None, documented=False)),
        "distributions": (
            "distributions",
            sorted(set(torch.distributions.__all__) - set(torch.distributions.transforms.__all__))
            + [f"transforms.{n}" for n in torch.distributions.transforms.__all__]
            + [f"constraints.{n}" for n in torch.distributions.constraints.__all__],
        ),
    }


def _has(lf, path: str, name: str) -> bool:
    obj = lf
    for part in [p for p in path.split(".") if p] + name.split("."):
        try:
            obj = getattr(obj, part)
        except Exception:
            return False
    return True


def _omitted(cat: str, name: str) -> str | None:
    for pattern, why in OMIT.get(cat, []):
        if re.search(pattern, name.rsplit(".", 1)[-1]):
            return why
    return None


def report() -> dict[str, dict]:
    import torch

    lf = importlib.import_module("lazyflow")
    out = {}
    for cat, (path, names) in categories(torch).items():
        present = [n for n in names if _has(lf, path, n)]
        missing = [n for n in names if n not in present]
        deliberate = {n: w for n in missing if (w := _omitted(cat, n))}
        out[cat] = {
            "total": len(names),
            "present": len(present),
            "deliberate": deliberate,
            "not_yet": [n for n in missing if n not in deliberate],
        }
    return out


def markdown(rep: dict[str, dict]) -> str:
    lines = [
        "# lazyflow's coverage of torch 2.13's public names",
        "",
        "Generated by `python tools/api_coverage.py --write` (kept current by tests/test_api_coverage.py). Names are",
        "computed from torch itself: documented public functions of `torch.__all__`, documented public methods of",
        "`torch.Tensor`, `torch.nn.modules.__all__`, the public functions defined in `torch.nn.functional`, the",
        "optimizers, schedulers and swa_utils, `torch.autograd.__all__`, `torch.func.__all__`, `torch.cuda.__all__`,",
        "`torch.distributions.__all__` with its `transforms` and `constraints` modules' `__all__`;",
        "and the public values: torch's non-callable attributes (constants such as `torch.pi`, dtypes, memory",
        "formats, layouts) and `torch.Tensor`'s properties.",
        "Coverage = present / (total - deliberate omissions).",
        "",
        "| category | total | present | deliberate omissions | coverage |",
        "|---|---|---|---|---|",
    ]
    for cat, r in rep.items():
        denom = r["total"] - len(r["deliberate"])
        lines.append(
            f"| {cat} | {r['total']} | {r['present']} | {len(r['deliberate'])} | "
            f"{100 * r['present'] / max(denom, 1):.0f}% |"
        )
    for cat, r in rep.items():
        lines += ["", f"## {cat}", ""]
        if r["deliberate"]:
            lines.append("Deliberate omissions:")
            by_reason: dict[str, list[str]] = {}
            for n, why in r["deliberate"].items():
                by_reason.setdefault(why, []).append(n)
            for why, names in by_reason.items():
                lines.append(f"- {why}: {', '.join(f'`{n}`' for n in names)}")
            lines.append("")
        lines.append(f"Not yet ({len(r['not_yet'])}): " + (", ".join(f"`{n}`" for n in r["not_yet"]) or "none"))
    return "\n".join(lines) + "\n"


def summary(rep: dict[str, dict]) -> str:
    """The README's line (between the api-coverage markers)."""
    parts = []
    for cat, r in rep.items():
        denom = max(r["total"] - len(r["deliberate"]), 1)
        parts.append(f"{cat} {r['present']}/{denom} ({100 * r['present'] / denom:.0f}%)")
    return "Coverage of torch 2.13's public names (present / total less deliberate omissions): " + ", ".join(parts)


def readme_with(text: str, line: str) -> str:
    a, b = text.index(_MARK[0]) + len(_MARK[0]), text.index(_MARK[1])
    return text[:a] + "\n" + line + "\n" + text[b:]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--write", action="store_true", help=f"regenerate {os.path.relpath(DOC, ROOT)}")
    args = ap.parse_args(argv)
    sys.path.insert(0, ROOT)
    rep = report()
    text = markdown(rep)
    if args.write:
        with open(DOC, "w") as f:
            f.write(text)
        with open(README) as f:
            readme = f.read()
        with open(README, "w") as f:
            f.write(readme_with(readme, summary(rep)))
    print(text.split("\n## ")[0])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
