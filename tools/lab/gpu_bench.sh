#!/usr/bin/env bash
# On a GPU machine, in one go: install the wheels in .whl/ (for a machine without network), then run the
# benchmark modes named in $1 (comma list):
#   default  self-check + 20 timed steps + 3 plain steps + kernel profiles
#   check    self-check + 20 timed steps (the default without profiles and plain steps)
#   micro32  the check mode's timing in two 32-row micro-batches (no self-check)
#   tiny     rookworld_tiny (48-wide heads) at the GRPO recipe's caps and task mix, 8x8, real stops:
#            self-check + 20 timed steps
#   sweep    grpo.micro_batch_size x activation_checkpointing sweep
#   trials   20 trainers in one process
#   soak     500 timed steps
#   tinysoak rookworld_tiny at the tiny mode's shapes: 500 timed steps
#   tinyprofile  the tiny mode's shapes: 5 timed steps, then kernel profiles of one step and one generation
#   eager    the baselines without CUDA graphs of the training passes (grpo.cuda_graphs=false):
#            the check and tiny modes' timings, no self-check
#   trl      TRL GRPOTrainer side by side
# Usage, from the repository root: bash tools/lab/gpu_bench.sh default,trials,trl
# Exit status: 1 when any mode's bench exited non-zero (a failed self-check exits 1 with one line
# naming the check; a timeout 124), after running every mode; the failed modes are listed at the end.
# Wheels: the GPU image's torch/triton wheels; for the TRL side-by-side also (py3.12 wheels, ~1.8 MB):
#   pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#       --platform manylinux2014_x86_64 -d .whl/trl trl==1.16.0 datasets==5.2.0 dill==0.4.1 multiprocess==0.70.19
# (transformers and accelerate are already on the GPU image).
set -u
[ "${WHEELS_INSTALLED:-0}" = 1 ] || python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
    .whl/*.whl $(ls .whl/trl/*.whl 2>/dev/null) || exit 1
export PYTHONPATH=$PWD:/tmp/site PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}
python3 - <<'PY'
import importlib, torch
print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name())
for name in ("triton", "transformers", "accelerate", "datasets", "trl", "pyarrow", "huggingface_hub", "tokenizers"):
    try:
        print(name, importlib.import_module(name).__version__)
    except Exception as error:
        print(name, "unavailable:", type(error).__name__, error)
PY
# GPU clocks, power and throttle reasons every 0.5 s while the benchmarks run (read only)
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_event_reasons.active \
    --format=csv,noheader -lms 500 > "$OUT/clocks.csv" 2>&1 &
CLOCKS=$!
trap 'kill $CLOCKS 2>/dev/null' EXIT
FAILED=()
bench() {  # bench NAME TIMEOUT OVERRIDES...
    local name=$1 limit=$2; shift 2
    echo "=== $name: $*"
    timeout "$limit" python3 -m rookworld.bench bench.random_weights=true bench.output="$OUT/$name.json" \
        hydra.run.dir="/tmp/runs/$name" "$@" 2>&1 | tee "$OUT/$name.log" | grep -v "^step " | tail -60
    local status=${PIPESTATUS[0]}
    if [ "$status" -ne 0 ]; then
        echo "=== $name FAILED: exit status $status"
        FAILED+=("$name")
    fi
}
# rookworld_tiny at the GRPO recipe's caps, task mix and update (no activation checkpointing), 8 x 8
TINY="model=rookworld_tiny bench.random_weights=false bench.full_length=false sampling.max_new_tokens.P=112
      sampling.max_new_tokens.A=64 task_mix.P=0.5 task_mix.A=0.5 grpo.activation_checkpointing=false"
for mode in ${1//,/ }; do
    case $mode in
        default) bench default 240 bench.steps=20 bench.profile=true bench.compare_plain_steps=2 bench.trl=false ;;
        check) bench check 240 bench.steps=20 bench.trl=false ;;
        micro32) bench micro32 240 bench.steps=20 bench.trl=false bench.self_check=false grpo.micro_batch_size=32 ;;
        tiny) bench tiny 240 $TINY bench.steps=20 bench.trl=false ;;
        tinyprofile) bench tinyprofile 240 $TINY bench.steps=5 bench.trl=false bench.self_check=false bench.profile=true ;;
        eager) bench check-eager 240 bench.steps=20 bench.trl=false bench.self_check=false grpo.cuda_graphs=false
               bench tiny-eager 240 $TINY bench.steps=20 bench.trl=false bench.self_check=false grpo.cuda_graphs=false ;;
        sweep) for setting in 16,false 16,true 64,true; do
                   m=${setting%,*} c=${setting#*,}
                   bench micro$m-ckpt$c 120 bench.self_check=false bench.steps=10 bench.warmup=3 \
                       grpo.micro_batch_size=$m grpo.activation_checkpointing=$c bench.trl=false
               done ;;
        trials) bench trials 300 bench.self_check=false bench.steps=3 bench.trials=20 bench.trl=false ;;
        soak) bench soak 400 bench.self_check=false bench.steps=500 bench.trl=false ;;
        tinysoak) bench tinysoak 400 $TINY bench.steps=500 bench.self_check=false bench.trl=false ;;
        trl) bench trl 300 bench.self_check=false bench.steps=8 bench.trl=auto bench.trl_steps=5 ;;
        *) echo "unknown mode $mode"; FAILED+=("$mode") ;;
    esac
done
if [ ${#FAILED[@]} -gt 0 ]; then
    echo "failed modes: ${FAILED[*]}"
    exit 1
fi
