"""The shells' side of several policies (``srljax/config/policies.py``, ``algos/multi_policy.py``).

    restore_policies(learner, cfg, spec)          # single process: each policy's ``load`` into its state
    state = load_policy_state(cfg, "defender", spec)   # one policy's TrainState from its ``load`` folder

The workers' streams per policy (followers, senders) are in ``srljax/system/acting/policy_streams.py``. Frozen
policies have no trainer: whoever acts loads their params once, from ``load``, at version 0.
"""

from __future__ import annotations

from typing import Any

import jax

from srljax.config import Experiment, from_dict
from srljax.config.policies import policy_experiment
from srljax.types import EnvSpec

POLICY_KEY = "policy_name"
"""``meta`` key of a samples message: the policy whose segment it is."""


def load_policy_state(cfg: Experiment, name: str, spec: EnvSpec) -> Any:
    """Policy ``name``'s ``TrainState`` from the newest step of its ``load`` folder: a policy checkpoint
    (``RUN_DIR/policies/<name>/checkpoints`` of a distributed run, its state one ``TrainState``) or a
    single-process multi-policy run's ``RUN_DIR/checkpoints`` (its state ``{policy: TrainState}``: this
    policy's name is taken from it). The policy's network must match (same algo settings, same agents)."""
    import algos
    from algos.multi_policy import make_policy_algorithm, policy_spec
    from srljax.storage.checkpoint import Checkpointer, CheckpointError  # orbax: only where a policy loads
    from srljax.storage.steps import read_meta

    path = cfg.policies.get(name).load
    found = read_meta(path)
    if found is None:
        raise CheckpointError(f"policy {name!r}: load={path!r} holds no finished checkpoint step")
    step, meta = found
    sub = policy_experiment(cfg, name)
    algo = make_policy_algorithm(sub, policy_spec(spec, cfg.policies.agents_of(name)))
    like = jax.eval_shape(algo.init, jax.random.PRNGKey(0))  # shapes only: nothing is computed
    saved = meta.get("config", {})
    ckpt = Checkpointer(path)
    try:
        if saved.get("policies", {}).get("named"):  # a multi-policy checkpoint: every policy's state by name
            saved_cfg = from_dict(saved)
            if name not in saved_cfg.policies.names():
                raise CheckpointError(f"policy {name!r}: the checkpoint in {path} holds policies "
                                      f"{', '.join(saved_cfg.policies.names())}, not {name!r}")
            whole = jax.eval_shape(algos.make(saved_cfg, spec).init, jax.random.PRNGKey(0))
            return ckpt.restore({**whole, name: like}, step)[name]
        return ckpt.restore(like, step)
    finally:
        ckpt.close()


def restore_policies(learner: Any, cfg: Experiment, spec: EnvSpec) -> list[str]:
    """Single process: put every policy's ``load`` checkpoint into the learner's composite state; the names."""
    loaded = [p.name for p in cfg.policies.named if p.load]
    if loaded:
        state = dict(learner.state)
        for name in loaded:
            state[name] = load_policy_state(cfg, name, spec)
        learner.state = jax.device_put(state, learner._replicated)
    return loaded
