# Sourced by the tools that deal runs over the GPUs named in GPUS: defines on_gpu INDEX COMMAND..., which runs
# COMMAND in the background on GPU gpus[INDEX % len]. Needs the array `gpus`. Example, in such a tool:
#   read -ra gpus <<< "${GPUS:-0}"; source "$(dirname "$0")/on_gpu.sh"
#   for i in 0 1 2 3; do on_gpu $i python3 -m rookworld.train seed=$i; done; wait
on_gpu() {  # INDEX COMMAND...: runs COMMAND in the background on GPU gpus[INDEX % len]
    local gpu=${gpus[$(($1 % ${#gpus[@]}))]}; shift
    CUDA_VISIBLE_DEVICES=$gpu "$@" &
}
