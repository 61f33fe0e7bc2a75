#!/usr/bin/env bash
# The data of the evaluation-size noise table (docs/lab/evaluation-noise.md), on a GPU machine (~5 minutes on 4 GPUs):
# the hand-tuned recipe (experiment=grpo_rookworld_tiny, 400 steps, checkpoints at 100, 200, 400) on seeds
# 0..SEEDS-1 dealt over GPUS, then every checkpoint evaluated greedily on the first N P: + N A: validation
# problems (N = 1,500, the part's size; every smaller size is a prefix of it), per-problem scores kept.
#   GPUS="0 1 2 3" SEEDS=16 bash tools/lab/noise_table_runs.sh     # OUT=/tmp/out; writes $OUT/noise
#   python tools/lab/noise_table.py $OUT/noise                         # the table
set -u
OUT=${OUT:-/tmp/out}
SEEDS=${SEEDS:-16}
N=${N:-1500}
read -ra gpus <<< "${GPUS:-0 1 2 3}"
[ -n "${WHEELS_INSTALLED:-}" ] || source tools/offline_env.sh
mkdir -p "$OUT/noise"
source "$(dirname "$0")/../on_gpu.sh"
echo "== recipe, seeds 0..$((SEEDS - 1)) on GPUs ${gpus[*]} ($(date +%T))"
for seed in $(seq 0 $((SEEDS - 1))); do
    on_gpu "$seed" python3 -m rookworld.train experiment=grpo_rookworld_tiny seed="$seed" time_limit_min=null \
        eval.every=0 tracking=none checkpoint.every=100 hydra.run.dir=outputs/noise/seed_$seed \
        > "$OUT/noise/train_s$seed.log" 2>&1
done
wait
echo "== evaluations of steps 100, 200, 400 on $N + $N validation problems ($(date +%T))"
i=0
for seed in $(seq 0 $((SEEDS - 1))); do
    for step in 100 200 400; do
        on_gpu $i python3 -m rookworld.bench.eval_time --repeats 1 --scores "$OUT/noise/scores_s${seed}_step$step.json" \
            experiment=grpo_rookworld_tiny model.path=outputs/noise/seed_$seed/checkpoints/step_$(printf %06d $step) \
            eval.split=validation eval.num_policy="$N" eval.num_arbiter="$N" > "$OUT/noise/eval_s${seed}_step$step.log" 2>&1
        i=$((i + 1))
    done
done
wait
echo "== done ($(date +%T))"
python3 tools/lab/noise_table.py "$OUT/noise"
