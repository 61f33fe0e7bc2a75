"""Progress of a quiet test run: with `-q` (pyproject's) or `-qq` pytest prints a dot per test and, at
-qq, no count at the end; the suite runs its slowest tests first, so on a loaded machine its first
line of dots can take many minutes. The controller adds a line, at most every PROGRESS_EVERY_S, saying
how many tests are done."""

from __future__ import annotations

import time

import pytest

PROGRESS_EVERY_S = 60.0


class RunProgress:
    """A pytest plugin for the controlling process (not an xdist worker)."""

    def __init__(self, every_s: float = PROGRESS_EVERY_S) -> None:
        self.every_s = every_s
        self.started = self.noted = time.monotonic()
        self.done = 0
        self.failed: set[str] = set()
        self.session: pytest.Session | None = None

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.session = session

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.failed:
            self.failed.add(report.nodeid)
        if report.when != "teardown":
            return
        self.done += 1
        now = time.monotonic()
        if now - self.noted < self.every_s:
            return
        self.noted = now
        reporter = self.session.config.pluginmanager.get_plugin("terminalreporter") if self.session else None
        if reporter is not None:
            if reporter._tw.width_of_current_line:  # inside a line of dots: the note on its own line
                reporter._tw.line()
            reporter.write_line(self.line(now))

    def line(self, now: float) -> str:
        total = self.session.testscollected if self.session else 0
        share = f" ({100 * self.done / total:.0f}%)" if total else ""
        return (f"[{self.done} of {total or '?'} tests done{share}, {len(self.failed)} failed, "
                f"{(now - self.started) / 60:.1f} min]")
