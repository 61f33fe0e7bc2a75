#!/usr/bin/env bash
# Ground truth on a GPU machine (its CPU cores do the Stockfish work; 16 here), in one job:
#   1. the agreement curve (rookworld.commands.agreement): the 5M-node reference and the label ladder on the
#      200 positions of docs/runs/agreement_positions.jsonl, cached in docs/runs/agreement_cache.json (shipped as .xz);
#      the budget it chooses for BUDGET_S seconds of re-annotation of all bundled P: positions
#   2. the bundled P: files re-annotated at that budget (annotate --relabel)
#   3. the held-out evaluation time per 1,000 problems on the GPU and on the CPU (rookworld.bench.eval_time)
#   4. RECIPE=1: tools/lab/recipe_old_vs_new_data.sh (the recipe, 400 steps, seeds 0 and 1, on the old data and the new)
# Usage, from the repository root, with the wheels installed and Stockfish at $STOCKFISH:
#   STOCKFISH=bin/stockfish OLD_TRAIN=outputs/old_data/train.jsonl.gz RECIPE=1 bash tools/lab/ground_truth_budget.sh
# BUDGET_S (110) is the re-annotation time the chosen budget must fit; LADDER the label budgets tried,
# e.g. LADDER="100000 200000 400000 800000 1600000 3200000" BUDGET_S=3600 (the cache keeps earlier analyses).
# Everything it makes is copied to $OUT.
set -u
OUT=${OUT:-/tmp/out}
STOCKFISH=$(realpath "${STOCKFISH:-/usr/games/stockfish}")
WORKERS=${WORKERS:-$(nproc)}
BUDGET_S=${BUDGET_S:-110}
LADDER=${LADDER:-100000 200000 400000 800000 1600000}
EVAL_N=${EVAL_N:-512}
B=rookworld/data/bundled
mkdir -p "$OUT"
rows=$(python3 -c "from rookworld.data.records import read_jsonl as r; print(sum(len(r(f'$B/{p}')) for p in ('train.jsonl.gz', 'validation.jsonl', 'test.jsonl')))")

[ -f docs/runs/agreement_cache.json ] || xz -dk docs/runs/agreement_cache.json.xz  # shipped compressed
echo "== agreement curve ($WORKERS workers, $rows rows to re-annotate in $BUDGET_S s)"
python3 -m rookworld.commands.agreement --positions docs/runs/agreement_positions.jsonl --sample 200 --seed 0 \
    --workers "$WORKERS" --engine-path "$STOCKFISH" --cache docs/runs/agreement_cache.json \
    --json docs/runs/agreement.json --budget-seconds "$BUDGET_S" --rows "$rows" --ladder $LADDER 2>"$OUT/agreement.log" | tee "$OUT/agreement.md"
cp docs/runs/agreement_cache.json docs/runs/agreement.json "$OUT/"
nodes=$(python3 -c "import json; print(json.load(open('docs/runs/agreement.json'))['chosen']['nodes'])")

echo "== re-annotation at $nodes nodes"
for file in validation.jsonl test.jsonl train.jsonl.gz; do
    python3 -m rookworld.commands.annotate --relabel "$B/$file" --output "$B/$file" --nodes "$nodes" \
        --workers "$WORKERS" --engine-path "$STOCKFISH" 2>&1 | tail -1 | tee -a "$OUT/relabel.log"
    cp "$B/$file" "$OUT/"
done

echo "== evaluation time"
python3 -m rookworld.bench.eval_time experiment=grpo_rookworld_tiny device=cuda eval.num_policy=500 \
    eval.num_arbiter=500 eval.batch_size=128 2>&1 | tail -2 | tee "$OUT/eval_time_gpu.log"
python3 -m rookworld.bench.eval_time --repeats 1 experiment=grpo_rookworld_tiny device=cpu eval.num_policy=50 \
    eval.num_arbiter=50 eval.batch_size=100 2>&1 | tail -2 | tee "$OUT/eval_time_cpu.log"

[ "${RECIPE:-0}" = 1 ] || exit 0
OUT=$OUT EVAL_N=$EVAL_N bash tools/lab/recipe_old_vs_new_data.sh
