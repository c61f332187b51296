"""In-commit timestamps (spec "In-Commit Timestamps"; delta-spark's InCommitTimestampUtils).

With `delta.enableInCommitTimestamps` on, every commit records `inCommitTimestamp` in its
commitInfo (also its `timestamp`):
  1. strictly after the previous commit's timestamp — its inCommitTimestamp, or its file's
     modification time when this commit enables the feature (`commit_timestamp`);
  2. the enabling commit of a table with earlier versions records its version and timestamp
     (`delta.inCommitTimestampEnablementVersion` / `...Timestamp`);
  3. a commit that keeps the feature on but replaces the metadata (REPLACE, CLONE) keeps the
     enablement it had.
"""

from __future__ import annotations

import dataclasses

from ..protocol.actions import Metadata
from ..protocol.properties import bool_property, raw_property
from ..protocol.timestamps import now_ms
from .attempt import Attempt
from .conflicts import WinningCommit

__all__ = ["assign_timestamp", "commit_timestamp", "ICT_KEY", "ICT_VERSION_KEY", "ICT_TIMESTAMP_KEY"]

ICT_KEY = "delta.enableInCommitTimestamps"
ICT_VERSION_KEY = "delta.inCommitTimestampEnablementVersion"
ICT_TIMESTAMP_KEY = "delta.inCommitTimestampEnablementTimestamp"


def assign_timestamp(a: Attempt) -> None:
    """Rules 1-3 for the attempt: its `in_commit_timestamp`, and the enablement properties."""
    if not bool_property(a.configuration, ICT_KEY):
        return
    ict = max(now_ms(), a.previous_timestamp + 1)
    a.in_commit_timestamp = ict
    prior = a.previous_metadata.configuration if a.previous_metadata is not None else {}
    was_on = a.previous_metadata is not None and a.previous_version >= 0 and bool_property(prior, ICT_KEY)
    out = a.new_metadata
    if out is not None and not was_on and a.version > 0:
        conf = dict(out.configuration)
        conf[ICT_VERSION_KEY] = str(a.version)
        conf[ICT_TIMESTAMP_KEY] = str(ict)
        a.set_metadata(dataclasses.replace(out, configuration=conf))
    elif out is not None and was_on and raw_property(prior, ICT_VERSION_KEY) is not None and \
            raw_property(out.configuration, ICT_VERSION_KEY) is None:
        conf = dict(out.configuration)
        for k in (ICT_VERSION_KEY, ICT_TIMESTAMP_KEY):
            if raw_property(prior, k) is not None:
                conf[k] = raw_property(prior, k)
        a.set_metadata(dataclasses.replace(out, configuration=conf))


def commit_timestamp(w: WinningCommit, metadata: Metadata | None) -> int | None:
    """The timestamp of a winning commit that the next commit's must exceed: its
    inCommitTimestamp when the table (`metadata`, as of that commit) has the feature on, else its
    file's modification time (or the inCommitTimestamp when the time is unknown)."""
    ts = w.in_commit_timestamp
    if ts is None or not (metadata and bool_property(metadata.configuration, ICT_KEY)):
        ts = w.file_timestamp if w.file_timestamp is not None else ts
    return None if ts is None else int(ts)
