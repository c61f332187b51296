"""Commit properties set around an operation (deltalake's `CommitProperties`), taken by the first
transaction the operation opens.

  1. `custom_metadata`: extra top-level `commitInfo` keys (`userMetadata` fills that field); tahoe's
     own fields are never overwritten.
  2. `app_transactions`: `txn` actions written as given — recorded, not checked (deltalake's form;
     an idempotent write that skips is `txnAppId` / `txnVersion`).
  3. `max_retries`: how many times the commit retries after losing a race.
  4. `create_checkpoint` / `cleanup_expired_logs` (deltalake's `PostCommitHookProperties`): False skips
     the checkpoint `delta.checkpointInterval` makes due; cleanup True runs after the commit, False never,
     None by `delta.enableExpiredLogCleanup` after a checkpoint.
"""

from __future__ import annotations

import contextlib
import dataclasses
from contextvars import ContextVar
from typing import Any, Iterator

from ..errors import InvalidTableOperationError
from ..protocol.actions import SetTransaction

__all__ = ["CommitProperties", "commit_properties", "take_commit_properties"]


@dataclasses.dataclass
class CommitProperties:
    custom_metadata: dict[str, Any] = dataclasses.field(default_factory=dict)
    app_transactions: list[SetTransaction] = dataclasses.field(default_factory=list)
    max_retries: int | None = None
    create_checkpoint: bool = True
    cleanup_expired_logs: bool | None = None
    taken: bool = False


_CURRENT: ContextVar[CommitProperties | None] = ContextVar("tahoe_commit_properties", default=None)


@contextlib.contextmanager
def commit_properties(custom_metadata: dict[str, Any] | None = None,
                      app_transactions: list[SetTransaction] | None = None,
                      max_retries: int | None = None, create_checkpoint: bool = True,
                      cleanup_expired_logs: bool | None = None) -> Iterator[CommitProperties]:
    """The properties for the first transaction opened inside the block (this thread / task)."""
    if max_retries is not None and (not isinstance(max_retries, int) or max_retries < 0):
        raise InvalidTableOperationError(f"max_commit_retries must be an integer >= 0, not {max_retries!r}")
    ids = [t.app_id for t in app_transactions or ()]
    if len(ids) != len(set(ids)):
        raise InvalidTableOperationError(f"app_transactions name an application id twice: {ids}")
    props = CommitProperties(dict(custom_metadata or {}), list(app_transactions or ()), max_retries,
                             bool(create_checkpoint), None if cleanup_expired_logs is None else bool(cleanup_expired_logs))
    token = _CURRENT.set(props)
    try:
        yield props
    finally:
        _CURRENT.reset(token)


def take_commit_properties() -> CommitProperties | None:
    """The block's properties for the transaction opening now, once: later transactions of the
    same operation (a post-commit compaction) get none."""
    props = _CURRENT.get()
    if props is None or props.taken:
        return None
    props.taken = True
    return props
