"""Algorithm configs: ``PPOConfig``, ``IMPALAConfig``, ``DQNConfig`` (``srljax.config`` re-exports them).

    Experiment(algo=IMPALAConfig(num_steps=20), trainer=TrainerConfig(lr=6e-4, num_minibatches=4, update_epochs=1))
    python -m launch.local configs/cartpole_impala.py algo.rho_bar=2.0

``Experiment.algo`` holds one of ``PPOConfig``, ``IMPALAConfig``, ``DQNConfig`` or a user's own frozen dataclass
(``docs/architecture.md``, "Adding your own algorithm"). Every algo config has ``name`` (the key
``algo=NAME`` and the JSON round trip choose the class by), ``num_steps`` (segment length T) and
``gamma``; a ``problems(cfg) -> list[str]`` method, where present, adds its own config errors to
``srljax.config.problems``. What an algorithm's update consumes (``consumes``): fresh segments
(the default) or batches sampled from a replay (``DQNConfig.consumes = "replay"``, a class
attribute, not a config key); a replay algorithm also has ``num_updates(cfg)`` and ``describe_batch(cfg)``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal


def vtrace_problems(algo: Any) -> list[str]:
    """Errors in the V-trace thresholds shared by IMPALA and APPO (``rho_bar``, ``c_bar``)."""
    return [f"algo.{key}={getattr(algo, key)} must be > 0 (1.0 is the paper's)"
            for key in ("rho_bar", "c_bar") if getattr(algo, key) <= 0]


def consumes(algo: Any) -> Literal["segments", "replay"]:
    """What ``algo``'s update trains on: ``"segments"`` (PPO, IMPALA, a user's by default) or ``"replay"`` (DQN)."""
    return getattr(algo, "consumes", "segments")


def gamma_problems(algo: Any) -> list[str]:
    return [] if 0.0 < algo.gamma <= 1.0 else [f"algo.gamma={algo.gamma} must be in (0, 1]"]


def recurrent_problems(algo: Any, cfg: Any) -> list[str]:
    """Errors in ``algo.lstm_size``: recurrent minibatches are whole env columns, split over the trainer devices."""
    t = cfg.trainer
    parts = t.num_minibatches * t.devices * t.num_hosts
    if algo.lstm_size < 0:
        return [f"algo.lstm_size={algo.lstm_size} must be >= 0 (0: feed-forward)"]
    if algo.lstm_size and parts >= 1 and cfg.batch_envs % parts:
        return [f"algo.lstm_size={algo.lstm_size}: recurrent minibatches are whole env columns, so batch_envs="
                f"{cfg.batch_envs} must divide into trainer.num_minibatches={t.num_minibatches} x "
                f"{t.devices * t.num_hosts} trainer devices; use a multiple of {parts} envs"]
    return []


@dataclass(frozen=True)
class PPOConfig:
    """PPO loss, rollout and network settings (CleanRL names)."""

    name: Literal["ppo"] = "ppo"
    num_steps: int = 128
    """rollout length T per environment per update."""
    gamma: float = 0.99
    gae_lambda: float = 0.95
    norm_adv: bool = True
    clip_coef: float = 0.1
    clip_vloss: bool = True
    ent_coef: float = 0.01
    vf_coef: float = 0.5
    network: Literal["auto", "mlp", "cnn"] = "auto"
    """``auto``: Nature CNN for image observations, MLP otherwise."""
    hidden_sizes: tuple[int, ...] = (64, 64)
    activation: Literal["tanh", "relu"] = "tanh"
    init_log_std: float = 0.0
    """initial log standard deviation of a continuous (Gaussian) policy; 0.0 is CleanRL's."""
    normalize_obs: bool = False
    """running mean/std observation normalisation (continuous control)."""
    normalize_reward: bool = False
    """scale rewards by the running std of the discounted return (continuous control)."""
    obs_clip: float = 10.0
    reward_norm_clip: float = 10.0
    vtrace: bool = False
    """APPO (Sample Factory's): advantages and value targets from V-trace on the learner's values
    and policy instead of GAE on the actors', correcting for policy lag; ``gae_lambda`` is then the
    V-trace trace's lambda (``c_t = gae_lambda min(c_bar, rho_t)``, rlax's ``lambda_``)."""
    rho_bar: float = 1.0
    """``vtrace=True``: clip of the importance ratio in the TD terms and the advantages."""
    c_bar: float = 1.0
    """``vtrace=True``: clip of the importance ratio in the trace."""
    proximal: Literal["auto", "behaviour", "learner"] = "auto"
    """the policy PPO's ratio is clipped around. ``behaviour``: the actors' (PPO's, and Sample Factory's
    APPO); ``learner`` (needs ``vtrace=True``): the learner's before this update (decoupled PPO, Hilton et
    al. 2021), so a lagged sample's ratio starts at 1 and its off-policyness is left to V-trace's rho in
    the advantage; ``auto``: ``learner`` with ``vtrace=True``, else ``behaviour``. On-policy both are the same."""
    lstm_size: int = 0
    """0: feed-forward. >0: recurrent, an LSTM of this many units between the torso and the heads
    (``algos/recurrent.py``); minibatches are then whole env columns (``batch_envs / num_minibatches``)."""

    def problems(self, cfg: Any) -> list[str]:
        out = gamma_problems(self) + vtrace_problems(self) + recurrent_problems(self, cfg)
        if not 0.0 <= self.gae_lambda <= 1.0:
            out.append(f"algo.gae_lambda={self.gae_lambda} must be in [0, 1]")
        if self.clip_coef <= 0:
            out.append(f"algo.clip_coef={self.clip_coef} must be > 0")
        if self.proximal == "learner" and not self.vtrace:
            out.append(f"algo.proximal={self.proximal} needs algo.vtrace=true (APPO); plain PPO clips around the "
                       "actors' policy: drop algo.proximal or set algo.vtrace=true")
        return out


@dataclass(frozen=True)
class IMPALAConfig:
    """IMPALA (Espeholt et al. 2018): actor-critic on V-trace targets, losses summed over the batch.

    Each batch of ``trainer.batch_envs`` columns is cut into ``trainer.num_minibatches`` groups of
    whole columns (a column's V-trace needs its whole segment) and takes one optimiser step per
    group, once (``trainer.update_epochs`` must be 1), as Cleanba's ``cleanba_impala.py``.
    Optimiser: ``trainer.lr`` (annealed if ``trainer.anneal_lr``), gradients clipped to
    ``trainer.max_grad_norm``, then PyTorch-style RMSProp (Cleanba's) or Adam (``trainer.adam_eps``).
    """

    name: Literal["impala"] = "impala"
    num_steps: int = 20
    """segment length T per env column (Cleanba: 20)."""
    gamma: float = 0.99
    rho_bar: float = 1.0
    """clip of the importance ratio in the V-trace TD terms and the policy gradient."""
    c_bar: float = 1.0
    """clip of the importance ratio in the V-trace trace (how far corrections propagate back)."""
    ent_coef: float = 0.01
    vf_coef: float = 0.5
    optimizer: Literal["rmsprop", "adam"] = "rmsprop"
    rmsprop_decay: float = 0.99
    rmsprop_eps: float = 0.01
    """added outside the square root, as torch.optim.RMSprop (Cleanba's setting)."""
    network: Literal["auto", "mlp", "cnn"] = "auto"
    """``auto``: Nature CNN for image observations, MLP otherwise."""
    hidden_sizes: tuple[int, ...] = (64, 64)
    activation: Literal["tanh", "relu"] = "tanh"
    init_log_std: float = 0.0
    normalize_obs: bool = False
    obs_clip: float = 10.0
    lstm_size: int = 0
    """0: feed-forward. >0: recurrent, an LSTM of this many units between the torso and the heads
    (``algos/recurrent.py``), re-unrolled over each segment from the carry the actor used."""

    def problems(self, cfg: Any) -> list[str]:
        out = gamma_problems(self) + vtrace_problems(self) + recurrent_problems(self, cfg)
        t = cfg.trainer
        if t.update_epochs != 1:
            out.append(f"trainer.update_epochs={t.update_epochs}: IMPALA takes one pass over each batch "
                       "(one optimiser step per minibatch); set trainer.update_epochs=1")
        if t.num_minibatches >= 1 and cfg.batch_envs % t.num_minibatches:
            out.append(f"IMPALA minibatches are whole env columns: trainer.batch_envs={cfg.batch_envs} is not "
                       f"divisible by trainer.num_minibatches={t.num_minibatches} "
                       f"({cfg.batch_envs} % {t.num_minibatches} = {cfg.batch_envs % t.num_minibatches})")
        shards = t.devices * t.num_hosts
        per_mb = cfg.batch_envs // max(t.num_minibatches, 1)
        if shards > 1 and per_mb % shards:
            out.append(f"IMPALA minibatch of {per_mb} env columns (trainer.batch_envs={cfg.batch_envs} / "
                       f"{t.num_minibatches} minibatches) does not split across {shards} trainer devices")
        if not 0.0 <= self.rmsprop_decay < 1.0 or self.rmsprop_eps <= 0:
            out.append(f"algo.rmsprop_decay={self.rmsprop_decay} must be in [0, 1) and "
                       f"algo.rmsprop_eps={self.rmsprop_eps} > 0")
        return out


@dataclass(frozen=True)
class ReplayConfig:
    """The replay a replay algorithm samples from (``srljax/replay.py``): prioritized, uniform at ``alpha=0``."""

    capacity: int = 1_000_000
    """transitions held (split evenly over the env streams); the oldest are overwritten. Checked against
    the machine's available memory before launch (Atari, ``srljax.layout.problems``) or when the replay is built."""
    alpha: float = 0.0
    """priority exponent: 0 samples uniformly; 0.6 is Schaul et al.'s and Ape-X's proportional choice."""
    beta0: float = 0.4
    """importance-sampling exponent at the start, annealed linearly to 1 over the run (used when alpha > 0)."""
    priority_eps: float = 1e-6
    """added to |TD error| so no sampleable transition has probability 0."""
    dedup_frames: bool = False
    """store each stacked-frame observation's newest frame only and restack at sampling time (Atari: 4x
    less memory, 1M transitions of 84x84 frames = 7 GB instead of 28 GB)."""


@dataclass(frozen=True)
class DQNConfig:
    """DQN (Mnih et al. 2015) with the usual options: double Q-learning, dueling head, n-step returns,
    prioritized replay. One gradient step per sampled batch of ``batch_size``; ``replay_ratio`` samples
    are trained per env step inserted once ``learning_starts`` env steps are in the replay (CleanRL's
    ``train_frequency`` is ``batch_size / replay_ratio``). Optimiser: Adam with ``trainer.lr`` (annealed
    if ``trainer.anneal_lr``) and ``trainer.adam_eps``, gradients clipped to ``trainer.max_grad_norm``
    unless it is 0. Exploration: epsilon-greedy, epsilon linear from ``eps_start`` to ``eps_end`` over
    the first ``exploration_fraction`` of the run's env steps.
    """

    consumes: ClassVar[str] = "replay"
    name: Literal["dqn"] = "dqn"
    num_steps: int = 1
    """env steps per env collected between training rounds (the single-process loop then trains the
    updates the replay ratio owes); distributed (Ape-X): rows per env in one chunk an actor sends."""
    gamma: float = 0.99
    n_step: int = 1
    """n-step returns: a time limit inside the window bootstraps from the final observation, a termination does not."""
    batch_size: int = 32
    replay_ratio: float = 8.0
    """samples trained per env step inserted (CleanRL Atari: a batch of 32 every 4 env steps = 8)."""
    learning_starts: int = 80_000
    """env steps collected before the first update."""
    double_q: bool = True
    """the online network picks the bootstrap action, the target network values it (van Hasselt et al. 2016)."""
    dueling: bool = False
    """value and advantage streams, Q = V + A - mean(A) (Wang et al. 2016)."""
    loss: Literal["huber", "mse"] = "huber"
    """huber (delta 1, Nature DQN's error clipping) or mse (CleanRL's DQN)."""
    target_update_every: int = 250
    """updates between target-network refreshes (CleanRL Atari: every 1,000 env steps / 4 = 250 updates)."""
    tau: float = 1.0
    """at each refresh ``target = tau * online + (1 - tau) * target``: 1 copies, < 1 is Polyak averaging."""
    eps_start: float = 1.0
    eps_end: float = 0.01
    exploration_fraction: float = 0.1
    network: Literal["auto", "mlp", "cnn"] = "auto"
    """``auto``: Nature CNN for image observations, MLP otherwise."""
    hidden_sizes: tuple[int, ...] = (120, 84)
    activation: Literal["tanh", "relu"] = "relu"
    replay: ReplayConfig = field(default_factory=ReplayConfig)
    ratio_tolerance: float = 0.1
    """distributed (Ape-X): the trainer's samples per env step inserted are held within this fraction of
    ``replay_ratio`` by ``throttle``; exported as the metric ``samples_per_insert``."""
    throttle: Literal["both", "updates", "inserts", "none"] = "both"
    """distributed: what waits when the replay ratio leaves its tolerance: the trainer's updates (ahead: it waits
    for inserts), the actors' inserts (ahead: they wait for newer params), both, or none (free-running actors)."""

    def num_updates(self, cfg: Any) -> int:
        """Gradient steps in the run: ``replay_ratio`` samples per env step after ``learning_starts``."""
        return max(1, int(self.replay_ratio * max(0, cfg.total_env_steps - self.learning_starts)) // self.batch_size)

    def describe_batch(self, cfg: Any) -> str:
        return (f"replay batch {self.batch_size} samples, replay ratio {self.replay_ratio:g} samples per env step "
                f"(an update every {self.batch_size / self.replay_ratio:g} env steps) after {self.learning_starts:,} "
                f"env steps, {cfg.num_updates:,} updates; {cfg.env.num_envs} envs, replay of "
                f"{self.replay.capacity:,} transitions")

    def problems(self, cfg: Any) -> list[str]:
        out = gamma_problems(self)
        t, r = cfg.trainer, self.replay
        if self.learning_starts >= cfg.total_env_steps:
            out.append(f"algo.learning_starts={self.learning_starts:,} env steps is not less than the run's "
                       f"total_env_steps={cfg.total_env_steps:,}: no update would ever happen; lower "
                       "algo.learning_starts or raise total_env_steps")
        if self.replay_ratio <= 0:
            out.append(f"algo.replay_ratio={self.replay_ratio} must be > 0 (samples trained per env step; CleanRL "
                       f"CartPole: batch 128 every 10 steps = 12.8, Atari: 32 every 4 = 8)")
        for key in ("batch_size", "n_step", "target_update_every", "num_steps"):
            if getattr(self, key) < 1:
                out.append(f"algo.{key}={getattr(self, key)} must be >= 1")
        if not 0.0 < self.tau <= 1.0:
            out.append(f"algo.tau={self.tau} must be in (0, 1] (1: copy the online network)")
        if not (0.0 <= self.eps_end <= 1.0 and 0.0 <= self.eps_start <= 1.0 and 0.0 < self.exploration_fraction <= 1.0):
            out.append(f"algo.eps_start={self.eps_start} and algo.eps_end={self.eps_end} must be in [0, 1] and "
                       f"algo.exploration_fraction={self.exploration_fraction} in (0, 1]")
        if r.alpha < 0 or not 0.0 <= r.beta0 <= 1.0 or r.priority_eps <= 0:
            out.append(f"algo.replay.alpha={r.alpha} must be >= 0, algo.replay.beta0={r.beta0} in [0, 1] and "
                       f"algo.replay.priority_eps={r.priority_eps} > 0")
        per_env = r.capacity // max(cfg.env.num_envs, 1)
        stack = cfg.env.stack_num if r.dedup_frames else 1
        if per_env <= self.n_step + stack:
            out.append(f"algo.replay.capacity={r.capacity:,} leaves {per_env} rows for each of env.num_envs="
                       f"{cfg.env.num_envs} envs, fewer than an n-step window needs (> algo.n_step + frame stack = "
                       f"{self.n_step + stack}); raise the capacity")
        elif r.capacity < self.batch_size:
            out.append(f"algo.replay.capacity={r.capacity:,} is smaller than one batch of "
                       f"algo.batch_size={self.batch_size}")
        # whether the capacity fits in memory: srljax.layout.problems (srljax.replay.config_memory_problems)
        if t.update_epochs != 1 or t.num_minibatches != 1:
            out.append(f"trainer.update_epochs={t.update_epochs} and trainer.num_minibatches={t.num_minibatches} must "
                       "be 1: DQN takes one gradient step per sampled batch (algo.replay_ratio sets how many)")
        if t.overlap_collection:
            out.append("trainer.overlap_collection=True is for segment algorithms; the replay loop trains between env "
                       "steps: drop the override")
        shards = t.devices * t.num_hosts
        if shards > 1 and self.batch_size % shards:
            out.append(f"algo.batch_size={self.batch_size} does not split across {shards} trainer devices "
                       f"(trainer.devices x trainer.num_hosts); use a multiple of {shards}")
        if cfg.layout.mode != "single":
            from srljax.apex import apex_problems  # Ape-X's layout rules live with its workers' helpers

            out += apex_problems(cfg)
        elif (self.throttle, self.ratio_tolerance) != ("both", 0.1):
            out.append(f"algo.throttle={self.throttle} / algo.ratio_tolerance={self.ratio_tolerance} apply to distributed "
                       "(Ape-X) layouts; the single-process loop trains exactly the updates the replay ratio owes: "
                       "drop the override")
        return out
