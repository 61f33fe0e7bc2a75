#!/usr/bin/env bash
# The bundled P: files re-annotated on a machine's CPU cores, in three parts that each fit a job of 10 minutes
# (a time-limited Slurm job, say; on 32 cores at 1.6M nodes: 184 + 183 s, 459 s, 180 s):
#   STOCKFISH=bin/stockfish NODES=1600000 PART=1 bash tools/lab/relabel_bundled.sh   # validation and test
#   ... PART=2 ...   # training rows [0, SPLIT)
#   ... PART=3 ...   # training rows [SPLIT, end)
# Each part's files are written to $OUT; join the two training parts (in order) into train.jsonl.gz:
#   python -c "from rookworld.data.records import read_jsonl as r, write_jsonl as w
#   w('rookworld/data/bundled/train.jsonl.gz', r('train_2.jsonl.gz') + r('train_3.jsonl.gz'))"
set -euo pipefail
OUT=${OUT:-/tmp/out}
STOCKFISH=$(realpath "${STOCKFISH:-/usr/games/stockfish}")
WORKERS=${WORKERS:-$(nproc)}
SPLIT=${SPLIT:-4000}
B=rookworld/data/bundled
mkdir -p "$OUT"
relabel() {  # input output
    python3 -m rookworld.commands.annotate --relabel "$1" --output "$2" --nodes "$NODES" --workers "$WORKERS" \
        --engine-path "$STOCKFISH" 2>&1 | tail -1 | tee -a "$OUT/relabel.log"
}
training_rows() {  # first last output
    python3 -c "from rookworld.data.records import read_jsonl, write_jsonl
write_jsonl('$3', read_jsonl('$B/train.jsonl.gz')[$1:$2])"
}
case "$PART" in
    1) for file in validation.jsonl test.jsonl; do relabel "$B/$file" "$OUT/$file"; done ;;
    2) training_rows 0 "$SPLIT" /tmp/train_in.jsonl.gz; relabel /tmp/train_in.jsonl.gz "$OUT/train_2.jsonl.gz" ;;
    3) training_rows "$SPLIT" None /tmp/train_in.jsonl.gz; relabel /tmp/train_in.jsonl.gz "$OUT/train_3.jsonl.gz" ;;
    *) echo "PART=$PART: must be 1, 2 or 3" >&2; exit 2 ;;
esac
