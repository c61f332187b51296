"""Commit provenance (spec "Commit Provenance Information"): the `commitInfo` action that opens
every commit tahoe writes, with delta-spark's fields and forms.

Fields, in order: `inCommitTimestamp` (with in-commit timestamps on), `timestamp`, `operation`,
`operationParameters` (strings as they are, other values as JSON), `readVersion`,
`isolationLevel`, `isBlindAppend`, `operationMetrics` (values as strings), `userMetadata`, `tags`,
`engineInfo` (`<engine> tahoe/<version>`), `txnId`.
"""

from __future__ import annotations

import json
from typing import Any

from ..protocol.actions import CommitInfo
from ..protocol.timestamps import now_ms
from ..version import __version__
from .attempt import Attempt

__all__ = ["commit_info"]


def _param(v: Any) -> str:
    """operationParameters values as delta-spark writes them: strings as is, the rest as JSON."""
    if isinstance(v, str):
        return v
    return json.dumps(v, separators=(",", ":"), default=str)


def _metric(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def commit_info(a: Attempt, *, operation_parameters: dict, read_version: int, isolation_level: str,
                blind_append: bool, operation_metrics: dict | None, user_metadata: str | None,
                engine_info: str | None, txn_id: str, custom_metadata: dict | None = None) -> CommitInfo:
    """The attempt's commitInfo (the fields of the module docstring); `custom_metadata` (deltalake's
    CommitProperties) adds top-level keys after them, its `userMetadata` filling that field."""
    engine = f"tahoe/{__version__}"
    if engine_info:
        engine = f"{engine_info} {engine}"
    ict = a.in_commit_timestamp
    ci: dict[str, Any] = {}
    if ict is not None:
        ci["inCommitTimestamp"] = ict
    ci["timestamp"] = ict if ict is not None else now_ms()
    ci["operation"] = a.operation
    # None leaves a parameter out — except CREATE / REPLACE TABLE's `description`, which
    # delta-spark always writes (`"description":null` when the table has none)
    ci["operationParameters"] = {k: (None if v is None else _param(v))
                                 for k, v in operation_parameters.items()
                                 if v is not None or (k == "description" and "TABLE" in a.operation)}
    if read_version >= 0:
        ci["readVersion"] = read_version
    ci["isolationLevel"] = isolation_level
    ci["isBlindAppend"] = blind_append
    if operation_metrics:
        ci["operationMetrics"] = {k: _metric(v) for k, v in operation_metrics.items() if v is not None}
    if user_metadata is not None:
        ci["userMetadata"] = user_metadata
    if a.tags:
        ci["tags"] = a.tags
    ci["engineInfo"] = engine
    ci["txnId"] = txn_id
    for k, v in (custom_metadata or {}).items():
        if k == "userMetadata" and user_metadata is None:
            ci[k] = v if isinstance(v, str) else json.dumps(v, separators=(",", ":"), default=str)
        elif k not in ci:
            ci[k] = v
    return CommitInfo(ci)
