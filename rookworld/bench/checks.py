"""The benchmark's self-check: the fast path against the plain path on the benchmark's own model.

- float32 (TF32 off), greedy and sampled with one seed: StaticDecoder (CUDA graphs on CUDA, the
  Triton kernels whenever `triton_kernels` is reported true, at any head size) vs
  `sampling.generate` must give identical tokens; their log-probs agree to float32 rounding.
- bfloat16 (the training setting): graph replay vs the same decoder run eagerly must give identical
  tokens (same kernels, same generator stream); against the plain sampler under autocast (float32
  residual stream) most tokens must agree: bf16 rounding may flip near-ties of a random model's
  flat distributions, after which the rows diverge.
- Log-probs and loss: the fused Triton log-probs vs the chunked ones under autocast, on a sampled
  batch: max |difference| of log-probs, relative difference of a GRPO loss and of its gradient.
- CUDA graphs of the update (grpo.cuda_graphs): on a sampled batch, the replayed forward + backward
  (padded to the graph buckets) vs the eager one on the unpadded batch: loss and gradient
  differences; two replays must give the identical loss and gradients equal to rounding.
- Shuffled micro-batches: the rows of a sampled batch in a shuffled order, in micro-batches of
  several sizes (and whole groups in reversed group order, the shared-prompt fast path), through the
  learner's log-prob pass (CUDA graphs when on) against the same pass over the whole batch: every
  completion must be scored against its own prompt. A row scored against another row's prompt moves
  its log-probs by nats; the same rows in another batch shape differ by bf16 rounding only.

Every figure a check reports is gated by TOLERANCES (the reasoning behind each bound:
docs/lab/performance-rounds.md, Self-check tolerances); `ok` is false and `failed` names each check and figure out of bounds.
"""
from __future__ import annotations

import contextlib

import torch

from rookworld.grpo.kl import kl_per_token
from rookworld.grpo.loss import LossNormalizer, clipped_surrogate
from rookworld.model.decode_kernels import kernels_available
from rookworld.model.fast_sampling import StaticDecoder
from rookworld.model.fused_logprobs import fused_available
from rookworld.model.logprobs import token_logprobs
from rookworld.model.pass_graphs import ensure_grads
from rookworld.model.sampling import Generation, generate
from rookworld.judge.rollout import prompt_ids

CHECK_TOKENS = 48  # completion tokens per row in the checks (the plain sampler is slow)
SEED = 1234
ALL_ROWS = "rows"  # identical_rows must equal the check's rows

# check -> figure -> (rule, bound); docs/lab/performance-rounds.md justifies each bound.
SUBSET_LOGPROB_TOLERANCE = 0.1  # nats: bf16 rounding of another batch shape; a wrong prompt moves nats
TOLERANCES = {
    "fp32_greedy": {"identical_rows": ("==", ALL_ROWS), "max_logprob_diff": ("<=", 1e-4)},
    "fp32_sampled": {"identical_rows": ("==", ALL_ROWS), "max_logprob_diff": ("<=", 1e-4)},
    "bf16_graph_vs_eager_sampled": {"identical_rows": ("==", ALL_ROWS), "max_logprob_diff": ("<=", 0.0)},
    "bf16_vs_plain_autocast_greedy": {"token_agreement": (">=", 0.95), "max_logprob_diff": ("<=", 0.1)},
    "fused_logprobs": {"max_logprob_diff": ("<=", 1e-4), "loss_rel_diff": ("<=", 1e-4),
                       "grad_rel_diff": ("<=", 0.03), "grad_cosine": (">=", 0.9995)},
    "graphed_update": {"replays_same_loss": ("==", True), "replays_grad_cosine": (">=", 0.99999),
                       "loss_rel_diff": ("<=", 1e-3), "max_logprob_diff": ("<=", 0.15),
                       "grad_rel_diff": ("<=", 0.05), "grad_cosine": (">=", 0.999)},
    "shuffled_micro_batches": {"max_logprob_diff": ("<=", SUBSET_LOGPROB_TOLERANCE)},
}


def self_check(trainer) -> dict:
    cfg, policy, tokenizer = trainer.settings, trainer.policy, trainer.tokenizer
    rows = trainer.sample_rows()
    request = dict(prompts=[prompt_ids(tokenizer, p) for p in rows],
                   max_new_tokens=[min(CHECK_TOKENS, int(cfg.sampling.max_new_tokens[p.task])) for p in rows],
                   stop_ids=tokenizer.stop_ids, pad_id=tokenizer.pad_id)
    device = trainer.device
    results: dict = {"head_dim": policy.config.head_dim, "triton_kernels": kernels_available(device)}
    with full_fp32():
        for name, settings in (("greedy", dict(greedy=True)), ("sampled", dict(temperature=1.0))):
            plain = generate(policy, generator=seeded(device), **request, **settings)
            fast = run_decoder(StaticDecoder(policy, dtype=torch.float32), request, settings, device)
            results[f"fp32_{name}"] = compare(plain, fast)
    if device.type == "cuda":
        sampled = dict(temperature=1.0)
        graphs = run_decoder(StaticDecoder(policy), request, sampled, device)
        eager = run_decoder(StaticDecoder(policy, use_graphs=False), request, sampled, device)
        results["bf16_graph_vs_eager_sampled"] = compare(eager, graphs)
        with trainer.learner.autocast():
            plain = generate(policy, generator=seeded(device), greedy=True, **request)
        results["bf16_vs_plain_autocast_greedy"] = compare(plain, run_decoder(StaticDecoder(policy), request,
                                                                              dict(greedy=True), device))
        if fused_available(device):
            results["fused_logprobs"] = compare_losses(trainer, graphs)
        if trainer.learner.policy_graphs is not None:
            results["graphed_update"] = compare_graphed_update(trainer, graphs)
    sampled_batch = graphs if device.type == "cuda" else fast
    results["shuffled_micro_batches"] = compare_shuffled_micro_batches(trainer, sampled_batch)
    results["failed"] = [line for name, result in results.items() if isinstance(result, dict)
                         for line in gate(name, result)]
    results["ok"] = not results["failed"]
    return results


def gate(name: str, result: dict) -> list[str]:
    """Each figure of check `name` outside its tolerance, as `check: figure=value (rule bound)`. A check
    without tolerances passes only on its own `ok`."""
    if name not in TOLERANCES:
        return [] if result.get("ok") is True else [f"{name}: no tolerance stated and no ok=true"]
    failures = []
    for figure, (rule, bound) in TOLERANCES[name].items():
        value, limit = result.get(figure), result["rows"] if bound == ALL_ROWS else bound
        within = value is not None and {"==": value == limit, "<=": value <= limit, ">=": value >= limit}[rule]
        if not within:
            failures.append(f"{name}: {figure}={value} (must be {rule} {limit})")
    return failures


def run_decoder(decoder: StaticDecoder, request: dict, settings: dict, device: torch.device) -> Generation:
    try:
        return decoder.generate(generator=seeded(device), **request, **settings)
    finally:
        decoder.close()


def seeded(device: torch.device) -> torch.Generator:
    return torch.Generator(device=device).manual_seed(SEED)


def compare(reference: Generation, other: Generation) -> dict:
    """Identical rows (tokens and masks), token agreement, log-prob difference where both agree."""
    width = min(reference.completion_ids.shape[1], other.completion_ids.shape[1])
    same_rows = [torch.equal(a, b) and torch.equal(m, n) for a, b, m, n in zip(
        reference.completion_ids, other.completion_ids, reference.completion_mask, other.completion_mask)]
    mask = reference.completion_mask[:, :width]
    agree = (reference.completion_ids[:, :width] == other.completion_ids[:, :width]) & mask
    both = torch.tensor(same_rows, device=mask.device)[:, None] & mask
    diff = (reference.logprobs[:, :width] - other.logprobs[:, :width]).abs()[both]
    return {"identical_rows": sum(same_rows), "rows": len(same_rows),
            "token_agreement": round(float(agree.sum() / mask.sum().clamp(min=1)), 4),
            "max_logprob_diff": float(diff.max()) if diff.numel() else None}


def compare_losses(trainer, gen: Generation) -> dict:
    """A GRPO loss (clipped surrogate + KL to a perturbed reference) and its gradient, both log-prob paths."""
    mask = gen.completion_mask.float()
    advantages = torch.randn(mask.shape[0], generator=seeded(trainer.device), device=trainer.device)
    outputs = {fused: loss_and_gradient(trainer, gen, mask, advantages, fused) for fused in (False, True)}
    (loss_a, grad_a, logp_a), (loss_b, grad_b, logp_b) = outputs[False], outputs[True]
    return {"max_logprob_diff": float((logp_a - logp_b).abs()[mask.bool()].max()),
            "loss_plain": loss_a, "loss_fused": loss_b,
            "loss_rel_diff": abs(loss_a - loss_b) / max(abs(loss_a), 1e-12),
            "grad_rel_diff": float((grad_a - grad_b).norm() / grad_a.norm()),
            "grad_cosine": cosine(grad_a, grad_b)}


def loss_and_gradient(trainer, gen: Generation, mask: torch.Tensor, advantages: torch.Tensor, fused: bool):
    policy = trainer.policy
    policy.zero_grad(set_to_none=True)
    with trainer.learner.autocast():
        logp = token_logprobs(policy, gen.input_ids, gen.attention_mask, gen.position_ids, gen.prompt_length,
                              fused=fused).float()
    old = logp.detach()
    per_token, _ = clipped_surrogate(logp, old, advantages, 0.2, 0.28)
    per_token = per_token + 0.04 * kl_per_token(logp, old - 0.1, "k3")
    loss = LossNormalizer.for_batch("grpo", mask, mask.shape[1]).aggregate(per_token, mask)
    loss.backward()
    grad = torch.cat([p.grad.flatten() for p in policy.parameters() if p.grad is not None])
    policy.zero_grad(set_to_none=True)
    return float(loss.detach()), grad, logp.detach()


def compare_graphed_update(trainer, gen: Generation) -> dict:
    """The update's forward + backward from CUDA graphs (first call eager + capture, then two replays)
    against the eager pass on the unpadded rows, with a KL term to a perturbed reference."""
    learner = trainer.learner
    mask = gen.completion_mask.float()
    advantages = torch.randn(mask.shape[0], generator=seeded(trainer.device), device=trainer.device)
    with torch.no_grad():
        batch = learner.make_batch(gen, advantages)
    batch.ref_logp = (batch.ref_logp if batch.ref_logp is not None else torch.zeros_like(mask)) - 0.1
    everything = torch.arange(mask.shape[0])
    rows, broadcast_width = batch.rows(everything), batch.broadcast_width(everything)
    normalizer = LossNormalizer.for_batch(trainer.settings.grpo.loss_type, mask, mask.shape[1])
    beta = 0.04
    captures_before = learner.policy_graphs.captures

    def gradient() -> torch.Tensor:
        return torch.cat([p.grad.flatten().clone() for p in trainer.policy.parameters()])

    outputs = []
    for _ in range(3):
        learner.zero_grad()
        outputs.append((learner.policy_pass(rows, normalizer, beta, broadcast_width), gradient()))
    ensure_grads(trainer.policy.parameters())
    learner.zero_grad()
    inputs, static = learner.pass_inputs(rows, normalizer, beta, broadcast_width)
    eager = learner.loss_and_backward(inputs, **static)
    eager_grad = gradient()
    learner.zero_grad()
    (_, _), (replay, replay_grad), (again, again_grad) = outputs
    loss_eager, loss_replay = float(eager["loss"]), float(replay["loss"])
    result = {"captured": learner.policy_graphs.captures - captures_before, "broadcast_width": broadcast_width,
              "replays_same_loss": bool(torch.equal(replay["loss"], again["loss"])),
              "replays_grad_cosine": cosine(replay_grad, again_grad),
              "loss_eager": loss_eager, "loss_replay": loss_replay,
              "loss_rel_diff": abs(loss_eager - loss_replay) / max(abs(loss_eager), 1e-12),
              "max_logprob_diff": float((eager["logp"] - replay["logp"]).abs()[mask.bool()].max()),
              "grad_rel_diff": float((eager_grad - replay_grad).norm() / eager_grad.norm()),
              "grad_cosine": cosine(eager_grad, replay_grad)}
    # The forward is deterministic; attention backward kernels add in a varying order (atomics),
    # so two replays' gradients agree to rounding, not bit for bit.
    result["ok"] = not gate("graphed_update", result)
    return result


def compare_shuffled_micro_batches(trainer, gen: Generation) -> dict:
    """Log-probs of row subsets (a shuffled order in micro-batches of 1, 2, 3 and half the rows; whole
    groups in reversed order) against the whole batch's, both through the learner's no-grad pass."""
    learner = trainer.learner
    with torch.no_grad():
        batch = learner.make_batch(gen)
        everything = torch.arange(len(batch.groups))
        whole = learner.logprobs("policy", batch.rows(everything), batch.broadcast_width(everything))
        shuffled = torch.randperm(len(everything), generator=torch.Generator().manual_seed(SEED))
        size = trainer.settings.grpo.group_size
        reversed_groups = everything.view(-1, size).flip(0).flatten()
        subsets = [part for micro in (1, 2, 3, len(everything) // 2) for part in shuffled.split(micro)]
        subsets += list(reversed_groups.split(2 * size))
        worst, fast_path = 0.0, 0
        for index in subsets:
            broadcast_width = batch.broadcast_width(index)
            fast_path += broadcast_width > 0
            logp = learner.logprobs("policy", batch.rows(index), broadcast_width)
            mask = batch.mask[index.to(trainer.device)] > 0
            worst = max(worst, float((logp - whole[index.to(trainer.device)]).abs()[mask].max()))
    if learner.logprob_graphs is not None:
        learner.logprob_graphs.close()  # the subsets' shapes are not the run's: capture those anew
    return {"subsets": len(subsets), "fast_path_subsets": fast_path, "max_logprob_diff": worst,
            "tolerance": SUBSET_LOGPROB_TOLERANCE, "ok": worst <= SUBSET_LOGPROB_TOLERANCE}


def cosine(a: torch.Tensor, b: torch.Tensor) -> float:
    return float(torch.nn.functional.cosine_similarity(a, b, dim=0))


@contextlib.contextmanager
def full_fp32():
    """float32 matrix products without TF32, so both paths compute the same function exactly."""
    previous = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = previous
