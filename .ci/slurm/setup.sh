#!/usr/bin/env bash
# Configure a single-node SLURM "cluster" for CI: munge key, spool/log dirs, fake GPUs,
# slurm.conf and gres.conf for this host. Debian 12 (slurm 22.05), no systemd, no cgroups.
# Idempotent: files are rewritten with the same content; the munge key is made once.
# Refuses to touch a slurm.conf it did not write (a real installation on this machine).
set -euo pipefail

MARK="# written by stallcase .ci/slurm/setup.sh"
HOST=$(hostname -s)
GPUS=${STALLCASE_SLURM_FAKE_GPUS:-2}
PARTITION=${STALLCASE_SLURM_PARTITION:-gpu}
CONF=/etc/slurm/slurm.conf

if [ -e "$CONF" ] && ! grep -qxF "$MARK" "$CONF"; then
  echo "setup.sh: $CONF exists and was not written by this script; refusing to overwrite it" >&2
  exit 1
fi

# munge: the key is created once and kept (re-creating it would break a running munged).
install -d -o munge -g munge -m 0700 /etc/munge /var/lib/munge /var/log/munge
install -d -o munge -g munge -m 0755 /run/munge
if [ ! -s /etc/munge/munge.key ]; then
  mungekey --create --force
  chown munge:munge /etc/munge/munge.key
  chmod 0400 /etc/munge/munge.key
fi

install -d -m 0755 /etc/slurm /var/spool/slurmctld /var/spool/slurmd /var/log/slurm /run/slurm

# Fake GPUs for gres: slurmd rejects plain files ("not a valid character or block
# device"), so they are character devices with /dev/null's numbers (1, 3).
for i in $(seq 0 $((GPUS - 1))); do
  [ -c /dev/fakegpu$i ] || mknod -m 666 /dev/fakegpu$i c 1 3
done

# The node line comes from the hardware slurmd sees (first line; the second is UpTime).
NODE_LINE=$(slurmd -C | head -1)

# Why these settings (each one cost time when missing):
# - proctrack/linuxproc + task/none and no cgroup.conf: there are no cgroups here, and
#   22.05 aborts on CgroupPlugin=disabled.
# - DefMemPerCPU: without it a job that names no memory takes the whole node, and jobs
#   run one at a time.
# - MinJobAge >= 120: there is no slurmdbd, so Snakemake reads job states from squeue;
#   a finished job must stay visible there until the next status check.
# - AccountingStorageType=none: no slurmdbd; sacct does not work (the profile uses squeue).
TMP=$(mktemp)
cat > "$TMP" <<CONF
$MARK
ClusterName=stallcaseci
SlurmctldHost=${HOST}(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=512
SlurmctldPidFile=/run/slurm/slurmctld.pid
SlurmdPidFile=/run/slurm/slurmd.pid
SlurmctldPort=6817
SlurmdPort=6818
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
ReturnToService=2
MinJobAge=600
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=2
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
GresTypes=gpu
${NODE_LINE} NodeAddr=127.0.0.1 Gres=gpu:fake:${GPUS} State=UNKNOWN
PartitionName=${PARTITION} Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF
install -m 0644 "$TMP" "$CONF"
rm -f "$TMP"

printf '%s\nNodeName=%s Name=gpu Type=fake File=/dev/fakegpu[0-%d]\n' "$MARK" "$HOST" $((GPUS - 1)) > /etc/slurm/gres.conf
rm -f /etc/slurm/cgroup.conf
