"""Asynchronous Query Table requests (spec `asyncquery`, "Get Query Info"): a query submitted with
`asyncquery=true` and an `idempotencyKey` runs in the background; the recipient polls
`POST …/tables/{table}/queries/{queryId}` through any process or replica until the answer is ready.

  1. A query id is a signed token naming recipient, table and expiry: another recipient's, another table's,
     a forged or a forgotten one is 404 `RESOURCE_DOES_NOT_EXIST`; an expired one 400 `INVALID_PARAMETER_VALUE`.
  2. The same `idempotencyKey` and query returns the same query on any replica; the same key with another
     query is 400 `INVALID_PARAMETER_VALUE`, until the query expires.
  3. State lives in `store.StateStore`: spec (pinned version), status, error. The accepting replica runs it;
     another replica rebuilds the same answer from the spec, or takes over after `STALE_SECONDS` of silence."""

from __future__ import annotations

import hashlib
import logging
import secrets
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from .errors import SharingError, bad_request, not_found
from .signing import BadToken, Signer

__all__ = ["AsyncQueries", "AsyncQuery", "PENDING", "body_digest"]

log = logging.getLogger("tahoe.sharing")

PENDING = "pending"
_MAX_QUERIES = 256        # answers kept in memory at once; the oldest finished ones go first
_WORKERS = 2              # queries computed at once
BEAT_SECONDS = 5.0        # how often a replica says it still computes its queries
STALE_SECONDS = 30.0      # after which silence another replica takes a pending query over


@dataclass
class AsyncQuery:
    """One submitted query: who asked, for which table, its fingerprint (`digest`), the
    idempotency key, its spec (what any replica needs to compute it) and its future (the answer,
    or the error it failed with; None while another replica computes it)."""
    id: str
    owner: str
    table_key: str
    digest: str
    idempotency_key: str
    expires: float
    future: Optional[Future]
    spec: dict = field(default_factory=dict)

    def done(self, wait: float = 0.0) -> bool:
        """True once the query finished (waiting up to `wait` seconds for it)."""
        if self.future is None:
            return False
        if wait > 0 and not self.future.done():
            try:
                self.future.exception(timeout=wait)
            except Exception:  # concurrent.futures.TimeoutError, or the query's own cancellation
                pass
        return self.future.done()

    def result(self) -> Any:
        """The answer; the query's error re-raised when it failed."""
        return self.future.result()


def _error_of(e: BaseException) -> dict:
    if isinstance(e, SharingError):
        return {"status": e.status, "code": e.code, "message": e.message}
    return {"status": 500, "code": "INTERNAL_ERROR", "message": ""}


class AsyncQueries:
    """Asynchronous queries of one server process (thread-safe), their state in `store`."""

    def __init__(self, signer: Signer, ttl_seconds: int, store, replica: str, max_queries: int = _MAX_QUERIES,
                 workers: int = _WORKERS):
        self._signer = signer
        self._ttl = ttl_seconds
        self._store = store
        self._replica = replica
        self._max = max_queries
        self._lock = threading.Lock()
        self._local: dict[str, AsyncQuery] = {}
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="sharing-async-query")
        self._stop = threading.Event()
        threading.Thread(target=self._beat, name="sharing-async-beat", daemon=True).start()

    def _beat(self) -> None:
        while not self._stop.wait(BEAT_SECONDS):
            with self._lock:
                running = [q.id for q in self._local.values() if q.future is not None and not q.future.done()]
            try:
                self._store.beat(running, time.time())
            except Exception:  # noqa: BLE001 - a store hiccup: the next beat retries
                log.warning("async queries: could not record the heartbeat in the state store", exc_info=True)

    def submit(self, owner: str, table_key: str, digest: str, idempotency_key: str, spec: dict,
               run: Callable[[], Any]) -> tuple[AsyncQuery, bool]:
        """The query for this idempotency key — the one already submitted (False) or a new one
        started now (True)."""
        if not idempotency_key or len(idempotency_key) > 256:
            raise bad_request("idempotencyKey must be a non-empty string of at most 256 characters")
        now = time.time()
        expires = now + self._ttl
        qid = self._signer.token({"k": "async-query", "r": owner, "t": table_key, "n": secrets.token_hex(8),
                                  "exp": int(expires) + 1})
        row = self._store.submit_query(qid, owner, table_key, idempotency_key, digest, spec, expires, self._replica,
                                       now)
        if not row["new"]:
            if row["digest"] != digest:
                raise bad_request(f"idempotencyKey {idempotency_key!r} was already used for a different query "
                                  f"on this table: use a new key for a new query")
            return self._known(row, owner, table_key, idempotency_key), False
        q = AsyncQuery(qid, owner, table_key, digest, idempotency_key, expires, Future(), spec)
        self._keep(q)
        self._pool.submit(self._run, q, run)
        return q, True

    def _keep(self, q: AsyncQuery) -> None:
        with self._lock:
            self._local[q.id] = q
            now = time.time()
            for i in [i for i, x in self._local.items() if x.expires <= now]:
                self._local.pop(i)
            if len(self._local) > self._max:
                finished = sorted((x.expires, i) for i, x in self._local.items() if x.future is not None
                                  and x.future.done())
                for _, i in finished[:len(self._local) - self._max]:
                    self._local.pop(i)

    def _run(self, q: AsyncQuery, run: Callable[[], Any]) -> None:
        if not q.future.set_running_or_notify_cancel():
            return
        try:
            q.future.set_result(run())
            error = None
        except BaseException as e:  # the poll re-raises it
            q.future.set_exception(e)
            error = _error_of(e)
        try:
            self._store.finish_query(q.id, error)
        except Exception:  # noqa: BLE001 - this replica still answers it; others will retry the store
            log.error("async queries: could not record a finished query in the state store", exc_info=True)

    def _known(self, row: dict, owner: str, table_key: str, idem: str,
               rebuild: Optional[Callable[[dict], Any]] = None) -> AsyncQuery:
        """The query of a store row: this process's own, or one whose answer is computed here from
        its spec (done elsewhere), or its error (failed), or pending."""
        with self._lock:
            q = self._local.get(row["id"])
        if q is not None:
            return q
        q = AsyncQuery(row["id"], owner, table_key, row["digest"], idem, float(row["expires"]), None, row["spec"])
        if row["status"] == "failed":
            e = row["error"] or {}
            q.future = Future()
            q.future.set_exception(SharingError(int(e.get("status", 500)), e.get("code", "INTERNAL_ERROR"),
                                                e.get("message", "")))
        elif rebuild is not None and (row["status"] == "done" or self._store.take_over(
                row["id"], self._replica, time.time() - STALE_SECONDS, time.time())):
            q.future = Future()
            self._keep(q)
            self._pool.submit(self._run if row["status"] != "done" else self._compute, q, lambda: rebuild(row["spec"]))
        return q

    @staticmethod
    def _compute(q: AsyncQuery, run: Callable[[], Any]) -> None:
        if not q.future.set_running_or_notify_cancel():
            return
        try:
            q.future.set_result(run())
        except BaseException as e:
            q.future.set_exception(e)

    def get(self, query_id: str, owner: str, table_key: str,
            rebuild: Callable[[dict], Any]) -> AsyncQuery:
        """The query `query_id` of this recipient and table (errors: module docstring, rule 1);
        `rebuild(spec)` computes its answer here when another replica accepted it."""
        missing = not_found(f"query {query_id[:16]}… does not exist")
        try:
            self._signer.read_token(query_id, k="async-query", r=owner, t=table_key)
        except BadToken as e:
            if str(e) == "token expired":
                try:   # expired, but was it this recipient's query on this table?
                    self._signer.read_token(query_id, allow_expired=True, k="async-query", r=owner, t=table_key)
                except BadToken:
                    raise missing from None
                raise bad_request("the query has expired (asynchronous queries are kept "
                                  f"{self._ttl} seconds): submit it again with a new idempotencyKey") from None
            raise missing from None
        with self._lock:
            q = self._local.get(query_id)
        if q is not None:
            return q
        row = self._store.get_query(query_id)
        if row is None or row["expires"] <= time.time():
            raise not_found("the query is no longer known to this server (it expired or its state was lost): "
                            "submit it again with a new idempotencyKey")
        return self._known(row, owner, table_key, "", rebuild)

    def close(self) -> None:
        self._stop.set()
        self._pool.shutdown(wait=False, cancel_futures=True)


def body_digest(parts: Any) -> str:
    """A fingerprint of a query (what an idempotency key is checked against)."""
    return hashlib.sha256(repr(parts).encode("utf-8")).hexdigest()[:32]
