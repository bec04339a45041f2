"""LevelBasedForaging-v0 with two policies whose inference differs, in one worker graph: agent 0 -> ``attacker``,
served by the policy worker (``inference="remote"``), agent 1 -> ``defender``, acted by the actors themselves
(``inference="inline"``), as SRL mixes the two per agent.

    python -m launch.local configs/lbf_mixed_inference.py
    python -m launch.local configs/lbf_mixed_inference.py --show     # "inference per policy: attacker remote ..."

The policy worker follows only ``attacker``'s params and serves only agent 0's rows (``agent_rows`` in
``RUN_DIR/workers/policy-0.jsonl``: envs x 1 agent); each actor follows only ``defender``'s params, sends agent 0's
rows to the policy worker and, as the reply comes back, acts agent 1 itself and merges the two actions
(``inline_agent_rows`` in its worker stats). Each policy's part of a segment carries its own params versions
to its own trainer (``RUN_DIR/policies/<name>/metrics.jsonl``). Otherwise ``configs/lbf_two_policies_distributed.py``:
MAPPO per policy (one agent, a centralised critic on both agents' views), 2 actors x 16 envs, batch 32 x 128.
Results in bench/RESULTS.md ("Issue 41, item 4").
"""

import dataclasses

from configs.lbf_two_policies_distributed import experiment as two_policies
from srljax.config import Experiment, PoliciesConfig, PolicyConfig, Promise

PROMISE = Promise(
    "return", median=0.45, worst=0.45, seeds=(1,), wall_s=370, quick=False,
    source="bench/RESULTS.md (Issue 41, item 4): seed 1, 300k env steps, 371 s at load 17-24: attacker 0.5, defender "
    "0.5 (one food; random play ~0.05), both first at 70k; as configs/lbf_two_policies_distributed.py, the worst "
    "policy is judged",
)


def experiment() -> Experiment:
    base = two_policies()
    return dataclasses.replace(
        base,
        name="lbf_mixed_inference",
        total_env_steps=300_000,  # measured there (bench/RESULTS.md); lbf_two_policies_distributed trains 1M
        timeout_seconds=3600,
        policies=PoliciesConfig(
            named=(PolicyConfig("attacker", inference="remote"),
                   PolicyConfig("defender", inference="inline", trainer=base.policies.get("beta").trainer)),
            agents=("attacker", "defender"),
        ),
    )
