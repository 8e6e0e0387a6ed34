"""The error a failed conformance check raises (`podrl.testing.check_agent`, `check_env`)."""

from __future__ import annotations

from podrl.core.errors import UserInputError


class AgentCheckError(UserInputError, AssertionError):
    """An agent broke a rule of the `podrl.core.types.Agent` contract: `rule` names it, the message
    (one sentence, after the rule) says what was seen and what to change. The training commands
    print it as `error: agent check failed: <rule>: <sentence>` and exit with status 2."""

    label = "agent check failed"

    def __init__(self, rule: str, sentence: str):
        self.rule = rule
        super().__init__(f"{rule}: {sentence}")
