#!/usr/bin/env bash
# How many GRPO runs should share one GPU: for each N in COUNTS, N runs of the move-value recipe at once on
# GPU 0 (CUDA MPS on when the machine has it), STEPS steps each, nvidia-smi sampled every second; then the
# table (tools/slots_table.py): steps per second per run and for all N together, against one run alone,
# GPU utilisation and memory.
#
#   MODEL=rookworld/assets/rookworld_tiny OUT=outputs/slots COUNTS="1 2 4 8" STEPS=60 bash tools/slots_bench.sh
#
# Writes OUT/nN/run_K.log, OUT/nN/smi.csv and OUT/table.md. Extra arguments are overrides of every run.
set -uo pipefail
MODEL=${MODEL:-rookworld/assets/rookworld_tiny}
OUT=${OUT:-outputs/slots}
COUNTS=${COUNTS:-1 2 4 8}
STEPS=${STEPS:-60}
here=$(dirname "$0")
mkdir -p "$OUT"
if command -v nvidia-cuda-mps-control > /dev/null && [ -z "${CUDA_MPS_PIPE_DIRECTORY:-}" ]; then
    nvidia-cuda-mps-control -d && echo "== CUDA MPS on"  # runs sharing the GPU run their kernels side by side
fi
for n in $COUNTS; do
    dir="$OUT/n$n"
    mkdir -p "$dir"
    nvidia-smi --query-gpu=timestamp,utilization.gpu,memory.used --format=csv,noheader,nounits -l 1 > "$dir/smi.csv" &
    smi=$!
    start=$(date +%s.%N)
    for k in $(seq 1 "$n"); do
        CUDA_VISIBLE_DEVICES=0 python3 -m rookworld.train experiment=grpo_move_value seed="$k" steps="$STEPS" \
            model.path="$MODEL" tracking=none eval.every=0 time_limit_min=null hydra.run.dir="$dir/hydra_$k" "$@" \
            > "$dir/run_$k.log" 2>&1 &
    done
    wait $(jobs -p | grep -v "^$smi$")
    kill "$smi" 2> /dev/null
    printf '%s\n' "$(python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$start" "$(date +%s.%N)")" \
        > "$dir/wall_s"
    echo "== $n at once: $(cat "$dir/wall_s") s"
done
python3 "$here/slots_table.py" "$OUT" | tee "$OUT/table.md"
