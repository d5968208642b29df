#!/usr/bin/env bash
# Issue 25's plan validation at one inter-node rate, start to end, as root from the repository root:
# the emulated 2-node x 2-rank SLURM cluster up at RATE, one calibration (the tiers recipe, under srun,
# written to OUT/profile-RATE/), then for each held-out shape T:S of stdit-tiny: `plan --top 3
# --emit-sweep --repeats 3`, the emitted sweep on SLURM, a wait for its jobs, `plan.check`; the cluster
# down at the end. Nothing is fit: the profile is measured once, before any shape runs.
#   [ITERS=N] [REPEATS=R] [SP_ONLY=1] bash results/plan-validation/rerun.sh RATE OUT [MODEL:]T:S ...   e.g. 200mbit results/plan-validation/quiet 32:64 stdit3-tiny:4:512
# MODEL: the shape's model (default stdit-tiny, the calibration's model whatever the shapes' are).
# SIZES: the calibration's collective sizes (default 128K,256K,512K,1M,2M,4M; runs before the fifth used 128K,512K,2M,4M).
# SP_ONLY=1: plan every method but `single`, so every row is sequence-parallel (SP >= 2): the plan must choose between methods.
# ITERS: timed steps per configuration (default 5, run's default); other than 5 it names the folders -i<N>.
# REPEATS: measurements of each configuration (default 3); other than 3 it names the folders -r<R>.
# A profile already in OUT/profile-RATE/ is reused (one calibration per rate), never re-measured.
# The calibration also trains every method at its own shape (T 16 S 256) at the SP degrees METHOD_SP
# (default 2,4), METHOD_ITERS steps (default ITERS) in METHOD_REPEATS rotated rounds (default 1):
# `calibrate --methods all`, the per-method term plan's rows are priced with.
# Each shape's folder OUT/<rate>-stdit-tiny-T<T>-S<S>[-i<ITERS>]/ gets plan.json, sweep.toml, results/, check.md,
# check.json and run.log (the load average when its sweep started and ended).
set -Eeuo pipefail
RATE=${1:?RATE (200mbit, 1gbit)}; OUT=${2:?OUT folder}; shift 2
(($# > 0)) || { echo "rerun.sh: name at least one shape T:S" >&2; exit 2; }
ITERS=${ITERS:-5}
REPEATS=${REPEATS:-3}
METHOD_SP=${METHOD_SP:-2,4}
METHOD_ITERS=${METHOD_ITERS:-$ITERS}
METHOD_REPEATS=${METHOD_REPEATS:-1}
SP_ONLY=${SP_ONLY:-0}
# the calibration's collective sizes: its table is interpolated between them, and the steps' calls
# (0.2-2 MB here) fall between 512K and 2M, where reduce-scatter and p2p times bend (the fifth run on)
SIZES=${SIZES:-128K,256K,512K,1M,2M,4M}
PY=$PWD/.venv/bin/python
CLUSTER="bash slurm/local_cluster.sh"
PROFILE=$OUT/profile-$RATE/tiers-profile.toml
stamp() { echo "== $(date -u +%FT%TZ) $1; load: $(cat /proc/loadavg)"; }

mkdir -p "$OUT/profile-$RATE"
$CLUSTER up --nodes 2 --ranks-per-node 2 --inter "$RATE"
trap '$CLUSTER down' EXIT
bash slurm/multinode.sh status

if [[ ! -f $PROFILE ]]; then
    { stamp "calibrate start"
      $CLUSTER exec srun -N 2 --ntasks-per-node 2 --kill-on-bad-exit=1 -t 21 \
          "$PY" -m dspbench.cli calibrate --launcher slurm --tiers --gpus 4 --gpus-per-node 2 \
          --nics-per-node 1 --sizes "$SIZES" --iters 5 --model stdit-tiny --frames 16 --spatial 256 \
          --sp 4 --threads 1 --methods all --method-sp "$METHOD_SP" --method-iters "$METHOD_ITERS" \
          --method-repeats "$METHOD_REPEATS" \
          --name "emulated-tiers-$RATE-methods" --output "$PROFILE"
      stamp "calibrated"; } 2>&1 | tee "$OUT/profile-$RATE/calibrate.log"
fi

METHODS=all
# every method the profile's declared stack runs (a method it cannot run is plan's exit 2), but `single`
((SP_ONLY)) && METHODS=$("$PY" -c "
from dspbench.cost.hardware import load_profile; from dspbench.methods import available, get_method
from dspbench.methods.stack import missing_from
stack = load_profile('$PROFILE').stack
print(','.join(m for m in available() if m != 'single' and not missing_from(get_method(m).requires, stack)))")
for shape in "$@"; do
    MODEL=stdit-tiny; [[ $shape == *:*:* ]] && { MODEL=${shape%%:*}; shape=${shape#*:}; }
    T=${shape%%:*}; S=${shape##*:}
    P=$OUT/$RATE-$MODEL-T$T-S$S$( ((ITERS == 5)) || echo "-i$ITERS")$( ((REPEATS == 3)) || echo "-r$REPEATS")
    mkdir -p "$P"
    "$PY" -m dspbench.cli plan --model "$MODEL" --frames "$T" --spatial "$S" --mode train --gpus 4 --methods "$METHODS" \
        --hardware "$PROFILE" --top 3 --emit-sweep "$P/sweep.toml" --cluster local_multinode --repeats "$REPEATS" \
        --iters "$ITERS" --json > "$P/plan.json"
    { stamp start
      $CLUSTER exec "$PWD/.venv/bin/dspbench" sweep "$P/sweep.toml" --executor slurm --results "$P/results"
      while [[ -n $($CLUSTER exec squeue -h 2>/dev/null) ]]; do sleep 10; done
      stamp done
      "$PWD/.venv/bin/dspbench" sweep status "$P/results"; } 2>&1 | tee "$P/run.log"
    "$PY" -m dspbench.plan.check "$P/plan.json" "$P/results" --md "$P/check.md" --json "$P/check.json"
done
