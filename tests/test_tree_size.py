"""The tracked tree stays light enough that a time-limited GPU job's calls can carry training data beside it:
at most 48 MiB of tracked files (`git ls-files -z | xargs -0 du -cb`), leaving 16 MiB of a 64 MiB call
(docs/warm-start.md: how a round's calls are laid out)."""
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LIMIT = 48 * 2**20


@pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(), reason="needs a git checkout")
def test_tracked_files_fit_in_48_mib():
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout.split(b"\0")
    sizes = {name.decode(): (ROOT / name.decode()).stat().st_size for name in files
             if name and (ROOT / name.decode()).is_file()}
    total = sum(sizes.values())
    largest = sorted(sizes.items(), key=lambda item: -item[1])[:5]
    assert total <= LIMIT, (f"tracked files hold {total / 2**20:.1f} MiB > 48 MiB; the largest: "
                            + ", ".join(f"{name} {size / 2**20:.1f} MiB" for name, size in largest))
