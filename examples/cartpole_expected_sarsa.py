"""CartPole-v1 with the user-written expected-SARSA DQN of ``examples/expected_sarsa.py``: ``configs/cartpole_dqn.py``
with one line changed, the algorithm.

    python -m launch.local examples/cartpole_expected_sarsa.py
"""

import dataclasses
from pathlib import Path

from examples.expected_sarsa import ExpectedSarsaConfig
from srljax.config import Experiment, Promise, load_file

ROOT = Path(__file__).resolve().parents[1]

PROMISE = Promise(
    "return", median=450, worst=300, wall_s=55,
    source="the gate at 9cfbcd3+changes on this 2-core box: 500.0 / 500.0 / 500.0, 46-57 s",
)


def experiment() -> Experiment:
    base = load_file(ROOT / "configs" / "cartpole_dqn.py")
    dqn = {f.name: getattr(base.algo, f.name) for f in dataclasses.fields(base.algo) if f.name != "name"}
    return dataclasses.replace(base, name="cartpole_expected_sarsa", algo=ExpectedSarsaConfig(**dqn))
