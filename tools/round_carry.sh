#!/usr/bin/env bash
# Lays out what a warm-start round on a GPU machine brings with it, in pieces that fit calls of at most 64 MiB
# beside the tracked tree (at most 48 MiB: tests/test_tree_size.py), under .device/round/ (git-ignored):
#   wheels/            the Python packages the GPU machine lacks for a round (hydra-core, omegaconf, antlr4, chess)
#   stockfish.xz.00/01 the Stockfish binary (47 MB; 22 MB as xz) in two halves, joined on the machine
#   positions-a/b/c/   carried annotated positions (shard files), in three groups of about 6 MB
#   before/            with SELFPLAY_BEFORE=COMMIT: that commit's code and configs, the baseline of the self-play
#                      bench the round's start can run (round_job.sh: SELFPLAY_BENCH=before)
# docs/warm-start.md says which call carries what.
#
#   bash tools/round_carry.sh SHARDS_DIR [STOCKFISH_BINARY]
#   bash tools/round_carry.sh runs/selfplay-2026/train /usr/games/stockfish
# SHARDS_DIR: a folder of annotated shard files (shard-NNNNN.jsonl.gz, e.g. a self-play run's train/ folder).
set -euo pipefail
shards=$1 engine=${2:-/usr/games/stockfish} out=.device/round
rm -rf "$out" && mkdir -p "$out/wheels" "$out/positions-a" "$out/positions-b" "$out/positions-c"
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 -d "$out/wheels" \
    hydra-core==1.4.0rc3 omegaconf==2.4.1rc1
python3 -m pip wheel -q --no-deps -w "$out/wheels" antlr4-python3-runtime==4.9.3 chess==1.11.2
xz -6 -T0 -c "$engine" | split -b 11M -d - "$out/stockfish.xz."
files=("$shards"/shard-*.jsonl.gz)
n=${#files[@]}
for i in "${!files[@]}"; do
    group=$(( 3 * i / n ))
    cp "${files[$i]}" "$out/positions-$(printf '%b' "\\$(printf '%03o' $((97 + group)))")/"
done
if [ -n "${SELFPLAY_BEFORE:-}" ]; then  # the code and configs, not the model or data files (< 256 KB each)
    mkdir -p "$out/before"
    git ls-tree -r -l "$SELFPLAY_BEFORE" rookworld conf | awk '$4 < 262144 {print $5}' \
        | xargs git archive "$SELFPLAY_BEFORE" | tar -x -C "$out/before"
fi
du -sh "$out"/*
