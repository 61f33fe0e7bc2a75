"""Sweeps (Hydra multiruns): the MLflow parent run (mlflow_parent) and the study summary (summary)."""
