"""Prometheus metrics of the sharing server (`GET /metrics`, `prometheus_client`): the metric names and labels,
`tahoe_sharing_`-prefixed: `requests_total{operation,status,share}`, `request_duration_seconds{operation}`,
`files_returned_total{share}`, `file_bytes_served_total{share}`, `table_load_seconds{share}`,
`snapshot_cache_total{result}`, `active_streams`, `auth_failures_total{reason}`, `refused_total{reason}`,
`ready`.

  1. With `--workers N`, prometheus_client's multiprocess mode: `serve` points PROMETHEUS_MULTIPROC_DIR at a
     fresh directory and `/metrics` adds up every worker.
  2. `Metrics(enabled=False)` records nothing."""

from __future__ import annotations

import os
import threading
from typing import Optional

__all__ = ["Metrics", "MULTIPROC_ENV"]

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
_BUCKETS = (0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


class Metrics:
    def __init__(self, enabled: bool = True):
        self.enabled = enabled
        if not enabled:
            return
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

        self.multiprocess = bool(os.environ.get(MULTIPROC_ENV))
        # in multiprocess mode values live in the directory's files; the registry only serves them
        self.registry = None if self.multiprocess else CollectorRegistry(auto_describe=True)
        kw = {"registry": self.registry}    # never the global registry: one app per Metrics
        self.requests = Counter("tahoe_sharing_requests", "Requests answered, by operation, status and share",
                                ["operation", "status", "share"], **kw)
        self.latency = Histogram("tahoe_sharing_request_duration_seconds", "Time to the response's last byte",
                                 ["operation"], buckets=_BUCKETS, **kw)
        self.files = Counter("tahoe_sharing_files_returned", "File lines in query and changes answers", ["share"],
                             **kw)
        self.file_bytes = Counter("tahoe_sharing_file_bytes_served", "Bytes sent through file URLs", ["share"], **kw)
        self.table_load = Histogram("tahoe_sharing_table_load_seconds", "Snapshot loads (log replays)", ["share"],
                                    buckets=_BUCKETS, **kw)
        self.cache = Counter("tahoe_sharing_snapshot_cache", "Snapshot cache lookups", ["result"], **kw)
        gauge_kw = dict(kw, multiprocess_mode="livesum") if self.multiprocess else kw
        self.streams = Gauge("tahoe_sharing_active_streams", "Responses being sent", **gauge_kw)
        self.auth_failures = Counter("tahoe_sharing_auth_failures", "Refused credentials, by reason", ["reason"],
                                     **kw)
        self.refused = Counter("tahoe_sharing_refused", "Requests refused by a limit or allow-list, by reason",
                               ["reason"], **kw)
        ready_kw = dict(kw, multiprocess_mode="min") if self.multiprocess else kw
        self.ready = Gauge("tahoe_sharing_ready", "1 once the server is warmed up", **ready_kw)
        self._children: dict = {}
        self._lock = threading.Lock()

    def _child(self, metric, *labels):
        key = (id(metric), labels)
        c = self._children.get(key)
        if c is None:
            with self._lock:
                c = self._children.get(key)
                if c is None:
                    c = self._children[key] = metric.labels(*labels)
        return c

    # --- recording ------------------------------------------------------------------------------------
    def request(self, operation: str, status: int, share: Optional[str], seconds: float, files: Optional[int],
                file_bytes: int, auth_failure: Optional[str], refused: Optional[str]) -> None:
        if not self.enabled:
            return
        share = share or ""
        self._child(self.requests, operation, str(status), share).inc()
        self._child(self.latency, operation).observe(seconds)
        if files:
            self._child(self.files, share).inc(files)
        if file_bytes:
            self._child(self.file_bytes, share).inc(file_bytes)
        if auth_failure:
            self._child(self.auth_failures, auth_failure).inc()
        if refused:
            self._child(self.refused, refused).inc()

    def stream(self, delta: int) -> None:
        if self.enabled:
            self.streams.inc(delta)

    def table_loaded(self, share: str, seconds: float) -> None:
        if self.enabled:
            self._child(self.table_load, share).observe(seconds)

    def cache_lookup(self, hit: bool) -> None:
        if self.enabled:
            self._child(self.cache, "hit" if hit else "miss").inc()

    def set_ready(self, ready: bool) -> None:
        if self.enabled:
            self.ready.set(1 if ready else 0)

    def exposition(self) -> tuple[bytes, str]:
        """The text exposition format of every value (all workers' in multiprocess mode)."""
        from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

        if self.multiprocess:
            from prometheus_client import multiprocess

            registry = CollectorRegistry()
            multiprocess.MultiProcessCollector(registry)
            return generate_latest(registry), CONTENT_TYPE_LATEST
        return generate_latest(self.registry), CONTENT_TYPE_LATEST
