#!/usr/bin/env bash
# Reproducibility of one configuration's step time under three CPU placements (no pinning, pin by local rank, pin by node)
set -Eeuo pipefail
cd "$(dirname "$0")/../../.."
PY=$PWD/.venv/bin/python
CLUSTER="bash slurm/local_cluster.sh"
$CLUSTER up --nodes 2 --ranks-per-node 2 --inter 1gbit
trap '$CLUSTER down' EXIT
for rep in 0 1 2 3; do
 for cfg in "dsp 2" "megatron_lm 2" "single 1"; do
  set -- $cfg
  for bind in none local node; do
   case $bind in none) pre="";; local) pre='taskset -c $SLURM_LOCALID';; node) pre='taskset -c $SLURM_NODEID';; esac
   $CLUSTER exec srun -N 2 --ntasks-per-node 2 --kill-on-bad-exit=1 -t 5 bash -c "exec $pre $PY -m dspbench.cli run --launcher slurm --method $1 --sp $2 --gpus 4 --model stdit-tiny --frames 16 --spatial 256 --iters 20 --repeat $rep --records-file results/plan-validation/placement/$bind.jsonl" >/dev/null 2>>results/plan-validation/placement/err.log
   echo "$(date +%T) $rep $1 $bind done"
  done
 done
done
