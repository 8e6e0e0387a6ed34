"""The suite's compiler flags (tests/conftest.py): a flag this jaxlib's XLA does not know is left out of
XLA_FLAGS (an unknown flag aborts every process that starts JAX), one it knows is passed."""

import os

from conftest import CLASSIC_EMITTERS, xla_knows


def test_an_unknown_xla_flag_is_left_out_and_a_known_one_is_passed():
    assert not xla_knows("--xla_podrl_no_such_flag=true")
    assert xla_knows("--xla_backend_optimization_level=1")
    assert (CLASSIC_EMITTERS in os.environ["XLA_FLAGS"].split()) == xla_knows(CLASSIC_EMITTERS)
