#!/usr/bin/env bash
# The bundled P: files re-annotated on the GPU machine's CPU cores, in parts that each fit one device call:
#   STOCKFISH=bin/stockfish NODES=1600000 PART=1 bash tools/relabel_device.sh   # validation, test, train rows [0, SPLIT)
#   STOCKFISH=bin/stockfish NODES=1600000 PART=2 bash tools/relabel_device.sh   # train rows [SPLIT, end), then joined
# PART=1 leaves outputs/relabel/train_1.jsonl.gz for PART=2 (carry outputs/relabel between the calls).
# The relabelled files are copied to $OUT.
set -euo pipefail
OUT=${OUT:-/tmp/out}
STOCKFISH=$(realpath "${STOCKFISH:-/usr/games/stockfish}")
WORKERS=${WORKERS:-$(nproc)}
SPLIT=${SPLIT:-2400}
B=rookworld/data/bundled
W=outputs/relabel
mkdir -p "$OUT" "$W"
relabel() {  # input output
    python3 -m rookworld.data.annotate --relabel "$1" --output "$2" --nodes "$NODES" --workers "$WORKERS" \
        --engine-path "$STOCKFISH" 2>&1 | tail -1 | tee -a "$OUT/relabel.log"
}
part() {  # first last output: rows [first, last) of the training file
    python3 -c "import sys; from rookworld.data.records import read_jsonl, write_jsonl
rows = read_jsonl('$B/train.jsonl.gz')[$1:$2]; write_jsonl('$3', rows)"
}
if [ "$PART" = 1 ]; then
    for file in validation.jsonl test.jsonl; do relabel "$B/$file" "$B/$file"; cp "$B/$file" "$OUT/"; done
    part 0 "$SPLIT" "$W/train_in_1.jsonl.gz"
    relabel "$W/train_in_1.jsonl.gz" "$W/train_1.jsonl.gz"
    cp "$W/train_1.jsonl.gz" "$OUT/"
else
    part "$SPLIT" None "$W/train_in_2.jsonl.gz"
    relabel "$W/train_in_2.jsonl.gz" "$W/train_2.jsonl.gz"
    python3 -c "from rookworld.data.records import read_jsonl, write_jsonl
write_jsonl('$B/train.jsonl.gz', read_jsonl('$W/train_1.jsonl.gz') + read_jsonl('$W/train_2.jsonl.gz'))"
    cp "$B/train.jsonl.gz" "$OUT/"
fi
