#!/usr/bin/env bash
# A/B timing of two source trees on one GPU, in ABBA order per shape (the wheels in .whl/ on a machine without network):
#   bash tools/lab/ab_bench.sh A_DIR [B_DIR] [STEPS]        # B_DIR defaults to this tree
# A_DIR (and B_DIR) hold a tree each (e.g. `git archive BASE rookworld conf | tar -x -C DIR`, without
# rookworld/assets, which is linked from this tree). Both trees run the same bench command: the 124M
# worst case (random weights, full length) and rookworld_tiny at the GRPO recipe's shapes, no
# self-check. Prints each run's median step and, per shape, the ratio of the medians (B / A).
set -u
base=$1 head=${2:-.} steps=${3:-20}
[ "${WHEELS_INSTALLED:-0}" = 1 ] || python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
    .whl/*.whl || exit 1
for tree in "$base" "$head"; do
    [ -e "$tree/rookworld/assets" ] || ln -s "$PWD/rookworld/assets" "$tree/rookworld/assets"
done
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}
TINY="model=rookworld_tiny bench.random_weights=false bench.full_length=false sampling.max_new_tokens.P=112
      sampling.max_new_tokens.A=64 task_mix.P=0.5 task_mix.A=0.5 grpo.activation_checkpointing=false"
one() {  # one TREE LABEL SHAPE OVERRIDES...
    local tree=$1 label=$2 shape=$3; shift 3
    (cd "$tree" && PYTHONPATH=$PWD:/tmp/site timeout 300 python3 -m rookworld.bench bench.self_check=false \
        bench.trl=false bench.steps="$steps" bench.output="$OUT/$shape-$label.json" hydra.run.dir="/tmp/ab/$shape-$label" \
        "$@" > "$OUT/$shape-$label.log" 2>&1) || { echo "$shape $label failed"; tail -5 "$OUT/$shape-$label.log"; }
}
for shape in gpt2 tiny; do
    args="bench.random_weights=true"
    [ "$shape" = tiny ] && args=$TINY
    one "$base" A1 $shape $args; one "$head" B1 $shape $args; one "$head" B2 $shape $args; one "$base" A2 $shape $args
done
python3 - "$OUT" <<'PY'
import json, statistics, sys
from pathlib import Path
out = Path(sys.argv[1])
for shape in ("gpt2", "tiny"):
    medians = {}
    for label in ("A1", "B1", "B2", "A2"):
        path = out / f"{shape}-{label}.json"
        if path.exists():
            medians[label] = json.loads(path.read_text())["fast"]["summary"]["wall"]["median"]
    print(shape, " ".join(f"{k}={v:.4f}s" for k, v in medians.items()))
    a = [medians[k] for k in ("A1", "A2") if k in medians]
    b = [medians[k] for k in ("B1", "B2") if k in medians]
    if a and b:
        print(f"{shape}: B/A = {statistics.mean(b) / statistics.mean(a):.4f} (mean of the two medians each)")
PY
