"""`tahoe.Table`: the Spark-free facade over one Delta table (in the spirit of delta-rs's
`DeltaTable`). Open a table at its latest version, a version or a timestamp; ask for its schema,
protocol, metadata, files and history; read its rows as Arrow or pandas.

    t = Table("/data/events")
    t.version, t.schema, t.files()
    t.to_arrow(columns=["id"])
    Table("/data/events", version=3).to_pandas()
"""

from __future__ import annotations

from typing import Any, Iterable

import pyarrow as pa

from .log import DeltaLog, Snapshot
from .read import Scan

__all__ = ["Table"]


class Table:
    def __init__(self, uri: str, version: int | None = None, timestamp: Any = None,
                 storage_options: dict | None = None):
        self.uri = uri
        self.log = DeltaLog.for_table(uri, storage_options)
        self.snapshot: Snapshot = self.log.snapshot(version=version, timestamp=timestamp)

    @classmethod
    def _from_snapshot(cls, log: DeltaLog, snapshot: Snapshot) -> "Table":
        t = cls.__new__(cls)
        t.uri = log.table_root
        t.log = log
        t.snapshot = snapshot
        return t

    # --- the version -------------------------------------------------------------------------
    @property
    def version(self) -> int:
        return self.snapshot.version

    @property
    def table_root(self) -> str:
        return self.log.table_root

    def load_version(self, version: int) -> "Table":
        return Table._from_snapshot(self.log, self.log.snapshot(version=version))

    def load_as_of(self, timestamp: Any) -> "Table":
        return Table._from_snapshot(self.log, self.log.snapshot(timestamp=timestamp))

    def refresh(self) -> "Table":
        self.snapshot = self.log.snapshot()
        return self

    # --- metadata ----------------------------------------------------------------------------
    @property
    def schema(self):
        return self.snapshot.schema

    @property
    def protocol(self):
        return self.snapshot.protocol

    @property
    def metadata(self):
        return self.snapshot.metadata

    @property
    def partition_columns(self) -> list[str]:
        return self.snapshot.partition_columns

    def files(self, columns: Iterable[str] | None = None) -> pa.Table:
        """The active files (Arrow, ADD_SCHEMA columns)."""
        return self.snapshot.files_table(columns)

    def file_uris(self) -> list[str]:
        from .storage import resolve_data_path

        return [resolve_data_path(self.table_root, p) for p in self.files(["path"]).column("path").to_pylist()]

    def history(self, limit: int | None = None) -> list[dict]:
        return [e.to_dict() for e in self.log.history(limit)]

    # --- rows --------------------------------------------------------------------------------
    def scan(self, columns: Iterable[str] | None = None, **kw) -> Scan:
        return Scan(self.snapshot, columns=columns, **kw)

    def to_arrow(self, columns: Iterable[str] | None = None) -> pa.Table:
        return self.scan(columns).to_arrow()

    def to_pandas(self, columns: Iterable[str] | None = None):
        return self.to_arrow(columns).to_pandas()

    def __repr__(self) -> str:
        return f"Table({self.table_root!r}, version={self.version})"
