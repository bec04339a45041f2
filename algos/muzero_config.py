"""``MuZeroConfig`` (``algos/muzero.py``): MuZero with a learned model and mctx's batched search.

    Experiment(env=EnvConfig(id="gymnax/Breakout-MinAtar", num_envs=32), algo=MuZeroConfig(num_simulations=8))
    python -m launch.local configs/minatar_muzero.py algo.unroll_steps=5 algo.td_steps=10
    python -m launch.local configs/cartpole_muzero_distributed.py algo.reanalyse_ratio=0.5   # the worker graph
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from srljax.config.algo import gamma_problems


@dataclass(frozen=True)
class MuZeroConfig:
    """MuZero (Schrittwieser et al. 2020) on a single-agent JAX env (``gymnax/...``) through the Anakin loop: every
    move of every env is chosen by a tree search over the agent's own learned model (representation, dynamics,
    prediction; ``srljax/learning/anakin_muzero.py``). Each iteration searches ``num_steps`` rows per env into a
    replay of trajectories on the device, samples ``trainer.num_minibatches x batch_size`` windows of
    ``unroll_steps`` moves, and runs ``trainer.update_epochs`` passes of AdamW over them (``trainer.lr``,
    ``trainer.max_grad_norm``): the policy learns the search's move distribution, the value an n-step target
    (``td_steps`` rewards and the search's value after them), the dynamics the rewards, all unrolled from the
    first row's hidden state with the stored moves.

    With ``layout.mode=distributed`` (any env: envpool, Python, a JAX env's host face) it runs in the worker graph:
    actors (or the policy workers, ``layout.inference=remote``) search every move and push segments of ``num_steps``
    rows, the buffer workers keep them (``replay_capacity`` rows over all of them) and send the trainer batches of
    ``trainer.num_minibatches x batch_size`` windows with their targets, one per ``trainer.batch_envs x num_steps``
    env steps inserted; ``reanalyse_ratio`` of those windows searched again there with the newest params
    (``srljax/system/staging/search_buffer.py``)."""

    consumes: ClassVar[str] = "search"
    name: Literal["muzero"] = "muzero"
    action_kinds: ClassVar[tuple[str, ...]] = ("discrete",)
    dict_obs: ClassVar[bool] = True
    action_masks: ClassVar[bool] = False
    max_players: ClassVar[int] = 1
    """one player's rewards (``prepare.search_problems`` refuses a game of players taking turns)."""
    network: ClassVar[str] = "mlp"
    """the three networks are MLPs on the flattened observation (``algos/fit.py`` reads it)."""
    num_steps: int = 16
    """moves searched per env between updates."""
    gamma: float = 0.99
    search: Literal["gumbel", "puct"] = "gumbel"
    """``gumbel``: mctx's Gumbel MuZero policy (policy target the improved policy); ``puct``: its MuZero policy (PUCT
    with Dirichlet noise at the root; policy target the visit counts)."""
    num_simulations: int = 8
    """simulations per move."""
    max_considered_actions: int = 16
    """gumbel: actions sampled at the root for sequential halving."""
    rescale_values: bool = True
    """gumbel: the completed q-values of the root's moves are min-max rescaled to [0, 1] before they move the
    policy target (mctx's default: the smallest q difference becomes a full step); False: the values as they are
    (their own scale, times mctx's ``value_scale`` 0.1 and the visits)."""
    dirichlet_alpha: float = 0.25
    dirichlet_fraction: float = 0.25
    """puct: the root's Dirichlet noise."""
    unroll_steps: int = 5
    """K: moves the dynamics network is unrolled from each sampled row."""
    td_steps: int = 10
    """n: rewards summed before the search's value bootstraps the value target."""
    value_bootstrap: Literal["search", "fresh"] = "search"
    """the value the n-step target bootstraps from: ``search``, the search's value stored when the row was played;
    ``fresh``, the current network's value of that row, computed when the window is sampled (MuZero Reanalyze's
    fresh bootstrap; the policy targets stay the stored ones)."""
    support_size: int = 10
    """value and reward are categorical over the integers -S..S of the transformed scale
    h(x) = sign(x)(sqrt(|x| + 1) - 1) + 0.001 x (h(10) = 2.3, h(100) = 9.1)."""
    batch_size: int = 256
    """windows per minibatch; an iteration samples ``trainer.num_minibatches`` of them from the replay."""
    replay_capacity: int = 100_000
    """rows kept (all envs together, rounded up to a multiple of ``num_envs x num_steps``), oldest overwritten."""
    value_coef: float = 0.25
    consistency_coef: float = 0.0
    """> 0: EfficientZero's self-supervised consistency loss at this weight: at each unrolled step the dynamics'
    hidden state, through a projection and a predictor head, is pulled (negative cosine similarity) towards the
    projection of the representation of the real row there (no gradient through that side); 0: none."""
    projection_size: int = 256
    """width of the consistency loss's projection and predictor heads (used where ``consistency_coef > 0``)."""
    weight_decay: float = 1e-4
    """AdamW's decoupled weight decay."""
    state_size: int = 128
    """width of the hidden state (min-max normalised to [0, 1] per row)."""
    hidden_sizes: tuple[int, ...] = (256, 256)
    """the layers of each of the three MLPs."""
    activation: Literal["tanh", "relu"] = "relu"
    reanalyse_ratio: float = 0.0
    """the worker graph: the share of each batch's windows (0..1) that the buffer workers search again with the newest
    params they hold, refreshing the policy and value targets before the trainer gets them (MuZero Reanalyse)."""
    reanalyse_targets: Literal["both", "value", "policy"] = "both"
    """which targets a reanalysed window gets from the new search (the rest stay the actors'): ``both``, its rows
    0..K (policy) and n..n+K (the values the n-step targets bootstrap from) searched again; ``value``, only rows
    n..n+K's values (MuZero Reanalyse's fresh value bootstrap, the actors' policy targets kept); ``policy``, only rows
    0..K's move distributions. A row between them keeps its stored value (read only where a time limit cut a game)."""
    reanalyse_target_every: int = 0
    """the params the buffer workers reanalyse with: 0, the newest they hold; N > 0, a target network (EfficientZero's
    target model): the newest held when taken, kept until the newest is N or more params versions past them."""

    def problems(self, cfg: Any) -> list[str]:
        out = gamma_problems(self)
        if not self.hidden_sizes or min(self.hidden_sizes) < 1 or self.state_size < 1:
            out.append(f"algo.hidden_sizes={self.hidden_sizes} needs at least one layer, each of width >= 1, and "
                       f"algo.state_size={self.state_size} >= 1")
        if self.num_simulations < 2 or self.max_considered_actions < 2:
            out.append(f"algo.num_simulations={self.num_simulations} and algo.max_considered_actions="
                       f"{self.max_considered_actions} must be >= 2")
        if min(self.unroll_steps, self.td_steps, self.support_size, self.batch_size, self.num_steps) < 1:
            out.append(f"algo.unroll_steps={self.unroll_steps}, td_steps={self.td_steps}, support_size="
                       f"{self.support_size}, batch_size={self.batch_size} and num_steps={self.num_steps} must be >= 1")
        if self.value_coef < 0 or self.weight_decay < 0 or self.consistency_coef < 0:
            out.append(f"algo.value_coef={self.value_coef}, algo.weight_decay={self.weight_decay} and "
                       f"algo.consistency_coef={self.consistency_coef} must be >= 0")
        if self.consistency_coef > 0 and self.projection_size < 1:
            out.append(f"algo.consistency_coef={self.consistency_coef} needs algo.projection_size >= 1 (got "
                       f"{self.projection_size})")
        if not (self.dirichlet_alpha > 0 and 0 <= self.dirichlet_fraction <= 1):
            out.append(f"algo.dirichlet_alpha={self.dirichlet_alpha} must be > 0 and algo.dirichlet_fraction="
                       f"{self.dirichlet_fraction} in [0, 1]")
        rows = self.unroll_steps + self.td_steps + 1
        if self.replay_capacity < rows * cfg.env.num_envs:
            out.append(f"algo.replay_capacity={self.replay_capacity} must hold a window of unroll_steps + td_steps + 1 "
                       f"= {rows} rows of every env ({rows * cfg.env.num_envs}); raise it")
        if not 0 <= self.reanalyse_ratio <= 1:
            out.append(f"algo.reanalyse_ratio={self.reanalyse_ratio} must be in [0, 1] (the share of windows "
                       "searched again)")
        if self.reanalyse_targets not in ("both", "value", "policy"):
            out.append(f"algo.reanalyse_targets={self.reanalyse_targets!r} must be 'both', 'value' or 'policy'")
        if self.reanalyse_target_every < 0:
            out.append(f"algo.reanalyse_target_every={self.reanalyse_target_every} must be >= 0 (0: the newest params)")
        if cfg.layout.mode == "distributed":
            return out + distributed_problems(self, cfg)
        if self.reanalyse_target_every:
            out.append(f"algo.reanalyse_target_every={self.reanalyse_target_every} with layout.mode=single: only the "
                       "worker graph's buffer workers reanalyse; set layout.mode=distributed or leave it 0")
        if self.reanalyse_targets != "both":
            out.append(f"algo.reanalyse_targets={self.reanalyse_targets!r} with layout.mode=single: only the worker "
                       "graph's buffer workers reanalyse; set layout.mode=distributed or leave it 'both'")
        if self.reanalyse_ratio:
            out.append(f"algo.reanalyse_ratio={self.reanalyse_ratio} with layout.mode=single: the buffer workers of "
                       "the worker graph reanalyse; set layout.mode=distributed (configs/cartpole_muzero_distributed.py) "
                       "or algo.reanalyse_ratio=0")
        if not cfg.env.is_jax:
            out.append(f"algo=muzero on env {cfg.env.factory or cfg.env.id!r}: its acting and replay run inside the "
                       "compiled program, so the env must be a JAX env (env.id=gymnax/Breakout-MinAtar, ...), or run "
                       "it in the worker graph with layout.mode=distributed")
        return out


def reanalysed_rows(a: MuZeroConfig) -> tuple[list[int], tuple[str, ...]]:
    """The rows of a window (``K + n + 1`` rows) a reanalyse searches again and the ``algos.muzero.Window`` fields
    it refreshes there (``a.reanalyse_targets``): the policy targets' rows 0..K, the value bootstraps' n..n+K."""
    K, n, what = a.unroll_steps, a.td_steps, a.reanalyse_targets
    rows = set(range(K + 1)) if what in ("both", "policy") else set()
    rows |= set(range(n, n + K + 1)) if what in ("both", "value") else set()
    fields = {"both": ("value", "policy"), "value": ("value",), "policy": ("policy",)}[what]
    return sorted(rows), fields


def distributed_problems(a: MuZeroConfig, cfg: Any) -> list[str]:
    """What the worker graph's MuZero (``srljax/system/staging/search_buffer.py``) does not do."""
    out = []
    span = a.unroll_steps + a.td_steps + 1
    if a.num_steps + 1 < span:
        out.append(f"algo.num_steps={a.num_steps}: a segment's {a.num_steps + 1} rows must hold a window of "
                   f"unroll_steps + td_steps + 1 = {span} rows (windows are cut inside segments); raise algo.num_steps")
    if cfg.layout.num_buffer_workers < 1:
        out.append("algo=muzero with layout.mode=distributed keeps its replay in the buffer workers; set "
                   "layout.num_buffer_workers>=1")
    elif a.replay_capacity < cfg.layout.num_buffer_workers * (a.num_steps + 1) * cfg.env.num_envs:
        out.append(f"algo.replay_capacity={a.replay_capacity} must give each of layout.num_buffer_workers="
                   f"{cfg.layout.num_buffer_workers} at least one segment of every env of an actor "
                   f"({(a.num_steps + 1) * cfg.env.num_envs} rows); raise it")
    windows = a.batch_size * cfg.trainer.num_minibatches
    if cfg.trainer.devices > 1 and a.batch_size % cfg.trainer.devices:
        out.append(f"algo.batch_size={a.batch_size} windows per minibatch do not split over trainer.devices="
                   f"{cfg.trainer.devices} ({windows} windows per update); use a multiple of it")
    for what, bad in (("trainer.num_hosts>1", cfg.trainer.num_hosts > 1), ("layout.deterministic", cfg.layout.deterministic),
                      ("pbt", cfg.pbt.enabled), ("policies", cfg.policies.enabled), ("selfplay", cfg.selfplay.enabled)):
        if bad:
            out.append(f"algo=muzero with layout.mode=distributed does not support {what}; turn it off")
    return out
