#!/usr/bin/env bash
# The warm start's long supervised run on the self-play train split, then its evaluation on the whole
# test part (data=selfplay: 16,554 P: positions and 10,000 A: transitions, greedy). INIT continues a
# saved model (AdamW restarts; rookworld_tiny's shape); without it the run starts from scratch.
#
#   TRAIN=data/selfplay/train.jsonl.gz MINUTES=20 INIT=outputs/scaling/run_all/model OUT=outputs/warm_start \
#       bash tools/warm_start_long.sh sft.batch_size=384 sft.steps=30000
#
# Extra arguments are Hydra overrides of the SFT run. Writes OUT/sft.log, OUT/sft/model (the model),
# OUT/test.log and OUT/test_scores.json (per-problem scores and the metrics).
set -euo pipefail
TRAIN=${TRAIN:-data/selfplay/train.jsonl.gz}
MINUTES=${MINUTES:-20}
OUT=${OUT:-outputs/warm_start}
INIT=${INIT:-}
mkdir -p "$OUT"
init=()
if [ -n "$INIT" ]; then init=(model=rookworld_tiny '~model.tiny' model.path="$INIT"); fi
python3 -m rookworld.sft experiment=sft_selfplay tracking=none data.policy_train="$TRAIN" \
    sft.time_limit_min="$MINUTES" hydra.run.dir="$OUT/sft" "${init[@]}" "$@" > "$OUT/sft.log" 2>&1
python3 -m rookworld.bench.eval_time --repeats 1 --scores "$OUT/test_scores.json" \
    experiment=grpo_rookworld_tiny data=selfplay tracking=none model.path="$OUT/sft/model" \
    eval.split=test eval.num_policy=100000 eval.num_arbiter=100000 eval.batch_size=512 > "$OUT/test.log" 2>&1
tail -n 2 "$OUT/test.log"
