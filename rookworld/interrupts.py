"""SIGTERM and SIGINT as one exception, so that a stopped run ends like any other: its MLflow run
closed (status KILLED, outcome `failed`, the signal as stop reason), then one line and exit code
128 + signal (143 for SIGTERM, 130 for SIGINT).

`raise_on_signals()` makes both signals raise `Interrupted` in the main thread. It is a
KeyboardInterrupt, so code that already treats Ctrl-C as an interrupt (the Tracker, Hydra's job
runner, which lets it through) treats SIGTERM the same way. Only the first signal raises: later
ones (a second Ctrl-C, a sweep stopping its workers after the terminal already did) are ignored
while the run closes its MLflow run; SIGKILL still ends the process at once.

A signal that lands inside a library's cleanup can be hidden behind the cleanup's own failure: Optuna's
journal file lock, interrupted while it waits, releases a lock it never took and raises RuntimeError
with the Interrupted as its context. `interrupts_unmasked()` raises the Interrupted again in its place.

A signal that lands while a finalizer or a weakref callback runs (the garbage collector runs them at any
bytecode) would raise there, where Python prints "Exception ignored in ..." and drops the exception: the
run would never stop. Such a swallowed signal is sent again a moment later, once the finalizer has returned.
"""
from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
REDELIVERY_DELAY_S = 0.05  # a swallowed signal is sent again after this


class Interrupted(KeyboardInterrupt):
    """The process received `signum`; the run stops here."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        self.signal_name = signal.Signals(signum).name
        super().__init__(self.stop_reason)

    @property
    def stop_reason(self) -> str:
        return f"stopped by {self.signal_name}"

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


class _OnFirstSignal:
    def __init__(self) -> None:
        self.raised = False

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        if self.raised:
            return
        self.raised = True
        raise Interrupted(signum)


def _raise_again_after_finalizers(handler: _OnFirstSignal, previous_hook):
    def hook(unraisable) -> None:
        if not isinstance(unraisable.exc_value, Interrupted):
            previous_hook(unraisable)
            return
        handler.raised = False
        # Sent again from another thread a moment later, when the finalizer has returned: raised here or at
        # once, it would land in this hook or in the finalizer again.
        threading.Timer(REDELIVERY_DELAY_S, os.kill, (os.getpid(), unraisable.exc_value.signum)).start()
    return hook


def raise_on_signals() -> None:
    """From now on, the first SIGTERM or SIGINT raises Interrupted in the main thread (once per process:
    a second call keeps the handler, and whether it has fired). Off the main thread (a launcher running jobs
    in threads) it does nothing: only the main thread may handle signals."""
    if threading.current_thread() is not threading.main_thread():
        return
    if isinstance(signal.getsignal(signal.SIGTERM), _OnFirstSignal):
        return
    handler = _OnFirstSignal()
    for signum in STOP_SIGNALS:
        signal.signal(signum, handler)
    sys.unraisablehook = _raise_again_after_finalizers(handler, sys.unraisablehook)


def hidden_interruption(error: BaseException | None) -> Interrupted | None:
    """The Interrupted in `error`'s chain of contexts (the exception it was raised while handling), if any."""
    while error is not None and not isinstance(error, Interrupted):
        error = error.__context__
    return error


@contextmanager
def interrupts_unmasked() -> Iterator[None]:
    """Around code that calls a library whose cleanup may fail while an Interrupted unwinds through it:
    that failure is replaced by the Interrupted, so the stop is handled as a stop."""
    try:
        yield
    except Exception as error:
        stop = hidden_interruption(error)
        if stop is None:
            raise
        raise stop from None
