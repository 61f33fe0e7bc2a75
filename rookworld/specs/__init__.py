"""Typed, frozen specs of every config option (conf/<group>/<option>.yaml names its spec in `_target_`;
a group with one option is typed by the field that holds it). Each spec checks its own keys in
`__post_init__` and raises ConfigError("key=value: rule"); RunSpec, SftSpec and BenchSpec hold the groups
of a command and check the rules that need several groups. rookworld.app.config builds them from the
composed config; nothing here imports omegaconf or hydra."""
