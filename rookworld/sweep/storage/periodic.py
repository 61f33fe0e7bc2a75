"""A function called every `interval_s` seconds from a daemon thread while a `with` block runs: the
study lock's lease (lock.py) and the trials' heartbeat (study.py)."""
from __future__ import annotations

import threading
from collections.abc import Callable


class Periodic:
    """Calls `tick` every `interval_s` seconds until the block ends or `tick` returns False."""

    def __init__(self, tick: Callable[[], bool | None], interval_s: float, name: str) -> None:
        self._tick, self._interval_s = tick, interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def __enter__(self) -> Periodic:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self._interval_s):
            if self._tick() is False:
                return
