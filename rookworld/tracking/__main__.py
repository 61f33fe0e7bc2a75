"""`python -m rookworld.tracking --metric-writer`: the metric-writer subprocess (started by MetricWriter)."""
import logging
import os
import sys

from rookworld.tracking.writer import metric_writer_main

if __name__ == "__main__":
    if sys.argv[1:] != ["--metric-writer"]:
        sys.exit("usage: python -m rookworld.tracking --metric-writer (started by MetricWriter)")
    logging.basicConfig(level=logging.WARNING)
    exit_code = metric_writer_main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(exit_code)  # everything is committed: skip interpreter teardown (~0.5 s with mlflow)
