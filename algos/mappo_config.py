"""``MAPPOConfig``: PPO on a multi-agent env with one policy shared by its agents (MAPPO and IPPO).

    Experiment(env=EnvConfig(id="LevelBasedForaging-v0"), algo=MAPPOConfig(critic="central"))   # MAPPO
    python -m launch.local configs/lbf_ippo.py algo.critic=central                             # IPPO -> MAPPO

Every ``PPOConfig`` key applies as in PPO (``algos/mappo.py``, per agent sample). The agents' actor and
critic parameters are shared; ``critic`` says what the critic sees.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from algos.ppo_config import PPOConfig
from srljax.config.algo import hash_by_value


@dataclass(frozen=True)
class MAPPOConfig(PPOConfig):
    """Multi-agent PPO (Yu et al. 2022, "The Surprising Effectiveness of PPO in Cooperative Multi-Agent Games")."""

    multi_agent: ClassVar[bool] = True
    """needs an env with several agents (checked before launch by ``envs.fit_problems``)."""
    name: Literal["mappo"] = "mappo"  # type: ignore[assignment]
    action_kinds: ClassVar[tuple[str, ...]] = ("discrete",)
    dict_obs: ClassVar[bool] = False
    action_masks: ClassVar[bool] = False
    """whether it applies a Dict observation's legal-action flags (``action_mask``, ``algos/fit.py``)."""
    """its observations are the agents' packed rows (``envs/multi_agent.py``)."""
    critic: Literal["central", "local"] = "central"
    """``central`` (MAPPO): the value of each agent from the env's global state, or, when the env gives none,
    the concatenation of all agents' views; ``local`` (IPPO): each agent's value from its own view only."""
    agent_id: bool = True
    """append a one-hot agent index to the actor's and the critic's inputs (agents with one shared set of
    parameters can then act differently)."""
    value_norm: bool = True
    """the critic predicts value targets normalised by their running mean and std (the paper's ValueNorm, not
    PopArt: the stats move and the output layer is left alone); advantages use the de-normalised values."""

    clip_per_network: bool = False
    """``trainer.max_grad_norm`` clips the actor's gradient and the critic's each by its own global norm (JaxMARL's
    MAPPO and the MAPPO paper: two optimisers), instead of their joint norm, where the critic's larger gradient sets
    the scale of the actor's step."""

    rnn_cell: Literal["lstm", "gru"] = "lstm"
    """with ``lstm_size > 0``: the recurrent cell of ``lstm_size`` units (``gru``: JaxMARL's MAPPO)."""
    recurrent_critic: bool = False
    """with ``lstm_size > 0``: the critic has its own cell (``rnn_cell``, ``lstm_size``) and carry per agent after its
    torso, as the actor (JaxMARL's MAPPO); else it is feed-forward."""
    post_rnn_sizes: tuple[int, ...] = ()
    """with ``lstm_size > 0``: dense layers (``activation``) between the cell and the policy head (and the value head
    with ``recurrent_critic``); JaxMARL's MAPPO has one of its width."""

    __hash__ = hash_by_value

    def problems(self, cfg: Any) -> list[str]:
        out = super().problems(cfg)
        if self.critic not in ("central", "local"):
            out.append(f"algo.critic={self.critic!r}: use 'central' (MAPPO) or 'local' (IPPO)")
        if self.vtrace:
            out.append("algo.vtrace=True: MAPPO computes GAE advantages only; set algo.vtrace=False")
        if self.rnn_cell not in ("lstm", "gru"):
            out.append(f"algo.rnn_cell={self.rnn_cell!r}: use 'lstm' or 'gru'")
        if not self.lstm_size:
            unused = [f"{k}={v!r}" for k, v, default in (("rnn_cell", self.rnn_cell, "lstm"),
                                                        ("recurrent_critic", self.recurrent_critic, False),
                                                        ("post_rnn_sizes", tuple(self.post_rnn_sizes), ()))
                      if v != default]
            if unused:
                out.append(f"algo.{', algo.'.join(unused)} set with algo.lstm_size=0: these shape a recurrent MAPPO; "
                           "set algo.lstm_size > 0 (the cell's width) or drop them")
        if any(int(s) < 1 for s in self.post_rnn_sizes):
            out.append(f"algo.post_rnn_sizes={tuple(self.post_rnn_sizes)}: every layer needs >= 1 unit")
        if self.network == "cnn":
            out.append("algo.network='cnn': MAPPO's actor and critic are MLPs on the agents' rows; use 'auto' or 'mlp'")
        return out
