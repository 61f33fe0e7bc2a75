# Sourced by the tools that deal runs over GPUs; needs the array `gpus` (e.g. read -ra gpus <<< "${GPUS:-0}").
on_gpu() {  # INDEX COMMAND...: runs COMMAND in the background on GPU gpus[INDEX % len]
    local gpu=${gpus[$(($1 % ${#gpus[@]}))]}; shift
    CUDA_VISIBLE_DEVICES=$gpu "$@" &
}
