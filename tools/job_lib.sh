# Sourced by the GPU job scripts (tools/recipe_job.sh, tools/round_job.sh): what a job of several calls does alike.
#   source tools/job_lib.sh && join_engine /tmp/job/sf 2 .device/job .device/part1 && wait_while_running rookworld 60
#   join_engine SF_DIR PARTS DIR...   copy the Stockfish parts stockfish.xz.NN found in each DIR into SF_DIR; once
#                                     PARTS of them are there, join them into the binary SF_DIR/stockfish
#   wait_while_running PATTERN SECONDS   up to SECONDS, less once no process's command line matches PATTERN
join_engine() {
    local sf=$1 parts=$2 dir
    shift 2
    mkdir -p "$sf"
    for dir in "$@"; do cp -n "$dir"/stockfish.xz.* "$sf/" 2> /dev/null || true; done
    if [ ! -x "$sf/stockfish" ] && [ "$(ls "$sf"/stockfish.xz.* 2> /dev/null | wc -l)" -ge "$parts" ]; then
        cat "$sf"/stockfish.xz.* | xz -dc > "$sf/stockfish.tmp" && chmod +x "$sf/stockfish.tmp"
        mv "$sf/stockfish.tmp" "$sf/stockfish" && echo "== Stockfish ready"
    fi
}
wait_while_running() {
    local _
    for _ in $(seq 1 "$2"); do
        pgrep -f "$1" > /dev/null || { echo "== $1 is not running"; break; }
        sleep 1
    done
}
