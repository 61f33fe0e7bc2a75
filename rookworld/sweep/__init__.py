"""Sweeps (Hydra multiruns) over rookworld runs. The sweeper plugin and the commands sit here; their parts
in sub-packages: running/ (the launch and its workers), storage/ (the shared Optuna study), job/ (what a
sweep adds to a run), staged/ (staged sweeps and their statistics), report/ (summaries and the MLflow
parent run). docs/architecture.md lists every module."""
