"""The GRPO loop end to end on the tiny model, through the real training path."""
import math
import os
import importlib
import re
from pathlib import Path
from dataclasses import replace
import subprocess
import sys
import time

import pytest
import torch

from hydra import compose, initialize_config_dir

from rookworld.app.config import load_run, resumed_config, validate, validate_bench, validate_sft
from rookworld.specs.rules import ConfigError
from rookworld.tasks import Problem
from rookworld.tasks.arbiter import render_arbiter_completion
from rookworld.data.positions import load_arbiter_problems, load_policy_problems
from rookworld.tasks import perfect_completion
from rookworld.model.sampling import Generation
from rookworld.judge.rollout import Rollout
from rookworld.judge.scoring import StepScores
from rookworld.tracking import make_tracker
from rookworld.run.build import build_run
from rookworld.run.resume import TRAINER_STATE_FILE, check_resume, save_config
from rookworld.model.hub import load_pretrained
from rookworld.train import run
from train_helpers import CONF_DIR, tiny_config


def make_trainer(tmp_path, *overrides):
    cfg = tiny_config(tmp_path, *overrides)
    return build_run(load_run(cfg), make_tracker(cfg))


@pytest.mark.slow
def test_first_update_has_ratio_one_and_kl_zero(tmp_path):
    trainer = make_trainer(tmp_path, "task_mix=env_only", "kl=fixed", "kl.coef=0.1")
    metrics, nonfinite = trainer.train_step(0)
    assert not nonfinite
    assert metrics["kl"] == 0.0
    assert metrics["clip_ratio/region_mean"] == 0.0
    assert metrics["reward_std"] > 0     # the shipped model gives the step a real signal
    second, _ = trainer.train_step(1)
    assert second["kl"] > 0.0            # the first update moved the policy away from the reference


def test_zero_variance_groups_are_counted(tmp_path):
    trainer = make_trainer(tmp_path, "task_mix=policy_only")   # P: cut at 24 tokens: all malformed
    metrics, _ = trainer.train_step(0)
    assert metrics["frac_reward_zero_std"] == 1.0
    assert metrics["reward_std"] < 1e-6 and metrics["grad_norm"] == 0.0


def test_a_phase_entered_twice_is_timed_in_total_and_step_time_is_the_sum_of_the_phases(tmp_path, monkeypatch):
    """Scoring runs twice a step (the rewards, then the advantages, here with the EMA reward
    normalisation): time/scoring holds both."""
    trainer = make_trainer(tmp_path, "task_mix=policy_only", "grpo.reward_norm.enabled=true")
    pause = 0.05
    scored_rows, normalize = StepScores.scored_rows, trainer.reward_norm
    monkeypatch.setattr(StepScores, "scored_rows", lambda self: (time.sleep(pause), scored_rows(self))[1])
    monkeypatch.setattr(trainer, "reward_norm", lambda rewards: (time.sleep(pause), normalize(rewards))[1])
    metrics, _ = trainer.train_step(0)
    assert metrics["time/scoring"] >= 2 * pause
    phases = [value for name, value in metrics.items() if name.startswith("time/")]
    assert set(name for name in metrics if name.startswith("time/")) == {
        "time/generation", "time/logprobs", "time/scoring", "time/update"}
    assert metrics["step_time"] == pytest.approx(sum(phases), abs=1e-9)


def test_dynamic_sampling_times_and_reports_every_round(tmp_path, monkeypatch):
    """Three rounds of all-malformed P: groups: time/generation holds every round's generation,
    completions/* and tokens_per_s cover every generated row (as reward does), and
    frac_reward_zero_std is measured on the sampled groups before the filter."""
    trainer = make_trainer(tmp_path, "task_mix=policy_only", "grpo.dynamic_sampling.enabled=true",
                           "grpo.dynamic_sampling.max_rounds=3")
    spent, tokens, rows = [], [], []
    generate = trainer.generate

    def timed(problems, on_finished=None):
        start = time.perf_counter()
        rollout = generate(problems, on_finished=on_finished)
        time.sleep(0.05)
        spent.append(time.perf_counter() - start)
        tokens.append(rollout.completion_lengths.sum().item())
        rows.append(len(problems))
        return rollout

    monkeypatch.setattr(trainer, "generate", timed)
    metrics, _ = trainer.train_step(0)
    assert metrics["dynamic_sampling/rounds"] == 3 == len(spent)
    assert sum(spent) <= metrics["time/generation"] < sum(spent) + 1.0
    assert metrics["completions/num_tokens"] == sum(tokens)
    assert metrics["tokens_per_s"] == pytest.approx(sum(tokens) / metrics["time/generation"])
    assert metrics["frac_reward_zero_std"] == 1.0 and metrics["dynamic_sampling/kept_share"] == 0.0
    phases = [value for name, value in metrics.items() if name.startswith("time/")]
    assert metrics["step_time"] == pytest.approx(sum(phases), abs=1e-9)


def test_kl_in_the_reward_steers_the_controller_by_its_own_estimator_and_frac_zero_std_stays_raw(tmp_path,
                                                                                               monkeypatch):
    """kl.placement=reward with k1: the adaptive controller reads the penalty's own estimator
    (kl/reward_penalty, as verl), not the k3 `kl` metric; the penalty makes the shaped rewards of an
    all-malformed group differ, but frac_reward_zero_std counts the raw rewards' groups."""
    trainer = make_trainer(tmp_path, "task_mix=policy_only", "kl=adaptive", "kl.placement=reward",
                           "kl.estimator=k1", "kl.coef=0.5", "grpo.entropy.coef=0.05", "optimizer.lr=1e-3")
    readings = []
    update = trainer.kl.update
    monkeypatch.setattr(trainer.kl, "update", lambda observed: (readings.append(observed), update(observed))[1])
    for step in range(2):
        metrics, _ = trainer.train_step(step)
        assert readings[-1] == metrics["kl/reward_penalty"]
        assert metrics["frac_reward_zero_std"] == 1.0
    assert metrics["kl/reward_penalty"] != 0.0 and metrics["kl/reward_penalty"] != metrics["kl"]


def test_old_logprobs_equal_the_training_forward_exactly(tmp_path):
    """With a reused batch the stored old log-probs must equal the gradient pass: ratio exactly 1."""
    trainer = make_trainer(tmp_path, "kl=fixed", "grpo.num_iterations=2")
    problems = trainer.sample_rows()  # groups of rows that share a prompt
    from rookworld.judge.rollout import generate_for_problems
    rollout = generate_for_problems(trainer.decoder, trainer.tokenizer, problems, trainer.max_new_tokens,
                                    generator=trainer.generator)
    gen = rollout.generation
    batch = trainer.learner.make_batch(gen, torch.ones(len(problems)))
    everything = torch.arange(len(problems))
    logp, _ = trainer.learner.model_logprobs(trainer.policy, batch.rows(everything), batch.broadcast_width(everything),
                                             with_entropy=True)
    mask = batch.mask.bool()
    ratio = torch.exp(logp - batch.old_logp)[mask]
    assert torch.equal(ratio, torch.ones_like(ratio))
    kl = (batch.ref_logp - batch.old_logp)[mask]
    assert torch.count_nonzero(kl) == 0


def scripted_rollout(trainer, problems: list[Problem], texts: list[str]) -> Rollout:
    """A rollout whose completions are the given texts, tokenised exactly as the model would emit them."""
    tok = trainer.tokenizer
    prompts = [[tok.eos_id] + tok.encode(p.prompt_text) for p in problems]
    completions = [tok.encode(t) + [tok.newline_id] for t in texts]
    width_p, width_c = max(map(len, prompts)), max(map(len, completions))
    ids = torch.full((len(problems), width_p + width_c), tok.pad_id)
    attn = torch.zeros_like(ids, dtype=torch.bool)
    for row, (p, c) in enumerate(zip(prompts, completions)):
        ids[row, width_p - len(p):width_p] = torch.tensor(p)
        ids[row, width_p:width_p + len(c)] = torch.tensor(c)
        attn[row, width_p - len(p):width_p + len(c)] = True
    gen = Generation(input_ids=ids, attention_mask=attn, position_ids=(attn.cumsum(1) - 1).clamp(min=0),
                     prompt_length=width_p, completion_ids=ids[:, width_p:], completion_mask=attn[:, width_p:],
                     logprobs=torch.zeros(len(problems), width_c))
    return Rollout(problems=problems, generation=gen)


def test_ground_truth_reaches_the_scorer_through_the_training_path(tmp_path):
    trainer = make_trainer(tmp_path)
    policy_problem = load_policy_problems("validation")[0]
    arbiter_problem = load_arbiter_problems("validation")[0]
    truth = policy_problem.truth
    legal_wrong = next(c.move for c in truth.candidates if c.move not in truth.best_moves)
    wrong_policy = perfect_completion(policy_problem).replace(f"B: {truth.best_move}", f"B: {legal_wrong}")
    problems = [policy_problem, policy_problem, arbiter_problem, arbiter_problem]
    texts = [perfect_completion(policy_problem), wrong_policy, perfect_completion(arbiter_problem),
             render_arbiter_completion(replace(arbiter_problem.truth, terminated=not arbiter_problem.truth.terminated))]
    rollout = scripted_rollout(trainer, problems, texts)
    scores = StepScores(trainer.tokenizer, trainer.reward_fn, rollout.problems)
    scores.decode_rest(rollout)
    rewards, scored = scores.finish()
    assert rewards[0] == pytest.approx(1.0) and rewards[2] == pytest.approx(1.0)
    assert rewards[1] < rewards[0] and rewards[3] < rewards[2]


@pytest.mark.slow
def test_absurd_learning_rate_ends_as_kl_failure(tmp_path, capsys):
    result = run(tiny_config(tmp_path, "task_mix=env_only", "steps=6", "optimizer.lr=1.0",
                             "optimizer.warmup_steps=0", "kl.max=1.0", "kl.max_steps_above=1"))
    assert result.outcome == "kl_failure"
    assert result.objective == -1.0 and result.steps < 6
    assert "outcome: kl_failure" in capsys.readouterr().out


@pytest.mark.parametrize("optimizer", ["adamw", "sgd"])  # fused AdamW skips on the device, SGD on the host
@pytest.mark.slow
def test_injected_nan_ends_as_nan_failure(tmp_path, capsys, optimizer):
    cfg = tiny_config(tmp_path, "steps=6", "guards.max_nonfinite_steps=2", f"optimizer={optimizer}")
    trainer = build_run(load_run(cfg), make_tracker(cfg))
    poison = lambda module, args, output: output * float("nan") if torch.is_grad_enabled() else output  # noqa: E731
    trainer.policy.ln_f.register_forward_hook(poison)   # only the gradient pass sees NaN
    result = trainer.fit()
    assert result.outcome == "nan_failure" and result.steps == 2
    assert all(torch.isfinite(p).all() for p in trainer.policy.parameters())  # skipped updates never applied
    assert "outcome: nan_failure" in capsys.readouterr().out


@pytest.mark.parametrize("device", [
    "cpu", pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA"))])
def test_an_update_that_breaks_the_weights_ends_as_nan_failure_with_the_last_finite_weights(tmp_path, capsys, device):
    """Step 1's loss and gradient are finite; its update makes the weights so large that from step 2 on
    the sampler meets non-finite logits (CPU: the plain sampler; CUDA: the fused one, argmax over NaN)."""
    cfg = tiny_config(tmp_path, "optimizer=sgd", "optimizer.lr=1e30", "steps=6", "task_mix=env_only", f"device={device}",
                      "eval.num_policy=1", "eval.num_arbiter=1")
    trainer = build_run(load_run(cfg), make_tracker(cfg))
    start = [p.detach().clone() for p in trainer.policy.parameters()]
    result = trainer.fit()
    assert (result.outcome, result.steps) == ("nan_failure", 4)  # steps 2, 3, 4: guards.max_nonfinite_steps=3
    assert "3 non-finite steps in a row; the policy keeps its last finite weights" in result.reason
    # the last weights the sampler ran on without non-finite logits: the starting ones
    assert all(torch.equal(a, b) for a, b in zip(start, trainer.policy.parameters(), strict=True))
    assert "outcome: nan_failure" in capsys.readouterr().out


@pytest.mark.parametrize("overrides", [
    ["kl=adaptive", "kl.estimator=k2", "optimizer.lr=3e-6", "task_mix=env_only", "reward=exact",
     "objective.metric=eval/A/score"],
    ["kl=none", "optimizer=sgd", "task_mix=policy_only", "grpo.loss_type=dr_grpo", "grpo.scale_rewards=none"],
    ["kl=fixed", "kl.estimator=k1", "grpo.loss_type=token_mean", "grpo.num_iterations=2",
     "grpo.num_minibatches=2", "grpo.micro_batch_size=2", "grpo.reward_norm.enabled=true",
     "kl.sync_every=1", "sampling.top_k=20", "sampling.top_p=0.9"],
])
@pytest.mark.slow
def test_group_overrides_compose_and_run(tmp_path, overrides):
    result = run(tiny_config(tmp_path, *overrides))
    assert result.outcome == "success" and result.steps == 2
    assert math.isfinite(result.objective)
    metric = next((o.partition("=")[2] for o in overrides if o.startswith("objective.metric=")), "eval/score")
    assert result.objective == result.final_eval[metric]  # objective.metric picks it, and its standard error
    assert result.objective_se == result.final_eval.get(f"{metric}_se")


def test_an_objective_metric_the_evaluation_does_not_log_fails_at_the_first_evaluation(tmp_path):
    trainer = build_run(load_run(tiny_config(tmp_path, "objective.metric=eval/P/nonsense")), make_tracker(
        tiny_config(tmp_path)))
    with pytest.raises(ConfigError, match=r"objective.metric='eval/P/nonsense': the evaluation logs no such metric"):
        trainer.evaluate(0)


@pytest.mark.parametrize("override, key", [
    ("grpo.group_size=1", "grpo.group_size=1"),
    ("optimizer.lr=-1e-5", "optimizer.lr=-1e-05"),
    ("kl=fixed kl.estimator=k9", "kl.estimator='k9'"),
    ("task_mix.P=0.5", "task_mix="),
    ("steps=abc", "steps='abc': expected an integer"),
    ("kl=fixed kl.kind=adaptive", "kl.kind='adaptive': the kl option is fixed"),
    ("objective.metric=score", "objective.metric='score': must name an evaluation metric"),
    ("eval.num_arbiter=1500", "eval.arbiter_cases.illegal=0.7: 1050 of eval.num_arbiter=1500 asked, the held-out "
                              "validation part has 300"),
])
@pytest.mark.slow
def test_invalid_values_fail_before_the_model_loads_with_one_line(tmp_path, override, key):
    """... and leave nothing: the run folder Hydra made before the check is removed, no MLflow store."""
    proc = subprocess.run([sys.executable, "-m", "rookworld.train", "experiment=quickstart", *override.split()],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and key in lines[0], proc.stderr
    assert proc.stdout == "" and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("argv, line", [
    (["sweeps=smoke"], "sweeps=smoke: a sweep preset runs as a multirun: python -m rookworld.train -m sweeps=smoke"),
    (["experiment=quickstart", "model.path=/nope/model"],
     "model.path='/nope/model': no such folder (a local hub-format model folder)"),
])
def test_a_refused_run_says_why_in_one_line_before_any_model_loads_and_leaves_no_folder(tmp_path, argv, line):
    proc = subprocess.run([sys.executable, "-m", "rookworld.train", *argv], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path)
    assert proc.returncode == 2 and proc.stderr.splitlines() == [f"rookworld: error: {line}"], proc.stderr
    assert proc.stdout == "" and list(tmp_path.iterdir()) == []  # no "loading ..." line, no run folder


def test_a_run_that_wrote_to_its_folder_keeps_it(tmp_path):
    """A refused run's folder goes only while it holds nothing but Hydra's files and an empty log."""
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "notes.txt").write_text("the user's\n")
    proc = subprocess.run([sys.executable, "-m", "rookworld.train", "experiment=quickstart", "grpo.group_size=1",
                           "hydra.run.dir=run"], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 2
    assert (tmp_path / "run" / "notes.txt").exists()
    assert (tmp_path / "run" / "train.log").read_text().strip().endswith(proc.stderr.strip())


@pytest.mark.parametrize("override, line", [
    ("model=rookworld_tyni", "model=rookworld_tyni: no option 'rookworld_tyni' in model/ "
                             "(did you mean rookworld_tiny?); options: gpt2_124m_random, rookworld_lm_124m, "
                             "rookworld_tiny, tiny"),
    ("optimzer.lr=1e-4", "optimzer.lr=1e-4: no key 'optimzer.lr' in the config (did you mean optimizer.lr?)"),
    ("sweeps=nosuch", "sweeps=nosuch: no option 'nosuch' in sweeps/; options: chess_verdict, kl_stability, "
                      "recipe_search, smoke, throughput, verdict"),
])
def test_a_typo_gets_one_line_with_the_close_matches_and_the_options(tmp_path, override, line):
    proc = subprocess.run([sys.executable, "-m", "rookworld.train", override], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [f"rookworld: error: {line}"], proc.stderr
    assert list(tmp_path.iterdir()) == []  # no outputs/ folder, no MLflow store


@pytest.mark.parametrize("command", ["rookworld.commands.caps", "rookworld.bench.eval_time", "rookworld.commands.pass_rates"])
def test_a_tool_command_names_a_typo_in_one_line(tmp_path, capsys, command):
    """The tools that compose the config themselves say what `python -m rookworld.train` says."""
    main = importlib.import_module(command).main
    args = ["--out", str(tmp_path / "rates.jsonl")] if command.endswith("pass_rates") else []
    with pytest.raises(SystemExit) as stop:
        main([*args, "optimzer.lr=1e-4"])
    assert stop.value.code == 2
    assert capsys.readouterr().err.strip() == ("rookworld: error: optimzer.lr=1e-4: no key 'optimzer.lr' in the config "
                                               "(did you mean optimizer.lr?)")


def test_help_says_what_the_command_does_and_lists_each_group_once(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "rookworld.train", "--help"], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) < 40 and "GRPO" in lines[0]
    assert "python -m rookworld.train experiment=quickstart" in proc.stdout and "README.md" in proc.stdout
    conf = Path(CONF_DIR)
    groups = {str(p.relative_to(conf)) for p in conf.rglob("*") if p.is_dir() and p.relative_to(conf).parts[0] != "hydra"}
    listed = [line.split(":")[0].strip() for line in lines if line.startswith("  ") and ": " in line and "#" not in line]
    assert sorted(listed) == sorted(groups | {"sweeps"})  # each once; no run folder, no conf/ prefix
    kl = next(line for line in lines if line.startswith("  kl:"))
    assert kl.split(":", 1)[1].split() == ["adaptive,", "fixed", "(default),", "none"]
    assert list(tmp_path.iterdir()) == []  # no outputs/ folder


@pytest.mark.parametrize("command, experiments", [
    ("rookworld.train", ["grpo_move_value", "grpo_rookworld_tiny", "grpo_rookworld_tiny_swept", "quickstart"]),
    ("rookworld.sft", ["sft_rookworld_tiny", "sft_selfplay", "sft_selfplay_39m"]),
])
def test_help_lists_the_experiments_the_command_runs(tmp_path, command, experiments):
    """An sft_* experiment sets sft.* keys that rookworld.train's spec refuses: its --help does not offer it."""
    proc = subprocess.run([sys.executable, "-m", command, "--help"], capture_output=True, text=True, timeout=120,
                          cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    line = next(line for line in proc.stdout.splitlines() if line.startswith("  experiment:"))
    assert line.split(":", 1)[1].replace(",", " ").split() == experiments


@pytest.mark.parametrize("override", [
    "log_every=0", "optimizer.name=adam", "grpo.reward_norm.momentum=1.5", "eval.batch_size=0", "eval.every=-1",
    "checkpoint.every=-1", "time_limit_min=0", "kl.sync_alpha=2", "kl.sync_every=-1", "kl=adaptive kl.coef=0",
    "task_mix.P=abc", "data.kind=foo", "data=rookworld7m data.heldout=hubb", "data.arbiter_cases.normal=-1",
    "tracking.flush_interval_s=0", "sampling.finish_check_every=0", "tracking.param_value_max=2", "eval.cache_dir=",
    "eval.split=heldout", "eval.score=elo",
])
def test_config_validation_names_the_bad_value(tmp_path, override):
    *extra, bad = override.split()
    cfg = tiny_config(tmp_path, *extra, bad, "tracking=mlflow" if bad.startswith("tracking.") else "tracking=none")
    with pytest.raises(ConfigError, match="^" + re.escape(bad.split("=")[0] + "=")):
        validate(cfg)


@pytest.mark.parametrize("config_name, override", [
    ("sft", "sft.save_dtype=float16"), ("sft", "sft.log_every=0"), ("sft", "sft.arbiter_fraction=2"), ("sft", "sft.loss_on=all"), ("sft", "eval.split=train"),
    ("bench", "bench.decoder=fsat"), ("bench", "bench.trl=maybe"), ("bench", "bench.steps=0"),
])
def test_sft_and_bench_configs_are_validated_too(config_name, override):
    with initialize_config_dir(config_dir=CONF_DIR):
        cfg = compose(config_name, overrides=[override, "tracking=none"], return_hydra_config=True)
    check = validate_sft if config_name == "sft" else validate_bench
    with pytest.raises(ConfigError, match="^" + re.escape(override.split("=")[0] + "=")):
        check(cfg)


@pytest.mark.slow
def test_resume_reaches_the_same_parameters_as_an_uninterrupted_run(tmp_path):
    common = ["steps=4", "task_mix=env_only", "kl=adaptive", "eval.every=0", "grpo.num_iterations=2",
              "grpo.num_minibatches=2", "optimizer.lr=1e-4"]
    straight = make_trainer(tmp_path, *common, "checkpoint.every=2")
    straight.fit()
    checkpoint = tmp_path / "checkpoints" / "step_000002"
    # log_every (like checkpoint.*, which differs here too) is one of the keys a resume may change
    resumed = make_trainer(tmp_path / "resumed", *common, "log_every=3", f"resume_from={checkpoint}")
    assert resumed.step == 2
    resumed.fit()
    assert resumed.kl.coef == straight.kl.coef
    start = make_trainer(tmp_path / "start", *common).policy
    moved = [not torch.equal(a, b) for a, b in zip(start.parameters(), straight.policy.parameters())]
    assert any(moved), "the run must have changed the parameters for the comparison to mean anything"
    for (name, a), b in zip(straight.policy.named_parameters(), resumed.policy.parameters()):
        assert torch.equal(a, b), name


CHECKPOINTED = ["steps=1", "task_mix=env_only", "eval.num_policy=1", "eval.num_arbiter=1"]


def test_a_weights_only_final_save_writes_the_model_folder_alone_in_shards_and_dtype(tmp_path):
    """checkpoint.weights_only: the hub-format folder (here bfloat16 in shards of at most 2 MiB) and its
    config.yaml, no trainer state; the folder loads as a model whose weights are the trained ones, rounded."""
    trainer = make_trainer(tmp_path, *CHECKPOINTED, "checkpoint.save_final=true", "checkpoint.weights_only=true",
                           "checkpoint.weights_dtype=bfloat16", "checkpoint.max_shard_mib=2")
    trainer.fit()
    folder = tmp_path / "checkpoints" / "step_000001"
    assert not (folder / TRAINER_STATE_FILE).exists() and (folder / "config.yaml").is_file()
    shards = sorted(folder.glob("model-*-of-*.safetensors"))
    assert len(shards) > 1 and all(f.stat().st_size <= 2 * 2**20 for f in shards)
    saved, _ = load_pretrained(str(folder), dtype=None)
    assert {p.dtype for p in saved.parameters()} == {torch.bfloat16}
    for (name, trained), kept in zip(trainer.policy.named_parameters(), saved.parameters()):
        assert torch.equal(trained.detach().cpu().to(torch.bfloat16), kept), name
    with pytest.raises(ConfigError, match="^resume_from=.*not a checkpoint folder"):
        make_trainer(tmp_path / "again", *CHECKPOINTED, f"resume_from={folder}")


@pytest.mark.parametrize("override", ["checkpoint.weights_dtype=bfloat16", "checkpoint.max_shard_mib=15"])
def test_weights_only_knobs_without_weights_only_are_refused_in_one_line(tmp_path, override):
    with pytest.raises(ConfigError, match="^" + re.escape(override.split("=")[0] + "=") + ".*weights_only=true"):
        validate(tiny_config(tmp_path, override))


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """The checkpoint of a one-step run of CHECKPOINTED (a real run: weights, trainer state, config)."""
    folder = tmp_path_factory.mktemp("checkpointed")
    make_trainer(folder, *CHECKPOINTED, "checkpoint.every=1").fit()
    return folder / "checkpoints" / "step_000001"


@pytest.mark.parametrize("overrides, keys", [
    (["optimizer.lr=1e-4"], ["optimizer.lr"]),
    (["grpo.group_size=2"], ["grpo.group_size"]),
    (["kl.coef=0.5", "kl.estimator=k3"], ["kl.coef", "kl.estimator"]),
    (["optimizer.weight_decay=0.5"], ["optimizer.weight_decay"]),
    (["steps=8"], ["steps"]),  # the cosine schedule (optimizer.min_lr_ratio < 1) depends on the steps
])
def test_a_resume_that_changes_the_run_is_refused_in_one_line_naming_each_key(tmp_path, checkpoint, overrides, keys):
    with pytest.raises(ConfigError) as refused:
        make_trainer(tmp_path, *CHECKPOINTED, *overrides, f"resume_from={checkpoint}")
    message = str(refused.value)
    assert message.startswith(f"resume_from='{checkpoint}': ") and "\n" not in message
    named = re.findall(r"([\w.]+) \(", message.split(" in ", 1)[1].split("; ")[0])
    assert named == keys, message  # checkpoint.dir and eval.cache_dir differ too: they may


@pytest.mark.slow
def test_a_refused_resume_exits_2_with_one_line(tmp_path, checkpoint):
    from train_helpers import TINY_RUN
    proc = subprocess.run([sys.executable, "-m", "rookworld.train", *TINY_RUN, "tracking=none", *CHECKPOINTED,
                           f"hydra.run.dir={tmp_path}", f"resume_from={checkpoint}", "optimizer.lr=1e-4"],
                          capture_output=True, text=True, timeout=180)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("rookworld: error: resume_from=") and "optimizer.lr (" in lines[0]


@pytest.mark.parametrize(("folder", "says"), [("missing", "no such folder"), ("empty", "not a checkpoint folder")])
def test_resume_from_a_folder_that_is_no_checkpoint_exits_2_before_the_model_loads(tmp_path, folder, says):
    """The default config (the hub model, offline here: it would fail on the download) and the knob that
    resumes without a config.yaml: one line naming the folder, before any model loads."""
    (tmp_path / "empty").mkdir()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "rookworld.train", "tracking=none", "device=cpu",
                           f"resume_from={tmp_path / folder}", "resume_check.accept_changes=true",
                           f"hydra.run.dir={tmp_path}/run"], capture_output=True, text=True, timeout=180, env=env)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stderr.startswith(f"rookworld: error: resume_from={str(tmp_path / folder)!r}: {says} (")
    assert proc.stderr.count("\n") == 1 and time.perf_counter() - started < 60, proc.stderr


def test_a_forced_resume_applies_the_new_optimizer_settings(tmp_path, checkpoint, capsys):
    trainer = make_trainer(tmp_path, *CHECKPOINTED, "optimizer.weight_decay=0.5", "resume_check.accept_changes=true",
                           f"resume_from={checkpoint}")
    assert trainer.step == 1 and trainer.learner.optimizer.state  # moments and step counts from the checkpoint ...
    assert [group["weight_decay"] for group in trainer.learner.optimizer.param_groups] == [0.5]  # ... settings from the config
    assert "accepts changes against the checkpoint: optimizer.weight_decay (0.0 -> 0.5)" in capsys.readouterr().out


def resume_command(tmp_path, *overrides):
    """The config `python -m rookworld.train *overrides` runs, composed on the default config (no TINY_RUN)."""
    with initialize_config_dir(config_dir=CONF_DIR):
        cfg = compose("config", overrides=list(overrides), return_hydra_config=True)
    return resumed_config(cfg, cfg.hydra.overrides.task, cfg.hydra.runtime.choices)


def test_resume_from_alone_continues_the_checkpoint_run(tmp_path, checkpoint):
    """`resume_from=DIR` on the default config (the hub model, 200 steps) runs the checkpoint's own config,
    with this command's output folder."""
    cfg = resume_command(tmp_path, f"resume_from={checkpoint}", f"checkpoint.dir={tmp_path}/checkpoints")
    spec = load_run(cfg)
    assert spec.model.source.endswith("rookworld_tiny") and spec.steps == 1 and spec.task_mix.A == 1.0
    assert spec.checkpoint.dir == f"{tmp_path}/checkpoints" and spec.resume_from == str(checkpoint)
    trainer = build_run(spec, make_tracker(cfg))
    assert trainer.step == 1


def test_a_key_set_on_top_of_resume_from_alone_is_checked_against_the_checkpoint(tmp_path, checkpoint):
    cfg = resume_command(tmp_path, f"resume_from={checkpoint}", "optimizer.lr=1e-4", "log_every=5")
    assert cfg.log_every == 5  # a key a resume may change
    with pytest.raises(ConfigError, match=r"the config differs from the checkpoint's in optimizer\.lr \(2e-05 -> 0\.0001\); "):
        check_resume(load_run(cfg), checkpoint)


def test_a_config_group_on_the_command_line_composes_the_config_as_written(tmp_path, checkpoint):
    cfg = resume_command(tmp_path, f"resume_from={checkpoint}", "model=tiny")
    assert cfg.model.tiny.n_layer and cfg.steps == 200  # not the checkpoint's: the resume check refuses it
    tracked = resume_command(tmp_path, f"resume_from={checkpoint}", "tracking=mlflow")  # tracking.* may change
    assert tracked.steps == 1 and tracked.tracking.backend == "mlflow"


@pytest.mark.slow
def test_resume_from_alone_on_the_command_line_continues_the_run(tmp_path, checkpoint):
    proc = subprocess.run([sys.executable, "-m", "rookworld.train", f"resume_from={checkpoint}", "tracking=none",
                           f"hydra.run.dir={tmp_path}"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "outcome: success (finished 1 steps)" in proc.stdout, proc.stdout[-2000:]


@pytest.mark.parametrize("min_lr_ratio, refused", [(0.1, ["steps"]), (1.0, [])])
def test_steps_may_change_only_while_the_schedule_does_not_use_them(tmp_path, min_lr_ratio, refused):
    ratio = f"optimizer.min_lr_ratio={min_lr_ratio}"
    save_config(load_run(tiny_config(tmp_path, ratio, "steps=4")).resolved, tmp_path)
    resumed = load_run(tiny_config(tmp_path, ratio, "steps=8", f"resume_from={tmp_path}",
                                   "resume_check.accept_changes=true"))
    allowed, accepted = check_resume(resumed, tmp_path)
    assert list(accepted) == refused and ("steps" in allowed) == (not refused)


def test_default_model_offline_fails_with_one_line_naming_the_repo_and_model_path(tmp_path):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}
    proc = subprocess.run([sys.executable, "-m", "rookworld.train", "tracking=none", "device=cpu"],
                          capture_output=True, text=True, timeout=180, env=env, cwd=tmp_path)
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "jrahn/RookWorld-LM-124M" in lines[0] and "model.path" in lines[0]
    assert "Traceback" not in proc.stdout + proc.stderr


def test_the_run_log_holds_what_the_console_shows(tmp_path):
    """Every stdout line of a run (the loading line, steps, evaluations, outcome, the change) is in train.log too."""
    from train_helpers import TINY_RUN

    proc = subprocess.run([sys.executable, "-m", "rookworld.train", *TINY_RUN, "tracking=none", "eval.every=2",
                           "log_every=1", "eval.num_policy=1", "eval.num_arbiter=1", f"hydra.run.dir={tmp_path}"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    shown = [line for line in proc.stdout.splitlines() if line.strip()]
    logged = [line.split("] - ", 1)[1] for line in (tmp_path / "train.log").read_text().splitlines() if "] - " in line]
    assert len(shown) >= 5 and shown[0].startswith("loading ") and any(line.startswith("outcome: ") for line in shown)
    assert [line for line in logged if line in shown] == shown, (shown, logged)  # each, in order
