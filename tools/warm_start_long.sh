#!/usr/bin/env bash
# The warm start's long supervised run on the self-play train split, then its evaluation on the whole
# test part (data=selfplay: 16,554 P: positions and 10,000 A: transitions, greedy; tools/eval_test_part.sh).
# INIT continues a saved model folder (its own shape; AdamW restarts); without it the run starts from
# scratch. GPUS > 1 runs data-parallel over that many GPUs of the machine (torchrun; sft.batch_size stays
# the documents per step, sft.num_workers counts per GPU).
#
#   TRAIN=data/selfplay/train.jsonl.gz MINUTES=20 INIT=outputs/scaling/run_all/model OUT=outputs/warm_start \
#       bash tools/warm_start_long.sh sft.batch_size=384 sft.steps=30000
#   GPUS=4 MINUTES=18 OUT=outputs/l12w512 bash tools/warm_start_long.sh sft.batch_size=1536 sft.num_workers=14 \
#       model.tiny.n_layer=12 model.tiny.n_embd=512 optimizer.lr=1e-3 sft.steps=60000
#
# Extra arguments are Hydra overrides of the SFT run. Writes OUT/sft.log, OUT/sft/model (the model),
# OUT/test.log and OUT/test_scores.json (per-problem scores and the metrics).
set -euo pipefail
TRAIN=${TRAIN:-data/selfplay/train.jsonl.gz}
MINUTES=${MINUTES:-20}
OUT=${OUT:-outputs/warm_start}
INIT=${INIT:-}
GPUS=${GPUS:-1}
mkdir -p "$OUT"
init=()
if [ -n "$INIT" ]; then init=(model=rookworld_tiny '~model.tiny' model.path="$INIT"); fi
sft=(python3 -m rookworld.sft)
if [ "$GPUS" -gt 1 ]; then sft=(torchrun --standalone --nproc_per_node "$GPUS" -m rookworld.sft); fi
"${sft[@]}" experiment=sft_selfplay tracking=none data.policy_train="$TRAIN" \
    sft.time_limit_min="$MINUTES" hydra.run.dir="$OUT/sft" "${init[@]}" "$@" > "$OUT/sft.log" 2>&1
bash "$(dirname "$0")/eval_test_part.sh" "$OUT/sft/model" "$OUT/test_scores.json" data=selfplay > "$OUT/test.log" 2>&1
tail -n 2 "$OUT/test.log"
