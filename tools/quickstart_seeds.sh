#!/usr/bin/env bash
# The README's quickstart for several seeds, one after another, each timed in a fresh directory
# (tracked in its own ./mlflow.db, as a new user's first run), one log per seed:
#   bash tools/quickstart_seeds.sh 0 1 2            # the README's figures (idle 2-core machine)
# Prints each seed's wall time and its last line (improved or not, the change and its standard error).
# One thread (OMP_NUM_THREADS=1 unless set), as the README's figures were measured: float sums in
# another order can change a sampled token, and with it the run.
set -uo pipefail
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
repo=$(cd "$(dirname "$0")/.." && pwd)
out=${LOG_DIR:-$(mktemp -d)}
status=0
for seed in "$@"; do
    dir="$out/seed_$seed"
    mkdir -p "$dir"
    start=$(date +%s%N)
    (cd "$dir" && PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}" "${PYTHON:-python3}" -m rookworld.train \
        experiment=quickstart seed="$seed" >run.log 2>&1) || status=1
    tenths=$(( ($(date +%s%N) - start) / 100000000 ))
    printf '== seed %s: %d.%d s (load average at the end: %s)\n' "$seed" $((tenths / 10)) $((tenths % 10)) \
        "$(cut -d' ' -f1 /proc/loadavg)"
    tail -1 "$dir/run.log"
done
exit $status
