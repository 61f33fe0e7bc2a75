#!/usr/bin/env bash
# The final pool: held-out P: positions and A: transitions that only a staged sweep's confirmation reads
# (rookworld/data/selfplay/README.md, "The final pool"). New self-play games of their own seed, every position of
# the shipped parts, the bundled files and the carried train shards excluded, then labelled as the test pool is.
# Three steps, each resumable by running it again:
#   bash tools/final_pool.sh games DIR [TRAIN_SHARD ...]   self-play of SEED (2028) to POSITIONS (11500) positions,
#                                                          every game of the run, DIR/final_raw.jsonl.gz
#   bash tools/final_pool.sh label DIR                     Stockfish at 100,000 nodes, then every legal move's value
#                                                          at 3,000 nodes: rookworld/data/selfplay/final.jsonl.xz
#   bash tools/final_pool.sh arbiter DIR [TRAIN_SHARD ...] ARBITER (10000) A: transitions from those positions and
#                                                          random games: rookworld/data/selfplay/final_arbiter.jsonl.xz
# WORKERS: engine processes (default: all cores); STOCKFISH: the engine binary (default /usr/games/stockfish).
# The labels are a cleared-hash, one-thread, node-limited search: any machine writes the same file.
set -euo pipefail
step=$1 dir=$2; shift 2
SEED=${SEED:-2028} POSITIONS=${POSITIONS:-11500} ARBITER=${ARBITER:-10000}
WORKERS=${WORKERS:-$(nproc)}
STOCKFISH=$(realpath "${STOCKFISH:-/usr/games/stockfish}")
parts=rookworld/data/selfplay bundled=rookworld/data/bundled
shipped=("$parts"/{rl,validation,test,validation_arbiter,test_arbiter}.jsonl.xz
         "$bundled"/{train,validation,test,validation_arbiter,test_arbiter}.jsonl.gz)
annotate() { python3 -m rookworld.commands.annotate "$@"; }
mkdir -p "$dir"
case $step in
games)
    annotate --selfplay "$POSITIONS" --shards "$dir/run" --workers "$WORKERS" --nodes 10000 --seed "$SEED" \
        --games-per-shard 10 --engine-path "$STOCKFISH" --exclude "${shipped[@]}" "$@"
    python3 - "$dir" <<'EOF'
import sys
from pathlib import Path
from rookworld.data.records import iter_jsonl, write_jsonl
from rookworld.data.selfplay import SPLITS_BY_GAME
run = Path(sys.argv[1]) / "run"
rows = [record for split in SPLITS_BY_GAME for _, record in iter_jsonl(run / f"{split}.jsonl.gz")]
rows.sort(key=lambda record: record["game"])  # stable: a game's plies keep their order
write_jsonl(Path(sys.argv[1]) / "final_raw.jsonl.gz", [{**record, "split": "final"} for record in rows])
print(f"{len(rows)} positions of {len({record['game'] for record in rows})} games")
EOF
    ;;
label)
    annotate --relabel "$dir/final_raw.jsonl.gz" --output "$dir/final_100k.jsonl.gz" --nodes 100000 \
        --workers "$WORKERS" --engine-path "$STOCKFISH"
    annotate --action-values "$dir/final_100k.jsonl.gz" --output "$parts/final.jsonl.xz" --shards "$dir/av" \
        --nodes 3000 --workers "$WORKERS" --positions-per-block 256 --engine-path "$STOCKFISH"
    ;;
arbiter)
    annotate --arbiter "$ARBITER" --positions "$dir/final_raw.jsonl.gz" --random-games "$ARBITER" --seed 13 \
        --exclude "${shipped[@]}" "$@" --output "$parts/final_arbiter.jsonl.xz"
    ;;
*)
    echo "usage: final_pool.sh games|label|arbiter DIR [TRAIN_SHARD ...]" >&2; exit 2
    ;;
esac
