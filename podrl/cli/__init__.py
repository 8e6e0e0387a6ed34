"""The front door: the `podrl` command and its subcommands, the training flags, experiment
resolution, presets, a checkpoint's policy and its video."""
