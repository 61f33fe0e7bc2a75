"""P: training positions from annotated JSONL files and from folders of shards that grow while training reads them.

A warm-start round trains while its engine processes write new self-play shards (rookworld/data/shards.py writes
each shard file atomically); the pool is the sequence the document stream draws P: positions from
(`random.choice(pool)`), and its length grows as new shard files appear. Each reader (a DataLoader worker) keeps
the raw lines of the files it has read and parses a position only when it is drawn (~25 us), so a worker starts
in a second or two on hundreds of thousands of positions; a folder is listed again at most every `rescan_s`.
"""
from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path

from rookworld.data.positions import policy_truth_from_record
from rookworld.data.records import open_text
from rookworld.tasks import Problem, policy_problem

SHARD_SUFFIXES = (".jsonl", ".jsonl.gz", ".jsonl.xz")
NO_CANDIDATES = '"candidates":[]'  # a position without an engine label (the writers' compact JSON)


def position_files(sources: Sequence[str | Path]) -> list[Path]:
    """The annotated JSONL files of `sources` (files, or folders whose shard files are listed), in name order."""
    files = []
    for source in map(Path, sources):
        if source.is_dir():
            files.extend(sorted(p for p in source.iterdir() if p.name.endswith(SHARD_SUFFIXES)))
        elif source.is_file():
            files.append(source)
        else:
            raise FileNotFoundError(f"positions source {source} is neither a file nor a folder")
    return files


class ShardPool(Sequence):
    """The P: problems of every annotated position in `sources`, growing as new files appear in its folders."""

    def __init__(self, sources: Sequence[str | Path], rescan_s: float = 10.0):
        self.sources = [str(s) for s in sources]
        self.rescan_s = rescan_s
        position_files(self.sources)  # a missing source fails here, in the process that builds the pool
        self._lines: list[str] = []
        self._read: set[str] = set()
        self._next_scan = 0.0

    def __getstate__(self) -> dict:
        return {"sources": self.sources, "rescan_s": self.rescan_s}  # each worker reads the files itself

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["sources"], state["rescan_s"])

    def __len__(self) -> int:
        if time.monotonic() >= self._next_scan:
            self.refresh()
        return len(self._lines)

    def __getitem__(self, index: int) -> Problem:
        return policy_problem(policy_truth_from_record(json.loads(self._lines[index])))

    def refresh(self) -> int:
        """Read the files not read yet (waiting for a first one while the pool is empty); the positions added."""
        before, files_before = len(self._lines), len(self._read)
        while True:
            for path in position_files(self.sources):
                if str(path) not in self._read:
                    with open_text(path) as handle:
                        self._lines.extend(line for line in handle.read().splitlines()
                                           if line and NO_CANDIDATES not in line)
                    self._read.add(str(path))
            if self._lines:
                break
            time.sleep(1.0)  # nothing carried and no shard written yet: the first one comes soon
        self._next_scan = time.monotonic() + self.rescan_s
        added = len(self._lines) - before
        if files_before and added:
            print(f"positions: +{added:,} from {len(self._read) - files_before} new file(s), "
                  f"{len(self._lines):,} in all", flush=True)
        return added
