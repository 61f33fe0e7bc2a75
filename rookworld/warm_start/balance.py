"""How a round splits the machine's cores between document workers and engine processes, from a measurement.

One core runs the training loop. Document workers must keep the step fed (documents are made on the CPU, and a
starved step leaves the GPU idle); every other core makes new self-play positions. At the start the round
measures, in its own process, how many documents one worker makes a second and how many the training step
consumes a second (a few steps of the real shape on a throwaway copy of the model), then gives the documents

    workers = ceil(MARGIN x step documents/s / one worker's documents/s)      (MARGIN = 2)

cores (at most the cores less one for the loop and round.min_engines for engines), and the engines the rest.
"""
from __future__ import annotations

import copy
import math
import time
from dataclasses import asdict, dataclass

import torch

MARGIN = 2.0  # workers beyond the measured need: beside busy engine cores a worker makes about half of its rate
#               alone (round 1: 4 workers measured at 4,790 documents/s each fed 10,465/s, the loop waiting 18%)
TIMED_STEPS = 5  # training steps timed, after WARMUP_STEPS untimed ones
WARMUP_STEPS = 2


@dataclass(frozen=True)
class Balance:
    cores: int
    document_workers: int
    engines: int
    worker_documents_per_s: float  # one worker, measured
    step_documents_per_s: float  # the training step's consumption, measured (0: not measured)
    chosen_by: str  # "measurement" or "config"

    def line(self) -> str:
        return (f"round: {self.cores} cores: {self.document_workers} document workers, {self.engines} engine processes "
                f"({self.chosen_by}: one worker makes {self.worker_documents_per_s:,.0f} documents/s, "
                f"the step takes {self.step_documents_per_s:,.0f}/s)")

    def as_dict(self) -> dict:
        return asdict(self)


def documents_per_second(items, count_documents, seconds: float) -> tuple[float, list]:
    """Items drawn from the iterator `items` for `seconds` in this process: documents per second (each item holds
    count_documents(item) documents) and the items drawn."""
    drawn, documents, start = [], 0, time.perf_counter()
    while time.perf_counter() - start < seconds or not drawn:
        item = next(items)
        drawn.append(item)
        documents += count_documents(item)
    return documents / (time.perf_counter() - start), drawn


def step_documents_per_second(model: torch.nn.Module, make_optimizer, step, batch, documents: int,
                              device: torch.device) -> float:
    """Documents per second that `step(model, optimizer, batch)` consumes on a throwaway copy of `model`."""
    trial = copy.deepcopy(model).to(device).train()
    optimizer = make_optimizer(trial.parameters())
    batch = [t.to(device) for t in batch]
    for _ in range(WARMUP_STEPS):
        step(trial, optimizer, batch)
    _synchronize(device)
    start = time.perf_counter()
    for _ in range(TIMED_STEPS):
        step(trial, optimizer, batch)
    _synchronize(device)
    seconds = (time.perf_counter() - start) / TIMED_STEPS
    del trial, optimizer
    return documents / seconds


def split_cores(cores: int, worker_rate: float, step_rate: float, min_engines: int) -> tuple[int, int]:
    """(document workers, engines) for `cores`: enough workers for the step with MARGIN, the rest engines."""
    available = max(cores - 1, 0)
    most_workers = max(available - min_engines, 0)
    needed = math.ceil(MARGIN * step_rate / worker_rate) if worker_rate > 0 else most_workers
    workers = min(max(needed, 1 if most_workers else 0), most_workers)
    return workers, available - workers



def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
