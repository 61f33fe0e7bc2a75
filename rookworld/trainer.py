"""The GRPO loop: sample, score, compute group advantages, update; evaluate; guard; checkpoint.

One step (CleanRL-style, all the math visible in `grpo/`):
  1. draw `prompts_per_step` problems by the task mix; sample G = grpo.group_size completions each;
  2. score every completion against its problem's ground truth (reward_fn; rows that stop early are
     scored while the GPU generates the rest: scoring.py);
  3. group-relative advantages (grpo/advantages.py);
  4. one no-grad pass for the reference log-probs (KL) and, when the batch is reused
     (num_iterations > 1 or several minibatches), the old log-probs of the sampling policy;
  5. for each epoch and minibatch: clipped surrogate + beta * KL per token, aggregated by
     grpo.loss_type, backward over micro-batches, gradient clipping, optimizer step with the LR
     of this step set before the update.
Guards end the run with a recorded outcome instead of a crash or a silent continue.
"""
from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import torch

from rookworld.divergence import Guards
from rookworld.eval_cache import EvalCache, cache_key
from rookworld.evaluate import EvalResult, evaluate
from rookworld.finite_weights import LastFiniteWeights
from rookworld.grpo.advantages import Advantages, EMARewardNormalizer, criterion_advantages, group_advantages, varying_groups
from rookworld.grpo.entropy import EntropyBonus, high_entropy_mask
from rookworld.grpo.kl import KLController, kl_per_token, kl_reward_penalty
from rookworld.grpo.loss import LossNormalizer, clip_stats, clipped_surrogate
from rookworld.grpo.sampler_correction import mismatch, sampler_weights
from rookworld.model.fast_sampling import make_decoder
from rookworld.model.hub import load_model, save_pretrained
from rookworld.model.logprobs import completion_logprobs
from rookworld.model.pass_graphs import MODEL_INPUTS, ShapeGraphs, ensure_grads, pad_rows
from rookworld.model.sampling import Generation
from rookworld.optim import build_optimizer, load_state_keeping_settings, lr_at, set_lr
from rookworld.outcomes import NAN_FAILURE, PRUNED, SUCCESS
from rookworld.resume_check import check_resume, save_config
from rookworld.rollout import Rollout, generate_for_problems, stopped
from rookworld.scoring import ScoredRows, StepScores
from rookworld.specs.kl import KL, KLAdaptive, KLFixed
from rookworld.specs.run import RunSpec
from rookworld.tasks import Problem

TRAINER_STATE_FILE = "trainer_state.pt"


def kl_controller(kl: KL) -> KLController:
    """The coefficient controller of a conf/kl/ spec (kl=none: beta stays 0)."""
    if not isinstance(kl, KLFixed):
        return KLController("none", 0.0, 0, 1.0)
    target, horizon = (kl.target, kl.horizon) if isinstance(kl, KLAdaptive) else (None, None)
    return KLController(kl.kind, kl.coef, kl.warmup_steps, kl.warmup_factor, target, horizon)


class StepHook(Protocol):
    """Looks at each step's metrics (eval/* included at evaluation steps, with the evaluation itself);
    True stops the run as pruned. Told the run's outcome at the end."""

    def should_prune(self, step: int, metrics: dict[str, float], evaluation: EvalResult | None) -> bool: ...

    def record_outcome(self, outcome: str, reason: str) -> None: ...


@dataclass
class RunResult:
    outcome: str
    reason: str
    steps: int
    objective: float
    final_eval: dict[str, float] | None = None


@dataclass
class Batch:
    """Everything the update needs, fixed before the first gradient step. Rows come in GRPO groups that
    share a prompt: the distinct prompts are kept once, and the model runs each once."""
    prompt_ids: torch.Tensor            # [U, P] distinct prompts, left-padded
    prompt_mask: torch.Tensor           # [U, P]
    prompt_positions: torch.Tensor      # [U, P]
    groups: list[int]                   # [B] each row's prompt (on the host: micro-batches pick their prompts)
    completion_ids: torch.Tensor        # [B, N]
    completion_positions: torch.Tensor  # [B, N]
    mask: torch.Tensor                  # [B, N] float completion mask (the loss's: 0 for masked rows)
    sampler_logp: torch.Tensor          # [B, N] the sampler's own log-probs of the sampled tokens
    advantages: torch.Tensor | None = None  # [B] (set once the rewards are in)
    ref_logp: torch.Tensor | None = None  # [B, N] reference log-probs (KL on)
    old_logp: torch.Tensor | None = None  # [B, N] sampling-policy log-probs (batch reused)

    @classmethod
    def from_generation(cls, gen, advantages: torch.Tensor | None = None) -> Batch:
        P = gen.prompt_length
        prompts = [tuple(ids) + tuple(real) for ids, real in
                   zip(gen.input_ids[:, :P].tolist(), gen.attention_mask[:, :P].tolist())]
        first_row: dict[tuple, int] = {}
        for row, prompt in enumerate(prompts):
            first_row.setdefault(prompt, row)
        index = {prompt: i for i, prompt in enumerate(first_row)}
        leaders = torch.tensor(list(first_row.values()), device=gen.input_ids.device)
        return cls(prompt_ids=gen.input_ids[leaders, :P], prompt_mask=gen.attention_mask[leaders, :P],
                   prompt_positions=gen.position_ids[leaders, :P], groups=[index[p] for p in prompts],
                   completion_ids=gen.input_ids[:, P:], completion_positions=gen.position_ids[:, P:],
                   mask=gen.completion_mask.float(), sampler_logp=gen.logprobs, advantages=advantages)

    def layout(self, index: torch.Tensor) -> tuple[list[int], list[int], int]:
        """The prompt layout of rows `index`, the one source for `rows` and `group_size`: the rows'
        distinct prompts in order of first appearance, each row's place in that list, and G when the
        rows are whole groups of G rows one after the other (group = [0]*G + [1]*G + ...: the shared
        prompt is broadcast, GPT.completion_hidden runs faster), else 0 (each row gathers its prompt)."""
        row_prompts = [self.groups[row] for row in index.tolist()]
        prompts = list(dict.fromkeys(row_prompts))
        place = {prompt: i for i, prompt in enumerate(prompts)}
        group = [place[prompt] for prompt in row_prompts]
        size = len(group) // len(prompts)
        regular = group == [row // size for row in range(len(group))]
        return prompts, group, size if regular else 0

    def group_size(self, index: torch.Tensor) -> int:
        """G of `layout`: rows `index` are whole groups of G rows one after the other, else 0."""
        return self.layout(index)[2]

    def rows(self, index: torch.Tensor) -> dict[str, torch.Tensor]:
        """The model inputs and loss tensors of rows `index` (a CPU index) with their prompts only, laid
        out as `layout` says; ref_logp / old_logp when present."""
        prompts, group, _ = self.layout(index)
        device = self.mask.device
        per_row = dict(completion_ids=self.completion_ids, completion_positions=self.completion_positions,
                       mask=self.mask, sampler_logp=self.sampler_logp, advantages=self.advantages,
                       ref_logp=self.ref_logp, old_logp=self.old_logp)
        per_prompt = dict(prompt_ids=self.prompt_ids, prompt_mask=self.prompt_mask,
                          prompt_positions=self.prompt_positions)
        picked = {"group": torch.tensor(group, device=device)}
        everything = index.tolist() == list(range(len(self.groups))) and prompts == list(range(self.prompt_ids.shape[0]))
        if everything:  # the usual case: no copies
            return {**picked, **per_prompt, **{k: t for k, t in per_row.items() if t is not None}}
        rows, prompt_rows = index.to(device), torch.tensor(prompts, device=device)
        return {**picked, **{k: t[prompt_rows] for k, t in per_prompt.items()},
                **{k: t[rows] for k, t in per_row.items() if t is not None}}


@dataclass
class Trainer:
    cfg: RunSpec
    policy: torch.nn.Module
    tokenizer: object
    reference: torch.nn.Module | None
    reward_fn: object
    sampler: object                   # ProblemSampler: sample(n) -> list[Problem], state_dict()
    heldout: list[Problem]
    tracker: object
    hooks: list[StepHook] = field(default_factory=list)
    decoder: object = None            # None: make_decoder(policy) (StaticDecoder on CUDA, else PlainDecoder)
    sync_phases: bool = False         # True: exact per-phase times (a device sync per phase; the benchmark)
    step: int = 0

    def __post_init__(self):
        cfg = self.cfg
        self.device = next(self.policy.parameters()).device
        self.optimizer = build_optimizer(self.policy.parameters(), cfg.optimizer)
        self.kl = kl_controller(cfg.kl)
        kl_guard = (cfg.kl.max, cfg.kl.max_steps_above) if isinstance(cfg.kl, KLFixed) else (None, 1)
        self.guards = Guards(cfg.guards.as_mapping(), *kl_guard)
        self.generator = torch.Generator(device=self.device).manual_seed(cfg.seed)
        self.shuffle_generator = torch.Generator().manual_seed(cfg.seed + 1)
        rn, e = cfg.grpo.reward_norm, cfg.grpo.entropy
        self.reward_norm = EMARewardNormalizer(rn.momentum) if rn.enabled else None
        self.entropy_bonus = EntropyBonus(e.coef, e.adaptive, e.target, e.delta, e.min, e.max, self.device)
        self.max_new_tokens = dict(cfg.sampling.max_new_tokens)
        self.last_eval: EvalResult | None = None
        self.first_eval: EvalResult | None = None  # the step-0 evaluation (None after a resume)
        self.last_eval_step = -1
        # (sampler state before, rows): the next step's rows, sampled during this step's update
        self._prefetched: tuple[dict, list[Problem]] | None = None
        # The fast sampler on CUDA owns its buffers and CUDA graphs across steps.
        self.decoder = self.decoder or make_decoder(self.policy, check_every=cfg.sampling.finish_check_every)
        self.policy.activation_checkpointing = bool(cfg.grpo.activation_checkpointing)
        self._make_pass_graphs()
        self.resume_changes: dict | None = None  # what a resume changed against its checkpoint (resume())
        if cfg.resume_from:
            self.resume(cfg.resume_from)
        self.finite_weights = LastFiniteWeights(self.policy.parameters(), cfg.guards.keep_finite_weights)

    # ---------------------------------------------------------------- the loop
    def fit(self) -> RunResult:
        cfg = self.cfg
        if self.resume_changes is not None:
            self.tracker.log_dict(self.resume_changes, "resume_changes.json")
        if self.step == 0:
            self._evaluate(0)
        outcome, reason = SUCCESS, f"finished {cfg.steps} steps"
        start = time.perf_counter()
        while self.step < cfg.steps:
            if cfg.time_limit_min and time.perf_counter() - start > 60 * cfg.time_limit_min:
                reason = f"time limit of {cfg.time_limit_min} min reached after {self.step} steps"
                break
            metrics, nonfinite = self.train_step(self.step)
            self.step += 1
            self.tracker.log_metrics(metrics, step=self.step)
            self._print_progress(metrics)
            stop = self.guards.check(metrics, nonfinite)
            evaluation = self._evaluate(self.step) if stop is None and self._eval_due() else None
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
        final_eval = None
        objective = float(self.cfg.objective.failure_penalty)
        if outcome == SUCCESS:
            reuse_eval = self.last_eval is not None and self.last_eval_step == self.step
            final = self.last_eval if reuse_eval else self._evaluate(self.step)
            final_eval, objective = final.metrics, final.score
            self.tracker.log_dict(final_eval, "eval_final.json")
            if self.cfg.checkpoint.save_final or self.cfg.tracking.log_checkpoint:
                directory = self.save_checkpoint()
                if self.cfg.tracking.log_checkpoint:
                    self.tracker.log_artifacts(str(directory), "checkpoint")
        elif outcome == PRUNED and self.last_eval is not None:
            objective = self.last_eval.score
        self.tracker.log_metrics({"objective": objective}, step=self.step)
        self.tracker.set_outcome(outcome, reason)
        for hook in self.hooks:
            hook.record_outcome(outcome, reason)
        print(f"outcome: {outcome} ({reason}); objective {objective:.4f}")
        if final_eval:
            print("final evaluation: " + ", ".join(f"{k}={v:.3f}" for k, v in final_eval.items()))
        return RunResult(outcome, reason, self.step, objective, final_eval)

    # ---------------------------------------------------------------- one GRPO step
    def train_step(self, step: int) -> tuple[dict[str, float], bool]:
        timer = PhaseTimer(self.device, sync=self.sync_phases)
        g = self.cfg.grpo
        if g.dynamic_sampling.enabled:
            rollout, trained, sampled, sampling_metrics = self._sample_varying_groups(timer)
            if rollout is None:  # no group's rewards varied in any round: nothing to learn from
                return self._skipped_step(step, sampled, sampling_metrics, timer), False
            with timer("logprobs", wait=False), torch.no_grad():
                batch = self._make_batch(rollout.generation)
        else:
            rows = self._take_rows()
            scores = StepScores(self.tokenizer, self.reward_fn, rows)
            rollout = self._generate_scoring(rows, scores, timer)
            # The log-prob passes are queued first and the remaining rewards computed on the host while
            # the GPU runs them: "logprobs" times the queueing, "scoring" ends when both are done.
            with timer("logprobs", wait=False), torch.no_grad():
                batch = self._make_batch(rollout.generation)
            with timer("scoring"):
                trained = sampled = scores.scored_rows()
            sampling_metrics = {}
        beta = self.kl.beta(step)  # the coefficient this step uses, before the controller moves it
        with timer("scoring"):
            adv = self._advantages(trained, batch, beta)
            batch.advantages = adv.values.to(self.device)
        with timer("update"):
            sampling_finite = torch.isfinite(rollout.generation.logprobs).all()
            self.finite_weights.save_if(sampling_finite)
            queued = self.update(step, batch)
            queued["nonfinite/sampling"] = (~sampling_finite).float()
            queued["nonfinite/weights"] = (~self.finite_weights.check()).float()
            self._prefetch_rows()  # host work while the GPU runs the update
            update = read_metrics(queued)
        kl = update.pop("kl", None)
        if kl is not None:
            self.kl.update(kl)
        self._maybe_sync_reference(step)
        metrics = {
            **sampled.metrics(),
            "frac_reward_zero_std": adv.frac_zero_std,
            **sampling_metrics,
            **self._completion_metrics(rollout),
            **update,
            **({"kl": kl, "kl/coef": beta} if kl is not None else {}),
            **{f"time/{k}": v for k, v in timer.seconds.items()},
        }
        metrics["step_time"] = timer.total
        metrics["tokens_per_s"] = metrics["completions/num_tokens"] / max(timer.seconds["generation"], 1e-9)
        nonfinite = update["nonfinite"] > 0 or update["nonfinite/weights"] > 0 or update["nonfinite/sampling"] > 0
        return metrics, nonfinite

    def _generate_scoring(self, rows: list[Problem], scores: StepScores, timer: PhaseTimer) -> Rollout:
        with timer("generation"):  # rows that stop early are scored while the GPU generates the rest
            rollout = self.generate(rows, on_finished=scores.add)
            scores.decode_rest(rollout)  # on the host before the GPU gets more work
        return rollout

    def _sample_varying_groups(self, timer: PhaseTimer) -> tuple[Rollout | None, ScoredRows | None, ScoredRows,
                                                                 dict[str, float]]:
        """DAPO dynamic sampling: rounds of prompts_per_step problems, keeping only the groups whose
        rewards vary, until prompts_per_step groups are kept or grpo.dynamic_sampling.max_rounds have run.
        The kept rows' rollout and scores (None when no group was kept), every sampled row's scores,
        and the sampling metrics."""
        G, wanted = self.cfg.grpo.group_size, self.cfg.prompts_per_step
        parts: list[tuple[Rollout, ScoredRows, list[int]]] = []
        kept, rounds = 0, 0
        rows = self._take_rows()
        while kept < wanted and rounds < self.cfg.grpo.dynamic_sampling.max_rounds:
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
        metrics = {"dynamic_sampling/rounds": rounds, "dynamic_sampling/batch_fill": kept / wanted,
                   "dynamic_sampling/kept_share": kept * G / len(sampled.problems)}
        parts = [part for part in parts if part[2]]
        if not parts:
            return None, None, sampled, metrics
        trained = sum((scored.select(picked) for _, scored, picked in parts[1:]), parts[0][1].select(parts[0][2]))
        generation = Generation.stack([(rollout.generation, picked) for rollout, _, picked in parts])
        return Rollout(problems=trained.problems, generation=generation), trained, sampled, metrics

    def _skipped_step(self, step: int, sampled: ScoredRows, sampling_metrics: dict, timer: PhaseTimer) -> dict:
        """A dynamic-sampling step that kept no group: no update (loss and gradient 0), its sampling reported."""
        self._prefetch_rows()
        lr = lr_at(step, self.cfg.optimizer.lr, self.cfg.optimizer.warmup_steps, self.cfg.steps,
                   self.cfg.optimizer.min_lr_ratio)
        return {**sampled.metrics(), "frac_reward_zero_std": 1.0, **sampling_metrics, "loss": 0.0, "grad_norm": 0.0,
                "learning_rate": lr, "nonfinite": 0, **{f"time/{k}": v for k, v in timer.seconds.items()},
                "step_time": timer.total}

    def _advantages(self, trained: ScoredRows, batch: Batch, beta: float) -> Advantages:
        """Group advantages of the trained rows' rewards: EMA-normalised if on, minus the KL penalty when
        it sits in the reward, summed (default) or per-criterion normalised (grpo.reward_aggregation)."""
        g, k = self.cfg.grpo, self.cfg.kl
        shaped = self.reward_norm(trained.rewards) if self.reward_norm else trained.rewards
        if self.kl.enabled and k.placement == "reward":
            penalty = kl_reward_penalty(batch.old_logp, batch.ref_logp, batch.mask, k.estimator, beta)
            shaped = shaped - penalty.float().cpu()
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
        problems = self.sampler.sample(self.cfg.prompts_per_step)
        return [p for p in problems for _ in range(self.cfg.grpo.group_size)]

    @torch.no_grad()
    def generate(self, rows: list[Problem], on_finished=None) -> Rollout:
        """Completions of `rows` with the configured sampling (the fast decoder on CUDA);
        `on_finished`: the decoder's hook for rows that stop before the others."""
        s = self.cfg.sampling
        with self._autocast():
            return generate_for_problems(self.decoder, self.tokenizer, rows, self.max_new_tokens,
                                         temperature=s.temperature, top_k=s.top_k, top_p=s.top_p,
                                         generator=self.generator, on_finished=on_finished)

    def _make_batch(self, gen: Generation, advantages: torch.Tensor | None = None) -> Batch:
        """The batch of `rollout` with its reference (and old-policy) log-probs queued on the device;
        with grpo.mask_truncated_completions, rows cut at their token cap get no loss."""
        batch = Batch.from_generation(gen, advantages)
        if self.cfg.grpo.mask_truncated_completions:
            batch.mask = batch.mask * stopped(self.tokenizer, gen).to(batch.mask.dtype)[:, None]
        everything = torch.arange(len(batch.groups))
        inputs, group_size = batch.rows(everything), batch.group_size(everything)
        if self.kl.enabled:
            batch.ref_logp = self._no_grad_logprobs("reference", inputs, group_size)
        if self._needs_old_logprobs:
            batch.old_logp = self._no_grad_logprobs("policy", inputs, group_size)
        return batch

    @property
    def _needs_old_logprobs(self) -> bool:
        """A separate pass for the sampling policy's log-probs: the batch is reused (its ratios need
        them) or the KL penalty sits in the reward (computed before the update)."""
        return self._reuses_batch or (self.kl.enabled and self.cfg.kl.placement == "reward")

    @property
    def _reuses_batch(self) -> bool:
        """Several optimizer steps per batch: old log-probs are needed and the rows get shuffled."""
        return self.cfg.grpo.num_iterations > 1 or self.cfg.grpo.num_minibatches > 1

    def _no_grad_logprobs(self, which: str, inputs: dict[str, torch.Tensor], group_size: int) -> torch.Tensor:
        """Log-probs [B, N] of the completions under the policy or the reference (on the reference's own
        device, kl.ref_device), returned on the policy's; from a CUDA graph when they are on."""
        model = self.policy if which == "policy" else self.reference
        device = next(model.parameters()).device
        inputs = {name: t.to(device) for name, t in inputs.items() if name in MODEL_INPUTS}
        if self.logprob_graphs is None or device != self.device:
            return self._logprob_pass(inputs, which=which, group_size=group_size)["logp"].to(self.device)
        padded = pad_rows(inputs, self.cfg.grpo.graph_bucket)
        logp = self.logprob_graphs(padded, which=which, group_size=group_size)["logp"]
        return logp[:, :inputs["mask"].shape[1]]

    def _logprob_pass(self, inputs: dict[str, torch.Tensor], which: str, group_size: int) -> dict[str, torch.Tensor]:
        """No-grad log-probs of `which` model (graph-safe)."""
        model = self.policy if which == "policy" else self.reference
        with torch.no_grad(), self._autocast():
            return {"logp": self._completion_logprobs(model, inputs, group_size)}

    def _completion_logprobs(self, model, inputs: dict[str, torch.Tensor], group_size: int,
                             with_entropy: bool = False):
        # At the sampling temperature, so that the ratio is 1 before the update.
        temperature = self.cfg.sampling.temperature if self.cfg.sampling.temperature > 0 else 1.0
        return completion_logprobs(model, inputs["prompt_ids"], inputs["prompt_mask"], inputs["prompt_positions"],
                                   inputs["group"], inputs["completion_ids"], inputs["mask"] > 0,
                                   inputs["completion_positions"], temperature=temperature,
                                   with_entropy=with_entropy, group_size=group_size)

    def _make_pass_graphs(self) -> None:
        """CUDA graphs of the training passes (rookworld/model/pass_graphs.py), when on; else eager."""
        self.policy_graphs = self.logprob_graphs = None
        if not (self.cfg.grpo.cuda_graphs and self.device.type == "cuda"):
            return
        self.policy_graphs = ShapeGraphs(self._loss_and_backward, self.device)
        self.logprob_graphs = ShapeGraphs(self._logprob_pass, self.device, pool=self.policy_graphs.pool)
        self._captured_grads: list[int] = []

    def update(self, step: int, batch: Batch) -> dict[str, torch.Tensor | float]:
        """Queue the step's optimizer updates on the device. The metrics stay device tensors until
        `read_metrics` (one sync), so the host can prepare the next step while the GPU works; a
        minibatch whose loss or gradient norm is not finite skips its optimizer step."""
        g = self.cfg.grpo
        lr = lr_at(step, self.cfg.optimizer.lr, self.cfg.optimizer.warmup_steps, self.cfg.steps,
                   self.cfg.optimizer.min_lr_ratio)
        set_lr(self.optimizer, lr)
        beta = self.kl.beta(step)
        n = batch.mask.shape[0]
        # Log-probs of the sampling policy (KL and sampler-gap metrics): the stored ones, else the first epoch's.
        policy_logp = batch.old_logp if batch.old_logp is not None else torch.zeros_like(batch.mask)
        zero = torch.zeros((), device=self.device)
        sums = dict.fromkeys(("loss", "grad_norm", "updates", "entropy", "clip_low", "clip_high", "clip_region",
                              "trained_entropy", "trained_tokens"), zero)
        minibatches = 0
        for epoch in range(g.num_iterations):
            order = torch.randperm(n, generator=self.shuffle_generator) if self._reuses_batch else torch.arange(n)
            for minibatch in order.chunk(g.num_minibatches):
                mb_mask = batch.mask[minibatch.to(self.device)]
                normalizer = LossNormalizer.for_batch(g.loss_type, mb_mask, max(self.max_new_tokens.values()))
                self._zero_grad()
                loss_value, mb_entropy, mb_tokens = zero, zero, zero  # summed on the device: no sync per micro-batch
                micro = g.micro_batch_size or len(minibatch)
                parts = minibatch.split(micro)
                for rows in parts:
                    inputs = batch.rows(rows)
                    rows_here = rows.to(self.device)  # before the pass is queued: this copy waits for the GPU
                    out = self._policy_pass(inputs, normalizer, beta, batch.group_size(rows), len(parts))
                    loss_value = loss_value + out["loss"]
                    mb_entropy, mb_tokens = mb_entropy + out["trained_entropy"], mb_tokens + out["trained_tokens"]
                    if epoch == 0:
                        if batch.old_logp is None:
                            policy_logp[rows_here] = out["logp"]
                        sums["entropy"] = sums["entropy"] + (out["entropy"] * inputs["mask"]).sum()
                    tokens_here = inputs["mask"].sum()
                    for key in ("clip_low", "clip_high", "clip_region"):
                        sums[key] = sums[key] + out[key] * tokens_here
                grad_norm = self._clip_gradients().float()
                finite = torch.isfinite(loss_value) & torch.isfinite(grad_norm)
                self._step_if(finite)
                self.entropy_bonus.update(mb_entropy / mb_tokens.clamp(min=1))
                sums["loss"] = sums["loss"] + torch.where(finite, loss_value, 0.0)
                sums["grad_norm"] = sums["grad_norm"] + torch.where(finite, grad_norm, 0.0)
                sums["updates"] = sums["updates"] + finite.float()
                sums["trained_entropy"], sums["trained_tokens"] = sums["trained_entropy"] + mb_entropy, sums["trained_tokens"] + mb_tokens
                minibatches += 1
        tokens = batch.mask.sum().clamp(min=1)
        result = {
            "loss": sums["loss"] / sums["updates"],  # nan when every minibatch was skipped
            "grad_norm": sums["grad_norm"] / sums["updates"],
            "learning_rate": lr,
            "entropy": sums["entropy"] / tokens,
            "entropy/trained_token_share": sums["trained_tokens"] / (tokens * g.num_iterations),
            **{f"clip_ratio/{side}_mean": sums[f"clip_{side}"] / (tokens * g.num_iterations)
               for side in ("low", "high", "region")},
            **mismatch(policy_logp, batch.sampler_logp, batch.mask),
            "nonfinite": minibatches - sums["updates"],
        }
        if self.entropy_bonus.enabled:
            result["entropy/coef"] = self.entropy_bonus.coef
        if batch.ref_logp is not None:
            k3 = kl_per_token(policy_logp, batch.ref_logp.float(), "k3")
            result["kl"] = (k3 * batch.mask).sum() / tokens
        return result

    def _step_if(self, finite: torch.Tensor) -> None:
        """The optimizer step, skipped unless `finite`. Fused optimizers (the default AdamW) read the
        skip flag on the device (`found_inf`, as under torch's GradScaler: no host sync); others read it
        on the host."""
        if self.optimizer.defaults.get("fused"):
            self.optimizer.found_inf = (~finite).float()
            self.optimizer.step()
        elif finite.item():
            self.optimizer.step()

    def _policy_pass(self, rows: dict[str, torch.Tensor], normalizer: LossNormalizer, beta: float,
                     group_size: int, micro_batches: int = 1) -> dict[str, torch.Tensor]:
        """Forward and backward of one of a minibatch's `micro_batches` micro-batches (gradients
        accumulate); its loss, log-probs [b, N], entropies [b, N], clip and trained-token statistics.
        From a CUDA graph when they are on."""
        inputs, static = self._pass_inputs(rows, normalizer, beta, group_size, micro_batches)
        if self.policy_graphs is None:
            return self._loss_and_backward(inputs, **static)
        self._keep_graphs_valid()
        out = self.policy_graphs(pad_rows(inputs, self.cfg.grpo.graph_bucket), **static)
        width = rows["mask"].shape[1]
        return {name: t[:, :width] if t.dim() == 2 else t for name, t in out.items()}

    def _pass_inputs(self, rows: dict[str, torch.Tensor], normalizer: LossNormalizer, beta: float,
                     group_size: int, micro_batches: int = 1) -> tuple[dict[str, torch.Tensor], dict]:
        """The tensors and the static arguments of `_loss_and_backward` for one micro-batch."""
        inputs = {**rows, "num_tokens": normalizer.num_tokens, "beta": torch.full((), beta, device=self.device),
                  "entropy_coef": self.entropy_bonus.applied_coef()}
        static = dict(num_sequences=normalizer.num_sequences, use_kl="ref_logp" in rows and beta > 0,
                      group_size=group_size, micro_batches=micro_batches)
        return inputs, static

    def _loss_and_backward(self, inputs: dict[str, torch.Tensor], num_sequences: int, use_kl: bool,
                           group_size: int, micro_batches: int = 1) -> dict[str, torch.Tensor]:
        """The GRPO loss of `inputs` and its backward (graph-safe: no host syncs)."""
        g, k = self.cfg.grpo, self.cfg.kl
        with self._autocast():
            logp, entropy = self._completion_logprobs(self.policy, inputs, group_size, with_entropy=True)
        logp, entropy, mask = logp.float(), entropy.float(), inputs["mask"]
        old = inputs["old_logp"].float() if "old_logp" in inputs else logp.detach()
        per_token, ratio = clipped_surrogate(logp, old, inputs["advantages"], g.epsilon_low, g.epsilon_high)
        trained = high_entropy_mask(entropy.detach(), mask, g.top_entropy_quantile)
        per_token = per_token * trained
        if g.sampler_correction.mode != "none":
            per_token = per_token * sampler_weights(old, inputs["sampler_logp"], mask, g.sampler_correction.mode,
                                                    g.sampler_correction.cap)
        if use_kl and k.placement == "loss":
            kl = kl_per_token(logp, inputs["ref_logp"].float(), k.estimator)
            per_token = per_token + inputs["beta"] * (kl * ratio if k.bias_correction else kl)
        normalizer = LossNormalizer(g.loss_type, num_sequences, inputs["num_tokens"],
                                    max(self.max_new_tokens.values()))
        loss = normalizer.aggregate(per_token, mask)
        trained_entropy, trained_tokens = (entropy * trained).sum(), trained.sum()
        if self.entropy_bonus.enabled:
            loss = loss - inputs["entropy_coef"] * trained_entropy / trained_tokens.clamp(min=1) / micro_batches
        loss.backward()
        clip = clip_stats(ratio.detach(), inputs["advantages"], mask, g.epsilon_low, g.epsilon_high)
        return {"loss": loss.detach().float(), "logp": logp.detach(), "entropy": entropy.detach(),
                "clip_low": clip.low, "clip_high": clip.high, "clip_region": clip.region,
                "trained_entropy": trained_entropy.detach(), "trained_tokens": trained_tokens.detach()}

    def _zero_grad(self) -> None:
        # Captured backward passes add into the existing .grad tensors: keep them (zeroed in place).
        self.optimizer.zero_grad(set_to_none=self.policy_graphs is None)

    def _keep_graphs_valid(self) -> None:
        """Gradients must sit where the graphs captured them; if anyone replaced them, capture anew."""
        ensure_grads(self.policy.parameters())
        addresses = [p.grad.data_ptr() for p in self.policy.parameters() if p.requires_grad]
        if addresses != self._captured_grads:
            self.policy_graphs.close()
            self._captured_grads = addresses

    def _clip_gradients(self) -> torch.Tensor:
        max_norm = self.cfg.grpo.max_grad_norm or float("inf")
        return torch.nn.utils.clip_grad_norm_(self.policy.parameters(), max_norm)

    def _maybe_sync_reference(self, step: int) -> None:
        if self.reference is None:
            return
        every = self.cfg.kl.sync_every
        if not every or (step + 1) % every:
            return
        alpha = self.cfg.kl.sync_alpha
        with torch.no_grad():
            for ref, cur in zip(self.reference.parameters(), self.policy.parameters()):
                ref.mul_(1 - alpha).add_(cur.to(ref.device, ref.dtype), alpha=alpha)

    def _autocast(self):
        return autocast_for(self.device, self.cfg.model.dtype)

    # ---------------------------------------------------------------- evaluation and logging
    def _eval_due(self) -> bool:
        every = self.cfg.eval.every
        return bool(every) and self.step % every == 0 and self.step < self.cfg.steps

    def _evaluate(self, step: int) -> EvalResult:
        e = self.cfg.eval
        cache = self._start_eval_cache() if step == 0 else None
        result = cache.load() if cache is not None else None
        cached = result is not None
        if result is None:
            with torch.no_grad(), self._autocast():
                result = evaluate(self.decoder, self.tokenizer, self.heldout, self.reward_fn, self.max_new_tokens,
                                  e.batch_size, e.num_samples_logged, generator=self.generator)
            if cache is not None:
                cache.store(result)
        self.tracker.log_metrics(result.metrics, step=step)
        self.tracker.log_samples(result.samples, step=step)
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
        """The shared step-0 evaluation of these starting weights (rookworld/eval_cache.py); None when off."""
        e, cfg = self.cfg.eval, self.cfg
        if not e.cache_dir:
            return None
        settings = {"max_new_tokens": self.max_new_tokens, "batch_size": e.batch_size,
                    "num_samples_logged": e.num_samples_logged,
                    "reward": cfg.resolved["reward"], "model": cfg.resolved["model"], "device": self.device.type,
                    "decoder": type(self.decoder).__name__ if self.decoder is not None else "plain",
                    "torch": torch.__version__}
        return EvalCache(str(e.cache_dir), cache_key(self.policy, self.heldout, settings))

    def _completion_metrics(self, rollout) -> dict[str, float]:
        lengths = rollout.completion_lengths.float()
        return {
            "completions/mean_length": lengths.mean().item(),
            "completions/min_length": lengths.min().item(),
            "completions/max_length": lengths.max().item(),
            "completions/clipped_ratio": 1.0 - stopped(self.tokenizer, rollout.generation).float().mean().item(),
            "completions/num_tokens": lengths.sum().item(),
        }

    def _print_progress(self, m: dict[str, float]) -> None:
        if self.step % self.cfg.log_every and self.step != self.cfg.steps:
            return
        # No loss: at ratio 1 it is minus the mean of group-centred advantages, about 0 at every step
        # (README, The GRPO step); the gradient norm shows the update's size.
        kl = f"kl {m['kl']:.5f}" if "kl" in m else "kl off"
        print(f"step {self.step}/{self.cfg.steps} | reward {m['reward']:+.3f} ± {m['reward_std']:.3f} | "
              f"{kl} | grad norm {m['grad_norm']:.3f} | {m['step_time']:.2f} s", flush=True)

    # ---------------------------------------------------------------- checkpoints
    def save_checkpoint(self) -> Path:
        directory = Path(self.cfg.checkpoint.dir) / f"step_{self.step:06d}"
        save_pretrained(self.policy, self.tokenizer, directory)
        torch.save(self.state_dict(), directory / TRAINER_STATE_FILE)
        save_config(self.cfg.resolved, directory)
        return directory

    def resume(self, directory: str | Path) -> None:
        """Continue the run save_checkpoint() wrote to `directory`, once its config is checked against
        this one (rookworld/resume_check.py): the policy's weights, then the trainer state (the reference
        stays the starting policy unless the state carries a synced one)."""
        allowed, accepted = check_resume(self.cfg, directory)
        if accepted:
            print("resume: resume_check.accept_changes=true accepts changes against the checkpoint: "
                  + ", ".join(f"{key} ({old!r} -> {new!r})" for key, (old, new) in accepted.items()), flush=True)
        # Logged when the run starts (fit): the trainer is built before its MLflow run opens.
        self.resume_changes = {"accepted": {k: list(v) for k, v in accepted.items()},
                               "allowed": {k: list(v) for k, v in allowed.items()}}
        saved, _ = load_model(path=directory, device=self.device, dtype="float32")
        self.policy.load_state_dict(saved.state_dict())
        self.load_state_dict(torch.load(Path(directory) / TRAINER_STATE_FILE, weights_only=False))

    def close(self) -> None:
        """Free the decoder's buffers and graphs and drop the models (the benchmark builds many trainers)."""
        self.decoder.close()
        for graphs in (self.policy_graphs, self.logprob_graphs):
            if graphs is not None:
                graphs.close()
        self.policy.zero_grad(set_to_none=True)
        self.policy = self.reference = self.optimizer = self.decoder = None

    def state_dict(self) -> dict:
        state = {
            "step": self.step,
            "optimizer": self.optimizer.state_dict(),
            "kl": self.kl.state_dict(),
            "guards": self.guards.state_dict(),
            "sampler": self.sampler.state_dict() if self._prefetched is None else self._prefetched[0],
            "generator": self.generator.get_state(),
            "shuffle_generator": self.shuffle_generator.get_state(),
            "reward_norm": self.reward_norm.state_dict() if self.reward_norm else None,
            "entropy_bonus": self.entropy_bonus.state_dict(),
            "last_eval_step": self.last_eval_step,
        }
        if self.reference is not None and self.cfg.kl.sync_every:
            state["reference"] = self.reference.state_dict()
        return state

    def load_state_dict(self, state: dict) -> None:
        self.step = state["step"]
        load_state_keeping_settings(self.optimizer, state["optimizer"])
        self.kl.load_state_dict(state["kl"])
        self.guards.load_state_dict(state["guards"])
        self.sampler.load_state_dict(state["sampler"])
        self._prefetched = None
        self.generator.set_state(state["generator"])
        self.shuffle_generator.set_state(state["shuffle_generator"])
        self.last_eval_step = state["last_eval_step"]
        if self.reward_norm:
            self.reward_norm.load_state_dict(state["reward_norm"])
        self.entropy_bonus.load_state_dict(state["entropy_bonus"])
        if "reference" in state:
            self.reference.load_state_dict(state["reference"])


def autocast_for(device: torch.device, dtype: str):
    """bf16 autocast on CUDA unless model.dtype=float32 (the weights stay float32); nothing on the CPU."""
    if device.type == "cuda" and dtype in ("auto", "bfloat16"):
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()


def read_metrics(queued: dict[str, torch.Tensor | float]) -> dict[str, float]:
    """Device scalars to floats with one sync."""
    names = [name for name, value in queued.items() if isinstance(value, torch.Tensor)]
    values = torch.stack([queued[name].float() for name in names]).tolist() if names else []
    return {**queued, **dict(zip(names, values))}


class PhaseTimer:
    """Wall time per phase of a step. With `sync`, CUDA is synchronised at phase boundaries (exact
    split); without, a phase's queued GPU work is counted in the next phase that waits for it."""

    def __init__(self, device: torch.device, sync: bool = True):
        self.device, self.sync, self.seconds = device, sync, {}

    @contextlib.contextmanager
    def __call__(self, phase: str, wait: bool = True):
        """Time `phase`; wait=False: never synchronise at its end (work meant to overlap the next)."""
        start = time.perf_counter()
        yield
        if wait and self.sync and self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        self.seconds[phase] = time.perf_counter() - start

    @property
    def total(self) -> float:
        return sum(self.seconds.values())
