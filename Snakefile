# stallcase: incident -> snapshot -> store -> diagnosis -> plan -> preflight -> trials -> comparison -> report.
# This file only includes the stage rules and names the final targets; see rules/<stage>.smk.
from snakemake.utils import min_version

min_version("9.0")


configfile: "config/config.yaml"


include: "rules/common.smk"
include: "rules/capture.smk"
include: "rules/snapshot.smk"
include: "rules/collectives.smk"
include: "rules/diagnose.smk"
include: "rules/plan.smk"
include: "rules/preflight.smk"
include: "rules/trials.smk"
include: "rules/compare.smk"
include: "rules/report.smk"


localrules:
    all,
    snapshot,
    collectives,
    diagnose,
    plan,
    compare,
    look,
    report,
    made,
    latest,


rule all:
    input:
        final_targets(),


# The end of a run: the verdict and where the report is; on failure, the first stallcase
# error from the rule logs in one line, with the fix, or, when the run's runs all failed (rule
# made), the verdict and why no comparison could be made (workflow_lib/report/terminal.py).
onsuccess:
    workflow_lib.report.terminal.on_success(RESULTS, config["incident"], RUN)


onerror:
    workflow_lib.report.terminal.on_error(RESULTS, config["incident"], log, RUN)
