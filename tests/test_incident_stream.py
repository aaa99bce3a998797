"""Rank-by-rank import and diagnosis (incident_stream) give what the whole-incident path gives."""

from __future__ import annotations

import re

import pyarrow as pa
import pytest

from benchmarks.kineto_trace import synthetic_trace, write
from workflow_lib.core import records, tables
from workflow_lib.diagnose import diagnose, diagnose_dir, diagnose_to_file, load_diagnosis
from workflow_lib.diagnose.spool import StepSpool
from workflow_lib.core.errors import InputError, RecordError
from workflow_lib.importers import kineto
from workflow_lib.core.incident import read_incident, write_incident
from workflow_lib.core.incident_stream import read_incident_by_rank

RANKS = (2, 0, 5)  # out of order: the files' order is not the ranks' order


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    d = tmp_path_factory.mktemp("traces")
    # Different step counts and kernel loads per rank, so no rank's rows equal another's.
    return [write(synthetic_trace(steps=6 + 2 * i, kernels_per_step=8 + 3 * i, rank=r, world_size=8), d / f"r{r}.json")
            for i, r in enumerate(RANKS)]


def _whole_import(files) -> dict[str, pa.Table]:
    """The import as it was before it streamed: every rank's tables held, concatenated at the end."""
    parts: dict[str, list[pa.Table]] = {}
    rx = re.compile(kineto.DEFAULT_STEP_PATTERN)
    for i, path in enumerate(files):
        pieces, meta = kineto._read_one(path)
        base, shift, _ = kineto._base(meta, pieces, path)
        done = kineto._finish(pieces, kineto._rank_of(meta, i, path), base, shift, rx, path)
        done.pop("_basis")
        for name, t in done.items():
            parts.setdefault(name, []).append(t)
    return {name: pa.concat_tables(ts, promote_options="permissive") for name, ts in parts.items()}


def test_streamed_import_writes_the_whole_import_tables(traces, tmp_path):
    out = kineto.import_kineto(traces, incident_id="s", incidents_dir=tmp_path)
    inc = read_incident(out)
    want = _whole_import(traces)
    assert set(inc.tables) == set(want)
    for name, t in want.items():
        assert inc.table(name).equals(tables.conform(name, t)), name
        assert inc.manifest["tables"][name]["rows"] == t.num_rows
    starts = [min(t["start_ns"].to_pylist()) for t in want.values() if t.num_rows]
    ends = [max(t["end_ns"].to_pylist()) for t in want.values() if t.num_rows]
    assert inc.manifest["window"] == {"start_ns": min(starts), "end_ns": max(ends)}
    assert inc.manifest["ranks"] == sorted(RANKS)


def test_ranked_diagnosis_equals_the_whole_incident_diagnosis(traces, tmp_path):
    out = kineto.import_kineto(traces, incident_id="s", incidents_dir=tmp_path / "streamed")
    # The reference: the whole-import tables written in one piece (one row group per table),
    # read whole, diagnosed from memory.
    ref_dir = tmp_path / "whole" / "s"
    manifest = {k: v for k, v in read_incident(out).manifest.items() if k != "tables"}
    write_incident(ref_dir, manifest, _whole_import(traces))
    ref = diagnose(read_incident(ref_dir), incident_id="s", snapshot_digest="0" * 64)
    got = diagnose_dir(out)
    assert got["snapshot_digest"] != ref["snapshot_digest"]  # the manifests differ (digests of files)
    got["snapshot_digest"] = ref["snapshot_digest"]
    assert got == ref
    assert {s["rank"] for s in got["steps"]} == set(RANKS)
    assert len(got["steps"]) == sum(6 + 2 * i for i in range(len(RANKS)))


def test_for_rank_reads_only_that_ranks_row_groups(traces, tmp_path):
    out = kineto.import_kineto(traces, incident_id="s", incidents_dir=tmp_path)
    whole = read_incident(out)
    ranked = read_incident_by_rank(out)
    assert sorted(ranked.ranks("kernels").tolist()) == sorted(RANKS)
    for r in RANKS:
        view = ranked.for_rank(r)
        for name in ("kernels", "memcpy", "runtime_api", "spans"):
            t = whole.table(name)
            assert view.table(name).equals(t.filter(pa.compute.equal(t["rank"], r))), (name, r)
    assert ranked.for_rank(7).table("kernels").num_rows == 0


def test_null_rank_rows_read_as_rank_minus_one(tmp_path):
    """An incident from the recorder of a single process has no rank: its rows are rank key -1."""
    src = kineto.import_kineto([write(synthetic_trace(steps=4, kernels_per_step=3), tmp_path / "t.json")],
                               incident_id="one", incidents_dir=tmp_path / "a")
    inc = read_incident(src)
    data = {n: t.set_column(t.schema.get_field_index("rank"), "rank", pa.nulls(t.num_rows, pa.int32()))
            for n, t in inc.tables.items()}
    dst = tmp_path / "b" / "one"
    write_incident(dst, {k: v for k, v in inc.manifest.items() if k != "tables"}, data)
    ranked = read_incident_by_rank(dst)
    assert ranked.ranks("kernels").tolist() == [-1]
    assert ranked.for_rank(-1).table("kernels").num_rows == inc.table("kernels").num_rows
    assert ranked.for_rank(0).table("kernels").num_rows == 0
    ref = diagnose(read_incident(dst), incident_id="one", snapshot_digest="0" * 64)
    got = diagnose_dir(dst)
    got["snapshot_digest"] = ref["snapshot_digest"]
    assert got == ref


def test_refused_later_rank_leaves_nothing(traces, tmp_path):
    """A refusal after earlier ranks were written: no incident directory, no temp files."""
    bad = tmp_path / "bad.json"
    bad.write_text(traces[1].read_text().replace('"dur": ', '"dur": -', 1))
    with pytest.raises(InputError, match="negative dur|dur"):
        kineto.import_kineto([traces[0], bad], incident_id="x", incidents_dir=tmp_path / "incidents")
    assert not (tmp_path / "incidents" / "x").exists()


def test_row_count_disagreeing_with_manifest_refused(traces, tmp_path):
    out = kineto.import_kineto(traces[:1], incident_id="s", incidents_dir=tmp_path)
    import json

    m = json.loads((out / "manifest.json").read_text())
    m["tables"]["kernels"]["rows"] += 1
    (out / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(InputError, match="manifest says"):
        read_incident_by_rank(out)


@pytest.mark.parametrize("steps", [5, 350])
def test_diagnosis_to_file_is_the_diagnose_dir_file(tmp_path, steps):
    files = [write(synthetic_trace(steps=steps, kernels_per_step=3, rank=r, world_size=3), tmp_path / f"r{r}.json") for r in range(3)]
    out = kineto.import_kineto(files, incident_id="s", incidents_dir=tmp_path / "inc")
    whole = diagnose_dir(out, out_path=tmp_path / "whole.json")
    got = diagnose_to_file(out, tmp_path / "spooled.json")
    # the same record and the same tables, byte for byte (one row group per rank in both)
    assert (tmp_path / "spooled.json").read_bytes() == (tmp_path / "whole.json").read_bytes()
    for name in ("steps", "findings"):
        assert (tmp_path / f"spooled.{name}.parquet").read_bytes() == (tmp_path / f"whole.{name}.parquet").read_bytes()
    assert got == records.read_record(tmp_path / "spooled.json", "diagnosis")
    assert got["summary"]["steps"] == got["step_tables"]["steps"]["rows"] == len(whole["steps"]) == 3 * steps
    assert load_diagnosis(tmp_path / "spooled.json").steps() == whole["steps"]


def test_spooled_step_with_other_fields_is_refused_and_leaves_nothing(tmp_path):
    rec = diagnose_dir(kineto.import_kineto([write(synthetic_trace(steps=4, kernels_per_step=2, rank=0, world_size=1),
                                                   tmp_path / "r0.json")], incident_id="x", incidents_dir=tmp_path / "inc"))
    steps = rec["steps"]
    steps[-1] = dict(steps[-1], extra=1)  # the last step: every one is checked, not a sample
    (tmp_path / "out").mkdir()
    with StepSpool(tmp_path / "out" / "d.json") as spool:
        with pytest.raises(InputError, match=f"step {len(steps) - 1} .*extra not in the steps table"):
            spool.add(steps)
    assert list((tmp_path / "out").iterdir()) == []


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_spooled_step_holding_nan_or_infinity_is_refused(tmp_path, bad):
    # Deep inside a step, where only the encoders' allow_nan=False sees it (no separate walk).
    steps = [{"step_id": i, "findings": [], "wall_ns": 1, "explained_ns": 0, "unexplained_ns": 1} for i in range(3)]
    steps[2] = dict(steps[2], findings=[{"evidence": {"ratio": [1.0, bad]}}])
    with StepSpool(tmp_path / "d.json") as spool:
        with pytest.raises(RecordError, match="^" + re.escape(f"{tmp_path / 'd.json'}: record holds NaN or infinity")):
            spool.add(steps)


def test_spooled_job_warm_up_and_experiments_equal_the_in_memory_ones(tmp_path):
    """The job summary, the warm-up line and the next experiments (steady-state steps only)
    summed rank by rank from the spool are what the whole list gives."""
    from builders import make_incident, span, step

    from workflow_lib.diagnose.spool import StepSpool

    ms = 1_000_000
    st, sp, t = [], [], 0
    for s in range(8):  # rank 2 does 40 ms more augment; every rank's first step is cold (compiles)
        cold = 200 * ms if s == 0 else 0
        arrive = {r: t + cold + 5 * ms + (40 * ms if r == 2 else 0) for r in range(3)}
        end = max(arrive.values()) + ms
        for r in range(3):
            st.append(step(s, t, end, rank=r))
            sp.append(span("forward", t, t + cold + 5 * ms, rank=r))
            if r == 2:
                sp.append(span("augment", t + cold + 5 * ms, arrive[r], rank=r))
            sp.append(span("all_reduce", arrive[r], end, rank=r))
        t = end
    inc = make_incident(steps=st, spans=sp)
    inc.manifest["job"] = {"id": "x", "id_from": "derived", "roles": {"0": "consumer", "1": "producer", "2": "producer"}}
    whole = diagnose(inc, incident_id="j", snapshot_digest="0" * 64)
    with StepSpool(tmp_path / "d.json") as spool:
        spooled = diagnose(inc, incident_id="j", snapshot_digest="0" * 64, spool=spool)
    assert whole["summary"]["job"]["slowest_rank"] == 2 and whole["summary"]["warm_up"]["steps"] == 3
    assert whole["next_experiments"] and whole["next_experiments"][0]["steps"] == 3 * 7  # the cold steps left out
    assert "steps" not in spooled and spooled == {k: v for k, v in whole.items() if k != "steps"}
