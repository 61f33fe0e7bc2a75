#!/usr/bin/env bash
# The held-out pools of a finished self-play run (tools/selfplay_data.sh): its validation and test
# splits (whole games, disjoint from train and rl) relabelled at the held-out budget, and A: pools of
# ARBITER transitions each, from those positions plus seeded random-move games, no position of another
# part (annotate --arbiter, the bundled A: parts' recipe at a larger size).
#
#   DATA=data/selfplay HELDOUT_NODES=100000 ARBITER=10000 bash tools/heldout_pools.sh
#
# Writes $DATA/heldout/{validation,test}.jsonl.gz and {validation,test}_arbiter.jsonl.gz. The A: pools
# need python-chess alone (~10 minutes each on one core) and the test pool excludes the validation
# pool's positions, so they are made one after the other. P_ONLY=1: the P: pools only; ARBITER_ONLY=1:
# the A: pools only. WORKERS: engine processes (default: all cores); STOCKFISH: the engine binary.
set -euo pipefail
DATA=${DATA:-data/selfplay}
HELDOUT_NODES=${HELDOUT_NODES:-100000}
ARBITER=${ARBITER:-10000}
WORKERS=${WORKERS:-$(nproc)}
STOCKFISH=$(realpath "${STOCKFISH:-/usr/games/stockfish}")
OUT=$DATA/heldout
mkdir -p "$OUT"
annotate() { python3 -m rookworld.commands.annotate "$@"; }

if [ -z "${ARBITER_ONLY:-}" ]; then
    for split in validation test; do
        annotate --relabel "$DATA/$split.jsonl.gz" --output "$OUT/$split.jsonl.gz" --nodes "$HELDOUT_NODES" \
            --workers "$WORKERS" --engine-path "$STOCKFISH"
    done
fi
if [ -z "${P_ONLY:-}" ]; then
    annotate --arbiter "$ARBITER" --positions "$DATA/validation.jsonl.gz" --random-games "$ARBITER" --seed 11 \
        --exclude "$DATA/train.jsonl.gz" "$DATA/rl.jsonl.gz" "$DATA/test.jsonl.gz" \
        --output "$OUT/validation_arbiter.jsonl.gz"
    annotate --arbiter "$ARBITER" --positions "$DATA/test.jsonl.gz" --random-games "$ARBITER" --seed 12 \
        --exclude "$DATA/train.jsonl.gz" "$DATA/rl.jsonl.gz" "$DATA/validation.jsonl.gz" \
        "$OUT/validation_arbiter.jsonl.gz" --output "$OUT/test_arbiter.jsonl.gz"
fi
ls -l "$OUT"
