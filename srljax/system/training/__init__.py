"""The trainers: ``trainer.py`` (``TrainerWorker``: segments -> batches -> the shared ``Learner`` -> params),
``policy_trainer.py`` (one policy of several), ``member_trainer.py`` (one member of a PBT population or a league),
``replay_trainer.py`` (Ape-X's learner), and ``params.py`` (params on the wire and a follower of the newest)."""
