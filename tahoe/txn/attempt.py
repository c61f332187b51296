"""One attempt at writing a transaction as a version: what the writer rules read and complete
before the commit file is written (`Attempt`). The rules themselves live in modules named after
their spec sections; `tahoe.txn.transaction.WRITER_RULES` applies them in order.
"""

from __future__ import annotations

import dataclasses

from ..protocol.actions import AddFile, DomainMetadata, Metadata, Protocol, RemoveFile

__all__ = ["Attempt"]


@dataclasses.dataclass
class Attempt:
    """The actions of one attempt at `version`, before commitInfo.

    Invariants:
      1. `protocol` and `metadata` are those in force at `version`;
      2. `new_metadata` is the metaData action the attempt writes (None: unchanged) and, when
         set, is `metadata` (`set_metadata` keeps both);
      3. `previous_*` describe the newest version known before `version`: the read snapshot, or
         the last winning commit the transaction was rebased over (`previous_version` -1: none).
    """
    table_root: str
    operation: str
    version: int
    protocol: Protocol
    metadata: Metadata
    new_metadata: Metadata | None
    previous_version: int
    previous_metadata: Metadata | None
    previous_timestamp: int                 # commit timestamp of `previous_version` (ms), 0 before version 0
    row_id_high_water_mark: int             # of `previous_version`; -1: none assigned yet
    read_row_id_high_water_mark: int        # of the read snapshot
    adds: list[AddFile]
    removes: list[RemoveFile]
    removes_with_row_ids: list[RemoveFile]  # `removes` with their adds' row ids (row tracking)
    domains: dict[str, DomainMetadata]      # set by the transaction (user and system domains)
    identity_updates: dict[str, int]        # identity column -> high-water mark to advance to
    protect_history: bool                   # a feature drop that protects the checkpoints before it
    tags: dict[str, str]                    # commitInfo tags
    rule_domains: list[DomainMetadata] = dataclasses.field(default_factory=list)   # written by the rules
    in_commit_timestamp: int | None = None

    @property
    def configuration(self) -> dict[str, str]:
        return self.metadata.configuration

    def set_metadata(self, metadata: Metadata) -> None:
        """Write `metadata` as this attempt's metaData action (invariant 2)."""
        self.new_metadata = self.metadata = metadata
