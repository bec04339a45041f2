"""The algorithm seam: what every shell (notebook loop, actor, trainer) calls.

Shape letters: T time, B envs, ``*O`` observation shape, ``*A`` action shape.

An ``Algorithm`` is a frozen bundle of pure functions built once from the config (``algos.make``);
every number they need is captured at build time, so they can be ``jax.jit``-ed, sharded or
shipped without reading the config again. They are returned un-jitted: the caller chooses
``jax.jit`` options (donation, shardings) — ``jax.jit(algo.update)``, ``jax.jit(algo.act)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import flax.struct
import jax

from srljax.types import RETURN_ACC, Trajectory

Array = jax.Array
Params = Any  # a pytree
ActorState = Any  # a pytree; () for feed-forward policies
Metrics = dict[str, Array]


@flax.struct.dataclass
class TrainState:
    """The learner's whole state, a pytree (checkpoint it as is)."""

    params: Params  # network params
    opt_state: Any  # optax state
    norm: Any  # normaliser stats (``algos.normalizers.NormState``)
    step: Array  # [] int32: updates applied so far
    rng: Array  # PRNG key for minibatch shuffling


@dataclass(frozen=True)
class Algorithm:
    """Pure functions of one algorithm instance.

    ``init(rng) -> TrainState``
    ``policy_params(TrainState) -> Params``: the pytree actors need (network params and
      observation-normaliser stats); this is what gets published to actors.
    ``initial_actor_state(B) -> ActorState``: ``()`` for feed-forward networks; a recurrent policy's
      carry (leaves ``[B, ...]``, one row per env).
    ``act(policy_params, obs [B, *O], actor_state, first [B] bool, rng) -> (action [B, *A], extras, actor_state)``:
      obs arrive raw (uint8 frames or float32); ``first`` marks rows that start an episode (the env's
      reset row: its previous row was done, or it is the env's first row), where a recurrent policy
      resets its carry (``algos.recurrent``); shells pass None when ``initial_actor_state`` has no
      leaves (feed-forward: nothing to reset, one argument less per call); extras is
      ``{name: [B, ...]}`` as in ``extras_spec``.
    ``update(TrainState, Trajectory [T+1, B]) -> (TrainState, metrics {name: scalar})``; for a replay
      algorithm (``consumes="replay"``) ``update(TrainState, ReplayBatch [N]) -> (TrainState, metrics,
      per_sample {name: [N]})``, where ``per_sample["priority"]`` goes back to the replay that
      produced the batch (``srljax.loops.replay``).
    ``extras_spec``: ``{name: (per-env shape, numpy dtype name)}`` so shells can allocate storage.
    ``return_gamma``: set when ``update`` scales rewards by the std of the discounted return (gym's
      ``NormalizeReward``): the shell that builds segments keeps each env's running discounted
      return with this gamma and stores it per row as the extra ``RETURN_ACC`` (``segment_extras_spec``),
      so the accumulator stays with its env however columns are batched (``srljax.learning.rollout``).
    ``act_deterministic``: as ``act`` with the mode of the action distribution (optional; evaluation).
    ``consumes``: ``"segments"`` (fresh ``Trajectory`` batches: PPO, IMPALA) or ``"replay"`` (sampled
      ``ReplayBatch`` es: DQN); the config class declares the same (``srljax.config.algo.consumes``).

    What replay and acting need beyond that, so the replay loop and the replay actor name no algorithm:
    ``exploration(env_steps, actor, num_actors) -> {actor-state key: value}``: host side, the exploration
      values every env row of one actor acts with, written into its actor state before ``act`` (DQN:
      ``{"epsilon": e}``; a continuous algorithm: its noise scale). ``actor=None``: the single-process loop's
      schedule over the run (``env_steps`` so far); ``actor=i`` of ``num_actors``: a distributed actor's own, with
      ``env_steps`` the trial's as that actor reckons them (Ape-X's DQN: a constant per actor; SAC, TD3: random
      actions until ``learning_starts``). Each value is also reported as a metric under its key. Default: none.
    ``initial_priorities(rows) -> [R - priority_lookahead]``: numpy, host side: an actor's priorities for
      rows ``[R]`` of one env stream, from the stored fields (``obs``, ``action``, ``reward``,
      ``terminated``, ``truncated`` and ``act``'s extras by name); row t may look ``priority_lookahead``
      rows ahead (DQN: its n-step window). None: every row gets priority 1.
    Target networks live in ``TrainState.params`` and ``update`` refreshes them (DQN: every
    ``target_update_every`` updates, Polyak with ``tau``), so no shell ever handles them.
    """

    init: Callable[[Array], TrainState]
    policy_params: Callable[[TrainState], Params]
    initial_actor_state: Callable[[int], ActorState]
    act: Callable[[Params, Array, ActorState, Array, Array], tuple[Array, dict[str, Array], ActorState]]
    update: Callable[[TrainState, Trajectory], tuple[TrainState, Metrics]]
    extras_spec: dict[str, tuple[tuple[int, ...], str]]
    return_gamma: float | None = None
    consumes: str = "segments"
    act_deterministic: Callable[[Params, Array, ActorState, Array, Array], tuple[Array, dict[str, Array], ActorState]] | None = None
    """``act``'s signature, acting with the distribution's mode (greedy / mean action; DQN: epsilon 0), for
    evaluation (``srljax.evaluation.evaluator``, ``eval.deterministic``); None: the algorithm has none."""
    action_probs: Callable[[Params, Array], Array] | None = None
    """``action_probs(policy_params, obs [B, *O]) -> [B, A]``: a feed-forward discrete policy's action probabilities
    (illegal actions 0), what PSRO tabulates over a game's information states (``srljax/population/game_tree.py``);
    None: the algorithm has none (recurrent or continuous policies, value-based ones)."""
    exploration: Callable[[int, int | None, int], dict[str, float]] = lambda env_steps, actor, num_actors: {}
    initial_priorities: Callable[[dict[str, Any]], Any] | None = None
    priority_lookahead: int = 0


def segment_extras_spec(algo: Algorithm) -> dict[str, tuple[tuple[int, ...], str]]:
    """The extras a segment carries: ``act``'s extras, plus ``RETURN_ACC`` when the algorithm asks for it."""
    spec = dict(algo.extras_spec)
    if getattr(algo, "return_gamma", None) is not None:
        spec[RETURN_ACC] = ((), "float32")
    return spec
