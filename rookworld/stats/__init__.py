"""The sweeps' statistics, pure (numpy, scipy, the standard library): paired tests, racing, the verdict, sample
sizes, evaluation noise, game-level variance and the simulated sweeps. No Optuna, Hydra or MLflow here, and
nothing from rookworld/sweep/: the sweep imports these, never the other way round."""
