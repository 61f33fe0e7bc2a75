"""Running a sweep: the launch, its workers (one process per GPU slot), GPUs and MPS, the sweeper's knobs and search space."""
