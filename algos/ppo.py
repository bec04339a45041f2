"""PPO (Schulman et al. 2017) with CleanRL's loss details, as an ``Algorithm``.

Shape letters: T transitions, B envs, N = T*B flat samples, M minibatches, E epochs,
``*O`` observation shape, ``*A`` action shape.

The update loop form (``loop``) was measured with ``python bench/update_loop.py`` on this
repo's 2-core AMD EPYC under XLA:CPU (jax 0.10.2); median seconds per ``update`` after compile
(compile seconds in brackets), random data, other jobs sharing the CPU for the MuJoCo rows:

  case (T x B, M minibatches, E epochs)   scan              unroll
  CartPole MLP 64x64 (128x4, M=4, E=4)    0.0029 (2.6 s)    0.0038 (10.7 s)
  MuJoCo MLP 64x64 (2048x1, M=32, E=10)   0.058 (6.3 s)     killed after 18 min compiling at 23 GB RSS
  MuJoCo as above but E=1 (32 steps)      0.0079 (7.0 s)    0.0107 (54 s)
  Atari Nature CNN (128x8, M=4, E=1)      20.4 (3.4 s)      2.09 (7.0 s)
  the same, strided convs as matmuls      2.80 (1.9 s)      0.63 (4.3 s)    (algos.networks.Conv, 2026-12-06)

So the default is ``unroll`` for the CNN (a conv grad step inside ``lax.scan`` runs ~10x slower
on XLA:CPU; CleanRL's E=4 unrolls to only 16 steps) and ``scan`` for MLPs (as fast or faster,
and unrolling MuJoCo's 320 steps does not compile in useful time or memory). GPUs were not
measured; pass ``make_ppo(..., loop=...)`` to override.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Literal

import jax
import jax.numpy as jnp
import optax
from jax import lax

from algos import actor_critic
from algos.actor_critic import ActorCriticPolicy
from algos.base import RETURN_ACC, Algorithm, Metrics, Params, TrainState
from algos.distributions import Distribution
from algos.normalizers import rms_update, scale_rewards
from algos.recurrent import Recurrent, episode_starts, segment_carry
from algos.returns import gae, valid_mask, vtrace
from srljax.config import Experiment, PPOConfig
from srljax.types import EnvSpec, Trajectory

Array = jax.Array
LoopForm = Literal["scan", "unroll"]
ApplyFn = Callable[[Params, Array], tuple[Any, Array]]


def _mean(x: Array, mask: Array, n: Array) -> Array:
    """Mean over the valid entries; where() so masked rows cannot leak even as NaN."""
    return jnp.sum(jnp.where(mask > 0, x, 0.0)) / n


def ppo_loss(
    params: Params,
    apply_fn: ApplyFn,
    mb: dict[str, Array],
    *,
    dist: Distribution,
    clip_coef: float,
    clip_vloss: bool = True,
    ent_coef: float = 0.01,
    vf_coef: float = 0.5,
    norm_adv: bool = True,
) -> tuple[Array, dict[str, Array]]:
    """CleanRL's PPO loss on one minibatch, averaged over valid samples only.

    ``mb``: obs [N, *O] (already normalised if enabled), action [N, *A], logp [N] and value [N]
    (behaviour policy's), adv [N], ret [N] (= adv + value), mask [N] (1 valid, 0 ignored).
    ``apply_fn(params, obs) -> (policy params, value [N])``.
    Returns (loss, aux) with aux policy_loss, value_loss, entropy, approx_kl, clipfrac.
    """
    mask = mb["mask"].astype(jnp.float32)
    n = jnp.maximum(jnp.sum(mask), 1.0)
    pi, value = apply_fn(params, mb["obs"])
    logp = dist.log_prob(pi, mb["action"])
    log_ratio = logp - mb["logp"]
    ratio = jnp.exp(log_ratio)

    adv = mb["adv"]
    if norm_adv:
        a_mean = _mean(adv, mask, n)
        # unbiased std over the valid entries, as torch.Tensor.std in CleanRL
        a_var = jnp.sum(jnp.where(mask > 0, jnp.square(adv - a_mean), 0.0)) / jnp.maximum(n - 1.0, 1.0)
        adv = (adv - a_mean) / (jnp.sqrt(a_var) + 1e-8)
    pg_loss = _mean(jnp.maximum(-adv * ratio, -adv * jnp.clip(ratio, 1.0 - clip_coef, 1.0 + clip_coef)), mask, n)

    v_loss_unclipped = jnp.square(value - mb["ret"])
    if clip_vloss:
        v_clipped = mb["value"] + jnp.clip(value - mb["value"], -clip_coef, clip_coef)
        v_loss = 0.5 * _mean(jnp.maximum(v_loss_unclipped, jnp.square(v_clipped - mb["ret"])), mask, n)
    else:
        v_loss = 0.5 * _mean(v_loss_unclipped, mask, n)

    entropy = _mean(dist.entropy(pi), mask, n)
    loss = pg_loss - ent_coef * entropy + vf_coef * v_loss
    aux = {
        "policy_loss": pg_loss,
        "value_loss": v_loss,
        "entropy": entropy,
        # k3 estimator of KL(old || new) (Schulman's blog, CleanRL's approx_kl)
        "approx_kl": lax.stop_gradient(_mean((ratio - 1.0) - log_ratio, mask, n)),
        "clipfrac": lax.stop_gradient(_mean((jnp.abs(ratio - 1.0) > clip_coef).astype(jnp.float32), mask, n)),
    }
    return loss, aux


def explained_variance(pred: Array, target: Array, mask: Array) -> Array:
    """1 - Var[target - pred] / Var[target] over valid entries; NaN when Var[target] = 0 (CleanRL)."""
    n = jnp.maximum(jnp.sum(mask), 1.0)

    def var(x: Array) -> Array:
        return _mean(jnp.square(x - _mean(x, mask, n)), mask, n)

    var_y = var(target)
    return jnp.where(var_y == 0, jnp.nan, 1.0 - var(target - pred) / jnp.where(var_y == 0, 1.0, var_y))


def make_ppo(cfg: Experiment, spec: EnvSpec, *, loop: LoopForm | None = None) -> Algorithm:
    """Build PPO for ``spec``; ``loop`` picks the compiled minibatch loop (default: by network)."""
    a, t = cfg.algo, cfg.trainer
    assert isinstance(a, PPOConfig)
    ac = ActorCriticPolicy.build(a, spec, value_extra=True)
    net, rec, dist, prep = ac.net, ac.rec, ac.dist, ac.prep
    loop = loop or ("unroll" if net.torso == "cnn" else "scan")
    # plain Python numbers captured by the closures below
    epochs, num_mb = t.update_epochs, t.num_minibatches
    steps_per_update = epochs * num_mb
    gamma, lam = a.gamma, a.gae_lambda
    norm_obs, norm_rew, rew_clip = a.normalize_obs, a.normalize_reward, a.reward_norm_clip
    if t.anneal_lr:
        schedule = optax.linear_schedule(t.lr, 0.0, cfg.num_updates * steps_per_update)
    else:
        schedule = optax.constant_schedule(t.lr)
    tx = optax.chain(optax.clip_by_global_norm(t.max_grad_norm), optax.adam(schedule, eps=t.adam_eps))
    if cfg.pbt.population > 1:  # PBT's learning-rate factor lives in the optimiser state (srljax/loops/population.py)
        tx = optax.chain(tx, optax.inject_hyperparams(optax.scale)(step_size=1.0))
    loss_fn = functools.partial(
        ppo_loss,
        apply_fn=net.apply if rec is None else _column_apply(rec),
        dist=dist,
        clip_coef=a.clip_coef,
        clip_vloss=a.clip_vloss,
        ent_coef=a.ent_coef,
        vf_coef=a.vf_coef,
        norm_adv=a.norm_adv,
    )
    sgd_step = actor_critic.sgd_step(jax.value_and_grad(lambda p, mb: loss_fn(p, mb=mb), has_aux=True), tx)

    def appo_targets(state: TrainState, traj: Trajectory, r_t: Array) -> tuple[Array, Array, Array, Array]:
        """APPO (Sample Factory): V-trace on the learner's values and policy before this update, so
        lagged segments are corrected. -> (values [T+1, B], advantages pg_adv [T, B], targets vs [T, B],
        the learner's log-probabilities of the actions [T, B])."""
        obs = prep(traj.obs, state.norm.obs)
        if rec is None:
            pi, values = net.apply(state.params, obs)
        else:
            pi, values = rec.unroll_segment(state.params, obs, traj.terminated, traj.truncated, traj.extras)
        logp = dist.log_prob(jax.tree.map(lambda x: x[:-1], pi), traj.action[:-1])
        log_rho = logp - traj.extras["logp"][:-1].astype(jnp.float32)
        vs, pg_adv = vtrace(values, r_t, traj.terminated[1:], traj.truncated[1:], log_rho, gamma, a.rho_bar, a.c_bar,
                            lam)
        return values, pg_adv, vs, logp

    def update(state: TrainState, traj: Trajectory) -> tuple[TrainState, Metrics]:
        mask = valid_mask(traj.terminated, traj.truncated)  # [T, B]
        r_t, norm = traj.reward[1:], state.norm
        if norm_rew:
            r_t, norm = scale_rewards(norm, r_t, mask, traj.extras[RETURN_ACC][0], gamma, rew_clip)
        values = traj.extras["value"].astype(jnp.float32)  # [T+1, B]
        logp = traj.extras["logp"][:-1].astype(jnp.float32)  # the stats the actors used: first epoch's ratio 1
        if a.vtrace:
            values, adv, ret, learner_logp = appo_targets(state, traj, r_t)
            if a.proximal != "behaviour":  # clip around the learner's policy; pg_adv already weighs by rho
                logp = lax.stop_gradient(learner_logp)
        else:
            adv = gae(values, r_t, traj.terminated[1:], traj.truncated[1:], gamma, lam)
            ret = adv + values[:-1]
        batch = {
            "obs": prep(traj.obs[:-1], state.norm.obs),
            "action": traj.action[:-1],
            "logp": logp,
            "value": values[:-1],
            "adv": adv,
            "ret": ret,
            "mask": mask,
        }
        if rec is None:  # samples: [T, B, ...] -> [N, ...], shuffled one by one
            flat = jax.tree.map(lambda x: x.reshape((-1, *x.shape[2:])), batch)
        else:  # whole env columns: batch-major [B, T, ...], each with the carry it starts from
            starts = episode_starts(traj.terminated, traj.truncated)[:-1]
            batch["obs"] = {"obs": batch["obs"], "first": starts, "carry": segment_carry(traj.extras)}
            flat = _batch_major(batch)
        rng, key = jax.random.split(state.rng)
        (params, opt_state), stats = actor_critic.run_epochs(
            sgd_step, (state.params, state.opt_state), flat, jax.random.split(key, epochs), num_mb, loop)
        if norm_obs:
            norm = norm.replace(obs=rms_update(norm.obs, traj.obs[:-1], mask))
        metrics = {k: jnp.mean(v) for k, v in stats.items()}
        metrics["explained_variance"] = explained_variance(flat["value"], flat["ret"], flat["mask"])
        metrics["lr"] = jnp.asarray(schedule(state.step * steps_per_update), jnp.float32)
        new_state = TrainState(params=params, opt_state=opt_state, norm=norm, step=state.step + 1, rng=rng)
        return new_state, metrics

    return Algorithm(
        init=lambda rng: ac.init_state(rng, tx, reward_norm=norm_rew),
        policy_params=ac.policy_params,
        initial_actor_state=ac.initial_actor_state,
        act=ac.act,
        act_deterministic=ac.act_deterministic,
        action_probs=ac.action_probs,
        update=update,
        extras_spec=ac.extras_spec,
        return_gamma=gamma if norm_rew else None,
    )


def _batch_major(batch: dict[str, Any]) -> dict[str, Any]:
    """Recurrent PPO: time-major ``[T, B, ...]`` leaves -> ``[B, T, ...]`` so minibatches take whole
    columns (the carry ``[B, H]`` is already batch-major)."""
    carry = batch["obs"]["carry"]
    swapped = jax.tree.map(lambda x: jnp.swapaxes(x, 0, 1), {**batch, "obs": {**batch["obs"], "carry": ()}})
    swapped["obs"]["carry"] = carry
    return swapped


def _column_apply(rec: Recurrent) -> ApplyFn:
    """``apply_fn`` for ``ppo_loss`` on column minibatches: ``x = {obs [b, T, *O], first [b, T], carry}``
    -> (policy params [b, T, ...], value [b, T]), unrolled over T from each column's stored carry."""

    def apply(params: Params, x: Any) -> tuple[Any, Array]:
        pi, value = rec.unroll(params, x["carry"], jnp.swapaxes(x["obs"], 0, 1), jnp.swapaxes(x["first"], 0, 1))
        return jax.tree.map(lambda y: jnp.swapaxes(y, 0, 1), pi), jnp.swapaxes(value, 0, 1)

    return apply
