"""Run folders and checkpoints: ``run_dir.py`` (one run per trial folder, resume checks), ``checkpoint.py`` (orbax
checkpoints) and ``steps.py`` (what a checkpoints folder holds, read without orbax)."""
