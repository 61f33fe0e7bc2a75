#!/usr/bin/env bash
# How `sweeps=throughput` scales with GPUs, with its default settings (12 workers per GPU; CUDA MPS started by the
# sweeper, trial.mps=auto): 1, 2 and 4 GPUs, then one GPU with MPS started by hand as the reference. Each run is
# its own study of TRIALS_PER_GPU x GPUs trials (default 48: ~8 minutes for all four on H100s). One table at the end:
#   bash tools/lab/sweep_scaling.sh     # LOG_DIR=. PYTHON=python3 TRIALS_PER_GPU=48 PLAN="1gpu 2gpu 4gpu 1gpu_mps_by_hand"
# PLAN="1gpu_mps_by_hand 1gpu 1gpu 1gpu_mps_by_hand" compares the default with MPS by hand in ABBA order.
set -euo pipefail
python=${PYTHON:-python3}
per_gpu=${TRIALS_PER_GPU:-48}
logs=${LOG_DIR:-.}
stamp=$(date +%H%M%S)
workers=12  # sweeps/throughput.yaml: trial.trials_per_gpu
rows=()

run() {  # NAME GPU_COUNT [overrides...]: one study; appends its timeline row
    local name=$1 count=$2
    shift 2
    local study=scaling_${stamp}_$name
    CUDA_VISIBLE_DEVICES=$(seq -s, 0 $((count - 1))) "$python" -m rookworld.train -m sweeps=throughput \
        hydra.sweeper.study_name="$study" hydra.sweeper.n_jobs=$((count * workers)) \
        hydra.sweeper.n_trials=$((count * per_gpu)) "$@" >"$logs/$study.log" 2>&1 \
        || { echo "$study failed:"; tail -20 "$logs/$study.log"; return 1; }
    grep -h "CUDA MPS unavailable" "$logs/$study.log" || true
    rows+=("$name $count $("$python" -m rookworld.sweep timeline --json outputs/sweeps/"$study"/*)")
}

with_mps_by_hand() {  # the reference: MPS started by hand on GPU 0, as docs/sweeps.md described before the sweeper did it
    local pipe; pipe=$(mktemp -d /tmp/mps-XXXX)
    export CUDA_MPS_PIPE_DIRECTORY=$pipe CUDA_MPS_LOG_DIRECTORY=$pipe
    CUDA_VISIBLE_DEVICES=0 nvidia-cuda-mps-control -d
    "$@" || true
    echo quit | nvidia-cuda-mps-control
    unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
}
i=0
for entry in ${PLAN:-1gpu 2gpu 4gpu 1gpu_mps_by_hand}; do
    i=$((i + 1))
    case $entry in
        1gpu_mps_by_hand) with_mps_by_hand run "${entry}_$i" 1 ;;
        *gpu) run "${entry}_$i" "${entry%gpu}" ;;
        *) echo "PLAN entry $entry: must be NGPU (e.g. 4gpu) or 1gpu_mps_by_hand" >&2; exit 2 ;;
    esac
done
printf '%s\n' "${rows[@]}" | "$python" <(cat <<'PY'
import json, sys
rows = [line.split(" ", 2) for line in sys.stdin if line.strip()]
rows = [(name, int(gpus), json.loads(timeline)) for name, gpus, timeline in rows]
ones = [r["trials_per_hour"] for name, _, r in rows if name.startswith("1gpu_") and "mps" not in name]
base = sum(ones) / len(ones)  # the mean of the default one-GPU runs
print(f"x 1 GPU: against the mean of the default one-GPU runs ({base:.0f} trials/h)")
print("| run | GPUs | workers | trials | wall s | trials/h | x 1 GPU | slot idle | steady idle |")
print("|---|---|---|---|---|---|---|---|---|")
for name, gpus, r in rows:
    print(f"| {name} | {gpus} | {r['workers']} | {r['trials']} | {r['wall_s']} | {r['trials_per_hour']:.0f} | "
          f"{r['trials_per_hour'] / base:.2f} | {100 * r['idle']:.1f}% | {100 * r['steady_idle']:.1f}% |")
PY
)
