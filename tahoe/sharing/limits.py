"""Per-recipient controls (a recipient's `limits` override the config's; 0 = none), and the token endpoint's
throttle. Last-used times are kept here and flushed with the byte counts.

  1. `allow` (addresses, CIDRs): others get 403 `PERMISSION_DENIED`; the address is the peer's, or behind
     `trustedProxies` the last untrusted `X-Forwarded-For` entry.
  2. `requestsPerMinute`: a token bucket per process → 429 `REQUEST_LIMIT_EXCEEDED` with `Retry-After`.
  3. `bytesPerDay`: per UTC day across replicas (flushed every `FLUSH_SECONDS`) → 429 `RESOURCE_EXHAUSTED`.
  4. `maxConcurrentStreams`: requests in flight per process → 429 `RESOURCE_EXHAUSTED`, `Retry-After: 1`.
  5. `tokenRequestsPerMinute` per client address on the token endpoint → 429 with `Retry-After`."""

from __future__ import annotations

import ipaddress
import logging
import math
import threading
import time
from datetime import datetime, timedelta, timezone
from typing import Optional

from .config import LimitsConfig
from .errors import SharingError

__all__ = ["Limiter", "client_address", "FLUSH_SECONDS"]

log = logging.getLogger("tahoe.sharing")
FLUSH_SECONDS = 1.0


def client_address(peer: Optional[str], forwarded_for: Optional[str], trusted: list) -> Optional[str]:
    """The client's address (see rule 1 of the module docstring)."""
    if not trusted or peer is None or forwarded_for is None:
        return peer

    def is_trusted(a: str) -> bool:
        try:
            ip = ipaddress.ip_address(a)
        except ValueError:
            return False
        return any(ip in n for n in trusted)

    if not is_trusted(peer):
        return peer
    hops = [h.strip() for h in forwarded_for.split(",") if h.strip()]
    for h in reversed(hops):
        if not is_trusted(h):
            return h
    return hops[0] if hops else peer


def _day(now: float) -> str:
    return datetime.fromtimestamp(now, tz=timezone.utc).strftime("%Y-%m-%d")


def _to_midnight(now: float) -> int:
    d = datetime.fromtimestamp(now, tz=timezone.utc)
    nxt = (d + timedelta(days=1)).replace(hour=0, minute=0, second=0, microsecond=0)
    return max(1, math.ceil((nxt - d).total_seconds()))


class Limiter:
    def __init__(self, config: LimitsConfig, store=None):
        self.cfg = config
        self.store = store
        self._lock = threading.Lock()
        self._buckets: dict[str, list] = {}
        self._token_buckets: dict[str, list] = {}
        self._streams: dict[str, int] = {}
        self._pending_bytes: dict[tuple[str, str], int] = {}
        self._known_bytes: dict[tuple[str, str], int] = {}
        self._last_used: dict[str, int] = {}
        self._networks: dict[int, tuple[list, list]] = {}
        self._quotas = bool(config.bytes_per_day)
        self._stop = threading.Event()
        if store is not None:
            threading.Thread(target=self._flusher, name="sharing-usage", daemon=True).start()

    def limit(self, r, key: str) -> int:
        v = r.limits.get(key) if r is not None else None
        if v is not None:
            return int(v)
        return {"requestsPerMinute": self.cfg.requests_per_minute, "bytesPerDay": self.cfg.bytes_per_day,
                "maxConcurrentStreams": self.cfg.max_concurrent_streams}[key]

    # --- checks ---------------------------------------------------------------------------------------
    def check_address(self, r, client: Optional[str]) -> None:
        if not r.allow:
            return
        got = self._networks.get(id(r))
        if got is None or got[0] is not r.allow:
            nets = [ipaddress.ip_network(a.strip(), strict=False) for a in r.allow]
            got = self._networks[id(r)] = (r.allow, nets)
        try:
            ip = ipaddress.ip_address(client or "")
        except ValueError:
            ip = None
        if ip is None or not any(ip in n for n in got[1]):
            raise SharingError(403, "PERMISSION_DENIED", "this recipient may not connect from this address",
                               reason="address_not_allowed")

    @staticmethod
    def _take(buckets: dict, key: str, per_minute: int, now: float) -> float:
        """Take a token from `key`'s bucket; 0 when taken, else seconds until one is back."""
        rate = per_minute / 60.0
        b = buckets.get(key)
        if b is None:
            b = buckets[key] = [float(per_minute), now]
        b[0] = min(float(per_minute), b[0] + (now - b[1]) * rate)
        b[1] = now
        if b[0] >= 1.0:
            b[0] -= 1.0
            return 0.0
        return (1.0 - b[0]) / rate

    def check_rate(self, r, now: Optional[float] = None) -> None:
        per_minute = self.limit(r, "requestsPerMinute")
        if not per_minute:
            return
        with self._lock:
            wait = self._take(self._buckets, r.name, per_minute, now or time.monotonic())
        if wait:
            raise SharingError(429, "REQUEST_LIMIT_EXCEEDED",
                               f"too many requests: at most {per_minute} a minute for this recipient",
                               headers={"Retry-After": str(max(1, math.ceil(wait)))}, reason="rate_limited")

    def check_bytes(self, r, now: Optional[float] = None) -> None:
        quota = self.limit(r, "bytesPerDay")
        if not quota:
            return
        self._quotas = True
        now = now or time.time()
        key = (r.name, _day(now))
        with self._lock:
            used = self._known_bytes.get(key, 0) + self._pending_bytes.get(key, 0)
        if used >= quota:
            raise SharingError(429, "RESOURCE_EXHAUSTED",
                               f"this recipient's byte quota ({quota} bytes a day) is used up until midnight UTC",
                               headers={"Retry-After": str(_to_midnight(now))}, reason="byte_quota")

    def enter_stream(self, r) -> bool:
        """Count a request of `r` in flight (False: it has no stream limit, nothing to release)."""
        most = self.limit(r, "maxConcurrentStreams")
        if not most:
            return False
        with self._lock:
            n = self._streams.get(r.name, 0)
            if n >= most:
                raise SharingError(429, "RESOURCE_EXHAUSTED",
                                   f"too many requests at once: at most {most} for this recipient",
                                   headers={"Retry-After": "1"}, reason="too_many_streams")
            self._streams[r.name] = n + 1
        return True

    def exit_stream(self, name: str) -> None:
        with self._lock:
            n = self._streams.get(name, 0) - 1
            if n <= 0:
                self._streams.pop(name, None)
            else:
                self._streams[name] = n

    def check_token_endpoint(self, client: Optional[str]) -> Optional[int]:
        """None, or the seconds to wait (the client asked the token endpoint too often)."""
        per_minute = self.cfg.token_requests_per_minute
        if not per_minute:
            return None
        with self._lock:
            wait = self._take(self._token_buckets, client or "?", per_minute, time.monotonic())
            if len(self._token_buckets) > 100_000:
                self._token_buckets.clear()
        return max(1, math.ceil(wait)) if wait else None

    # --- usage ------------------------------------------------------------------------------------------
    def used(self, name: str) -> None:
        self._last_used[name] = int(time.time() * 1000)

    def add_bytes(self, name: str, n: int) -> None:
        if n <= 0:
            return
        key = (name, _day(time.time()))
        with self._lock:
            self._pending_bytes[key] = self._pending_bytes.get(key, 0) + n

    def flush(self) -> None:
        with self._lock:
            pending, self._pending_bytes = self._pending_bytes, {}
            last, self._last_used = self._last_used, {}
        try:
            if pending or last:
                self.store.flush_usage(last, pending)
            if self._quotas:   # every replica's bytes, for the quotas
                today = _day(time.time())
                known = {(name, today): n for name, n in self.store.bytes_on(today).items()}
                with self._lock:
                    self._known_bytes = known
        except Exception:  # noqa: BLE001 - keep the counts for the next flush
            with self._lock:
                for k, v in pending.items():
                    self._pending_bytes[k] = self._pending_bytes.get(k, 0) + v
                for k, v in last.items():
                    self._last_used.setdefault(k, v)
            log.warning("could not record usage in the state store", exc_info=True)

    def _flusher(self) -> None:
        while not self._stop.wait(FLUSH_SECONDS):
            self.flush()

    def close(self) -> None:
        self._stop.set()
        if self.store is not None:
            self.flush()
