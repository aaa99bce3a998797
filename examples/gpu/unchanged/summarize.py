"""What an incident recorded by `stallcase record` holds, and what its diagnosis says: steps,
span names, GPU evidence per step, and the findings of the slowest steps and of typical steps.

    python examples/gpu/unchanged/summarize.py INCIDENT_DIR DIAGNOSIS_JSON  ->  JSON on stdout
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from workflow_lib.core.incident import read_incident  # noqa: E402
from workflow_lib.diagnose import load_diagnosis  # noqa: E402


def _step(st: dict) -> dict:
    return {"step_id": st["step_id"], "wall_ms": st["wall_ns"] / 1e6,
            "kernel_sum_ms": None if st["kernel_sum_ns"] is None else st["kernel_sum_ns"] / 1e6,
            "busy_ms": None if st["busy_ns"] is None else st["busy_ns"] / 1e6,
            "host_api_ms": None if st["host_api_ns"] is None else st["host_api_ns"] / 1e6,
            "attributed": [(f["check"], round(f["explains_ns"] / 1e6, 3)) for f in st["findings"] if f["verdict"] == "attributed"]}


def summarize(inc_dir: str, diag_path: str) -> dict:
    inc = read_incident(inc_dir)
    m = inc.manifest
    spans = inc.table("spans")
    names = Counter(spans["name"].to_pylist()) if spans.num_rows else Counter()
    cu = m["sources"].get("cupti", {})
    d = load_diagnosis(diag_path)
    steps = d.steps_table
    rows = d.steps(list(range(steps.num_rows)))
    walls = sorted(r["wall_ns"] for r in rows)
    median = walls[len(walls) // 2] if walls else 0
    slow = sorted(rows, key=lambda r: -r["wall_ns"])[:5]
    gpu = [r for r in rows if r["kernel_sum_ns"] is not None]
    typical = sorted(gpu, key=lambda r: abs(r["wall_ns"] - median))[:3]
    return {
        "incident": m["incident_id"], "reason": m["reason"], "steps_from": m["recorder"].get("steps"),
        "steps": inc.table("steps").num_rows, "median_step_ms": median / 1e6,
        "spans": dict(names.most_common(25)), "span_rows": spans.num_rows,
        "cupti": {"status": cu.get("status"), "reason": cu.get("reason"), "steps": (cu.get("detail") or {}).get("steps"),
                  "kernels": inc.table("kernels").num_rows, "runtime_api": inc.table("runtime_api").num_rows},
        "gpu_evidence": m["recorder"].get("gpu_evidence"),
        "summary_by_check": {k: v for k, v in d.record["summary"]["by_check"].items() if v.get("attributed_steps")},
        "slowest": [_step(r) for r in slow], "typical_with_gpu": [_step(r) for r in typical],
    }


if __name__ == "__main__":
    print(json.dumps(summarize(sys.argv[1], sys.argv[2]), indent=1, default=str))
