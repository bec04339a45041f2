"""A large layout for the golden test of ``python -m launch.slurm --dry-run`` (tests/test_slurm_render.py).

64 actors x 32 CPUs on CPU nodes, 4 policy workers x 1 GPU and one 8-GPU trainer node on GPU
nodes; fixed paths so the rendered script is the same on every machine:

    python -m launch.slurm tests/golden/slurm_large.py -f golden --dry-run > tests/golden/slurm_large.sbatch
"""

from srljax.config import (
    EnvConfig,
    Experiment,
    LayoutConfig,
    LogConfig,
    PPOConfig,
    SlurmConfig,
    SlurmGroup,
    TrainerConfig,
)


def experiment() -> Experiment:
    return Experiment(
        name="atari_large",
        total_env_steps=10_000_000_000,
        env=EnvConfig(id="Pong-v5", num_envs=128, batch_size=64, num_threads=32),
        algo=PPOConfig(num_steps=128),
        trainer=TrainerConfig(devices=8, num_minibatches=8),
        layout=LayoutConfig(mode="distributed", num_actors=64, num_policy_workers=4, inference="remote",
                            ring_size=2, policy_device="gpu"),
        slurm=SlurmConfig(
            account="rl-lab",
            qos="normal",
            setup=("module load cuda/12.4", "source /shared/srljax/.venv/bin/activate"),
            python="python",
            workdir="/shared/srljax",
            sbatch=("--mail-type=END,FAIL",),
            node_cpus=64,
            node_gpus=8,
            node_mem_gb=512,
            trainer=SlurmGroup(cpus_per_task=32, gpus_per_task=8, mem_gb_per_task=256, nodes=1, partition="gpu",
                               constraint="h100"),
            policy=SlurmGroup(cpus_per_task=4, gpus_per_task=1, mem_gb_per_task=32, partition="gpu"),
            actor=SlurmGroup(cpus_per_task=32, mem_gb_per_task=16, partition="cpu", node_gpus=0),
        ),
        log=LogConfig(run_root="/shared/runs"),
    )
