"""Delta tables by name, kept in Spark's own session catalog: an entry of provider `delta` whose location is the
table's directory (in memory, or the metastore with `enableHiveSupport()`); the Delta log stays the truth.

  1. `lookup` asks the catalog with `SHOW TABLE EXTENDED` (works over Connect too); `resolve` maps a
     statement's table to its path.
  2. `create_entry` / `drop_entry`; `with_table` creates or replaces a table with its entry, nothing half-done.
  3. Every statement sent here runs on Spark directly (`raw_sql`), not through tahoe's SQL layer."""

from __future__ import annotations

import dataclasses
import urllib.parse
from typing import Any

from ...errors import (
    AnalysisException, InvalidTableOperationError, TableAlreadyExistsError, TableNotFoundError,
    UnsupportedFeatureError,
)
from ...log import DeltaLog
from ...protocol.column_paths import quote_identifier
from .parser import TokenParser
from .state import in_passthrough, passthrough
from .statements import TableName
from ..types import to_spark_schema

__all__ = ["CatalogEntry", "lookup", "resolve", "Resolved", "create_entry", "drop_entry", "raw_sql",
           "qualified", "SESSION_CATALOG", "with_table", "table_name"]

SESSION_CATALOG = "spark_catalog"

def raw_sql(spark: Any, text: str) -> Any:
    """`spark.sql(text)` run by Spark itself."""
    with passthrough():
        return spark.sql(text)


def sql_string(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


@dataclasses.dataclass(frozen=True)
class CatalogEntry:
    database: str
    name: str
    provider: str | None
    table_type: str | None        # MANAGED | EXTERNAL | VIEW
    location: str | None          # a local path, or the URI (s3://...) as the catalog holds it
    temporary: bool = False
    view_text: str | None = None  # a view defined in SQL: its query ...
    view_database: str | None = None   # ... and the database its names were resolved in

    @property
    def is_delta(self) -> bool:
        return (self.provider or "").lower() == "delta" and self.location is not None and not self.temporary

    @property
    def qualified(self) -> str:
        return f"{SESSION_CATALOG}.{quote_identifier(self.database)}.{quote_identifier(self.name)}"


def _local(location: str) -> str:
    if location.startswith("file:"):
        rest = location[len("file:"):]
        if rest.startswith("//"):
            rest = rest[2:]
        return urllib.parse.unquote(rest)
    return location


def _current_database(spark: Any) -> str:
    return spark.catalog.currentDatabase()


def qualified(spark: Any, parts: tuple[str, ...]) -> tuple[str, str] | None:
    """(database, table) of a name in the session catalog, None for another catalog's name."""
    if len(parts) == 1:
        return _current_database(spark), parts[0]
    if len(parts) == 2:
        return parts[0], parts[1]
    if len(parts) == 3 and parts[0].lower() == SESSION_CATALOG:
        return parts[1], parts[2]
    return None


def lookup(spark: Any, parts: tuple[str, ...]) -> CatalogEntry | None:
    """The catalog's entry for a table name (a temporary view counts: it hides a table of its
    name), or None when there is none."""
    q = qualified(spark, parts)
    if q is None:
        return None
    db, name = q
    if any(c in name for c in "*|'\\"):
        return None
    if db.lower() != str(_current_database(spark)).lower():
        try:
            if not spark.catalog.databaseExists(db):
                return None
        except Exception:  # noqa: BLE001 - a catalog that cannot say: ask it below
            pass
    try:
        rows = raw_sql(spark, f"SHOW TABLE EXTENDED IN {quote_identifier(db)} LIKE {sql_string(name)}").collect()
    except Exception:  # noqa: BLE001 - no such database: no such table
        return None
    for row in rows:
        if str(row["tableName"]).lower() != name.lower():
            continue
        temporary = bool(row["isTemporary"])
        if temporary and len(parts) > 1:
            continue   # a qualified name never means a temporary view
        info: dict[str, str] = {}
        for line in str(row["information"]).splitlines():
            key, sep, value = line.partition(": ")
            if sep and key and not key.startswith(" "):
                info.setdefault(key.strip(), value.strip())
        location = info.get("Location")
        view_text, view_db = _view_of(str(row["information"]))
        return CatalogEntry(database=str(row["namespace"]) or db, name=str(row["tableName"]),
                            provider=info.get("Provider"), table_type=info.get("Type"),
                            location=_local(location) if location else None, temporary=temporary,
                            view_text=view_text, view_database=view_db)
    return None


_VIEW_KEYS = ("View Original Text: ", "View Schema Mode: ", "View Catalog and Namespace: ",
              "View Query Output Columns: ", "View Creation Time", "Schema: ", "Table Properties: ")


def _view_of(information: str) -> tuple[str | None, str | None]:
    """(query, database) of a view's `SHOW TABLE EXTENDED` information (the query may span
    lines: it runs to the next key); (None, None) for a table, or a view without SQL text (one
    made from a DataFrame)."""
    start = information.find("View Text: ")
    if start < 0:
        return None, None
    start += len("View Text: ")
    end = len(information)
    for key in _VIEW_KEYS:
        k = information.find("\n" + key, start)
        if 0 <= k < end:
            end = k
    text = information[start:end].strip() or None
    db = None
    for line in information.splitlines():
        if line.startswith("View Catalog and Namespace: "):
            parts = line[len("View Catalog and Namespace: "):].strip().split(".")
            if len(parts) == 2 and parts[0].lower() == SESSION_CATALOG:
                db = parts[1]
    return text, db


@dataclasses.dataclass(frozen=True)
class Resolved:
    """A statement's table: the Delta table's path, and its catalog entry when named."""
    path: str
    entry: CatalogEntry | None = None


def resolve(spark: Any, table: TableName, must_exist: bool = True) -> Resolved | None:
    """The Delta table a statement names: `delta.`/path`` and path strings are paths; a name is
    looked up in the catalog. None when the name is not a Delta table (another provider, a view,
    another catalog's table: Spark's to handle). A name the catalog does not know raises Spark's
    TABLE_OR_VIEW_NOT_FOUND when `must_exist`, else gives None."""
    if table.is_path:
        if table.format not in (None, "delta"):
            return None
        return Resolved(table.path)   # type: ignore[arg-type]
    entry = lookup(spark, table.parts)
    if entry is None:
        if must_exist and qualified(spark, table.parts) is not None:
            raise table_not_found(table)
        return None
    if not entry.is_delta:
        return None
    return Resolved(entry.location, entry)   # type: ignore[arg-type]


def table_not_found(table: TableName) -> TableNotFoundError:
    return TableNotFoundError(
        f"[TABLE_OR_VIEW_NOT_FOUND] The table or view {'.'.join(quote_identifier(p) for p in table.parts)} cannot be found. "
        f"Verify the spelling and correctness of the schema and catalog. SQLSTATE: 42P01")


def create_entry(spark: Any, parts: tuple[str, ...], schema_ddl: str, partition_columns: list[str],
                 location: str | None, comment: str | None) -> CatalogEntry:
    """Add a Delta table to the catalog (external at `location`, else managed: Spark places and
    creates its directory); returns the entry as the catalog now holds it."""
    q = qualified(spark, parts)
    if q is None:
        raise AnalysisException(f"tahoe keeps Delta tables in the session catalog ({SESSION_CATALOG}); "
                                f"{'.'.join(parts)} names another catalog")
    db, name = q
    text = f"CREATE TABLE {quote_identifier(db)}.{quote_identifier(name)} ({schema_ddl}) USING delta"
    if partition_columns:
        text += " PARTITIONED BY (" + ", ".join(quote_identifier(c) for c in partition_columns) + ")"
    if location is not None:
        text += " LOCATION " + sql_string(location)
    if comment:
        text += " COMMENT " + sql_string(comment)
    raw_sql(spark, text)
    entry = lookup(spark, (db, name))
    if entry is None or entry.location is None:
        raise AnalysisException(f"the catalog entry of {db}.{name} was not created")
    return entry


def drop_entry(spark: Any, entry: CatalogEntry) -> None:
    """Remove the entry (Spark deletes a managed table's directory with it)."""
    raw_sql(spark, f"DROP TABLE IF EXISTS {quote_identifier(entry.database)}.{quote_identifier(entry.name)}")


def spark_ddl(schema: Any) -> str:
    """A tahoe StructType as the column list of a Spark CREATE TABLE."""
    fields = []
    for f in to_spark_schema(schema).fields:
        col = f"{quote_identifier(f.name)} {f.dataType.simpleString()}"
        if not f.nullable:
            col += " NOT NULL"
        fields.append(col)
    return ", ".join(fields)


def with_table(spark: Any, table: TableName, mode: str, location: str | None, comment: str | None,
                make: Any, schema_of: Any, partition_columns: Any = lambda: []) -> Any:
    """Create (or replace) the Delta table `table` names with `make(path, replacing)`, keeping the
    catalog in step: a new named table gets its catalog entry first (managed: Spark places it),
    which is dropped again when `make` fails — nothing half-done. Returns what `make` returns;
    None when mode 'ignore' found the table."""
    if table.is_path:
        path = table.path
        exists = DeltaLog.for_table(path).exists()
        if exists and mode == "error":
            raise TableAlreadyExistsError(f"[TABLE_OR_VIEW_ALREADY_EXISTS] Cannot create table {table.text}: a Delta "
                                          f"table already exists there. SQLSTATE: 42P07")
        if exists and mode == "ignore":
            return None
        if not exists and mode == "replace":
            raise TableNotFoundError(_missing_replaced(table.text))
        return make(path, exists)
    entry = lookup(spark, table.parts)
    if entry is not None and not entry.temporary:
        if mode == "ignore":
            return None
        if mode == "error":
            raise TableAlreadyExistsError(f"[TABLE_OR_VIEW_ALREADY_EXISTS] Cannot create table or view "
                                          f"{entry.qualified} because it already exists. SQLSTATE: 42P07")
        if not entry.is_delta:
            raise UnsupportedFeatureError(f"{entry.qualified} is a {entry.provider} table: tahoe replaces Delta "
                                          f"tables only")
        if location is not None and _norm(location) != _norm(entry.location or ""):
            raise InvalidTableOperationError(f"cannot replace {entry.qualified} at a different location "
                                             f"({location}; the table is at {entry.location})")
        return make(entry.location, DeltaLog.for_table(entry.location).exists())
    if mode == "replace":
        raise TableNotFoundError(_missing_replaced(table.text))
    existing = location is not None and DeltaLog.for_table(location).exists()
    schema = schema_of()
    new_entry = create_entry(spark, table.parts, spark_ddl(schema), list(partition_columns()), location, comment)
    try:
        return make(new_entry.location, existing)
    except BaseException:
        drop_entry(spark, new_entry)   # managed: its directory goes too (it was made for this table)
        raise


def table_name(text: str) -> TableName:
    """A table name as a user writes it (`db.t`, `delta.`/path``)."""
    p = TokenParser(text)
    name = p.table_name()
    p.done()
    return name


def _norm(path: str) -> str:
    return path.rstrip("/")


def _missing_replaced(name: str) -> str:
    """Spark 4's error for REPLACE of a table that does not exist (CannotReplaceMissingTableException)."""
    return (f"[TABLE_OR_VIEW_NOT_FOUND] The table or view `{name}` cannot be found: it did not exist, so it cannot be "
            f"replaced. Use CREATE OR REPLACE TABLE to create the table. SQLSTATE: 42P01")
