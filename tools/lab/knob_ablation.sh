#!/usr/bin/env bash
# The hand-tuned recipe with each GRPO knob switched on alone, against the recipe without it, every run
# at once on one GPU (CUDA MPS when available), `SEEDS` seeds each, then the table (tools/lab/knob_table.py):
#   LOG_DIR=docs/runs/knob_ablation SEEDS="0 1" bash tools/lab/knob_ablation.sh [extra overrides]
# ONLY="baseline dynamic_sampling" runs those rows alone (keep the baseline in every such run).
# Same steps for every run (time_limit_min=null); evaluation on the held-out validation part.
set -uo pipefail
LOG_DIR=${LOG_DIR:-.}
SEEDS=${SEEDS:-0 1}
mkdir -p "$LOG_DIR"
declare -A KNOBS=(
    [baseline]=""
    [dynamic_sampling]="grpo.dynamic_sampling.enabled=true"
    [normalize_then_sum]="grpo.reward_aggregation=normalize_then_sum"
    [entropy_bonus]="grpo.entropy.coef=0.003"
    [adaptive_entropy]="grpo.entropy.adaptive=true grpo.entropy.coef=0.001 grpo.entropy.delta=0.0005 grpo.entropy.max=0.01 grpo.entropy.target=0.3"
    [top_entropy_0.2]="grpo.top_entropy_quantile=0.2"
    [kl_bias_correction]="kl.bias_correction=true kl.estimator=k3"
    [kl_in_reward_k1]="kl.placement=reward kl.estimator=k1"
    [sampler_correction]="grpo.sampler_correction.mode=token_truncate"
    [mask_truncated]="grpo.mask_truncated_completions=true"
)
if nvidia-cuda-mps-control -d 2>/dev/null; then echo "CUDA MPS started"; trap 'echo quit | nvidia-cuda-mps-control' EXIT; fi
for knob in ${ONLY:-${!KNOBS[@]}}; do
    [ -v "KNOBS[$knob]" ] || { echo "unknown knob $knob (known: ${!KNOBS[*]})" >&2; exit 2; }
    for seed in $SEEDS; do
        "${PYTHON:-python3}" -m rookworld.train experiment=grpo_rookworld_tiny seed="$seed" time_limit_min=null \
            tracking=none ${KNOBS[$knob]} "$@" hydra.run.dir="/tmp/knobs/$knob/seed_$seed" \
            >"$LOG_DIR/${knob}_s$seed.log" 2>&1 &
    done
done
wait
"${PYTHON:-python3}" tools/lab/knob_table.py "$LOG_DIR"
