#!/usr/bin/env bash
# The new warm start from nothing, on one many-core GPU machine (4 GPUs, 64 cores), in one job:
#   1. self-play data: TARGET positions labelled at NODES (tools/selfplay_data.sh)
#   2. the held-out P: pools: the run's validation and test splits relabelled at HELDOUT_NODES
#   3. the data-scaling runs: one SFT per size per GPU, then each model on the whole P: test pool
#      and the bundled A: test part (tools/sft_scaling.sh)
# With DEADLINE (seconds since the epoch) the SFT runs get whatever time is left before it, less
# EVAL_S for the evaluations; below MIN_MINUTES they are skipped. EVAL_EXTRA: more overrides of the
# evaluations (e.g. smaller parts for a trial on the CPU).
#
#   DATA=/scratch/ws TARGET=1100000 NODES=10000 DEADLINE=$(( $(date +%s) + 1500 )) bash tools/warm_start.sh
#
# The A: held-out pools (tools/heldout_pools.sh) need only python-chess and one core for ~10 minutes
# each: make them anywhere once the splits exist (ARBITER_ONLY=1 bash tools/heldout_pools.sh).
set -uo pipefail
export DATA=${DATA:-data/selfplay}
export TARGET=${TARGET:-1100000} NODES=${NODES:-10000} HELDOUT_NODES=${HELDOUT_NODES:-100000}
export LIMIT_S=${LIMIT_S:-100000}
SIZES=${SIZES:-5600 50000 250000 all}
EVAL_S=${EVAL_S:-150}
MIN_MINUTES=${MIN_MINUTES:-3}
stamp() { echo "[$(date -u +%H:%M:%S)] $*"; }

stamp "self-play: $TARGET positions at $NODES nodes"
bash tools/selfplay_data.sh || exit 1
[ -s "$DATA/train.jsonl.gz" ] || { stamp "self-play did not reach its target"; exit 1; }
stamp "held-out P: pools at $HELDOUT_NODES nodes"
P_ONLY=1 bash tools/heldout_pools.sh || exit 1
minutes=${MINUTES:-6}
if [ -n "${DEADLINE:-}" ]; then
    minutes=$(( (DEADLINE - $(date +%s) - EVAL_S) / 60 ))
fi
if [ "$minutes" -lt "$MIN_MINUTES" ]; then stamp "only $minutes min left: no SFT runs"; exit 0; fi
stamp "SFT: sizes $SIZES, $minutes min each"
DATA=$DATA SIZES=$SIZES MINUTES=$minutes RUNS=${RUNS:-$DATA/scaling} \
    EVAL_DATA="data.policy_test=$DATA/heldout/test.jsonl.gz ${EVAL_EXTRA:-}" bash tools/sft_scaling.sh
stamp "done"
