"""Actor-critic networks (Flax linen), initialised as CleanRL does.

Shape letters: B batch (any leading dims), ``*O`` observation shape, A actions / action dims.

``ActorCritic(obs [B, *O]) -> (policy params, value [B])`` where policy params are
``logits [B, A]`` (discrete; multi-discrete: the K sub-actions' logits side by side, ``A = sum(nvec)``) or
``(mean [B, A], log_std [B, A])`` (continuous), matching ``algos.distributions``. ``RecurrentActorCritic(carry, obs [T, B, *O], first [T, B])`` adds an LSTM
between torso and heads (used through ``algos.recurrent.Recurrent``). ``QNetwork(obs [B, *O]) -> Q [B, A]``
puts a linear (or dueling) head on the same torsos (DQN).
"""

from __future__ import annotations

import math
from typing import Any, Literal

import flax.linen as nn
import jax
import jax.numpy as jnp

from srljax.objects import load_object

Array = jax.Array
SQRT2 = math.sqrt(2.0)
_ACTIVATIONS = {"tanh": nn.tanh, "relu": nn.relu}


def _dense(features: int, scale: float, name: str | None = None) -> nn.Dense:
    return nn.Dense(features, kernel_init=nn.initializers.orthogonal(scale), bias_init=nn.initializers.zeros, name=name)


def valid_conv(x: Array, kernel: Array, stride: int) -> Array:
    """``lax.conv``: a VALID convolution ``x [N, H, W, C] * kernel [K, K, C, O]`` (NHWC, HWIO) with a square stride."""
    return jax.lax.conv_general_dilated(x, kernel, (stride, stride), "VALID", dimension_numbers=("NHWC", "HWIO", "NHWC"))


def strided_conv_as_matmul(x: Array, kernel: Array, stride: int) -> Array:
    """A VALID convolution ``x [N, H, W, C] * kernel [K, K, C, O]`` with stride ``stride`` (K a multiple of it),
    computed as one matrix product: space-to-depth by the stride turns it into a stride-1 conv with a
    ``K/s x K/s`` kernel over ``s*s*C`` channels; each input pixel is multiplied by all ``(K/s)^2`` kernel taps at
    once and the taps' products are added at their shifted positions. The same function as ``lax.conv`` (up to
    rounding); on XLA:CPU the Nature CNN's strided convs ran 2-3x faster so, forward and backward
    (bench/RESULTS.md, "The Nature CNN on the CPU")."""
    k, _, c, o = kernel.shape
    n, h, w, _ = x.shape
    s, kb = stride, k // stride
    ho, wo = (h - k) // s + 1, (w - k) // s + 1
    x = x[:, : (ho - 1) * s + k, : (wo - 1) * s + k]  # the rows and columns a VALID strided conv reads
    hb, wb = x.shape[1] // s, x.shape[2] // s
    x = x.reshape(n, hb, s, wb, s, c).transpose(0, 1, 3, 2, 4, 5).reshape(n * hb * wb, s * s * c)
    taps = kernel.reshape(kb, s, kb, s, c, o).transpose(1, 3, 4, 0, 2, 5).reshape(s * s * c, kb * kb * o)
    y = (x @ taps).reshape(n, hb, wb, kb * kb, o)
    out = y[:, :ho, :wo, 0]
    for t in range(1, kb * kb):
        i, j = divmod(t, kb)
        out = out + y[:, i: i + ho, j: j + wo, t]
    return out


class Conv(nn.Module):
    """``nn.Conv`` with VALID padding and a square kernel, its parameters and initialisation unchanged
    (``kernel [K, K, C, O]``, ``bias [O]``, orthogonal sqrt(2)); a strided conv whose kernel the stride divides
    runs as ``strided_conv_as_matmul`` where the program is compiled for the CPU, as ``lax.conv`` elsewhere."""

    features: int
    kernel: int
    stride: int

    @nn.compact
    def __call__(self, x: Array) -> Array:
        kernel = self.param("kernel", nn.initializers.orthogonal(SQRT2),
                            (self.kernel, self.kernel, x.shape[-1], self.features), jnp.float32)
        bias = self.param("bias", nn.initializers.zeros, (self.features,), jnp.float32)
        if self.stride > 1 and self.kernel % self.stride == 0:
            y = jax.lax.platform_dependent(x, kernel, cpu=lambda x, k: strided_conv_as_matmul(x, k, self.stride),
                                           default=lambda x, k: valid_conv(x, k, self.stride))
        else:
            y = valid_conv(x, kernel, self.stride)
        return y + bias


class NatureCNN(nn.Module):
    """Mnih et al. 2015 torso: obs [B, C, H, W] (envpool's Atari frame stack) or, with ``channels_last``,
    [B, H, W, C] (envpool's Football) -> [B, 512]."""

    pixel_scale: float = 1.0 / 255.0
    """multiplies the input; 1.0 when the observations arrive already normalised."""
    channels_last: bool = False

    @nn.compact
    def __call__(self, obs: Array) -> Array:
        lead = obs.shape[:-3]
        x = obs.reshape((-1, *obs.shape[-3:])).astype(jnp.float32) * self.pixel_scale
        if not self.channels_last:  # flax convs want NHWC
            x = jnp.transpose(x, (0, 2, 3, 1))
        x = nn.relu(Conv(32, 8, 4, name="Conv_0")(x))  # nn.Conv's names: checkpoints stay loadable
        x = nn.relu(Conv(64, 4, 2, name="Conv_1")(x))
        x = nn.relu(Conv(64, 3, 1, name="Conv_2")(x))
        x = x.reshape((x.shape[0], -1))
        x = nn.relu(_dense(512, SQRT2)(x))
        return x.reshape((*lead, 512))


class MLP(nn.Module):
    """x [B, D] -> [B, hidden_sizes[-1]]; orthogonal sqrt(2) init, zero bias."""

    hidden_sizes: tuple[int, ...] = (64, 64)
    activation: Literal["tanh", "relu"] = "tanh"

    @nn.compact
    def __call__(self, x: Array) -> Array:
        act = _ACTIVATIONS[self.activation]
        for width in self.hidden_sizes:
            x = act(_dense(width, SQRT2)(x))
        return x


def torso_class(name: str) -> type[nn.Module]:
    """A user's torso: ``"package.module:Class"``, a Flax module called on observations ``[B, *O]`` (float32; raw
    frames stay 0-255, normalised observations as normalised) and returning features ``[B, F]``."""
    cls = load_object(name, "algo.network")
    if not (isinstance(cls, type) and issubclass(cls, nn.Module)):
        raise ValueError(f"algo.network={name!r} is {cls!r}, not a flax.linen.Module class")
    return cls


def apply_torso(torso: str, options: tuple[tuple[str, Any], ...], obs: Array, obs_ndim: int, *, name: str,
                pixel_scale: float = 1.0 / 255.0, channels_last: bool = False,
                hidden_sizes: tuple[int, ...] = (64, 64), activation: str = "tanh") -> Array:
    """One torso (inside a compact module) on ``obs [*lead, *O]`` -> features ``[*lead, F]``: the Nature CNN
    (``cnn``), an MLP on the flattened observation (``mlp``), or a user's module (``"package.module:Class"``
    built with ``options``, called on ``[B, *O]`` with the leading axes folded into one)."""
    lead = obs.shape[: obs.ndim - obs_ndim]
    if torso == "cnn":
        return NatureCNN(pixel_scale, channels_last, name=name)(obs)
    if torso == "mlp":
        return MLP(hidden_sizes, activation, name=name)(obs.reshape((*lead, -1)).astype(jnp.float32))
    x = obs.reshape((-1, *obs.shape[obs.ndim - obs_ndim:])).astype(jnp.float32)
    h = torso_class(torso)(**dict(options), name=name)(x)
    if h.ndim != 2 or h.shape[0] != x.shape[0]:
        raise ValueError(f"algo.network={torso!r} returned {h.shape} for observations {x.shape}; a torso returns "
                         "features [B, F] (flatten its output)")
    return h.reshape((*lead, h.shape[-1]))


MASKED = -1e9
"""The logit / Q-value an illegal action gets: probability 0, never the argmax."""


def mask_illegal(x: Array, obs: Array, legal: tuple[int, ...]) -> Array:
    """``x [..., A]`` (logits or Q-values) with the actions ``obs``'s legal-action flags (``obs[..., start:stop]``,
    ``EnvSpec.legal_actions``) mark illegal set to ``MASKED``; ``legal=()``: unchanged. A row with no legal action
    (an episode's final observation) is left unmasked, so a bootstrap from it stays finite."""
    if not legal:
        return x
    flags = obs[..., legal[0]: legal[1]] > 0.5
    flags = flags | ~jnp.any(flags, axis=-1, keepdims=True)
    return jnp.where(flags, x, MASKED)


class ActorCritic(nn.Module):
    """obs [B, *O] -> (policy params, value [B]).

    ``torso="cnn"``: one shared Nature CNN feeding both heads (CleanRL Atari).
    ``torso="mlp"``: separate actor and critic MLPs (CleanRL CartPole and MuJoCo).
    ``torso="package.module:Class"``: a user's Flax module (``torso_options`` its keyword arguments), shared by
    both heads as the CNN is.
    Heads: policy orthogonal(0.01) so the initial policy is near uniform / zero-mean,
    value orthogonal(1.0); continuous log_std is a state-independent parameter, init
    ``init_log_std`` (0 by default, as CleanRL).
    """

    action_kind: Literal["discrete", "continuous"]
    action_dim: int
    """discrete: number of actions; continuous: action dimensions."""
    obs_ndim: int
    """len(obs_shape): how many trailing dims are one observation."""
    torso: str = "mlp"
    """``cnn``, ``mlp`` or a user's ``"package.module:Class"`` (``apply_torso``)."""
    torso_options: tuple[tuple[str, Any], ...] = ()
    hidden_sizes: tuple[int, ...] = (64, 64)
    activation: Literal["tanh", "relu"] = "tanh"
    pixel_scale: float = 1.0 / 255.0
    channels_last: bool = False
    init_log_std: float = 0.0
    legal: tuple[int, ...] = ()
    """``(start, stop)`` of the observation's legal-action flags (``EnvSpec.legal_actions``); ``()``: none."""

    def features(self, obs: Array, name: str) -> Array:
        return apply_torso(self.torso, self.torso_options, obs, self.obs_ndim, name=name, pixel_scale=self.pixel_scale,
                           channels_last=self.channels_last, hidden_sizes=self.hidden_sizes, activation=self.activation)

    @nn.compact
    def __call__(self, obs: Array) -> tuple[Any, Array]:
        if self.torso == "mlp":
            pi_h, v_h = self.features(obs, "actor"), self.features(obs, "critic")
        else:
            pi_h = v_h = self.features(obs, "torso")
        value = _dense(1, 1.0, name="value_head")(v_h)[..., 0]
        if self.action_kind == "discrete":
            return mask_illegal(_dense(self.action_dim, 0.01, name="policy_head")(pi_h), obs, self.legal), value
        mean = _dense(self.action_dim, 0.01, name="policy_head")(pi_h)
        log_std = self.param("log_std", nn.initializers.constant(self.init_log_std), (self.action_dim,))
        return (mean, jnp.broadcast_to(log_std, mean.shape)), value


def legal_slice(spec: Any) -> tuple[int, ...]:
    """``spec.legal_actions`` as a network field: ``(start, stop)``, or ``()`` for an env without action masks."""
    return tuple(getattr(spec, "legal_actions", None) or ())


def torso_name(cfg: Any, spec: Any) -> str:
    """``algo.network`` with ``auto`` resolved: the Nature CNN for image observations, else an MLP."""
    return cfg.network if cfg.network != "auto" else ("cnn" if len(spec.obs_shape) == 3 else "mlp")


def torso_options(cfg: Any) -> tuple[tuple[str, Any], ...]:
    """``algo.network_options`` as a hashable module field (a user's torso's keyword arguments)."""
    return tuple(sorted(dict(getattr(cfg, "network_options", {}) or {}).items()))


def check_fit(cfg: Any, spec: Any) -> None:
    """ValueError naming every way ``cfg``'s network and algorithm do not fit ``spec`` (``algos/fit.py``)."""
    from algos.fit import spec_problems

    if found := spec_problems(cfg, spec):
        raise ValueError("; ".join(found))


def make_actor_critic(cfg: Any, spec: Any) -> ActorCritic:
    """The ``ActorCritic`` an actor-critic algorithm config asks for (PPO, IMPALA), sized for ``spec``.

    ``cfg`` needs ``network``, ``hidden_sizes``, ``activation``, ``init_log_std`` and ``normalize_obs``
    (``srljax.config.PPOConfig`` / ``IMPALAConfig``); ``spec`` is an ``srljax.types.EnvSpec``.
    """
    check_fit(cfg, spec)
    if spec.action_kind == "discrete":
        action_dim = spec.num_actions
    elif spec.action_kind == "multi_discrete":
        action_dim = sum(spec.action_nvec)
    else:
        action_dim = int(spec.action_shape[0])
    return ActorCritic(
        action_kind="continuous" if spec.action_kind == "continuous" else "discrete",  # heads: logits or a Gaussian
        action_dim=action_dim,
        obs_ndim=len(spec.obs_shape),
        torso=torso_name(cfg, spec),
        torso_options=torso_options(cfg),
        channels_last=spec.channels == "last",
        hidden_sizes=tuple(cfg.hidden_sizes),
        activation=cfg.activation,
        init_log_std=cfg.init_log_std,
        legal=legal_slice(spec),
        # normalised observations are already unit-scale; raw frames are bytes
        pixel_scale=1.0 if cfg.normalize_obs else 1.0 / 255.0,
    )


def reset_carry(carry: Any, first: Array) -> Any:
    """Zero the carry rows whose episode starts here: ``first [B]`` bool, carry leaves ``[B, H]``."""
    return jax.tree.map(lambda z: jnp.where(first[:, None], jnp.zeros_like(z), z), carry)


class _ResetLSTMStep(nn.Module):
    """One time step: ``((c, h) [B, H], (x [B, D], first [B])) -> ((c, h), h [B, H])``, carry reset first."""

    features: int

    @nn.compact
    def __call__(self, carry: Any, inputs: tuple[Array, Array]) -> tuple[Any, Array]:
        x, first = inputs
        return nn.OptimizedLSTMCell(self.features, name="cell")(reset_carry(carry, first), x)


class RecurrentActorCritic(nn.Module):
    """``(carry, obs [T, B, *O], first [T, B]) -> (carry, (policy params [T, B, ...], value [T, B]))``.

    A torso (one shared Nature CNN, MLP or a user's module, as ``ActorCritic``'s ``torso``) feeds an LSTM
    (``flax.linen.OptimizedLSTMCell``, ``lstm_size`` units) unrolled over T with ``nn.scan``; the
    carry ``(c, h)`` (``[B, lstm_size]`` each) is zeroed before every row whose ``first`` is set, so
    one call covers a segment that crosses episode boundaries. Acting is the case ``T = 1``. Heads as
    ``ActorCritic`` (policy orthogonal(0.01), value orthogonal(1.0), state-independent ``log_std``).
    """

    action_kind: Literal["discrete", "continuous"]
    action_dim: int
    obs_ndim: int
    lstm_size: int = 128
    torso: str = "mlp"
    torso_options: tuple[tuple[str, Any], ...] = ()
    hidden_sizes: tuple[int, ...] = (64, 64)
    activation: Literal["tanh", "relu"] = "tanh"
    pixel_scale: float = 1.0 / 255.0
    channels_last: bool = False
    init_log_std: float = 0.0
    legal: tuple[int, ...] = ()

    def initial_carry(self, batch: int) -> tuple[Array, Array]:
        """Zeros ``(c, h)``, each ``[batch, lstm_size]`` float32 (callable unbound)."""
        zeros = jnp.zeros((batch, self.lstm_size), jnp.float32)
        return zeros, zeros

    @nn.compact
    def __call__(self, carry: Any, obs: Array, first: Array) -> tuple[Any, tuple[Any, Array]]:
        x = apply_torso(self.torso, self.torso_options, obs, self.obs_ndim, name="torso", pixel_scale=self.pixel_scale,
                        channels_last=self.channels_last, hidden_sizes=self.hidden_sizes, activation=self.activation)
        scan = nn.scan(_ResetLSTMStep, variable_broadcast="params", split_rngs={"params": False}, in_axes=0, out_axes=0)
        carry, h = scan(self.lstm_size, name="lstm")(carry, (x, first))
        value = _dense(1, 1.0, name="value_head")(h)[..., 0]
        if self.action_kind == "discrete":
            return carry, (mask_illegal(_dense(self.action_dim, 0.01, name="policy_head")(h), obs, self.legal), value)
        mean = _dense(self.action_dim, 0.01, name="policy_head")(h)
        log_std = self.param("log_std", nn.initializers.constant(self.init_log_std), (self.action_dim,))
        return carry, ((mean, jnp.broadcast_to(log_std, mean.shape)), value)


class QNetwork(nn.Module):
    """obs [B, *O] -> Q-values [B, A] for discrete actions: a torso (Nature CNN or MLP) and a linear head,
    or with ``dueling`` a value and an advantage head combined as ``V + A - mean(A)`` (Wang et al. 2016)."""

    num_actions: int
    obs_ndim: int
    torso: str = "mlp"
    """``cnn``, ``mlp`` or a user's ``"package.module:Class"`` (``apply_torso``)."""
    torso_options: tuple[tuple[str, Any], ...] = ()
    hidden_sizes: tuple[int, ...] = (120, 84)
    activation: Literal["tanh", "relu"] = "relu"
    dueling: bool = False
    pixel_scale: float = 1.0 / 255.0
    channels_last: bool = False
    legal: tuple[int, ...] = ()
    """``(start, stop)`` of the observation's legal-action flags: illegal actions' Q is ``MASKED``."""

    @nn.compact
    def __call__(self, obs: Array) -> Array:
        h = apply_torso(self.torso, self.torso_options, obs, self.obs_ndim, name="torso", pixel_scale=self.pixel_scale,
                        channels_last=self.channels_last, hidden_sizes=self.hidden_sizes, activation=self.activation)
        return mask_illegal(_q_head(h, self.num_actions, self.dueling), obs, self.legal)


def _q_head(h: Array, num_actions: int, dueling: bool) -> Array:
    """Q-values from features: one linear head, or dueling ``V + A - mean(A)``."""
    if not dueling:
        return _dense(num_actions, 1.0, name="q_head")(h)
    value = _dense(1, 1.0, name="value_head")(h)
    advantage = _dense(num_actions, 1.0, name="advantage_head")(h)
    return value + advantage - jnp.mean(advantage, axis=-1, keepdims=True)


class RecurrentQNetwork(nn.Module):
    """``(carry, obs [T, B, *O], first [T, B]) -> (carry, Q-values [T, B, A])`` (R2D2): ``QNetwork``'s torso, an
    LSTM of ``lstm_size`` unrolled as ``RecurrentActorCritic``'s (carry zeroed before rows whose ``first`` is set),
    then ``QNetwork``'s head."""

    num_actions: int
    obs_ndim: int
    lstm_size: int = 128
    torso: str = "mlp"
    torso_options: tuple[tuple[str, Any], ...] = ()
    hidden_sizes: tuple[int, ...] = (64,)
    activation: Literal["tanh", "relu"] = "relu"
    dueling: bool = True
    pixel_scale: float = 1.0 / 255.0
    channels_last: bool = False
    legal: tuple[int, ...] = ()

    def initial_carry(self, batch: int) -> tuple[Array, Array]:
        zeros = jnp.zeros((batch, self.lstm_size), jnp.float32)
        return zeros, zeros

    @nn.compact
    def __call__(self, carry: Any, obs: Array, first: Array) -> tuple[Any, Array]:
        x = apply_torso(self.torso, self.torso_options, obs, self.obs_ndim, name="torso", pixel_scale=self.pixel_scale,
                        channels_last=self.channels_last, hidden_sizes=self.hidden_sizes, activation=self.activation)
        scan = nn.scan(_ResetLSTMStep, variable_broadcast="params", split_rngs={"params": False}, in_axes=0, out_axes=0)
        carry, h = scan(self.lstm_size, name="lstm")(carry, (x, first))
        return carry, mask_illegal(_q_head(h, self.num_actions, self.dueling), obs, self.legal)


def make_q_network(cfg: Any, spec: Any) -> QNetwork:
    """The ``QNetwork`` a DQN config (``network``, ``hidden_sizes``, ``activation``, ``dueling``) asks for,
    sized for ``spec``."""
    check_fit(cfg, spec)
    return QNetwork(num_actions=spec.num_actions, obs_ndim=len(spec.obs_shape), torso=torso_name(cfg, spec),
                    torso_options=torso_options(cfg), channels_last=spec.channels == "last",
                    hidden_sizes=tuple(cfg.hidden_sizes), activation=cfg.activation, dueling=cfg.dueling,
                    legal=legal_slice(spec))


def make_recurrent_q_network(cfg: Any, spec: Any) -> RecurrentQNetwork:
    """The ``RecurrentQNetwork`` an R2D2 config (``make_q_network``'s keys and ``lstm_size``) asks for."""
    check_fit(cfg, spec)
    return RecurrentQNetwork(num_actions=spec.num_actions, obs_ndim=len(spec.obs_shape), lstm_size=cfg.lstm_size,
                             torso=torso_name(cfg, spec), torso_options=torso_options(cfg),
                             channels_last=spec.channels == "last", hidden_sizes=tuple(cfg.hidden_sizes),
                             activation=cfg.activation, dueling=cfg.dueling, legal=legal_slice(spec))
