"""SRL's managers: ``eval_manager.py`` (the ``eval`` role), ``population_manager.py`` (a distributed PBT population)
with ``pbt_directives.py`` (its directives stream and what its workers share), ``league_manager.py`` (a league)."""
