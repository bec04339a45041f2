"""srljax: distributed RL on JAX."""
