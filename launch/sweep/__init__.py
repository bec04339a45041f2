"""Sweeps: configs x overrides x seeds, run locally or as a Slurm job array, reported with CIs and curves.

    python -m launch.sweep configs/sweeps/cartpole_smoke.py              # run what is not finished, then report
    python -m launch.sweep configs/sweeps/mujoco.py --dry-run            # the trials, their state, the commands
    python -m launch.sweep configs/sweeps/mujoco.py --jobs 2             # two trials at a time
    python -m launch.sweep configs/sweeps/mujoco.py --slurm              # one job array (--dry-run prints it)
    python -m launch.sweep configs/sweeps/mujoco.py --report             # results.md and curves.png from the runs
    python -m launch.sweep configs/sweeps/cartpole_search.py             # an Optuna search with pruning (search.md)

``spec.py`` holds the sweep file's API (``Sweep``, ``Reference``) and trial naming; ``trials.py``
resolves and checks every trial before any starts and reads where each stands; ``local.py`` runs
them as ``python -m launch.local`` subprocesses; ``slurm_array.py`` renders and submits the job
array; ``report.py`` and ``stats.py`` write the report; ``search.py`` runs a sweep that names a search space (Optuna,
the study in the sweep's folder) and reports it. The command line is ``cli.py``.
"""

from launch.sweep.spec import Choice, IntRange, LogUniform, Reference, Search, Sweep, Uniform

__all__ = ["Choice", "IntRange", "LogUniform", "Reference", "Search", "Sweep", "Uniform"]
