"""W&B logging (`--logging.wandb-project`): what an offline run folder holds, read back from its file."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest

from podrl.core.errors import ConfigError
from podrl.run.config import LoggingConfig
from podrl.run.logging import RunLogger

BLOCK = 32 * 1024  # the .wandb file is a LevelDB-style log: 32 KiB blocks of (crc, length, type) records


def wandb_records(path: Path) -> list:
    """The protobuf records of an offline run's `run-<id>.wandb` file (W&B 0.31 ships no reader)."""
    from wandb.proto import wandb_internal_pb2

    data = path.read_bytes()
    assert data[:4] == b":W&B", data[:8]
    pos, pending, records = 7, b"", []
    while pos + 7 <= len(data):
        left = BLOCK - pos % BLOCK
        length, kind = int.from_bytes(data[pos + 4:pos + 6], "little"), data[pos + 6]
        if left < 7 or (length == 0 and kind == 0):  # the padded end of a block
            pos += left
            continue
        pending += data[pos + 7:pos + 7 + length]
        pos += 7 + length
        if kind in (1, 4):  # FULL, LAST
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending)
            records.append(record)
            pending = b""
    return records


def finished_records(path: Path, timeout_s: float = 30.0) -> list:
    """The records of an offline run file once W&B has written its `exit` record: `wandb.finish()` can
    return while W&B's service is still writing the file (seen here: 7 bytes, the header, then the
    records a quarter of a second later)."""
    deadline = time.monotonic() + timeout_s
    while True:
        records = wandb_records(path)
        if any(r.WhichOneof("record_type") == "exit" for r in records) or time.monotonic() > deadline:
            return records
        time.sleep(0.1)


def history_and_config(run_dir: Path) -> tuple[list[dict], dict]:
    """(the logged rows without W&B's own `_` keys, the run's config) of the one offline run in `run_dir`."""
    (path,) = run_dir.glob("wandb/offline-run-*/run-*.wandb")
    rows, config = [], {}
    for record in finished_records(path):
        kind = record.WhichOneof("record_type")
        if kind == "history":
            items = {item.key or "/".join(item.nested_key): json.loads(item.value_json) for item in record.history.item}
            rows.append({k: v for k, v in items.items() if not k.startswith("_")})
        elif kind == "run":
            config = {item.key: json.loads(item.value_json) for item in record.run.config.update}
    return rows, config


@pytest.mark.timeout(120)
def test_offline_run_holds_the_config_and_every_scalar_per_seed(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path / "wandb-home"))
    monkeypatch.setenv("WANDB_SILENT", "true")
    settings = LoggingConfig(run_dir=str(tmp_path), run_name="tiny", tensorboard=False, console=False,
                             wandb_project="podrl-test")
    logger = RunLogger(settings, "unused", {"run": {"num_seeds": 2}, "agent": {"learning_rate": 1e-3}}, "anakin")
    logger.log(128, {"episode_return": np.array([1.0, 3.0]), "sps": 50.0, "pbt/parent": [0, 0]})
    logger.log(256, {"episode_return": np.array([2.0, np.nan]), "train/loss": np.array([0.5, 0.25]), "sps": 60.0})
    logger.close()
    rows, config = history_and_config(tmp_path / "tiny")
    for row in rows:
        row.pop("wall_time")
    assert rows == [
        {"env_step": 128, "episode_return": 2.0, "episode_return/seed0": 1.0, "episode_return/seed1": 3.0,
         "sps": 50.0},
        {"env_step": 256, "episode_return": 2.0, "episode_return/seed0": 2.0, "sps": 60.0,  # a NaN seed: no point
         "train/loss": 0.375, "train/loss/seed0": 0.5, "train/loss/seed1": 0.25},
    ]
    assert config["run"] == {"num_seeds": 2} and config["agent"] == {"learning_rate": 1e-3}
    lines = (tmp_path / "tiny" / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(line)["step"] for line in lines] == [128, 256]  # the JSONL log is unchanged


def test_a_bad_wandb_mode_is_a_config_error_naming_the_field():
    with pytest.raises(ConfigError, match="wandb_mode"):
        LoggingConfig(wandb_mode="sometimes")
