# Configuration checks and path helpers shared by the stage rules (no rules here).
import os
import sys

from snakemake.utils import validate

sys.path.insert(0, workflow.basedir)  # workflow_lib importable without installation
import workflow_lib.capture.demo
import workflow_lib.collectives.rule
import workflow_lib.compare.rule
import workflow_lib.core.config
import workflow_lib.diagnose.rule
import workflow_lib.compare.looks
import workflow_lib.missing_incident
import workflow_lib.core.layout as layout
import workflow_lib.plan.build
import workflow_lib.plan.rule
import workflow_lib.plan.schedule
import workflow_lib.preflight.rule
import workflow_lib.report.rule
import workflow_lib.report.terminal
import workflow_lib.core.rulelog as rulelog
import workflow_lib.snapshot.rule
import workflow_lib.trials.rule

# --config values typed by the schema (Snakemake reads nested ones as strings), then alias bombs,
# text, numbers, and one line naming the failing key and what it accepts (Snakemake's validate
# prints the whole schema); validate then only fills in the defaults.
workflow_lib.core.config.exit_on_error(config, f"{workflow.basedir}/schemas/config.schema.json", workflow.config_settings.config)
validate(config, "../schemas/config.schema.json")

INCIDENTS = config["incidents_dir"]
workflow_lib.missing_incident.exit_if_missing(INCIDENTS, config["incident"])
RESULTS = config["results_dir"]
STORE = RESULTS  # the CAS lives at <results_dir>/cas/blake3/
BLOCKS = [workflow_lib.plan.schedule.block_id(i) for i in range(config["trials"]["blocks"])]
# The user's candidate stands alone; the demo's applies only to the demo, and only when none is given.
CANDIDATE = workflow_lib.plan.build.configured_candidate(config)
# Each plan (A/A, A/B, named experiment) has its own run directory (workflow_lib/core/layout.py).
RUN = layout.run_key(CANDIDATE, config["trials"], config.get("experiment"), config.get("source_repo"))

# Trial blocks time their runs, so on one machine two blocks must never run at once:
# they would share the GPU (or the CPU) and time each other. Unless the user said how
# many GPUs this machine has (--resources gpu=N), allow one. Cluster executors place
# each block on its own node, so there the limit would only serialize the fan-out.
# `workflow.local_exec` cannot tell them apart here: the Snakefile is parsed before the
# executor is attached, so it is always True. `nodes` (--jobs) is set only for cluster
# executors, including the jobstep inside each SLURM job.
if workflow.resource_settings.nodes is None and "gpu" not in workflow.global_resources:
    workflow.register_resource("gpu", 1)


wildcard_constraints:
    incident=r"[A-Za-z0-9][A-Za-z0-9._-]*",
    block=r"b[0-9]+",
    wave=r"w[0-9]+",
    run=layout.RUN_KEY_PATTERN,


def final_targets():
    i = config["incident"]
    return [layout.snapshot(RESULTS, i), layout.diagnosis(RESULTS, i), layout.comparison(RESULTS, i, RUN),
            layout.report(RESULTS, i, RUN), layout.latest_record(RESULTS, i)]


# Compare's inputs (rules/compare.smk): the execution records of a run, every block for a fixed design,
# the blocks the looks so far asked for with `trials: {stop: early}` (workflow_lib/compare/looks.py).
def _execution(w):
    return lambda block: layout.execution(RESULTS, w.incident, w.run, block)


def _executions(w):
    if config["trials"].get("stop", "fixed") != "early":
        return [layout.execution(RESULTS, w.incident, w.run, b) for b in BLOCKS]
    look = lambda wave: checkpoints.look.get(incident=w.incident, run=w.run, wave=wave).output[0]
    return workflow_lib.compare.looks.execution_targets(config["trials"], look, _execution(w))
