"""One dump's counters, versions and wrap, across dump versions (workflow_lib/core/formats/fr_dump.py)."""

from __future__ import annotations

import pytest

from benchmarks.fr_builders import T0_NS, MS, dump, entry, to_json
from workflow_lib.core.formats.fr_dump import dump_detail, dump_table, group_counters, nccl_version
from workflow_lib.core.errors import InputError


def _detail(d):
    return dump_detail(d, dump_table(d, 0, "x"), "x")


def test_counters_map_to_group_names_through_entries():
    es = [entry(i, i + 1, T0_NS + i * MS) for i in range(3)] + [entry(3, 1, T0_NS + 5 * MS, pg="1", desc="sub")]
    d = dump(es, {"0": ("default_pg", [0, 1]), "1": ("sub", [0, 1])})
    counters, unmapped = group_counters(d, "x")
    assert counters["0"]["last_completed"] == 3 and counters["1"]["last_enqueued"] == 1 and unmapped == []


def test_json_strings_and_minus_one():
    es = [entry(0, 1, T0_NS, state="scheduled")]
    d = to_json(dump(es))
    assert d["pg_status"]["0"]["last_completed_collective"] == "-1"
    c = group_counters(d, "x")[0]["0"]
    assert (c["last_enqueued"], c["last_started"], c["last_completed"]) == (1, None, None)


def test_nccl_version_key_by_dump_version():
    assert nccl_version({"comm_lib_version": "2.28.9"}) == "2.28.9"
    assert nccl_version({"nccl_version": "2.21.5"}) == "2.21.5"   # 2.7 - 2.9
    assert nccl_version({"version": "2.3"}) is None


def test_pending_only_dump_without_counters_is_not_called_wrapped():
    # Dumps before pg_status (or with it stripped) cannot tell onlyActive from a wrap.
    d = dump([entry(40, 21, T0_NS, state="scheduled")], version="2.2", pg_status={})
    del d["pg_status"]
    det = _detail(d)
    assert det["wrapped"] is False and "no pg_status" in det["wrapped_reason"] and det["pending_only"]


def test_pending_only_dump_wrapped_when_counters_show_a_lost_pending_op():
    d = dump([entry(40, 21, T0_NS, state="scheduled")],
             pg_status={"0": {"last_enqueued_collective": 21, "last_started_collective": 18, "last_completed_collective": 18}})
    det = _detail(d)
    assert det["wrapped"] is True and "19..20" in det["wrapped_reason"]


def test_full_dump_with_a_first_record_id_above_zero_wrapped():
    d = dump([entry(7, 8, T0_NS), entry(8, 9, T0_NS + MS)])
    assert _detail(d)["wrapped"] is True


@pytest.mark.parametrize("bad,field", [({"last_enqueued_collective": "x"}, "last_enqueued_collective"),
                                       ({"last_completed_collective": -5}, "last_completed_collective"),
                                       ({"last_started_collective": True}, "last_started_collective")])
def test_bad_counter_is_one_line_error_naming_the_field(bad, field):
    d = dump([entry(0, 1, T0_NS)])
    d["pg_status"]["0"].update(bad)
    with pytest.raises(InputError, match=field):
        group_counters(d, "dumpfile")


def test_unknown_state_is_refused():
    d = dump([entry(0, 1, T0_NS, state="finished")])
    with pytest.raises(InputError, match="state"):
        dump_table(d, 0, "dumpfile")
