"""The diagnosis of every committed fixture case is what the recorded code wrote (issue 37:
3ae5cf8; regenerated for issue 34, whose new checks and credit rule changed diagnoses on
purpose: the commit that regenerated tests/fixtures/diagnosis_digests.json lists each case that
changed and why, after its fixture tests held; regenerated for issue 37's diagnosis version 4,
which records where each finding sits (findings[].at, the findings table's at_json): every case
changed by that field alone, the record and the tables otherwise as before): the record byte for byte (its table digests
aside, which follow how the tables were split into row groups) and both Parquet tables by
content. tests/diagnosis_digests.py says which cases, what is compared and how
tests/fixtures/diagnosis_digests.json was made."""

from __future__ import annotations

import json

from tests.diagnosis_digests import EXPECTED, compute


def test_every_fixture_diagnosis_is_as_before():
    expected = json.loads(EXPECTED.read_text())["cases"]
    got = compute()
    # Every case of the base is still diagnosed; a fixture committed since has no "before" and
    # is not compared (its own tests say what its diagnosis must hold).
    gone = sorted(set(expected) - set(got))
    assert not gone, f"cases no longer diagnosed: {gone}: regenerate from the base checkout (tests/diagnosis_digests.py)"
    changed = {name: sorted(k for k in expected[name] if got[name].get(k) != expected[name].get(k))
               for name in expected if got[name] != expected[name]}
    assert not changed, f"{len(changed)} of {len(got)} diagnoses differ: {changed}"
