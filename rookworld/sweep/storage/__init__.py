"""The shared Optuna study: storages and their URLs, the journal file, the lock and the clock every host reads alike."""
