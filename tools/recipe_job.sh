#!/usr/bin/env bash
# The slots measurement and the move-value recipe table in one time-limited GPU job of several calls, run on the
# GPU machine in the repository root (no network); what the job brings lies under .device/job/: .whl/-style wheels
# are read from .whl/, the Stockfish binary as xz parts stockfish.xz.NN, there or in .device/partK/ (a later call can carry those alone).
#   bash tools/recipe_job.sh start [OVERRIDES]   install the wheels, copy the code to /tmp/job/code, measure 1, 2, 4
#                                                and 8 runs at once (tools/slots_bench.sh), start the recipe
#                                                (tools/move_value_recipe.sh) detached with the best of them as
#                                                SLOTS, wait until WAIT_S (540) seconds after the start or
#                                                until the runs are evaluated (then bring back as collect does,
#                                                while the games, if any, go on)
#   bash tools/recipe_job.sh wait SECONDS        join the Stockfish parts that have come, wait (less if the recipe ends)
#   bash tools/recipe_job.sh collect [SECONDS]   wait for the recipe's end (or SECONDS, then stop it); pick the model
#                                                that would ship
#                                                (tools/recipe_pick.py); put logs, scores and that model in $OUT
# Every stage writes $OUT/progress.tar.xz (the logs and tables so far) and $OUT/scores.tar.xz (per-problem scores).
# Runs in .device/job/done.tar.xz (an earlier job's run folders with their evaluations, xz-compressed for the
# carry limit) are not run again. SLOTS set: no measurement.
# Settings: SEEDS (10 11 12 13 14), STEPS (400), LONG_STEPS (1600), COUNTS (1 2 4 8), MODEL (the shipped model),
# ENGINE_PARTS (2: how many stockfish.xz.NN parts make the binary), SLOT_STEPS (60) and SLOT_ARGS (overrides) of the
# slots measurement.
set -euo pipefail
stage=$1; shift
began=$(date +%s)
home=/tmp/job carry=$PWD/.device/job
OUT=${OUT:-/tmp/out}
mkdir -p "$home/sf" "$OUT"
recipe=$home/recipe
source "$(dirname "$0")/job_lib.sh"
join() { join_engine "$home/sf" "${ENGINE_PARTS:-2}" "$carry" "$carry"/../part*; }  # the binary once every part has come
running() { pgrep -f tools/move_value_recipe.sh > /dev/null; }
evaluated() { ! running || grep -q "^== games" "$home/recipe.log"; }  # every run trained and evaluated
bring_back() {  # pack; the model that would ship (tools/recipe_pick.py) into $OUT/model
    pack  # what the runs made comes back even if the pick fails
    cd_code
    if python3 tools/recipe_pick.py "$recipe" | tee "$recipe/pick.log"; then
        run=$(python3 -c "import json, sys; print(json.load(open(sys.argv[1]))['run'])" "$recipe/pick.json")
        mkdir -p "$OUT/model"
        cp "$recipe/$run"/model/model-*.safetensors "$OUT/model/"
        tar cf "$OUT/model/meta.tar" -C "$recipe/$run/model" $(cd "$recipe/$run/model" && ls | grep -v '^model-')
    fi
}
pack() {
    (cd "$home" && tar cJf "$OUT/progress.tar.xz" --exclude='*_scores.json' --exclude='model' --exclude='checkpoints' \
        --exclude='hydra*' --exclude='cache' slots recipe recipe.log 2> /dev/null) || true
    (cd "$home" && tar cJf "$OUT/scores.tar.xz" $(cd "$home" && ls recipe/*/*_scores.json 2> /dev/null)) 2> /dev/null || true
    tail -n 4 "$home/recipe.log" 2> /dev/null || true
    ls "$recipe" 2> /dev/null | tr '\n' ' '; echo
    echo "finished runs: $(grep -c ": done (" "$home/recipe.log" 2> /dev/null || echo 0)"
}
cd_code() { cd "$home/code" && { [ -n "${WHEELS_INSTALLED:-}" ] || source tools/offline_env.sh; }; }
case $stage in
start)
    rm -rf "$home/code" && mkdir -p "$home/code" && cp -r rookworld conf tools sweeps pyproject.toml .whl "$home/code/"
    join
    cd_code
    nvidia-smi --query-gpu=name,memory.used,utilization.gpu --format=csv
    mkdir -p "$recipe"
    [ ! -f "$carry/done.tar.xz" ] || tar xJf "$carry/done.tar.xz" -C "$recipe"  # runs an earlier job finished
    if [ -n "${SLOTS:-}" ]; then
        slots=$SLOTS
        command -v nvidia-cuda-mps-control > /dev/null && nvidia-cuda-mps-control -d && echo "== CUDA MPS on"
    else
        MODEL=${MODEL:-rookworld/assets/rookworld_tiny} OUT=$home/slots COUNTS=${COUNTS:-1 2 4 8} STEPS=${SLOT_STEPS:-60} \
            bash tools/slots_bench.sh ${SLOT_ARGS:-}
        slots=$(python3 tools/slots_table.py "$home/slots" --best)
    fi
    echo "== recipe: $slots runs at once ($(($(date +%s) - began)) s into the call)"
    nvidia-smi --query-gpu=timestamp,utilization.gpu,memory.used --format=csv,noheader,nounits -l 5 \
        > "$home/recipe_smi.csv" 2>&1 &
    MODEL=${MODEL:-rookworld/assets/rookworld_tiny} OUT=$recipe SEEDS=${SEEDS:-10 11 12 13 14} SLOTS=$slots \
        LONG_STEPS=${LONG_STEPS-1600} VALIDATION=1 EVAL_ARGS="eval.score=chess" PLAY_ARGS=${PLAY_ARGS-} GAMES=${GAMES:-1} \
        ENGINE=$home/sf/stockfish setsid nohup bash tools/move_value_recipe.sh steps="${STEPS:-400}" eval.every=200 "$@" \
        > "$home/recipe.log" 2>&1 < /dev/null &
    sleep 5
    until evaluated || [ $(($(date +%s) - began)) -ge "${WAIT_S:-540}" ]; do sleep 1; done
    ! evaluated || bring_back
    ;;
wait)
    join
    wait_while_running tools/move_value_recipe.sh "$1"
    ;;
collect)  # [SECONDS]: at most that long (then the runs still going are stopped), else until the end
    join
    wait_while_running tools/move_value_recipe.sh "${1:-100000}"
    if running; then echo "== stopping the runs still going"; pkill -f tools/move_value_recipe.sh; pkill -f rookworld; fi
    bring_back
    ;;
esac
cp "$home/recipe_smi.csv" "$recipe/" 2> /dev/null || true
pack
