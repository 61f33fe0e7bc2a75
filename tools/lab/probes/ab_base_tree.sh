#!/usr/bin/env bash
# A/B of the working tree against .wt-base (a copy of an earlier tree) in one go on a GPU machine:
#   bash tools/lab/probes/ab_base_tree.sh MODE...   (modes: check tiny checkbase tinybase checkfast tinyfast profile
#   tinyprofile decode decodesweep tinydecodesweep tinycheckN, N = sampling.finish_check_every)
source tools/offline_env.sh || exit 1
cp -r rookworld/assets .wt-base/rookworld/ 2>/dev/null
OUT=${OUT:-/tmp/out}
TINY="model=rookworld_tiny bench.random_weights=false bench.full_length=false sampling.max_new_tokens.P=112
      sampling.max_new_tokens.A=64 task_mix.P=0.5 task_mix.A=0.5 grpo.activation_checkpointing=false"
run() {  # run NAME DIR OVERRIDES...
    local name=$1 dir=$2; shift 2
    echo "=== $name ($dir): $*"
    (cd "$dir" && PYTHONPATH=$PWD:/tmp/site timeout 240 python3 -m rookworld.bench bench.random_weights=true \
        bench.trl=false bench.output="$OUT/$name.json" hydra.run.dir="/tmp/runs/$name" "$@" 2>&1 \
        | tee "$OUT/$name.log" | grep -v "^step " | grep -E "wall|generation|scoring|logprobs|update|peak|check|tokens" | head -14)
}
for mode in "$@"; do
    case $mode in
        check) run check . bench.steps=20 ;;
        checkbase) run checkbase .wt-base bench.steps=20 bench.self_check=false ;;
        tiny) run tiny . $TINY bench.steps=20 ;;
        tinybase) run tinybase .wt-base $TINY bench.steps=20 bench.self_check=false ;;
        checkfast) run checkfast . bench.steps=20 bench.self_check=false ;;
        tinyfast) run tinyfast . $TINY bench.steps=20 bench.self_check=false ;;
        tinycheck*) n=${mode#tinycheck}; run tiny-check$n . $TINY bench.steps=20 bench.self_check=false \
                        sampling.finish_check_every=$n ;;
        profile) run profile . bench.steps=5 bench.self_check=false bench.profile=true ;;
        tinyprofile) run tinyprofile . $TINY bench.steps=5 bench.self_check=false bench.profile=true ;;
        decode) timeout 200 python3 tools/lab/decode_bench.py default LINEAR_PROGRAMS=264 LINEAR_BLOCK_N=16 \
                    LINEAR_WARPS=8 LINEAR_MAX_SPLITS=4 ATTENTION_WARPS=4 ATTENTION_BLOCK=64 2>&1 | tail -12 ;;
        decodesweep) timeout 300 python3 tools/lab/decode_bench.py --baseline .wt-base/rookworld/model default PDL_TRIGGER=0 LINEAR_BLOCK_N=64 \
                    LINEAR_BLOCK_K=128 LINEAR_BLOCK_K=512 LINEAR_BLOCK_N=16 LINEAR_PROGRAMS=264 LINEAR_WARPS=8 \
                    ATTENTION_WARPS=4 ATTENTION_BLOCK=64 \
                    > "$OUT/decodesweep.log" 2>&1; tail -13 "$OUT/decodesweep.log" ;;
        tinydecodesweep) timeout 300 python3 tools/lab/decode_bench.py --override model=rookworld_tiny \
                    --override bench.random_weights=false --baseline .wt-base/rookworld/model default PDL_TRIGGER=0 LINEAR_BLOCK_K=128 \
                    LINEAR_BLOCK_K=512 LINEAR_BLOCK_N=16 LINEAR_PROGRAMS=264 ATTENTION_WARPS=4 ATTENTION_BLOCK=64 > "$OUT/tinydecodesweep.log" 2>&1; tail -11 "$OUT/tinydecodesweep.log" ;;
        cudatests) PYTHONPATH=$PWD:/tmp/site timeout 300 python3 -m pytest -q -m '' -p no:cacheprovider -p no:warnings \
                       tests/test_layer_norm.py tests/test_pass_graphs.py tests/test_fast_path.py > "$OUT/cudatests.log" 2>&1
                   tail -3 "$OUT/cudatests.log" ;;
        *) echo "unknown mode $mode" ;;
    esac
done
