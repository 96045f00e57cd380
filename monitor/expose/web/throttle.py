"""How often one identity may ask for a change: one limiter for every change route of the API and
the forms, applied by the guard (`identity.Authenticator`) once who asks is known and the CSRF
checks passed, before the route does any work. A change can be costly beyond its row (a repair
request and a preview describe the cluster live), so a script or a stuck button cannot ask
without end: past `web.identity.change_requests_per_minute` in any minute (a moving window) the
answer is 429 with `Retry-After`.

The count lives in this process (the `limits` library's memory storage): each instance behind a
load balancer counts its own. The command line, one process per command, counts the same limit in
the audit trail (`monitor.cli.common.admitted`).
"""

from __future__ import annotations

import math
import time

from limits import RateLimitItemPerMinute
from limits.storage import MemoryStorage
from limits.strategies import MovingWindowRateLimiter

from monitor.core.identity import Identity


class ChangeLimiter:
    """Changes per identity (its user name, however identified) in any minute."""

    def __init__(self, per_minute: int) -> None:
        self.per_minute = per_minute
        self._item = RateLimitItemPerMinute(per_minute)
        self._limiter = MovingWindowRateLimiter(MemoryStorage())

    def retry_after(self, who: Identity) -> int | None:
        """None when `who` may ask for a change now (and it is counted), else the whole seconds
        until they may."""
        if self._limiter.hit(self._item, who.user):
            return None
        reset = self._limiter.get_window_stats(self._item, who.user).reset_time
        return max(1, math.ceil(reset - time.time()))
