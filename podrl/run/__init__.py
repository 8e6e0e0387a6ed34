"""Run services, whatever the layout: the driver loop, the run context, configs, checkpoints,
logging, stop signals, the watchdog, evaluation and profiling."""
