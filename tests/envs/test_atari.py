"""Atari done properly: the protocols reach each backend, episodic life keeps the game score,
rewards are clipped only in the learner, uint8 frames reach the learner, bad options are named.

Only a handful of env steps per backend (Pong, Breakout); no Atari training.
"""

from __future__ import annotations

import dataclasses

import dm_env
import gymnasium
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from dm_env import specs

from cli_runs import assert_user_error, run
from impala_parts import _sharded_update
from podrl.agents.impala import ImpalaConfig
from podrl.agents.ppo import PPOConfig
from podrl.agents.returns import learner_rewards
from podrl.core.errors import ConfigError
from podrl.core.types import Agent, Trajectory
from podrl.envs.adapters import DmEnvVectorEnv, GymnasiumVectorEnv, make_host_env
from podrl.envs.adapters.atari import PROTOCOLS, atari_protocol, gymnasium_fallback_kwargs, life_lost
from podrl.envs.types import LAST, MID
from podrl.run.config import LoggingConfig
from podrl.run.config_json import config_from_json, jsonable
from podrl.run.evaluation import evaluate_host_greedy
from podrl.sebulba import SebulbaConfig, train_sebulba
from podrl.sebulba.transport import bytes_per_step

QUIET = LoggingConfig(run_dir=None, console=False)

# ---------------------------------------------------------------- protocols reach the backends


@pytest.fixture
def ale_kwargs(monkeypatch):
    """Records the keyword arguments every `ale_py.AtariVectorEnv` is built with."""
    import ale_py

    seen: list[dict] = []
    original = ale_py.AtariVectorEnv.__init__

    def recording_init(self, game, num_envs, **kwargs):
        seen.append(kwargs)
        original(self, game, num_envs, **kwargs)

    monkeypatch.setattr(ale_py.AtariVectorEnv, "__init__", recording_init)
    return seen


FRAMES = dict(frameskip=4, maxpool=True, img_height=84, img_width=84, grayscale=True, stack_num=4,
              max_num_frames_per_episode=108_000, reward_clipping=False, episodic_life=False, life_loss_info=False)


@pytest.mark.parametrize("protocol, sticky, noops, fire, episodic", [
    ("machado", 0.25, 0, False, False), ("dqn", 0.0, 30, True, True)])
def test_protocol_settings_reach_ale_vector_env(ale_kwargs, protocol, sticky, noops, fire, episodic):
    env = make_host_env("ale:Pong", 1, protocol=protocol)
    assert ale_kwargs[-1] == {**FRAMES, "repeat_action_probability": sticky, "noop_max": noops,
                              "use_fire_reset": fire, "full_action_space": False, "num_threads": 0,
                              "autoreset_mode": "SameStep"}
    assert env.episodic_life is episodic and env.protocol == PROTOCOLS[protocol]
    assert env.observation_spec().dtype == np.uint8 and env.observation_spec().shape == (4, 84, 84)
    assert env.action_spec().num_values == 6  # Pong's minimal action set
    env.close()
    full = make_host_env("ale:Pong", 1, protocol=protocol, full_action_space="True")
    assert full.action_spec().num_values == 18 and ale_kwargs[-1]["full_action_space"] is True
    full.close()


def _frames_after(env, action: int, steps: int = 12) -> np.ndarray:
    env.reset(7)
    for _ in range(steps):
        ts = env.step(np.full(env.num_envs, action, np.int32))
    return ts.observation


def test_sticky_actions_reach_the_emulator():
    """With p=1 every action repeats the reset NOOP: moving the paddle changes nothing. With the
    protocols' own p (0.25, 0) the paddle moves."""
    frozen = make_host_env("ale:Pong", 1, repeat_action_probability=1.0)
    np.testing.assert_array_equal(_frames_after(frozen, 2), _frames_after(frozen, 0))
    frozen.close()
    for protocol in PROTOCOLS:
        env = make_host_env("ale:Pong", 1, protocol=protocol)
        assert not np.array_equal(_frames_after(env, 2), _frames_after(env, 0)), protocol
        env.close()


def test_protocol_settings_reach_envpool():
    """Read back from the constructed envpool env's own config."""
    for protocol, sticky, noops, fire in (("machado", 0.25, 1, False), ("dqn", 0.0, 30, True)):  # 1: see envpool_kwargs
        env = make_host_env("envpool:Pong-v5", 1, protocol=protocol, full_action_space=True)
        c = env.env.spec.config
        assert (c.repeat_action_probability, c.noop_max, c.use_fire_reset) == (sticky, noops, fire), protocol
        assert (c.episodic_life, c.zero_discount_on_life_loss, c.reward_clip) == (False, False, False)
        assert (c.frame_skip, c.stack_num, c.img_height, c.img_width, c.gray_scale) == (4, 4, 84, 84, True)
        assert c.max_episode_steps == 27_000 and c.full_action_space  # 108,000 frames
        assert env.action_spec().num_values == 18 and env.episodic_life is (protocol == "dqn")
        env.reset(0)  # envpool 1.2.5 would crash here with noop_max=0
        env.step(np.zeros(1, np.int32))
        env.close()


def test_gymnasium_fallback_settings_and_refusals():
    make, preprocessing = gymnasium_fallback_kwargs(atari_protocol("machado"))
    assert make == dict(frameskip=1, repeat_action_probability=0.25, full_action_space=False,
                        max_num_frames_per_episode=108_000)
    assert preprocessing == dict(noop_max=0, frame_skip=4, screen_size=84, grayscale_obs=True,
                                 terminal_on_life_loss=False)
    with pytest.raises(ConfigError, match="^env_kwargs: protocol 'dqn' needs a fire reset"):
        make_host_env("ale:Pong", 1, protocol="dqn", use_vector_env=False)  # before any opencv check


# ---------------------------------------------------------------- episodic life


def test_life_lost_ignores_game_ends_and_new_games():
    before, after = np.array([5, 3, 1, 2]), np.array([4, 3, 5, 1])
    np.testing.assert_array_equal(life_lost(before, after, np.array([False, False, True, False])),
                                  [True, False, False, True])


@pytest.mark.parametrize("name", ["ale:Breakout", "envpool:Breakout-v5"])
def test_dqn_life_loss_ends_the_learning_episode_not_the_game_score(name):
    """Random Breakout to the end of a game (~150 steps): each lost life is a MID step with discount 0
    and the running return goes on; LAST (discount 0) reports the whole game's score and length."""
    env = make_host_env(name, 1, protocol="dqn")
    ts, rewards, lives_lost = env.reset(0), [], 0
    rng = np.random.default_rng(0)
    while True:
        ts = env.step(rng.integers(0, env.action_spec().num_values, 1))
        rewards.append(float(ts.reward[0]))
        if ts.step_type[0] == LAST:
            break
        lives_lost += int(ts.discount[0] == 0)
        assert ts.step_type[0] == MID and ts.extras["episode_length"][0] == len(rewards)
    assert lives_lost == 4  # Breakout's 5 lives: 4 learning-episode ends, then the game over
    assert ts.discount[0] == 0 and not ts.extras["truncated"][0]
    assert ts.extras["episode_length"][0] == len(rewards) and ts.extras["episode_return"][0] == sum(rewards)
    env.close()
    machado = make_host_env(name, 1)  # no episodic life: discount 0 only at the game's end
    machado.reset(0)
    for _ in range(len(rewards) // 2):
        ts = machado.step(rng.integers(0, 4, 1))
        assert ts.discount[0] == 1 or ts.step_type[0] == LAST
    machado.close()


class LivesVectorEnv(gymnasium.vector.VectorEnv):
    """One Atari-like game (SAME_STEP autoreset, `infos["lives"]`): 2 lives, the first lost in step 2,
    game over in step 5, reward 1 per step. Records the actions it gets."""

    def __init__(self):
        self.num_envs, self.actions = 1, []
        self.single_observation_space = gymnasium.spaces.Box(0, 255, (2,), np.uint8)
        self.single_action_space = gymnasium.spaces.Discrete(8)
        self.metadata = {"autoreset_mode": gymnasium.vector.AutoresetMode.SAME_STEP}

    def reset(self, *, seed=None, options=None):
        self.t = 0
        return np.zeros((1, 2), np.uint8), {"lives": np.array([2])}

    def step(self, actions):
        self.actions.append(int(actions[0]))
        self.t += 1
        obs, over = np.full((1, 2), self.t, np.uint8), self.t == 5
        infos = {"lives": np.array([2 if self.t < 2 else 1])}
        if over:  # the new game's lives, as ale-py's AtariVectorEnv reports them
            infos, obs = {"lives": np.array([2]), "final_obs": obs}, self.reset()[0]
        return obs, np.ones(1), np.array([over]), np.array([False]), infos


def test_episodic_life_through_the_adapter_and_the_actor_state_reset_in_evaluation():
    """A lost life: MID with discount 0, return and length go on; and the greedy evaluation restarts
    a recurrent state there, as the Sebulba actor does (the state is a step counter, sent as the action)."""
    env = GymnasiumVectorEnv(LivesVectorEnv(), episodic_life=True)
    env.reset(0)
    steps = [env.step(np.zeros(1, np.int32)) for _ in range(5)]
    assert [int(ts.step_type[0]) for ts in steps] == [MID, MID, MID, MID, LAST]
    assert [float(ts.discount[0]) for ts in steps] == [1, 0, 1, 1, 0]
    assert [float(ts.extras["episode_return"][0]) for ts in steps] == [1, 2, 3, 4, 5]
    counter = Agent(init=None, init_actor_state=lambda n, columns=None: jnp.zeros(n, jnp.int32), act=None, update=None,
                    act_greedy=lambda params, state, obs: (state, state + 1))
    fake = LivesVectorEnv()
    result = evaluate_host_greedy(counter, None, GymnasiumVectorEnv(fake, episodic_life=True), seed=0, max_steps=9)
    assert fake.actions == [0, 1, 0, 1, 2] and result.returns[0] == 5 and result.lengths[0] == 5


# ---------------------------------------------------------------- env_kwargs


def test_env_kwargs_are_checked_before_anything_compiles():
    def error(**fields):
        with pytest.raises(ConfigError) as info:
            SebulbaConfig(**fields)
        assert info.value.field == "env_kwargs"
        return str(info.value)

    assert "'sticky' is not an Atari env option" in error(env="ale:Pong", env_kwargs=("sticky=0.5",))
    assert "protocol must be one of ['dqn', 'machado']" in error(env="ale:Pong", env_kwargs=("protocol=nature",))
    assert "full_action_space must be True or False" in error(env="ale:Pong", env_kwargs=("full_action_space=2",))
    assert "expected 'key=value'" in error(env="CartPole-v1", env_kwargs=("protocol",))
    assert "given twice" in error(env="ale:Pong", env_kwargs=("protocol=dqn", "protocol=machado"))
    config = SebulbaConfig(env="ale:Pong", env_kwargs=("protocol=dqn", "full_action_space=True"))
    assert config.env_options == {"protocol": "dqn", "full_action_space": True}
    assert config_from_json(SebulbaConfig, jsonable(config)) == config  # config.json / --resume round trip
    with pytest.raises(ConfigError, match="^env_kwargs: envpool task 'CartPole-v1' has no option 'protocol'"):
        make_host_env("envpool:CartPole-v1", 1, protocol="dqn")


def test_checkpoint_evaluation_builds_the_env_with_the_runs_options():
    """`podrl evaluate` passes a Sebulba run's saved env_kwargs (its protocol, action set) on."""
    from podrl.cli.policy import resolve_env

    assert resolve_env("ale:Pong", "host", "sebulba").spec.action.num_values == 6
    env = resolve_env("ale:Pong", "host", "sebulba", {"full_action_space": True, "protocol": "dqn"})
    assert env.spec.action.num_values == 18 and env.options == {"full_action_space": True, "protocol": "dqn"}


@pytest.mark.timeout(120)
def test_cli_names_bad_env_kwargs_with_exit_2(tmp_path):
    done = run(tmp_path, "train_sebulba.py", "--env", "ale:Pong", "--env-kwargs", "protocol=dqn", "noop=3")
    assert_user_error(done, "error: invalid config: env_kwargs: 'noop' is not an Atari env option")


# ---------------------------------------------------------------- reward clipping


def test_learner_rewards_clip_then_scale():
    r = jnp.array([[-3.0, -0.5, 0.0, 0.7, 21.0]])
    np.testing.assert_array_equal(learner_rewards(r, None, 0.1), r * 0.1)
    np.testing.assert_allclose(learner_rewards(r, 1.0, 0.1), [[-0.1, -0.05, 0.0, 0.07, 0.1]], rtol=1e-6)
    for config in (PPOConfig, ImpalaConfig):
        for bad in (0.0, -1.0, float("inf"), True):
            with pytest.raises(ConfigError, match="^reward_clip:"):
                config(reward_clip=bad)


def _random_trajectory(agent, params, t=8, b=4) -> Trajectory:
    keys = jax.random.split(jax.random.key(3), 4)
    obs = jax.random.normal(keys[0], (t + 1, b, 4))
    action, extras, _ = jax.vmap(lambda o, k: agent.act(params, (), o, k))(obs[:-1], jax.random.split(keys[1], t))
    reward = 6.0 * jax.random.uniform(keys[2], (t, b)) - 3.0  # outside [-1, 1] about 2/3 of the time
    discount = (jax.random.uniform(keys[3], (t, b)) > 0.2).astype(jnp.float32)
    return Trajectory(obs[:-1], action, reward, discount, jnp.zeros((t, b), bool), obs[1:], extras, ())


@pytest.mark.parametrize("config_type, settings", [(PPOConfig, {"num_epochs": 1}), (ImpalaConfig, {})],
                         ids=["ppo", "impala"])
def test_reward_clip_is_the_update_on_clipped_rewards(cpu_devices, config_type, settings):
    """An update with reward_clip=1 equals (to float rounding) one without clipping on rewards clipped
    beforehand, and differs from one on the raw rewards: the clip reaches the loss input."""
    from impala_parts import DISCRETE

    def params_after(traj, clip):
        config = config_type(hidden_sizes=(8,), num_minibatches=1, reward_clip=clip, **settings)
        agent = config.make_agent(DISCRETE, total_updates=2)
        state = agent.init(jax.random.key(0), DISCRETE)
        state, _ = _sharded_update(agent, 1)(state, traj(agent, state.params), jax.random.key(1))
        return jax.tree.leaves(state.params)

    raw = _random_trajectory
    def clipped(agent, params):
        trajectory = raw(agent, params)
        return trajectory._replace(reward=jnp.clip(trajectory.reward, -1, 1))

    with_clip, pre_clipped, unclipped = params_after(raw, 1.0), params_after(clipped, None), params_after(raw, None)
    for a, b in zip(with_clip, pre_clipped, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-8)
    assert any(not np.allclose(a, b, rtol=1e-3, atol=1e-6) for a, b in zip(with_clip, unclipped, strict=True))


# ---------------------------------------------------------------- uint8 frames through Sebulba


class Frames(dm_env.Environment):
    """uint8 frames `[2, 6, 6]` (channels first), reward 3 per step, terminated after 4 steps."""

    def reset(self):
        self.t = 0
        return dm_env.restart(self._obs())

    def step(self, action):
        self.t += 1
        return dm_env.termination(3.0, self._obs()) if self.t == 4 else dm_env.transition(3.0, self._obs())

    def _obs(self):
        return np.full((2, 6, 6), 40 * self.t + 7, np.uint8)

    def observation_spec(self):
        return specs.Array((2, 6, 6), np.uint8, name="observation")

    def action_spec(self):
        return specs.DiscreteArray(2, name="action")


@dataclasses.dataclass(frozen=True)
class DtypeSpyPPO(PPOConfig):
    """PPO whose act and update record, when traced, the dtypes they are given."""

    def make_agent(self, env_spec, total_updates):
        agent = super().make_agent(env_spec, total_updates)

        def act(params, actor_state, observation, key):
            SEEN.append(("act", observation.dtype))
            return agent.act(params, actor_state, observation, key)

        def update(train_state, trajectory, key):
            SEEN.append(("update", jax.tree.map(lambda x: x.dtype, trajectory._replace(agent_extras={}))))
            return agent.update(train_state, trajectory, key)

        return agent._replace(act=act, update=update)


SEEN: list = []


def test_uint8_frames_reach_the_learner_and_returns_stay_unclipped(cpu_devices):
    """A tiny Sebulba run: the actor infers on uint8, the learner's Trajectory holds uint8 observation
    and next_observation; with reward_clip=1 the logged episode return is still the env's 4 x 3 = 12."""
    SEEN.clear()
    config = SebulbaConfig(env="frames", envs_per_thread=4, rollout_length=8, total_steps=4 * 8 * 2,
                           actor_devices=(0,), learner_devices=(1,), eval_episodes=0, log_every=2, logging=QUIET)
    agent = DtypeSpyPPO(torso="minatar_cnn", num_minibatches=1, num_epochs=1, reward_clip=1.0)
    result = train_sebulba(config, agent, env_factory=lambda thread, n: DmEnvVectorEnv(Frames, n, seed=thread))
    assert ("act", np.dtype(np.uint8)) in SEEN
    (traj,) = [dtypes for kind, dtypes in SEEN if kind == "update"]
    assert traj.observation == traj.next_observation == np.uint8
    assert (traj.reward, traj.discount, traj.truncated) == (np.float32, np.float32, np.bool_)
    assert result.history[-1]["episode_return"] == 12.0


def test_trajectory_bytes_per_step_of_atari_frames():
    """Pong-shaped `[T, B]` = `[2, 3]` rollout: two 4x84x84 uint8 stacks per step dominate."""
    t, b, frames = 2, 3, (4, 84, 84)
    traj = Trajectory(np.zeros((t, b, *frames), np.uint8), np.zeros((t, b), np.int32), np.zeros((t, b), np.float32),
                      np.zeros((t, b), np.float32), np.zeros((t, b), bool), np.zeros((t, b, *frames), np.uint8),
                      {"log_prob": np.zeros((t, b), np.float32), "value": np.zeros((t, b), np.float32)}, ())
    sizes = bytes_per_step(traj)
    assert sizes["observation"] == sizes["next_observation"] == 28_224
    assert (sizes["action"], sizes["reward"], sizes["discount"], sizes["truncated"]) == (4, 4, 4, 1)
    assert sizes["agent_extras"] == 8 and sizes["actor_state"] == 0 and sizes["total"] == 56_469
