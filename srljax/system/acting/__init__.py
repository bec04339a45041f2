"""The acting side: ``actor.py`` (``ActorWorker``), ``apex_actor.py`` (Ape-X), ``league_actor.py`` (a league
member's side), ``policy.py`` (``PolicyWorker``, batched remote inference) and the actor's ``policy_client.py``,
``carries.py`` (recurrent state per row), ``packing.py`` (reply rows), ``escape.py`` (the starvation escape),
``policy_streams.py`` (several policies' streams)."""
