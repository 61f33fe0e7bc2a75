"""`python -m rookworld.bench.document_workers [--before REV] [--docs N] [--repeats N] [overrides]`: one
document worker of `python -m rookworld.sft` against the same worker at an earlier commit.

Reads that commit's data/documents.py and data/move_cases.py (`git show`, so run it in the checkout),
checks that both streams make the same documents, then times each (and the current one with
sft.arbiter_docs_per_position A: documents a position, when above 1) in one process, interleaved,
--repeats times, at an A: share of 1 and of sft.arbiter_fraction: documents/s, medians.

    python -m rookworld.bench.document_workers --before 33e2bd3 --docs 1000 --repeats 5 sft.arbiter_docs_per_position=4
"""
from __future__ import annotations

import argparse
import importlib.util
import itertools
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rookworld.run.build import load_policy
from rookworld.app.config import compose, load_sft
from rookworld.data import documents
from rookworld.data.positions import load_policy_problems
from rookworld.app.errors import as_command

EARLIER_MODULES = ("move_cases", "documents")  # in import order: documents imports move_cases


def earlier_documents(rev: str, folder: Path):
    """data/documents.py as it was at `rev`, importing that commit's move_cases."""
    for name in EARLIER_MODULES:
        source = subprocess.run(["git", "show", f"{rev}:rookworld/data/{name}.py"], capture_output=True, text=True,
                                check=True).stdout
        for other in EARLIER_MODULES:
            source = source.replace(f"from rookworld.data.{other} import", f"from before_{other} import")
        (folder / f"before_{name}.py").write_text(source)
    sys.path.insert(0, str(folder))
    spec = importlib.util.spec_from_file_location("before_documents", folder / "before_documents.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def rate(stream, n_docs: int) -> float:
    docs = iter(stream)
    next(docs)
    start = time.perf_counter()
    for _ in itertools.islice(docs, n_docs):
        pass
    return n_docs / (time.perf_counter() - start)


def main(argv: list[str] | None = None) -> None:
    with as_command():
        run(argv)


def run(argv: list[str] | None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", default="HEAD", help="the earlier commit")
    parser.add_argument("--docs", type=int, default=1000, help="documents per timing")
    parser.add_argument("--repeats", type=int, default=3, help="interleaved rounds (medians reported)")
    parser.add_argument("overrides", nargs="*", help="Hydra overrides of the sft config")
    args = parser.parse_args(argv)
    spec = load_sft(compose(["tracking=none", "device=cpu", *args.overrides], "sft"))
    s = spec.sft
    _, tokenizer = load_policy(spec.model, "cpu")
    problems = load_policy_problems("train", spec.data.as_mapping())
    with tempfile.TemporaryDirectory() as folder:
        before = earlier_documents(args.before, Path(folder))

        def stream(module, share: float, k: int, seed: int):
            cases = module.ArbiterCases(dict(s.arbiter_cases), set(), *([k] if k > 1 else []))
            return module.TaskDocuments(tokenizer, problems, cases, share, s.seq_len, seed, loss_on=s.loss_on)

        streams = {"before": (before, 1), "now": (documents, 1)}
        if s.arbiter_docs_per_position > 1:
            streams[f"now, {s.arbiter_docs_per_position} A: a position"] = (documents, s.arbiter_docs_per_position)
        for share in sorted({1.0, s.arbiter_fraction}, reverse=True):
            same = [list(itertools.islice(iter(stream(m, share, 1, spec.seed)), args.docs)) for m in (before, documents)]
            if same[0] != same[1]:
                raise SystemExit(f"the streams differ at A: share {share}: not the same documents as {args.before}")
            timed = {name: [] for name in streams}
            for repeat in range(args.repeats):
                for name, (module, k) in streams.items():
                    timed[name].append(rate(stream(module, share, k, spec.seed + 1 + repeat), args.docs))
            medians = {name: statistics.median(rates) for name, rates in timed.items()}
            print(f"A: share {share}: the same {args.docs} documents as {args.before}; documents/s in one process: "
                  + ", ".join(f"{name} {r:,.0f} ({r / medians['before']:.2f}x)" for name, r in medians.items()),
                  flush=True)


if __name__ == "__main__":
    main()
