#!/usr/bin/env bash
# Run an experiment for several seeds at once on one GPU (CUDA MPS if available), one log per seed:
#   LOG_DIR=docs/runs bash tools/lab/recipe_seeds.sh grpo_rookworld_tiny 0 1 2 [-- extra overrides]
# Same steps for every run: the experiment's wall-clock limit is lifted (time_limit_min=null).
set -uo pipefail
experiment=$1; shift
seeds=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do seeds+=("$1"); shift; done
[ "${1:-}" = "--" ] && shift
for seed in "${seeds[@]}"; do
    "${PYTHON:-python3}" -m rookworld.train experiment="$experiment" seed="$seed" time_limit_min=null "$@" \
        hydra.run.dir="outputs/seeds/$experiment/seed_$seed" \
        >"${LOG_DIR:-.}/${experiment}_s$seed.log" 2>&1 &
done
status=0
for job in $(jobs -p); do wait "$job" || status=1; done
for seed in "${seeds[@]}"; do
    echo "== $experiment seed $seed"; grep -E "^(eval @ step|outcome|final evaluation)" "${LOG_DIR:-.}/${experiment}_s$seed.log" | tail -4
done
exit $status
