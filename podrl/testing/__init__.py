"""Conformance checks for your own agent and JAX env, in the spirit of gymnasium's `check_env`.

    from podrl.testing import check_agent, check_env
    check_env("CartPole-v1")                    # a JAX env keeps the env contract
    report = check_agent(A2CConfig(), "CartPole-v1")   # an agent keeps the Agent contract

Each broken rule of an agent raises `AgentCheckError` (`rule`, and one sentence saying what to change),
of an env `EnvSpecMismatchError` (the method, the field, what was expected and what came).
`check_agent`'s rules: `podrl.testing.agent.RULES`. `layout_update` runs `Agent.update` as the layouts
do (on any number of learner shards), for tests of your own. `train_anakin` and `train_sebulba`
run the learner-shard rule (`check_before_run`) before a run with more than one learner shard of an
agent that is not podrl's own (`skip_agent_check` / `--skip-agent-check` turns it off).
"""

from podrl.envs.adapters.specs import EnvSpecMismatchError
from podrl.testing.agent import RULES, AgentReport, check_agent
from podrl.testing.env import check_env
from podrl.testing.errors import AgentCheckError
from podrl.testing.shards import check_before_run, check_learner_shards, layout_update, of_shard, on_shards

__all__ = ["RULES", "AgentCheckError", "AgentReport", "EnvSpecMismatchError", "check_agent", "check_before_run",
           "check_env", "check_learner_shards", "layout_update", "of_shard", "on_shards"]
