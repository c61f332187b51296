"""Directory-based access for the recipient (spec "Access Modes", `dir`): instead of pre-signed
file URLs, the server hands out temporary cloud credentials for the table's directory
(`…/temporary-table-credentials`), and the client reads the table itself — its Delta log with
tahoe's log core (`tahoe.log.DeltaLog` on the S3 log store), its rows with tahoe's Spark-free
reader (`tahoe.read.Scan`, `tahoe.read.changes`) — so time travel, data skipping, deletion
vectors, column mapping and change data work exactly as on a table of one's own.

Owns: checking that the table offers `dir` (its metaData's `accessModes`; else
`AccessModeError`), turning the vended `awsTempCredentials` into S3 store options and an
`azureUserDelegationSas` into Azure ones (the caller's `storage_options` — an endpoint, a region —
added; the credentials always win), and the reads. A GCP token is refused by name. The
credentials are obtained once per read; a read longer than their lifetime fails when they expire
(the server's `durationSeconds`, an hour by default).
"""

from __future__ import annotations

from typing import Any, Iterator, Optional

import pyarrow as pa

from ..errors import DeltaError, UnsupportedFeatureError
from ..log import DeltaLog
from .model import Table
from .rest import RestClient

__all__ = ["AccessModeError", "open_table_log", "scan_directly", "changes_directly", "ACCESS_MODES"]

ACCESS_MODES = ("url", "dir")


class AccessModeError(DeltaError, ValueError):
    """The table cannot be read in the access mode asked (or the mode is unknown)."""


def check_access_mode(access_mode: str) -> None:
    if access_mode not in ACCESS_MODES:
        raise AccessModeError(f"unknown access_mode {access_mode!r}: use 'url' (pre-signed file URLs) or 'dir' "
                              f"(temporary credentials for the table's directory)")


def open_table_log(rest: RestClient, table: Table, storage_options: Optional[dict] = None) -> DeltaLog:
    """The shared table's Delta log, opened with temporary credentials from the server."""
    md = rest.metadata(table, "delta,parquet").metadata
    modes = md.get("accessModes") or ["url"]
    name = f"{table.share}.{table.schema}.{table.name}"
    if "dir" not in modes:
        raise AccessModeError(f"table {name} is not shared for directory-based access (its accessModes are "
                              f"{', '.join(modes)}): read it with access_mode='url'")
    creds = rest.temporary_credentials(table)
    aws = creds.get("awsTempCredentials")
    sas = creds.get("azureUserDelegationSas")
    opts: dict[str, Any] = dict(storage_options or {})
    if isinstance(aws, dict):
        opts.update({"aws_access_key_id": aws["accessKeyId"], "aws_secret_access_key": aws["secretAccessKey"],
                     "aws_session_token": aws.get("sessionToken")})
    elif isinstance(sas, dict) and sas.get("sasToken"):
        opts = {k: v for k, v in opts.items() if "key" not in str(k).lower() and "secret" not in str(k).lower()}
        opts["azure_storage_sas_key"] = sas["sasToken"]
    else:
        kind = next((k for k in ("gcpOauthToken",) if k in creds), "unknown")
        raise UnsupportedFeatureError(f"table {name}: the server vended {kind} credentials; tahoe's client reads "
                                      f"directly with AWS (s3://) and Azure (SAS) credentials — use access_mode='url'")
    return DeltaLog.for_table(creds["location"], opts)


def scan_directly(rest: RestClient, table: Table, version: Optional[int], timestamp: Optional[str],
                  limit: Optional[int], row_filter_of, storage_options: Optional[dict] = None,
                  workers: int = 8) -> tuple[pa.Schema, Iterator[pa.RecordBatch]]:
    """The schema and record batches of the table (as of `version` / `timestamp`), read from its
    directory. `row_filter_of(table_schema)` gives the row filter (a `tahoe.expressions`
    expression, or None): files whose stats exclude it are not read."""
    from ..read import Scan

    log = open_table_log(rest, table, storage_options)
    if timestamp is not None:
        version = log.version_at_timestamp(timestamp)
    snap = log.snapshot(version)
    scan = Scan(snap, filter=row_filter_of(snap.schema), limit=limit)

    def batches() -> Iterator[pa.RecordBatch]:
        for t in scan.to_batches(threads=workers):
            for b in t.to_batches():
                if b.num_rows:
                    yield b
    return scan.schema, batches()


def changes_directly(rest: RestClient, table: Table, starting_version: Optional[int], ending_version: Optional[int],
                     starting_timestamp: Optional[str], ending_timestamp: Optional[str],
                     storage_options: Optional[dict] = None) -> pa.Table:
    """The change data feed of versions start..end (inclusive), read from the table's directory:
    the table's columns, `_change_type`, `_commit_version`, `_commit_timestamp` (timestamp[us,
    UTC]). Timestamps resolve as the Read Change Data Feed API does: the start to the first
    version at or after it, the end to the last version at or before it."""
    from ..read.changes import read_changes_arrow

    log = open_table_log(rest, table, storage_options)
    start = starting_version if starting_version is not None else log.version_at_or_after(starting_timestamp)
    end = ending_version
    if ending_timestamp is not None:
        end = log.version_at_or_before(ending_timestamp)
    return read_changes_arrow(log, start, end)
