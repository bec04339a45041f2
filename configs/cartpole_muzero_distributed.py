"""CartPole-v1 (envpool) by MuZero as a worker graph: 2 actors searching every move, 1 buffer worker keeping the replay
and reanalysing half of each batch's windows with the newest params, 1 trainer.

    python -m launch.local configs/cartpole_muzero_distributed.py                       # one process per worker
    python -m launch.local configs/cartpole_muzero_distributed.py algo.reanalyse_ratio=0   # no reanalyse
    python -m launch.local configs/cartpole_muzero_distributed.py layout.inference=remote  # the search batched at a policy worker
    python -m launch.status runs/cartpole_muzero_distributed/<trial>   # the buffer's reanalyse cost and target lag

The MuZero of ``configs/minatar_muzero.py`` (``algos/muzero.py``: representation, dynamics and prediction MLPs, value
and reward on a categorical support, Gumbel MuZero search by mctx), with its acting and replay spread over workers
(``srljax/system/staging/search_buffer.py``): each actor steps 8 envpool envs and searches every move with 8
simulations (inline; ``layout.inference=remote``: the policy worker runs the same search for every actor's rows),
and pushes segments of 32 rows with the searches' values and move distributions. The buffer worker keeps the last
50k rows (an actor's segments linked, so windows run on across segment ends); for every 256 env steps inserted it
sends the trainer one batch of 8 x 128 windows (5 moves unrolled, 10-step value targets), of which
``algo.reanalyse_ratio`` (0.5) were searched again with the newest params, and the trainer runs one AdamW pass over
them in 8 minibatches.

What it learns (bench/RESULTS.md, issue 40, session 25): with 1 minibatch per 256 env steps (0.5 windows per env
step, the first version of this config) neither this graph nor the single-process path on gymnax CartPole at the same
settings learns to balance in 16k env steps (the search's policy sits on one move, return ~9, for ~40 updates); with
8 (4 windows per env step) both do: 37 at 16k env steps here (seed 1); the single-process path 80 at 32k.
"""

from srljax.config import EnvConfig, Experiment, LayoutConfig, LogConfig, MuZeroConfig, Promise, TrainerConfig

PROMISE = Promise(
    "best_return", median=15, worst=15, wall_s=120, seeds=(1,), quick=False, overrides=("total_env_steps=16384",),
    source="bench/RESULTS.md (issue 40, session 25: MuZero in the worker graph, what kept it from learning): one seed, "
    "launch.local at 16,384 env steps, log.log_every=4, load 8-13: best line 37.05 (the last), 92 s",
)


def experiment() -> Experiment:
    return Experiment(
        name="cartpole_muzero_distributed",
        total_env_steps=100_000,
        env=EnvConfig(id="CartPole-v1", num_envs=8),
        algo=MuZeroConfig(num_steps=32, gamma=0.99, num_simulations=8, unroll_steps=5, td_steps=10, support_size=10,
                          batch_size=128, replay_capacity=50_000, state_size=32, hidden_sizes=(64, 64),
                          reanalyse_ratio=0.5),
        trainer=TrainerConfig(lr=1e-3, anneal_lr=False, num_minibatches=8, update_epochs=1, max_grad_norm=5.0,
                              max_policy_lag=1_000),
        layout=LayoutConfig(mode="distributed", num_actors=2, num_buffer_workers=1, inference="inline"),
        log=LogConfig(log_every=10),
    )
