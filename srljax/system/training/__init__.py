"""The trainer: ``trainer.py`` (``TrainerWorker``, the one worker of the ``trainer`` role) and its parts, chosen
once from the run's plan in ``parts.py``: what it trains (``learners.py``), where batches come from (``sources.py``:
segments; ``replay_source.py``: Ape-X's shards), where params go (``publishers.py``; ``members.py``: a PBT or league
member's, with the population manager's directives); ``params.py`` (params on the wire and a follower of the newest)."""
