#!/usr/bin/env bash
# The data of docs/sweeps.md's evaluation-size noise table, on a GPU machine (one call, ~8 minutes on 4 GPUs):
# the hand-tuned recipe (experiment=grpo_rookworld_tiny, 400 steps) on seeds 0..SEEDS-1, dealt over GPUS,
# then each final model evaluated greedily on N P: + N A: validation problems for each N in SIZES.
#   GPUS="0 1 2 3" SEEDS=8 SIZES="64 128 256 512" bash tools/noise_table_device.sh   # OUT=/tmp/out
#   python tools/noise_table.py /tmp/out/noise                                       # the table
set -u
OUT=${OUT:-/tmp/out}
SEEDS=${SEEDS:-8}
read -ra sizes <<< "${SIZES:-64 128 256 512}"
read -ra gpus <<< "${GPUS:-0 1 2 3}"
[ -n "${WHEELS_INSTALLED:-}" ] || source tools/device_env.sh
mkdir -p "$OUT/noise"
on_gpu() {  # INDEX COMMAND...: runs COMMAND in the background on GPU gpus[INDEX % len]
    local gpu=${gpus[$(($1 % ${#gpus[@]}))]}; shift
    CUDA_VISIBLE_DEVICES=$gpu "$@" &
}
echo "== recipe, seeds 0..$((SEEDS - 1)) on GPUs ${gpus[*]} ($(date +%T))"
for seed in $(seq 0 $((SEEDS - 1))); do
    on_gpu "$seed" python3 -m rookworld.train experiment=grpo_rookworld_tiny seed="$seed" time_limit_min=null \
        tracking=none checkpoint.save_final=true hydra.run.dir=outputs/noise/seed_$seed > "$OUT/noise/train_s$seed.log" 2>&1
done
wait
echo "== final evaluations at sizes ${sizes[*]} ($(date +%T))"
i=0
for seed in $(seq 0 $((SEEDS - 1))); do
    for n in "${sizes[@]}"; do
        on_gpu $i python3 -m rookworld.bench.eval_time --repeats 1 experiment=grpo_rookworld_tiny \
            model.path=outputs/noise/seed_$seed/checkpoints/step_000400 eval.split=validation \
            eval.num_policy="$n" eval.num_arbiter="$n" > "$OUT/noise/final_s${seed}_n$n.log" 2>&1
        i=$((i + 1))
    done
    wait
done
python3 tools/noise_table.py "$OUT/noise"
