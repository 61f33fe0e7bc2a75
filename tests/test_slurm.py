"""The project's SLURM script on a real Slurm: a private one-node cluster on 127.0.0.1 (munged, slurmctld and
slurmd with their own config, sockets, ports and state under a temp folder), Debian's slurm-wlm and munge
packages (.ci/run installs them). tools/slurm_sweep.sbatch is submitted as an array of 2 tasks x 2 workers
on one study in the suite's real PostgreSQL: the study gets exactly its n_trials, under one MLflow parent.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Iterator

import pytest
from optuna.trial import TrialState
from sweep_helpers import REPO, TINY_SWEEP, load_study, mlflow_runs, subprocess_env

from rookworld.tracking import ROLE_TAG

MUNGE_KEY = Path("/etc/munge/munge.key")  # the munge package creates it
NODE = "rookworld-ci"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def slurm_conf(root: Path) -> str:
    return f"""ClusterName=rookworld
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort={_free_port()}
SlurmdPort={_free_port()}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={root}/munge.sock
CredType=cred/munge
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd.pid
SlurmctldLogFile={root}/slurmctld.log
SlurmdLogFile={root}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
NodeName={NODE} NodeAddr=127.0.0.1 CPUs={os.cpu_count() or 1} State=UNKNOWN
PartitionName=ci Nodes={NODE} Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE
"""


@pytest.fixture(scope="module")
def slurm() -> Iterator[dict[str, str]]:
    """A running one-node Slurm; the environment its commands need (SLURM_CONF)."""
    missing = [p for p in ("munged", "slurmctld", "slurmd", "sbatch") if shutil.which(p) is None and
               not Path("/usr/sbin", p).exists()]
    if missing:
        pytest.skip(f"Slurm is not installed ({', '.join(missing)} missing): apt-get install slurm-wlm munge "
                    "(.ci/run does)")
    if os.geteuid() != 0 or not MUNGE_KEY.exists():
        pytest.skip("a private Slurm needs root and the munge key /etc/munge/munge.key (the munge package)")
    root = Path(tempfile.mkdtemp(prefix="rookworld-slurm-"))
    (root / "state").mkdir()
    (root / "spool").mkdir()
    (root / "slurm.conf").write_text(slurm_conf(root))
    env = {**os.environ, "SLURM_CONF": str(root / "slurm.conf")}
    run = lambda *c: subprocess.run(c, env=env, check=True, capture_output=True, timeout=60)  # noqa: E731
    run("/usr/sbin/munged", f"--socket={root}/munge.sock", f"--key-file={MUNGE_KEY}", f"--pid-file={root}/munged.pid",
        f"--log-file={root}/munged.log", f"--seed-file={root}/munged.seed", "--force")
    try:
        run("/usr/sbin/slurmctld", "-c", "-i")
        run("/usr/sbin/slurmd", "-N", NODE)
        deadline = time.monotonic() + 60
        while "idle" not in subprocess.run(["sinfo", "-h", "-o", "%T"], env=env, capture_output=True, text=True).stdout:
            assert time.monotonic() < deadline, (root / "slurmctld.log").read_text()[-2000:]
            time.sleep(0.5)
        yield {"SLURM_CONF": env["SLURM_CONF"]}
    finally:
        for daemon in ("slurmd", "slurmctld", "munged"):
            pid_file = root / f"{daemon}.pid"
            if pid_file.exists():
                try:
                    os.kill(int(pid_file.read_text()), 15)
                except (ProcessLookupError, ValueError):
                    pass
        time.sleep(1)
        shutil.rmtree(root, ignore_errors=True)


@pytest.mark.slow
def test_the_sbatch_array_runs_one_study_under_one_parent(tmp_path: Path, slurm: dict[str, str],
                                                           postgres_url: str) -> None:
    overrides = [o for o in TINY_SWEEP if not o.startswith("sweeps=")]
    env = subprocess_env(**slurm, ROOKWORLD_OPTUNA_STORAGE=postgres_url, SWEEP="smoke",
                         TRIALS_PER_GPU="2", PYTHON=shutil.which("python3") or "python3",
                         SWEEP_ARGS=" ".join([*overrides, "hydra.sweeper.n_trials=6", "hydra.sweeper.study_name=slurm"]))
    submitted = subprocess.run(["sbatch", "--wait", "--array=0-1", "--cpus-per-task=1", "--export=ALL",
                                str(REPO / "tools" / "slurm_sweep.sbatch")], cwd=tmp_path, env=env,
                               capture_output=True, text=True, timeout=900)
    outputs = {p.name: p.read_text() for p in tmp_path.glob("slurm-*.out")}
    assert submitted.returncode == 0, (submitted.stderr, {k: v[-2000:] for k, v in outputs.items()})
    assert len(outputs) == 2  # two array tasks ran

    study = load_study(postgres_url, "slurm")
    assert [t.state for t in study.trials] == [TrialState.COMPLETE] * 6
    workers = {p.parent.parent.name + p.name for p in tmp_path.glob("outputs/sweeps/*/*/.sweep/worker_*.jsonl")}
    assert len(workers) == 4  # 2 launches x 2 workers
    runs = mlflow_runs(tmp_path)
    parents = [r for r in runs if r.data.tags.get(ROLE_TAG) == "sweep_parent"]
    assert len(parents) == 1 and parents[0].info.status == "FINISHED"
    assert sum(r.data.tags.get(ROLE_TAG) == "trial" for r in runs) == 6
    assert all(r.info.status != "RUNNING" for r in runs)
