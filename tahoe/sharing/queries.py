"""Asynchronous Query Table requests (spec: the `asyncquery` capability and "Get Query Info"): a
query submitted with `asyncquery=true` and an `idempotencyKey` runs in the background; the
recipient gets a `queryId` and polls `POST …/tables/{table}/queries/{queryId}` until the answer is
ready, then reads it page by page.

Owns: the registry of running and finished queries, bounded in number and in time
(`asyncQueryTtlSeconds`), and the rules of idempotency and of query ids:

* A query id is a token signed by the server, naming the recipient and the table it belongs to and
  when it expires. Another recipient's id, an id used on another table's URL, or a forged one is
  a query that does not exist (404 `RESOURCE_DOES_NOT_EXIST`); an expired one answers 400
  `INVALID_PARAMETER_VALUE` ("submit it again"); a well-signed id the registry no longer holds
  (evicted, or the server restarted) is 404 too.
* Submitting the same `idempotencyKey` again — same recipient, same table, same query — while the
  query is known returns the same query (no second run); the same key with a different query is
  400 `INVALID_PARAMETER_VALUE`. Once the query expired, the key may be used for a new query.

The work itself (loading the snapshot, listing and pruning files) is a callable handed to
`submit`; its result — an answer whose file URLs are signed when it is read, so that they are
fresh at every poll — or its error is kept until the query expires.
"""

from __future__ import annotations

import hashlib
import secrets
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from .errors import bad_request, not_found
from .signing import BadToken, Signer

__all__ = ["AsyncQueries", "AsyncQuery", "PENDING", "body_digest"]

PENDING = "pending"
_MAX_QUERIES = 256        # queries kept at once; the oldest finished ones go first
_WORKERS = 2              # queries computed at once


@dataclass
class AsyncQuery:
    """One submitted query: who asked, for which table, its fingerprint (`digest` of the request
    body), the idempotency key, and its future (the answer, or the error it failed with)."""
    id: str
    owner: str
    table_key: str
    digest: str
    idempotency_key: str
    expires: float
    future: Future
    extra: dict = field(default_factory=dict)   # what the routes keep with it (capabilities, body)

    def done(self, wait: float = 0.0) -> bool:
        """True once the query finished (waiting up to `wait` seconds for it)."""
        if wait > 0 and not self.future.done():
            try:
                self.future.exception(timeout=wait)
            except Exception:  # concurrent.futures.TimeoutError, or the query's own cancellation
                pass
        return self.future.done()

    def result(self) -> Any:
        """The answer; the query's error re-raised when it failed (SharingError as it was raised,
        anything else as the caller's internal error)."""
        return self.future.result()


class AsyncQueries:
    """Running and finished asynchronous queries of one server process (thread-safe)."""

    def __init__(self, signer: Signer, ttl_seconds: int, max_queries: int = _MAX_QUERIES, workers: int = _WORKERS):
        self._signer = signer
        self._ttl = ttl_seconds
        self._max = max_queries
        self._lock = threading.Lock()
        self._by_id: dict[str, AsyncQuery] = {}
        self._by_key: dict[tuple[str, str, str], str] = {}
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="sharing-async-query")

    def submit(self, owner: str, table_key: str, digest: str, idempotency_key: str,
               run: Callable[[], Any], extra: Optional[dict] = None) -> tuple[AsyncQuery, bool]:
        """The query for this idempotency key — the one already submitted (False) or a new one
        started now (True)."""
        if not idempotency_key or len(idempotency_key) > 256:
            raise bad_request("idempotencyKey must be a non-empty string of at most 256 characters")
        now = time.time()
        key = (owner, table_key, idempotency_key)
        with self._lock:
            self._expire(now)
            known = self._by_id.get(self._by_key.get(key, ""))
            if known is not None:
                if known.digest != digest:
                    raise bad_request(f"idempotencyKey {idempotency_key!r} was already used for a different query "
                                      f"on this table: use a new key for a new query")
                return known, False
            expires = now + self._ttl
            qid = self._signer.token({"k": "async-query", "r": owner, "t": table_key, "n": secrets.token_hex(8),
                                      "exp": int(expires) + 1})
            q = AsyncQuery(qid, owner, table_key, digest, idempotency_key, expires, Future(), dict(extra or {}))
            self._by_id[qid] = q
            self._by_key[key] = qid
            self._evict()
        self._pool.submit(self._run, q, run)
        return q, True

    @staticmethod
    def _run(q: AsyncQuery, run: Callable[[], Any]) -> None:
        if not q.future.set_running_or_notify_cancel():
            return
        try:
            q.future.set_result(run())
        except BaseException as e:  # the poll re-raises it
            q.future.set_exception(e)

    def get(self, query_id: str, owner: str, table_key: str) -> AsyncQuery:
        """The query `query_id` of this recipient and table (see the module docstring for the
        errors)."""
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
            self._expire(time.time())
            q = self._by_id.get(query_id)
        if q is None:
            raise not_found("the query is no longer known to this server (it was evicted or the server restarted): "
                            "submit it again with a new idempotencyKey")
        return q

    def _expire(self, now: float) -> None:
        for qid in [i for i, q in self._by_id.items() if q.expires <= now]:
            self._drop(qid)

    def _evict(self) -> None:
        if len(self._by_id) <= self._max:
            return
        finished = sorted((q.expires, i) for i, q in self._by_id.items() if q.future.done())
        for _, qid in finished[:len(self._by_id) - self._max]:
            self._drop(qid)

    def _drop(self, qid: str) -> None:
        q = self._by_id.pop(qid, None)
        if q is not None:
            self._by_key.pop((q.owner, q.table_key, q.idempotency_key), None)
            q.future.cancel()

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


def body_digest(parts: Any) -> str:
    """A fingerprint of a query (what an idempotency key is checked against)."""
    return hashlib.sha256(repr(parts).encode("utf-8")).hexdigest()[:32]
