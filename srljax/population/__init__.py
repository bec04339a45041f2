"""Population-based training's own logic, shared by the single-process loop (``srljax/loops/population.py``) and
the distributed workers (``srljax/system/managers/population_manager.py``, ``srljax/system/training/members.py``):
``pbt.py`` holds explore/exploit, the learning-rate factor in a train state, and the lineage's lines and plot
(``docs/architecture.md``, "Population-based training"). PSRO's parts, shared by the single-process loop
(``srljax/loops/psro.py``) and the worker graph's population manager (``srljax/system/managers/psro_manager.py``):
the meta-solvers (``meta_solvers.py``), a small game's whole tree for exact payoffs, mixtures and exploitability
(``game_tree.py``) and the meta-game itself (``psro.py``: ``MetaGame``)."""
