"""Corpus families of issue 29 (generate.py calls `generate(g)` after hardening.py): numbers
that are not numbers, sizes without caps, structures that are not what they claim,
amplification, messages that must name the user's input, and warnings from numeric code.
Every input is small on disk (a 1M-step table is delta-encoded: a few KB).
"""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

import hardening as H
from workflow_lib.core.config.numbers import MAX_DIAGNOSED_STEPS

G = None  # the generate module


def _rel(p: Path) -> str:
    return G.rel(p)


def _design(**kw) -> dict:
    d = {"blocks": 6, "runs_per_arm": 2, "control_runs": 2, "warmup_runs": 1, "seed": 1, "max_retries": 1,
         "max_failed_fraction": 0.34, "confidence": 0.95,
         "metric": {"name": "step_time", "source": "auto", "statistic": "median", "unit": "ns"}}
    d.update(kw)
    return d


def _config(cat: str, label: str, text: str, frag: str, names_key: str | None = None) -> None:
    H._file_entry(cat, label, "c.yaml", text.encode(), "check_config", frag)


def _argv(cat: str, label: str, argv: list[str], names: str, frag: str) -> None:
    """A command whose flag is the bad input; the entry directory holds a valid incident."""
    inc = G.good_incident(G.OUT / cat / label / "inc")
    G.add(cat, label, "argv", names, frag, input_rel=_rel(inc))
    G.ENTRIES[-1]["argv"] = [a.replace("{inc}", "{w}/" + _rel(inc)) for a in argv]


def numbers() -> None:
    """NaN, infinity and sizes past the memory budget in options: config keys and CLI flags."""
    cat = "r3_numbers"
    trials = {
        "blocks-1e9": (dict(blocks=1_000_000_000), "accepts an integer in [1, 8192] blocks"),
        "blocks-1e9-float": (dict(blocks=1e9), "accepts an integer in [1, 8192] blocks"),
        "runs-per-arm-1e8": (dict(runs_per_arm=100_000_000), "accepts an integer in [1, 262144] runs"),
        "warmup-1e7": (dict(warmup_runs=10_000_000), "accepts an integer in [0, 262144]"),
        "design-over-run-cap": (dict(blocks=8000, runs_per_arm=100), "over the cap of 262144 runs"),
        "blocks-below-95": (dict(blocks=5), "no interval exists below 6 blocks"),
        "blocks-below-99": (dict(blocks=7, confidence=0.99), "no interval exists below 8 blocks"),
        "confidence-nan": (dict(confidence=float("nan")), "accepts a finite number in (0, 1)"),
        "confidence-inf": (dict(confidence=float("inf")), "accepts a finite number in (0, 1)"),
        "timeout-inf": (dict(run_timeout_s=float("inf")), "accepts a finite number in (0, 604800] seconds"),
        "timeout-nan": (dict(run_timeout_s=float("nan")), "accepts a finite number"),
        "failed-fraction-nan": (dict(max_failed_fraction=float("nan")), "accepts a finite number in [0, 1]"),
        "seed-neg-inf": (dict(seed=float("-inf")), "accepts an integer"),
    }
    import yaml

    for label, (kw, frag) in trials.items():
        _config(cat, f"config-{label}", yaml.safe_dump({"trials": _design(**kw)}), frag)
    _config(cat, "config-diagnose-warmup-huge", yaml.safe_dump({"diagnose": {"warmup_steps": 10**12}}),
            "accepts an integer in [0, 1000000000] steps")
    _config(cat, "config-stdout-regex-missing", yaml.safe_dump({"trials": _design(metric={
        "name": "t", "source": "stdout_regex", "statistic": "median", "unit": "ms"})}), "regex: is missing")
    _config(cat, "config-stdout-regex-null", yaml.safe_dump({"trials": _design(metric={
        "name": "t", "source": "stdout_regex", "regex": None, "statistic": "median", "unit": "ms"})}), "regex: is missing")
    for label, value, frag in [("nan", "nan", "accepts a finite number in [0, 3600000] ms"), ("inf", "inf", "accepts a finite"),
                               ("neg", "-1", "accepts a finite number in [0, 3600000] ms"), ("superscript", "²", "ASCII digits"),
                               ("huge", "1e300", "accepts a finite number in [0, 3600000] ms")]:
        _argv(cat, f"min-wait-ms-{label}", ["collectives", "{inc}", "--min-wait-ms", value], "--min-wait-ms", frag)
    for label, spec, frag in [("k-nan", "latency:k=nan", "latency:k: is 'nan'"), ("k-inf", "latency:k=inf", "latency:k: is 'inf'"),
                              ("k-1", "latency:k=1", "accepts a finite number in (1, 1000]"),
                              ("window-1e12", "latency:window=1000000000000", "accepts an integer in [3, 1048576] steps"),
                              ("warmup-1e99", "latency:warmup=1e99", "accepts an integer in [0, 1000000000] steps"),
                              ("cooldown-nan", "latency:cooldown=nan", "latency:cooldown"),
                              ("k-arabic", "latency:k=\u0663", "ASCII digits")]:
        _argv(cat, f"trigger-{label}", ["record", "--incidents-dir", "{w}/_out/incidents", "--trigger", spec, "--", "true"],
              "--trigger", frag)


def shape() -> None:
    """Structures that are not what they claim."""
    cat = "r3_shape"
    # A Parquet table with a column twice (pyarrow writes it; the reader must not pick one).
    for label, table in [
        ("steps-step-id-twice", pa.table([pa.array(np.arange(6)), pa.array(np.full(6, 7)), pa.array(np.arange(6)),
                                          pa.array(1_000_000 + np.arange(6) * 1_000_000), pa.array(1_900_000 + np.arange(6) * 1_000_000)],
                                         names=["step_id", "thread_id", "step_id", "start_ns", "end_ns"])),
        ("kernels-name-twice", pa.table([pa.array(["k"] * 8), pa.array(["k"] * 8), pa.array(np.zeros(8, np.int64)),
                                         pa.array(np.full(8, 7)), pa.array(1_100_000 + np.arange(8) * 600_000),
                                         pa.array(1_500_000 + np.arange(8) * 600_000)],
                                        names=["name", "name", "device", "stream", "start_ns", "end_ns"])),
    ]:
        name = label.split("-")[0]
        inc = G.good_incident(G.OUT / cat / label / "inc")
        f = inc / "tables" / f"{name}.parquet"
        G.raw_table(f, table)
        m = G.read_manifest(inc)
        m["tables"][name] = {"path": f"tables/{name}.parquet", "rows": table.num_rows, "digest": G.hash_file(f)}
        G.write_manifest(inc, m)
        G.add(cat, label, "ingest", _rel(f), "more than once")
    # The manifest's flight-recorder dump details with null, text or lists where objects belong.
    for label, dumps, frag in [
        ("dumps-list", [], "detail.dumps is list"),
        ("dumps-text", "x", "detail.dumps is str"),
        ("dump-text", {"0": "x"}, "detail.dumps.0 is str"),
        ("dump-list", {"0": [1, 2]}, "detail.dumps.0 is list"),
        ("groups-null-entry", {"0": {"groups": {"0": None}}}, "groups.0 is null"),
        ("groups-list", {"0": {"groups": [1]}}, "groups is list"),
        ("wrapped-null", {"0": {"wrapped": None, "wrapped_reason": "x"}}, "wrapped is null"),
        ("wrapped-reason-alone", {"0": {"wrapped_reason": "x"}}, "has wrapped_reason but no wrapped"),
        ("counter-text", {"0": {"groups": {"0": {"last_completed": "12"}}}}, "last_completed is '12'"),
        ("rank-superscript", {"\u00b2": {}}, "is not a decimal integer"),
        ("rank-arabic", {"\u0661": {}}, "is not a decimal integer"),
        ("rank-2p40", {str(2**40): {}}, "outside [0, 2147483647]"),
    ]:
        inc = G.good_incident(G.OUT / cat / f"fr-detail-{label}" / "inc")
        m = G.read_manifest(inc)
        m["sources"]["torch_fr"] = {"status": "observed", "reason": None, "detail": {"dumps": dumps}}
        G.write_manifest(inc, m)
        G.add(cat, f"fr-detail-{label}", "argv", _rel(inc / "manifest.json"), frag, input_rel=_rel(inc))
        G.ENTRIES[-1]["argv"] = ["collectives", "{w}/" + _rel(inc)]
    # A flight-recorder state that is a structure, not one of the states: one line, never printed.
    deep: list = []
    for _ in range(60):
        deep = [deep, "completed"]
    for label, state, frag in [
        ("state-nested-list", deep, "state is a list"),
        ("state-dict", {"completed": {"x": list(range(1000))}}, "state is a dict"),
        ("state-huge-text", "completed" * 2_300, "state is 'completedcompleted"),
        ("state-int", 3, "state is a int"),
    ]:
        H._file_entry(cat, f"fr-{label}", "nccl_trace_rank_0.pkl", pickle.dumps(H._dump([H._entry(state=state)]), protocol=4),
                      "import_torch_fr", frag)
    # Digits that are not ASCII (int() reads Arabic-Indic digits; '²'.isdigit() is True).
    for label, dump, frag in [
        ("pg-status-key-arabic", H._dump([H._entry()], pg_status={"\u0660": {"last_completed_collective": 1}}), "not a process-group id"),
        ("pg-status-counter-arabic", H._dump([H._entry()], pg_status={"0": {"last_completed_collective": "\u0661\u0662"}}),
         "expected an integer >= -1"),
        ("pg-ranks-arabic", H._dump([H._entry()], pg_config={"0": {"name": "0", "desc": "default_pg", "ranks": "[\u0660, \u0661]"}}),
         "expected a list like"),
    ]:
        H._file_entry(cat, f"fr-{label}", "nccl_trace_rank_0.pkl", pickle.dumps(dump, protocol=4), "import_torch_fr", frag)
    # A binary config file: one line, not a UnicodeDecodeError (doctor and check-config).
    binary = bytes(range(256)) * 4
    f = H._file_entry(cat, "config-binary-doctor", "c.yaml", binary, "check_config", "not UTF-8 text")
    G.ENTRIES[-1].update(consumer="argv", argv=["doctor", "{w}/" + _rel(f)])
    H._file_entry(cat, "config-binary-check", "c.yaml", binary, "check_config", "not UTF-8 text")


def amplification() -> None:
    """Small inputs that would expand past the memory budget: refused before allocation."""
    cat = "r3_amplify"
    # One long group member list, repeated in every row of the collectives table: the pickle
    # memo shares one entry 9,000 times (~30 KB on disk, 260 MB of group_ranks text).
    e = H._entry()
    big_group = {"0": {"name": "0", "desc": "default_pg", "ranks": list(range(5000))}}
    H._file_entry(cat, "fr-group-ranks-x-entries", "nccl_trace_rank_0.pkl",
                  pickle.dumps(H._dump([e] * 9000, pg_config=big_group), protocol=4), "import_torch_fr", "bytes of text, over the limit")
    # Steps past the cap (delta-encoded: a few KB; 1M when the cap was 38,229, 1,835,009 since
    # the batched diagnosis, issue 26): the diagnosis refuses it within the memory cap.
    inc = G.good_incident(G.OUT / cat / "steps-1m-diagnose" / "inc")
    n = MAX_DIAGNOSED_STEPS + 1
    starts = 1_000_000 + np.arange(n, dtype=np.int64) * 1_000_000
    t = G.T.conform("steps", pa.table({"step_id": np.arange(n, dtype=np.int64), "thread_id": np.full(n, 7, np.int64),
                                       "start_ns": starts, "end_ns": starts + 900_000, "rank": pa.nulls(n, pa.int32())}))
    f = inc / "tables" / "steps.parquet"
    pq.write_table(t, f, compression="zstd", use_dictionary=False,
                   column_encoding={c: "DELTA_BINARY_PACKED" for c in ("step_id", "thread_id", "start_ns", "end_ns")})
    m = G.read_manifest(inc)
    m["tables"]["steps"] = {"path": "tables/steps.parquet", "rows": n, "digest": G.hash_file(f)}
    G.write_manifest(inc, m)
    G.add(cat, "steps-1m-diagnose", "diagnose", _rel(inc), "steps to diagnose, over the cap")


def origin() -> None:
    """Problems found after conversion name the user's trace and its field, not tables/*.parquet."""
    cat = "r3_origin"
    for label, events, frag in [
        ("kineto-device-2p40", [H._ev(), H._kern(args={"device": 2**40, "stream": 7, "correlation": 1})], "from args.device"),
        ("kineto-memcpy-device-2p35", [H._ev(), H._kern(cat="gpu_memcpy", name="Memcpy HtoD", args={"device": 2**35, "stream": 7,
                                                                                                   "correlation": 1, "bytes": 4})],
         "from args.device"),
        ("kineto-step-clock-back", [H._ev(), H._ev(name="ProfilerStep#2", ts=50.0, dur=10.0), H._kern()], "from ts + dur of its step spans"),
    ]:
        H._file_entry(cat, label, "t.json", H._trace(events), "import_kineto", frag)
    # A flight-recorder time minus the incident's clock offset overflows int64: the dump is named.
    inc = G.good_incident(G.OUT / cat / "fr-offset-overflow" / "inc")
    m = G.read_manifest(inc)
    m["incident_id"] = "corpus"
    m["clock"] = {"host": "monotonic", "unix_minus_host_ns": -(2**62)}
    G.write_manifest(inc, m)
    d = G.OUT / cat / "fr-offset-overflow"
    (d / "incidents").mkdir(exist_ok=True)
    import shutil

    shutil.move(str(inc), d / "incidents" / "corpus")
    dump = d / "nccl_trace_rank_0.pkl"
    dump.write_bytes(pickle.dumps(H._dump([H._entry(time_created_ns=2**62 + 5)]), protocol=4))
    G.add(cat, "fr-offset-overflow", "argv", _rel(dump), "time_created_ns minus the incident's clock.unix_minus_host_ns",
          input_rel=_rel(dump))
    G.ENTRIES[-1]["argv"] = ["import", "torch-fr", "{w}/" + _rel(dump), "--incident", "corpus",
                             "--incidents-dir", "{w}/" + _rel(d / "incidents")]


def warnings_() -> None:
    """A value numeric code warns on (NaN cast to int64) is an error naming the input."""
    cat = "r3_warnings"
    n = 6
    for label, value in [("nvml-reasons-nan", float("nan")), ("nvml-reasons-inf", float("inf")), ("nvml-reasons-1e30", 1e30)]:
        nv = pa.table({"device": pa.array([0] * n, pa.int32()), "ts_ns": [1_000_000 + i * 1_000_000 for i in range(n)],
                       "metric": ["clock_event_reasons"] * n, "value": [value] * n, "source": ["nvml"] * n,
                       "rank": pa.nulls(n, pa.int32())})
        inc = G.new_incident(cat, label, {"nvml": nv})
        m = G.read_manifest(inc)
        m["sources"]["nvml"] = {"status": "observed", "reason": None}
        G.write_manifest(inc, m)
        G.add(cat, label, "diagnose", _rel(inc), "numeric code cannot use")


def generate(g) -> None:
    global G
    G = g
    for fam in (numbers, shape, amplification, origin, warnings_):
        fam()
