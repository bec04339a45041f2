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
    "return", median=0.45, worst=0.45, seeds=(1,), wall_s=300, quick=False,
    source="bench/RESULTS.md (Issue 41, item 4): configs/lbf_mixed_inference.py at 300k env steps, seed 1, both "
    "policies well above random play (~0.05); as configs/lbf_two_policies_distributed.py, the worst policy is judged",
)


def experiment() -> Experiment:
    base = two_policies()
    return dataclasses.replace(
        base,
        name="lbf_mixed_inference",
        total_env_steps=1_000_000,
        timeout_seconds=3600,
        policies=PoliciesConfig(
            named=(PolicyConfig("attacker", inference="remote"),
                   PolicyConfig("defender", inference="inline", trainer=base.policies.get("beta").trainer)),
            agents=("attacker", "defender"),
        ),
    )
