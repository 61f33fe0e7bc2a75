"""GRPO math against a slow reference written straight from the formulas."""
import math

import pytest
import torch

from rookworld.grpo.advantages import EMARewardNormalizer, criterion_advantages, group_advantages
from rookworld.grpo.kl import KLController, kl_per_token
from rookworld.grpo.loss import LossInputs, LossNormalizer, LossSettings, clip_stats, clipped_surrogate, grpo_loss
from rookworld.grpo.sampler_correction import sampler_weights
from rookworld.specs.options import ADVANTAGE_STDS, KL_ESTIMATORS, LOSS_TYPES, SAMPLER_CORRECTIONS, SCALE_REWARDS

EPS_LOW, EPS_HIGH, L_MAX = 0.2, 0.28, 7


def slow_kl(logp: float, ref: float, estimator: str) -> float:
    r = logp - ref
    return {"k1": r, "k2": 0.5 * r * r, "k3": math.exp(-r) - 1 + r}[estimator]


def slow_surrogate(logp, old: float, adv: float):
    """One token's clipped surrogate and its ratio (0-d tensors)."""
    ratio = torch.exp(logp - old)
    clipped = torch.clamp(ratio, 1 - EPS_LOW, 1 + EPS_HIGH)
    return -torch.min(ratio * adv, clipped * adv), ratio


def slow_kl_term(logp, ref: float, estimator: str):
    r = logp - ref
    return {"k1": r, "k2": 0.5 * r * r, "k3": torch.exp(-r) - 1 + r}[estimator]


def slow_loss(logp, old, ref, adv, mask, loss_type, beta, estimator):
    """The clipped surrogate + beta * KL alone: slow_objective with every other knob off."""
    plain = LossSettings(epsilon_low=EPS_LOW, epsilon_high=EPS_HIGH, top_entropy_quantile=1.0, sampler_correction="none",
                      sampler_cap=1.0, kl_estimator=estimator, kl_bias_correction=False, entropy_bonus=False)
    no_entropy = [[torch.zeros(()) for _ in row] for row in logp]
    return slow_objective(logp, no_entropy, old, ref, adv, mask, old, plain, loss_type, beta, 0.0)


def slow_aggregate(rows: list[list], loss_type: str):
    """Each row's masked token losses aggregated by loss_type (loss.py's table)."""
    all_tokens = [token for tokens in rows for token in tokens]
    if loss_type == "grpo":
        return sum(sum(tokens) / max(len(tokens), 1) for tokens in rows) / len(rows)
    if loss_type == "dr_grpo":
        return sum(all_tokens) / (len(rows) * L_MAX)
    return sum(all_tokens) / len(all_tokens)


def random_batch(seed=0, rows=4, tokens=6):
    g = torch.Generator().manual_seed(seed)
    logp = -torch.rand(rows, tokens, generator=g) * 3
    old = logp + 0.3 * torch.randn(rows, tokens, generator=g)
    ref = logp + 0.5 * torch.randn(rows, tokens, generator=g)
    adv = torch.randn(rows, generator=g)
    mask = torch.ones(rows, tokens)
    mask[0, 4:] = 0
    mask[2, 1:] = 0
    return logp, old, ref, adv, mask


@pytest.mark.parametrize("loss_type", ["grpo", "dr_grpo", "token_mean"])
@pytest.mark.parametrize("estimator", ["k1", "k2", "k3"])
def test_loss_and_gradient_match_slow_reference(loss_type, estimator):
    logp, old, ref, adv, mask = random_batch()
    beta = 0.1
    fast_logp = logp.clone().requires_grad_(True)
    per_token, _ = clipped_surrogate(fast_logp, old, adv, EPS_LOW, EPS_HIGH)
    per_token = per_token + beta * kl_per_token(fast_logp, ref, estimator)
    fast = LossNormalizer.for_batch(loss_type, mask, L_MAX).aggregate(per_token, mask)
    fast.backward()

    slow_logp = logp.clone().requires_grad_(True)
    cells = [[slow_logp[i, t] for t in range(logp.shape[1])] for i in range(logp.shape[0])]
    slow = slow_loss(cells, old.tolist(), ref.tolist(), adv.tolist(), mask.tolist(), loss_type, beta, estimator)
    slow.backward()
    assert fast.item() == pytest.approx(slow.item(), rel=1e-5, abs=1e-6)
    torch.testing.assert_close(fast_logp.grad, slow_logp.grad, rtol=1e-5, atol=1e-6)


def slow_quantile_threshold(values: list[float], quantile: float) -> float:
    """The (1 - quantile) quantile of `values`, interpolated linearly between the sorted values."""
    ordered = sorted(values)
    position = (1 - quantile) * (len(ordered) - 1)
    low, high = math.floor(position), math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def slow_sampler_weights(old, sampler, mask, mode, cap):
    """Per-row lists of TIS / MIS weights straight from sampler_correction.py's docstring."""
    def capped(w):
        return min(w, cap) if mode.endswith("truncate") else (w if w <= cap else 0.0)
    rows = []
    for i in range(len(old)):
        ratios = [old[i][t] - sampler[i][t] if mask[i][t] else 0.0 for t in range(len(old[i]))]
        if mode.startswith("sequence"):
            rows.append([capped(math.exp(sum(ratios)))] * len(ratios))
        else:
            rows.append([capped(math.exp(r)) for r in ratios])
    return rows


def slow_objective(logp, entropy, old, ref, adv, mask, sampler, spec, loss_type, beta, coef):
    """The whole per-token objective, one scalar per token: w_t * m_t * clipped surrogate + beta * KL_t
    (times the ratio with bias correction) - c * H_t * m_t, m_t the top-entropy mask; aggregated as slow_loss."""
    real = [entropy[i][t].item() for i in range(len(mask)) for t in range(len(mask[i])) if mask[i][t]]
    threshold = slow_quantile_threshold(real, spec.top_entropy_quantile)
    weights = (slow_sampler_weights(old, sampler, mask, spec.sampler_correction, spec.sampler_cap)
               if spec.sampler_correction != "none" else [[1.0] * len(row) for row in mask])
    rows = []
    for i in range(len(logp)):
        tokens = []
        for t in range(len(logp[i])):
            if not mask[i][t]:
                continue
            trained = 1.0 if entropy[i][t].item() >= threshold else 0.0
            surrogate, ratio = slow_surrogate(logp[i][t], old[i][t], adv[i])
            term = surrogate * trained * weights[i][t]
            kl = slow_kl_term(logp[i][t], ref[i][t], spec.kl_estimator)
            term = term + beta * (kl * ratio if spec.kl_bias_correction else kl)
            tokens.append(term - coef * entropy[i][t] * trained)
        rows.append(tokens)
    return slow_aggregate(rows, loss_type)


@pytest.mark.parametrize("loss_type,estimator,bias,correction,quantile", [
    ("grpo", "k3", True, "token_truncate", 0.5),
    ("dr_grpo", "k2", False, "sequence_mask", 1.0),
    ("token_mean", "k1", True, "token_mask", 0.3),
    ("token_mean", "k3", False, "sequence_truncate", 0.8),
])
def test_whole_objective_and_gradients_match_slow_reference(loss_type, estimator, bias, correction, quantile):
    logp, old, ref, adv, mask = random_batch(seed=5)
    g = torch.Generator().manual_seed(6)
    entropy, sampler = torch.rand(logp.shape, generator=g) * 2, old + 0.2 * torch.randn(logp.shape, generator=g)
    spec = LossSettings(epsilon_low=EPS_LOW, epsilon_high=EPS_HIGH, top_entropy_quantile=quantile,
                     sampler_correction=correction, sampler_cap=1.1, kl_estimator=estimator,
                     kl_bias_correction=bias, entropy_bonus=True)
    beta, coef = 0.1, 0.05
    fast_logp, fast_entropy = logp.clone().requires_grad_(True), entropy.clone().requires_grad_(True)
    fast, stats = grpo_loss(LossInputs(fast_logp, old, ref, adv, mask, fast_entropy, sampler,
                                       LossNormalizer.for_batch(loss_type, mask, L_MAX), beta=torch.tensor(beta),
                                       entropy_coef=torch.tensor(coef)), spec)
    fast.backward()

    slow_logp, slow_entropy = logp.clone().requires_grad_(True), entropy.clone().requires_grad_(True)
    cells = [[slow_logp[i, t] for t in range(logp.shape[1])] for i in range(logp.shape[0])]
    entropies = [[slow_entropy[i, t] for t in range(logp.shape[1])] for i in range(logp.shape[0])]
    slow = slow_objective(cells, entropies, old.tolist(), ref.tolist(), adv.tolist(), mask.tolist(),
                          sampler.tolist(), spec, loss_type, beta, coef)
    slow.backward()
    assert fast.item() == pytest.approx(slow.item(), rel=1e-5, abs=1e-6)
    torch.testing.assert_close(fast_logp.grad, slow_logp.grad, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(fast_entropy.grad, slow_entropy.grad, rtol=1e-5, atol=1e-6)
    assert stats.trained_tokens.item() < mask.sum().item() if quantile < 1 else stats.trained_tokens.item() == mask.sum().item()


def test_the_objective_without_a_kl_term_ignores_the_reference():
    logp, old, ref, adv, mask = random_batch(seed=7)
    spec = LossSettings(epsilon_low=EPS_LOW, epsilon_high=EPS_HIGH, top_entropy_quantile=1.0, sampler_correction="none",
                     sampler_cap=1.0, kl_estimator=None, kl_bias_correction=False, entropy_bonus=False)
    args = dict(advantages=adv, mask=mask, entropy=torch.ones_like(logp), sampler_logp=old,
                normalizer=LossNormalizer.for_batch("grpo", mask, L_MAX), beta=torch.tensor(0.5),
                entropy_coef=torch.tensor(0.1))
    with_ref, _ = grpo_loss(LossInputs(logp, old, ref, **args), spec)
    without, _ = grpo_loss(LossInputs(logp, old, None, **args), spec)
    per_token, _ = clipped_surrogate(logp, old, adv, EPS_LOW, EPS_HIGH)
    assert with_ref.item() == without.item() == args["normalizer"].aggregate(per_token, mask).item()


def test_minibatch_losses_add_up_to_the_batch_loss_for_token_mean():
    logp, old, _, adv, mask = random_batch(seed=3)
    per_token, _ = clipped_surrogate(logp, old, adv, EPS_LOW, EPS_HIGH)
    whole = LossNormalizer.for_batch("token_mean", mask, L_MAX)
    parts = whole.aggregate(per_token[:2], mask[:2]) + whole.aggregate(per_token[2:], mask[2:])
    assert parts.item() == pytest.approx(whole.aggregate(per_token, mask).item(), rel=1e-6)


def test_ratio_is_one_and_nothing_clipped_when_policy_equals_old():
    logp, _, _, adv, mask = random_batch()
    per_token, ratio = clipped_surrogate(logp, logp.clone(), adv, EPS_LOW, EPS_HIGH)
    assert torch.equal(ratio, torch.ones_like(ratio))
    assert clip_stats(ratio, adv, mask, EPS_LOW, EPS_HIGH).region.item() == 0.0
    torch.testing.assert_close(per_token, -adv.unsqueeze(1).expand_as(per_token))


@pytest.mark.parametrize("estimator", ["k1", "k2", "k3"])
def test_kl_is_exactly_zero_for_identical_log_probs(estimator):
    logp = -torch.rand(3, 5)
    assert torch.count_nonzero(kl_per_token(logp, logp.clone(), estimator)) == 0


@pytest.mark.parametrize("estimator", ["k1", "k2", "k3"])
def test_kl_estimators_match_their_formulas(estimator):
    logp, _, ref, _, _ = random_batch(seed=5)
    fast = kl_per_token(logp, ref, estimator)
    for i in range(logp.shape[0]):
        for t in range(logp.shape[1]):
            assert fast[i, t].item() == pytest.approx(slow_kl(logp[i, t].item(), ref[i, t].item(), estimator),
                                                      rel=1e-5, abs=1e-6)


def test_k3_is_non_negative_and_clamped():
    r = torch.linspace(-50, 50, 101)
    k3 = kl_per_token(r, torch.zeros_like(r), "k3")
    assert (k3 >= 0).all() and torch.isfinite(k3).all()


def test_clip_fractions_by_sign():
    ratio = torch.tensor([[0.5, 1.0, 1.5]])
    mask = torch.ones(1, 3)
    neg = clip_stats(ratio, torch.tensor([-1.0]), mask, EPS_LOW, EPS_HIGH)
    pos = clip_stats(ratio, torch.tensor([1.0]), mask, EPS_LOW, EPS_HIGH)
    assert neg.low.item() == pytest.approx(1 / 3) and neg.high.item() == 0
    assert pos.high.item() == pytest.approx(1 / 3) and pos.low.item() == 0


def test_zero_variance_group_gets_zero_advantage_and_is_counted():
    rewards = torch.tensor([-0.3, -0.3, -0.3, 0.0, 1.0, 0.5])   # -0.3 leaves a float residue when centred
    for scale in ("group", "batch", "none"):
        adv = group_advantages(rewards, group_size=3, scale_rewards=scale)
        assert torch.count_nonzero(adv.values[:3]) == 0
        assert adv.zero_std_groups.tolist() == [True, False]
        assert adv.frac_zero_std == 0.5


def test_group_advantages_formulas():
    rewards = torch.tensor([0.0, 1.0, 2.0, 4.0])
    half_sqrt2 = 2 ** -0.5  # a pair's sample std is |r1 - r2| / sqrt(2): advantages +-1/sqrt(2), as in TRL
    group = group_advantages(rewards, 2, "group").values
    torch.testing.assert_close(group, torch.tensor([-half_sqrt2, half_sqrt2, -half_sqrt2, half_sqrt2]),
                               atol=1e-3, rtol=0)
    population = group_advantages(rewards, 2, "group", advantage_std="population").values
    torch.testing.assert_close(population, torch.tensor([-1.0, 1.0, -1.0, 1.0]), atol=1e-3, rtol=0)
    none = group_advantages(rewards, 2, "none").values
    torch.testing.assert_close(none, torch.tensor([-0.5, 0.5, -1.0, 1.0]))
    assert torch.equal(group_advantages(rewards, 2, "none", advantage_std="population").values, none)
    batch = group_advantages(rewards, 2, "batch").values
    torch.testing.assert_close(batch, none / (rewards.std() + 1e-4))
    batch_population = group_advantages(rewards, 2, "batch", advantage_std="population").values
    torch.testing.assert_close(batch_population, none / (rewards.std(unbiased=False) + 1e-4))


def test_group_advantages_match_trl_at_group_size_8():
    """TRL's GRPOTrainer: (r - mean) / (std + 1e-4) with torch's default (sample) std per group."""
    rewards = torch.tensor([0.0, 0.2, 0.2, 0.5, 1.0, 1.0, 0.0, 0.7])
    grouped = rewards.view(-1, 8)
    trl = (grouped - grouped.mean(1, keepdim=True)) / (grouped.std(1, keepdim=True) + 1e-4)
    torch.testing.assert_close(group_advantages(rewards, 8, "group").values, trl.reshape(-1))
    with pytest.raises(ValueError, match="advantage_std='unbiased'"):
        group_advantages(rewards, 8, "group", advantage_std="unbiased")


def test_kl_controller_warmup_and_adaptation():
    fixed = KLController("fixed", 0.1, warmup_steps=2, warmup_factor=0.0)
    assert [fixed.beta(s) for s in range(3)] == [0.0, 0.0, 0.1]
    adaptive = KLController("adaptive", 0.1, 0, 1.0, target=0.1, horizon=10)
    adaptive.update(1.0)             # far above target: error clipped at +0.2
    assert adaptive.beta(0) == pytest.approx(0.1 * 1.02)
    adaptive.update(0.0)             # below target: error clipped at -0.2
    assert adaptive.beta(0) == pytest.approx(0.1 * 1.02 * 0.98)
    assert KLController("none", 0.5, 0, 1.0).beta(0) == 0.0


def test_ema_reward_normalizer():
    norm = EMARewardNormalizer(momentum=0.5)
    out = norm(torch.tensor([0.0, 2.0]))
    torch.testing.assert_close(out, torch.tensor([-1.0, 1.0]))
    norm(torch.tensor([2.0, 2.0]))
    assert norm.mean == pytest.approx(1.5) and norm.std == pytest.approx(0.5)


def test_the_grpo_modules_take_every_option_the_specs_accept():
    """The specs check a config against specs/options.py; the grpo modules dispatch on the same strings."""
    rewards, mask = torch.tensor([0.0, 1.0, 0.5, 0.5]), torch.ones(4, 3)
    logp, other = torch.full((4, 3), -1.0), torch.full((4, 3), -1.5)
    for scale in SCALE_REWARDS:
        for std in ADVANTAGE_STDS:
            assert group_advantages(rewards, 2, scale, std).values.shape == (4,)
            assert criterion_advantages(torch.rand(4, 2), torch.ones(2), 2, std).values.shape == (4,)
    for loss_type in LOSS_TYPES:
        assert LossNormalizer.for_batch(loss_type, mask, 3).aggregate(logp, mask).isfinite()
    for estimator in KL_ESTIMATORS:
        assert kl_per_token(logp, other, estimator).shape == (4, 3)
    for mode in SAMPLER_CORRECTIONS[1:]:  # "none" applies no weights
        assert sampler_weights(logp, other, mask, mode, cap=2.0).isfinite().all()
    with pytest.raises(ValueError, match="mode='none'"):
        sampler_weights(logp, other, mask, "none", cap=2.0)
