"""A user-written replay algorithm: DQN with an expected-SARSA target, plugged in through the replay seam.

Nothing in ``srljax/`` knows about this file: the replay loop, Ape-X's actors, replay buffer workers and
trainer run it as they run DQN, because they only call the ``Algorithm`` seam (``algos/base.py``:
``update``, ``exploration``, ``initial_priorities``). The variant bootstraps from the expected value
under an epsilon-greedy policy instead of the greedy maximum (van Seijen et al. 2009):
``y = R + gamma^n sum_a pi(a | s') Q_target(s', a)``, ``pi`` greedy in the online network (the target
network with ``double_q=False``) with probability ``1 - target_epsilon``.

    python -m launch.local examples/cartpole_expected_sarsa.py
    python -m launch.local configs/cartpole_dqn.py algo=examples.expected_sarsa:ExpectedSarsaConfig   # picked by name
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp

from algos.dqn import make_dqn
from algos.dqn_config import DQNConfig
from algos.returns import n_step_return


@dataclass(frozen=True)
class ExpectedSarsaConfig(DQNConfig):
    name: str = "examples.expected_sarsa:ExpectedSarsaConfig"  # type: ignore[assignment]
    factory: str = "examples.expected_sarsa:make_expected_sarsa"
    target_epsilon: float = 0.05
    """the bootstrap averages Q over an epsilon-greedy policy with this epsilon (0: DQN's greedy target)."""


def expected_sarsa_target(epsilon: float):
    def bootstrap(q_next_target, q_next_online, batch, gamma):  # algos.dqn.q_target's signature
        q = q_next_target if q_next_online is None else q_next_online
        pi = (1.0 - epsilon) * jax.nn.one_hot(jnp.argmax(q, axis=-1), q.shape[-1]) + epsilon / q.shape[-1]
        v_boot = jnp.sum(pi * q_next_target, axis=-1)
        return n_step_return(batch.reward.T, batch.terminated.T, batch.truncated.T, v_boot, gamma)

    return bootstrap


def make_expected_sarsa(cfg, spec):
    return make_dqn(cfg, spec, bootstrap=expected_sarsa_target(cfg.algo.target_epsilon))
