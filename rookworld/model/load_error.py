"""ModelLoadError, without torch: the entry points (rookworld/app/errors.py) catch it in every process,
including those that never load a model."""


class ModelLoadError(RuntimeError):
    """A model could not be loaded; the message is always a single line."""

    def __init__(self, message: str):
        super().__init__(" ".join(message.split()))
