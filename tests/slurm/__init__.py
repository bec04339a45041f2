"""The Slurm suite (`-m slurm`, the throw-away cluster: tests/slurm/cluster.sh)."""
