"""Several policies in one experiment: which policies exist and which agent each one controls.

    Experiment(env=EnvConfig(id="LevelBasedForaging-v0"), algo=MAPPOConfig(), policies=PoliciesConfig(
        named=(PolicyConfig("attacker"), PolicyConfig("defender", trainer=TrainerConfig(lr=1e-4))),
        agents=("attacker", "defender")))          # agent 0 -> attacker, agent 1 -> defender

``agents`` is a table, one policy name per agent index of the env; a config file may compute it with any
function (``agents=tuple("attacker" if i == 0 else "defender" for i in range(4))``). The default, no
``named`` policies, is one policy shared by every agent: the experiment's own ``algo`` and ``trainer``, as
before this module existed. A policy's ``algo`` / ``trainer`` default to the experiment's.

A policy's name keys everything it owns (``srljax/learning/policies.py``): its trainer worker (distributed: one
trainer per training policy, in ``named`` order), its params and samples streams, its run folder
``RUN_DIR/policies/<name>/`` (``metrics.jsonl``, ``checkpoints/``). A ``frozen`` policy trains nowhere: its
params come from the checkpoint ``load`` names, and stay fixed (a fixed opponent).

Inference is chosen per policy (distributed layouts): ``PolicyConfig("attacker", inference="remote")`` is served by
the policy workers while ``PolicyConfig("defender", inference="inline")`` is acted by the actors themselves
(default: ``layout.inference``). ``inference_of(cfg)`` gives each policy's; policy workers exist when any policy is
remote (``any_remote``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from srljax.config.algo import algo_config_class
from srljax.config.dicts import build
from srljax.config.pbt import member_count
from srljax.config.sections import TrainerConfig


@dataclass(frozen=True)
class PolicyConfig:
    """One named policy: its algorithm, its trainer settings and where its starting params come from."""

    name: str = ""
    """the key of its streams, trainer, checkpoints and metrics (a folder name: no '/')."""
    algo: Any = None
    """its algorithm config (``MAPPOConfig``); None: the experiment's ``algo``."""
    trainer: Any = None
    """its optimiser and trainer settings (``TrainerConfig``); None: the experiment's ``trainer``."""
    frozen: bool = False
    """never trained: acts with the params of ``load`` (a fixed opponent)."""
    load: str = ""
    """start from this policy checkpoint: a folder of orbax steps (``RUN_DIR/policies/<name>/checkpoints``, or
    a single-process multi-policy run's ``RUN_DIR/checkpoints``, whose state holds every policy by name); the
    newest step. Required when ``frozen``."""
    inference: str = ""
    """distributed: ``inline`` (acted in the actors, with the params they follow) or ``remote`` (served by the
    policy workers, which then serve only the remote policies' agents' rows); "": ``layout.inference``."""

    def __post_init__(self) -> None:  # from JSON (workers get the config as a dict): rebuild the typed fields
        for f in dataclasses.fields(self):  # the dict-valued ones: algo, and the trainer settings
            value = getattr(self, f.name)
            if isinstance(value, dict):
                cls = algo_config_class(value.get("name", "ppo")) if f.name == "algo" else TrainerConfig
                object.__setattr__(self, f.name, build(value, cls))


@dataclass(frozen=True)
class PoliciesConfig:
    """The policies of an experiment and the agent -> policy table; empty: one policy shared by all agents."""

    named: tuple[PolicyConfig, ...] = ()
    agents: tuple[str, ...] = ()
    """policy name of agent 0, 1, ...: one entry per agent of the env."""

    def __post_init__(self) -> None:
        named = tuple(PolicyConfig(**p) if isinstance(p, dict) else p for p in self.named)
        object.__setattr__(self, "named", named)
        object.__setattr__(self, "agents", tuple(self.agents))

    @property
    def enabled(self) -> bool:
        return bool(self.named)

    def names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.named)

    def get(self, name: str) -> PolicyConfig:
        for p in self.named:
            if p.name == name:
                return p
        raise KeyError(f"no policy {name!r}; policies: {', '.join(self.names())}")

    def agents_of(self, name: str) -> tuple[int, ...]:
        """Agent indices ``name`` controls, ascending."""
        return tuple(i for i, p in enumerate(self.agents) if p == name)

    def training(self) -> tuple[str, ...]:
        """Names of the policies that train (one trainer each), in ``named`` order."""
        return tuple(p.name for p in self.named if not p.frozen)


def inference_of(cfg: Any) -> dict[str, str]:
    """``{policy: "inline" | "remote"}`` in ``named`` order: each policy's ``inference``, else ``layout.inference``;
    {} for one shared policy."""
    return {p.name: p.inference or cfg.layout.inference for p in cfg.policies.named}


def any_remote(cfg: Any) -> bool:
    """Whether policy workers serve inference: ``layout.inference=remote`` for one shared policy, or any remote
    policy among several."""
    per = inference_of(cfg)
    return "remote" in per.values() if per else cfg.layout.inference == "remote"


def policy_experiment(cfg: Any, name: str) -> Any:
    """The experiment as one policy's trainer sees it: the policy's ``algo`` and ``trainer``, no policies, and
    its run folder ``RUN_DIR/policies/<name>`` (the trial ``<trial>/policies/<name>``, so ``run_dir`` lands
    there and a wandb run is named after the policy). Not for launching: only its trainer uses it."""
    p = cfg.policies.get(name)
    return dataclasses.replace(cfg, algo=p.algo or cfg.algo, trainer=p.trainer or cfg.trainer,
                               trial=f"{cfg.trial}/policies/{name}", policies=PoliciesConfig())


def trainer_policy(cfg: Any, index: int) -> str:
    """The policy trainer ``index`` trains (the training policies in ``policies.named`` order)."""
    return cfg.policies.training()[index]


def trainer_count(cfg: Any) -> int:
    """Trainer processes: one per training policy, one per population or league member (``member_count``), or
    ``trainer.num_hosts`` for one shared policy."""
    if member_count(cfg) and not cfg.policies.enabled:
        return member_count(cfg)
    return len(cfg.policies.training()) if cfg.policies.enabled else cfg.trainer.num_hosts


def policies_problems(cfg: Any) -> list[str]:
    """Every problem with ``cfg.policies`` (before launch), each naming the key and the fix."""
    pol = cfg.policies
    if not pol.enabled:
        if pol.agents:
            return [f"policies.agents={pol.agents}: names policies but policies.named is empty; name them "
                    "(PolicyConfig(name, ...)) or drop policies.agents for one policy shared by every agent"]
        return []
    out: list[str] = []
    names = pol.names()
    for name in names:
        if not name or "/" in name or name.startswith("."):
            out.append(f"policies.named: policy name {name!r} must be a non-empty folder name without '/'")
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        out.append(f"policies.named: policy names {dupes} appear twice; each policy needs its own name")
    if not pol.agents:
        out.append("policies.agents is empty: map every agent to a policy, e.g. policies.agents=('attacker', 'defender') "
                   "for agent 0 and agent 1")
    unknown = sorted({a for a in pol.agents if a not in names})
    for a in unknown:
        out.append(f"policies.agents names policy {a!r} (agents {[i for i, x in enumerate(pol.agents) if x == a]}), "
                   f"which policies.named does not define; known: {', '.join(names)}")
    for name in names:
        if pol.agents and not pol.agents_of(name):
            out.append(f"policy {name!r} has no agents: policies.agents={pol.agents} maps none to it; map an agent to "
                       "it or remove it from policies.named")
    if cfg.algo.name != "mappo" or any(p.algo is not None and getattr(p.algo, "name", "") != "mappo" for p in pol.named):
        out.append("several policies run MAPPO/IPPO (algo=mappo) only, per policy: set algo=MAPPOConfig(...) "
                   "(each policy's algo too)")
    for p in pol.named:
        if p.frozen and not p.load:
            out.append(f"policy {p.name!r} is frozen but has no checkpoint to act with: set its load= to a policy "
                       "checkpoint folder (RUN_DIR/policies/<name>/checkpoints)")
    for p in pol.named:
        if p.inference not in ("", "inline", "remote"):
            out.append(f"policy {p.name!r}: inference={p.inference!r} must be 'inline', 'remote' or '' "
                       f"(layout.inference={cfg.layout.inference})")
    remote = [name for name, how in inference_of(cfg).items() if how == "remote"]
    if cfg.layout.mode == "single" and remote and cfg.layout.inference == "inline":
        out.append(f"policies {remote}: inference=remote needs policy workers, which layout.mode=single does not "
                   "have (one process acts inline); set layout.mode=distributed or drop inference=remote")
    # whether each load= folder holds a finished step: srljax.storage.run_dir.load_problems (a disk check)
    if not pol.training():
        out.append("every policy is frozen: nothing would train; set frozen=False on at least one")
    for name in pol.training():
        sub = policy_experiment(cfg, name)
        if (sub.algo.num_steps, sub.batch_envs) != (cfg.algo.num_steps, cfg.batch_envs):
            out.append(f"policy {name!r}: batches of {sub.batch_envs} columns x {sub.algo.num_steps} steps but the "
                       f"experiment's are {cfg.batch_envs} x {cfg.algo.num_steps}; policies share the actors' segments "
                       "and updates, so give every policy the experiment's algo.num_steps and trainer.batch_envs")
        if sub.trainer.num_hosts != 1:
            out.append(f"policy {name!r}: trainer.num_hosts={sub.trainer.num_hosts}: a policy's trainer is one "
                       "process (multi-host trainer groups per policy are not built); set 1")
    lay = cfg.layout
    if lay.mode == "distributed":
        if lay.num_buffer_workers:
            out.append(f"layout.num_buffer_workers={lay.num_buffer_workers}: with several policies actors send each "
                       "policy's samples straight to its trainer; set 0")
        if cfg.eval.every_updates:
            out.append("eval.every_updates with several policies is not built (the evaluator acts with one policy); set 0")
    if cfg.pbt.population > 1:
        out.append("pbt.population with several policies is not built; set pbt.population=1")
    lstm = [p.name for p in pol.named if getattr(p.algo or cfg.algo, "lstm_size", 0)]
    if lstm:
        out.append(f"policies {lstm}: recurrent policies with several policies are not built; set lstm_size=0")
    return out
