"""What every role runs on: ``worker.py`` (the ``Worker`` base: run loop, control, heartbeats, metrics),
``controller.py`` (registers, starts, watches and ends a trial), ``restarts.py`` (lost workers), ``run.py`` (one
worker as a process), ``roles.py`` (role name -> worker), ``common.py`` (what the workers share), ``auth.py``
(CURVE keys), ``bounds.py`` (frame bounds), ``names_service.py`` (the name service), ``fd_limits.py``, ``membership.py`` (who acts and trains for which member
of a population or league)."""
