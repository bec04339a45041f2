"""SRL's managers: ``eval_manager.py`` (the ``eval`` role), ``population_manager.py`` (a distributed PBT population;
its directives stream is ``srljax/comm/directives.py``), ``psro_manager.py`` (the same role running PSRO's meta-game),
``league_manager.py`` (a league)."""
