"""PSRO on OpenSpiel's Leduc poker: each iteration PPO trains a best response to the meta-strategy (the Nash
equilibrium of the population's exact payoff matrix), and the meta-strategy's exploitability is computed exactly.

    python -m launch.local configs/leduc_psro.py
    python -m launch.local configs/leduc_psro.py psro.solver=prd          # or uniform, fictitious_play
    python -m launch.local configs/leduc_psro_distributed.py             # as a worker graph

Leduc: six cards (two suits of J, Q, K), a private card each, a public card after the first betting round, two
rounds of up to two raises; 936 information states. The learner sees the information-state tensor
(``env.options.info_state``: its card, the public card and every action so far), its seat and the legal moves.
``RUN_DIR/psro/psro.jsonl`` has a line per iteration (payoff matrix, meta-strategy, exploitability: OpenSpiel's
``exploitability`` of the mixture, NashConv / 2) and ``psro/exploitability.png`` the curve. Uniform random play is
2.374 exploitable; bench/RESULTS.md ("PSRO") has the curve: 0.79 after 19 best responses of 50,000 env steps.
"""

from srljax.config import EnvConfig, Experiment, LogConfig, PPOConfig, Promise, PSROConfig, TrainerConfig

PROMISE = Promise(
    "neg_exploitability", median=-0.8, worst=-0.8, seeds=(1,), wall_s=1940, quick=False,
    source="bench/RESULTS.md (PSRO): seed 1, exploitability 2.382 -> 0.793 after 19 best responses of 50k env steps "
    "(1937 s at load 20-40 on the 2 cores); one seed only",
)


def experiment() -> Experiment:
    return Experiment(
        total_env_steps=950_000,
        env=EnvConfig(factory="envs.openspiel:make_openspiel", options={"game": "leduc_poker", "info_state": True},
                      num_envs=32),
        algo=PPOConfig(num_steps=32, gamma=1.0, gae_lambda=0.95, clip_coef=0.2, ent_coef=0.01, vf_coef=0.5,
                       network="mlp", hidden_sizes=(128, 128), activation="tanh"),
        trainer=TrainerConfig(lr=1e-3, anneal_lr=True, num_minibatches=4, update_epochs=4, max_grad_norm=0.5),
        psro=PSROConfig(enabled=True, iterations=19, solver="nash"),
        log=LogConfig(log_every=10),
    )
