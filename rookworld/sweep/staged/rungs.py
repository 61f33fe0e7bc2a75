"""One trial of a staged sweep: a configuration's seeds run rung by rung, each rung a prefix of the full run.

Each segment is one `rookworld.train` run (a Hydra job of the worker) with `seed`, `stop_at`, `resume_from`,
`eval.split` and `checkpoint.*` set; a search trial reports its seeds' mean at each rung to successive halving
(stages.halving_report), the baseline, race and confirmation trials are never stopped. A segment's checkpoint
and score record go to `<stages.checkpoint_dir>/config_<C>/seed_<S>/`, so a killed trial's retry goes on from
the finished segments; a configuration's folders are removed once its trial has ended. A confirmation's
segments run inside the final pool's grant (rookworld/final_pool.py): the one code path that may read it.
"""

from __future__ import annotations

import json
import shutil
import statistics
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hydra.core.utils import JobReturn, JobStatus

from rookworld import final_pool
from rookworld.specs.sweep import Stages
from rookworld.sweep.staged.stages import CONFIRM, SEARCH, SUCCESS, Item


@dataclass
class ItemResult:
    """How the trial ended: `objective` (None when pruned), the run's `outcome`, or `failure` (a run raised)."""

    objective: float | None = None
    outcome: str = SUCCESS
    failure: str | None = None
    scores: list[list[float]] = field(default_factory=list)  # [rung, seed, score] per finished segment
    problems: dict[str, list[float]] = field(default_factory=dict)  # seed -> per-problem scores at the full horizon
    seconds: float = 0.0


PROBLEM_DECIMALS = 4  # per-problem scores as stored on the trial (a run's mean moves by < 1e-5)
RunJob = Callable[[list[str], str], JobReturn]  # (overrides, subdir) -> the job's return
Report = Callable[[int, float], bool]  # (rung, mean score) -> True: stop here (pruned)
Record = Callable[[ItemResult], None]  # progress so far, stored on the trial


@dataclass
class ItemRun:
    item: Item
    settings: Stages
    root: Path  # the stages' checkpoint folder
    penalty: float  # the score of a seed whose run diverged (objective.failure_penalty)
    run_job: RunJob
    report: Report
    record: Record
    job_error: Callable[[JobReturn], str]

    def rungs(self) -> tuple[int, ...]:
        """Every stage runs rung by rung (a killed race or confirmation run goes on from its last rung); only
        the search reports and may stop at one."""
        assert self.settings.rungs is not None
        return self.settings.rungs

    def seed_dir(self, seed: int) -> Path:
        return self.root / f"config_{self.item.config}" / f"seed_{seed}"

    def run(self) -> ItemResult:
        """Every segment the trial needs; its checkpoints are removed when it has ended (not when a run
        raised, nor when the sweep is stopped: its retry goes on from them)."""
        result = self.run_rungs()
        if result.failure is None:
            self.remove_checkpoints()
        return result

    def run_rungs(self) -> ItemResult:
        result = ItemResult()
        rungs = self.rungs()
        for index, rung in enumerate(rungs):
            start = rungs[index - 1] if index else 0
            for seed in self.item.seeds:
                outcome = self.segment(seed, start, rung, result)
                if outcome != SUCCESS and result.outcome == SUCCESS:
                    result.outcome = outcome
                self.record(result)
                if result.failure is not None:
                    return result
            score = statistics.fmean(s for r, _, s in result.scores if r == rung)
            if result.outcome != SUCCESS:
                result.objective = self.penalty
                return result
            last = index == len(rungs) - 1
            if last:
                result.objective = score
            elif self.item.stage == SEARCH and self.report(rung, score) and not self.item.baseline:
                return result  # pruned at this rung: no objective
        return result

    def segment(self, seed: int, start: int, rung: int, result: ItemResult) -> str:
        """Run (or find the record of) one seed from `start` to `rung`; its outcome."""
        folder = self.seed_dir(seed)
        record = folder / f"segment_{rung:06d}.json"
        if record.is_file():
            done = json.loads(record.read_text())
        else:
            done = self.run_segment(seed, start, rung, folder)
            if "failure" in done:
                result.failure = done["failure"]
                return "failed"
            folder.mkdir(parents=True, exist_ok=True)  # a run that diverged before its first rung saved nothing here
            tmp = record.with_suffix(".tmp")
            tmp.write_text(json.dumps(done))
            tmp.replace(record)
            if start:
                shutil.rmtree(folder / f"step_{start:06d}", ignore_errors=True)  # the next rung's checkpoint is saved
        result.seconds += done["seconds"]
        result.scores.append([rung, seed, done["score"]])
        if rung == self.rungs()[-1] and done.get("problems"):
            result.problems[str(seed)] = done["problems"]
        if done["outcome"] != SUCCESS:  # a diverged seed scores the penalty at every later rung too
            assert self.settings.rungs is not None
            result.scores += [[r, seed, self.penalty] for r in self.settings.rungs if r > rung]
        return done["outcome"]

    def run_segment(self, seed: int, start: int, rung: int, folder: Path) -> dict[str, Any]:
        item = self.item
        resume = f"'{folder / f'step_{start:06d}'}'" if start else "null"
        overrides = [*item.overrides, f"seed={seed}", f"stop_at={rung}", "checkpoint.save_final=true",
                     "checkpoint.weights_only=false", f"checkpoint.dir='{folder}'", f"resume_from={resume}", f"eval.split={item.split}",
                     f"+trial.tags.stage={item.stage}", f"+trial.tags.config={item.config}", f"+trial.tags.seed={seed}",
                     f"+trial.tags.baseline='{str(item.baseline).lower()}'", f"+trial.tags.rung={rung}"]
        began = time.monotonic()
        with final_pool.confirmation() if item.stage == CONFIRM else nullcontext():
            job = self.run_job(overrides, f"seed_{seed}_step_{rung}")
        seconds = time.monotonic() - began
        if job.status != JobStatus.COMPLETED:
            return {"failure": self.job_error(job)}
        returned = job.return_value
        problems = [round(float(p), PROBLEM_DECIMALS) for p in returned.problem_scores or []]
        return {"score": float(returned.objective), "outcome": str(returned.outcome), "seconds": seconds,
                "problems": problems}

    def remove_checkpoints(self) -> None:
        for seed in self.item.seeds:
            shutil.rmtree(self.seed_dir(seed), ignore_errors=True)
        config = self.root / f"config_{self.item.config}"
        if config.is_dir() and not any(config.iterdir()):
            config.rmdir()
