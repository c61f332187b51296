"""The sharing server's shared state, what every process and replica must see alike, in one SQL database:
SQLite (default `sharing.db` beside the config) or PostgreSQL (`store: postgresql://...`). Tables:
  1. `recipients`, with `meta.generation` bumped by every change, so processes re-read only on change
     (SQLite `PRAGMA data_version`; PostgreSQL polled every `POLL_SECONDS`, `MISS_POLL_SECONDS` on a miss);
  2. `recipient_usage`: last-used times, flushed in batches (`flush_usage`);
  3. `seen_assertions`: accepted JWT assertions (client id, jti), so exactly one replica accepts one;
  4. `async_queries`: asynchronous queries, unique per (recipient, table, idempotency key);
  5. `usage_bytes`: bytes served per recipient per UTC day.
Statements are written once with `?` placeholders (`%s` for psycopg), upserts with `ON CONFLICT`."""

from __future__ import annotations

import json
import os
import threading
import time
from typing import Any, Callable, Iterable

__all__ = ["StateStore", "open_store", "StoreError", "POLL_SECONDS", "describe_url"]

POLL_SECONDS = 0.5
MISS_POLL_SECONDS = 0.05   # a token no recipient has: the generation re-read at most this often

_SCHEMA = [
    "CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v BIGINT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS recipients (name TEXT PRIMARY KEY, data TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS recipient_usage (name TEXT PRIMARY KEY, last_used BIGINT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS seen_assertions (client_id TEXT NOT NULL, jti TEXT NOT NULL, exp BIGINT NOT NULL, "
    "PRIMARY KEY (client_id, jti))",
    "CREATE TABLE IF NOT EXISTS async_queries (id TEXT PRIMARY KEY, owner TEXT NOT NULL, table_key TEXT NOT NULL, "
    "idem TEXT NOT NULL, digest TEXT NOT NULL, spec TEXT NOT NULL, status TEXT NOT NULL, error TEXT, "
    "expires BIGINT NOT NULL, replica TEXT NOT NULL, heartbeat BIGINT NOT NULL)",
    "CREATE UNIQUE INDEX IF NOT EXISTS async_queries_key ON async_queries (owner, table_key, idem)",
    "CREATE TABLE IF NOT EXISTS usage_bytes (name TEXT NOT NULL, day TEXT NOT NULL, bytes BIGINT NOT NULL, "
    "PRIMARY KEY (name, day))",
    "INSERT INTO meta (k, v) VALUES ('generation', 0) ON CONFLICT (k) DO NOTHING",
]


class StoreError(RuntimeError):
    """The state store cannot be opened or used (the message names the store, never its password)."""


def describe_url(url: str) -> str:
    """`url` without a password (for messages and logs)."""
    from urllib.parse import urlsplit, urlunsplit

    if "://" not in url:
        return url
    u = urlsplit(url)
    if u.password is None:
        return url
    netloc = f"{u.username}:***@{u.hostname}" + (f":{u.port}" if u.port else "")
    return urlunsplit((u.scheme, netloc, u.path, u.query, u.fragment))


class StateStore:
    """One connection to the state database (see the module docstring)."""

    def __init__(self, url: str):
        self.url = url
        self.kind = "postgresql" if url.startswith(("postgresql://", "postgres://")) else "sqlite"
        self._lock = threading.RLock()
        self._conn = None
        self._data_version: int | None = None
        self._generation: int | None = None
        self._checked = 0.0
        self._connect()

    # --- connection ---------------------------------------------------------------------------------
    def _connect(self) -> None:
        try:
            if self.kind == "sqlite":
                import sqlite3

                path = self.url[len("sqlite:///") - 1:] if self.url.startswith("sqlite:///") else self.url
                os.makedirs(os.path.dirname(os.path.abspath(path)) or ".", exist_ok=True)
                new = not os.path.exists(path)
                conn = sqlite3.connect(path, timeout=30, check_same_thread=False, isolation_level=None)
                if new:
                    os.chmod(path, 0o600)
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=NORMAL")
                conn.execute("PRAGMA busy_timeout=30000")
                self.path = path
            else:
                import psycopg

                conn = psycopg.connect(self.url, autocommit=True, connect_timeout=10)
                self.path = None
        except Exception as e:  # noqa: BLE001 - any driver error, named
            raise StoreError(f"cannot open the sharing state store {describe_url(self.url)}: {e}") from None
        self._conn = conn
        with self._lock:
            self._transaction(lambda run: [run(s) for s in _SCHEMA])

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def _sql(self, sql: str) -> str:
        return sql if self.kind == "sqlite" else sql.replace("?", "%s")

    def _run(self, sql: str, args: Iterable = ()) -> Any:
        cur = self._conn.cursor()
        cur.execute(self._sql(sql), tuple(args))
        return cur

    def _transaction(self, body: Callable[[Callable], Any]) -> Any:
        """Run `body(run)` in one transaction (`run(sql, args)` → cursor); retried once on a lost
        PostgreSQL connection."""
        for attempt in (0, 1):
            with self._lock:
                try:
                    if self.kind == "sqlite":
                        self._conn.execute("BEGIN IMMEDIATE")
                        try:
                            out = body(self._run)
                        except BaseException:
                            self._conn.execute("ROLLBACK")
                            raise
                        self._conn.execute("COMMIT")
                        return out
                    with self._conn.transaction():
                        return body(self._run)
                except Exception as e:
                    if self.kind == "postgresql" and attempt == 0 and self._lost(e):
                        self._reconnect()
                        continue
                    raise

    def _lost(self, e: Exception) -> bool:
        import psycopg

        return isinstance(e, psycopg.OperationalError) or bool(getattr(self._conn, "closed", False))

    def _reconnect(self) -> None:
        import psycopg

        try:
            self._conn.close()
        except Exception:  # noqa: BLE001
            pass
        try:
            self._conn = psycopg.connect(self.url, autocommit=True, connect_timeout=10)
        except Exception as e:  # noqa: BLE001
            raise StoreError(f"cannot reach the sharing state store {describe_url(self.url)}: {e}") from None

    def query(self, sql: str, args: Iterable = ()) -> list[tuple]:
        return self._transaction(lambda run: run(sql, args).fetchall())

    # --- recipients -----------------------------------------------------------------------------------
    def changed(self, miss: bool = False) -> bool:
        """True when the recipients may have changed since the last call (cheap: see the module
        docstring). `miss`: a token matched no recipient — PostgreSQL's generation is re-read at
        once (at most every `MISS_POLL_SECONDS`), so a recipient just added on another replica
        is known at its first request."""
        with self._lock:
            if self.kind == "sqlite":
                dv = self._conn.execute("PRAGMA data_version").fetchone()[0]
                if dv == self._data_version:
                    return False
                self._data_version = dv
            else:
                now = time.monotonic()
                wait = MISS_POLL_SECONDS if miss else POLL_SECONDS
                if now - self._checked < wait and self._generation is not None:
                    return False
                self._checked = now
            gen = self.query("SELECT v FROM meta WHERE k = 'generation'")[0][0]
            if gen == self._generation:
                return False
            self._generation = gen
            return True

    def load_recipients(self) -> list[dict]:
        return [json.loads(d) for (d,) in self.query("SELECT data FROM recipients ORDER BY name")]

    def update_recipients(self, change: Callable[[list[dict]], Any]) -> Any:
        """Apply `change` to the recipients (dicts, changed in place; append to add, set
        `"$deleted"` to delete) in one transaction; returns what `change` returned."""
        def body(run):
            rows = [json.loads(d) for (d,) in run("SELECT data FROM recipients ORDER BY name").fetchall()]
            before = {r["name"]: json.dumps(r, sort_keys=True) for r in rows}
            out = change(rows)
            for r in rows:
                if r.get("$deleted"):
                    run("DELETE FROM recipients WHERE name = ?", (r["name"],))
                    run("DELETE FROM recipient_usage WHERE name = ?", (r["name"],))
                    continue
                data = json.dumps(r, sort_keys=True)
                if before.get(r["name"]) != data:
                    run("INSERT INTO recipients (name, data) VALUES (?, ?) ON CONFLICT (name) DO UPDATE SET data = "
                        "excluded.data", (r["name"], data))
            run("UPDATE meta SET v = v + 1 WHERE k = 'generation'")
            return out
        return self._transaction(body)

    def flush_usage(self, last_used: dict[str, int], nbytes: dict[tuple[str, str], int]) -> dict[tuple[str, str], int]:
        """Record last-used times (ms) and add bytes served per (recipient, UTC day); returns the
        totals of those (recipient, day) pairs after the addition."""
        def body(run):
            for name, ms in last_used.items():
                run("INSERT INTO recipient_usage (name, last_used) VALUES (?, ?) ON CONFLICT (name) DO UPDATE SET "
                    "last_used = CASE WHEN excluded.last_used > recipient_usage.last_used THEN excluded.last_used "
                    "ELSE recipient_usage.last_used END", (name, ms))
            totals = {}
            for (name, day), n in nbytes.items():
                run("INSERT INTO usage_bytes (name, day, bytes) VALUES (?, ?, ?) ON CONFLICT (name, day) DO UPDATE "
                    "SET bytes = usage_bytes.bytes + excluded.bytes", (name, day, n))
                totals[(name, day)] = run("SELECT bytes FROM usage_bytes WHERE name = ? AND day = ?",
                                          (name, day)).fetchone()[0]
            return totals
        return self._transaction(body)

    def bytes_on(self, day: str) -> dict[str, int]:
        return {n: b for n, b in self.query("SELECT name, bytes FROM usage_bytes WHERE day = ?", (day,))}

    def last_used(self) -> dict[str, int]:
        return dict(self.query("SELECT name, last_used FROM recipient_usage"))

    # --- JWT assertions ----------------------------------------------------------------------------------
    def claim_assertion(self, client_id: str, jti: str, exp: float, now: float) -> bool:
        """True the first time (client id, jti) is seen by any process or replica."""
        def body(run):
            run("DELETE FROM seen_assertions WHERE exp < ?", (int(now) - 120,))
            cur = run("INSERT INTO seen_assertions (client_id, jti, exp) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
                      (client_id, jti, int(exp) + 1))
            return cur.rowcount == 1
        return self._transaction(body)

    # --- asynchronous queries ---------------------------------------------------------------------------
    def submit_query(self, qid: str, owner: str, table_key: str, idem: str, digest: str, spec: dict,
                     expires: float, replica: str, now: float) -> dict:
        """The query of (owner, table, idempotency key): the one already known (unexpired) or the
        new one `qid` (its row, with `new` True)."""
        def body(run):
            run("DELETE FROM async_queries WHERE expires <= ?", (int(now),))
            run("INSERT INTO async_queries (id, owner, table_key, idem, digest, spec, status, error, expires, replica, "
                "heartbeat) VALUES (?, ?, ?, ?, ?, ?, 'pending', NULL, ?, ?, ?) ON CONFLICT DO NOTHING",
                (qid, owner, table_key, idem, digest, json.dumps(spec), int(expires), replica, int(now)))
            row = run("SELECT id, digest, spec, status, error, expires, replica, heartbeat FROM async_queries WHERE "
                      "owner = ? AND table_key = ? AND idem = ?", (owner, table_key, idem)).fetchone()
            return row
        row = self._transaction(body)
        return self._query_row(row, new=row[0] == qid)

    @staticmethod
    def _query_row(row, new: bool = False) -> dict:
        return {"id": row[0], "digest": row[1], "spec": json.loads(row[2]), "status": row[3],
                "error": json.loads(row[4]) if row[4] else None, "expires": row[5], "replica": row[6],
                "heartbeat": row[7], "new": new}

    def get_query(self, qid: str) -> dict | None:
        rows = self.query("SELECT id, digest, spec, status, error, expires, replica, heartbeat FROM async_queries "
                          "WHERE id = ?", (qid,))
        return self._query_row(rows[0]) if rows else None

    def finish_query(self, qid: str, error: dict | None) -> None:
        self._transaction(lambda run: run("UPDATE async_queries SET status = ?, error = ? WHERE id = ?",
                                          ("failed" if error else "done", json.dumps(error) if error else None, qid)))

    def beat(self, qids: list[str], now: float) -> None:
        if qids:
            self._transaction(lambda run: [run("UPDATE async_queries SET heartbeat = ? WHERE id = ?", (int(now), q))
                                           for q in qids])

    def take_over(self, qid: str, replica: str, stale_before: float, now: float) -> bool:
        """Claim a pending query whose replica stopped beating (True: this replica runs it now)."""
        cur = self._transaction(lambda run: run(
            "UPDATE async_queries SET replica = ?, heartbeat = ? WHERE id = ? AND status = 'pending' AND heartbeat < ?",
            (replica, int(now), qid, int(stale_before))))
        return cur.rowcount == 1


def open_store(url: str) -> StateStore:
    return StateStore(url)
