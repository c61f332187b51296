"""The Delta SQL statements tahoe runs itself, as values (`tahoe.spark.sql.parser` makes them,
`tahoe.spark.sql.commands` runs them): delta-spark's own statements (`VACUUM`, `OPTIMIZE`,
`DESCRIBE HISTORY`, `RESTORE`, `CONVERT TO DELTA`, `REORG`, `GENERATE`, `CLONE`, ...) and the Spark
statements delta-spark's catalog executes on Delta tables (`MERGE INTO`, `UPDATE`, `DELETE FROM`,
`INSERT`, `CREATE` / `REPLACE TABLE`, `ALTER TABLE`, `DROP TABLE`, `TRUNCATE TABLE`, `DESCRIBE TABLE`,
`SHOW TBLPROPERTIES`, `SHOW COLUMNS`). Expressions, conditions and queries inside them are kept as
their SQL text.
"""

from __future__ import annotations

import dataclasses

__all__ = [
    "TableName", "Temporal", "ColumnDef", "Vacuum", "DescribeDetail", "DescribeHistory", "DescribeTable",
    "Generate", "Convert", "Restore", "Optimize", "Reorg", "Clone", "CreateTable", "AlterTable", "MergeClause",
    "Merge", "Update", "Delete", "Insert", "DropTable", "Truncate", "ShowTblProperties", "ShowColumns",
]


# --- the parts of statements ------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class TableName:
    """A table a statement names: catalog parts (`db.t`), or a path (`delta.`/p``, or a path
    string where delta-spark's grammar takes one). `text` is how the statement wrote it."""
    parts: tuple[str, ...] = ()
    path: str | None = None
    text: str = ""
    format: str | None = None     # `parquet` of parquet.`/p` (CONVERT TO DELTA, CLONE), `iceberg`, `delta`

    @property
    def is_path(self) -> bool:
        return self.path is not None


@dataclasses.dataclass(frozen=True)
class Temporal:
    """`VERSION AS OF n` / `TIMESTAMP AS OF 'text'` (or an expression, kept as SQL text)."""
    version: int | None = None
    timestamp: str | None = None
    timestamp_expr: str | None = None


@dataclasses.dataclass(frozen=True)
class ColumnDef:
    name: str
    type_sql: str
    nullable: bool = True
    comment: str | None = None
    generated_as: str | None = None            # GENERATED ALWAYS AS (expr)
    identity: tuple[int, int, bool] | None = None   # (start, step, allow explicit inserts)
    default_sql: str | None = None
    parent: tuple[str, ...] = ()               # ADD COLUMNS (s.inner ...): the struct it goes into


@dataclasses.dataclass(frozen=True)
class Vacuum:
    table: TableName
    retain_hours: float | None = None
    dry_run: bool = False
    lite: bool = False
    inventory_table: TableName | None = None   # USING INVENTORY t
    inventory_query: str | None = None         # USING INVENTORY (query)


@dataclasses.dataclass(frozen=True)
class DescribeDetail:
    table: TableName


@dataclasses.dataclass(frozen=True)
class DescribeHistory:
    table: TableName
    limit: int | None = None


@dataclasses.dataclass(frozen=True)
class DescribeTable:
    table: TableName
    extended: bool = False
    column: str | None = None


@dataclasses.dataclass(frozen=True)
class Generate:
    mode: str
    table: TableName


@dataclasses.dataclass(frozen=True)
class Convert:
    table: TableName
    collect_stats: bool = True
    partition_schema: str | None = None


@dataclasses.dataclass(frozen=True)
class Restore:
    table: TableName
    temporal: Temporal


@dataclasses.dataclass(frozen=True)
class Optimize:
    table: TableName
    where: str | None = None
    zorder: tuple[str, ...] = ()
    full: bool = False                          # OPTIMIZE t FULL (clustered tables)


@dataclasses.dataclass(frozen=True)
class Reorg:
    table: TableName
    where: str | None = None


@dataclasses.dataclass(frozen=True)
class Clone:
    table: TableName
    source: TableName
    shallow: bool
    mode: str                                  # "error" | "ignore" | "replace" | "overwrite"
    temporal: Temporal | None = None
    properties: tuple[tuple[str, str], ...] = ()
    location: str | None = None


@dataclasses.dataclass(frozen=True)
class CreateTable:
    table: TableName
    mode: str                                  # "error" | "ignore" | "replace" | "overwrite"
    provider: str | None = None
    columns: tuple[ColumnDef, ...] | None = None
    partition_by: tuple[str, ...] = ()
    partition_columns: tuple[ColumnDef, ...] = ()   # PARTITIONED BY (col type) in a CTAS-less form
    cluster_by: tuple[str, ...] | None = None
    location: str | None = None
    comment: str | None = None
    properties: tuple[tuple[str, str], ...] = ()
    options: tuple[tuple[str, str], ...] = ()
    query: str | None = None


@dataclasses.dataclass(frozen=True)
class AlterTable:
    """`action` is one of: ("add_constraint", name, expr), ("drop_constraint", name, if_exists),
    ("drop_feature", name, truncate_history), ("cluster_by", cols | None), ("add_columns",
    ColumnDefs, positions), ("rename_column", old, new), ("drop_columns", names, if_exists),
    ("alter_column", name, changes: dict), ("set_properties", items), ("unset_properties", keys,
    if_exists), ("replace_columns", ColumnDefs), ("sync_identity", name). `changes` of CHANGE
    COLUMN's Hive form (`CHANGE COLUMN a a INT COMMENT 'c' FIRST`) carry "new_name" and
    "type"."""
    table: TableName
    action: tuple


@dataclasses.dataclass(frozen=True)
class MergeClause:
    kind: str                 # "matched" | "notMatched" | "notMatchedBySource"
    action: str               # "update" | "delete" | "insert"
    condition: str | None
    assignments: tuple[tuple[str, str], ...] | None    # None: UPDATE SET * / INSERT *


@dataclasses.dataclass(frozen=True)
class Merge:
    target: TableName
    target_alias: str | None
    source_table: TableName | None
    source_query: str | None
    source_temporal: Temporal | None
    source_alias: str | None
    condition: str
    clauses: tuple[MergeClause, ...]
    schema_evolution: bool = False


@dataclasses.dataclass(frozen=True)
class Update:
    table: TableName
    alias: str | None
    assignments: tuple[tuple[str, str], ...]
    where: str | None


@dataclasses.dataclass(frozen=True)
class Delete:
    table: TableName
    alias: str | None
    where: str | None


@dataclasses.dataclass(frozen=True)
class Insert:
    table: TableName
    overwrite: bool
    query: str
    columns: tuple[str, ...] | None = None
    replace_where: str | None = None
    by_name: bool = False
    partition_spec: tuple[tuple[str, str | None], ...] | None = None
    schema_evolution: bool = False             # INSERT WITH SCHEMA EVOLUTION INTO


@dataclasses.dataclass(frozen=True)
class DropTable:
    table: TableName
    if_exists: bool = False


@dataclasses.dataclass(frozen=True)
class Truncate:
    table: TableName


@dataclasses.dataclass(frozen=True)
class ShowTblProperties:
    table: TableName
    key: str | None = None


@dataclasses.dataclass(frozen=True)
class ShowColumns:
    table: TableName
