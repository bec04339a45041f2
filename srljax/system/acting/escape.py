"""When a throttled actor may go beyond its grants: the trainer has published nothing new for a while.

    escape = StarvationEscape()
    escape.saw(version)              # every poll: the newest params version this actor knows
    if throttled and escape.due():   # no new version for ESCAPE_UPDATES x the usual interval (>= ESCAPE_MIN_S)
        bonus += one_segment         # push one more segment, acted with the newest params

An actor's throttle grants columns per params version, and versions come only from updates. If the
columns that would make the next update were lost (dropped as stale, held by a restarted buffer, split
unevenly over a trainer group's hosts), no version comes and every actor waits for ever. Fresh columns
are acted with the version the trainer holds, so it never drops them as stale: granting one more segment
per escape guarantees the trainer eventually holds a full batch (docs/architecture.md, "Liveness"). A
merely slow trainer lets an escape happen rarely; a starved one, every few seconds.
"""

from __future__ import annotations

import time

ESCAPE_MIN_S = 5.0
ESCAPE_UPDATES = 3


class StarvationEscape:
    def __init__(self, min_s: float = ESCAPE_MIN_S, updates: float = ESCAPE_UPDATES):
        self.min_s, self.updates = min_s, updates
        self.version, self.version_time, self.last_escape, self.update_interval = -1, time.monotonic(), 0.0, 1.0

    def saw(self, version: int, now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        if version != self.version:
            if self.version >= 0:  # how long updates take, as this actor sees them
                self.update_interval = 0.9 * self.update_interval + 0.1 * (now - self.version_time)
            self.version, self.version_time = version, now

    def due(self, now: float | None = None) -> bool:
        """True (and counted from now) when no new version came for ``updates`` x the usual interval, at least
        ``min_s``, since the last version or the last escape."""
        now = time.monotonic() if now is None else now
        if now - max(self.version_time, self.last_escape) < max(self.min_s, self.updates * self.update_interval):
            return False
        self.last_escape = now
        return True
