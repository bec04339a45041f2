"""The house: every import goes down a floor or stays on it, and no module imports itself round a circle.

Floors (``docs/architecture.md``, "Folder map"), lowest first:

0. ground: ``srljax.types``, ``srljax.objects``, ``srljax.config.*`` and each algorithm's config beside it
   (``algos/*_config.py``): plain dataclasses and checks, no JAX, no env, no disk.
1. parts: ``algos.*`` (pure JAX functions) and ``envs.*`` (the env seam).
2. machinery: the rooms of ``srljax`` the loops and workers share (``comm``, ``learning``, ``replay``, ``selfplay``,
   ``population``, ``parallel``, ``telemetry``, ``storage``, ``evaluation``), ``srljax.layout`` and ``srljax.sizing``
   (the layout planner's arithmetic, with the role names ``srljax.layout`` spells).
3. loops: ``srljax.loops.*``, the single-process training loops.
4. workers: ``srljax.system.*``.
5. launchers: ``launch.*``.
6. users' side: ``configs.*``, ``examples.*``, ``bench.*``.

Every import counts, at module level or inside a function, ``TYPE_CHECKING`` included: an import moved into a
function to dodge a circle is still a circle. A name a lazy package exports (``_EXPORTS`` in its
``__init__``) is an import of the module that defines it.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from srljax.config.registry import BUILTIN_ALGOS, config_exports

ROOT = Path(__file__).resolve().parents[1]
TOP = ("srljax", "algos", "envs", "launch", "configs", "examples", "bench")
MACHINERY = ("comm", "learning", "replay", "parallel", "telemetry", "storage", "evaluation", "selfplay", "population",
             "layout", "prepare", "sizing")


def floor(module: str) -> int | None:
    parts = module.split(".")
    if module in ("srljax", "srljax.types", "srljax.objects") or parts[:2] == ["srljax", "config"]:
        return 0
    if parts[0] == "algos" and len(parts) == 2 and parts[1].endswith("_config"):
        return 0
    if parts[0] in ("algos", "envs"):
        return 1
    if parts[0] == "srljax" and parts[1] in MACHINERY:
        return 2
    if parts[:2] == ["srljax", "loops"]:
        return 3
    if parts[:2] == ["srljax", "system"]:
        return 4
    if parts[0] == "launch":
        return 5
    if parts[0] in ("configs", "examples", "bench"):
        return 6
    return None


def modules() -> dict[str, Path]:
    out = {}
    for top in TOP:
        for path in (ROOT / top).rglob("*.py"):
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            out[name.removesuffix(".__init__")] = path
    return out


def lazy_exports(path: Path) -> dict[str, str]:
    """``_EXPORTS = {"Name": "package.module", ...}`` of a lazy package ``__init__``."""
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "_EXPORTS" for t in node.targets):
            return ast.literal_eval(node.value)
    return {}


def import_graph() -> dict[str, set[str]]:
    mods = modules()
    exports = {m: lazy_exports(p) for m, p in mods.items() if p.name == "__init__.py"}
    exports["srljax.config"].update(config_exports())  # the built-in algorithms' configs, from the one registry

    def resolve(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {m: set() for m in mods}
    for mod, path in mods.items():
        package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text())):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package
                    for _ in range(node.level - 1):
                        up = up.rpartition(".")[0]
                    base = f"{up}.{base}" if base else up
                for alias in node.names:
                    full = f"{base}.{alias.name}"
                    if full in mods:
                        targets.append(full)
                    elif alias.name in exports.get(base, {}):
                        targets.append(exports[base][alias.name])
                    else:
                        targets.append(base)
            for target in targets:
                found = resolve(target)
                if found and found != mod:
                    graph[mod].add(found)
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                    break
                if child in on:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        out.append(sorted(component))
    return out


def test_no_import_circles():
    found = circles(import_graph())
    assert not found, "import circles (each a set of modules that import each other):\n" + "\n".join(map(str, found))


def test_every_module_has_a_floor_and_imports_only_down_or_level():
    graph = import_graph()
    homeless = sorted(m for m in graph if floor(m) is None)
    assert not homeless, f"modules on no floor (give each a room, see this file's docstring): {homeless}"
    upward = sorted(f"{m} (floor {floor(m)}) imports {t} (floor {floor(t)})"
                    for m, targets in graph.items() for t in targets if floor(t) > floor(m))
    assert not upward, "imports from a lower floor to a higher one:\n" + "\n".join(upward)


def test_the_checks_catch_a_circle_and_an_upward_import():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []
    assert floor("srljax.config.env") < floor("envs.base") < floor("srljax.replay.buffer") < floor("srljax.loops.train")
    assert floor("srljax.loops.train") < floor("srljax.system.acting.actor") < floor("launch.local") < floor("configs.cartpole_ppo")
    assert floor("algos.ppo_config") == 0 and floor("algos.ppo") == 1 and floor("srljax.somewhere_new") is None


# -- lazy packages: a worker process loads only what its role needs -----------------------------------------------
HEAVY = ("orbax", "wandb", "matplotlib")
CHECKPOINTS = {  # roles that write or read orbax checkpoints (their own, or the best/ and members' copies)
    "srljax.system.training.trainer", "srljax.system.training.replay_source", "srljax.system.training.members",
    "srljax.system.training.publishers", "srljax.system.staging.replay_buffer", "srljax.system.managers.eval_manager",
    "srljax.system.managers.population_manager",
}
ROLES = sorted({"srljax.system.acting.actor", "srljax.system.acting.apex_actor", "srljax.system.acting.policy", "srljax.system.staging.buffer",
                "srljax.system.shell.controller", *CHECKPOINTS})


def loaded_after_import(module: str) -> list[str]:
    code = (f"import sys, {module}; "
            f"print(' '.join(sorted(m for m in {HEAVY!r} if any(k == m or k.startswith(m + '.') for k in sys.modules))))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return out.stdout.split()


@pytest.mark.parametrize("module", ROLES)
def test_a_worker_role_imports_only_what_it_needs(module):
    allowed = {"orbax"} if module in CHECKPOINTS else set()
    extra = sorted(set(loaded_after_import(module)) - allowed)
    assert not extra, f"importing {module} loads {extra}; import them where they are used (lazily)"


def test_config_and_launch_checks_load_no_jax():
    code = ("import sys, srljax.config, srljax.prepare; from srljax.config import Experiment, DQNConfig, MAPPOConfig; "
            "from srljax.prepare import problems; problems(Experiment(), skip=('envs', 'srljax.replay.memory')); "
            "print(sorted(m for m in ('jax', 'flax', 'optax', 'orbax') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]", out.stdout


def test_the_folder_map_in_docs_names_every_folder_and_only_real_paths():
    """docs/architecture.md's folder map matches the tree: each folder of Python code is in it, and each path it
    names (a folder, or a file of a folder it names) exists."""
    import re

    text = (ROOT / "docs" / "architecture.md").read_text()
    start = text.index("Folder map (")
    table = text[start:text.index("\n\n", text.index("| folder |", start))]
    rows = [row.split("|") for row in table.splitlines()[2:] if row.count("|") >= 3]
    folders = {f for cells in rows for f in re.findall(r"`([a-z_/]+/)`", cells[1])}
    code_folders = {p.parent.relative_to(ROOT).as_posix() + "/" for top in (*TOP, "tests")
                    for p in (ROOT / top).rglob("*.py") if "__pycache__" not in p.parts}
    assert not code_folders - folders, f"folders missing from the map: {sorted(code_folders - folders)}"
    assert all((ROOT / f).is_dir() for f in folders), [f for f in folders if not (ROOT / f).is_dir()]
    for cells in rows:
        named = re.findall(r"`([a-z_/]+/)`", cells[1])
        for file in re.findall(r"`([a-z_*]+\.py)`", cells[2]):
            if "*" in file:
                continue
            assert any((ROOT / folder / file).exists() for folder in named), f"{file} is not in {named}"


# -- one registry of built-in algorithms -----------------------------------------------------------------------
def test_one_registry_of_built_in_algorithms():
    """``srljax.config.registry.BUILTIN_ALGOS`` is the only table of built-in algorithms: the config loader, the
    exports of ``srljax.config`` and ``algos.make`` read it, and none of them holds a table of its own."""
    import dataclasses
    import importlib

    import srljax.config
    from srljax.objects import load_object

    for name, (config_path, make_path) in BUILTIN_ALGOS.items():
        cls = load_object(config_path, name)
        assert cls.name == name, f"{config_path}.name is {cls.name!r}, registered as {name!r}"
        assert srljax.config.algo_config_class(name) is cls
        assert getattr(srljax.config, cls.__name__) is cls and cls.__name__ in srljax.config.__all__
        assert make_path.partition(":")[0].startswith("algos.") and ":" in make_path
    # every algorithm config srljax.config exports (a dataclass with a ``name`` the loader picks) is registered
    registered = {path.partition(":")[2] for path, _ in BUILTIN_ALGOS.values()}
    for export in srljax.config.__all__:
        value = getattr(srljax.config, export)
        if isinstance(value, type) and dataclasses.is_dataclass(value) and value.__module__.startswith("algos."):
            fields = {f.name: f for f in dataclasses.fields(value)}
            if "name" in fields and fields["name"].default not in ("", dataclasses.MISSING):
                assert export in registered, f"srljax.config exports algorithm config {export} not in the registry"
    # no second table: the package's literal exports, srljax.config.algo and algos.factory name no algorithm config
    literal = lazy_exports(ROOT / "srljax" / "config" / "__init__.py")
    assert not registered & set(literal), f"srljax.config's _EXPORTS repeats the registry: {registered & set(literal)}"
    for module in ("srljax/config/algo.py", "algos/factory.py"):
        tree = ast.parse((ROOT / module).read_text())
        names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} | {
            a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
        strings = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
        repeated = sorted((registered & names) | {s for s in strings for key in BUILTIN_ALGOS
                                                  if s.startswith((f"algos.{key}:", f"algos.{key}_config:"))})
        assert not repeated, f"{module} names built-in algorithms itself (a second table): {repeated}"
        assert not any(isinstance(n, ast.Dict) and len(n.keys) > 1 for n in ast.walk(tree)), f"{module} holds a dict"
    importlib.import_module("algos.factory")  # still imports


# -- the docs name every module, and every path they name exists -----------------------------------------------
DOCUMENTED = ("srljax", "algos", "envs", "launch")


def undocumented_modules() -> list[str]:
    """Modules of ``DOCUMENTED`` that ``docs/architecture.md`` does not name (by repo path, path inside its package,
    or dotted name) and whose package's ``__init__`` docstring does not name by file name."""
    docs = (ROOT / "docs" / "architecture.md").read_text()
    out = []
    for top in DOCUMENTED:
        for path in sorted((ROOT / top).rglob("*.py")):
            if path.name in ("__init__.py", "__main__.py") or "__pycache__" in path.parts:
                continue
            rel = path.relative_to(ROOT).as_posix()
            inner, dotted = rel.split("/", 1)[1], rel[:-3].replace("/", ".")
            if rel in docs or inner in docs or dotted in docs:
                continue
            init = path.parent / "__init__.py"
            doc = ast.get_docstring(ast.parse(init.read_text())) if init.exists() else None
            if not (doc and path.name in doc):
                out.append(rel)
    return out


def test_the_docs_or_the_package_docstring_name_every_module():
    missing = undocumented_modules()
    assert not missing, ("modules named neither in docs/architecture.md nor in their package's __init__ docstring "
                         f"(name them in one): {missing}")


def test_every_python_path_the_docs_name_exists():
    import re

    docs = (ROOT / "docs" / "architecture.md").read_text()
    named = {m for m in re.findall(r"[\w./-]+\.py", docs) if "/" in m}
    missing = sorted(m for m in named if not (ROOT / m).exists() and not any((ROOT / t / m).exists() for t in DOCUMENTED))
    assert not missing, f"docs/architecture.md names paths that do not exist: {missing}"


# -- the second floor: rooms, no guards, one prepare pass --------------------------------------------------------
def test_the_worker_room_is_in_rooms_and_sets_every_attribute_in_init():
    """``srljax/system/`` holds rooms by pipeline stage, no module directly; no worker tests whether its own attribute
    exists yet (``hasattr(self, ...)`` / ``getattr(self, "...")``): every attribute is set in ``__init__``."""
    import re

    system = ROOT / "srljax" / "system"
    flat = sorted(p.name for p in system.glob("*.py") if p.name != "__init__.py")
    assert not flat, f"modules directly under srljax/system/ (put each in its room): {flat}"
    guards = [f"{p.relative_to(ROOT)}:{i}" for p in system.rglob("*.py")
              for i, line in enumerate(p.read_text().splitlines(), 1) if re.search(r"\b(?:hasattr|getattr)\(self\s*,", line)]
    assert not guards, f"attribute guards (set the attribute in __init__ instead): {guards}"


SETUP_CALLS = ("claim(", "compile_cache.enable(", "write_json(")  # the folder, the cache, config.json


def test_a_run_is_checked_and_set_up_in_one_place():
    """The loops and the launchers that start training call ``srljax.prepare`` (checks, folder, config.json, compile
    cache) instead of doing the set-up themselves. Exceptions: a worker process enables its own compile cache
    (``srljax/system/shell/run.py``), ``launch.play`` compiles without a run, and a Slurm submission writes its folder
    inside a transaction undone when sbatch refuses (its checks are the same pass)."""
    entries = [*(ROOT / "srljax" / "loops").glob("*.py"), *(ROOT / "launch").rglob("*.py")]
    allowed = {"launch/play.py", "launch/slurm/trial.py", "launch/slurm/submit.py"}
    found = [f"{p.relative_to(ROOT)}:{i}: {line.strip()}" for p in entries if p.relative_to(ROOT).as_posix() not in allowed
             for i, line in enumerate(p.read_text().splitlines(), 1)
             if any(call in line for call in SETUP_CALLS) and not line.lstrip().startswith(("#", "def "))]
    assert not found, f"set-up outside srljax/prepare.py: {found}"
    callers = ["launch/cli.py", "launch/show.py", "launch/sweep/trials.py", "launch/threads.py", "launch/processes.py",
               "srljax/loops/train.py", "srljax/loops/on_policy.py", "srljax/loops/replay.py",
               "srljax/loops/population.py", "srljax/loops/league.py"]
    missing = [c for c in callers if "from srljax.prepare import" not in (ROOT / c).read_text()]
    assert not missing, f"entry points that do not go through srljax/prepare.py: {missing}"
