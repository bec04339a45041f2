"""``python -m launch.replay RUN_DIR``: feed a trainer's recorded batches to a fresh trainer offline and compare.

    python -m launch.local configs/cartpole_ppo_distributed.py -f rec layout.record_samples=true layout.deterministic=true
    python -m launch.replay runs/cartpole_ppo_distributed/rec          # trainer 0; --trainer I for another

A run with ``layout.record_samples=true`` left in ``RUN_DIR/samples/trainer-<i>/`` every batch its trainer trained
on and a SHA-256 of the train state after each update (``srljax/storage/samples_record.py``). This builds the
trainer's learner from the run's ``config.json`` (same seed, so the same initial state), in a process set up
as the trainer's was (``srljax.parallel.devices.process_env``: the same XLA threads and device), applies the
batches in order and compares the state after every update with the live one: it prints both hashes of the
last update and exits 0 when every update matched bit for bit, or names the first update where they part
(exit 1). A recording whose first batch is not update 1's (a trial resumed after its recording was removed)
cannot be replayed from the initial state and is refused (exit 2).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

PROG = "python -m launch.replay"


def replay(run_dir: Path, trainer: int) -> int:
    """In the trainer-like process: the learner from the config, every recorded batch, the hashes compared."""
    import jax

    from srljax.config import from_dict
    from srljax.learning.learner import Learner
    from srljax.storage.samples_record import read_batches, read_states, state_digest
    from srljax.system.shell.common import env_spec

    folder = run_dir / "samples" / f"trainer-{trainer}"
    cfg = from_dict(json.loads((run_dir / "config.json").read_text()))
    live = read_states(folder)
    learner = Learner(cfg, env_spec(cfg), checkpoints=False)
    digest, parted, last = state_digest(jax.device_get(learner.state)), None, 0
    for version, batch in read_batches(folder):
        if version != learner.version:
            print(f"{PROG}: the recording's batch for update {version + 1} follows update {learner.version}: "
                  f"{'it starts after a resume' if learner.version == 0 else 'a batch is missing'}; "
                  "it cannot be replayed from the initial state", file=sys.stderr)
            return 2
        learner.step(learner.put(batch))
        digest = state_digest(jax.device_get(learner.state))
        last = learner.version
        if live.get(last) is not None and live[last] != digest and parted is None:
            parted = last
    if not last:
        print(f"{PROG}: no recorded batches in {folder} (was the run started with layout.record_samples=true?)",
              file=sys.stderr)
        return 2
    print(f"replayed {last} updates from {folder}")
    print(f"live   train state sha256 after update {last}: {live.get(last, '(not recorded)')}")
    print(f"replay train state sha256 after update {last}: {digest}")
    if parted is None and live.get(last) == digest:
        print("identical: every update's train state matches the live trainer's bit for bit")
        return 0
    if parted is not None:
        print(f"they part at update {parted}: the replayed state after it differs from the live one (the same "
              "batches in, so the update itself is not deterministic here: XLA threads, devices, or the "
              "recording was cut short)")
    return 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", help="the run folder of a trial run with layout.record_samples=true")
    parser.add_argument("--trainer", type=int, default=0, help="which trainer's recording (default 0)")
    parser.add_argument("--here", action="store_true", help=argparse.SUPPRESS)  # the trainer-like child process
    args = parser.parse_args(argv)
    run_dir = Path(args.run_dir)
    folder = run_dir / "samples" / f"trainer-{args.trainer}"
    if not (run_dir / "config.json").exists():
        print(f"{PROG}: {run_dir} has no config.json: name a trial's run folder", file=sys.stderr)
        return 2
    if not folder.is_dir():
        print(f"{PROG}: {folder} does not exist: the run was not started with layout.record_samples=true "
              "(or has no trainer of that index)", file=sys.stderr)
        return 2
    if args.here:
        return replay(run_dir, args.trainer)
    from srljax.config import from_dict
    from srljax.layout import TRAINER
    from srljax.parallel.devices import process_env

    cfg = from_dict(json.loads((run_dir / "config.json").read_text()))
    environ = dict(os.environ)
    for key, value in process_env(cfg, TRAINER).items():
        if value is None:
            environ.pop(key, None)
        else:
            environ[key] = value
    cmd = [sys.executable, "-m", "launch.replay", str(run_dir), "--trainer", str(args.trainer), "--here"]
    return subprocess.run(cmd, env=environ).returncode


if __name__ == "__main__":
    sys.exit(main())
