"""The single-process training loops, the notebook / one-GPU path: ``train.py`` (``train(cfg)``) hands a config to
``on_policy.py`` (PPO, IMPALA, MAPPO), ``replay.py`` (DQN, SAC, TD3, R2D2), ``population.py`` (PBT) or ``league.py``
(a self-play league); ``result.py`` is what they hand back, ``signals.py`` the stops that wait for a consistent point.
"""
