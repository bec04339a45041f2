"""PSRO on OpenSpiel's Kuhn poker: each iteration PPO trains a best response to the meta-strategy (the Nash
equilibrium of the population's exact payoff matrix), and the meta-strategy's exploitability is computed exactly.

    python -m launch.local configs/kuhn_psro.py
    python -m launch.local configs/kuhn_psro.py psro.solver=prd          # or uniform, fictitious_play
    python -m launch.local configs/kuhn_psro.py layout.mode=distributed layout.num_actors=2   # as a worker graph
    python -m launch.slurm configs/kuhn_psro.py layout.mode=distributed layout.num_actors=2   # the graph on Slurm

The learner sees Kuhn's information-state tensor (``env.options.info_state``: its card and the betting so far), its
seat and the legal moves; the reward is its winnings at the end of the hand. ``RUN_DIR/psro/psro.jsonl`` has a
line per iteration (the payoff matrix, the meta-strategy, the exploitability of the mixture: OpenSpiel's
``exploitability``, NashConv / 2) and ``psro/exploitability.png`` the curve; ``srljax/loops/psro.py`` says how.
Uniform random play is 0.458 exploitable. The entropy bonus is 0.1, ten times the usual: each best response joins
the population as its greedy policy (``psro.greedy``), so the bonus only keeps PPO exploring while it trains; at
0.01 it settled on betting a king where checking and calling (a trap) paid more, and PSRO stalled at 0.060.
bench/RESULTS.md ("PSRO") has the figures.
"""

from srljax.config import EnvConfig, Experiment, LogConfig, PPOConfig, Promise, PSROConfig, TrainerConfig

PROMISE = Promise(
    "neg_exploitability", median=-0.05, worst=-0.05, seeds=(1,), wall_s=135, quick=False,
    source="bench/RESULTS.md (PSRO): seed 1, exploitability 0.457 -> 0.0278 after 16 best responses of 20k env steps "
    "(134 s at load ~18 on the 2 cores)",
)


def experiment() -> Experiment:
    return Experiment(
        total_env_steps=320_000,
        env=EnvConfig(factory="envs.openspiel:make_openspiel", options={"game": "kuhn_poker", "info_state": True},
                      num_envs=16),
        algo=PPOConfig(num_steps=32, gamma=1.0, gae_lambda=1.0, clip_coef=0.2, ent_coef=0.1, vf_coef=0.5,
                       network="mlp", hidden_sizes=(64, 64), activation="tanh"),
        trainer=TrainerConfig(lr=1e-3, anneal_lr=True, num_minibatches=4, update_epochs=4, max_grad_norm=0.5),
        psro=PSROConfig(enabled=True, iterations=16, solver="nash"),
        log=LogConfig(log_every=10),
    )
