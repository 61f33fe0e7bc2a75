#!/usr/bin/env bash
# The move-value recipe against reward=graduated, paired by seed, from one warm start: for each seed, GRPO
# (experiment=grpo_move_value) with reward=move_value and with reward=graduated; then the warm start and every
# final model greedy on the whole test part (tools/eval_test_part.sh) and in games against the engine levels
# (python -m rookworld.play); then the table (tools/move_value_table.py). Runs are dealt over the GPUs.
#
#   MODEL=outputs/warm_start/sft/model OUT=outputs/move_value_recipe GPUS="0 1 2 3" SEEDS="0 1 2 3 4" \
#       bash tools/move_value_recipe.sh [extra GRPO overrides, e.g. steps=400]
#
# Writes OUT/{warm_start,move_value_sN,graduated_sN}/{train.log,test.log,test_scores.json,play.log} and OUT/table.md.
# EVAL_ARGS and PLAY_ARGS add Hydra overrides to the evaluation and the games (a quick check on the CPU:
# EVAL_ARGS="eval.num_policy=8 eval.num_arbiter=8 device=cpu" PLAY_ARGS="play.games_per_level=2 device=cpu").
set -uo pipefail
: "${MODEL:?set MODEL to the folder of the warm start model}"
OUT=${OUT:-outputs/move_value_recipe}
SEEDS=${SEEDS:-0 1 2 3 4}
ENGINE=${ENGINE:-/usr/games/stockfish}
read -ra gpus <<< "${GPUS:-0}"
here=$(dirname "$0")
mkdir -p "$OUT/warm_start"
source "$(dirname "$0")/on_gpu.sh"
evaluate() {  # MODEL_FOLDER RUN_DIR: the whole test part, then the games
    bash "$here/eval_test_part.sh" "$1" "$2/test_scores.json" data=selfplay ${EVAL_ARGS:-} > "$2/test.log" 2>&1 \
        || { echo "$2: evaluation failed (its test.log)"; return 1; }
    python3 -m rookworld.play model.path="$1" tracking=none play.engine_path="$ENGINE" ${PLAY_ARGS:-} > "$2/play.log" 2>&1 \
        || { echo "$2: games failed (its play.log)"; return 1; }
}
one_run() {  # SEED REWARD [overrides]: GRPO from the warm start, then its final model evaluated
    local seed=$1 reward=$2 run="$OUT/${2}_s$1"; shift 2
    mkdir -p "$run"
    python3 -m rookworld.train experiment=grpo_move_value reward="$reward" seed="$seed" model.path="$MODEL" \
        tracking=none checkpoint.save_final=true checkpoint.dir="$run/checkpoints" hydra.run.dir="$run/hydra" "$@" \
        > "$run/train.log" 2>&1 || { echo "$run: training failed (its train.log)"; return 1; }
    evaluate "$(ls -d "$run"/checkpoints/step_* | tail -n 1)" "$run"
}
echo "== GRPO, seeds $SEEDS, move_value and graduated, on GPUs ${gpus[*]} ($(date +%T))"
i=0
on_gpu $i evaluate "$MODEL" "$OUT/warm_start"
for seed in $SEEDS; do
    for reward in move_value graduated; do
        i=$((i + 1))
        on_gpu $i one_run "$seed" "$reward" "$@"
    done
done
wait
echo "== done ($(date +%T))"
python3 "$here/move_value_table.py" "$OUT" | tee "$OUT/table.md"
