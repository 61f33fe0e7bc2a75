"""The entry points' one error policy: a user error (bad config, model, data path, tracking store)
prints `rookworld: error: <one line>` and exits with status 2; anything else is a bug and raises.
In a Hydra multirun the error propagates instead, so the sweeper records it as the trial's failure."""
from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode

from rookworld.config import ConfigError
from rookworld.model.hub import ModelLoadError
from rookworld.tracking import TrackingError

USER_ERRORS = (ConfigError, ModelLoadError, TrackingError, FileNotFoundError)


@contextmanager
def exit_on_user_error() -> Iterator[None]:
    try:
        yield
    except USER_ERRORS as error:
        if in_multirun():
            raise
        print(f"rookworld: error: {error}", file=sys.stderr)
        sys.exit(2)


def in_multirun() -> bool:
    return HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN
