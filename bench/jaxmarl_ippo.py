"""JaxMARL's own IPPO baselines (``baselines/IPPO/ippo_ff_overcooked.py`` and ``ippo_ff_hanabi.py``) run here without
hydra or wandb, at a chosen env-step budget, seeds packed in one program (``jax.vmap`` over the seeds' keys, as
JaxMARL's Overcooked script does): the figures srljax's configs are compared with (bench/RESULTS.md, issue 41).

    python bench/jaxmarl_ippo.py overcooked --steps 3000000 --seeds 1,2
    python bench/jaxmarl_ippo.py hanabi --steps 4000000 --seeds 1

The training code is JaxMARL's (FLAIROx/JaxMARL at c793d09, the files above), copied with these changes only: the
yaml's settings are the ``CONFIGS`` below (``--set KEY=VALUE`` overrides one), ``TOTAL_TIMESTEPS`` is ``--steps``, the
per-update metrics come back from the scan instead of a wandb callback, and the Overcooked run does not render a gif.
What JaxMARL's scripts log, per update: ``returns`` (Hanabi: the last step's ``returned_episode_returns`` averaged
over the actors) and the info means (Overcooked). Printed here per update window: the mean return of the episodes
that ENDED in those updates (``returned_episode`` flags), the figure srljax's Anakin lines carry as
``episode_return``; Overcooked's is the delivery reward alone (20 a soup; the shaped reward JaxMARL adds for learning,
annealed to 0 over ``REW_SHAPING_HORIZON`` steps, is not in it); Hanabi's is the score (0 when the team bombs out).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import NamedTuple

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import distrax  # noqa: E402
import flax.linen as nn  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402
from flax.linen.initializers import constant, orthogonal  # noqa: E402
from flax.training.train_state import TrainState  # noqa: E402

from bench.machine import describe  # noqa: E402

CONFIGS = {  # JaxMARL's baselines/IPPO/config/ippo_ff_overcooked.yaml (layout set below) and ippo_ff_hanabi.yaml
    "overcooked": {"LR": 2.5e-4, "NUM_ENVS": 16, "NUM_STEPS": 128, "UPDATE_EPOCHS": 4, "NUM_MINIBATCHES": 4,
                   "GAMMA": 0.99, "GAE_LAMBDA": 0.95, "CLIP_EPS": 0.2, "ENT_COEF": 0.01, "VF_COEF": 0.5,
                   "MAX_GRAD_NORM": 0.5, "REW_SHAPING_HORIZON": 2.5e6, "ACTIVATION": "tanh", "ANNEAL_LR": True,
                   "ENV_NAME": "overcooked", "LAYOUT": "cramped_room"},
    "hanabi": {"LR": 5e-4, "NUM_ENVS": 1024, "NUM_STEPS": 128, "UPDATE_EPOCHS": 4, "NUM_MINIBATCHES": 4,
               "GAMMA": 0.99, "GAE_LAMBDA": 0.95, "CLIP_EPS": 0.2, "ENT_COEF": 0.01, "VF_COEF": 0.5,
               "MAX_GRAD_NORM": 0.5, "ANNEAL_LR": False, "ENV_NAME": "hanabi"},
}


def batchify(x: dict, agent_list, num_actors):
    x = jnp.stack([x[a] for a in agent_list])
    return x.reshape((num_actors, -1))


def unbatchify(x: jnp.ndarray, agent_list, num_envs, num_actors):
    x = x.reshape((num_actors, num_envs, -1))
    return {a: x[i] for i, a in enumerate(agent_list)}


def ppo_update(config, network, train_state, traj_batch, advantages, targets, rng, apply):
    """JaxMARL's epochs of minibatches (the same in both scripts up to how a batch is cut: Overcooked shuffles every
    sample, Hanabi shuffles actors and keeps each actor's steps together)."""

    def _update_epoch(update_state, unused):
        def _update_minbatch(train_state, batch_info):
            traj_batch, advantages, targets = batch_info

            def _loss_fn(params, traj_batch, gae, targets):
                pi, value = apply(params, traj_batch)
                log_prob = pi.log_prob(traj_batch.action)
                value_pred_clipped = traj_batch.value + (value - traj_batch.value).clip(
                    -config["CLIP_EPS"], config["CLIP_EPS"])
                value_losses = jnp.square(value - targets)
                value_losses_clipped = jnp.square(value_pred_clipped - targets)
                value_loss = 0.5 * jnp.maximum(value_losses, value_losses_clipped).mean()
                ratio = jnp.exp(log_prob - traj_batch.log_prob)
                gae = (gae - gae.mean()) / (gae.std() + 1e-8)
                loss_actor1 = ratio * gae
                loss_actor2 = jnp.clip(ratio, 1.0 - config["CLIP_EPS"], 1.0 + config["CLIP_EPS"]) * gae
                loss_actor = -jnp.minimum(loss_actor1, loss_actor2).mean()
                entropy = pi.entropy().mean()
                total_loss = loss_actor + config["VF_COEF"] * value_loss - config["ENT_COEF"] * entropy
                return total_loss, (value_loss, loss_actor, entropy)

            grad_fn = jax.value_and_grad(_loss_fn, has_aux=True)
            total_loss, grads = grad_fn(train_state.params, traj_batch, advantages, targets)
            return train_state.apply_gradients(grads=grads), total_loss

        train_state, traj_batch, advantages, targets, rng = update_state
        rng, _rng = jax.random.split(rng)
        batch = (traj_batch, advantages, targets)
        if config["ENV_NAME"] == "hanabi":
            permutation = jax.random.permutation(_rng, config["NUM_ACTORS"])
            shuffled = jax.tree.map(lambda x: jnp.take(x, permutation, axis=1), batch)
            minibatches = jax.tree.map(
                lambda x: jnp.swapaxes(jnp.reshape(x, [x.shape[0], config["NUM_MINIBATCHES"], -1] + list(x.shape[2:])),
                                       1, 0), shuffled)
        else:
            batch_size = config["NUM_STEPS"] * config["NUM_ACTORS"]
            permutation = jax.random.permutation(_rng, batch_size)
            batch = jax.tree.map(lambda x: x.reshape((batch_size,) + x.shape[2:]), batch)
            shuffled = jax.tree.map(lambda x: jnp.take(x, permutation, axis=0), batch)
            minibatches = jax.tree.map(lambda x: jnp.reshape(x, [config["NUM_MINIBATCHES"], -1] + list(x.shape[1:])),
                                       shuffled)
        train_state, total_loss = jax.lax.scan(_update_minbatch, train_state, minibatches)
        return (train_state, traj_batch, advantages, targets, rng), total_loss

    update_state = (train_state, traj_batch, advantages, targets, rng)
    update_state, _ = jax.lax.scan(_update_epoch, update_state, None, config["UPDATE_EPOCHS"])
    return update_state[0], update_state[-1]


def gae(config, traj_batch, last_val):
    def _get_advantages(gae_and_next_value, transition):
        g, next_value = gae_and_next_value
        done, value, reward = transition.done, transition.value, transition.reward
        delta = reward + config["GAMMA"] * next_value * (1 - done) - value
        g = delta + config["GAMMA"] * config["GAE_LAMBDA"] * (1 - done) * g
        return (g, value), g

    _, advantages = jax.lax.scan(_get_advantages, (jnp.zeros_like(last_val), last_val), traj_batch, reverse=True,
                                 unroll=16)
    return advantages, advantages + traj_batch.value


def make_optimizer(config):
    def linear_schedule(count):
        frac = 1.0 - (count // (config["NUM_MINIBATCHES"] * config["UPDATE_EPOCHS"])) / config["NUM_UPDATES"]
        return config["LR"] * frac

    lr = linear_schedule if config["ANNEAL_LR"] else config["LR"]
    return optax.chain(optax.clip_by_global_norm(config["MAX_GRAD_NORM"]), optax.adam(learning_rate=lr, eps=1e-5))


# ---------------------------------------------------------------- Overcooked: ippo_ff_overcooked.py

class OvercookedActorCritic(nn.Module):
    action_dim: int
    activation: str = "tanh"

    @nn.compact
    def __call__(self, x):
        activation = nn.relu if self.activation == "relu" else nn.tanh
        a = activation(nn.Dense(64, kernel_init=orthogonal(np.sqrt(2)), bias_init=constant(0.0))(x))
        a = activation(nn.Dense(64, kernel_init=orthogonal(np.sqrt(2)), bias_init=constant(0.0))(a))
        a = nn.Dense(self.action_dim, kernel_init=orthogonal(0.01), bias_init=constant(0.0))(a)
        c = activation(nn.Dense(64, kernel_init=orthogonal(np.sqrt(2)), bias_init=constant(0.0))(x))
        c = activation(nn.Dense(64, kernel_init=orthogonal(np.sqrt(2)), bias_init=constant(0.0))(c))
        c = nn.Dense(1, kernel_init=orthogonal(1.0), bias_init=constant(0.0))(c)
        return distrax.Categorical(logits=a), jnp.squeeze(c, axis=-1)


class OvercookedTransition(NamedTuple):
    done: jnp.ndarray
    action: jnp.ndarray
    value: jnp.ndarray
    reward: jnp.ndarray
    log_prob: jnp.ndarray
    obs: jnp.ndarray


def make_train_overcooked(config):
    from jaxmarl.environments.overcooked import Overcooked, overcooked_layouts
    from jaxmarl.wrappers.baselines import LogWrapper

    env = Overcooked(layout=overcooked_layouts[config["LAYOUT"]])
    config["NUM_ACTORS"] = env.num_agents * config["NUM_ENVS"]
    config["NUM_UPDATES"] = config["TOTAL_TIMESTEPS"] // config["NUM_STEPS"] // config["NUM_ENVS"]
    env = LogWrapper(env, replace_info=False)
    rew_shaping_anneal = optax.linear_schedule(init_value=1.0, end_value=0.0,
                                               transition_steps=config["REW_SHAPING_HORIZON"])

    def train(rng):
        network = OvercookedActorCritic(env.action_space(env.agents[0]).n, activation=config["ACTIVATION"])
        rng, _rng = jax.random.split(rng)
        network_params = network.init(_rng, jnp.zeros(env.observation_space("agent_0").shape).flatten())
        train_state = TrainState.create(apply_fn=network.apply, params=network_params, tx=make_optimizer(config))
        rng, _rng = jax.random.split(rng)
        obsv, env_state = jax.vmap(env.reset, in_axes=(0,))(jax.random.split(_rng, config["NUM_ENVS"]))

        def _update_step(runner_state, unused):
            def _env_step(runner_state, unused):
                train_state, env_state, last_obs, update_step, rng = runner_state
                rng, _rng = jax.random.split(rng)
                obs_batch = batchify(last_obs, env.agents, config["NUM_ACTORS"])
                pi, value = network.apply(train_state.params, obs_batch)
                action = pi.sample(seed=_rng)
                log_prob = pi.log_prob(action)
                env_act = unbatchify(action, env.agents, config["NUM_ENVS"], env.num_agents)
                env_act = {k: v.flatten() for k, v in env_act.items()}
                rng, _rng = jax.random.split(rng)
                obsv, env_state, reward, done, info = jax.vmap(env.step, in_axes=(0, 0, 0))(
                    jax.random.split(_rng, config["NUM_ENVS"]), env_state, env_act)
                info["reward"] = reward["agent_0"]
                current_timestep = update_step * config["NUM_STEPS"] * config["NUM_ENVS"]
                reward = jax.tree.map(lambda x, y: x + y * rew_shaping_anneal(current_timestep), reward,
                                      info["shaped_reward"])
                transition = OvercookedTransition(batchify(done, env.agents, config["NUM_ACTORS"]).squeeze(), action,
                                                  value, batchify(reward, env.agents, config["NUM_ACTORS"]).squeeze(),
                                                  log_prob, obs_batch)
                return (train_state, env_state, obsv, update_step, rng), (transition, info)

            runner_state, (traj_batch, info) = jax.lax.scan(_env_step, runner_state, None, config["NUM_STEPS"])
            train_state, env_state, last_obs, update_step, rng = runner_state
            _, last_val = network.apply(train_state.params, batchify(last_obs, env.agents, config["NUM_ACTORS"]))
            advantages, targets = gae(config, traj_batch, last_val)
            train_state, rng = ppo_update(config, network, train_state, traj_batch, advantages, targets, rng,
                                          lambda p, tb: network.apply(p, tb.obs))
            ended = info["returned_episode"][..., 0]  # [T, B]: the same for both agents
            metric = {"episodes": ended.sum(),
                      "return_sum": jnp.sum(jnp.where(ended, info["returned_episode_returns"][..., 0], 0.0))}
            update_step = update_step + 1
            return (train_state, env_state, last_obs, update_step, rng), metric

        rng, _rng = jax.random.split(rng)
        _, metric = jax.lax.scan(_update_step, (train_state, env_state, obsv, 0, _rng), None, config["NUM_UPDATES"])
        return metric

    return train


# ---------------------------------------------------------------- Hanabi: ippo_ff_hanabi.py

class HanabiActorCritic(nn.Module):
    action_dim: int

    @nn.compact
    def __call__(self, x):
        obs, dones, avail_actions = x
        embedding = nn.relu(nn.Dense(512, kernel_init=orthogonal(np.sqrt(2)), bias_init=constant(0.0))(obs))
        actor_mean = nn.relu(nn.Dense(512, kernel_init=orthogonal(2), bias_init=constant(0.0))(embedding))
        actor_mean = nn.Dense(self.action_dim, kernel_init=orthogonal(0.01), bias_init=constant(0.0))(actor_mean)
        action_logits = actor_mean - ((1 - avail_actions) * 1e10)
        critic = nn.relu(nn.Dense(512, kernel_init=orthogonal(2), bias_init=constant(0.0))(embedding))
        critic = nn.Dense(1, kernel_init=orthogonal(1.0), bias_init=constant(0.0))(critic)
        return distrax.Categorical(logits=action_logits), jnp.squeeze(critic, axis=-1)


class HanabiTransition(NamedTuple):
    done: jnp.ndarray
    action: jnp.ndarray
    value: jnp.ndarray
    reward: jnp.ndarray
    log_prob: jnp.ndarray
    obs: jnp.ndarray
    info: jnp.ndarray
    avail_actions: jnp.ndarray


def make_train_hanabi(config):
    from jaxmarl.environments.hanabi import Hanabi
    from jaxmarl.wrappers.baselines import LogWrapper

    env = Hanabi()
    config["NUM_ACTORS"] = env.num_agents * config["NUM_ENVS"]
    config["NUM_UPDATES"] = config["TOTAL_TIMESTEPS"] // config["NUM_STEPS"] // config["NUM_ENVS"]
    env = LogWrapper(env)

    def train(rng):
        network = HanabiActorCritic(env.action_space(env.agents[0]).n)
        rng, _rng = jax.random.split(rng)
        n_act = env.action_space(env.agents[0]).n
        init_x = (jnp.zeros((1, config["NUM_ENVS"], env.observation_space(env.agents[0]).shape)),
                  jnp.zeros((1, config["NUM_ENVS"])), jnp.zeros((1, config["NUM_ENVS"], n_act)))
        network_params = network.init(_rng, init_x)
        train_state = TrainState.create(apply_fn=network.apply, params=network_params, tx=make_optimizer(config))
        rng, _rng = jax.random.split(rng)
        obsv, env_state = jax.vmap(env.reset, in_axes=(0,))(jax.random.split(_rng, config["NUM_ENVS"]))

        def _update_step(runner_state, unused):
            def _env_step(runner_state, unused):
                train_state, env_state, last_obs, last_done, rng = runner_state
                rng, _rng = jax.random.split(rng)
                avail_actions = jax.vmap(env.get_legal_moves)(env_state.env_state)
                avail_actions = jax.lax.stop_gradient(batchify(avail_actions, env.agents, config["NUM_ACTORS"]))
                obs_batch = batchify(last_obs, env.agents, config["NUM_ACTORS"])
                ac_in = (obs_batch[np.newaxis, :], last_done[np.newaxis, :], avail_actions[np.newaxis, :])
                pi, value = network.apply(train_state.params, ac_in)
                action = pi.sample(seed=_rng)
                log_prob = pi.log_prob(action)
                env_act = unbatchify(action, env.agents, config["NUM_ENVS"], env.num_agents)
                env_act = jax.tree.map(lambda x: x.squeeze(), env_act)
                rng, _rng = jax.random.split(rng)
                obsv, env_state, reward, done, info = jax.vmap(env.step, in_axes=(0, 0, 0))(
                    jax.random.split(_rng, config["NUM_ENVS"]), env_state, env_act)
                info = jax.tree.map(lambda x: x.reshape((config["NUM_ACTORS"])), info)
                done_batch = batchify(done, env.agents, config["NUM_ACTORS"]).squeeze()
                transition = HanabiTransition(done_batch, action.squeeze(), value.squeeze(),
                                              batchify(reward, env.agents, config["NUM_ACTORS"]).squeeze(),
                                              log_prob.squeeze(), obs_batch, info, avail_actions)
                return (train_state, env_state, obsv, done_batch, rng), transition

            runner_state, traj_batch = jax.lax.scan(_env_step, runner_state, None, config["NUM_STEPS"])
            train_state, env_state, last_obs, last_done, rng = runner_state
            last_obs_batch = batchify(last_obs, env.agents, config["NUM_ACTORS"])
            ac_in = (last_obs_batch[np.newaxis, :], last_done[np.newaxis, :], jnp.ones((config["NUM_ACTORS"], n_act)))
            _, last_val = network.apply(train_state.params, ac_in)
            advantages, targets = gae(config, traj_batch, last_val.squeeze())
            train_state, rng = ppo_update(config, network, train_state, traj_batch, advantages.squeeze(),
                                          targets.squeeze(), rng,
                                          lambda p, tb: network.apply(p, (tb.obs, tb.done, tb.avail_actions)))
            info = traj_batch.info
            ended = info["returned_episode"].reshape(config["NUM_STEPS"], env.num_agents, -1)[:, 0]  # agent 0's
            rets = info["returned_episode_returns"].reshape(config["NUM_STEPS"], env.num_agents, -1)[:, 0]
            metric = {"episodes": ended.sum(), "return_sum": jnp.sum(jnp.where(ended, rets, 0.0)),
                      "jaxmarl_returns": info["returned_episode_returns"][-1, :].mean()}  # what JaxMARL logs
            return (train_state, env_state, last_obs, last_done, rng), metric

        rng, _rng = jax.random.split(rng)
        runner_state = (train_state, env_state, obsv, jnp.zeros((config["NUM_ACTORS"]), dtype=bool), _rng)
        _, metric = jax.lax.scan(_update_step, runner_state, None, config["NUM_UPDATES"])
        return metric

    return train


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("env", choices=sorted(CONFIGS))
    p.add_argument("--steps", type=float, required=True, help="TOTAL_TIMESTEPS: env steps per seed")
    p.add_argument("--seeds", default="1", help="comma-separated; packed in one program (jax.vmap)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override one CONFIGS entry")
    p.add_argument("--rows", type=int, default=10, help="windows printed over the run")
    p.add_argument("--json", help="write the per-update curves here")
    args = p.parse_args(argv)
    config = dict(CONFIGS[args.env])
    for kv in args.set:
        k, _, v = kv.partition("=")
        if k not in config:
            p.error(f"--set {k}: not a setting of {args.env}; settings: {', '.join(sorted(config))}")
        config[k] = type(config[k])(v) if not isinstance(config[k], bool) else v.lower() in ("1", "true")
    config["TOTAL_TIMESTEPS"] = int(args.steps)
    seeds = [int(s) for s in args.seeds.split(",")]
    print("machine:", describe(), flush=True)
    print("config:", json.dumps(config), "seeds:", seeds, flush=True)
    make = make_train_overcooked if args.env == "overcooked" else make_train_hanabi
    train = jax.jit(jax.vmap(make(config)))
    keys = jnp.stack([jax.random.PRNGKey(s) for s in seeds])
    t0 = time.time()
    compiled = train.lower(keys).compile()
    t1 = time.time()
    metric = jax.device_get(compiled(keys))
    t2 = time.time()
    steps_per_update = config["NUM_STEPS"] * config["NUM_ENVS"]
    n_up = int(config["NUM_UPDATES"])
    print(f"{args.env}: {n_up} updates of {steps_per_update} env steps per seed, {n_up * steps_per_update:,} env steps "
          f"per seed; compile {t1 - t0:.1f} s, run {t2 - t1:.1f} s "
          f"({n_up * steps_per_update * len(seeds) / (t2 - t1):,.0f} env steps/s, all seeds)")
    eps, tot = np.asarray(metric["episodes"], float), np.asarray(metric["return_sum"], float)  # [S, U]
    edges = np.linspace(0, n_up, args.rows + 1).astype(int)
    print("env steps | " + " | ".join(f"seed {s}" for s in seeds) + " | (mean return of the episodes ended in the window)")
    for lo, hi in zip(edges[:-1], edges[1:], strict=True):
        if hi <= lo:
            continue
        cells = [f"{tot[i, lo:hi].sum() / max(eps[i, lo:hi].sum(), 1):.2f} ({int(eps[i, lo:hi].sum())} ep)"
                 for i in range(len(seeds))]
        print(f"{hi * steps_per_update:,} | " + " | ".join(cells))
    last = max(1, n_up // 20)  # the last 5% of updates
    finals = [tot[i, -last:].sum() / max(eps[i, -last:].sum(), 1) for i in range(len(seeds))]
    print(f"final (episodes ended in the last {last} updates): " + ", ".join(f"seed {s}: {f:.2f}" for s, f in
                                                                             zip(seeds, finals, strict=True))
          + f"; mean {np.mean(finals):.2f}")
    if "jaxmarl_returns" in metric:
        print("JaxMARL's logged 'returns' at the last update: "
              + ", ".join(f"{float(np.asarray(metric['jaxmarl_returns'])[i, -1]):.2f}" for i in range(len(seeds))))
    print("load average after:", " ".join(f"{x:.2f}" for x in os.getloadavg()), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"env": args.env, "config": config, "seeds": seeds, "steps_per_update": steps_per_update,
                       "episodes": eps.tolist(), "return_sum": tot.tolist(), "compile_s": t1 - t0,
                       "run_s": t2 - t1}, f)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
