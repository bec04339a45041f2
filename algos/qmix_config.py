"""``QMixConfig`` and ``VDNConfig`` (``algos/qmix.py``): value decomposition on a JAX multi-agent env.

    Experiment(env=EnvConfig(id="jaxmarl/smax:3m", num_envs=16), algo=QMixConfig(num_steps=32))
    python -m launch.local configs/smax_3m_qmix.py algo.hidden_size=128
    python -m launch.local configs/smax_3m_qmix.py algo=vdn      # VDN at its own defaults (algo=NAME resets the algo keys)
    python -m launch.local configs/smax_3m_qmix.py layout.mode=distributed layout.num_actors=2 \
        layout.num_buffer_workers=1                                # a worker graph: Ape-X's actors, replay shards, trainer

In a worker graph (``layout.mode=distributed``) the same keys mean the same training: the actors (Ape-X's,
``srljax/system/acting/apex_actor.py``) step the env on the host and act epsilon-greedily with the agents' GRU, every
row stored with the GRU state it was acted with; the replay buffer workers (``srljax/system/staging/replay_buffer.py``)
keep the rows per env and sample sequences of ``num_steps + 1`` rows uniformly; the trainer
(``srljax/system/training/replay_source.py``) takes ``trainer.update_epochs`` gradient steps of ``batch_size``
sequences for every ``env.num_envs x num_steps`` env steps inserted (``replay_ratio_of``), held there by ``throttle``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from algos.replay_config import ReplayConfig
from srljax.config.algo import gamma_problems


@dataclass(frozen=True)
class VDNConfig:
    """VDN (Sunehag et al. 2018): ``Q_tot = sum_i Q_i(h_i, a_i)``, trained end to end on the team reward, on a JAX
    multi-agent env (``jaxmarl/...``) through the Anakin loop (``srljax/learning/anakin_qmix.py``). One recurrent
    agent network (Dense, GRU, Dense) is shared by the agents, each told its index (``agent_id``); illegal actions
    (the env's legal-action flags) are never chosen nor bootstrapped from. Each iteration acts ``num_steps`` rows of
    every env epsilon-greedily and keeps them as one sequence per env (with the GRU state it started from) in a replay
    of sequences on the device; then ``trainer.update_epochs`` gradient steps (Adam, ``trainer.lr``, clipped to
    ``trainer.max_grad_norm``), each on ``batch_size`` sequences sampled uniformly, re-unrolled from their stored GRU
    state, with double-Q targets from a target network copied every ``target_update_every`` gradient steps."""

    consumes: ClassVar[str] = "sequences"
    name: Literal["vdn"] = "vdn"
    action_kinds: ClassVar[tuple[str, ...]] = ("discrete",)
    multi_agent: ClassVar[bool] = True
    """needs an env with several agents (``envs.fit_problems``)."""
    network: ClassVar[str] = "mlp"
    num_steps: int = 32
    """rows per env acted between updates: one stored sequence per env (``num_steps + 1`` rows, the first being the
    previous sequence's last, so every transition is in some sequence)."""
    gamma: float = 0.99
    hidden_size: int = 64
    """width of the agent network's input layer and of its GRU."""
    agent_id: bool = True
    """append a one-hot agent index to each agent's view (parameter sharing with distinct agents)."""
    batch_size: int = 32
    """sequences per gradient step."""
    replay_capacity: int = 100_000
    """rows kept (all envs together, rounded up to whole iterations of ``num_envs x num_steps``), oldest overwritten."""
    learning_starts: int = 10_000
    """env steps acted before the first gradient step."""
    target_update_every: int = 200
    """gradient steps between target-network refreshes."""
    tau: float = 1.0
    """at each refresh ``target = tau * online + (1 - tau) * target``: 1 copies."""
    eps_start: float = 1.0
    eps_end: float = 0.05
    exploration_fraction: float = 0.1
    """epsilon goes linearly from ``eps_start`` to ``eps_end`` over this fraction of ``total_env_steps``."""
    loss: Literal["mse", "huber"] = "mse"
    reward_scale: float = 1.0
    """the team reward is multiplied by this in the targets (JaxMARL's SMAX QMIX: 10)."""
    ratio_tolerance: float = 0.1
    """worker graph only: the replay ratio (``replay_ratio_of``) is held within this fraction both ways (Ape-X's
    ``srljax.replay.apex``); exported as ``samples_per_insert``."""
    throttle: Literal["both", "updates", "inserts", "none"] = "both"
    """worker graph only: who waits to hold the replay ratio: the trainer (``updates``), the actors (``inserts``),
    both, or none."""

    # what Ape-X's workers read of a replay algorithm (``srljax.replay``), fixed for value decomposition
    n_step: ClassVar[int] = 1
    updates_per_call: ClassVar[int] = 1

    @property
    def mixer(self) -> str:
        return "vdn"

    @property
    def replay(self) -> ReplayConfig:
        """The worker graph's replay: ``replay_capacity`` rows over the shards, sampled uniformly (as the Anakin loop's)."""
        return ReplayConfig(capacity=self.replay_capacity, alpha=0.0)

    def sequence_rows(self) -> int:
        """Rows of one sampled sequence: ``num_steps`` transitions (as the Anakin loop stores them)."""
        return self.num_steps + 1

    def replay_extras(self, spec: Any = None) -> dict[str, tuple[tuple[int, ...], str]]:
        """What the replay stores per row: the agents' GRU state it was acted with (``[N, H]``; N from the env spec)."""
        if spec is None:
            raise ValueError(f"algo={self.name}: the stored GRU state's shape needs the env spec (its agents)")
        return {"h": ((spec.num_agents, self.hidden_size), "float32")}

    def replay_ratio_of(self, cfg: Any) -> float:
        """Sequences trained per env step in a worker graph: ``trainer.update_epochs`` gradient steps of ``batch_size``
        for every ``env.num_envs x num_steps`` env steps, the Anakin loop's iteration."""
        return cfg.trainer.update_epochs * self.batch_size / max(1, cfg.env.num_envs * self.num_steps)

    def num_updates(self, cfg: Any) -> int:
        """Anakin: iterations of ``env.num_envs x num_steps`` env steps (``trainer.update_epochs`` gradient steps
        each); a worker graph: gradient steps (one batch each) over the env steps after ``learning_starts``."""
        if cfg.layout.mode != "distributed":
            return max(1, cfg.total_env_steps // max(1, cfg.env.num_envs * self.num_steps))
        owed = self.replay_ratio_of(cfg) * max(0, cfg.total_env_steps - self.learning_starts) / self.batch_size
        return max(1, int(owed))

    def describe_batch(self, cfg: Any) -> str:
        rows = cfg.env.num_envs * self.num_steps
        if cfg.layout.mode != "distributed":
            return (f"{cfg.env.num_envs} envs x {self.num_steps} steps = {rows:,} env steps per iteration, then "
                    f"{cfg.trainer.update_epochs} gradient steps of {self.batch_size} sequences of {self.num_steps + 1} "
                    f"rows; {cfg.num_updates:,} iterations")
        return (f"replay batch {self.batch_size} sequences of {self.num_steps + 1} rows, {cfg.trainer.update_epochs} "
                f"gradient steps per {rows:,} env steps inserted (replay ratio {self.replay_ratio_of(cfg):.4g} "
                f"sequences per env step) after {self.learning_starts:,} env steps, {cfg.num_updates:,} updates; "
                f"{cfg.layout.num_actors} actors x {cfg.env.num_envs} envs, replay of {self.replay_capacity:,} rows")

    def problems(self, cfg: Any) -> list[str]:
        out = gamma_problems(self)
        name = self.name
        if min(self.num_steps, self.hidden_size, self.batch_size, self.target_update_every) < 1:
            out.append(f"algo.num_steps={self.num_steps}, hidden_size={self.hidden_size}, batch_size={self.batch_size} "
                       f"and target_update_every={self.target_update_every} must be >= 1")
        if not 0.0 < self.tau <= 1.0:
            out.append(f"algo.tau={self.tau} must be in (0, 1] (1: copy the online network)")
        if not (0.0 <= self.eps_end <= 1.0 and 0.0 <= self.eps_start <= 1.0 and 0.0 < self.exploration_fraction <= 1.0):
            out.append(f"algo.eps_start={self.eps_start} and algo.eps_end={self.eps_end} must be in [0, 1] and "
                       f"algo.exploration_fraction={self.exploration_fraction} in (0, 1]")
        if self.reward_scale <= 0 or self.learning_starts < 0:
            out.append(f"algo.reward_scale={self.reward_scale} must be > 0 and algo.learning_starts="
                       f"{self.learning_starts} >= 0")
        rows = cfg.env.num_envs * self.num_steps
        if self.replay_capacity < rows:
            out.append(f"algo.replay_capacity={self.replay_capacity} must hold one iteration's rows (env.num_envs x "
                       f"algo.num_steps = {rows}); raise it")
        if self.learning_starts >= cfg.total_env_steps:
            out.append(f"algo.learning_starts={self.learning_starts:,} is not less than total_env_steps="
                       f"{cfg.total_env_steps:,}: no gradient step would happen; lower it")
        t = cfg.trainer
        if t.update_epochs < 1 or t.num_minibatches != 1:
            out.append(f"trainer.update_epochs={t.update_epochs} (gradient steps per iteration, each on a fresh sample "
                       f"of algo.batch_size sequences) must be >= 1 and trainer.num_minibatches={t.num_minibatches} 1")
        if cfg.layout.mode == "single" and (self.throttle, self.ratio_tolerance) != ("both", 0.1):
            out.append(f"algo.throttle={self.throttle} / algo.ratio_tolerance={self.ratio_tolerance} apply to a worker "
                       "graph (layout.mode=distributed); the Anakin loop trains exactly trainer.update_epochs gradient "
                       "steps per iteration: drop the override")
        if self.ratio_tolerance <= 0:
            out.append(f"algo.ratio_tolerance={self.ratio_tolerance} must be > 0 (e.g. 0.1: within 10% of the ratio)")
        if not cfg.env.is_jax:
            out.append(f"algo={name} on env {cfg.env.factory or cfg.env.id!r}: value decomposition is built for the "
                       "JAX multi-agent envs (env.id=jaxmarl/smax:3m, jaxmarl/mpe:simple_spread, ...), on the device "
                       "(the Anakin loop) or on the host in a worker graph")
        return out


@dataclass(frozen=True)
class QMixConfig(VDNConfig):
    """QMIX (Rashid et al. 2018): VDN's agents, replay and targets (``VDNConfig``), with ``Q_tot`` a monotonic mixing
    network of the agents' chosen Q-values: an ELU layer of ``mixer_embed`` units and a linear output, whose weights
    (made non-negative by an absolute value, so ``dQ_tot / dQ_i >= 0``) and biases are produced by hypernetworks of
    ``hypernet_hidden`` units from the env's global state (SMAX's world state; all agents' views concatenated
    where the env has none)."""

    name: Literal["qmix"] = "qmix"  # type: ignore[assignment]
    mixer_embed: int = 32
    hypernet_hidden: int = 64

    @property
    def mixer(self) -> str:
        return "qmix"

    def problems(self, cfg: Any) -> list[str]:
        out = super().problems(cfg)
        if min(self.mixer_embed, self.hypernet_hidden) < 1:
            out.append(f"algo.mixer_embed={self.mixer_embed} and algo.hypernet_hidden={self.hypernet_hidden} must be "
                       ">= 1")
        return out
