#!/usr/bin/env bash
# A staged verdict sweep (STUDY=verdict, the default: sweeps/verdict.yaml; STUDY=chess_verdict:
# sweeps/chess_verdict.yaml) on a GPU machine, resumable across jobs with a time limit (a Slurm
# job of 10 minutes, say): each job runs the sweep for SWEEP_S seconds and stops it cleanly.
# On the GPU machine, from the repository root (no network):
#   bash tools/verdict_in_jobs.sh            # OUT=/tmp/out; one job; run it again until it prints a verdict
#   STUDY=chess_verdict bash tools/verdict_in_jobs.sh model.path=WARM_START   # arguments: overrides of the sweep
# It runs 12 workers per GPU it sees (N_JOBS overrides hydra.sweeper.n_jobs; the preset's 48 is 4 GPUs).
# Each job: restores the study journal (below), runs the same sweep command for SWEEP_S seconds (500), stops
# it with SIGINT (its running trials are failed as stale by the next job and re-queued: a search, race or
# confirmation run goes on from its last finished rung when the checkpoints are still there, else from its
# start), then copies the journal, the printed summary and report, the launch logs and the GPU log to $OUT.
#
# The study's storage travels back and forth as ONE FILE, outputs/optuna/$STUDY.journal (append-only):
#   - after a job on a machine that does not keep outputs/, copy $OUT/$STUDY/$STUDY.journal into the
#     repository as verdict_state/$STUDY.journal (untracked, not ignored), where the next job finds it;
#   - at the start of a job this script copies verdict_state/$STUDY.journal over
#     outputs/optuna/$STUDY.journal when the machine has none or a shorter one (a fresh machine; a warm
#     one keeps outputs/, checkpoints included, between jobs).
# The rung checkpoints (outputs/sweeps/$STUDY/stages/, ~90 MB per running seed) do not travel: on a fresh
# machine a cut run starts again from step 0 (same seed, so the same problem order).
set -u
OUT=${OUT:-/tmp/out}
SWEEP_S=${SWEEP_S:-500}
N_JOBS=${N_JOBS:-$((12 * $(nvidia-smi -L | wc -l)))}  # trial.trials_per_gpu (12) x the GPUs
STUDY=${STUDY:-verdict}  # the sweep preset, also its study's name
JOURNAL=outputs/optuna/$STUDY.journal
SAVED=verdict_state/$STUDY.journal
mkdir -p "$OUT/$STUDY" outputs/optuna
[ -n "${WHEELS_INSTALLED:-}" ] || source tools/offline_env.sh
size() { stat -c %s "$1" 2>/dev/null || echo 0; }
if [ "$(size "$SAVED")" -gt "$(size "$JOURNAL")" ]; then
    cp "$SAVED" "$JOURNAL"
    echo "== journal restored from $SAVED ($(size "$JOURNAL") bytes)"
fi
nvidia-smi --query-gpu=index,name,memory.used --format=csv > "$OUT/$STUDY/gpus.csv" 2>&1
nvidia-smi dmon -s u -d 10 > "$OUT/$STUDY/dmon.log" 2>&1 &
dmon=$!
echo "== sweeps=$STUDY, $N_JOBS workers, for at most ${SWEEP_S}s ($(date +%T))"
timeout -s INT -k 60 "$SWEEP_S" python3 -m rookworld.train -m sweeps=$STUDY tracking=none hydra.sweeper.n_jobs="$N_JOBS" "$@" \
    > "$OUT/$STUDY/sweep_$(date +%H%M%S).log" 2>&1
echo "== sweep exit $? ($(date +%T))"
kill "$dmon" 2>/dev/null
cp "$JOURNAL" "$OUT/$STUDY/$STUDY.journal"
for launch in outputs/sweeps/$STUDY/20*; do  # each launch's worker timelines (trials/h, idle slots)
    mkdir -p "$OUT/$STUDY/launches/$(basename "$launch")"
    cp "$launch"/.sweep/*.jsonl "$launch"/.sweep/launch.json "$OUT/$STUDY/launches/$(basename "$launch")/" 2>/dev/null
done
python3 -m rookworld.sweep summary --study $STUDY --no-mlflow --sweep $STUDY --fidelity-plot "$OUT/$STUDY/fidelity.png" \
    > "$OUT/$STUDY/summary.md" 2>&1  # with the stage report (and its fidelity plot once the race has begun)
grep -h "^verdict: " "$OUT"/$STUDY/sweep_*.log | tail -1
