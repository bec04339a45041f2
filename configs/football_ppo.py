"""Google Research Football through envpool with PPO: ``academy_empty_goal_close`` by default.

    python -m launch.local configs/football_ppo.py
    python -m launch.local configs/football_ppo.py env.id=gfootball/academy_run_to_score_with_keeper-v1 \\
        env.options.reward=checkpoints total_env_steps=2000000
    python -m launch.local configs/football_ppo.py env.id=gfootball/academy_3_vs_1_with_keeper-v1 \\
        env.options.reward=checkpoints total_env_steps=2000000

envpool 1.2.5 ships the academy scenarios (``gfootball/<scenario>-v1``), one controlled player, 19 actions, the
scoring reward (+1 a goal for, -1 against), 400 steps at most; ``env.options.reward=checkpoints`` adds the Football
paper's checkpoint reward (``envs/football.py``), which the two harder scenarios need: with it both leave random
play within 450k steps (bench/RESULTS.md), without it run-to-score had not at 500k. Observations are the super-minimap (SMM): four
72x96 planes, channels last, as envpool gives them; the Nature CNN reads them channels-last
(``env.image_channels`` is detected from the shape). A uniformly random policy scores 0.185 on
``academy_empty_goal_close`` (200 episodes); this config's mean score first reaches 0.9 at ~51k env steps and
stays 0.8-1.0 after (seed 1, bench/RESULTS.md). Settings: CleanRL's Atari PPO with gamma 0.993
(the Football paper's PPO baseline, Kurach et al. 2020) and the next batch collected while the update runs
(``trainer.overlap_collection``, as ``configs/atari_ppo.py``). ``configs/football_ppo_distributed.py`` runs
it as a worker graph.
"""

from srljax.config import EnvConfig, Experiment, PPOConfig, Promise, TrainerConfig

PROMISE = Promise(
    "return", median=0.8, worst=0.6, wall_s=1400, quick=False,
    source="bench/RESULTS.md (Football): seed 1 final 1.0 at 200k (random play 0.185), 1,360 s; seeds 2-3 not "
    "run",
)


def experiment() -> Experiment:
    return Experiment(
        total_env_steps=200_000,
        env=EnvConfig(id="gfootball/academy_empty_goal_close-v1", num_envs=8),
        algo=PPOConfig(num_steps=128, gamma=0.993, gae_lambda=0.95, clip_coef=0.1, ent_coef=0.01, vf_coef=0.5),
        trainer=TrainerConfig(
            lr=2.5e-4, anneal_lr=True, num_minibatches=4, update_epochs=4, max_grad_norm=0.5, overlap_collection=True
        ),
    )
