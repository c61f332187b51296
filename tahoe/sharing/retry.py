"""How the sharing client retries (one policy for REST calls, token requests and file downloads):
429 and 5xx answers and dropped or refused connections are retried with exponential backoff —
0.1 s doubling per attempt, at most 10 s a wait, 10 retries by default (the official connector's
count) — honouring a `Retry-After` header given in seconds."""

from __future__ import annotations

import time
from typing import Optional

__all__ = ["DEFAULT_RETRIES", "retryable_status", "backoff_delay", "backoff_sleep"]

DEFAULT_RETRIES = 10
_FIRST = 0.1
_MAX = 10.0


def retryable_status(status: int) -> bool:
    return status == 429 or 500 <= status < 600


def backoff_delay(attempt: int, retry_after: Optional[str] = None) -> float:
    """Seconds to wait before retry `attempt + 1` (attempt counts from 0)."""
    if retry_after:
        try:
            return min(_MAX * 3, max(0.0, float(retry_after)))
        except ValueError:
            pass
    return min(_MAX, _FIRST * (2 ** attempt))


def backoff_sleep(attempt: int, retry_after: Optional[str] = None) -> None:
    time.sleep(backoff_delay(attempt, retry_after))
