#!/usr/bin/env bash
# A warm-start round in one time-limited GPU job of several calls (docs/warm-start.md), run on the GPU machine in
# the repository root; what tools/round_carry.sh laid out arrives under .device/round/. Each stage is one call:
#   bash tools/round_job.sh setup [BENCH_ARGS] install the wheels, keep the first half of Stockfish; with BENCH=1 also
#                                              time the SFT step (rookworld.bench.sft_step BENCH_ARGS)
#   bash tools/round_job.sh start OVERRIDES    join Stockfish, take positions, start the round detached, wait ~9 min;
#                                              with SELFPLAY_BENCH=DIR (under .device/round/) first time self-play
#                                              on every core, DIR's earlier code against this (bench.selfplay_speed);
#                                              with FINAL_RAW=FILE (under .device/round/) first label that final pool
#                                              on every core (tools/final_pool.sh label), so the round excludes it
#   bash tools/round_job.sh wait SECONDS       take newly carried positions (the running round reads them), wait
#   bash tools/round_job.sh collect            wait for the round's end, put its model, round.json and logs in $OUT
# The round, its copy of the code and its files live in /tmp/round on the machine between calls.
set -euo pipefail
stage=$1; shift
home=/tmp/round carry=$PWD/.device/round
export PYTHONPATH=$home/code:/tmp/site PYTHONUNBUFFERED=1
mkdir -p "$home/carry" "$home/sf"
source "$(dirname "$0")/job_lib.sh"
take_positions() {
    for group in "$carry"/positions-*; do
        [ -d "$group" ] && cp -n "$group"/* "$home/carry/" 2>/dev/null || true
    done
    echo "carried positions: $(ls "$home/carry" | wc -l) files"
}
progress() {
    grep -v "self-play positions" "$home/round.log" | tail -n "${1:-12}" || true
    tail -c 300 "$home/out/selfplay/selfplay.log" 2>/dev/null | tr '\r' '\n' | tail -n 1 || true
}
case $stage in
setup)
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
        "$carry"/wheels/*.whl
    join_engine "$home/sf" 2 "$carry"  # the first half of Stockfish now, the second with start
    rm -rf "$home/code" && mkdir -p "$home/code" && cp -r rookworld conf "$home/code/"
    nvidia-smi --query-gpu=name,memory.used,utilization.gpu --format=csv
    if [ "${BENCH:-0}" = 1 ]; then
        (cd "$home/code" && timeout 300 python3 -m rookworld.bench.sft_step "$@") 2>&1 | tee "$OUT/sft_step_bench.log"
    fi
    ;;
start)
    join_engine "$home/sf" 2 "$carry"
    [ -x "$home/sf/stockfish" ] || { echo "round_job: Stockfish has not come whole (stockfish.xz.00 and .01)" >&2; exit 1; }
    echo quit | "$home/sf/stockfish" || true
    take_positions
    if [ -n "${SELFPLAY_BENCH:-}" ] && ! (cd "$home/code" && timeout 150 python3 -m rookworld.bench.selfplay_speed \
            --before "$carry/$SELFPLAY_BENCH" --engine-path "$home/sf/stockfish" --games 32 --repeats 3 \
            --workers "$(nproc)") 2>&1 | tee "$OUT/selfplay_speed_bench.log"; then
        echo "round_job: the self-play bench failed (its log above); the round starts without it" >&2
    fi
    if [ -n "${FINAL_RAW:-}" ]; then  # the round's exclusions name the final pool: it must exist first
        mkdir -p "$home/final" && cp "$carry/$FINAL_RAW" "$home/final/final_raw.jsonl.gz"
        (time STOCKFISH="$home/sf/stockfish" bash tools/final_pool.sh label "$home/final") > "$home/final/label.log" 2>&1 \
            || { tail -n 30 "$home/final/label.log"; exit 1; }
        tr '\r' '\n' < "$home/final/label.log" | grep -v "^annotated\|it/s\]" | tee "$OUT/final_pool_label.log" || true
        cp rookworld/data/selfplay/final.jsonl.xz "$home/code/rookworld/data/selfplay/" && cp rookworld/data/selfplay/final.jsonl.xz "$OUT/"
    fi
    (cd "$home/code" && setsid nohup python3 -m rookworld.warm_start.round round.engine_path="$home/sf/stockfish" \
        "round.carry=[$home/carry]" round.out="$home/out" hydra.run.dir="$home/hydra" "$@" \
        > "$home/round.log" 2>&1 < /dev/null &)
    sleep 5
    wait_while_running rookworld.warm_start.round "${WAIT_S:-500}"
    progress
    ;;
wait)
    take_positions
    wait_while_running rookworld.warm_start.round "$1"
    progress
    ;;
collect)
    wait_while_running rookworld.warm_start.round "${COLLECT_WAIT_S:-400}"
    progress 40
    # at most 8 files come back: the weight shards whole, everything else in two archives
    if ls "$home"/out/model/model*.safetensors > /dev/null 2>&1; then
        cp "$home"/out/model/model*.safetensors "$OUT/"
        tar -cJf "$OUT/model_files.tar.xz" -C "$home/out" --exclude 'model*.safetensors' model round.json || true
    elif [ -f "$home/out/candidate/model.safetensors" ]; then  # the round ended before its model was written
        split -b 15M -d "$home/out/candidate/model.safetensors" "$OUT/candidate.safetensors.part-"
        tar -cJf "$OUT/model_files.tar.xz" -C "$home/out" --exclude 'model.safetensors' candidate || true
    fi
    grep -v "self-play positions" "$home/round.log" > "$home/round_lines.log" || true
    tail -c 2000 "$home/out/selfplay/selfplay.log" | tr '\r' '\n' | tail -n 5 >> "$home/round_lines.log" || true
    cp "$home/out/selfplay/done.json" "$home/selfplay_done.json" 2>/dev/null || true
    tar -cJf "$OUT/round_logs.tar.xz" -C "$home" round_lines.log selfplay_done.json hydra 2>/dev/null || true
    ls -la "$OUT"
    ;;
*)
    echo "usage: round_job.sh setup|start|wait|collect ..." >&2; exit 2
    ;;
esac
