"""One vocabulary for names that several stages must read the same way.

* Synchronizing calls: host API calls that block the calling thread until the GPU (a device,
  stream or event) catches up. CUDA runtime, CUDA driver and HIP spellings; versioned
  suffixes (`_v2`, `_v3020`, `_ptsz`, `_ptds`) are folded before the exact match.
* Allocator calls: device/pinned memory allocation and release.
* Launch calls: calls that enqueue GPU work.
* NCCL/RCCL kernel names, the point-to-point op set, source aliases, the rank key.

Decision on cudaFree/cudaMalloc (made once, here): `cudaFree` (and cuMemFree, hipFree,
cudaFreeHost, cuMemFreeHost, hipHostFree) *is* synchronizing: it waits for the device to
finish outstanding work before the memory is released, so the host blocks and the queue
drains behind it. `cudaMalloc` (cuMemAlloc, hipMalloc, cudaMallocHost, cudaHostAlloc) is
*not*: it does not wait for GPU work; it is slow host time in the driver. Both are allocator
calls, and the `allocator_churn` check reads them before `sync_stall` does, so a
cudaFree in a churning allocator is credited to the churn, not to a generic sync.
The asynchronous pool calls (cudaMallocAsync/cudaFreeAsync, cuMemAllocAsync, hipMallocAsync)
are stream-ordered: neither synchronizing nor counted as churn.
"""

from __future__ import annotations

import re

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

_SUFFIX = re.compile(r"(_v\d+|_ptsz|_ptds)+$")

SYNC_CALLS = frozenset({
    # CUDA runtime
    "cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize", "cudaThreadSynchronize",
    "cudaMemcpy", "cudaMemcpy2D", "cudaMemcpy3D", "cudaMemcpyFromSymbol", "cudaMemcpyToSymbol",
    "cudaMemcpyPeer", "cudaMemcpyToArray", "cudaMemcpyFromArray",
    "cudaFree", "cudaFreeHost", "cudaFreeArray",
    # CUDA driver
    "cuStreamSynchronize", "cuCtxSynchronize", "cuEventSynchronize", "cuMemcpy", "cuMemcpyDtoH",
    "cuMemcpyHtoD", "cuMemcpyDtoD", "cuMemcpyPeer", "cuMemcpy2D", "cuMemcpy3D", "cuMemFree", "cuMemFreeHost",
    # HIP
    "hipStreamSynchronize", "hipDeviceSynchronize", "hipEventSynchronize", "hipMemcpy", "hipMemcpyWithStream",
    "hipMemcpy2D", "hipMemcpy3D", "hipMemcpyDtoH", "hipMemcpyHtoD", "hipMemcpyDtoD", "hipMemcpyPeer",
    "hipMemcpyFromSymbol", "hipMemcpyToSymbol", "hipFree", "hipHostFree", "hipFreeHost",
})
# CUPTI SYNCHRONIZATION activity records (named cuda_sync:<type> by the CUPTI ingest).
SYNC_PREFIXES = ("cuda_sync:",)

ALLOC_CALLS = frozenset({
    "cudaMalloc", "cudaFree", "cudaMallocHost", "cudaHostAlloc", "cudaFreeHost", "cudaMallocManaged",
    "cudaMallocPitch", "cudaMalloc3D", "cuMemAlloc", "cuMemFree", "cuMemAllocHost", "cuMemFreeHost",
    "cuMemAllocManaged", "cuMemAllocPitch", "cuMemHostAlloc",
    "hipMalloc", "hipFree", "hipHostMalloc", "hipHostFree", "hipMallocManaged", "hipFreeHost", "hipExtMallocWithFlags",
})

LAUNCH_RE = re.compile(
    r"(LaunchKernel|cuLaunch|LaunchCooperative|cudaGraphLaunch|cuGraphLaunch|hipGraphLaunch|hipModuleLaunch"
    r"|hipExtLaunch|MemcpyAsync|MemsetAsync|MemcpyDtoHAsync|MemcpyHtoDAsync|MemcpyDtoDAsync)", re.IGNORECASE)

# Host spans that name compilation or autotuning (diagnose/checks/compilation.py, warm_up.py):
# torch's dynamo_timed regions in Kineto traces ("_compile.compile_inner (dynamo_timed)",
# "CachingAutotuner.benchmark_all_configs (dynamo_timed)"), triton autotune/benchmark spans,
# and spans a user or hook names around compiles. Not "Torch-Compiled Region" or
# "CompiledFunction": those are compiled code running, every step.
COMPILE_RE = re.compile(
    r"dynamo_timed|compile_inner|convert_frame|compile_fx|fw_compiler|bw_compiler|inductor_compile|call_user_compiler"
    r"|aot_compile|codegen_and_compile|recompil|autotun|benchmark_all_configs|triton[._ ]?(bench|tune|compile)"
    r"|entire_frame_compile|backend_compile|dynamo[ _.]compile|torch\.compile",
    re.IGNORECASE)

# Host spans the zero-change capture names for two stalls of the host (capture/inprocess/:
# gc_hooks.py, torch_hooks.py; docs/capture.md), read by the diagnosis' gc_pause and
# checkpoint_stall. Kineto and Nsight traces hold neither (a save there is read from its aten ops: diagnose/save_shape.py).
GC_SPAN = "gc.collect"
CHECKPOINT_SPANS = frozenset({"checkpoint.save", "checkpoint.dcp_save", "checkpoint.dcp_async_save"})

# Collective-library kernels: NCCL (ncclKernel_..., ncclDevKernel_...) and RCCL (same names on ROCm),
# not preceded by a letter. The one spelling for every stage (the collectives' kernel-only ranks,
# the diagnosis's evidence and its HTA-like breakdown, which counts communication as HTA does:
# by the library's kernel names; a framework's own all-reduce kernel, such as vLLM's
# cross_device_reduce, is compute to it, as it is to the collectives stage, which cannot match it).
COLLECTIVE_KERNEL_RE = re.compile(r"(?:^|[^A-Za-z])(?:nccl|rccl)", re.IGNORECASE)
P2P_OPS = frozenset({"send", "recv", "coalesced_p2p"})

# Kineto/Chrome-trace category spellings -> the table they feed (lower case).
SOURCE_ALIASES = {
    "kernel": ("kernel",),
    "memcpy": ("gpu_memcpy", "memcpy"),
    "memset": ("gpu_memset", "memset"),
    "runtime_api": ("cuda_runtime", "runtime", "cuda_driver", "driver", "hip_runtime", "hip_api"),
    "spans": ("cpu_op", "operator", "user_annotation", "gpu_user_annotation_host", "python_function"),
}

# CUPTI's CUpti_ActivityMemcpyKind by value (cupti_activity.h): the recorder's CUPTI parser names
# copies with it, and Nsight Systems exports keep the same values in copyKind (their
# ENUM_CUDA_MEMCPY_OPER table, where present, lists them: CUDA_MEMCPY_KIND_HTOD = 1, ...).
CUPTI_MEMCPY_KINDS = {0: "unknown", 1: "HtoD", 2: "DtoH", 3: "HtoA", 4: "AtoH", 5: "AtoA", 6: "AtoD", 7: "DtoA",
                      8: "DtoD", 9: "HtoH", 10: "PtoP"}

# Environment variables that name a process's rank, in the order they are trusted: torchrun's,
# then Open MPI's, MPICH/Cray PMI's, PMIx's, MVAPICH's, and SLURM's task id (one task per rank).
RANK_ENV_VARS = ("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "MV2_COMM_WORLD_RANK", "SLURM_PROCID")

# Incident producers whose GPU and host times come from one corrected clock: Kineto (CUPTI's
# timebase) and Nsight Systems (which puts GPU times on the CPU's timebase itself), so no
# clock_sync rows exist and none are needed (diagnose/evidence.py: Sources.shared_timebase).
SHARED_TIMEBASE_PRODUCERS = ("kineto-import", "nsys-import")

# Which manifest source names stand for each table: the recorder names its sources by
# mechanism (host, cupti, nvml), importers and builders by table.
TABLE_SOURCES = {
    "steps": ("steps", "host"),
    "spans": ("spans", "host"),
    "kernels": ("kernels", "cupti", "kineto"),
    "memcpy": ("memcpy", "kernels", "cupti", "kineto"),
    "runtime_api": ("runtime_api", "cupti", "kineto"),
    "nvml": ("nvml",),
    "collectives": ("collectives", "torch_fr", "nccl"),
}


def base_name(name: str) -> str:
    """An API call name without its version/per-thread-stream suffix (cudaMemcpy_v3020 -> cudaMemcpy)."""
    return _SUFFIX.sub("", str(name))


def is_sync_call(name: str) -> bool:
    """Does this host API call block until the GPU catches up? (See the module doc for the list.)"""
    n = str(name)
    return n.startswith(SYNC_PREFIXES) or base_name(n) in SYNC_CALLS


def is_alloc_call(name: str) -> bool:
    return base_name(name) in ALLOC_CALLS


def is_collective_kernel(name: str) -> bool:
    return bool(COLLECTIVE_KERNEL_RE.search(str(name)))


def rank_key(col: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """Ranks as int64 with -1 for null (single-process work)."""
    return np.asarray(pc.fill_null(col.cast(pa.int64()), -1).to_numpy(zero_copy_only=False), dtype=np.int64)


def per_name(names, fn) -> np.ndarray:
    """fn(name) per distinct name of a string column, broadcast to rows (names repeat)."""
    if len(names) == 0:
        return np.zeros(0, bool)
    enc = pc.dictionary_encode(names)
    if isinstance(enc, pa.ChunkedArray):
        enc = enc.combine_chunks()
    hits = np.array([bool(fn(n)) for n in enc.dictionary.to_pylist()], bool)
    return hits[enc.indices.to_numpy(zero_copy_only=False)] if hits.size else np.zeros(len(names), bool)
