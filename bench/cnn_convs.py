"""The Nature CNN's layers on this machine: ``lax.conv`` against ``algos.networks.strided_conv_as_matmul``.

    python bench/cnn_convs.py [--frames 256] [--repeats 7]

For each layer of the Nature CNN (84x84x4 frames, a PPO minibatch of ``--frames``) prints the best of
``--repeats`` jitted calls in ms: forward, and the gradient (the first layer's weights only, as in training: its
input is the observation; the others' weights and inputs), for both forms, and the dense layer for scale.
``algos.networks.Conv`` picks the matmul form for strided layers where the program is compiled for the CPU.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from algos.networks import strided_conv_as_matmul, valid_conv  # noqa: E402
from bench.machine import describe  # noqa: E402

LAYERS = (("conv 8x8 /4, 4 -> 32", (84, 84, 4), 8, 4, 32), ("conv 4x4 /2, 32 -> 64", (20, 20, 32), 4, 2, 64),
          ("conv 3x3 /1, 64 -> 64", (9, 9, 64), 3, 1, 64))


def best_ms(f, *args, repeats: int) -> float:
    f = jax.jit(f)
    jax.block_until_ready(f(*args))
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(f(*args))
        times.append(time.perf_counter() - t0)
    return min(times) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    print(describe())
    print(f"{args.frames} frames; ms, best of {args.repeats}")
    print(f"{'layer':<24} {'lax.conv fwd':>12} {'grad':>8} {'matmul fwd':>11} {'grad':>8}")
    rng = np.random.default_rng(0)
    for i, (name, shape, k, s, out) in enumerate(LAYERS):
        x = jnp.asarray(rng.random((args.frames, *shape), dtype=np.float32))
        w = jnp.asarray(rng.standard_normal((k, k, shape[-1], out), dtype=np.float32) * 0.05)
        argnums = (0,) if i == 0 else (0, 1)
        row = []
        for conv in (valid_conv, strided_conv_as_matmul):
            if conv is strided_conv_as_matmul and s == 1:
                row += [float("nan")] * 2  # a stride-1 layer stays lax.conv
                continue
            row.append(best_ms(lambda x, w, c=conv: c(x, w, s), x, w, repeats=args.repeats))
            row.append(best_ms(jax.grad(lambda w, x, c=conv: jnp.sum(c(x, w, s) ** 2), argnums), w, x,
                               repeats=args.repeats))
        print(f"{name:<24} {row[0]:>12.1f} {row[1]:>8.1f} {row[2]:>11.1f} {row[3]:>8.1f}")
    x = jnp.asarray(rng.random((args.frames, 3136), dtype=np.float32))
    w = jnp.asarray(rng.standard_normal((3136, 512), dtype=np.float32) * 0.02)
    fwd = best_ms(lambda x, w: x @ w, x, w, repeats=args.repeats)
    grad = best_ms(jax.grad(lambda w, x: jnp.sum((x @ w) ** 2), (0, 1)), w, x, repeats=args.repeats)
    print(f"{'dense 3136 -> 512':<24} {fwd:>12.1f} {grad:>8.1f}")


if __name__ == "__main__":
    main()
