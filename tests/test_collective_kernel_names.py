"""One spelling of "a collective library's kernel" (core/vocabulary.py), where there were three:
the vocabulary's, the collectives loader's (`nccl` anywhere) and the diagnosis breakdown's (`nccl`
anywhere, or a name with all_reduce, allgather, reduce_scatter or cross_device_reduce)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from workflow_lib.core.vocabulary import COLLECTIVE_KERNEL_RE, is_collective_kernel

ROOT = Path(__file__).resolve().parents[1]

# The names on which the three spellings differed, and the one answer now.
CASES = [
    ("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)", True),  # all three
    ("ncclKernel_AllGather_RING_LL_Sum_int8_t", True),
    ("void ncclDevKernel_SendRecv(ncclDevComm*)", True),
    ("rcclKernel_AllReduce_Sum_f32", True),  # RCCL on ROCm: only the vocabulary's saw it
    ("NCCLDEVKERNEL_ALLREDUCE", True),  # case, as before in all three
    ("mynccl_wrapper_kernel", False),  # "nccl" inside a word: the loader's and the breakdown's took it
    ("cross_device_reduce_1stage<float, 8>", False),  # a framework's own all-reduce: the breakdown's only
    ("one_shot_all_reduce_kernel", False),  # idem
    ("ampere_sgemm_128x64_nn", False),
]


@pytest.mark.parametrize("name,collective", CASES)
def test_the_cases_the_spellings_differed_on(name, collective):
    assert is_collective_kernel(name) is collective


def test_the_loader_selects_with_the_same_spelling():
    import pandas as pd

    names = pd.Series([n for n, _ in CASES])
    assert names.str.contains(COLLECTIVE_KERNEL_RE).tolist() == [c for _, c in CASES]


def test_no_other_module_spells_its_own():
    """No module but the vocabulary compiles a regex that matches an NCCL kernel name by `nccl`
    alone (collectives/load.py's family pattern reads the op out of a name already selected)."""
    own = re.compile(r"re\.compile\(r?[\"'][^\"']*\bnccl\b(?![(?])", re.IGNORECASE)
    hits = [str(p.relative_to(ROOT)) for p in sorted((ROOT / "workflow_lib").rglob("*.py"))
            if p.name != "vocabulary.py" and own.search(p.read_text())]
    assert hits == []
