#!/usr/bin/env bash
# One model on the whole test part, greedy (every P: position and A: transition of the data's test
# files; PART=validation: the validation files): rookworld.bench.eval_time prints the time and the
# metrics and writes the per-problem scores.
#
#   bash tools/eval_test_part.sh MODEL_FOLDER SCORES.json [Hydra overrides, e.g. data=selfplay device=cpu]
#
# warm_start_long.sh and sft_scaling.sh evaluate their models with it.
set -euo pipefail
model=$1 scores=$2
shift 2
python3 -m rookworld.bench.eval_time --repeats 1 --scores "$scores" experiment=grpo_rookworld_tiny tracking=none \
    model.path="$model" eval.split=${PART:-test} eval.num_policy=100000 eval.num_arbiter=100000 eval.batch_size=512 "$@"
