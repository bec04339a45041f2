"""PSRO on OpenSpiel's Kuhn poker: each iteration PPO trains a best response to the meta-strategy (the Nash
equilibrium of the population's exact payoff matrix), and the meta-strategy's exploitability is computed exactly.

    python -m launch.local configs/kuhn_psro.py
    python -m launch.local configs/kuhn_psro.py psro.solver=prd          # or uniform, fictitious_play

The learner sees Kuhn's information-state tensor (``env.options.info_state``: its card and the betting so far), its
seat and the legal moves; the reward is its winnings at the end of the hand. ``RUN_DIR/psro/psro.jsonl`` has a
line per iteration (the payoff matrix, the meta-strategy, the exploitability of the mixture: OpenSpiel's
``exploitability``, NashConv / 2) and ``psro/exploitability.png`` the curve; ``srljax/loops/psro.py`` says how.
Uniform random play is 0.458 exploitable; bench/RESULTS.md ("PSRO") has the figures.
"""

from srljax.config import EnvConfig, Experiment, LogConfig, PPOConfig, PSROConfig, TrainerConfig


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
