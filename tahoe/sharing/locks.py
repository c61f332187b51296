"""An exclusive advisory lock on a local file, held across processes: the recipients file's
read-modify-write (`recipients.FileBackend`) and the one-time creation of a recipient's client
environment (`official_client.ensure_env`) take it, so that concurrent processes wait for each
other instead of losing one another's work."""

from __future__ import annotations

import contextlib
import os
from typing import Iterator

__all__ = ["exclusive_lock"]


@contextlib.contextmanager
def exclusive_lock(path: str) -> Iterator[None]:
    """Hold an exclusive lock on `path` (created if missing) until the block ends; other
    processes taking it wait."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            import fcntl
        except ImportError:  # Windows
            import msvcrt

            msvcrt.locking(fd, msvcrt.LK_LOCK, 1)
            try:
                yield
            finally:
                os.lseek(fd, 0, os.SEEK_SET)
                msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)
            return
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
