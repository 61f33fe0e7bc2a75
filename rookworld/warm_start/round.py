"""`python -m rookworld.warm_start.round round.seed=N [round.carry=[DIR ...]]`: one warm-start round.

In one wall-clock budget (round.budget_min, default 25 minutes: one time-limited GPU job), on one GPU and the
machine's cores:

1. measure how fast one document worker is and how fast the training step consumes documents, and split the
   cores between document workers and engine processes (rookworld/warm_start/balance.py);
2. start self-play with the round's seed on the engine cores (`python -m rookworld.commands.annotate --selfplay
   --shards`), new games whose positions are in none of round.exclude (the RL split, the held-out parts), round.carry
   nor the final pool (always excluded, rookworld/final_pool.py), every game in the train split;
3. train the model (conf/sft.yaml's loop, `model` group: the shipped warm start by default) from the first
   minute on the carried positions and every new shard as it is written (rookworld/data/shard_pool.py),
   until round.reserve_min of the budget is left;
4. evaluate the result and round.baseline (the shipped model) on the same validation problems (the whole P:
   pool and A: part, greedy) and decide by a paired test on the chess score (rookworld/warm_start/decision.py);
   evaluate both on the test part for the lineage (the test part never decides);
5. write round.out: model/ (hub format, weight files of at most round.max_shard_mib each; its README.md and
   lineage.json extended by this round's row when it ships), round.json (the decision, the metrics, the
   balance, the counts), and the self-play shards.

Shipping is then replacing the shipped folder by round.out/model (docs/warm-start.md).
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import hydra
import torch
from omegaconf import DictConfig, OmegaConf

from rookworld import final_pool
from rookworld.sft import loop as supervised_training
from rookworld.run.build import heldout_problems, require_move_values
from rookworld.app.composition import run_hydra_main
from rookworld.app.config import PROJECT_TARGETS, load_round
from rookworld.data.records import open_text
from rookworld.data.shard_pool import ShardPool, position_files
from rookworld.app.errors import as_command
from rookworld.judge.evaluate import EvalResult, evaluate
from rookworld.model.fast_sampling import make_decoder
from rookworld.model.hub import load_pretrained, save_pretrained
from rookworld.model.precision import autocast_for
from rookworld.specs.round import AUTO, RoundSpec
from rookworld.specs.rules import ConfigError, require, resolve_device
from rookworld.warm_start import balance, lineage
from rookworld.warm_start.decision import decide

SELFPLAY_TARGET = 10**9  # positions asked of self-play: the round's clock stops it, never the count
MIB = 2**20


@dataclass
class Clock:
    budget_s: float
    start: float

    def elapsed(self) -> float:
        return time.monotonic() - self.start

    def left(self) -> float:
        return self.budget_s - self.elapsed()


def run(cfg: DictConfig) -> dict:
    clock = Clock(60 * float(cfg.round.budget_min), time.monotonic())
    spec = load_round(cfg)
    r = spec.round
    rows = lineage.read_lineage(r.baseline)
    require(r.seed not in lineage.used_seeds(rows), "round.seed", r.seed,
            f"an earlier round of {r.baseline} used it: its games are not new")
    require(Path(r.baseline).is_dir(), "round.baseline", r.baseline, "is not a model folder")
    print(f"round: seed {r.seed}, {r.budget_min:g} min on device={spec.sft.device}, into {r.out}/", flush=True)
    out = Path(r.out)
    out.mkdir(parents=True, exist_ok=True)
    train_dir = Path(r.selfplay_dir) / "train"
    train_dir.mkdir(parents=True, exist_ok=True)
    pool = ShardPool([*r.carry, train_dir])
    carried_at_start = count_positions(position_files(r.carry))
    sft_cfg = supervised_config(cfg)
    device = resolve_device(spec.sft.device)
    if device.type == "cpu":
        torch.set_num_threads(r.cpu_threads)

    split = choose_balance(spec, sft_cfg, pool, device)
    print(split.line() + f"; start-up {clock.elapsed():.0f} s", flush=True)
    OmegaConf.update(sft_cfg, "sft.num_workers", split.document_workers)
    selfplay = start_selfplay(r, split.engines, clock)
    utilization = GpuUtilization(device)
    try:
        training_min = (clock.left() - 60 * r.reserve_min) / 60
        require(training_min > 0, "round.reserve_min", r.reserve_min,
                f"leaves no training time: {clock.left() / 60:.1f} min of the budget are left after start-up")
        OmegaConf.update(sft_cfg, "sft.time_limit_min", training_min)
        print(f"round: training {training_min:.1f} min on {carried_at_start:,} carried positions so far and the new shards",
              flush=True)
        utilization.start()
        trained = supervised_training.run(sft_cfg, policy_train=pool)
        utilization.stop()
    finally:
        stop_selfplay(selfplay)
    new_positions = count_positions(position_files([train_dir]))
    carried = count_positions(position_files(r.carry))  # files carried in while the round ran count too
    candidate_dir = Path(spec.sft.sft.save_dir)

    validation = evaluate_pair(spec, candidate_dir, "validation", device)
    decision = decide(validation["candidate"], validation["baseline"], validation["tasks"], r.alpha)
    print(decision.line(), flush=True)
    test = evaluate_pair(spec, candidate_dir, "test", device)

    row = {"round": lineage.next_round(rows), "seed": r.seed, "new_positions": new_positions,
           "carried_positions": carried, "minutes": trained.get("sft/minutes"),
           "documents": trained.get("sft/documents"), "steps": trained.get("sft/steps"),
           "validation_score": decision.candidate, "validation_baseline": decision.baseline,
           "p_value": decision.p_value, "test": lineage.lineage_metrics(test["candidate"], test["tasks"]),
           "command": round_command()}
    if not rows:
        rows = [{"round": 0, "validation_score": decision.baseline,
                 "test": lineage.lineage_metrics(test["baseline"], test["tasks"])}]
    model_dir = out / "model"
    write_model(candidate_dir, model_dir, r.max_shard_mib)
    if decision.ship:
        readme = (Path(r.baseline) / "README.md").read_text() if (Path(r.baseline) / "README.md").is_file() else ""
        lineage.write_model_card(model_dir, readme, rows + [row], row["command"])
    record = {"ship": decision.ship, "decision": decision.as_dict(), "row": row, "balance": split.as_dict(),
              "gpu_utilization": utilization.summary(), "supervised": trained,
              "validation": {k: validation[k].metrics for k in ("candidate", "baseline")},
              "test": {k: test[k].metrics for k in ("candidate", "baseline")},
              "minutes": clock.elapsed() / 60, "budget_min": r.budget_min}
    (out / "round.json").write_text(json.dumps(record, indent=1, sort_keys=True, default=float) + "\n")
    largest = max(p.stat().st_size for p in model_dir.iterdir())
    print(f"round: {'shipped' if decision.ship else 'not shipped'}; {new_positions:,} new positions, "
          f"{clock.elapsed() / 60:.1f} of {r.budget_min} min; {out}/ (largest file {largest / MIB:.1f} MiB)",
          flush=True)
    return record


def supervised_config(cfg: DictConfig) -> DictConfig:
    """The round's config as the supervised loop takes it: resolved, without the `round` knobs."""
    plain = OmegaConf.to_container(cfg, resolve=True)
    plain.pop("round")
    return OmegaConf.create(plain)


def choose_balance(spec: RoundSpec, sft_cfg: DictConfig, pool: ShardPool, device: torch.device) -> balance.Balance:
    """The document workers and engines of round.cores: as configured, or from a measurement."""
    r = spec.round
    cores = os.cpu_count() if r.cores == AUTO else r.cores
    if r.document_workers != AUTO and r.engines != AUTO:
        return balance.Balance(cores, r.document_workers, r.engines, 0.0, 0.0, "config")
    print(f"round: measuring the document workers and the training step to split {cores} cores", flush=True)
    model, tokenizer = supervised_training.load_trainable(spec.sft, device)
    model.packed_attention = "sdpa"  # uncompiled flex attention is far slower than the loop's compiled one
    # stream 10**6: documents no training worker draws
    dataset, collate = supervised_training.training_stream(spec.sft, tokenizer, pool, first_stream=10**6)
    items = iter(dataset)
    count = supervised_training.documents_in_item
    worker_rate, drawn = balance.documents_per_second(items, count, r.measure_s)
    while len(drawn) < spec.sft.sft.batch_size:
        drawn.append(next(items))
    batch = collate(drawn[: spec.sft.sft.batch_size])
    step_rate = balance.step_documents_per_second(
        model, supervised_training.optimizer_for(spec.sft), supervised_training.step_for(spec.sft, device), batch,
        sum(count(item) for item in drawn[: spec.sft.sft.batch_size]), device)
    workers, engines = balance.split_cores(cores, worker_rate, step_rate, r.min_engines)
    if r.document_workers != AUTO:
        workers, engines = r.document_workers, max(cores - 1 - r.document_workers, 0)
    elif r.engines != AUTO:
        workers, engines = max(cores - 1 - r.engines, 0), r.engines
    del model
    return balance.Balance(cores, workers, engines, worker_rate, step_rate, "measurement")


def start_selfplay(r, engines: int, clock: Clock) -> subprocess.Popen | None:
    """Self-play on `engines` processes into round.selfplay_dir, its own process group (stopped as one)."""
    if engines == 0:
        print("round: no engine process: no new positions this round", flush=True)
        return None
    command = selfplay_command(r, engines, max(clock.left() - 60 * r.reserve_min, 1))
    log = open(Path(r.selfplay_dir) / "selfplay.log", "w")
    return subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def selfplay_command(r, engines: int, seconds: float) -> list[str]:
    """The self-play command of a round: new games for `seconds`, none repeating a position of round.exclude,
    round.carry or the final pool (excluded whatever round.exclude says)."""
    exclude = [str(p) for p in final_pool.with_final_pool(position_files([*r.exclude, *r.carry]))]
    return [sys.executable, "-m", "rookworld.commands.annotate", "--selfplay", str(SELFPLAY_TARGET),
            "--shards", r.selfplay_dir, "--workers", str(engines), "--nodes", str(r.nodes),
            "--seed", str(r.seed), "--games-per-shard", str(r.games_per_shard), "--engine-path", r.engine_path,
            "--validation-fraction", "0", "--test-fraction", "0", "--rl-fraction", "0",
            "--time-limit-s", f"{seconds:.0f}", "--exclude", *exclude]


def stop_selfplay(process: subprocess.Popen | None) -> None:
    """SIGTERM to the self-play process group (its complete shards stay; a partial one is dropped)."""
    if process is None or process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def count_positions(files: list[Path]) -> int:
    total = 0
    for path in files:
        with open_text(path) as handle:
            total += sum(1 for line in handle if line.strip())
    return total


def evaluate_pair(spec: RoundSpec, candidate_dir: Path, split: str, device: torch.device) -> dict:
    """The candidate and the baseline on the same problems of `split` (greedy, the chess score)."""
    r = spec.round
    policy, arbiter = heldout_problems(split, spec.sft.data)
    problems = policy[: r.heldout_policy] + arbiter[: r.heldout_arbiter]
    require_move_values(problems, f"the {split} part", "eval.score=chess")
    results = {"tasks": [p.task for p in problems]}
    for name, folder in (("candidate", candidate_dir), ("baseline", Path(r.baseline))):
        start = time.perf_counter()
        results[name] = evaluate_model(spec, folder, problems, device)
        print(f"round: {name} on {len(problems):,} {split} problems: chess score {results[name].score:.4f} "
              f"({time.perf_counter() - start:.0f} s)", flush=True)
    return results


def evaluate_model(spec: RoundSpec, folder: Path, problems: list, device: torch.device) -> EvalResult:
    s = spec.sft
    model, tokenizer = load_pretrained(str(folder), device=device)
    decoder = make_decoder(model, check_every=s.sampling.finish_check_every)
    with torch.no_grad(), autocast_for(device, s.model.dtype):
        return evaluate(decoder, tokenizer, problems, s.reward.build(), dict(s.sampling.max_new_tokens),
                        s.eval.batch_size, 0, score="chess")


def write_model(candidate_dir: Path, model_dir: Path, max_shard_mib: float) -> None:
    """The candidate in the hub format with weight files of at most max_shard_mib each."""
    if candidate_dir.resolve() == model_dir.resolve():
        raise ConfigError(f"sft.save_dir={candidate_dir}: must differ from the round's model folder {model_dir}")
    model, tokenizer = load_pretrained(str(candidate_dir), dtype=torch.bfloat16)
    if model_dir.exists():
        shutil.rmtree(model_dir)
    save_pretrained(model, tokenizer, model_dir, max_shard_mib=max_shard_mib)
    if (candidate_dir / "sft_metrics.json").is_file():
        shutil.copy(candidate_dir / "sft_metrics.json", model_dir / "sft_metrics.json")
    shutil.rmtree(candidate_dir)


def round_command() -> str:
    overrides = [a for a in sys.argv[1:] if "=" in a]
    return lineage.portable_command("python -m rookworld.warm_start.round " + " ".join(overrides))


class GpuUtilization:
    """The GPU's utilisation (nvidia-smi's %), sampled each second in a thread while training runs."""

    def __init__(self, device: torch.device):
        self.device, self.samples, self._stop = device, [], threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def start(self) -> None:
        if self.device.type == "cuda":
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _sample(self) -> None:
        while not self._stop.wait(1.0):
            try:
                self.samples.append(torch.cuda.utilization(self.device))
            except Exception as error:  # no NVML on this machine: say so once, measure nothing
                print(f"round: no GPU utilisation samples ({type(error).__name__}: {error})", flush=True)
                return

    def summary(self) -> dict | None:
        after_start = self.samples[60:]  # the first minute is start-up: workers, compilation
        if not after_start:
            return None
        return {"mean_after_first_minute": sum(after_start) / len(after_start), "samples": len(self.samples),
                "busy_80_fraction": sum(s >= 80 for s in after_start) / len(after_start)}


@hydra.main(config_path="../../conf", config_name="round", execution_whitelist=PROJECT_TARGETS)
def main(cfg: DictConfig) -> float:
    with as_command():
        return run(cfg)["decision"]["p_value"]


if __name__ == "__main__":
    run_hydra_main(main, "round")
