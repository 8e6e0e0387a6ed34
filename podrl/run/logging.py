"""Run reporting: a console progress line, JSONL metrics, TensorBoard, Weights & Biases, the resolved config.

Only process 0 writes (multi-host runs call this on every process). TensorBoard and W&B get the
same scalars (`scalars`): each number of a record, and `<key>/seed<i>` for each seed (or
population member) of a `<key>_per_seed` list; W&B also gets the resolved config.
"""

from __future__ import annotations

import datetime
import hashlib
import importlib.util
import json
import math
import os
import sys
import time
from typing import Any

import jax
import numpy as np

from podrl.core.errors import ConfigError
from podrl.run.config import LoggingConfig
from podrl.run.config_json import jsonable


def format_duration(seconds: float) -> str:
    seconds = max(0, int(seconds))
    return str(datetime.timedelta(seconds=seconds))


class RunLogger:
    """Writes `config.json`, `metrics.jsonl` and TensorBoard events into one run directory.

    Args:
      run_dir: continue this existing run directory instead of making a new one
        (a resumed run); `resume_step` is then the env step of the checkpoint:
        records the stopped run wrote after it (the resumed run redoes those
        updates) move from `metrics.jsonl` to `metrics.superseded.jsonl`,
        TensorBoard hides its events from that step on (`purge_step`), and
        `wall_time` continues from the last record kept.
    """

    def __init__(self, settings: LoggingConfig, default_name: str, config: dict[str, Any], tag: str,
                 run_dir: str | None = None, resume_step: int | None = None):
        self.settings = settings
        self.tag = tag
        self.enabled = jax.process_index() == 0
        self.run_dir: str | None = None
        self._jsonl = None
        self._tb = None
        self._wandb = None
        self._pending = None
        self._start = time.perf_counter()
        if not self.enabled:
            return
        name = settings.run_name or f"{default_name}__{time.strftime('%Y%m%d-%H%M%S')}"
        if settings.run_dir is not None:
            self.run_dir = run_dir or os.path.join(settings.run_dir, name)
            if run_dir is None:
                refuse_existing_run_dir(self.run_dir)
        if settings.wandb_project is not None:
            _require_wandb()
        self._pending = (config, name, run_dir is not None, run_dir is not None and resume_step is not None,
                         resume_step, resume_step if run_dir is not None else None)

    def _open(self) -> None:
        """Creates the run folder and its files (and the W&B run) at the first record or line: a run
        that fails to start (its env cannot be built, its program does not compile) leaves nothing behind."""
        if self._pending is None:
            return
        config, name, resumed, supersede, resume_step, purge_step = self._pending
        self._pending = None
        if self.run_dir is not None:
            os.makedirs(self.run_dir, exist_ok=True)
        if self.settings.wandb_project is not None:
            self._wandb = _wandb_run(self.settings, os.path.basename(self.run_dir) if self.run_dir else name,
                                     self.run_dir, config, resumed=resumed)
        if self.run_dir is None:
            return
        with open(os.path.join(self.run_dir, "config.json"), "w") as f:
            json.dump(jsonable(config), f, indent=2)
        metrics = os.path.join(self.run_dir, "metrics.jsonl")
        if supersede:
            self._start -= _supersede_after(metrics, resume_step)
        self._jsonl = open(metrics, "a")
        if self.settings.tensorboard:
            self._tb = _tensorboard_writer(self.run_dir, purge_step, self.tag)

    def log(self, step: int, metrics: dict[str, Any]) -> None:
        """Records `metrics` at env step `step`: scalars; per-seed (per-member) vectors, as their
        mean plus `<key>_per_seed` (TensorBoard: `<key>/seed<i>`); lists and dicts as they are."""
        if not self.enabled:
            return
        self._open()
        record = {"step": int(step), "wall_time": time.perf_counter() - self._start}
        for key, value in metrics.items():
            if isinstance(value, (list, dict)):  # kept as is (a population's lineage, `pbt/...`)
                record[key] = value
                continue
            value = np.asarray(value, dtype=np.float64) if not isinstance(value, str) else value
            if isinstance(value, np.ndarray) and value.ndim == 1:
                record[key] = float(np.nanmean(value)) if np.isfinite(value).any() else None
                if value.size > 1:
                    record[key + "_per_seed"] = value
            else:
                record[key] = value
        record = jsonable(record)
        if self._jsonl is not None:
            self._jsonl.write(json.dumps(record) + "\n")
            self._jsonl.flush()
        if self._tb is not None:
            for key, value in scalars(record).items():
                self._tb.add_scalar(key, value, step)
        if self._wandb is not None:  # its x axis is `env_step` (see _wandb_run)
            self._wandb.log({"env_step": int(step), **scalars(record)})

    def progress(self, step: int, total: int, sps: float, values: dict[str, float | None]) -> None:
        """Prints one console line: steps, SPS, chosen values and ETA."""
        if not (self.enabled and self.settings.console):
            return
        eta = (total - step) / sps if sps > 0 else float("nan")
        parts = [f"[{self.tag}] step {step:,}/{total:,} ({100 * step / max(total, 1):.0f}%)", f"SPS {sps:,.0f}"]
        for name, value in values.items():
            if value is not None and math.isfinite(value):
                parts.append(f"{name} {value:.1f}")
        parts.append(f"ETA {format_duration(eta) if math.isfinite(eta) else '?'}")
        print(" | ".join(parts), flush=True)

    def info(self, message: str) -> None:
        """Prints `[<tag>] message` (with `settings.console`); the first line of a run opens its folder."""
        if self.enabled:
            self._open()
        if self.enabled and self.settings.console:
            print(f"[{self.tag}] {message}", flush=True)

    def info_everywhere(self, message: str) -> None:
        """`info` on process 0; every other process prints `[<tag> p<index>] message` (a multi-process
        run's closing line: each process says where and why it stopped)."""
        if self.enabled:
            self.info(message)
        elif self.settings.console:
            print(f"[{self.tag} p{jax.process_index()}] {message}", flush=True)

    def close(self) -> None:
        if self._jsonl is not None:
            self._jsonl.close()
            self._jsonl = None
        if self._tb is not None:
            self._tb.close()
            self._tb = None
        if self._wandb is not None:
            self._wandb.finish()
            self._wandb = None


def scalars(record: dict[str, Any]) -> dict[str, float]:
    """The scalars of a JSON-ready `record` (not `step`): its numbers, and `<key>/seed<i>` for each
    non-null entry of a `<key>_per_seed` list. Other lists and dicts (`pbt/parent`) are left out."""
    out: dict[str, float] = {}
    for key, value in record.items():
        if key == "step" or isinstance(value, bool):
            continue
        if isinstance(value, (int, float)):
            out[key] = value
        elif isinstance(value, list) and key.endswith("_per_seed"):
            out.update({f"{key[:-9]}/seed{i}": v for i, v in enumerate(value) if isinstance(v, (int, float))})
    return out


def refuse_existing_run_dir(path: str) -> None:
    """ConfigError("logging.run_name") when a fresh run would write into `path`, a folder with files in it."""
    if os.path.isdir(path) and os.listdir(path):
        raise ConfigError("logging.run_name", f"{path} already holds a run; continue it with --resume {path}, "
                                              f"or give another --logging.run-name")


def _supersede_after(path: str, step: int) -> float:
    """Moves the records of `path` past env step `step` to `metrics.superseded.jsonl`.

    Returns the `wall_time` of the last record kept (0 when none), so a resumed
    run's clock continues from there.
    """
    if not os.path.exists(path):
        return 0.0
    with open(path) as f:
        lines = [line for line in f if line.strip()]
    keep, later = [], []
    for line in lines:
        (later if json.loads(line).get("step", 0) > step else keep).append(line)
    if later:
        with open(os.path.join(os.path.dirname(path), "metrics.superseded.jsonl"), "a") as f:
            f.writelines(later)
        with open(path, "w") as f:
            f.writelines(keep)
    return float(json.loads(keep[-1]).get("wall_time", 0.0)) if keep else 0.0


def _tensorboard_writer(run_dir: str, purge_step: int | None, tag: str):
    try:
        from tensorboardX import SummaryWriter
    except ImportError:
        print(f"[{tag}] tensorboardX not installed; skipping TensorBoard "
              "(pip install 'podrl[tensorboard]')", file=sys.stderr)
        return None
    return SummaryWriter(run_dir, purge_step=purge_step)


def _require_wandb() -> None:
    """ConfigError("logging.wandb_project") unless the wandb package can be imported (checked before the run starts)."""
    if importlib.util.find_spec("wandb") is None:
        raise ConfigError("logging.wandb_project", "needs the wandb package: pip install 'podrl[wandb]' "
                                                   "(or leave --logging.wandb-project unset)")


def _wandb_run(settings: LoggingConfig, name: str, run_dir: str | None, config: dict[str, Any], resumed: bool):
    """A W&B run named `name`, its files under `run_dir` (else W&B's default folder), plotted against
    `env_step`. Its id is fixed by the run directory, so a resumed run continues the same W&B run
    (its redone updates appear twice there: W&B keeps what it was sent, TensorBoard purges)."""
    import wandb

    run_id = None
    if run_dir is not None:
        digest = hashlib.sha1(os.path.abspath(run_dir).encode()).hexdigest()[:8]
        run_id = "".join(c if c.isalnum() or c in "-_" else "-" for c in name)[:48] + "-" + digest
    run = wandb.init(project=settings.wandb_project, entity=settings.wandb_entity, mode=settings.wandb_mode,
                     dir=run_dir, name=name, id=run_id, resume="allow" if resumed else None,
                     config=jsonable(config), settings=wandb.Settings(console="off"))
    run.define_metric("env_step")
    run.define_metric("*", step_metric="env_step")
    return run
