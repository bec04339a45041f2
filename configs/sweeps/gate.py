"""The learning gate: every shipped config's promise (``PROMISE`` beside its ``experiment()``), over its seeds.

    python -m launch.sweep configs/sweeps/gate.py               # the quick promises; .ci/run runs this on every landing
    python -m launch.sweep configs/sweeps/gate.py --full        # every promise: MuJoCo, Atari, Football, connect four, ...
    python -m launch.sweep configs/sweeps/gate.py --dry-run     # the trials and their commands
    python -m launch.sweep configs/sweeps/gate.py --report --compare runs/gate.<time>/gate.json   # what moved

A promise is kept when the median over its seeds reaches ``Promise.median`` and its worst seed ``Promise.worst``;
the sweep exits 1 naming each broken promise with its seeds' figures (``runs/gate/gate.md``, ``gate.json``).
Every launch runs every trial anew: an earlier ``runs/gate/`` moves to ``runs/gate.<time>/``.
"""

from launch.sweep import Sweep
from launch.sweep.gate import promised_configs


def sweep() -> Sweep:
    return Sweep(name="gate", configs=promised_configs(), gate=True)
