"""``AlphaZeroConfig`` (``algos/alphazero.py``): AlphaZero with mctx's batched search, the env itself as the model.

    Experiment(env=EnvConfig(id="pgx/connect_four", num_envs=128), algo=AlphaZeroConfig(num_simulations=32))
    python -m launch.local configs/connect_four_alphazero.py algo.search=puct algo.num_simulations=64
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from srljax.config.algo import gamma_problems, hash_by_value, network_problems


@dataclass(frozen=True)
class AlphaZeroConfig:
    """AlphaZero (Silver et al. 2018) on a JAX env (``pgx/...``) through the Anakin loop: every move of every env is
    chosen by a tree search whose model is the env's own step (``srljax/learning/anakin_search.py``); the network
    (policy logits over the legal moves, a value) learns the search's move distribution (cross-entropy) and the
    outcome seen from the player to move (squared error). ``num_steps`` rows per env are searched, then one update
    of ``trainer.update_epochs`` x ``trainer.num_minibatches`` Adam steps (``trainer.lr``, ``trainer.max_grad_norm``)
    on them and the ``replay_iterations - 1`` iterations before, kept on the device. A row whose game has not
    ended within the rows at hand takes the search's value where the rows stop (an n-step target; the game's
    outcome otherwise)."""

    consumes: ClassVar[str] = "search"
    name: Literal["alphazero"] = "alphazero"
    action_kinds: ClassVar[tuple[str, ...]] = ("discrete",)
    dict_obs: ClassVar[bool] = True
    action_masks: ClassVar[bool] = True
    num_steps: int = 32
    """moves searched per env between updates."""
    gamma: float = 1.0
    """discount of a single-player game's rewards (a two-player game's outcome is not discounted)."""
    search: Literal["gumbel", "puct"] = "gumbel"
    """``gumbel``: mctx's Gumbel MuZero policy (sequential halving at the root; policy target the improved policy);
    ``puct``: its MuZero policy (PUCT with Dirichlet noise at the root; policy target the visit counts)."""
    num_simulations: int = 32
    """simulations per move in self-play."""
    eval_simulations: int = 64
    """simulations per move when the agent plays the evaluation's bots (``selfplay.bots``), greedy."""
    opening_moves: int = 4
    """the first N moves of every self-play game are uniformly random legal moves (searched and trained on as any
    other row: the target is still the search's policy), so games played by a near-deterministic search do not all
    repeat one game; evaluation games have none."""
    max_considered_actions: int = 16
    """gumbel: actions sampled at the root for sequential halving."""
    dirichlet_alpha: float = 0.3
    dirichlet_fraction: float = 0.25
    """puct: the root's Dirichlet noise."""
    value_coef: float = 1.0
    weight_decay: float = 1e-4
    """AdamW's decoupled weight decay."""
    replay_iterations: int = 1
    augment: bool = True
    """train on each searched row's mirror images too, where the env declares its symmetries
    (``envs.jax_envs.Family.symmetries``: connect four's left-right mirror)."""
    """iterations of searched rows each update trains on, the newest included (1: only the fresh rows)."""
    network: str = "mlp"
    """``mlp`` (one trunk for both heads) or a Flax module of your own, ``"package.module:Class"`` (observations
    ``[B, *O]`` in, features ``[B, F]`` out), built with ``network_options``."""
    network_options: dict[str, Any] = field(default_factory=dict)
    hidden_sizes: tuple[int, ...] = (256, 256, 256)
    activation: Literal["tanh", "relu"] = "relu"

    __hash__ = hash_by_value

    def describe_batch(self, cfg: Any) -> str:
        """The launchers' line about the batch: searched rows per update and what each update trains on."""
        rows = cfg.env.num_envs * self.num_steps
        return (f"{cfg.env.num_envs} envs x {self.num_steps} moves searched ({self.num_simulations} simulations each) "
                f"= {rows:,} rows per update, trained on with those of the {self.replay_iterations - 1} updates before"
                f"{' and their mirror images' if self.augment else ''} ({cfg.trainer.update_epochs} epoch(s) x "
                f"{cfg.trainer.num_minibatches} minibatches), {cfg.num_updates:,} updates")

    def problems(self, cfg: Any) -> list[str]:
        out = gamma_problems(self) + network_problems(self)
        if self.network in ("cnn", "auto"):
            out.append(f"algo.network={self.network!r}: AlphaZero takes mlp or a module of your own")
        if self.num_simulations < 2 or self.eval_simulations < 2:
            out.append(f"algo.num_simulations={self.num_simulations} and algo.eval_simulations="
                       f"{self.eval_simulations} must be >= 2")
        if self.opening_moves < 0:
            out.append(f"algo.opening_moves={self.opening_moves} must be >= 0")
        if self.max_considered_actions < 2 or self.replay_iterations < 1 or self.value_coef < 0 or self.weight_decay < 0:
            out.append(f"algo.max_considered_actions={self.max_considered_actions} must be >= 2, algo.replay_iterations="
                       f"{self.replay_iterations} >= 1, algo.value_coef={self.value_coef} and algo.weight_decay="
                       f"{self.weight_decay} >= 0")
        if not (self.dirichlet_alpha > 0 and 0 <= self.dirichlet_fraction <= 1):
            out.append(f"algo.dirichlet_alpha={self.dirichlet_alpha} must be > 0 and algo.dirichlet_fraction="
                       f"{self.dirichlet_fraction} in [0, 1]")
        if cfg.layout.mode != "single":
            out.append(f"algo=alphazero with layout.mode={cfg.layout.mode}: AlphaZero self-play runs on the device "
                       "(the Anakin loop); set layout.mode=single")
        from srljax.config.eval import EvalConfig

        default = EvalConfig()
        moot = [k for k in ("episodes", "num_envs", "deterministic", "video", "video_max_frames")
                if getattr(cfg.eval, k) != getattr(default, k)]
        if moot:
            out.append(f"{', '.join('eval.' + k for k in moot)}: with algo=alphazero an evaluation is games against "
                       "selfplay.bots (selfplay.bot_games each, the agent searching algo.eval_simulations a move, "
                       "greedy); drop them")
        if not cfg.env.is_jax:
            out.append(f"algo=alphazero on env {cfg.env.factory or cfg.env.id!r}: its search steps the env as its "
                       "model, so the env must be a JAX env (env.id=pgx/connect_four, pgx/tic_tac_toe, ...)")
        return out
