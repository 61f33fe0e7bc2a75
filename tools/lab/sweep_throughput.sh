#!/usr/bin/env bash
# Trials per hour and idle GPU-slot time of the `throughput` sweep (sweeps/throughput.yaml) on one GPU,
# for several numbers of workers; each WORKERS:TRIALS pair runs its own study:
#   bash tools/lab/sweep_throughput.sh 1:6 8:48 12:72
#   OVERRIDES="steps=100 eval.num_policy=1500" bash tools/lab/sweep_throughput.sh 12:12   # more overrides for every study
# Logs go to $LOG_DIR (default .); the table comes from python -m rookworld.sweep timeline.
set -euo pipefail
for pair in "$@"; do
    workers=${pair%%:*}
    trials=${pair##*:}
    study=throughput_w$workers
    "${PYTHON:-python3}" -m rookworld.train -m sweeps=throughput hydra.sweeper.study_name=$study \
        hydra.sweeper.n_jobs=$workers trial.trials_per_gpu=$workers hydra.sweeper.n_trials=$trials ${OVERRIDES:-} \
        >"${LOG_DIR:-.}/$study.log" 2>&1 || { echo "$study failed:"; tail -20 "${LOG_DIR:-.}/$study.log"; }
    "${PYTHON:-python3}" -m rookworld.sweep timeline outputs/sweeps/$study/*
done
