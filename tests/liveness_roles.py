"""User-defined worker roles for ``tests/test_system_liveness.py`` (``layout.custom_roles=tests.liveness_roles:...``)."""

from __future__ import annotations

import time

from srljax.system.shell.worker import Worker


class CountingWorker(Worker):
    """Counts its polls; ``progress()`` reads state that only ``setup`` creates, as a user's hook may,
    so it raises in the heartbeats sent before ``configure``."""

    role = "counting"

    def setup(self) -> None:
        self.polls = 0

    def poll(self) -> None:
        self.polls += 1
        time.sleep(0.02)

    def progress(self) -> int:
        return self.polls

    def metrics(self) -> dict[str, int]:
        return {"polls": getattr(self, "polls", 0)}


class StopsOnItsOwn(Worker):
    """Stops by itself after a few polls (as on a signal) and then takes ``CLOSE_S`` to close, as a
    final checkpoint may: longer than ``layout.hang_seconds`` in the test that uses it."""

    role = "stops_on_its_own"
    CLOSE_S = 7.0

    def setup(self) -> None:
        self.polls = 0

    def poll(self) -> None:
        self.polls += 1
        time.sleep(0.02)
        if self.polls == 20:
            self.request_stop("stopping on its own")

    def close(self) -> None:
        time.sleep(self.CLOSE_S)


class CrashingWorker(Worker):
    """Raises after a few polls, every time it runs: restarts cannot help, so it spends
    ``layout.max_restarts`` and ends the trial (``tests/test_system_restart.py``)."""

    role = "crashing"

    def setup(self) -> None:
        self.polls = 0

    def poll(self) -> None:
        self.polls += 1
        time.sleep(0.02)
        if self.polls == 10:
            raise RuntimeError("CrashingWorker crashes again")
