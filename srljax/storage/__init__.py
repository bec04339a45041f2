"""Run folders and checkpoints: ``run_dir.py`` (one run per trial folder, its lock, resume checks), ``checkpoint.py``
(orbax checkpoints), ``steps.py`` (what a checkpoints folder holds, read without orbax) and ``descriptors.py`` (file
descriptors left, waited for when a flood of connections took them), ``samples_record.py`` (a trainer's recorded
batches and state hashes, ``layout.record_samples``)."""
