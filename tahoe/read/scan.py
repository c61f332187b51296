"""A scan of one snapshot: plan (`plan_files`: which files) separate from execute (`to_arrow`: their rows).

  1. `filter` (SQL, an expression tree, or delta-rs DNF tuples) skips files by partition values and stats
     (`tahoe.expressions.file_mask`) and keeps the rows where it is TRUE; an unknown column is an
     AnalysisException before any file is read.
  2. `time_zone`: where zone-less timestamps are wall-clock time (`tahoe.protocol.timestamps`; UTC default).
  3. `file_filter`: an extra mask over the planned files; it may only drop files surely without a match."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator

import pyarrow as pa

from ..log.snapshot import Snapshot
from ..protocol.timestamps import normalize_zone_name

if TYPE_CHECKING:
    from ..expressions import Expression

__all__ = ["Scan", "plan_files", "plan_file_batches"]

FileFilter = Callable[[pa.Table], pa.Array]


def plan_files(snapshot: Snapshot, filter: Any = None, *, time_zone: str | None = None,
               columns: Iterable[str] | None = None) -> pa.Table:
    """The snapshot's active files (the log's add columns, all or `columns`) that may hold a row
    matching `filter` (see the module docstring); all of them when there is no filter."""
    wanted = list(columns) if columns is not None else None
    if filter is None:   # the expression engine (sqlglot and all) is imported only for a filter
        return snapshot.files_table(wanted)
    from ..expressions import as_expression, file_mask   # (a listing imports neither: test_startup rule 5)

    expr = as_expression(filter)
    if expr is None:
        return snapshot.files_table(wanted)
    need = None if wanted is None else list(dict.fromkeys(wanted + ["partitionValues", "stats"]))
    files = snapshot.files_table(need)
    if files.num_rows:
        mask = file_mask(expr, files, snapshot.schema, snapshot.partition_columns, snapshot.column_mapping_mode,
                         time_zone=normalize_zone_name(time_zone))
        if not mask.all():
            files = files.filter(pa.array(mask))
    return files.select(wanted) if wanted is not None else files


def plan_file_batches(snapshot: Snapshot, filter: Any = None, *, time_zone: str = "UTC",
                      columns: Iterable[str] | None = None) -> Iterator[pa.Table]:
    """`plan_files` a batch at a time (`Snapshot.files_batches`): the files of a big checkpoint
    are read, reconciled and filtered one batch at a time. The filter is parsed (and refused)
    here, before any batch is read."""
    wanted = list(columns) if columns is not None else None
    expr = None
    if filter is not None:
        from ..expressions import as_expression

        expr = as_expression(filter)
    if expr is None:
        return snapshot.files_batches(wanted)
    from ..expressions import check_columns, file_mask

    check_columns(expr, snapshot.schema)
    need = None if wanted is None else list(dict.fromkeys(wanted + ["partitionValues", "stats"]))

    def batches() -> Iterator[pa.Table]:
        for files in snapshot.files_batches(need):
            mask = file_mask(expr, files, snapshot.schema, snapshot.partition_columns, snapshot.column_mapping_mode,
                             time_zone=time_zone)
            if not mask.all():
                files = files.filter(pa.array(mask))
            if files.num_rows:
                yield files.select(wanted) if wanted is not None else files

    return batches()


class Scan:
    def __init__(self, snapshot: Snapshot, columns: Iterable[str] | None = None,
                 file_filter: FileFilter | None = None, limit: int | None = None, filter: Any = None,
                 time_zone: str | None = None):
        from ..expressions import as_expression, check_columns
        from .arrow_reader import ArrowFileReader

        self.snapshot = snapshot
        self.columns = list(columns) if columns is not None else None
        self.file_filter = file_filter
        self.limit = limit
        self.time_zone = normalize_zone_name(time_zone)
        self.filter: Expression | None = None
        read_columns = self.columns
        if filter is not None:
            self.filter = as_expression(filter)
        if self.filter is not None:
            bindings = check_columns(self.filter, snapshot.schema)
            if read_columns is not None:
                extra = [b.names[0] for b in bindings]
                read_columns = list(dict.fromkeys(read_columns + extra))

        self.reader = ArrowFileReader(snapshot.store, snapshot.table_root, snapshot.schema,
                                      snapshot.partition_columns, snapshot.column_mapping_mode, read_columns,
                                      time_zone=self.time_zone)
        if self.columns is None:
            self._out = self.reader.out_schema
        else:
            wanted = {c.lower() for c in self.columns}
            self._out = pa.schema([f for f in self.reader.out_schema if f.name.lower() in wanted])

    @property
    def schema(self) -> pa.Schema:
        return self._out

    def plan_files(self) -> pa.Table:
        files = plan_files(self.snapshot, self.filter, time_zone=self.time_zone)
        if self.file_filter is not None and files.num_rows:
            files = files.filter(self.file_filter(files))
        return files

    def _rows(self, t: pa.Table) -> pa.Table:
        if self.filter is not None and t.num_rows:
            from ..expressions import Scope, matches

            t = t.filter(matches(self.filter, Scope.of(t), time_zone=self.time_zone))
        if t.schema.names != self._out.names:
            t = t.select(self._out.names)
        return t

    def to_batches(self, threads: int = 4) -> Iterator[pa.Table]:
        remaining = self.limit
        for t in self.reader.read_files(self.plan_files(), threads=threads):
            t = self._rows(t)
            if remaining is not None:
                if remaining <= 0:
                    return
                t = t.slice(0, remaining)
                remaining -= t.num_rows
            yield t

    def to_arrow(self, threads: int = 4) -> pa.Table:
        parts = [t for t in self.to_batches(threads) if t.num_rows]
        if not parts:
            return self.schema.empty_table()
        return pa.concat_tables(parts)
