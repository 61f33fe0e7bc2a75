"""The GRPO loop: sample, score, compute group advantages, update; evaluate; guard; checkpoint.

One step (CleanRL-style, all the math visible in `grpo/`):
  1. draw `prompts_per_step` problems by the task mix; sample G = grpo.group_size completions each;
  2. score every completion against its problem's ground truth (reward_fn; rows that stop early are
     scored while the GPU generates the rest: scoring.py);
  3. group-relative advantages (grpo/advantages.py);
  4. the batch with its reference and old log-probs, then the update: the Learner
     (grpo/learner.py), which the trainer owns.
Guards end the run with a recorded outcome instead of a crash or a silent continue.
"""
from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import torch

from rookworld.grpo.guards import Detectors
from rookworld.judge.eval_cache import EvalCache, cache_key
from rookworld.judge.evaluate import EvalResult, evaluate
from rookworld.run.finite_weights import LastFiniteWeights
from rookworld.grpo.advantages import (Advantages, EMARewardNormalizer, criterion_advantages, group_advantages,
                                      varying_groups, zero_std_share)
from rookworld.grpo.kl import KLController, kl_in_reward
from rookworld.grpo.learner import Batch, Learner
from rookworld.model.fast_sampling import make_decoder
from rookworld.model.hub import load_model, save_pretrained
from rookworld.model.precision import autocast_for
from rookworld.model.sampling import Generation
from rookworld.outcomes import (NAN_FAILURE, OBJECTIVE_METRIC, OBJECTIVE_SE_METRIC, OBJECTIVE_START_METRIC, PRUNED, SUCCESS,
                                RunResult, standard_error_metric)
from rookworld.run.resume import TRAINER_STATE_FILE, ResumePoint, save_config
from rookworld.judge.rollout import Rollout, generate_for_problems, stopped
from rookworld.judge.scoring import ScoredRows, StepScores
from rookworld.specs.rules import ConfigError
from rookworld.tasks import Problem
from rookworld.tracking.tracker import STEPS_METRIC

if TYPE_CHECKING:  # the groups' values the loop reads
    from rookworld.specs.eval import Eval
    from rookworld.specs.grpo import GRPO
    from rookworld.specs.run import Checkpoint, Objective
    from rookworld.specs.sampling import Sampling


class StepHook(Protocol):
    """Looks at each step's metrics (eval/* included at evaluation steps, with the evaluation itself);
    True stops the run as pruned. Told the run's outcome at the end. What a driver adds to a run
    (rookworld/app/hooks.py builds them from the config)."""

    def should_prune(self, step: int, metrics: dict[str, float], evaluation: EvalResult | None) -> bool: ...

    def record_outcome(self, outcome: str, reason: str) -> None: ...


@dataclass(frozen=True)
class LoopSettings:
    """What the loop reads of a run, fixed for the run (the assembly, rookworld/run/build.py, fills it)."""
    seed: int
    steps: int                     # the schedules' length
    end_step: int                  # where this run stops (stop_at, else steps)
    time_limit_min: float | None
    prompts_per_step: int
    log_every: int
    grpo: GRPO                     # group size, dynamic sampling, advantages, reward normalisation
    sampling: Sampling
    eval: Eval
    objective: Objective
    checkpoint: Checkpoint
    log_checkpoint: bool           # tracking.log_checkpoint
    keep_finite_weights: bool      # guards.keep_finite_weights
    kl_reward_estimator: str | None  # kl.placement=reward: the penalty's estimator
    dtype: str                     # model.dtype (autocast)
    # The resolved config as plain data: what a checkpoint's config.yaml stores and what keys the step-0
    # evaluation cache.
    resolved: dict[str, Any] = field(repr=False, compare=False)


@dataclass
class Trainer:
    settings: LoopSettings
    policy: torch.nn.Module
    tokenizer: object
    reference: torch.nn.Module | None
    reward_fn: object
    sampler: object                   # ProblemSampler: sample(n) -> list[Problem], state_dict()
    heldout: list[Problem]
    tracker: object
    kl: KLController                  # the KL coefficient (the trainer moves it after each step)
    guards: Detectors                 # the divergence detectors, checked after each step
    learner: Learner                  # the update engine
    hooks: list[StepHook] = field(default_factory=list)
    resume: ResumePoint | None = None  # a checked checkpoint to continue from (resume_from)
    decoder: object = None            # None: make_decoder(policy) (StaticDecoder on CUDA, else PlainDecoder)
    sync_phases: bool = False         # True: exact per-phase times (a device sync per phase; the benchmark)
    step: int = 0

    def __post_init__(self):
        cfg = self.settings
        self.device = next(self.policy.parameters()).device
        self.generator = torch.Generator(device=self.device).manual_seed(cfg.seed)
        rn = cfg.grpo.reward_norm
        self.reward_norm = EMARewardNormalizer(rn.momentum) if rn.enabled else None
        self.max_new_tokens = dict(cfg.sampling.max_new_tokens)
        self.last_eval: EvalResult | None = None
        self.first_eval: EvalResult | None = None  # the step-0 evaluation (None after a resume)
        self.last_eval_step = -1
        # (sampler state before, rows): the next step's rows, sampled during this step's update
        self._prefetched: tuple[dict, list[Problem]] | None = None
        # The fast sampler on CUDA owns its buffers and CUDA graphs across steps.
        self.decoder = self.decoder or make_decoder(self.policy, check_every=cfg.sampling.finish_check_every)
        self.resume_changes: dict | None = None  # what a resume changed against its checkpoint (resume())
        if self.resume is not None:
            self.resume_from(self.resume)
        self.finite_weights = LastFiniteWeights(self.policy.parameters(), cfg.keep_finite_weights)

    # ---------------------------------------------------------------- the loop
    def fit(self) -> RunResult:
        cfg = self.settings
        if self.resume_changes is not None:
            self.tracker.log_dict(self.resume_changes, "resume_changes.json")
        if self.step == 0:
            self.evaluate(0)
        outcome, reason = SUCCESS, f"finished {cfg.end_step} steps" + (
            f" of {cfg.steps}" if cfg.end_step < cfg.steps else "")
        start = time.perf_counter()
        while self.step < cfg.end_step:
            if cfg.time_limit_min and time.perf_counter() - start > 60 * cfg.time_limit_min:
                reason = f"time limit of {cfg.time_limit_min} min reached after {self.step} steps"
                break
            metrics, nonfinite = self.train_step(self.step)
            self.step += 1
            self.tracker.log_metrics(metrics, step=self.step)
            self._print_progress(metrics)
            stop = self.guards.check(metrics, nonfinite)
            evaluation = self.evaluate(self.step) if stop is None and self._eval_due() else None
            if evaluation is not None:
                metrics = {**metrics, **evaluation.metrics}
            if stop is None and any(h.should_prune(self.step, metrics, evaluation) for h in self.hooks):
                stop = PRUNED, f"pruned at step {self.step}"
            if stop is not None:
                outcome, reason = stop
                break
            if cfg.checkpoint.every and self.step % cfg.checkpoint.every == 0:
                self.save_checkpoint()
        return self._finish(outcome, reason)

    def _finish(self, outcome: str, reason: str) -> RunResult:
        if outcome == NAN_FAILURE and self.finite_weights.restore():
            reason = f"{reason}; the policy keeps its last finite weights"
        final_eval, problem_scores, objective_se = None, None, None
        objective = float(self.settings.objective.failure_penalty)
        if outcome == SUCCESS:
            reuse_eval = self.last_eval is not None and self.last_eval_step == self.step
            final = self.last_eval if reuse_eval else self.evaluate(self.step)
            final_eval, problem_scores = final.metrics, final.problem_scores
            objective, objective_se = self._objective_of(final), final.metrics.get(
                standard_error_metric(self.settings.objective.metric))
            self.tracker.log_dict(final_eval, "eval_final.json")
            if self.settings.checkpoint.save_final or self.settings.log_checkpoint:
                directory = self.save_checkpoint(weights_only=self.settings.checkpoint.weights_only)
                if self.settings.log_checkpoint:
                    self.tracker.log_artifacts(str(directory), "checkpoint")
        elif outcome == PRUNED and self.last_eval is not None:
            objective = self._objective_of(self.last_eval)
        self.tracker.log_metrics({OBJECTIVE_METRIC: objective, STEPS_METRIC: float(self.step),
                                  **({} if objective_se is None else {OBJECTIVE_SE_METRIC: objective_se})}, step=self.step)
        self.tracker.set_outcome(outcome, reason)
        for hook in self.hooks:
            hook.record_outcome(outcome, reason)
        print(f"outcome: {outcome} ({reason}); objective {objective:.4f}")
        if final_eval:
            print("final evaluation: " + ", ".join(f"{k}={v:.4f}" for k, v in final_eval.items()))
        return RunResult(outcome, reason, self.step, objective, objective_se, final_eval, problem_scores)

    def _objective_of(self, evaluation: EvalResult) -> float:
        """objective.metric of `evaluation`; a name the evaluation does not log fails in one line."""
        metric = self.settings.objective.metric
        if metric not in evaluation.metrics:
            raise ConfigError(f"objective.metric={metric!r}: the evaluation logs no such metric (it logs "
                              f"{', '.join(sorted(k for k in evaluation.metrics if not k.endswith('_se'))[:6])}, ...)")
        return float(evaluation.metrics[metric])

    # ---------------------------------------------------------------- one GRPO step
    def train_step(self, step: int) -> tuple[dict[str, float], bool]:
        timer = PhaseTimer(self.device, sync=self.sync_phases)
        g = self.settings.grpo
        if g.dynamic_sampling.enabled:
            rollout, trained, sampled, generations, sampling_metrics = self._sample_varying_groups(timer)
            if rollout is None:  # no group's rewards varied in any round: nothing to learn from
                sampling_metrics.update(self._record_pass_rates(sampled))
                return self._skipped_step(step, sampled, generations, sampling_metrics, timer), False
            with timer("logprobs", wait=False), torch.no_grad():
                batch = self.learner.make_batch(rollout.generation)
        else:
            rows = self._take_rows()
            scores = StepScores(self.tokenizer, self.reward_fn, rows)
            rollout = self._generate_scoring(rows, scores, timer)
            generations = [rollout.generation]
            # The log-prob passes are queued first and the remaining rewards computed on the host while
            # the GPU runs them: "logprobs" times the queueing, "scoring" ends when both are done.
            with timer("logprobs", wait=False), torch.no_grad():
                batch = self.learner.make_batch(rollout.generation)
            with timer("scoring"):
                trained = sampled = scores.scored_rows()
            sampling_metrics = {}
        sampling_metrics.update(self._record_pass_rates(sampled))
        beta = self.kl.beta(step)  # the coefficient this step uses, before the controller moves it
        with timer("scoring"):
            in_reward = self._kl_in_reward(batch)
            adv = self._advantages(trained, None if in_reward is None else beta * in_reward[0].float().cpu())
            batch.advantages = adv.values.to(self.device)
        with timer("update"):
            sampling_finite = torch.isfinite(rollout.generation.logprobs).all()
            self.finite_weights.save_if(sampling_finite)
            queued = self.learner.update(step, batch, beta)
            queued["nonfinite/sampling"] = (~sampling_finite).float()
            queued["nonfinite/weights"] = (~self.finite_weights.check()).float()
            self._prefetch_rows()  # host work while the GPU runs the update
            update = read_metrics(queued)
        kl = update.pop("kl", None)
        if in_reward is not None:  # the controller reads the penalty's own estimator (verl)
            update["kl/reward_penalty"] = in_reward[1].item()
            self.kl.update(update["kl/reward_penalty"])
        elif kl is not None:
            self.kl.update(kl)
        self.learner.sync_reference(step)
        metrics = {**self._sampled_metrics(sampled, generations), **sampling_metrics, **update,
                   **({"kl": kl, "kl/coef": beta} if kl is not None else {})}
        metrics.update(timer.metrics(metrics["completions/num_tokens"]))
        nonfinite = update["nonfinite"] > 0 or update["nonfinite/weights"] > 0 or update["nonfinite/sampling"] > 0
        return metrics, nonfinite

    def _record_pass_rates(self, sampled: ScoredRows) -> dict[str, float]:
        """Each sampled group's pass rate becomes its problem's estimate (difficulty on), before the next
        step's rows are drawn (_prefetch_rows); the step's difficulty metrics."""
        difficulty = self.sampler.difficulty
        if difficulty is None:
            return {}
        solved = sampled.solved()
        difficulty.record(sampled.problems, solved, self.settings.grpo.group_size)
        groups = sampled.problems[::self.settings.grpo.group_size]
        return {"difficulty/pass_rate": sum(solved) / len(solved),
                "difficulty/in_band": sum(map(difficulty.in_band, groups)) / len(groups),
                "difficulty/estimated": float(len(difficulty.estimates))}

    def _sampled_metrics(self, sampled: ScoredRows, generations: list[Generation]) -> dict[str, float]:
        """The metrics of every row sampled this step (under dynamic sampling: every round's rows, the
        filtered-out groups included): rewards, the share of groups whose rewards do not vary (the raw
        rewards, before any KL penalty or normalisation) and the completions."""
        return {**sampled.metrics(),
                "frac_reward_zero_std": zero_std_share(sampled.rewards, self.settings.grpo.group_size),
                **completion_metrics(self.tokenizer, generations)}

    def _generate_scoring(self, rows: list[Problem], scores: StepScores, timer: PhaseTimer) -> Rollout:
        with timer("generation"):  # rows that stop early are scored while the GPU generates the rest
            rollout = self.generate(rows, on_finished=scores.add)
            scores.decode_rest(rollout)  # on the host before the GPU gets more work
        return rollout

    def _sample_varying_groups(self, timer: PhaseTimer) -> tuple[Rollout | None, ScoredRows | None, ScoredRows,
                                                                 list[Generation], dict[str, float]]:
        """DAPO dynamic sampling: rounds of prompts_per_step problems, keeping only the groups whose
        rewards vary, until prompts_per_step groups are kept or grpo.dynamic_sampling.max_rounds have run.
        The kept rows' rollout and scores (None when no group was kept), every sampled row's scores and
        every round's generation, and the sampling metrics."""
        G, wanted = self.settings.grpo.group_size, self.settings.prompts_per_step
        parts: list[tuple[Rollout, ScoredRows, list[int]]] = []
        kept, rounds = 0, 0
        rows = self._take_rows()
        while kept < wanted and rounds < self.settings.grpo.dynamic_sampling.max_rounds:
            scores = StepScores(self.tokenizer, self.reward_fn, rows)
            rollout = self._generate_scoring(rows, scores, timer)
            with timer("scoring"):
                scored = scores.scored_rows()
            groups = varying_groups(scored.rewards, G)[:wanted - kept]
            parts.append((rollout, scored, [group * G + member for group in groups for member in range(G)]))
            kept, rounds = kept + len(groups), rounds + 1
            if kept < wanted:
                rows = self.sample_rows()
        sampled = sum((scored for _, scored, _ in parts[1:]), parts[0][1])
        generations = [rollout.generation for rollout, _, _ in parts]
        metrics = {"dynamic_sampling/rounds": rounds, "dynamic_sampling/batch_fill": kept / wanted,
                   "dynamic_sampling/kept_share": kept * G / len(sampled.problems)}
        parts = [part for part in parts if part[2]]
        if not parts:
            return None, None, sampled, generations, metrics
        trained = sum((scored.select(picked) for _, scored, picked in parts[1:]), parts[0][1].select(parts[0][2]))
        generation = Generation.stack([(rollout.generation, picked) for rollout, _, picked in parts])
        return Rollout(problems=trained.problems, generation=generation), trained, sampled, generations, metrics

    def _skipped_step(self, step: int, sampled: ScoredRows, generations: list[Generation], sampling_metrics: dict,
                      timer: PhaseTimer) -> dict:
        """A dynamic-sampling step that kept no group: no update (loss and gradient 0), its sampling reported."""
        self._prefetch_rows()
        lr = self.learner.lr_at(step)
        metrics = {**self._sampled_metrics(sampled, generations), **sampling_metrics, "loss": 0.0, "grad_norm": 0.0,
                   "learning_rate": lr, "nonfinite": 0}
        return {**metrics, **timer.metrics(metrics["completions/num_tokens"])}

    def _kl_in_reward(self, batch: Batch) -> tuple[torch.Tensor, torch.Tensor] | None:
        """With kl.placement=reward: each completion's summed KL penalty term and the controller's
        reading (grpo/kl.py kl_in_reward); None otherwise."""
        estimator = self.settings.kl_reward_estimator
        if estimator is None:
            return None
        return kl_in_reward(batch.old_logp, batch.ref_logp, batch.mask, estimator)

    def _advantages(self, trained: ScoredRows, penalty: torch.Tensor | None) -> Advantages:
        """Group advantages of the trained rows' rewards: EMA-normalised if on, minus the KL `penalty`
        when it sits in the reward, summed (default) or per-criterion normalised (grpo.reward_aggregation)."""
        g = self.settings.grpo
        shaped = self.reward_norm(trained.rewards) if self.reward_norm else trained.rewards
        if penalty is not None:
            shaped = shaped - penalty
        if g.reward_aggregation == "normalize_then_sum":
            names, weights = self.reward_fn.criterion_weights()
            criteria = torch.tensor([[r.components.get(name, 0.0) for name in names] for r in trained.results])
            return criterion_advantages(criteria, torch.tensor(weights), g.group_size, g.advantage_std)
        return group_advantages(shaped, g.group_size, g.scale_rewards, g.advantage_std)

    def _take_rows(self) -> list[Problem]:
        rows = self._prefetched[1] if self._prefetched is not None else self.sample_rows()
        self._prefetched = None
        return rows

    def _prefetch_rows(self) -> None:
        """Sample the next step's rows now. A checkpoint keeps the sampler's state from before this
        call, so a resumed run samples the same rows again."""
        state = self.sampler.state_dict()
        self._prefetched = state, self.sample_rows()

    def sample_rows(self) -> list[Problem]:
        """The next step's problems, each repeated group_size times (one GRPO group each)."""
        problems = self.sampler.sample(self.settings.prompts_per_step)
        return [p for p in problems for _ in range(self.settings.grpo.group_size)]

    @torch.no_grad()
    def generate(self, rows: list[Problem], on_finished=None) -> Rollout:
        """Completions of `rows` with the configured sampling (the fast decoder on CUDA);
        `on_finished`: the decoder's hook for rows that stop before the others."""
        s = self.settings.sampling
        with self._autocast():
            return generate_for_problems(self.decoder, self.tokenizer, rows, self.max_new_tokens,
                                         temperature=s.temperature, top_k=s.top_k, top_p=s.top_p,
                                         generator=self.generator, on_finished=on_finished)

    def _autocast(self):
        return autocast_for(self.device, self.settings.dtype)

    # ---------------------------------------------------------------- evaluation and logging
    def _eval_due(self) -> bool:
        every = self.settings.eval.every
        return bool(every) and self.step % every == 0 and self.step < self.settings.end_step

    def evaluate(self, step: int) -> EvalResult:
        e = self.settings.eval
        cache = self._start_eval_cache() if step == 0 else None
        result = cache.load() if cache is not None else None
        cached = result is not None
        if result is None:
            with torch.no_grad(), self._autocast():
                result = evaluate(self.decoder, self.tokenizer, self.heldout, self.reward_fn, self.max_new_tokens,
                                  e.batch_size, e.num_samples_logged, score=e.score, generator=self.generator)
            if cache is not None:
                cache.store(result)
        objective = self._objective_of(result)  # a bad objective.metric fails at the first evaluation, not after training
        self.tracker.log_metrics({**result.metrics, **({OBJECTIVE_START_METRIC: objective} if step == 0 else {})}, step=step)
        self.tracker.log_samples(result.samples, step=step)
        if self.last_eval is None:  # the first evaluation of this process says what its metrics leave out
            for note in result.notes:
                print(f"eval note: {note}")
        self.last_eval, self.last_eval_step = result, step
        if step == 0:
            self.first_eval = result
        shown = ("eval/P/format", "eval/P/best_move", "eval/A/format", "eval/A/next_state")
        m = result.metrics
        print(f"eval @ step {step}: eval/score={m['eval/score']:.4f} ± {m['eval/score_se']:.4f} (standard error) "
              + " ".join(f"{k}={m[k]:.3f}" for k in shown if k in m)
              + (f" (cached: {cache.path})" if cached else ""))
        return result

    def _start_eval_cache(self) -> EvalCache | None:
        """The shared step-0 evaluation of these starting weights (rookworld/judge/eval_cache.py); None when off."""
        e, cfg = self.settings.eval, self.settings
        if not e.cache_dir:
            return None
        settings = {"max_new_tokens": self.max_new_tokens, "batch_size": e.batch_size,
                    "num_samples_logged": e.num_samples_logged, "score": e.score,
                    "reward": cfg.resolved["reward"], "model": cfg.resolved["model"], "device": self.device.type,
                    "decoder": type(self.decoder).__name__ if self.decoder is not None else "plain",
                    "torch": torch.__version__}
        return EvalCache(str(e.cache_dir), cache_key(self.policy, self.heldout, settings))

    def _print_progress(self, m: dict[str, float]) -> None:
        if self.step % self.settings.log_every and self.step != self.settings.end_step:
            return
        # No loss: at ratio 1 it is minus the mean of group-centred advantages, about 0 at every step
        # (README, The GRPO step); the gradient norm shows the update's size.
        kl = f"kl {m['kl']:.2e}" if "kl" in m else "kl off"  # early KL is ~1e-5: fixed decimals would read 0
        print(f"step {self.step}/{self.settings.steps} | reward {m['reward']:+.3f} ± {m['reward_std']:.3f} | "
              f"{kl} | grad norm {m['grad_norm']:.3f} | {m['step_time']:.2f} s", flush=True)

    # ---------------------------------------------------------------- checkpoints
    def save_checkpoint(self, weights_only: bool = False) -> Path:
        """checkpoint.dir/step_NNNNNN: the model folder, its config.yaml and (unless `weights_only`: the
        final save of checkpoint.weights_only, which no run resumes from) the trainer state."""
        c = self.settings.checkpoint
        directory = Path(c.dir) / f"step_{self.step:06d}"
        if weights_only:
            save_pretrained(self.policy, self.tokenizer, directory,
                            max_shard_mib=c.max_shard_mib,
                            dtype=None if c.weights_dtype is None else getattr(torch, c.weights_dtype))
        else:
            save_pretrained(self.policy, self.tokenizer, directory)
            torch.save(self.state_dict(), directory / TRAINER_STATE_FILE)
        save_config(self.settings.resolved, directory)
        return directory

    def resume_from(self, point: ResumePoint) -> None:
        """Continue the run save_checkpoint() wrote to `point.directory` (its config checked against this one by
        the assembly, rookworld/run/resume.py): the policy's weights, then the trainer state (the reference
        stays the starting policy unless the state carries a synced one)."""
        directory = point.directory
        # Logged when the run starts (fit): the trainer is built before its MLflow run opens.
        self.resume_changes = {"accepted": {k: list(v) for k, v in point.accepted.items()},
                               "allowed": {k: list(v) for k, v in point.allowed.items()}}
        saved, _ = load_model(path=directory, device=self.device, dtype="float32")
        self.policy.load_state_dict(saved.state_dict())
        self.load_state_dict(torch.load(Path(directory) / TRAINER_STATE_FILE, weights_only=False))

    def close(self) -> None:
        """Free the decoder's buffers and graphs and drop the models (the benchmark builds many trainers)."""
        self.decoder.close()
        self.learner.close()
        self.policy = self.reference = self.decoder = None

    def state_dict(self) -> dict:
        """The loop's state and the learner's (optimizer, shuffle, entropy bonus, synced reference) in one dict."""
        return {
            "step": self.step,
            "kl": self.kl.state_dict(),
            "guards": self.guards.state_dict(),
            "sampler": self.sampler.state_dict() if self._prefetched is None else self._prefetched[0],
            "generator": self.generator.get_state(),
            "reward_norm": self.reward_norm.state_dict() if self.reward_norm else None,
            "last_eval_step": self.last_eval_step,
            **self.learner.state_dict(),
        }

    def load_state_dict(self, state: dict) -> None:
        self.step = state["step"]
        self.kl.load_state_dict(state["kl"])
        self.guards.load_state_dict(state["guards"])
        self.sampler.load_state_dict(state["sampler"])
        self._prefetched = None
        self.generator.set_state(state["generator"])
        self.last_eval_step = state["last_eval_step"]
        if self.reward_norm:
            self.reward_norm.load_state_dict(state["reward_norm"])
        self.learner.load_state_dict(state)


def read_metrics(queued: dict[str, torch.Tensor | float]) -> dict[str, float]:
    """Device scalars to floats with one sync."""
    names = [name for name, value in queued.items() if isinstance(value, torch.Tensor)]
    values = torch.stack([queued[name].float() for name in names]).tolist() if names else []
    return {**queued, **dict(zip(names, values))}


def completion_metrics(tokenizer, generations: list[Generation]) -> dict[str, float]:
    """completions/* over the rows of `generations` (a step's generation rounds)."""
    lengths = torch.cat([gen.completion_mask.sum(1) for gen in generations]).float()
    ended = torch.cat([stopped(tokenizer, gen) for gen in generations]).float()
    return {
        "completions/mean_length": lengths.mean().item(),
        "completions/min_length": lengths.min().item(),
        "completions/max_length": lengths.max().item(),
        "completions/clipped_ratio": 1.0 - ended.mean().item(),
        "completions/num_tokens": lengths.sum().item(),
    }


class PhaseTimer:
    """Wall time per phase of a step, summed over every time the step enters the phase (scoring runs
    twice a step; under dynamic sampling generation and scoring run once per round). With `sync`, CUDA
    is synchronised at phase boundaries (exact split); without, a phase's queued GPU work is counted in
    the next phase that waits for it."""

    def __init__(self, device: torch.device, sync: bool = True):
        self.device, self.sync, self.seconds = device, sync, {}

    @contextlib.contextmanager
    def __call__(self, phase: str, wait: bool = True):
        """Time `phase`; wait=False: never synchronise at its end (work meant to overlap the next)."""
        start = time.perf_counter()
        yield
        if wait and self.sync and self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        self.seconds[phase] = self.seconds.get(phase, 0.0) + time.perf_counter() - start

    @property
    def total(self) -> float:
        return sum(self.seconds.values())

    def metrics(self, generated_tokens: float) -> dict[str, float]:
        """time/<phase> for each phase, step_time (their sum) and tokens_per_s (`generated_tokens` over
        the whole time spent generating)."""
        return {**{f"time/{k}": v for k, v in self.seconds.items()}, "step_time": self.total,
                "tokens_per_s": generated_tokens / max(self.seconds.get("generation", 0.0), 1e-9)}
