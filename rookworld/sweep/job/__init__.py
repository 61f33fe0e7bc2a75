"""The job side of a sweep: where a trial's run sits in its sweep, and the pruning hook that reports to its trial."""
