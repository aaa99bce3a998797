"""Environment fingerprint: what must not change between an incident and its trials.

Every field is either an observed value or the string "not_observed" (with the reason
in `_not_observed[field]`): a field we could not read is never guessed. Preflight
compares fingerprints field by field; volatile readings (current clocks, temperature)
are deliberately absent because they move run to run without any change to the setup.
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
import sys
from typing import Any

NOT_OBSERVED = "not_observed"

# Fields that identify the setup. Preflight blocks on any difference in these.
GPU_FIELDS = (
    "gpu_count", "gpu_names", "gpu_uuids", "driver_version", "cuda_driver_version",
    "cuda_runtime_version", "nvcc_version", "app_sm_clock_mhz", "app_mem_clock_mhz",
    "max_sm_clock_mhz", "max_mem_clock_mhz", "clock_event_reasons_setting", "persistence_mode",
    "ecc_mode", "mig_mode", "compute_mode", "power_limit_mw",
)
SETTING_REASON_BITS = 0x2 | 0x100
# Identity, not setup: which physical GPU a block got. Recorded, shown, never blocking,
# because blocks fan out over different GPUs of the same model by design, and each block
# pairs its A and B runs on its own GPU.
INFO_FIELDS = ("gpu_uuids",)
HOST_FIELDS = ("cpu_model", "cpu_count", "kernel_release", "python_version", "machine")


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.lower().startswith(("model name", "hardware", "cpu model")):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or NOT_OBSERVED


def _nvcc_version() -> tuple[str, str | None]:
    nvcc = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc" if os.path.exists("/usr/local/cuda/bin/nvcc") else None)
    if not nvcc:
        return NOT_OBSERVED, "nvcc not found on PATH or in /usr/local/cuda/bin"
    try:
        out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=20, check=False).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        return NOT_OBSERVED, f"nvcc --version failed: {exc}"
    m = re.search(r"release ([0-9.]+), V([0-9.]+)", out)
    return (m.group(2) if m else out.strip().splitlines()[-1] if out.strip() else NOT_OBSERVED), None


def _cuda_versions(fp: dict, why: dict) -> None:
    """CUDA driver and runtime versions through cuda-python (cuda.bindings)."""
    try:
        from cuda.bindings import driver, runtime  # type: ignore
    except ImportError:
        try:
            from cuda import cuda as driver, cudart as runtime  # type: ignore  # older cuda-python
        except ImportError as exc:
            for f in ("cuda_driver_version", "cuda_runtime_version"):
                fp[f], why[f] = NOT_OBSERVED, f"cuda-python not importable: {exc}"
            return
    try:
        err, ver = driver.cuDriverGetVersion()
        fp["cuda_driver_version"] = int(ver) if int(err) == 0 else NOT_OBSERVED
        if int(err) != 0:
            why["cuda_driver_version"] = f"cuDriverGetVersion error {int(err)}"
    except Exception as exc:  # the binding raises its own error types when libcuda is absent
        fp["cuda_driver_version"], why["cuda_driver_version"] = NOT_OBSERVED, f"libcuda unavailable: {type(exc).__name__}: {exc}"
    try:
        err, ver = runtime.cudaRuntimeGetVersion()
        fp["cuda_runtime_version"] = int(ver) if int(err) == 0 else NOT_OBSERVED
        if int(err) != 0:
            why["cuda_runtime_version"] = f"cudaRuntimeGetVersion error {int(err)}"
    except Exception as exc:
        fp["cuda_runtime_version"], why["cuda_runtime_version"] = NOT_OBSERVED, f"libcudart unavailable: {type(exc).__name__}: {exc}"


def _nvml(fp: dict, why: dict, nvml: Any = None) -> None:
    nvml_fields = [f for f in GPU_FIELDS if f not in ("cuda_driver_version", "cuda_runtime_version", "nvcc_version")]
    try:
        if nvml is None:
            nvml = import_pynvml()
        nvml.nvmlInit()
    except Exception as exc:  # pynvml raises NVMLError subclasses, or ImportError/OSError
        for f in nvml_fields:
            fp[f], why[f] = NOT_OBSERVED, f"NVML unavailable: {type(exc).__name__}: {exc}"
        return
    try:
        n = nvml.nvmlDeviceGetCount()
        handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(n)]
        handles = _visible(nvml, handles, os.environ.get("CUDA_VISIBLE_DEVICES"))
        n = len(handles)

        def per_dev(field: str, fn) -> None:
            vals = []
            for h in handles:
                try:
                    v = fn(h)
                    vals.append(v.decode() if isinstance(v, bytes) else v)
                except Exception as exc:  # NVMLError_NotSupported etc.: this field is simply unreadable
                    fp[field], why[field] = NOT_OBSERVED, f"{type(exc).__name__}: {exc}"
                    return
            fp[field] = vals

        fp["gpu_count"] = n
        per_dev("gpu_names", nvml.nvmlDeviceGetName)
        per_dev("gpu_uuids", nvml.nvmlDeviceGetUUID)
        try:
            v = nvml.nvmlSystemGetDriverVersion()
            fp["driver_version"] = v.decode() if isinstance(v, bytes) else v
        except Exception as exc:
            fp["driver_version"], why["driver_version"] = NOT_OBSERVED, str(exc)
        per_dev("app_sm_clock_mhz", lambda h: nvml.nvmlDeviceGetApplicationsClock(h, nvml.NVML_CLOCK_SM))
        per_dev("app_mem_clock_mhz", lambda h: nvml.nvmlDeviceGetApplicationsClock(h, nvml.NVML_CLOCK_MEM))
        per_dev("max_sm_clock_mhz", lambda h: nvml.nvmlDeviceGetMaxClockInfo(h, nvml.NVML_CLOCK_SM))
        per_dev("max_mem_clock_mhz", lambda h: nvml.nvmlDeviceGetMaxClockInfo(h, nvml.NVML_CLOCK_MEM))
        getter = getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or nvml.nvmlDeviceGetCurrentClocksThrottleReasons
        # Only the reasons that come from configuration are setup: applications-clocks
        # setting (0x2) and display clock (0x100). Idle (0x1), power/thermal caps and
        # slowdowns are transient readings that change with load, not with the node.
        per_dev("clock_event_reasons_setting", lambda h: int(getter(h)) & SETTING_REASON_BITS)
        per_dev("persistence_mode", nvml.nvmlDeviceGetPersistenceMode)
        per_dev("ecc_mode", lambda h: list(nvml.nvmlDeviceGetEccMode(h)))
        per_dev("mig_mode", lambda h: list(nvml.nvmlDeviceGetMigMode(h)))
        per_dev("compute_mode", nvml.nvmlDeviceGetComputeMode)
        per_dev("power_limit_mw", nvml.nvmlDeviceGetPowerManagementLimit)
    finally:
        try:
            nvml.nvmlShutdown()
        except Exception:  # shutdown failure changes nothing we recorded
            pass


def import_pynvml():
    """pynvml, without its deprecation warning (the module is nvidia-ml-py's either way)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        import pynvml  # type: ignore
    return pynvml


def _visible(nvml, handles: list, visible: str | None) -> list:
    """The GPUs this job may use: NVML sees every GPU of the node, CUDA only the listed ones.

    CUDA_VISIBLE_DEVICES holds indices or UUIDs (full or prefix, 'GPU-...'). On a shared
    node the other GPUs belong to other jobs; their state is not this block's environment.
    """
    if visible is None or visible.strip() == "":
        return handles if visible is None else []
    out = []
    for item in (v.strip() for v in visible.split(",")):
        if item.isdigit():
            if int(item) < len(handles):
                out.append(handles[int(item)])
            continue
        for h in handles:
            try:
                u = nvml.nvmlDeviceGetUUID(h)
            except Exception:  # unreadable UUID: this entry cannot be matched by UUID
                continue
            u = u.decode() if isinstance(u, bytes) else u
            if u.startswith(item):
                out.append(h)
                break
    return out


def fingerprint(*, nvml: Any = None, with_nvcc: bool = True) -> dict:
    """The environment fingerprint of this node. `nvml` substitutes the binding (tests)."""
    fp: dict[str, Any] = {}
    why: dict[str, str] = {}
    fp["cpu_model"] = _cpu_model()
    fp["cpu_count"] = os.cpu_count() or NOT_OBSERVED
    fp["kernel_release"] = platform.release()
    fp["python_version"] = platform.python_version()
    fp["machine"] = platform.machine()
    _nvml(fp, why, nvml)
    _cuda_versions(fp, why)
    if with_nvcc:
        fp["nvcc_version"], reason = _nvcc_version()
        if reason:
            why["nvcc_version"] = reason
    else:
        fp["nvcc_version"], why["nvcc_version"] = NOT_OBSERVED, "not checked"
    fp["_not_observed"] = why
    return fp


def compare(planned: dict, observed: dict) -> list[dict]:
    """Field-by-field differences (fields starting with '_' are commentary, not compared)."""
    diffs = []
    for field in sorted(set(planned) | set(observed)):
        if field.startswith("_") or field in INFO_FIELDS:
            continue
        a, b = planned.get(field, NOT_OBSERVED), observed.get(field, NOT_OBSERVED)
        if a != b:
            diffs.append({"field": f"environment.{field}", "planned": a, "observed": b})
    return diffs


if __name__ == "__main__":  # python -m workflow_lib.core.environment: print this node's fingerprint
    import json

    json.dump(fingerprint(), sys.stdout, indent=2, default=str)
    print()
