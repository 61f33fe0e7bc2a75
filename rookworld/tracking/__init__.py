"""Experiment tracking: a `Tracker` with an MLflow backend and a no-op backend.

    tracker.py   Tracker / NullTracker / MlflowTracker, RunLink, make_tracker, the run tags
    writer.py    the metric-writer subprocess (MetricWriter, FlushStats; run as __main__.py)
    store.py     the MLflow store: reachability, client, experiments
    params.py    params flattened from a config, key and value formatting, git state
    settings.py  TrackingSettings from conf/tracking, URI resolution, TrackingError

Tracking knows nothing of sweeps: a sweep trial passes its placement (rookworld.sweep.job.context).
"""
from rookworld.tracking.params import (MAX_PARAMS_TAGS_PER_BATCH, MAX_TAG_LENGTH, flatten_config, git_state,
                                       one_line, overrides_tag, sanitize_key, table_columns, truncate_params)
from rookworld.tracking.settings import (BACKENDS, CONF_DIR, SQLITE, TRACKING_CONFIG, TrackingError, TrackingSettings,
                                         absolute_path, hydra_base_dir, resolve_uri)
from rookworld.tracking.store import (check_reachable, default_artifact_location, find_experiment,
                                      get_or_create_experiment, open_store)
from rookworld.tracking.tracker import (CHANGE_METRIC, CHANGE_SE_METRIC, CHANGE_TAG, OUTCOME_TAG, OVERRIDES_TAG,
                                        PARENT_TAG, ROLE_TAG, RUN_STATUS, STEPS_METRIC, STOP_REASON_TAG, STUDY_TAG,
                                        TRIAL_TAG, MlflowTracker, NullTracker, RunLink, Tracker, make_tracker)
from rookworld.tracking.writer import FlushStats, MetricWriter
from rookworld.outcomes import OUTCOMES

__all__ = [
    "SQLITE",
    "MAX_PARAMS_TAGS_PER_BATCH", "MAX_TAG_LENGTH", "flatten_config", "git_state", "one_line", "overrides_tag",
    "sanitize_key", "table_columns", "truncate_params",
    "BACKENDS", "CONF_DIR", "TRACKING_CONFIG", "TrackingError", "TrackingSettings", "absolute_path",
    "hydra_base_dir", "resolve_uri",
    "check_reachable", "default_artifact_location", "find_experiment", "get_or_create_experiment", "open_store",
    "CHANGE_METRIC", "CHANGE_SE_METRIC", "CHANGE_TAG", "OUTCOME_TAG", "OVERRIDES_TAG", "PARENT_TAG", "ROLE_TAG",
    "RUN_STATUS", "STEPS_METRIC", "STOP_REASON_TAG", "STUDY_TAG", "TRIAL_TAG", "MlflowTracker", "NullTracker",
    "RunLink", "Tracker", "make_tracker",
    "FlushStats", "MetricWriter", "OUTCOMES",
]
