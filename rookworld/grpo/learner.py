"""One GRPO update of the policy: the update engine the Trainer (rookworld/run/trainer.py) owns.

Given a step's sampled completions (a Generation) and their advantages, the Learner
  1. builds the Batch: the distinct prompts once, the completions, the loss mask (rows cut at their
     cap masked with grpo.mask_truncated_completions);
  2. queues one no-grad pass for the reference log-probs (KL on) and, when the batch is reused
     (num_iterations > 1 or several minibatches) or the KL sits in the reward, one for the old
     log-probs of the sampling policy;
  3. for each epoch and minibatch: clipped surrogate + beta * KL per token, aggregated by
     grpo.loss_type, backward over micro-batches, gradient clipping, optimizer step with the LR of this
     step set before the update; a minibatch whose loss or gradient norm is not finite skips its
     optimizer step.
The training passes are replayed from CUDA graphs when grpo.cuda_graphs is on (model/pass_graphs.py).
The trainer, the benchmark's self-check, the probes and the tests all go through the public methods.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from rookworld.grpo.entropy import EntropyBonus, high_entropy_mask
from rookworld.grpo.kl import kl_per_token
from rookworld.grpo.loss import LossInputs, LossNormalizer, LossSettings, grpo_loss
from rookworld.grpo.sampler_correction import mismatch, sampler_weights, weight_stats
from rookworld.model.logprobs import completion_logprobs
from rookworld.model.pass_graphs import MODEL_INPUTS, ShapeGraphs, ensure_grads, pad_rows
from rookworld.model.precision import autocast_for
from rookworld.model.sampling import Generation
from rookworld.grpo.optim import load_state_keeping_settings, set_lr
from rookworld.judge.rollout import stopped


@dataclass(frozen=True)
class UpdateSettings:
    """What the update reads of a run, fixed for the run (the assembly, rookworld/run/build.py, fills it)."""
    loss: LossSettings            # the knobs of grpo_loss (GRPO.loss_settings)
    loss_type: str                # grpo.loss_type: the aggregation
    num_iterations: int           # grpo.num_iterations: epochs over a batch
    num_minibatches: int          # grpo.num_minibatches: optimizer steps per epoch
    micro_batch_size: int         # grpo.micro_batch_size (0: the whole minibatch)
    max_grad_norm: float          # grpo.max_grad_norm (0: no clipping)
    mask_truncated_completions: bool
    activation_checkpointing: bool
    cuda_graphs: bool             # grpo.cuda_graphs: the training passes from CUDA graphs (on CUDA)
    graph_bucket: int             # grpo.graph_bucket: rows padded to a multiple of it
    temperature: float            # sampling.temperature: the log-probs' (the ratio is 1 before the update)
    max_completion_length: int    # the largest of sampling.max_new_tokens (dr_grpo's L_max)
    kl_in_reward: bool            # kl.placement=reward: the old log-probs are needed before the update
    reference_sync_every: int     # kl.sync_every (0: never)
    reference_sync_alpha: float   # kl.sync_alpha
    dtype: str                    # model.dtype (autocast)
    shuffle_seed: int             # the shuffle of reused batches


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
        """The prompt layout of rows `index`, the one source for `rows` and `broadcast_width`: the rows'
        distinct prompts in order of first appearance, each row's place in that list, and the broadcast
        width: W when the rows are whole runs of W rows of one prompt each, one after the other (group =
        [0]*W + [1]*W + ...: each prompt is broadcast to its W rows, GPT.completion_hidden runs faster),
        else 0 (each row gathers its prompt). W is how the model lays out these rows, not grpo.group_size:
        a micro-batch of one whole group has W = G, a shuffled one W = 0, a cut group a smaller W."""
        row_prompts = [self.groups[row] for row in index.tolist()]
        prompts = list(dict.fromkeys(row_prompts))
        place = {prompt: i for i, prompt in enumerate(prompts)}
        group = [place[prompt] for prompt in row_prompts]
        size = len(group) // len(prompts)
        regular = group == [row // size for row in range(len(group))]
        return prompts, group, size if regular else 0

    def broadcast_width(self, index: torch.Tensor) -> int:
        """The broadcast width of `layout`: W when rows `index` are whole runs of W rows per prompt, else 0."""
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



class Learner:
    """The update engine of a GRPO run: the optimizer (its LR `lr_at(step)`), the entropy bonus, the shuffle of
    reused batches, the reference model's log-probs (KL on: `reference` is not None) and the CUDA graphs of the
    training passes."""

    def __init__(self, settings: UpdateSettings, policy: torch.nn.Module, reference: torch.nn.Module | None,
                 tokenizer, optimizer: torch.optim.Optimizer, lr_at: Callable[[int], float],
                 entropy_bonus: EntropyBonus):
        self.settings, self.policy, self.reference, self.tokenizer = settings, policy, reference, tokenizer
        self.optimizer, self.lr_at, self.entropy_bonus = optimizer, lr_at, entropy_bonus
        self.device = next(policy.parameters()).device
        self.shuffle_generator = torch.Generator().manual_seed(settings.shuffle_seed)
        policy.activation_checkpointing = bool(settings.activation_checkpointing)
        self._make_pass_graphs()

    def make_batch(self, gen: Generation, advantages: torch.Tensor | None = None) -> Batch:
        """The batch of `gen` with its reference (and old-policy) log-probs queued on the device;
        with grpo.mask_truncated_completions, rows cut at their token cap get no loss."""
        batch = Batch.from_generation(gen, advantages)
        if self.settings.mask_truncated_completions:
            batch.mask = batch.mask * stopped(self.tokenizer, gen).to(batch.mask.dtype)[:, None]
        everything = torch.arange(len(batch.groups))
        inputs, broadcast_width = batch.rows(everything), batch.broadcast_width(everything)
        if self.reference is not None:
            batch.ref_logp = self.logprobs("reference", inputs, broadcast_width)
        if self._needs_old_logprobs:
            batch.old_logp = self.logprobs("policy", inputs, broadcast_width)
        return batch

    @property
    def _needs_old_logprobs(self) -> bool:
        """A separate pass for the sampling policy's log-probs: the batch is reused (its ratios need
        them) or the KL penalty sits in the reward (computed before the update)."""
        return self._reuses_batch or self.settings.kl_in_reward

    @property
    def _reuses_batch(self) -> bool:
        """Several optimizer steps per batch: old log-probs are needed and the rows get shuffled."""
        return self.settings.num_iterations > 1 or self.settings.num_minibatches > 1

    def logprobs(self, which: str, inputs: dict[str, torch.Tensor], broadcast_width: int) -> torch.Tensor:
        """Log-probs [B, N] of the completions under the policy or the reference (on the reference's own
        device, kl.ref_device), returned on the policy's; from a CUDA graph when they are on."""
        model = self.policy if which == "policy" else self.reference
        device = next(model.parameters()).device
        inputs = {name: t.to(device) for name, t in inputs.items() if name in MODEL_INPUTS}
        if self.logprob_graphs is None or device != self.device:
            return self._logprob_pass(inputs, which=which, broadcast_width=broadcast_width)["logp"].to(self.device)
        padded = pad_rows(inputs, self.settings.graph_bucket)
        logp = self.logprob_graphs(padded, which=which, broadcast_width=broadcast_width)["logp"]
        return logp[:, :inputs["mask"].shape[1]]

    def _logprob_pass(self, inputs: dict[str, torch.Tensor], which: str, broadcast_width: int) -> dict[str, torch.Tensor]:
        """No-grad log-probs of `which` model (graph-safe)."""
        model = self.policy if which == "policy" else self.reference
        with torch.no_grad(), self.autocast():
            return {"logp": self.model_logprobs(model, inputs, broadcast_width)}

    def model_logprobs(self, model, inputs: dict[str, torch.Tensor], broadcast_width: int,
                       with_entropy: bool = False):
        """Log-probs [b, N] (and entropies) of `model` on the rows `inputs`, with gradients when enabled."""
        # At the sampling temperature, so that the ratio is 1 before the update.
        temperature = self.settings.temperature if self.settings.temperature > 0 else 1.0
        return completion_logprobs(model, inputs["prompt_ids"], inputs["prompt_mask"], inputs["prompt_positions"],
                                   inputs["group"], inputs["completion_ids"], inputs["mask"] > 0,
                                   inputs["completion_positions"], temperature=temperature,
                                   with_entropy=with_entropy, broadcast_width=broadcast_width)

    def _make_pass_graphs(self) -> None:
        """CUDA graphs of the training passes (rookworld/model/pass_graphs.py), when on; else eager."""
        self.policy_graphs = self.logprob_graphs = None
        if not (self.settings.cuda_graphs and self.device.type == "cuda"):
            return
        self.policy_graphs = ShapeGraphs(self.loss_and_backward, self.device)
        self.logprob_graphs = ShapeGraphs(self._logprob_pass, self.device, pool=self.policy_graphs.pool)
        self._captured_grads: list[int] = []

    def update(self, step: int, batch: Batch, beta: float) -> dict[str, torch.Tensor | float]:
        """Queue the step's optimizer updates on the device, with this step's KL coefficient `beta`. The metrics
        stay device tensors until the trainer reads them (one sync), so the host can prepare the next step
        while the GPU works; a minibatch whose loss or gradient norm is not finite skips its optimizer step."""
        g = self.settings
        lr = self.lr_at(step)
        set_lr(self.optimizer, lr)
        n = batch.mask.shape[0]
        # Log-probs of the sampling policy (KL and sampler-gap metrics): the stored ones, else the first epoch's.
        policy_logp = batch.old_logp if batch.old_logp is not None else torch.zeros_like(batch.mask)
        zero = torch.zeros((), device=self.device)
        sums = dict.fromkeys(("loss", "grad_norm", "updates", "entropy", "clip_low", "clip_high", "clip_region",
                              "trained_entropy", "trained_tokens", "entropy_coef"), zero)
        minibatches = 0
        for epoch in range(g.num_iterations):
            order = torch.randperm(n, generator=self.shuffle_generator) if self._reuses_batch else torch.arange(n)
            for minibatch in order.chunk(g.num_minibatches):
                mb_mask = batch.mask[minibatch.to(self.device)]
                normalizer = LossNormalizer.for_batch(g.loss_type, mb_mask, self.settings.max_completion_length)
                self.zero_grad()
                loss_value, mb_entropy, mb_tokens = zero, zero, zero  # summed on the device: no sync per micro-batch
                micro = g.micro_batch_size or len(minibatch)
                parts = minibatch.split(micro)
                part_inputs = self._with_trained_mask(batch, parts)
                sums["entropy_coef"] = sums["entropy_coef"] + self.entropy_bonus.applied_coef()
                for rows, inputs in zip(parts, part_inputs):
                    rows_here = rows.to(self.device)  # before the pass is queued: this copy waits for the GPU
                    out = self.policy_pass(inputs, normalizer, beta, batch.broadcast_width(rows))
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
        if self.entropy_bonus.enabled:  # the coefficient the loss used (mean over the step's optimizer steps)
            result["entropy/coef"] = sums["entropy_coef"] / minibatches
        correction = self.settings.loss
        if correction.sampler_correction != "none":
            weights = sampler_weights(policy_logp, batch.sampler_logp, batch.mask, correction.sampler_correction,
                                      correction.sampler_cap)
            result.update(weight_stats(weights, batch.mask, correction.sampler_correction))
        if batch.ref_logp is not None:
            k3 = kl_per_token(policy_logp, batch.ref_logp.float(), "k3")
            result["kl"] = (k3 * batch.mask).sum() / tokens
        return result

    def _with_trained_mask(self, batch: Batch, parts: tuple[torch.Tensor, ...]) -> list[dict[str, torch.Tensor]]:
        """Each micro-batch's inputs, with grpo.top_entropy_quantile < 1 over several micro-batches its part of
        the top-entropy mask of the whole minibatch (`trained`: its quantile from one extra no-grad pass for the
        entropies), so that the micro-batch size changes no gradient."""
        part_inputs = [batch.rows(rows) for rows in parts]
        quantile = self.settings.loss.top_entropy_quantile
        if quantile >= 1.0 or len(parts) == 1:  # every completion token is trained, or the pass sees the minibatch
            return part_inputs
        with torch.no_grad(), self.autocast():
            entropies = [self.model_logprobs(self.policy, inputs, batch.broadcast_width(rows), with_entropy=True)[1]
                         for rows, inputs in zip(parts, part_inputs)]
        masks = torch.cat([inputs["mask"] for inputs in part_inputs])
        trained = high_entropy_mask(torch.cat(entropies).float(), masks, quantile)
        return [{**inputs, "trained": part} for inputs, part in zip(part_inputs, trained.split([len(rows) for rows in parts]))]

    def _step_if(self, finite: torch.Tensor) -> None:
        """The optimizer step, skipped unless `finite`. Fused optimizers (the default AdamW) read the
        skip flag on the device (`found_inf`, as under torch's GradScaler: no host sync); others read it
        on the host."""
        if self.optimizer.defaults.get("fused"):
            self.optimizer.found_inf = (~finite).float()
            self.optimizer.step()
        elif finite.item():
            self.optimizer.step()

    def policy_pass(self, rows: dict[str, torch.Tensor], normalizer: LossNormalizer, beta: float,
                    broadcast_width: int) -> dict[str, torch.Tensor]:
        """Forward and backward of one micro-batch of a minibatch (gradients accumulate); its loss,
        log-probs [b, N], entropies [b, N], clip and trained-token statistics. `rows` may carry the
        minibatch's `trained` mask (_with_trained_mask); without it the
        micro-batch is the whole minibatch. From a CUDA graph when they are on."""
        inputs, static = self.pass_inputs(rows, normalizer, beta, broadcast_width)
        if self.policy_graphs is None:
            return self.loss_and_backward(inputs, **static)
        self._keep_graphs_valid()
        out = self.policy_graphs(pad_rows(inputs, self.settings.graph_bucket), **static)
        width = rows["mask"].shape[1]
        return {name: t[:, :width] if t.dim() == 2 else t for name, t in out.items()}

    def pass_inputs(self, rows: dict[str, torch.Tensor], normalizer: LossNormalizer, beta: float,
                    broadcast_width: int) -> tuple[dict[str, torch.Tensor], dict]:
        """The tensors and the static arguments of `loss_and_backward` for one micro-batch."""
        inputs = {**rows, "num_tokens": normalizer.num_tokens, "beta": torch.full((), beta, device=self.device),
                  "entropy_coef": self.entropy_bonus.applied_coef()}
        static = dict(num_sequences=normalizer.num_sequences, use_kl="ref_logp" in rows and beta > 0,
                      broadcast_width=broadcast_width)
        return inputs, static

    def loss_and_backward(self, inputs: dict[str, torch.Tensor], num_sequences: int, use_kl: bool,
                          broadcast_width: int) -> dict[str, torch.Tensor]:
        """The GRPO loss of `inputs` (grpo_loss) and its backward (graph-safe: no host syncs)."""
        with self.autocast():
            logp, entropy = self.model_logprobs(self.policy, inputs, broadcast_width, with_entropy=True)
        logp, entropy, mask = logp.float(), entropy.float(), inputs["mask"]
        old = inputs["old_logp"].float() if "old_logp" in inputs else logp.detach()
        ref = inputs["ref_logp"].float() if use_kl else None
        normalizer = LossNormalizer(self.settings.loss_type, num_sequences, inputs["num_tokens"],
                                    self.settings.max_completion_length)
        loss, stats = grpo_loss(LossInputs(logp, old, ref, inputs["advantages"], mask, entropy, inputs["sampler_logp"],
                                           normalizer, inputs["beta"], inputs["entropy_coef"], inputs.get("trained")),
                                self.settings.loss)
        loss.backward()
        return {"loss": loss.detach().float(), "logp": logp.detach(), "entropy": entropy.detach(),
                "clip_low": stats.clip.low, "clip_high": stats.clip.high, "clip_region": stats.clip.region,
                "trained_entropy": stats.trained_entropy, "trained_tokens": stats.trained_tokens}

    def zero_grad(self) -> None:
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
        max_norm = self.settings.max_grad_norm or float("inf")
        return torch.nn.utils.clip_grad_norm_(self.policy.parameters(), max_norm)

    def sync_reference(self, step: int) -> None:
        """Move the reference toward the policy after `step` every kl.sync_every steps (kl.sync_alpha)."""
        if self.reference is None:
            return
        every = self.settings.reference_sync_every
        if not every or (step + 1) % every:
            return
        alpha = self.settings.reference_sync_alpha
        with torch.no_grad():
            for ref, cur in zip(self.reference.parameters(), self.policy.parameters()):
                ref.mul_(1 - alpha).add_(cur.to(ref.device, ref.dtype), alpha=alpha)

    def autocast(self):
        """The training passes' autocast (bf16 on CUDA unless model.dtype=float32)."""
        return autocast_for(self.device, self.settings.dtype)

    # ---------------------------------------------------------------- state
    def state_dict(self) -> dict:
        """The optimizer, the shuffle, the entropy bonus and, when it is synced to the policy, the reference."""
        state = {"optimizer": self.optimizer.state_dict(), "shuffle_generator": self.shuffle_generator.get_state(),
                 "entropy_bonus": self.entropy_bonus.state_dict()}
        if self.reference is not None and self.settings.reference_sync_every:
            state["reference"] = self.reference.state_dict()
        return state

    def load_state_dict(self, state: dict) -> None:
        load_state_keeping_settings(self.optimizer, state["optimizer"])
        self.shuffle_generator.set_state(state["shuffle_generator"])
        self.entropy_bonus.load_state_dict(state["entropy_bonus"])
        if "reference" in state:
            self.reference.load_state_dict(state["reference"])

    def close(self) -> None:
        """Free the graphs and the gradients and drop the models."""
        for graphs in (self.policy_graphs, self.logprob_graphs):
            if graphs is not None:
                graphs.close()
        self.policy.zero_grad(set_to_none=True)
        self.policy = self.reference = self.optimizer = None
