"""Recurrent policies through the ``Algorithm`` seam, for any actor-critic loss (PPO, APPO, IMPALA).

Shape letters: T transitions, B envs, H ``lstm_size``, ``*O`` observation shape.

    rec = Recurrent.from_feedforward(net, lstm_size=128)      # net: the algorithm's ActorCritic
    params = rec.init(key, spec)
    # act (one row per env; ``first`` from the shell, see ``Algorithm.act``):
    pi, value, carry_in, carry = rec.step(params, obs [B, *O], actor_state, first [B])
    extras = {"logp": ..., "value": value, **carry_extras(carry_in)}   # the carry each row was acted with
    # update (a Trajectory segment [T+1, B]; the carry at row 0 and the episode starts inside it):
    pi, value = rec.unroll_segment(params, obs [T+1, B, *O], traj)       # both [T+1, B, ...]

How the carry crosses the system: every shell (``srljax.learning.acting.Acting``, the policy worker) keeps one
carry per env row and passes ``first`` (the row is an env's reset row: its previous row was done, or
it is the env's first row since the shell started), and ``step`` zeroes the carry there. The carry a
row was acted with is stored in the segment as the extras ``lstm_c``/``lstm_h`` (``carry_extras_spec``),
so row 0 of every segment holds the carry its unroll starts from; inside the segment the unroll
resets wherever row t-1 was done (``episode_starts``). Acting and the re-unroll then compute the same
policy (up to float rounding), so PPO's first-epoch ratio is 1.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp

from algos.networks import ActorCritic, RecurrentActorCritic, reset_carry
from srljax.types import EnvSpec

Array = jax.Array
CARRY_KEYS = ("lstm_c", "lstm_h")
"""Extras holding the LSTM carry ``(c, h)`` each row was acted with."""


def carry_extras_spec(lstm_size: int) -> dict[str, tuple[tuple[int, ...], str]]:
    """The extras a recurrent algorithm adds to its ``extras_spec``: ``{lstm_c, lstm_h: ((H,), float32)}``."""
    return {k: ((lstm_size,), "float32") for k in CARRY_KEYS}


def carry_extras(carry: tuple[Array, Array]) -> dict[str, Array]:
    """``(c, h)`` [B, H] -> ``{"lstm_c": c, "lstm_h": h}``."""
    return dict(zip(CARRY_KEYS, carry))


def segment_carry(extras: dict[str, Array]) -> tuple[Array, Array]:
    """The carry row 0 of a segment was acted with: ``(c, h)`` [B, H] from extras [T+1, B, H]."""
    return tuple(jnp.asarray(extras[k][0], jnp.float32) for k in CARRY_KEYS)  # type: ignore[return-value]


def episode_starts(terminated: Array, truncated: Array) -> Array:
    """``first [T+1, B]``: row t starts an episode iff row t-1 is done (envpool's reset row).

    Row 0 is False: the stored carry at row 0 already had its reset applied when it was acted on.
    """
    done = jnp.logical_or(terminated, truncated)
    return jnp.concatenate([jnp.zeros_like(done[:1]), done[:-1]], axis=0)


@dataclass(frozen=True)
class Recurrent:
    """A ``RecurrentActorCritic`` with the act-time step and the learn-time unroll (all pure)."""

    net: RecurrentActorCritic

    @staticmethod
    def from_feedforward(net: ActorCritic, lstm_size: int) -> Recurrent:
        """The recurrent version of ``net``: its torso and heads with an LSTM of ``lstm_size`` between."""
        return Recurrent(RecurrentActorCritic(
            action_kind=net.action_kind, action_dim=net.action_dim, obs_ndim=net.obs_ndim, lstm_size=lstm_size,
            torso=net.torso, torso_options=net.torso_options, hidden_sizes=net.hidden_sizes, activation=net.activation,
            pixel_scale=net.pixel_scale, channels_last=net.channels_last, init_log_std=net.init_log_std,
            legal=net.legal,
        ))

    @property
    def lstm_size(self) -> int:
        return self.net.lstm_size

    def initial_state(self, batch: int) -> tuple[Array, Array]:
        """Actor state for ``batch`` env rows: zeros ``(c, h)`` [B, H]."""
        return self.net.initial_carry(batch)

    def init(self, key: Array, spec: EnvSpec) -> Any:
        obs = jnp.zeros((1, 1, *spec.obs_shape), spec.obs_dtype)
        return self.net.init(key, self.initial_state(1), obs, jnp.zeros((1, 1), bool))

    def step(self, params: Any, obs: Array, carry: Any, first: Array) -> tuple[Any, Array, Any, Any]:
        """One row per env: ``(policy params [B, ...], value [B], carry acted with, next carry)``."""
        carry_in = reset_carry(carry, first)
        carry_out, (pi, value) = self.net.apply(params, carry_in, obs[None], jnp.zeros((1, obs.shape[0]), bool))
        return jax.tree.map(lambda x: x[0], pi), value[0], carry_in, carry_out

    def unroll(self, params: Any, carry: Any, obs: Array, first: Array) -> tuple[Any, Array]:
        """``obs [T, B, *O]`` from ``carry`` [B, H], resetting where ``first [T, B]``: (policy params, value [T, B])."""
        _, (pi, value) = self.net.apply(params, carry, obs, first)
        return pi, value

    def unroll_segment(self, params: Any, obs: Array, terminated: Array, truncated: Array,
                       extras: dict[str, Array]) -> tuple[Any, Array]:
        """A whole segment ``[T+1, B]`` from its stored row-0 carry (``obs`` already normalised)."""
        return self.unroll(params, segment_carry(extras), obs, episode_starts(terminated, truncated))
