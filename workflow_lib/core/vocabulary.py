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

# Collective-library kernels: NCCL (ncclKernel_..., ncclDevKernel_...) and RCCL (same names on ROCm).
COLLECTIVE_KERNEL_RE = re.compile(r"(^|[^A-Za-z])(nccl|rccl)", re.IGNORECASE)
P2P_OPS = frozenset({"send", "recv", "coalesced_p2p"})

# Kineto/Chrome-trace category spellings -> the table they feed (lower case).
SOURCE_ALIASES = {
    "kernel": ("kernel",),
    "memcpy": ("gpu_memcpy", "memcpy"),
    "memset": ("gpu_memset", "memset"),
    "runtime_api": ("cuda_runtime", "runtime", "cuda_driver", "driver", "hip_runtime", "hip_api"),
    "spans": ("cpu_op", "operator", "user_annotation", "gpu_user_annotation_host", "python_function"),
}

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
