# Lines for .ci/run (owned by the lead), placed after `cd "$(dirname "$0")/.."` and
# before the pytest line. They start a real single-node SLURM from Debian packages
# (munge, slurmctld, slurmd; needs root and apt), stop exactly the daemons start.sh
# started when .ci/run exits however it exits (the trap is set first, so a start that
# fails half way is cleaned up too), and make tests/test_slurm.py fail instead of skip
# when the cluster is not there.
trap 'bash .ci/slurm/stop.sh' EXIT
bash .ci/slurm/start.sh
export STALLCASE_REQUIRE_SLURM=1
