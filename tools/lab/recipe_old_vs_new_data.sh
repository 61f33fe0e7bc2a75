#!/usr/bin/env bash
# The recipe (experiment=grpo_rookworld_tiny, 400 steps) for seeds 0 and 1 on the old data (OLD_TRAIN, the
# earlier pools and caps) and on the new, each final model evaluated greedily on EVAL_N P: + EVAL_N A:
# problems of the validation and of the test part. The four runs are dealt over the GPUs in GPUS.
#   OLD_TRAIN=old_train.jsonl.gz EVAL_N=256 GPUS="1 2 3" bash tools/lab/recipe_old_vs_new_data.sh   # OUT=/tmp/out GPUS=0
# old_train.jsonl.gz: `git show da73894^:rookworld/data/bundled/train.jsonl.gz > old_train.jsonl.gz`
set -u
OUT=${OUT:-/tmp/out}
EVAL_N=${EVAL_N:-512}
read -ra gpus <<< "${GPUS:-0}"
old=(data.policy_train="$(realpath "$OLD_TRAIN")" data.arbiter_pool_size=100 data.arbiter_pool_walks=1500
     sampling.max_new_tokens.P=112 sampling.max_new_tokens.A=64)
mkdir -p "$OUT/recipe"
source "$(dirname "$0")/../on_gpu.sh"
echo "== recipe, old and new data, seeds 0 and 1, on GPUs ${gpus[*]} ($(date +%T))"
i=0
for data in old new; do
    extra=(); [ "$data" = old ] && extra=("${old[@]}")
    for seed in 0 1; do
        on_gpu $i python3 -m rookworld.train experiment=grpo_rookworld_tiny seed=$seed time_limit_min=null \
            tracking=none checkpoint.save_final=true hydra.run.dir=outputs/recipe/$data/seed_$seed "${extra[@]}" \
            > "$OUT/recipe/${data}_s$seed.log" 2>&1
        i=$((i + 1))
    done
done
wait
echo "== final evaluations ($(date +%T))"
i=0
for data in old new; do
    for seed in 0 1; do
        for part in validation test; do
            on_gpu $i python3 -m rookworld.bench.eval_time --repeats 1 experiment=grpo_rookworld_tiny \
                model.path=outputs/recipe/$data/seed_$seed/checkpoints/step_000400 eval.split=$part \
                eval.num_policy="$EVAL_N" eval.num_arbiter="$EVAL_N" > "$OUT/recipe/final_${data}_s${seed}_$part.log" 2>&1
            i=$((i + 1))
        done
    done
done
wait
echo "== done ($(date +%T))"
grep -H '^metrics' "$OUT"/recipe/final_*.log
