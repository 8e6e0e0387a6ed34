"""Run reporting: a console progress line, JSONL metrics, TensorBoard, the resolved config.

Only process 0 writes (multi-host runs call this on every process).
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import math
import os
import sys
import time
from typing import Any

import jax
import numpy as np

from podrl.config import LoggingConfig


def jsonable(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, (np.ndarray, jax.Array)):
        return jsonable(np.asarray(value).tolist())
    if isinstance(value, (np.floating, float)):
        value = float(value)
        return value if math.isfinite(value) else None
    if isinstance(value, np.integer):
        return int(value)
    return value


def format_duration(seconds: float) -> str:
    seconds = max(0, int(seconds))
    return str(datetime.timedelta(seconds=seconds))


class RunLogger:
    """Writes `config.json`, `metrics.jsonl` and TensorBoard events into one run directory."""

    def __init__(self, settings: LoggingConfig, default_name: str, config: dict[str, Any], tag: str):
        self.settings = settings
        self.tag = tag
        self.enabled = jax.process_index() == 0
        self.run_dir: str | None = None
        self._jsonl = None
        self._tb = None
        self._start = time.perf_counter()
        if not self.enabled or settings.run_dir is None:
            return
        name = settings.run_name or f"{default_name}__{time.strftime('%Y%m%d-%H%M%S')}"
        self.run_dir = os.path.join(settings.run_dir, name)
        os.makedirs(self.run_dir, exist_ok=True)
        with open(os.path.join(self.run_dir, "config.json"), "w") as f:
            json.dump(jsonable(config), f, indent=2)
        self._jsonl = open(os.path.join(self.run_dir, "metrics.jsonl"), "a")
        if settings.tensorboard:
            try:
                from tensorboardX import SummaryWriter
            except ImportError:
                print(f"[{tag}] tensorboardX not installed; skipping TensorBoard "
                      "(pip install 'podrl[tensorboard]')", file=sys.stderr)
            else:
                self._tb = SummaryWriter(self.run_dir)

    def log(self, step: int, metrics: dict[str, Any]) -> None:
        """Records `metrics` at env step `step` (scalars, or per-seed vectors)."""
        if not self.enabled:
            return
        record = {"step": int(step), "wall_time": time.perf_counter() - self._start}
        for key, value in metrics.items():
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
            for key, value in record.items():
                if key == "step":
                    continue
                if isinstance(value, (int, float)):
                    self._tb.add_scalar(key, value, step)
                elif isinstance(value, list) and key.endswith("_per_seed"):
                    for i, v in enumerate(value):
                        if v is not None:
                            self._tb.add_scalar(f"{key[:-9]}/seed{i}", v, step)

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
        if self.enabled and self.settings.console:
            print(f"[{self.tag}] {message}", flush=True)

    def close(self) -> None:
        if self._jsonl is not None:
            self._jsonl.close()
            self._jsonl = None
        if self._tb is not None:
            self._tb.close()
            self._tb = None
