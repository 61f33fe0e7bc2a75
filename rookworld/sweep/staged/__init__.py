"""Staged sweeps and their statistics: stages and rungs, racing, paired tests, sample sizes, evaluation noise, the verdict and its report."""
