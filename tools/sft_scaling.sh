#!/usr/bin/env bash
# The data-scaling table: one supervised run per training-set size, all at once, one GPU each, the same
# model shape, settings and time limit (experiment=sft_selfplay), each on the first N positions of the
# self-play train split (tools/selfplay_data.sh), then each model evaluated, on its own GPU, on the
# whole test part (greedy; tools/eval_test_part.sh writes the per-problem scores and the metrics).
#
#   DATA=data/selfplay SIZES="5600 50000 250000 all" MINUTES=6 bash tools/sft_scaling.sh
#
# SIZES: one run each, on GPUs 0, 1, ... in turn (CUDA_VISIBLE_DEVICES); GPUS: how many GPUs they share
# (default one per size; GPUS=1: every run at once on one GPU, each at about 1/len(SIZES) of its speed);
# MINUTES: each run's time limit (sft.time_limit_min);
# RUNS: where the runs go (default outputs/scaling); EVAL_DATA: data overrides of the evaluation (e.g.
# data.policy_test=$DATA/heldout/test.jsonl.gz, the P: test pool); extra Hydra overrides of every SFT
# run in OVERRIDES; EXPERIMENT: the preset of every run (default sft_selfplay; sft_selfplay_39m: the table
# at the 39.1M shape); DEVICE: cuda (default) or cpu.
set -uo pipefail
DATA=${DATA:-data/selfplay}
SIZES=${SIZES:-5600 50000 250000 all}
MINUTES=${MINUTES:-6}
RUNS=${RUNS:-outputs/scaling}
EVAL_DATA=${EVAL_DATA:-}
OVERRIDES=${OVERRIDES:-}
DEVICE=${DEVICE:-cuda}
EXPERIMENT=${EXPERIMENT:-sft_selfplay}
mkdir -p "$RUNS"

one_size() {  # $1 size, $2 GPU index: SFT, then the test evaluation of its model
    local size=$1 subset=$RUNS/train_$1.jsonl.gz
    if [ "$size" = all ]; then cp "$DATA/train.jsonl.gz" "$subset"
    else zcat "$DATA/train.jsonl.gz" | head -n "$size" | gzip -1 > "$subset"; fi
    export CUDA_VISIBLE_DEVICES=$2
    python3 -m rookworld.sft experiment="$EXPERIMENT" tracking=none device="$DEVICE" data.policy_train="$subset" \
        sft.time_limit_min="$MINUTES" hydra.run.dir="$RUNS/run_$size" $OVERRIDES > "$RUNS/sft_$size.log" 2>&1
    bash "$(dirname "$0")/eval_test_part.sh" "$RUNS/run_$size/model" "$RUNS/test_scores_$size.json" \
        device="$DEVICE" $EVAL_DATA > "$RUNS/test_$size.log" 2>&1
}

gpus=${GPUS:-$(echo $SIZES | wc -w)}
run=0
for size in $SIZES; do
    one_size "$size" "$((run % gpus))" &
    run=$((run + 1))
done
wait
for size in $SIZES; do
    echo "== $size positions: $(zcat "$RUNS/train_$size.jsonl.gz" | grep -c .) rows; $(tail -n 1 "$RUNS/sft_$size.log")"
    grep "^eval @" "$RUNS/sft_$size.log" | tail -n 1
    tail -n 2 "$RUNS/test_$size.log"
done
