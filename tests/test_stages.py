"""The sweep's stages on real components: paired seeds, rungs as prefixes of the full run, and the knobs.

The end-to-end staged sweep (search on paired seeds with rungs, race, confirmation, report, kill and
resume) is in tests/test_stages_sweep.py."""
from pathlib import Path

import pytest
import torch

from rookworld.run.build import build_run
from rookworld.app.config import load_run
from rookworld.specs.rules import ConfigError
from rookworld.sweep.running.launch import check_position_blocks
from rookworld.tracking import make_tracker
from train_helpers import tiny_config

PREFIX_RUN = ["steps=3", "task_mix=env_only", "kl=fixed", "kl.coef=0.05", "kl.warmup_steps=2", "eval.every=0",
              "optimizer.lr=1e-4", "optimizer.warmup_steps=1", "optimizer.min_lr_ratio=0.1", "eval.num_policy=0",
              "eval.num_arbiter=2", "prompts_per_step=1", "data.arbiter_pool_size=4", "data.arbiter_pool_walks=200"]


def make_trainer(tmp_path: Path, *overrides: str):
    cfg = tiny_config(tmp_path, *overrides)
    return build_run(load_run(cfg), make_tracker(cfg))


def test_paired_seeds_give_two_configurations_the_same_problem_order(tmp_path: Path) -> None:
    """Seed i is the same for every configuration: the problems a step trains on depend on the seed only,
    not on the configuration's knobs (here the learning rate, KL and temperature)."""
    def order(name: str, seed: int, *knobs: str) -> list[str]:
        trainer = make_trainer(tmp_path / name, "task_mix=balanced", f"seed={seed}", "data.arbiter_pool_size=4",
                               "data.arbiter_pool_walks=200", *knobs)
        return [p.prompt_text for _ in range(5) for p in trainer.sample_rows()]

    first = order("a", 3, "optimizer.lr=1e-5")
    second = order("b", 3, "optimizer.lr=3e-4", "kl.coef=0.2", "sampling.temperature=1.3")
    assert first == second
    assert order("c", 4, "optimizer.lr=1e-5") != first, "another seed must give another order"


@pytest.mark.slow
def test_a_prefix_resumed_to_the_full_horizon_equals_an_uninterrupted_run_bitwise(tmp_path: Path) -> None:
    """A rung: the run stops at stop_at=2 of steps=3 (its LR warm-up and cosine decay, its KL warm-up span
    all 3 steps), evaluates and saves its checkpoint; the promoted configuration resumes from it to step 3
    and ends with the same weights, bit for bit, as a run of 3 steps without a stop."""
    cache = f"eval.cache_dir={tmp_path}/eval_cache"  # the step-0 evaluation, computed once
    straight = make_trainer(tmp_path / "straight", *PREFIX_RUN, cache)
    start = [p.detach().clone() for p in straight.policy.parameters()]
    straight.fit()
    rung = make_trainer(tmp_path / "rung", *PREFIX_RUN, cache, "stop_at=2", "checkpoint.save_final=true")
    result = rung.fit()
    assert (result.steps, result.outcome) == (2, "success") and result.reason == "finished 2 steps of 3"
    checkpoint = tmp_path / "rung" / "checkpoints" / "step_000002"
    promoted = make_trainer(tmp_path / "promoted", *PREFIX_RUN, cache, f"resume_from={checkpoint}")
    assert promoted.step == 2
    promoted.fit()
    assert any(not torch.equal(a, b) for a, b in zip(start, straight.policy.parameters()))
    for (name, a), b in zip(straight.policy.named_parameters(), promoted.policy.parameters()):
        assert torch.equal(a, b), name
    assert promoted.kl.coef == straight.kl.coef


@pytest.mark.parametrize("bad", ["stop_at=0", "stop_at=5"])
def test_stop_at_must_be_a_prefix(tmp_path: Path, bad: str) -> None:
    with pytest.raises(ConfigError) as error:
        load_run(tiny_config(tmp_path, "steps=4", bad))
    assert str(error.value) == f"{bad}: must be null or between 1 and steps = 4 (a prefix of the run)"


STAGES = {"enabled": True, "seeds": 2, "first_seed": 0, "rungs": [1, 2], "eta": 2, "baseline": [], "baseline_ahead": False,
          "race": {"top": 2, "max_seeds": 3, "min_seeds": 2, "alpha": 0.05, "test": "wilcoxon", "ahead": 0},
          "confirm": {"seeds": 2, "finalists": 1, "alpha": 0.05, "test": "wilcoxon", "pool": "test"},
          "checkpoint_dir": "stages"}
K = "hydra.sweeper.stages."


def stages_with(key: str, value) -> dict:
    node = {**STAGES, "race": dict(STAGES["race"]), "confirm": dict(STAGES["confirm"])}
    head, _, tail = key.partition(".")
    if tail:
        node[head][tail] = value
    else:
        node[head] = value
    return node


@pytest.mark.parametrize(("key", "value", "rule"), [
    ("enabled", "yes", "expected true or false"),
    ("seeds", 0, "must be an integer >= 1"),
    ("first_seed", -1, "must be an integer >= 0"),
    ("eta", 1, "must be an integer >= 2"),
    ("rungs", [1, 3], "each rung must be eta = 2 times the one before (successive halving)"),
    ("rungs", "100", "expected a list or null"),
    ("baseline", ["experiment"], "expected a list of overrides (key=value), e.g. [experiment=grpo_rookworld_tiny]"),
    ("baseline_ahead", "yes", "expected true or false"),
    ("checkpoint_dir", "", "expected a folder for the rungs' checkpoints"),
    ("race.top", 0, "must be an integer >= 1"),
    ("race.max_seeds", 1, "must be an integer >= 2"),
    ("race.min_seeds", 1, "must be an integer >= 2"),
    ("race.min_seeds", 4, "must be <= race.max_seeds = 3"),
    ("race.alpha", 1.5, "must be a number in (0, 1)"),
    ("race.test", "sign", "expected one of wilcoxon, t"),
    ("race.ahead", -1, "must be an integer >= 0"),
    ("confirm.seeds", 1, "must be an integer >= 2"),
    ("confirm.finalists", 0, "must be an integer >= 1"),
    ("confirm.alpha", 0, "must be a number in (0, 1)"),
    ("confirm.test", "z", "expected one of wilcoxon, t"),
    ("confirm.pool", "validation", "expected one of final, test"),
])
def test_every_stage_knob_is_checked_in_one_line(key: str, value, rule: str) -> None:
    from rookworld.app.config import load_stages

    with pytest.raises(ConfigError) as error:
        load_stages(stages_with(key, value))
    assert str(error.value) == f"{K}{key}={value!r}: {rule}"


def test_unknown_stage_keys_and_a_minimizing_staged_sweep_are_refused() -> None:
    from rookworld.app.config import load_sweeper
    from rookworld.app.config import load_stages

    with pytest.raises(ConfigError, match=r"^hydra\.sweeper\.stages\.race=\['rounds'\]: unknown key"):
        load_stages(stages_with("race", {**STAGES["race"], "rounds": 3}))
    from test_sweeps import sweeper_args

    with pytest.raises(ConfigError) as error:
        load_sweeper(sweeper_args(direction="minimize", stages=STAGES))
    assert str(error.value) == ("hydra.sweeper.direction='minimize': a staged sweep maximizes eval/score (its race "
                                "and verdict test for higher scores)")


@pytest.mark.parametrize(("overrides", "line"), [
    (["hydra.sweeper.stages.rungs=[1,2]", "steps=3"],
     "rookworld: error: hydra.sweeper.stages.rungs=[1, 2]: the last rung must be the full horizon, steps = 3"),
    (["trial=optuna", "trial/pruner=none"],
     "rookworld: error: trial.hooks=['optuna_pruning']: a staged sweep's jobs report nothing to Optuna themselves "
     "(the worker reports each rung's seed mean): use trial=stages"),
    (["hydra.sweeper.stages.eta=x"], "rookworld: error: hydra.sweeper.stages.eta='x': expected an integer"),
    (["eval.draw=blocks", "eval.num_arbiter=500", "hydra.sweeper.stages.race.max_seeds=4",
      "hydra.sweeper.stages.race.min_seeds=4"],
     "rookworld: error: eval.num_arbiter=500: the validation part (1500) holds 3 blocks of it, "
     "hydra.sweeper.stages.race.max_seeds = 4 seeds need one each (eval.draw=blocks)"),
])
@pytest.mark.slow
def test_a_bad_staged_sweep_stops_before_anything_starts(tmp_path: Path, overrides: list[str], line: str) -> None:
    import subprocess
    import sys

    from sweep_helpers import subprocess_env

    command = [sys.executable, "-m", "rookworld.train", "-m", "sweeps=smoke", "model=tiny", "trial=stages", "steps=2",
               "hydra.sweeper.stages.enabled=true", *overrides]
    done = subprocess.run(command, cwd=tmp_path, env=subprocess_env(), capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and done.stderr.strip().splitlines() == [line]
    assert not (tmp_path / "outputs").exists()


def test_the_summary_never_names_a_best_trial_without_its_interval() -> None:
    import optuna

    from rookworld.sweep.storage.study import OBJECTIVE_SE_ATTR, OUTCOME_ATTR
    from rookworld.sweep.staged.stages import CONFIG_ATTR, SCORES_ATTR
    from rookworld.sweep.report.summary import summarise_study, summary_markdown

    def best_line(attrs: dict) -> str:
        study = optuna.create_study(direction="maximize")
        trial = study.ask()
        for key, value in {OUTCOME_ATTR: "success", **attrs}.items():
            trial.set_user_attr(key, value)
        study.tell(trial, 0.5)
        return [line for line in summary_markdown(summarise_study(study)).splitlines() if line.startswith("Best:")][0]

    assert best_line({OBJECTIVE_SE_ATTR: 0.01}) == ("Best: trial 0, objective 0.5 (95% CI 0.4804..0.5196, one seed: "
                                                    "evaluation noise only, not the seed spread) (no params).")
    staged = best_line({SCORES_ATTR: [[1, 0, 0.4], [1, 1, 0.6], [2, 0, 0.45], [2, 1, 0.55]]})
    assert staged == "Best: trial 0, objective 0.5 (95% CI -0.1353..1.135, 2 seeds at step 2) (no params)."
    promoted = best_line({SCORES_ATTR: [[1, 0, 0.4], [1, 1, 0.6]], CONFIG_ATTR: "74"})  # a later rung's own trial
    assert promoted.startswith("Best: trial 0 (a search rung of trial 74; the stage report below compares "
                               "configurations), objective 0.5 (")
    assert best_line({}) == ("Best: trial 0, objective 0.5 (no interval recorded: one value, not evidence that it is "
                             "best) (no params).")


@pytest.mark.parametrize(("preset", "rungs", "confirm_seeds"), [("verdict", (100, 200, 400), range(10, 20)),
                                                              ("chess_verdict", (150, 300, 600), range(8, 18))])
def test_each_verdict_preset_composes_and_its_stages_and_trial_config_are_valid(preset, rungs, confirm_seeds) -> None:
    """sweeps=verdict and sweeps=chess_verdict (the GPU runs): their stages parse, their rungs end at their steps,
    and the baseline each names composes to the sweep's own config (a sampled configuration differs from it in
    the sampled keys only)."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from rookworld.run.resume import differences
    from rookworld.app.config import load_stages
    from train_helpers import CONF_DIR

    with initialize_config_dir(config_dir=CONF_DIR):
        sweep = compose("config", overrides=[f"sweeps={preset}", "device=cpu"], return_hydra_config=True)
        stages = load_stages(sweep.hydra.sweeper.stages).with_horizon(sweep.steps)
        baseline = compose("config", overrides=[f"sweeps={preset}", "device=cpu", *stages.baseline])
    assert stages.rungs == rungs and stages.confirm_seeds() == tuple(confirm_seeds)
    assert not set(stages.search_seeds()) & set(stages.confirm_seeds())
    plain = OmegaConf.to_container(sweep, resolve=False)
    plain.pop("hydra")
    assert differences(plain, OmegaConf.to_container(baseline, resolve=False)) == {}
    load_run(baseline)
    check_position_blocks(stages, sweep)  # the confirmation's pool holds a block for each of its seeds


def test_the_final_pool_is_read_by_a_confirmation_alone(tmp_path: Path) -> None:
    """eval.split=final: refused in one line for a plain run (the confirmation's tag typed by hand opens nothing)
    and, inside the confirmation's grant, for data without a final pool; a staged sweep's confirmation run on
    data=selfplay reads it; a launch whose confirm.pool names a pool its data lacks stops before any worker starts."""
    from rookworld import final_pool

    with pytest.raises(ConfigError) as error:
        load_run(tiny_config(tmp_path, "data=selfplay", "eval.split=final", "+trial.tags.stage=confirm"))
    assert str(error.value) == ("eval.split='final': the final pool is read by a staged sweep's confirmation alone "
                                "(hydra.sweeper.stages.confirm.pool): select on validation, report on test")
    with final_pool.confirmation():
        with pytest.raises(ConfigError, match=r"^eval.split='final': this data has no final pool"):
            load_run(tiny_config(tmp_path, "eval.split=final"))
        confirmation = load_run(tiny_config(tmp_path, "data=selfplay", "eval.split=final"))
    assert confirmation.eval.split == "final"

    from rookworld.app.config import load_stages

    with pytest.raises(ConfigError) as error:
        check_position_blocks(load_stages(stages_with("confirm.pool", "final")), tiny_config(tmp_path))
    assert str(error.value).startswith("hydra.sweeper.stages.confirm.pool=final: this data has no final pool")


def test_every_choice_of_the_chess_verdict_space_is_a_run_the_specs_accept() -> None:
    """Each option of each choice in sweeps=chess_verdict's space (the rewards and move_value's weights, the task
    mixes, G x problems at 256 completions, the schedule) composes to a run config the
    specs accept: no trial fails on its config once the GPU run is under way."""
    from optuna.distributions import CategoricalDistribution

    from rookworld.app.config import compose
    from rookworld.sweep.running.space import SearchSpace

    space = SearchSpace.parse(dict(compose(["sweeps=chess_verdict"]).hydra.sweeper.params), [])
    choices = {key: d.choices for key, d in space.distributions.items() if isinstance(d, CategoricalDistribution)}
    assert set(choices) == {"reward", "task_mix", "group_shape", "optimizer.min_lr_ratio"}
    for key, options in choices.items():
        for option in options:
            run = load_run(compose(["sweeps=chess_verdict", "device=cpu", f"{key}={option}"]))
            run.reward.build()  # the scorer checks its weights and scales
            assert run.prompts_per_step * run.grpo.group_size == 256, (key, option)


def test_the_next_stage_is_derived_from_the_study_alone_and_never_enqueued_twice() -> None:
    """stages.due() on a real (in-memory) Optuna study: the baseline first; nothing before the search is done;
    then the race's next round (`ahead` rounds only for idle workers, one run at a time), the confirmation on fresh seeds, the verdict. Calling it
    again on the same study enqueues nothing more (several workers, a resumed sweep)."""
    import optuna

    from rookworld.app.config import load_stages
    from rookworld.sweep.staged.stages import (BASELINE, SCORES_ATTR, Item, StageView, due)
    from rookworld.sweep.storage.study import OUTCOME_ATTR

    node = stages_with("race", {**STAGES["race"], "max_seeds": 4, "min_seeds": 3, "test": "t", "ahead": 1})
    node["confirm"] = {**STAGES["confirm"], "seeds": 3, "test": "t"}
    settings = load_stages(node).with_horizon(2)
    study = optuna.create_study(direction="maximize")
    true_mean = {BASELINE: 0.50, "1": 0.60, "2": 0.40}

    def wobble(config: str, seed: int) -> float:  # each configuration's own noise on a seed
        return 0.005 * ((seed * 7 + 3 * len(config) + int(config.isdigit() and config)) % 5 - 2)

    def step() -> tuple[list[Item], str | None]:
        items, verdict = due(StageView.of(study.get_trials(), settings, n_trials=3))
        for item in items:
            study.enqueue_trial({}, user_attrs=item.attrs())
        return items, verdict

    def run_waiting() -> None:
        for waiting in [t for t in study.get_trials() if t.state == optuna.trial.TrialState.WAITING]:
            trial = study.ask()
            assert trial.number == waiting.number
            item = Item.of(trial)
            scores = [[r, s, true_mean[item.config] + wobble(item.config, s) * r] for r in (1, 2) for s in item.seeds]
            trial.set_user_attr(SCORES_ATTR, scores)
            trial.set_user_attr(OUTCOME_ATTR, "success")
            study.tell(trial, sum(v for r, _, v in scores if r == 2) / len(item.seeds))

    items, _ = step()
    assert [(i.stage, i.config, i.seeds) for i in items] == [("search", BASELINE, (0, 1))]
    assert step() == ([], None)  # held: not enqueued again, and the search is not done
    run_waiting()
    for number in (1, 2):  # two sampled configurations
        item = Item("search", str(number), (f"optimizer.lr={number}e-4",), (0, 1))
        study.enqueue_trial({}, user_attrs=item.attrs())
    run_waiting()
    items, _ = step()  # round 3 (seed 2) for all three; a round ahead (seed 3) only once nothing waits
    assert sorted((i.config, i.seeds) for i in items) == sorted((c, (2,)) for c in ("1", "2", BASELINE))
    assert {i.stage for i in items} == {"race"} and step() == ([], None)
    run_waiting()
    items, _ = step()  # at 3 seeds trial 1 is the incumbent, the others are dropped: confirm 1 and the baseline
    assert sorted((i.stage, i.config, i.seeds) for i in items) == sorted(
        ("confirm", c, (s,)) for c in ("1", BASELINE) for s in (4, 5, 6))
    assert {i.split for i in items} == {"test"}
    run_waiting()
    items, verdict = step()
    assert items == [] and verdict.startswith("verdict: trial 1 beats the baseline: +0.1")


def test_with_baseline_ahead_idle_workers_run_the_baselines_race_and_confirmation_seeds_in_the_search_tail() -> None:
    """baseline_ahead: once every search configuration has started (nothing left to sample) and some still
    run, due() gives the baseline's race seeds beyond its search seeds and its confirmation seeds, once, one at a
    time while nothing waits (retries first); before that, nothing but the baseline's search trial."""
    import optuna

    from rookworld.app.config import load_stages
    from rookworld.sweep.staged.stages import BASELINE, Item, StageView, due

    settings = load_stages({**stages_with("baseline_ahead", True)}).with_horizon(2)
    study = optuna.create_study(direction="maximize")

    def step() -> list[tuple[str, str, tuple[int, ...]]]:
        items, verdict = due(StageView.of(study.get_trials(), settings, n_trials=2))
        assert verdict is None
        for item in items:
            study.enqueue_trial({}, user_attrs=item.attrs())
        return [item.key for item in items]

    assert step() == [("search", BASELINE, (0, 1))]
    study.ask()  # the baseline's search trial runs; a configuration is still to be sampled
    assert step() == []
    sampled = study.ask()
    for key, value in Item("search", str(sampled.number), (), (0, 1)).attrs().items():
        sampled.set_user_attr(key, value)
    given = []
    for _ in range(3):  # one per idle worker's call, each taken before the next is given
        given += step()
        assert step() == []  # nothing more while one waits: a re-queued retry would start first
        study.ask()
    assert given == [("race", BASELINE, (2,)), ("confirm", BASELINE, (3,)), ("confirm", BASELINE, (4,))]
    assert step() == []  # held: never enqueued twice


def test_the_report_sets_the_verdicts_winner_against_the_baseline_not_the_races_best() -> None:
    """With two finalists, the race's best (trial 1) and the confirmation's winner (trial 2) differ: the
    report's config comparison is the winner's."""
    import optuna

    from rookworld.sweep.staged.stage_report import compared_config
    from rookworld.app.config import load_stages
    from rookworld.sweep.staged.stages import BASELINE, SCORES_ATTR, Item, StageView, due
    from rookworld.sweep.storage.study import OUTCOME_ATTR

    node = stages_with("race", {**STAGES["race"], "max_seeds": 2})  # Wilcoxon on 2 seeds drops nobody
    node["confirm"] = {**STAGES["confirm"], "seeds": 4, "finalists": 2, "test": "t"}
    settings = load_stages(node).with_horizon(2)
    study = optuna.create_study(direction="maximize")
    means = {"search": {BASELINE: 0.5, "1": 0.62, "2": 0.6}, "confirm": {BASELINE: 0.5, "1": 0.52, "2": 0.6}}

    def view() -> StageView:
        return StageView.of(study.get_trials(), settings, n_trials=3)

    def enqueue_and_run(items: list[Item]) -> None:
        for item in items:
            study.enqueue_trial({}, user_attrs=item.attrs())
        for _ in items:
            trial = study.ask()
            item = Item.of(trial)
            mean = means["confirm" if item.stage == "confirm" else "search"][item.config]
            scores = [[r, s, mean + 0.001 * ((7 * s + len(item.config)) % 5)] for r in (1, 2) for s in item.seeds]
            trial.set_user_attr(SCORES_ATTR, scores)
            trial.set_user_attr(OUTCOME_ATTR, "success")
            study.tell(trial, sum(v for r, _, v in scores if r == 2) / len(item.seeds))

    enqueue_and_run([Item("search", c, (f"optimizer.lr={c}e-4",) if c != BASELINE else (), (0, 1))
                     for c in (BASELINE, "1", "2")])
    assert compared_config(view()) == "1"  # before the confirmation: the race's best survivor
    items, _ = due(view())
    assert {i.stage for i in items} == {"confirm"}
    enqueue_and_run(items)
    assert due(view())[1].startswith("verdict: trial 2 beats the baseline")
    assert compared_config(view()) == "2"


def test_the_report_checks_the_rungs_fidelity_on_the_search_seeds_of_every_configuration_at_the_full_horizon() -> None:
    """Four configurations reach the full horizon (2 steps) in the search; their rung-1 order is the reverse
    of their rung-2 order, so the search-seed fidelity is -1.00 over 4 configurations, before any race."""
    import optuna

    from rookworld.sweep.staged.stage_report import stage_report
    from rookworld.app.config import load_stages
    from rookworld.sweep.staged.stages import BASELINE, SCORES_ATTR, Item, StageView
    from rookworld.sweep.storage.study import OUTCOME_ATTR

    settings = load_stages(stages_with("rungs", [1, 2])).with_horizon(2)
    study = optuna.create_study(direction="maximize")
    at_rung = {BASELINE: (0.50, 0.56), "1": (0.51, 0.55), "2": (0.52, 0.54), "3": (0.53, 0.53)}
    for config, (first, last) in at_rung.items():
        study.enqueue_trial({}, user_attrs=Item("search", config, (), (0, 1)).attrs())
        trial = study.ask()
        scores = [[1, seed, first + 0.001 * seed] for seed in (0, 1)] + [[2, seed, last + 0.001 * seed] for seed in (0, 1)]
        trial.set_user_attr(SCORES_ATTR, scores)
        trial.set_user_attr(OUTCOME_ATTR, "success")
        study.tell(trial, last + 0.0005)
    report, _ = stage_report(StageView.of(study.get_trials(), settings, n_trials=5), None, 1, None, None)
    assert ("Fidelity on the search seeds: Spearman's rho between the rung-1 means and the 2-step means over the 4 "
            "configurations that reached 2 steps: -1.00 (95% CI -1.00..-0.94, 4 configurations).") in report.splitlines()
    assert "### Race" not in report  # the search (5 configurations) is not done


def test_a_one_seed_race_or_confirmation_run_is_never_named_best() -> None:
    import optuna

    from rookworld.sweep.staged.stages import Item
    from rookworld.sweep.storage.study import OUTCOME_ATTR
    from rookworld.sweep.report.summary import summarise_study

    study = optuna.create_study(direction="maximize")
    for stage, value in (("search", 0.5), ("race", 0.9), ("confirm", 0.8)):
        trial = study.ask()
        for key, attr in {**Item(stage, "0", (), (0,)).attrs(), OUTCOME_ATTR: "success"}.items():
            trial.set_user_attr(key, attr)
        study.tell(trial, value)
    summary = summarise_study(study)
    assert summary.best.trial == 0
    assert [t.note for t in summary.trials] == ["search (validation), config of trial 0, seeds [0]",
                                                "race (validation), config of trial 0, seeds [0]",
                                                "confirm (test), config of trial 0, seeds [0]"]


def test_a_seed_that_diverges_before_its_first_rung_scores_the_penalty_and_the_trial_goes_on(tmp_path: Path) -> None:
    """A seed whose run stops at its first rung with kl_failure saves no checkpoint, so its folder was never
    made: its segment record is still written, it scores the failure penalty at every rung, and the trial
    ends with the penalty as its objective (it did not raise: on the GPU such trials once crashed their worker)."""
    from hydra.core.utils import JobReturn, JobStatus

    from rookworld.sweep.staged.rungs import ItemRun
    from rookworld.app.config import load_stages
    from rookworld.sweep.staged.stages import SEARCH, Item

    settings = load_stages(stages_with("rungs", [2, 4])).with_horizon(4)
    item = Item(stage=SEARCH, config="7", overrides=(), seeds=(0,))

    def run_job(overrides: list[str], subdir: str) -> JobReturn:  # the trial's job: a real training run
        kept = [o for o in overrides if not o.startswith("+trial.")]  # MLflow tags: no trial group here
        job = JobReturn()
        job.status, job.return_value = JobStatus.COMPLETED, make_trainer(
            tmp_path / subdir, *PREFIX_RUN, "steps=4", "kl.max=1e-9", "kl.max_steps_above=1",
            "prompts_per_step=4", "sampling.temperature=1.5", *kept).fit()  # varied groups: step 1 updates (KL > 0 at 2)
        return job

    recorded = []
    result = ItemRun(item, settings, tmp_path / "stages", -1.0, run_job, lambda rung, score: False,
                     recorded.append, lambda job: "raised").run()
    assert result.failure is None and result.outcome == "kl_failure"
    assert result.objective == -1.0 and result.scores == [[2, 0, -1.0], [4, 0, -1.0]]
    assert not (tmp_path / "stages" / "config_7").exists()  # removed once the trial ended


def halving_run(tmp_path: Path, kill: bool) -> list[tuple[str, int, bool]]:
    """A staged search's halving (eta 2, rungs 1 / 2 / 4) on a real journal study, as the workers drive it: each
    configuration reports its rung means in turn; configuration b is promoted at rung 1, then (with `kill`) its
    worker dies before rung 2; c, d and e report higher rung-1 means meanwhile, the kill is found (the study's stale
    trials, re-queued) and b's retry reports its rung-1 mean again (its segment records), then rung 2. The
    decisions: (configuration, rung, goes on)."""
    import optuna

    from rookworld.sweep.storage.clock import StorageClock
    from rookworld.sweep.staged.stages import Item, halving_report
    from rookworld.sweep.storage.storage_url import default_timeouts
    from rookworld.sweep.storage.study import open_storage, resolve_stale_trials

    url = f"journal:{tmp_path / 'halving.journal'}"
    storage = open_storage(url, str(tmp_path), default_timeouts())
    study = optuna.create_study(storage=storage, study_name="halving", direction="maximize")
    means = {"a": (0.50, 0.50), "b": (0.60, 0.60), "c": (0.70, 0.40), "d": (0.80, 0.45), "e": (0.90, 0.55)}
    decisions: list[tuple[str, int, bool]] = []

    def start(config: str) -> optuna.trial.Trial:
        study.enqueue_trial({}, user_attrs=Item("search", config, (), (0, 1)).attrs())
        return study.ask()

    def run(trial: optuna.trial.Trial, rungs: tuple[int, ...]) -> None:
        config = Item.of(trial).config
        report = halving_report(trial, eta=2)
        for rung in rungs:
            goes_on = not report(rung, means[config][(1, 2).index(rung)])
            decisions.append((config, rung, goes_on))
            if not goes_on:
                study.tell(trial, state=optuna.trial.TrialState.PRUNED)
                return
        study.tell(trial, 0.5)  # its rung-4 mean: no decision there

    run(start("a"), (1, 2))
    b = start("b")
    run_b = halving_report(b, eta=2)
    decisions.append(("b", 1, not run_b(1, means["b"][0])))
    for config in "cde":
        run(start(config), (1, 2))
    if kill:
        stale = resolve_stale_trials(study, storage, grace_s=-1, retries=1, clock=StorageClock(url, str(tmp_path)))
        assert [s.number for s in stale] == [b.number]
        b = study.ask()  # the retry
        decisions.append(("b", 1, not halving_report(b, eta=2)(1, means["b"][0])))
    run(b, (2,))
    return decisions


def test_a_kill_between_a_promotion_and_the_next_rung_changes_no_halving_decision(tmp_path: Path) -> None:
    """Successive halving survives kills: a retry carries the rungs its configuration was already judged at and is
    not judged again (b stays promoted although c, d and e outscored it meanwhile), and the killed trial's values
    leave the pool (one value per configuration: b's rung-1 mean counts once)."""
    from rookworld.sweep.staged.stages import halving_pool

    unkilled = halving_run(tmp_path / "unkilled", kill=False)
    killed = halving_run(tmp_path / "killed", kill=True)
    assert ("b", 1, True) in unkilled and ("b", 2, True) in unkilled
    assert sorted(set(killed)) == sorted(unkilled)
    assert killed.count(("b", 1, True)) == 2  # the original's decision, and its retry's (carried, not judged again)
    import optuna

    from rookworld.sweep.storage.storage_url import default_timeouts
    from rookworld.sweep.storage.study import open_storage

    storage = open_storage(f"journal:{tmp_path / 'killed' / 'halving.journal'}", str(tmp_path), default_timeouts())
    study = optuna.load_study(study_name="halving", storage=storage)
    assert halving_pool(study.get_trials(), 1) == {"a": 0.5, "b": 0.6, "c": 0.7, "d": 0.8, "e": 0.9}


class RecordedStudy:
    """A real in-memory Optuna study that the stages read: `run` records an item's scores at rungs 1 and 2
    (`score` + seed_step x seed on each of its seeds), or with score None a run that raised `raised`."""

    def __init__(self, stages: dict, n_trials: int, raised: str, seed_step: float = 0.0) -> None:
        import optuna

        from rookworld.app.config import load_stages

        self.settings = load_stages(stages).with_horizon(2)
        self.study = optuna.create_study(direction="maximize")
        self.n_trials, self.raised, self.seed_step = n_trials, raised, seed_step

    def view(self):
        from rookworld.sweep.staged.stages import StageView

        return StageView.of(self.study.get_trials(), self.settings, n_trials=self.n_trials)

    def run(self, item, score: float | None) -> None:
        import optuna

        from rookworld.sweep.staged.stages import SCORES_ATTR
        from rookworld.sweep.storage.study import FAIL_REASON_ATTR, OUTCOME_ATTR

        self.study.enqueue_trial({}, user_attrs=item.attrs())
        trial = self.study.ask()
        if score is None:
            trial.set_user_attr(FAIL_REASON_ATTR, self.raised)
            self.study.tell(trial, state=optuna.trial.TrialState.FAIL)
            return
        trial.set_user_attr(SCORES_ATTR, [[r, s, score + self.seed_step * s] for r in (1, 2) for s in item.seeds])
        trial.set_user_attr(OUTCOME_ATTR, "success")
        self.study.tell(trial, score)


def test_a_race_run_that_raises_is_never_a_score_it_runs_again_and_twice_leaves_the_verdict_undecided() -> None:
    """A crashed run (FAIL) is an infrastructure failure, not the divergence penalty: due() enqueues it again; a
    baseline run that raised twice makes the verdict undecided, with a line that says so (a -1 for the baseline
    would have manufactured a winner); the report lists the crashes on their own line."""
    from rookworld.sweep.staged.stage_report import stage_report
    from rookworld.sweep.staged.stages import BASELINE, Item, due

    runs = RecordedStudy(stages_with("race", {**STAGES["race"], "min_seeds": 3}), n_trials=2,
                         raised="CUDA error: an illegal memory access was encountered")
    view, run = runs.view, runs.run
    run(Item("search", BASELINE, (), (0, 1)), 0.50)
    run(Item("search", "1", ("optimizer.lr=1e-4",), (0, 1)), 0.49)
    race = Item("race", BASELINE, (), (2,))
    assert race in due(view())[0]
    run(race, None)  # the baseline's race run raised
    assert view().run_scores("race", BASELINE) == {}  # not scored
    assert race in due(view())[0]  # runs again
    run(race, None)
    items, verdict = due(view())
    assert items == [] and verdict == ("verdict: undecided: a race run of the baseline raised 2 times (infrastructure, "
                                       "not a score: the report's failures line; fix it and run the same command)")
    report, _ = stage_report(view(), verdict, 1, None, None)
    assert report.split("\n")[2] == verdict
    assert "Infrastructure failures: 0 runs cut by the end of their machine (re-queued), 2 runs that raised: trial 2 " \
           "(race, baseline, seeds [2]): CUDA error" in report


def test_a_finalist_whose_confirmation_runs_raise_twice_leaves_the_verdict_undecided_not_negative() -> None:
    """The race's only survivor besides the baseline is the finalist; its confirmation run raises twice, so no
    survivor is left to confirm: the verdict is undecided and names the failed run, never "no configuration beats
    the baseline" (its score is unknown, not bad)."""
    from rookworld.sweep.staged.stages import BASELINE, Item, due

    runs = RecordedStudy(STAGES, n_trials=1, raised="CUDA error: out of memory", seed_step=0.01)
    view, run = runs.view, runs.run
    run(Item("search", BASELINE, (), (0, 1)), 0.50)
    run(Item("search", "1", ("optimizer.lr=1e-4",), (0, 1)), 0.49)
    items, verdict = due(view())
    while items and verdict is None:  # the race, then the confirmation: the finalist's first fresh-seed run raises
        item = items[0]
        run(item, None if item.stage == "confirm" and not item.baseline else 0.5 if item.baseline else 0.49)
        items, verdict = due(view())
    assert items == [] and verdict == ("verdict: undecided: a confirm run of trial 1 raised 2 times and no other race "
                                       "survivor is left to confirm (infrastructure, not a score: the report's failures "
                                       "line; fix it and run the same command)")
