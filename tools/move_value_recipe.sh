#!/usr/bin/env bash
# The move-value recipe against reward=graduated, paired by seed, from one warm start: for each seed, GRPO
# (experiment=grpo_move_value) with reward=move_value and with reward=graduated, and with LONG_STEPS set a longer
# move_value arm (the same seeds); each final model greedy on the whole test part and, with VALIDATION=1, on the
# whole validation part (tools/eval_test_part.sh); then the warm start and every final model in games against the
# engine levels (python -m rookworld.play); then the table (tools/move_value_table.py).
#
#   MODEL=rookworld/assets/rookworld_tiny OUT=outputs/move_value_recipe GPUS="0" SLOTS=8 SEEDS="10 11 12 13 14" \
#       LONG_STEPS=1600 VALIDATION=1 bash tools/move_value_recipe.sh [extra GRPO overrides, e.g. steps=400]
#
# SLOTS runs share each GPU at once (docs/performance.md, "Several runs on one GPU": 8 on an H100); start CUDA
# MPS first for them to run side by side (nvidia-cuda-mps-control -d). The longest runs start first.
# Writes OUT/{warm_start,move_value_sN,graduated_sN,move_value_LONG_sN}/{train.log,test.log,test_scores.json,
# validation.log,validation_scores.json,play.log,model/} and OUT/table.md. Each run saves its final model alone
# (checkpoint.weights_only, bfloat16 in weight files of at most 15 MiB: the shipped model's format), no optimizer
# state. The games (GAMES=0: none) wait for the engine binary at ENGINE (a job may bring it in later). A run whose
# evaluations are already in OUT is not run again (the runs of an earlier job).
# REWARDS (move_value graduated) names the 400-step arms. EVAL_ARGS and PLAY_ARGS add Hydra overrides to the evaluations and the games (a quick check on the CPU:
# EVAL_ARGS="eval.num_policy=8 eval.num_arbiter=8 device=cpu" PLAY_ARGS="play.games_per_level=2 device=cpu").
set -uo pipefail
: "${MODEL:?set MODEL to the folder of the warm start model}"
OUT=${OUT:-outputs/move_value_recipe}
SEEDS=${SEEDS:-0 1 2 3 4}
SLOTS=${SLOTS:-8}
ENGINE=${ENGINE:-/usr/games/stockfish}
read -ra gpus <<< "${GPUS:-0}"
here=$(dirname "$0")
mkdir -p "$OUT/warm_start"
source "$here/on_gpu.sh"
slot=0
in_a_slot() {  # COMMAND...: on the next GPU in turn, once fewer than GPUS x SLOTS commands run
    while [ "$(jobs -pr | wc -l)" -ge $((SLOTS * ${#gpus[@]})) ]; do wait -n; done
    on_gpu $slot "$@"
    slot=$((slot + 1))
}
evaluate() {  # MODEL_FOLDER RUN_DIR: the whole test part (and validation part)
    bash "$here/eval_test_part.sh" "$1" "$2/test_scores.json" data=selfplay ${EVAL_ARGS:-} > "$2/test.log" 2>&1 \
        || { echo "$2: evaluation failed (its test.log)"; return 1; }
    if [ "${VALIDATION:-0}" = 1 ]; then
        PART=validation bash "$here/eval_test_part.sh" "$1" "$2/validation_scores.json" data=selfplay ${EVAL_ARGS:-} \
            > "$2/validation.log" 2>&1 || { echo "$2: validation failed (its validation.log)"; return 1; }
    fi
}
play() {  # MODEL_FOLDER RUN_DIR: games against the engine levels
    python3 -m rookworld.play model.path="$1" tracking=none play.engine_path="$ENGINE" ${PLAY_ARGS:-} > "$2/play.log" 2>&1 \
        || { echo "$2: games failed (its play.log)"; return 1; }
}
finished() {  # RUN_DIR: its evaluations are there (a run of an earlier job: not run again)
    [ -f "$1/test_scores.json" ] && { [ "${VALIDATION:-0}" != 1 ] || [ -f "$1/validation_scores.json" ]; }
}
one_run() {  # NAME SEED REWARD [overrides]: GRPO from the warm start, then its final model evaluated
    local run="$OUT/$1" seed=$2 reward=$3; shift 3
    finished "$run" && { echo "$run: finished before"; return 0; }
    mkdir -p "$run"
    python3 -m rookworld.train experiment=grpo_move_value reward="$reward" seed="$seed" model.path="$MODEL" \
        tracking=none time_limit_min=null checkpoint.save_final=true checkpoint.weights_only=true checkpoint.weights_dtype=bfloat16 \
        checkpoint.max_shard_mib=15 checkpoint.dir="$run/checkpoints" hydra.run.dir="$run/hydra" "$@" \
        > "$run/train.log" 2>&1 || { echo "$run: training failed (its train.log)"; return 1; }
    local final; final=$(ls -d "$run"/checkpoints/step_* 2> /dev/null | tail -n 1)
    [ -n "$final" ] || { echo "$run: no final model ($(grep -m 1 '^outcome:' "$run/train.log"))"; return 1; }
    rm -rf "$run/model" && mv "$final" "$run/model"
    evaluate "$run/model" "$run" && echo "$run: done ($(date +%T))"
}
echo "== GRPO, seeds $SEEDS, move_value and graduated${LONG_STEPS:+ and move_value at $LONG_STEPS steps}, on GPUs" \
     "${gpus[*]}, $SLOTS at once each ($(date +%T))"
finished "$OUT/warm_start" || in_a_slot evaluate "$MODEL" "$OUT/warm_start"
if [ -n "${LONG_STEPS:-}" ]; then
    for seed in $SEEDS; do in_a_slot one_run "move_value_${LONG_STEPS}_s$seed" "$seed" move_value "$@" steps="$LONG_STEPS"; done
fi
for reward in ${REWARDS:-move_value graduated}; do
    for seed in $SEEDS; do in_a_slot one_run "${reward}_s$seed" "$seed" "$reward" "$@"; done
done
wait
if [ "${GAMES:-1}" = 1 ]; then
    echo "== games ($(date +%T))"
    until [ -x "$ENGINE" ]; do sleep 5; done
    for run in "$OUT"/warm_start "$OUT"/*_s*; do
        folder=$([ "$run" = "$OUT/warm_start" ] && echo "$MODEL" || echo "$run/model")
        [ -d "$folder" ] && [ ! -f "$run/play.log" ] && in_a_slot play "$folder" "$run"
    done
    wait
fi
echo "== done ($(date +%T))"
python3 "$here/move_value_table.py" "$OUT" | tee "$OUT/table.md"
