#!/usr/bin/env bash
# The warm start's self-play data on a many-core machine, in time-limited jobs that resume each other.
# Each job: Stockfish's own speed on this machine (`bench`, one process, then one per core at once),
# then `annotate --selfplay --shards` until the target or until LIMIT_S seconds have passed (it then stops
# after the shard in hand; a job killed outright loses only that shard): the next job resumes after the
# last complete shard, and the files come out as an unkilled run's. At the target, done.json counts the
# splits and confirms that no position and no game is in two of them.
#
#   DATA=data/selfplay TARGET=1100000 NODES=10000 LIMIT_S=480 bash tools/selfplay_data.sh   # again until done
#
# STOCKFISH: the engine binary (default /usr/games/stockfish); WORKERS: engine processes (default: all cores);
# SEED: the games' seed; REPORT: where the logs go (default $DATA/logs). The held-out exclusions: the
# shipped held-out files, so that the new data never contains a shipped validation or test position, and
# the files in EXCLUDE (space-separated): a second run with another SEED that must share no position with
# the first lists all of the first run's files, e.g.
#
#   DATA=data/selfplay2 SEED=2027 EXCLUDE="data/selfplay/train.jsonl.gz rookworld/data/selfplay/rl.jsonl.xz
#       rookworld/data/selfplay/validation.jsonl.xz rookworld/data/selfplay/test.jsonl.xz" bash tools/selfplay_data.sh
set -uo pipefail
DATA=${DATA:-data/selfplay}  # git-ignored (/data/)
TARGET=${TARGET:-1100000}
NODES=${NODES:-10000}
LIMIT_S=${LIMIT_S:-480}
SEED=${SEED:-2026}
EXCLUDE=${EXCLUDE:-}
WORKERS=${WORKERS:-$(nproc)}
STOCKFISH=$(realpath "${STOCKFISH:-/usr/games/stockfish}")
REPORT=${REPORT:-$DATA/logs}
B=rookworld/data/bundled
mkdir -p "$REPORT"

if [ ! -s "$REPORT/bench.txt" ]; then  # Stockfish's nodes/s here: one process, then $WORKERS at once
    one=$("$STOCKFISH" bench 16 1 13 2>&1 | awk '/Nodes\/second/ {print $3}')
    all=$(for i in $(seq "$WORKERS"); do "$STOCKFISH" bench 16 1 13 2>&1 | awk '/Nodes\/second/ {print $3}' & done; wait)
    total=$(echo "$all" | awk '{s += $1} END {print s}')
    echo "stockfish bench 16 1 13: $one nodes/s alone; $total nodes/s with $WORKERS at once ($(nproc) cores)" \
        | tee "$REPORT/bench.txt"
fi

python3 -m rookworld.commands.annotate --selfplay "$TARGET" --shards "$DATA" --time-limit-s "$LIMIT_S" \
    --workers "$WORKERS" --nodes "$NODES" --seed "$SEED" --engine-path "$STOCKFISH" \
    --exclude "$B/validation.jsonl" "$B/test.jsonl" $EXCLUDE 2>>"$REPORT/annotate.log"
tail -c 3000 "$REPORT/annotate.log" | tr '\r' '\n' | tail -4
cat "$DATA/done.json"
