#!/usr/bin/env bash
# Data movement, cold start and compilation captures on one H200 (issue 25), within 7 minutes.
# Usage (repo root; the integrator's wrapper has run `source examples/gpu/device_env.sh`):
#   bash examples/gpu/h200_data_movement.sh
# Writes exactly one file, $OUT/data.tar.gz: data-movement/<case>-<form>/ fixtures (incident/,
# truth.json, provenance.json), logs/, summary.json. Unpack its data-movement/ into
# tests/fixtures/h200/data-movement/ to commit the fixtures.
set -euo pipefail
: "${OUT:?set OUT to the output directory}"
export PYTHONUNBUFFERED=1
exec timeout 420 python3 examples/gpu/h200_data_movement.py --budget-s 380 "$@"
