"""The final pool is locked by structure (rookworld/final_pool.py): every door a user can try, each command and
each path pointed at a copy of its files, is refused in one line before any model loads (the model path given
does not exist: a command that loaded first would fail on it instead); the staged confirmation's own runs alone
read it; the supervised A: documents and a round's self-play exclude its positions whatever the config says."""
import gzip
import random
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import chess
import pytest
from hydra.core.utils import JobReturn, JobStatus

from rookworld import final_pool
from rookworld.app.config import compose, load_round, load_run, load_sft, load_stages
from rookworld.data.records import iter_jsonl, open_text, position_key
from rookworld.specs.rules import ConfigError

ROOT = Path(__file__).resolve().parents[1]
POLICY, ARBITER = final_pool.FILES
SPLIT_REFUSED = ("eval.split='final': the final pool is read by a staged sweep's confirmation alone "
                 "(hydra.sweeper.stages.confirm.pool): select on validation, report on test")
PATH_REFUSED = ("is the final pool (its rows are final.jsonl.xz's or final_arbiter.jsonl.xz's positions): a staged "
                "sweep's confirmation alone reads it, as data.policy_final / arbiter_final")


def empty_model(tmp: Path) -> Path:
    """A folder that holds no model: a command that loaded its model before refusing would fail on it instead."""
    folder = tmp / "no_model"
    folder.mkdir(exist_ok=True)
    return folder


@pytest.fixture(scope="module")
def copies(tmp_path_factory) -> dict[str, Path]:
    """The final pool's files as a user might copy them: renamed, recompressed, shuffled, cut to a few rows."""
    folder = tmp_path_factory.mktemp("copies")
    rows = open_text(POLICY).readlines()
    shuffled = random.Random(0).sample(rows[:200], 40)
    found = {"renamed": folder / "train.jsonl.xz", "regzipped": folder / "positions.jsonl.gz",
             "shuffled": folder / "heldout.jsonl", "arbiter": folder / "cases.jsonl.xz",
             "shard": folder / "shards" / "shard-000000.jsonl.gz"}
    shutil.copy(POLICY, found["renamed"])
    shutil.copy(ARBITER, found["arbiter"])
    with gzip.open(found["regzipped"], "wt") as handle:
        handle.writelines(rows)
    found["shuffled"].write_text("".join(shuffled))
    found["shard"].parent.mkdir()
    shutil.copy(found["regzipped"], found["shard"])
    return found


def train_door(tmp: Path, *overrides: str) -> None:
    from rookworld.train import run

    run(compose(["model=rookworld_tiny", f"model.path={empty_model(tmp)}", "device=cpu", "tracking=none", *overrides]))


def sft_door(tmp: Path, *overrides: str) -> None:
    from rookworld.sft.loop import run

    run(compose([f"model.path={empty_model(tmp)}", "device=cpu", "tracking=none", *overrides], "sft"))


def round_config(tmp: Path, *overrides: str):
    return compose(["round.seed=99", f"model.path={empty_model(tmp)}", "device=cpu", f"round.out={tmp}/round",
                    f"sft.save_dir={tmp}/round/candidate", *overrides], "round")


def round_door(tmp: Path, *overrides: str) -> None:
    from rookworld.warm_start.round import run

    run(round_config(tmp, *overrides))


def play_door(tmp: Path, *overrides: str) -> None:
    from rookworld.play import run

    run(compose([f"model.path={empty_model(tmp)}", "device=cpu", "tracking=none", *overrides], "play"), progress=False)


def eval_time_door(tmp: Path, *overrides: str) -> None:
    from rookworld.bench.eval_time import main

    main(["--repeats", "1", "model=rookworld_tiny", f"model.path={empty_model(tmp)}", "device=cpu", *overrides])


def pass_rates_door(tmp: Path, *overrides: str) -> None:
    from rookworld.commands.pass_rates import main

    main(["--out", str(tmp / "rates.jsonl"), "model=rookworld_tiny", f"model.path={empty_model(tmp)}", "device=cpu",
          *overrides])


RUN_DOORS = {"train": train_door, "sft": sft_door, "round": round_door, "play": play_door}  # the runs' own run(cfg)
ARGV_DOORS = {"eval_time": eval_time_door, "pass_rates": pass_rates_door}  # argv mains, exit policy included
TAG = "+trial.tags.stage=confirm"  # the confirmation's tag, typed by hand: it opens nothing
SPLIT_DOORS = [("train", ("data=selfplay", "eval.split=final")), ("train", ("data=selfplay", "eval.split=final", TAG)),
               ("eval_time", ("data=selfplay", "eval.split=final", TAG)),
               ("pass_rates", ("data=selfplay", "eval.split=final", TAG)),
               ("sft", ("eval.split=final",)), ("sft", ("data=selfplay", "eval.split=final")),
               ("round", ("eval.split=final",))]
PATH_DOORS = [("train", "data.policy_train", "renamed"), ("train", "data.policy_validation", "regzipped"),
              ("train", "data.policy_test", "shuffled"), ("train", "data.arbiter_validation", "arbiter"),
              ("train", "data.arbiter_train", "renamed"), ("eval_time", "data.policy_test", "shuffled"),
              ("pass_rates", "data.policy_train", "regzipped"), ("sft", "data.policy_train", "renamed"),
              ("sft", "data.arbiter_test", "arbiter"), ("round", "data.policy_validation", "shuffled"),
              ("round", "round.carry", "shard")]


def refusal(door: str, tmp: Path, capsys, *overrides: str) -> str:
    """The one-line error a door stops with (its model never loads: the model path does not exist)."""
    if door in ARGV_DOORS:
        with pytest.raises(SystemExit) as stopped:
            ARGV_DOORS[door](tmp, *overrides)
        printed = capsys.readouterr()
        assert stopped.value.code == 2 and printed.out == ""
        lines = printed.err.splitlines()
        assert len(lines) == 1 and lines[0].startswith("rookworld: error: "), printed.err
        return lines[0].removeprefix("rookworld: error: ")
    with pytest.raises(ConfigError) as error:
        RUN_DOORS[door](tmp, *overrides)
    assert "\n" not in str(error.value)
    return str(error.value)


@pytest.mark.parametrize(("door", "overrides"), SPLIT_DOORS, ids=[" ".join((d, *o)) for d, o in SPLIT_DOORS])
def test_every_command_refuses_the_final_split_in_one_line_before_its_model_loads(tmp_path, capsys, door, overrides):
    assert refusal(door, tmp_path, capsys, *overrides) == SPLIT_REFUSED


@pytest.mark.parametrize(("door", "key", "copy"), PATH_DOORS, ids=[f"{d} {k} {c}" for d, k, c in PATH_DOORS])
def test_every_path_at_a_copy_of_the_final_pool_is_refused_in_one_line(tmp_path, capsys, copies, door, key, copy):
    path = copies[copy]
    value = f"[{path.parent}]" if key == "round.carry" else str(path)  # round.carry: a folder of shards
    assert refusal(door, tmp_path, capsys, f"{key}={value}") == f"{key}={str(path)!r}: {PATH_REFUSED}"


def test_play_takes_no_held_out_split_at_all(tmp_path, capsys):
    assert refusal("play", tmp_path, capsys, "+eval.split=final").startswith("config=['eval']: unknown key(s)")


def test_the_pool_is_known_by_its_rows_not_its_name(tmp_path, copies):
    """The shipped parts that are not the final pool pass; a copy of it under any name does not; a file of other
    rows named like it passes (the name is nothing)."""
    selfplay = POLICY.parent
    assert not any(final_pool.is_final_pool(p) for p in sorted(selfplay.glob("*.jsonl.xz")) if p not in final_pool.FILES)
    assert not any(final_pool.is_final_pool(p) for p in sorted((selfplay.parent / "bundled").glob("*.jsonl.gz")))
    assert all(final_pool.is_final_pool(p) for p in [*final_pool.FILES, *copies.values()])
    impostor = tmp_path / "final.jsonl.xz"
    shutil.copy(selfplay / "test.jsonl.xz", impostor)
    assert not final_pool.is_final_pool(impostor)
    keys = {position_key(row["fen"]) for path in final_pool.FILES for _, row in iter_jsonl(path)}
    assert final_pool.position_keys() == keys


def test_the_confirmation_alone_reads_the_final_pool_through_its_own_code_path(tmp_path):
    """A staged confirmation's segments (rungs.py, sweeps=chess_verdict: confirm.pool=final) run the trial's real
    config with eval.split=final and are accepted; the same overrides outside the confirmation are refused, and a
    training path at the pool is refused inside it too."""
    from rookworld.sweep.staged.rungs import ItemRun
    from rookworld.sweep.staged.stages import CONFIRM, Item

    sweep = compose(["sweeps=chess_verdict", "device=cpu"])
    stages = load_stages(sweep.hydra.sweeper.stages).with_horizon(sweep.steps)
    accepted = []

    def run_job(overrides: list[str], subdir: str) -> JobReturn:
        kept = [o for o in overrides if not o.startswith(("+trial.", "resume_from="))]  # no trial group, no checkpoint
        accepted.append((kept, load_run(compose(["sweeps=chess_verdict", "device=cpu", *kept])).eval.split))
        job = JobReturn()
        job.status, job.return_value = JobStatus.COMPLETED, SimpleNamespace(objective=0.5, outcome="success",
                                                                            problem_scores=[])
        return job

    item = Item(CONFIRM, "baseline", tuple(stages.baseline), (stages.confirm_seeds()[0],), stages.confirm.pool)
    result = ItemRun(item, stages, tmp_path / "stages", -1.0, run_job, lambda rung, score: False, lambda r: None,
                     lambda job: "raised").run()
    assert result.failure is None and [split for _, split in accepted] == ["final"] * len(stages.rungs)
    with pytest.raises(ConfigError, match=r"^eval.split='final': the final pool is read by"):
        load_run(compose(["sweeps=chess_verdict", "device=cpu", *accepted[-1][0]]))
    with final_pool.confirmation(), pytest.raises(ConfigError, match=r"^data.policy_train=.*: is the final pool"):
        load_run(compose(["sweeps=chess_verdict", "device=cpu", *accepted[-1][0], f"data.policy_train={POLICY}"]))


def test_no_supervised_a_document_starts_from_a_final_pool_position():
    """The supervised stream's exclusion holds every final-pool position whatever the data (the bundled default
    names no final pool): its A: cases give no document from the final A: part's positions."""
    from rookworld.data.documents import ArbiterCases
    from rookworld.run.build import heldout_keys

    spec = load_sft(compose(["device=cpu"], "sft"))
    exclude = heldout_keys(spec.data)
    assert final_pool.position_keys() <= exclude
    boards = [chess.Board(row["fen"]) for _, row in iter_jsonl(ARBITER)][:100]
    cases = ArbiterCases(dict(spec.sft.arbiter_cases), exclude)
    assert list(cases.problems(iter(boards), random.Random(0))) == [None] * len(boards)


def test_a_round_s_self_play_excludes_the_final_pool_even_with_an_empty_exclude_list(tmp_path):
    from rookworld.data.shard_pool import position_files
    from rookworld.warm_start.round import selfplay_command

    for exclude in ("round.exclude=[]", f"round.exclude=[{POLICY}]"):
        r = load_round(round_config(tmp_path, exclude)).round
        command = selfplay_command(r, engines=2, seconds=60)
        excluded = command[command.index("--exclude") + 1:]
        assert excluded == [str(p) for p in final_pool.with_final_pool(position_files(r.exclude))]
        assert sorted(set(excluded) & {str(p) for p in final_pool.FILES}) == sorted(map(str, final_pool.FILES))
        assert len(excluded) == len(set(excluded))


def test_sft_on_the_command_line_refuses_the_final_split_in_one_line(tmp_path):
    """The door the audit found open, as a new user types it: one line on stderr, exit 2, nothing printed before
    (the model, which does not exist, never loads)."""
    proc = subprocess.run([sys.executable, "-m", "rookworld.sft", "eval.split=final", "device=cpu", "tracking=none",
                           f"model.path={empty_model(tmp_path)}", f"hydra.run.dir={tmp_path}/run"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert (proc.returncode, proc.stdout, proc.stderr) == (2, "", f"rookworld: error: {SPLIT_REFUSED}\n")
