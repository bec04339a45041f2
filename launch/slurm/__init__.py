"""The Slurm backend: a trial's worker graph as one heterogeneous Slurm job.

    python -m launch.slurm CFG.py [-f TRIAL] [--dry-run]      # submit.py: check, write the run folder, sbatch
    python -m launch.slurm status|stop -e NAME -f TRIAL       # trial.py: a submitted trial by name

``plan.py`` turns ``build_layout(cfg)`` into het-job components and checks the ``slurm`` section;
``sbatch.py`` renders the batch script; ``jobs.py`` wraps the Slurm commands. On the nodes,
``task.py`` starts one worker per Slurm task and ``controller.py`` runs the controller in the
batch step; ``node.py`` finds the node's address. Nothing is imported here: the task and
controller entry points must set the environment before anything imports JAX.
"""
