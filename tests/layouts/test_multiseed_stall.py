"""`train_anakin.py --num-seeds 8` must never stall (issue 8).

On jax 0.10.2 CPU a vmapped init batched the orthogonal initializer's QR over
seeds; jaxlib's LAPACK kernels split a batch over XLA:CPU's intra-op thread pool
and block inside it, so two batched QRs running at once on a 2-thread pool (a
2-core machine) waited for each other for ever. These tests run in subprocesses
under timeouts; on a machine with many more cores than concurrent QRs the old
code rarely stalls, so they guard mostly where the pool is small.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


INIT_MANY_TIMES = """
import sys
import jax, numpy as np
import podrl.envs
from podrl.agents.ppo import PPOConfig
from podrl.envs.types import env_spec
from podrl.anakin.compiled import AnakinCompiled
from podrl.anakin.config import AnakinConfig
from podrl.core.mesh import data_mesh
from podrl.run.watchdog import exit_now, within, StageTimeout

config = AnakinConfig(num_seeds=8)
env = podrl.envs.make(config.env)
spec = env_spec(env)
program = AnakinCompiled(PPOConfig().make_agent(spec, config.num_updates), env, config,
                        data_mesh(jax.local_devices()[:1]), spec)
for i in range(int(sys.argv[1])):
    seeds = np.arange(8, dtype=np.uint32) + np.uint32(i)
    try:
        within(f"init execution {i}", 60, lambda: program._init(seeds))
    except StageTimeout as e:
        exit_now(e)
print("all done", flush=True)
"""


@pytest.mark.timeout(400)
def test_eight_seed_init_program_never_stalls(user_env):
    """The README's 8-seed init program, executed 200 times (it used to stall within ~30)."""
    result = subprocess.run([sys.executable, "-c", INIT_MANY_TIMES, "200"], capture_output=True, text=True,
                            timeout=380, cwd=ROOT, env=user_env)
    assert result.returncode == 0 and "all done" in result.stdout, result.stderr[-3000:]


@pytest.mark.timeout(900)
def test_multi_seed_cli_finishes_every_time(tmp_path, user_env):
    """`python scripts/train_anakin.py --num-seeds 8` as in the README, shortened to one call, three times
    (it used to stall in about 4 of 9 runs on 2 cores)."""
    for attempt in range(3):
        result = subprocess.run(
            [sys.executable, str(ROOT / "scripts" / "train_anakin.py"), "--num-seeds", "8",
             "--total-steps", "16384", "--logging.run-dir", str(tmp_path)],
            capture_output=True, text=True, timeout=280, cwd=tmp_path, env=user_env)
        assert result.returncode == 0, f"attempt {attempt}: {result.stderr[-3000:]}"
        assert "[anakin] done at update 32" in result.stdout, result.stdout[-2000:]
