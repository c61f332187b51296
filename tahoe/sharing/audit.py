"""The audit log: one JSON line per API call and per file-URL redemption (who read what, when, how much, from
where), and its reading (`tahoe sharing audit`).

  1. The record's fields are `FIELDS`; tokens, signatures and file URLs are never part of it.
  2. `audit.path`: a file, written in batches with O_APPEND and rotated past `maxBytes` into `path.1` …
     `path.N` under a lock, or `-` for standard output; a crash loses at most `FLUSH_SECONDS`.
  3. `read_records`: the file and its rotated copies, oldest first, malformed lines skipped and counted."""

from __future__ import annotations

import collections
import glob
import json
import os
import re
import sys
import threading
import time
from datetime import datetime, timezone
from typing import Iterator, Optional

from .locks import exclusive_lock

__all__ = ["AuditLog", "read_records", "FIELDS", "FLUSH_SECONDS", "audit_files"]

FIELDS = ("time", "requestId", "replica", "recipient", "share", "schema", "table", "operation", "version",
          "startingVersion", "endingVersion", "timestamp", "predicateHints", "jsonPredicateHints", "limitHint",
          "files", "bytes", "redirected", "status", "latencyMs", "client", "userAgent", "authFailure", "refused")
FLUSH_SECONDS = 0.2


def _dumps(rec: dict) -> bytes:
    try:
        import orjson

        return orjson.dumps(rec) + b"\n"
    except ImportError:  # pragma: no cover - orjson is a dependency
        return (json.dumps(rec, separators=(",", ":")) + "\n").encode()


class AuditLog:
    """Writes audit records to a file (rotated) or standard output (see the module docstring)."""

    def __init__(self, path: str, max_bytes: int = 100 * 1024 * 1024, backup_count: int = 10):
        self.path = path
        self.max_bytes = max_bytes
        self.backup_count = backup_count
        self._queue: collections.deque = collections.deque()
        self._fd: Optional[int] = None
        self._ino: Optional[int] = None
        self._written = 0
        self._wake = threading.Event()
        self._stop = False
        self._flush_lock = threading.Lock()
        self._thread = threading.Thread(target=self._loop, name="sharing-audit", daemon=True)
        self._thread.start()

    def write(self, record: dict) -> None:
        """Queue one record (cheap: the request never waits for the disk)."""
        self._queue.append(record)

    # --- the writer -------------------------------------------------------------------------------------
    def _open(self) -> None:
        if self.path == "-":
            self._fd = sys.stdout.fileno()
            return
        os.makedirs(os.path.dirname(os.path.abspath(self.path)) or ".", exist_ok=True)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        st = os.fstat(self._fd)
        self._ino, self._written = st.st_ino, st.st_size

    def _reopen_if_rotated(self) -> None:
        """Another process rotated the file: write to the new one."""
        try:
            ino = os.stat(self.path).st_ino
        except FileNotFoundError:
            ino = None
        if ino != self._ino:
            os.close(self._fd)
            self._open()

    def _rotate(self) -> None:
        with exclusive_lock(self.path + ".lock"):
            try:
                st = os.stat(self.path)
            except FileNotFoundError:
                st = None
            if st is not None and st.st_ino == self._ino and st.st_size >= self.max_bytes:
                if self.backup_count == 0:
                    os.unlink(self.path)
                else:
                    for i in range(self.backup_count - 1, 0, -1):
                        src = f"{self.path}.{i}"
                        if os.path.exists(src):
                            os.replace(src, f"{self.path}.{i + 1}")
                    os.replace(self.path, f"{self.path}.1")
            os.close(self._fd)
            self._open()

    def flush(self) -> None:
        """Write every queued record now."""
        with self._flush_lock:
            if not self._queue:
                return
            if self._fd is None:
                self._open()
            elif self.path != "-":
                self._reopen_if_rotated()
            chunk = []
            while self._queue:
                chunk.append(_dumps(self._queue.popleft()))
            data = b"".join(chunk)
            view = memoryview(data)
            while view:
                n = os.write(self._fd, view)
                view = view[n:]
            self._written += len(data)
            if self.path != "-" and self._written >= self.max_bytes:
                self._rotate()

    def _loop(self) -> None:
        while not self._stop:
            self._wake.wait(FLUSH_SECONDS)
            try:
                self.flush()
            except Exception as e:  # noqa: BLE001 - the log must not take the server down; say why
                sys.stderr.write(f"tahoe sharing: cannot write the audit log {self.path}: {e}\n")
                time.sleep(1)

    def close(self) -> None:
        self._stop = True
        self._wake.set()
        self._thread.join(5)
        self.flush()
        if self._fd is not None and self.path != "-":
            os.close(self._fd)
            self._fd = None


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def audit_files(path: str) -> list[str]:
    """The audit file `path` and its rotated copies, oldest first."""
    rotated = [p for p in glob.glob(glob.escape(path) + ".*") if re.fullmatch(r"\d+", p[len(path) + 1:])]
    rotated.sort(key=lambda p: -int(p[len(path) + 1:]))
    return rotated + ([path] if os.path.exists(path) else [])


def read_records(paths: list[str], skipped: Optional[list] = None) -> Iterator[dict]:
    """Records of audit files (each with its rotated copies), oldest file first; a malformed line
    is skipped (and appended to `skipped` when given)."""
    for path in paths:
        for f in audit_files(path) if not re.search(r"\.\d+$", path) else [path]:
            with open(f, "rb") as fh:
                for line in fh:
                    if not line.strip():
                        continue
                    try:
                        rec = json.loads(line)
                    except ValueError:
                        if skipped is not None:
                            skipped.append((f, line[:80]))
                        continue
                    if isinstance(rec, dict):
                        yield rec
