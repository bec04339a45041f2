"""``R2D2Config`` (``algos/r2d2.py``): recurrent replay DQN with stored state and burn-in, one process or Ape-X.

    Experiment(algo=R2D2Config(sequence_length=40, burn_in=20, lstm_size=64))
    python -m launch.local configs/cartpole_r2d2.py algo.burn_in=0
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from algos.dqn_config import DQNConfig
from algos.replay_config import describe_replay_batch
from srljax.config.algo import hash_by_value


@dataclass(frozen=True)
class R2D2Config(DQNConfig):
    """R2D2 (Kapturowski et al. 2019): DQN's options (double Q, dueling, n-step, prioritized replay, epsilon-greedy,
    Ape-X's per-actor epsilons when distributed) on an LSTM Q-network trained on stored sequences.

    The replay keeps rows per env stream with the LSTM carry each row was acted with; a sample is a sequence of
    ``sequence_length + n_step`` rows from a start row (``srljax.replay.buffer``, ``SequenceBatch``). The update
    unrolls online and target networks from the stored carry over the first ``burn_in`` rows without gradient,
    then over the rest; the ``sequence_length - burn_in`` rows after the burn-in are trained, each with its whole
    n-step double-Q target inside the sequence, with the value rescaling ``h`` of the paper
    (``algos.returns.signed_hyperbolic``; ``value_rescaling=false``: plain targets). A sequence's priority is
    ``priority_eta * max |td| + (1 - priority_eta) * mean |td|`` over its trained rows. ``batch_size`` and
    ``replay_ratio`` count sequences (samples), as DQN's count transitions.
    """

    name: Literal["r2d2"] = "r2d2"  # type: ignore[assignment]
    gamma: float = 0.997
    n_step: int = 5
    batch_size: int = 32
    replay_ratio: float = 0.25
    """sequences trained per env step inserted (each trains ``sequence_length - burn_in`` rows)."""
    learning_starts: int = 10_000
    dueling: bool = True
    loss: Literal["huber", "mse"] = "mse"
    target_update_every: int = 2_500
    lstm_size: int = 512
    """LSTM units between the torso and the Q head (R2D2: 512). Must be >= 1: R2D2 is recurrent."""
    sequence_length: int = 80
    """rows per trained sequence, burn-in included (R2D2: 80); ``n_step`` more rows are sampled for the targets."""
    burn_in: int = 40
    """rows unrolled from the stored carry before training starts (R2D2: 40); 0: train from the stored carry."""
    priority_eta: float = 0.9
    value_rescaling: bool = True
    rescale_eps: float = 1e-3
    hidden_sizes: tuple[int, ...] = (512,)

    __hash__ = hash_by_value

    def sequence_rows(self) -> int:
        """Rows of one sampled sequence: the trained sequence and the last row's n-step window."""
        return self.sequence_length + self.n_step

    def replay_extras(self, spec: Any = None) -> dict[str, tuple[tuple[int, ...], str]]:
        """What the replay stores per row beside the transition: the LSTM carry it was acted with."""
        return {"lstm_c": ((self.lstm_size,), "float32"), "lstm_h": ((self.lstm_size,), "float32")}

    def describe_batch(self, cfg: Any) -> str:
        return (describe_replay_batch(self, cfg).replace("samples", "sequences", 1)
                + f"; sequences of {self.sequence_length} rows ({self.burn_in} burn-in) + {self.n_step} for the targets")

    def problems(self, cfg: Any) -> list[str]:
        out = super().problems(cfg)
        if self.lstm_size < 1:
            out.append(f"algo.lstm_size={self.lstm_size}: R2D2 needs a recurrent network (an LSTM of >= 1 units, "
                       "e.g. algo.lstm_size=64); for a feed-forward Q-network use algo=dqn")
        if self.burn_in < 0 or self.burn_in >= self.sequence_length:
            out.append(f"algo.burn_in={self.burn_in} must be in [0, algo.sequence_length={self.sequence_length}): the "
                       "rows after the burn-in are the ones trained; lower algo.burn_in or raise algo.sequence_length")
        if not 0.0 <= self.priority_eta <= 1.0 or self.rescale_eps <= 0:
            out.append(f"algo.priority_eta={self.priority_eta} must be in [0, 1] and algo.rescale_eps="
                       f"{self.rescale_eps} > 0")
        return out
