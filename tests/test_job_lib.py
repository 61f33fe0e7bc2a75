"""tools/job_lib.sh: a binary carried in xz parts is joined once every part has come, and the wait ends early."""
import subprocess
import time
from pathlib import Path

LIB = Path(__file__).resolve().parents[1] / "tools" / "job_lib.sh"


def bash(script: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", f"source {LIB}; {script}"], cwd=cwd, capture_output=True, text=True, check=True)


def test_the_engine_is_joined_only_once_all_its_parts_have_come(tmp_path):
    engine = tmp_path / "engine.sh"
    engine.write_text("#!/bin/sh\necho engine ready\n" + "# padding\n" * 2000)
    subprocess.run(f"xz -c {engine} > engine.xz && split -n 2 -d -a 2 engine.xz stockfish.xz.", shell=True,
                   cwd=tmp_path, check=True)
    (tmp_path / "first").mkdir(), (tmp_path / "second").mkdir()
    (tmp_path / "stockfish.xz.00").rename(tmp_path / "first" / "stockfish.xz.00")
    (tmp_path / "stockfish.xz.01").rename(tmp_path / "second" / "stockfish.xz.01")
    assert "ready" not in bash("join_engine sf 2 first", tmp_path).stdout  # one call's part
    assert not (tmp_path / "sf" / "stockfish").exists()
    assert bash("join_engine sf 2 second", tmp_path).stdout == "== Stockfish ready\n"  # a later call's part
    assert subprocess.run([tmp_path / "sf" / "stockfish"], capture_output=True, text=True).stdout == "engine ready\n"
    assert bash("join_engine sf 2 first second", tmp_path).stdout == ""  # joined once


def test_the_wait_ends_when_the_job_ends(tmp_path):
    (tmp_path / "fakejob.sh").write_text("sleep 2\n")
    began = time.monotonic()
    done = bash("j=job; bash fake$j.sh & sleep 0.5; wait_while_running 'fake[j]ob' 60", tmp_path)  # not itself
    assert done.stdout == "== fake[j]ob is not running\n" and 2 <= time.monotonic() - began < 20
