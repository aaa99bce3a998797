"""With trials.record_runs, each run carries the recorder: its snapshot lands in the run's own
work directory (never in the incident it was rebuilt from) and comes with its own diagnosis."""

from pathlib import Path

import pytest

from workflow_lib.capture import demo
from workflow_lib.plan import build as P
from workflow_lib.preflight import check as PF
from workflow_lib.core import records
from workflow_lib.diagnose import load_diagnosis
from workflow_lib.snapshot import build as snapshot
from workflow_lib.trials import block as trials
from workflow_lib.trials import observe

from test_plan import DESIGN


# Relative, as the README's results_dir is: the run's cwd is the program's, not Snakemake's,
# and the capture must still land under the block's work dir (it once went to the program's cwd).
@pytest.mark.parametrize("relative_work", [False, True], ids=["absolute", "relative"])
def test_each_run_has_its_own_incident_and_diagnosis(tmp_path, monkeypatch, relative_work):
    manifest = demo.capture(tmp_path / "incidents", ["--steps", "8", "--min-ready", "2", "--producer-ms", "1"])
    original = manifest.read_bytes()
    snap = snapshot.ingest(manifest.parent, tmp_path / "results", tmp_path / "results" / "snapshot.json")
    design = dict(DESIGN, blocks=1, runs_per_arm=1, control_runs=0, warmup_runs=0, record_runs=True,
                  metric=dict(DESIGN["metric"], skip_steps=1))
    plan = P.build_plan(snap, records.digest_of(snap), tmp_path / "results", design=design,
                        candidate={"set_args": {"--min-ready": "1"}})
    pd = records.digest_of(plan)
    pre = PF.preflight(plan, pd, "b000", tmp_path / "results", results_dir=tmp_path / "results")
    assert pre["status"] == "pass", PF.readable_diff(pre)
    work = tmp_path / "work"
    if relative_work:
        monkeypatch.chdir(tmp_path)
    rec = trials.run_block(plan, pd, pre, records.digest_of(pre), "b000", tmp_path / "results",
                           "work" if relative_work else work)
    records.validate(rec.to_json(), "execution")
    assert [r.status for r in rec.runs] == ["ok", "ok"]
    for r in rec.runs:
        cap = r.capture
        assert cap.error is None and str(Path(cap.incident).resolve()).startswith(str(work / "captures"))
        d = load_diagnosis(cap.diagnosis)
        assert d.n_steps == 8 and cap.explained_ns + cap.unexplained_ns == d.record["summary"]["wall_ns"]
    assert manifest.read_bytes() == original  # the original incident is untouched
    # The JSON the typed Run writes has the keys, in the order, that the runner's dict wrote
    # before runs were typed (dataclasses.asdict of RunResult, d9bb896): every field, nulls included.
    written = rec.to_json()["runs"][0]
    assert list(written) == RUN_KEYS_AS_WRITTEN and list(written["capture"]) == CAPTURE_KEYS_AS_WRITTEN
    assert list(written["capture"]["components"]) == COMPONENTS_KEYS_AS_WRITTEN
    assert type(rec).from_json(rec.to_json()) == rec  # and reads back as the same typed record


RUN_KEYS_AS_WRITTEN = ["index", "arm", "attempt", "status", "exit_code", "start_unix_ns", "end_unix_ns", "metric_ns",
                       "values_ns", "gpu", "unusual", "error", "metric_source", "work", "stderr_tail", "ranks", "capture",
                       "alternates"]
CAPTURE_KEYS_AS_WRITTEN = ["incident", "diagnosis", "error", "explained_ns", "unexplained_ns", "components"]
COMPONENTS_KEYS_AS_WRITTEN = ["statistic", "steps", "values_ns", "unobserved", "excess_available", "spans_available",
                              "next_experiments"]


def test_each_run_carries_its_components(tmp_path):
    """The run's capture summary holds per-step means of its components; what the run did not
    observe (GPU sources on this CPU machine) is null with the reason, never 0."""
    from pathlib import Path

    from workflow_lib.trials import components as C

    manifest = demo.capture(tmp_path / "inc", ["--steps", "8", "--min-ready", "2", "--producer-ms", "1"])
    cap = observe.diagnose_capture(manifest.parent.parent, skip_steps=2)
    comp = cap.components
    d = load_diagnosis(cap.diagnosis)
    steps = d.steps(C.measured_rows(d, 2))
    assert comp.steps == len(steps) == 6
    v = comp.values_ns
    assert v["wall"] == sum(s["wall_ns"] for s in steps) / 6
    # The check components and the unexplained time partition the wall time.
    parts = [x for k, x in v.items() if k.startswith("check:")] + [v["unexplained"]]
    if all(x is not None for x in parts):
        assert abs(sum(parts) - v["wall"]) < 1e-6 * v["wall"]
    # Top-level spans partition the host thread's step time, with the rest in span:(none).
    spans = [x for k, x in v.items() if k.startswith("span:")]
    assert v["span:queue.wait"] > 0 and abs(sum(spans) - v["wall"]) < 1e-6 * v["wall"]
    for name, why in comp.unobserved.items():
        assert why
        if name in v:
            assert v[name] is None
    if not d.record["sources"].get("cupti", {}).get("status") == "observed":
        assert v["gpu_busy"] is None and "gpu_busy" in comp.unobserved
    assert C.value_of(comp, "span:never-recorded") == (0.0, None)
    assert C.value_of(None, "wall")[0] is None
    assert Path(cap.incident).is_dir()
