#!/usr/bin/env bash
# The README's quickstart for several seeds, one after another, each timed in a fresh directory
# (tracked in its own ./mlflow.db, as a new user's first run), one log per seed:
#   bash tools/lab/quickstart_seeds.sh 0 1 2            # docs/quickstart.md's figures
# Prints the log folder (LOG_DIR, else a new temporary one), then each seed's wall time, its CPU time
# (user + system: on a busy machine it grows far less than the wall time) and its last line (improved
# or not: the change of eval/score and its paired standard error).
# The command as a user types it: one CPU thread by the config's default (cpu_threads: 1); float sums
# in another order (cpu_threads=2) can change a sampled token, and with it the run.
set -uo pipefail
TIMEFORMAT='%1R %1U %1S'  # bash's `time`: wall, user and system seconds
repo=$(cd "$(dirname "$0")/../.." && pwd)
out=${LOG_DIR:-$(mktemp -d)}
echo "logs: $out/seed_N/run.log"
status=0
for seed in "$@"; do
    dir="$out/seed_$seed"
    mkdir -p "$dir"
    load=$(cut -d' ' -f1 /proc/loadavg)
    { time (cd "$dir" && PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}" "${PYTHON:-python3}" -m rookworld.train \
        experiment=quickstart seed="$seed" >run.log 2>&1); } 2>"$dir/time.txt" || status=1
    read -r wall user system <"$dir/time.txt"
    printf '== seed %s: %s s, %s s of CPU (load average at the start: %s, at the end: %s)\n' "$seed" "$wall" \
        "$(awk -v u="$user" -v s="$system" 'BEGIN { printf "%.1f", u + s }')" "$load" "$(cut -d' ' -f1 /proc/loadavg)"
    tail -1 "$dir/run.log"
done
exit $status
