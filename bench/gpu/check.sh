#!/usr/bin/env bash
# The GPU path on one GPU, in under 8 minutes: what one device can check (docs/gpu.md).
#   bash bench/gpu/check.sh [OUT_DIR]          on a CUDA machine (default OUT_DIR: $OUT or results/gpu_check)
#   bash bench/gpu/check.sh --cpu [OUT_DIR]    the same steps on CPU/gloo at tiny shapes (CI runs this,
#                                              so the script cannot rot between GPU sessions)
# Steps: environment, install dspbench (no deps: the machine's torch stays), GPU-marked tests, the
# ring's bf16 error by ring size, compute calibration of one STDiT-XL block at T 64, S 4096 bf16
# fwd+bwd onto the h200-ib datasheet profile, the device curve (GEMM/attention rates by size, launch
# and call costs, the VAE decoder) as a profile, harness runs at world size 1 (every method, NCCL,
# CUDA events, oracle check), one STDiT-XL training step measured and predicted from the
# calibrated profile, and one rank each of HunyuanVideo, Wan 14B, CogVideoX and Flux at their native
# video replayed kernel by kernel beside the kernels' prediction (dspbench replay). Each step's log and output land in OUT_DIR; summary.md has the figures.
# A failed step is reported and the rest still run; the exit code is the number of failed steps.
set -uo pipefail
cd "$(dirname "$0")/../.."   # the repository root

MODE=gpu
if [ "${1:-}" = "--cpu" ]; then MODE=cpu; shift; fi
DIR="${1:-${OUT:-results/gpu_check}}"
PY="${PYTHON:-python3}"
BASE="${GPU_CHECK_BASE:-h200-ib}"       # the datasheet profile the calibration refines
mkdir -p "$DIR"
export PYTHONUNBUFFERED=1
FAILED=0
: > "$DIR/steps.tsv"

step() {   # step NAME TIMEOUT_S CMD...: run CMD with a limit, log to DIR/NAME.log, record the outcome
  local name=$1 limit=$2 t0=$SECONDS rc
  shift 2
  echo "[gpu_check] $name ..."
  timeout "$limit" "$@" > "$DIR/$name.log" 2>&1
  rc=$?
  printf '%s\t%s\t%s\n' "$name" "$rc" "$((SECONDS - t0))" >> "$DIR/steps.tsv"
  if [ "$rc" = 0 ]; then echo "[gpu_check] $name ok ($((SECONDS - t0)) s)"
  else echo "[gpu_check] $name FAILED (exit $rc, $((SECONDS - t0)) s): tail of $DIR/$name.log"; tail -n 15 "$DIR/$name.log"
       FAILED=$((FAILED + 1)); fi
}

if [ "$MODE" = gpu ]; then
  BACKEND=nccl DTYPE=bf16 DEVICE=cuda
  CAL=(--model stdit-xl --depth 1 --frames 64 --spatial 4096 --compute-iters 5)
  STEP=(--model stdit-xl --frames 16 --spatial 1024 --grad-ckpt)    # 16k tokens, one sample
  RUN=(--model stdit-small --frames 16 --spatial 256)
  RING_SEQ=4096
  CURVE=(--vae 21x60x104)
  # one rank of a published-scale run per model (issue 40 item 5): MODEL VIDEO METHOD GPUS SP [flags]
  REPLAYS=("hunyuanvideo 129x720x1280 ulysses 8 8" "wan2.1-14b 81x720x1280 ring 4 4"
           "cogvideox-5b 49x480x720 ulysses 4 2 --cfg --cfg-parallel" "flux.1-dev 1x1024x1024 ulysses 4 4")
  REPLAY_ARGS=(--reps 3 --limit 40)
else
  BACKEND=gloo DTYPE=fp32 DEVICE=cpu
  CAL=(--model stdit-tiny --depth 1 --frames 4 --spatial 64 --compute-iters 1 --threads 1)
  STEP=(--model stdit-tiny --frames 4 --spatial 64 --grad-ckpt)
  RUN=(--model stdit-tiny --frames 4 --spatial 16)
  RING_SEQ=256
  CURVE=(--small --iters 1 --vae 2x4x4)
  REPLAYS=("stdit-tiny 4x64x64 ulysses 2 2" "stdit-tiny 4x64x64 ring 2 2")
  REPLAY_ARGS=(--reps 1 --limit 8 --dtype fp32)
fi

# 1. environment: no CUDA on a GPU check is a clear stop, not a pile of failures
"$PY" - > "$DIR/env.json" <<'EOF'
import importlib.metadata as md, json, platform, torch
cuda = torch.cuda.is_available()
def version(pkg):
    try:
        return md.version(pkg)
    except md.PackageNotFoundError:
        return None
print(json.dumps({"python": platform.python_version(), "torch": torch.__version__, "cuda": torch.version.cuda,
                  "cuda_available": cuda, "device": torch.cuda.get_device_name(0) if cuda else None,
                  "nccl": torch.cuda.nccl.version() if cuda else None,
                  "flash_attn": version("flash-attn"), "ring_flash_attn": version("ring-flash-attn")}))
EOF
cat "$DIR/env.json"
if [ "$MODE" = gpu ] && ! grep -q '"cuda_available": true' "$DIR/env.json"; then
  echo "[gpu_check] no CUDA device visible to $PY: nothing to check here (bash bench/gpu/check.sh --cpu runs the CPU rehearsal)"
  exit 0
fi
nvidia-smi > "$DIR/nvidia-smi.txt" 2>&1 || true

# 2. install dspbench itself, not its dependencies (nothing can be fetched on a device machine)
if ! "$PY" -c "import dspbench" 2>/dev/null; then
  step install 120 "$PY" -m pip install --no-deps --no-build-isolation -e .
fi

# 3. GPU-marked tests and the kernels' tests (CPU rehearsal: they skip with their reason)
step pytest 150 "$PY" -m pytest -q -p no:cacheprovider -m gpu tests/test_gpu.py tests/test_attn_kernels.py \
  --junitxml "$DIR/pytest.xml"

# 4. bf16 ring error by ring size (the tolerance the oracle tests use grows with it)
step ring_error 60 "$PY" -m dspbench.micro.ring_error --device "$DEVICE" --dtype bf16 --seq "$RING_SEQ" \
  --json "$DIR/ring_error.json"

# 5. compute of one block at paper shapes onto the datasheet profile: a profile the cost model reads
step calibrate 120 "$PY" -m dspbench.cli calibrate --gpus 1 --backend "$BACKEND" --dtype "$DTYPE" "${CAL[@]}" \
  --base "$BASE" --name "$BASE-calibrated" --output "$DIR/calibrated.toml"

# 5b. the device curve: GEMM and attention rates by size, launch and call costs, the VAE decoder; fitted
#     onto the datasheet profile as [compute.curve] (bench/cost/curve.py), a profile predict reads
step curve 150 "$PY" -m dspbench.calibrate.curve --device "$DEVICE" --dtype "$DTYPE" "${CURVE[@]}" \
  --json "$DIR/curve.json" --profile-out "$DIR/curve.toml" --base "$BASE"

# 6. the harness at world size 1, every method, with the oracle check (unsupported is recorded)
for m in single dsp ulysses ring megatron_sp usp; do
  step "run_$m" 90 "$PY" -m dspbench.cli run --method "$m" --gpus 1 --sp 1 --backend "$BACKEND" --dtype "$DTYPE" \
    "${RUN[@]}" --mode train --warmup 1 --iters 3 --check --records-file "$DIR/records.jsonl"
done
step run_sample 90 "$PY" -m dspbench.cli run --method single --gpus 1 --sp 1 --backend "$BACKEND" --dtype "$DTYPE" \
  "${RUN[@]}" --mode sample --sample-steps 2 --warmup 1 --iters 2 --records-file "$DIR/records.jsonl"

# 7. one real training step of the big model, measured, and predicted from the calibrated profile
step xl_step 120 "$PY" -m dspbench.cli run --method single --gpus 1 --sp 1 --backend "$BACKEND" --dtype "$DTYPE" \
  "${STEP[@]}" --mode train --warmup 1 --iters 3 --records-file "$DIR/xl_step.jsonl"
step xl_predict 60 "$PY" -m dspbench.cli predict --method single --gpus 1 --sp 1 --dtype "$DTYPE" "${STEP[@]}" \
  --mode train --hardware "$DIR/calibrated.toml" --records-file "$DIR/xl_predicted.jsonl"

# 7b. replay: on this one device, the kernels one rank of an N-GPU run executes, timed with CUDA events,
#     beside the same kernels priced from the rate table of this GPU's profile (docs/gpu.md)
REPLAY_PROFILE=$("$PY" - "$DIR/env.json" "$BASE" <<'EOF'
import json, sys
name = (json.load(open(sys.argv[1])).get("device") or "").upper()
print(next((p for key, p in (("H100", "h100-ib"), ("H200", "h200-ib"), ("H20", "h20-nvlink"), ("H800", "h800-nvlink"),
                              ("A100", "a100-ib"), ("L40", "l40-pcie"), ("L20", "l20-pcie")) if key in name), sys.argv[2]))
EOF
)
for r in "${REPLAYS[@]}"; do
  read -r model video method gpus sp extra <<< "$r"
  # shellcheck disable=SC2086  # extra: the configuration's own flags, word-split on purpose
  step "replay_${model}_$method" 90 "$PY" -m dspbench.cli replay --model "$model" --video "$video" --method "$method" \
    --gpus "$gpus" --sp "$sp" --mode sample --sample-steps 1 $extra --hardware "$REPLAY_PROFILE" --device "$DEVICE" \
    "${REPLAY_ARGS[@]}" --records-file "$DIR/replay.jsonl"
done

# 8. the figures, in one page
"$PY" -m dspbench.gpu.summary "$DIR" --mode "$MODE" --failed "$FAILED" | tee "$DIR/summary.md"
exit "$FAILED"
