"""Turn one run of capture_transformer_incidents.py into the committed fixtures (<= 2 MB).

    python examples/gpu/make_transformer_fixtures.py RUN_DIR tests/fixtures/h200_transformer

RUN_DIR holds incidents/transformer/ (the recorder run), transformer.kineto.json.gz (the
Kineto run), truth.json and gpu.txt. The recorder incident is copied as captured. The Kineto
trace is imported (stallcase import kineto, no flags) and only its host spans are thinned to
nesting depth <= MAX_DEPTH (the trace's ~185k cpu_op/python rows are most of its size; a gap
inside a deeper span is inside its depth-<= MAX_DEPTH ancestor too, so the tier-1 host
evidence is kept, with a shallower span name). Every other table is as imported.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path

import pyarrow.compute as pc

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from workflow_lib.importers.kineto import import_kineto  # noqa: E402
from workflow_lib.core.incident import read_incident, write_incident  # noqa: E402

MAX_DEPTH = 1


def main(run_dir: str, out_dir: str) -> int:
    run, out = Path(run_dir), Path(out_dir)
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    shutil.copytree(run / "incidents" / "transformer", out / "transformer")
    with tempfile.TemporaryDirectory() as tmp:
        inc = read_incident(import_kineto([run / "transformer.kineto.json.gz"], incident_id="transformer-kineto", incidents_dir=tmp))
        data = {name: inc.table(name) for name in inc.manifest["tables"]}
        sp = data["spans"]
        data["spans"] = sp.filter(pc.less_equal(sp["depth"], MAX_DEPTH))
        manifest = {k: v for k, v in inc.manifest.items() if k not in ("tables", "created_unix_ns")}
        manifest["sources"]["spans"]["detail"]["thinned"] = f"host spans of nesting depth <= {MAX_DEPTH} kept ({data['spans'].num_rows} of {sp.num_rows}) for the fixture's size"
        for a in manifest.get("artifacts", []):
            a["path"] = "transformer.kineto.json.gz"  # the run's file name, not the importing machine's path
        write_incident(out / "transformer-kineto", manifest, data)
    truth = json.loads((run / "truth.json").read_text())
    truth["gpu"] = (run / "gpu.txt").read_text().strip().splitlines() if (run / "gpu.txt").exists() else None
    (out / "truth.json").write_text(json.dumps(truth, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
