"""algos.networks: the Nature CNN's convolutions as matrix products on the CPU (``Conv``)."""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from algos.networks import Conv, NatureCNN, strided_conv_as_matmul, valid_conv


@pytest.mark.parametrize("shape, kernel, stride", [
    ((3, 84, 84, 4), 8, 4),    # Atari's first layer
    ((3, 20, 20, 32), 4, 2),   # its second
    ((2, 72, 96, 16), 8, 4),   # Football's frames
    ((2, 87, 83, 3), 8, 4),    # rows and columns a VALID strided conv never reads
    ((2, 11, 9, 5), 6, 3),
])
def test_the_strided_conv_as_a_matmul_is_the_same_function_forward_and_backward(shape, kernel, stride):
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.standard_normal(shape, dtype=np.float32))
    w = jnp.asarray(rng.standard_normal((kernel, kernel, shape[-1], 7), dtype=np.float32))
    want = valid_conv(x, w, stride)
    got = strided_conv_as_matmul(x, w, stride)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)
    probe = jnp.asarray(rng.standard_normal(want.shape, dtype=np.float32))  # a random cotangent

    def loss(f):
        return lambda x, w: jnp.sum(f(x, w, stride) * probe)

    for g_got, g_want in zip(jax.grad(loss(strided_conv_as_matmul), (0, 1))(x, w), jax.grad(loss(valid_conv), (0, 1))(x, w)):
        np.testing.assert_allclose(g_got, g_want, rtol=1e-4, atol=1e-3)


def test_conv_keeps_nn_conv_parameters_and_initialisation():
    # checkpoints written before Conv replaced nn.Conv load unchanged: same names, shapes and initial values
    x = jnp.ones((1, 84, 84, 4))
    ours = Conv(32, 8, 4).init(jax.random.PRNGKey(3), x)
    flax_conv = nn.Conv(32, (8, 8), (4, 4), padding="VALID", kernel_init=nn.initializers.orthogonal(np.sqrt(2.0)),
                        bias_init=nn.initializers.zeros).init(jax.random.PRNGKey(3), x)
    assert jax.tree.structure(ours) == jax.tree.structure(flax_conv)
    for a, b in zip(jax.tree.leaves(ours), jax.tree.leaves(flax_conv)):
        np.testing.assert_array_equal(a, b)
    out = Conv(32, 8, 4).apply(flax_conv, x * 0.5)
    np.testing.assert_allclose(out, nn.Conv(32, (8, 8), (4, 4), padding="VALID").apply(flax_conv, x * 0.5),
                               rtol=1e-5, atol=1e-4)


def test_the_nature_cnn_under_jit_matches_lax_conv_layers():
    obs = jnp.asarray(np.random.default_rng(1).integers(0, 255, (5, 4, 84, 84)), jnp.uint8)
    net = NatureCNN()
    params = net.init(jax.random.PRNGKey(0), obs)["params"]
    x = jnp.transpose(obs.astype(jnp.float32) / 255.0, (0, 2, 3, 1))
    for i, stride in enumerate((4, 2, 1)):
        x = nn.relu(valid_conv(x, params[f"Conv_{i}"]["kernel"], stride) + params[f"Conv_{i}"]["bias"])
    want = nn.relu(x.reshape(5, -1) @ params["Dense_0"]["kernel"] + params["Dense_0"]["bias"])
    got = jax.jit(net.apply)({"params": params}, obs)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    if jax.default_backend() == "cpu":  # the two strided layers compiled as matmuls, the 3x3 one as a convolution
        hlo = jax.jit(net.apply).lower({"params": params}, obs).compile().as_text()
        assert hlo.count(" convolution(") == 1, hlo
