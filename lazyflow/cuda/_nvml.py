"""torch.cuda's NVML queries (utilization, temperature, power, clock, memory as ``nvidia-smi`` reports them).

JAX reports none of these, so, as torch does, they read NVML through the optional ``pynvml`` module (pip install
nvidia-ml-py). Without it they raise :class:`NoNvmlError` (a ModuleNotFoundError, as torch raises), whether or not
there is a GPU -- torch's CPU build raises the same; ``list_gpu_processes`` returns torch's sentence instead.
"""

from __future__ import annotations

import importlib
from typing import Any

from ._common import DeviceLike, NoNvmlError, index, jax_device

__all__ = ["utilization", "memory_usage", "temperature", "power_draw", "clock_rate", "device_memory_used"]


def _pynvml() -> Any:
    try:
        return importlib.import_module("pynvml")  # optional: an extra a user installs for these queries only
    except ImportError as e:
        raise NoNvmlError(
            "nvidia-ml-py does not seem to be installed or it can't be imported: lf.cuda's NVML queries read "
            "utilization, temperature, power and clocks through it (JAX reports none of them); pip install "
            "nvidia-ml-py"
        ) from e


def _handle(device: DeviceLike, what: str) -> tuple[Any, Any]:
    nvml = _pynvml()
    jax_device(device, what)
    nvml.nvmlInit()
    return nvml, nvml.nvmlDeviceGetHandleByIndex(index(device, optional=True))


def utilization(device: DeviceLike = None) -> int:
    """Percent of the last sample period in which a kernel ran on the GPU (NVML).

    Raises:
        NoNvmlError: pynvml is missing (a ModuleNotFoundError, as in torch).  NoCudaError: JAX has no GPU.
    """
    nvml, h = _handle(device, "utilization()")
    return int(nvml.nvmlDeviceGetUtilizationRates(h).gpu)


def memory_usage(device: DeviceLike = None) -> int:
    """Percent of the last sample period in which device memory was read or written (NVML). Raises as
    :func:`utilization`."""
    nvml, h = _handle(device, "memory_usage()")
    return int(nvml.nvmlDeviceGetUtilizationRates(h).memory)


def temperature(device: DeviceLike = None) -> int:
    """The GPU die's temperature in degrees Celsius (NVML). Raises as :func:`utilization`."""
    nvml, h = _handle(device, "temperature()")
    return int(nvml.nvmlDeviceGetTemperature(h, 0))


def power_draw(device: DeviceLike = None) -> int:
    """The GPU's power draw in milliwatts (NVML). Raises as :func:`utilization`."""
    nvml, h = _handle(device, "power_draw()")
    return int(nvml.nvmlDeviceGetPowerUsage(h))


def clock_rate(device: DeviceLike = None) -> int:
    """The SM clock in MHz (NVML). Raises as :func:`utilization`."""
    nvml, h = _handle(device, "clock_rate()")
    return int(nvml.nvmlDeviceGetClockInfo(h, 1))


def device_memory_used(device: DeviceLike = None) -> int:
    """Bytes of device memory in use by every process, as ``nvidia-smi`` counts them (NVML). Raises as
    :func:`utilization`."""
    nvml, h = _handle(device, "device_memory_used()")
    return int(nvml.nvmlDeviceGetMemoryInfo(h).used)


def list_gpu_processes(device: DeviceLike = None) -> str:
    """The processes using the GPU and their memory, one line each (NVML); without pynvml, torch's sentence saying
    so (as torch answers).

    Raises:
        NoCudaError: JAX has no GPU (with pynvml installed).
    """
    try:
        nvml, h = _handle(device, "list_gpu_processes()")
    except NoNvmlError:
        return "pynvml module not found, please install nvidia-ml-py"
    procs = nvml.nvmlDeviceGetComputeRunningProcesses(h)
    lines = [f"GPU:{index(device, optional=True)}"]
    if not procs:
        lines.append("no processes are running")
    for p in procs:
        lines.append(f"process {p.pid:>10d} uses {p.usedGpuMemory / (1024 * 1024):>12.3f} MB GPU memory")
    return "\n".join(lines)
