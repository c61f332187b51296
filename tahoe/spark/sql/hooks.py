"""Where Delta SQL and Delta tables by name reach PySpark's own calls, classic and Connect, in enabled sessions
(`tahoe.spark.sql`); installed by `tahoe.spark.patches`. Anything not a Delta table goes to Spark untouched.

  1. `SparkSession.sql`: Delta's statements (`commands`), Delta table references (`relations`).
  2. `SparkSession.table`, `DataFrameReader.table` (with `versionAsOf` / `timestampAsOf`): tahoe's scan.
  3. `DataFrameWriter.saveAsTable` / `insertInto`, `DataFrameWriterV2` (`df.writeTo(name)` and its builders).
  4. `DataStreamReader.table`, `DataStreamWriter.toTable`: streams on the table's path.
Errors reach the caller as tahoe's class that is also Spark's `AnalysisException` (`surfacing.spark_facing`)."""

from __future__ import annotations

from typing import Any, Callable

from typing import TYPE_CHECKING

from ...errors import DeltaError, ParseException, UnsupportedFeatureError
from ...protocol.column_paths import quote_identifier
from .. import internals
from .state import in_passthrough, is_enabled, passthrough

if TYPE_CHECKING:  # pragma: no cover
    from .statements import TableName

__all__ = ["run_sql"]


def _session_of(obj: Any) -> Any:
    return internals.session_of(obj)


def _enabled(spark: Any) -> bool:
    return spark is not None and not in_passthrough() and is_enabled(spark)


def _facing(e: DeltaError) -> BaseException:
    from ..surfacing import spark_facing

    return spark_facing(e)


def _name(text: str) -> TableName:
    from .catalog import table_name

    return table_name(text)


def run_sql(spark: Any, original: Callable, text: str, args: Any, kwargs: dict) -> Any:
    """`spark.sql(text)` in an enabled session (see the module docstring)."""
    from ...expressions.parse import creates_table_using
    from .catalog import resolve
    from .commands import execute
    from .parser import parse_statement
    from .relations import rewrite

    try:
        try:
            stmt = parse_statement(text)
        except ParseException as e:
            target = getattr(e, "target", None)
            ours = getattr(e, "delta_only", False) or creates_table_using(text, "delta")
            if not ours and target is not None:
                ours = resolve(spark, target, must_exist=False) is not None
            if ours:
                raise
            stmt = None
        if stmt is not None:
            if args:
                raise UnsupportedFeatureError("parameter markers (args=) in Delta statements are not supported by "
                                              "tahoe: put the values into the statement")
            result = execute(spark, stmt)
            if result is not None:
                return result
        rewritten, frames = rewrite(spark, text, escape=not kwargs)
    except DeltaError as e:
        raise _facing(e) from None
    with passthrough():
        if args is None and not kwargs and not frames:
            return original(spark, rewritten)
        return original(spark, rewritten, args, **kwargs, **frames)


def _creates_delta_table(text: str) -> bool:
    from ...expressions.parse import creates_table_using

    return creates_table_using(text, "delta")


def _catalog_message() -> str:
    from ..options import CATALOG_MESSAGE

    return CATALOG_MESSAGE


def _refuse_by_name(spark: Any) -> bool:
    """In a session where tahoe registered `delta` but Delta SQL is off, a table by name would be
    a catalog entry no read or write reaches: refused, saying to `enable` (tahoe's SQL layer)."""
    from ..session import registered

    return registered(spark)


def session_sql(original: Callable, self: Any, sqlQuery: Any, args: Any = None, **kwargs: Any) -> Any:
    if not _enabled(self):
        if not in_passthrough() and isinstance(sqlQuery, str) and _refuse_by_name(self) and \
                _creates_delta_table(sqlQuery):
            raise _facing(UnsupportedFeatureError(_catalog_message()))
        if args is None and not kwargs:
            return original(self, sqlQuery)
        return original(self, sqlQuery, args, **kwargs)
    return run_sql(self, original, sqlQuery, args, kwargs)


def _delta_entry(spark: Any, name: str):
    """The Delta table `name` resolves to (a catalog name or delta.`/path`), else None."""
    from .catalog import resolve
    try:
        table = _name(name)
    except DeltaError:
        return None
    return resolve(spark, table, must_exist=False)


def _sql_view(spark: Any, name: str) -> bool:
    """Whether `name` is a view defined in SQL (its query may read Delta tables: read through
    `spark.sql`, which reads them by tahoe; see `tahoe.spark.sql.relations`)."""
    from .catalog import lookup

    try:
        table = _name(name)
    except DeltaError:
        return False
    if table.is_path:
        return False
    entry = lookup(spark, table.parts)
    return entry is not None and entry.view_text is not None


def _read(spark: Any, path: str, options: dict):
    from ..session import session_timestamp_ms
    from ..delta_table import read_delta

    opts = {str(k).lower(): v for k, v in options.items()}
    version = opts.get("versionasof")
    timestamp = opts.get("timestampasof")
    return read_delta(spark, path, version=int(version) if version is not None else None,
                      timestamp=session_timestamp_ms(spark, str(timestamp)) if timestamp is not None else None)


def _reader_options(reader: Any) -> dict:
    return dict(reader.__dict__.get("_tahoe_options") or {})


def session_table(original: Callable, self: Any, tableName: str) -> Any:
    if _enabled(self):
        r = _delta_entry(self, tableName)
        if r is not None:
            try:
                return _read(self, r.path, {})
            except DeltaError as e:
                raise _facing(e) from None
        if _sql_view(self, tableName):
            return self.sql(f"SELECT * FROM {tableName}")
    return original(self, tableName)


def _table(original: Callable, self: Any, tableName: str, streaming: bool) -> Any:
    """`table(name)` of a reader: a Delta table by tahoe (with the time travel options given)."""
    spark = _session_of(self)
    if _enabled(spark):
        r = _delta_entry(spark, tableName)
        if r is not None:
            try:
                if streaming:
                    return self.format("delta").load(r.path)
                return _read(spark, r.path, _reader_options(self))
            except DeltaError as e:
                raise _facing(e) from None
        if not streaming and not _reader_options(self) and _sql_view(spark, tableName):
            return spark.sql(f"SELECT * FROM {tableName}")
    return original(self, tableName)


def reader_table(original: Callable, self: Any, tableName: str) -> Any:
    return _table(original, self, tableName, False)


def stream_reader_table(original: Callable, self: Any, tableName: str) -> Any:
    return _table(original, self, tableName, True)


def _writer_format(w: Any) -> str:
    from ..calls import writer_state

    return writer_state(w)[0].lower()


def _writer_mode(w: Any) -> str:
    return internals.writer_mode(w).lower()


def _writer_options(w: Any) -> dict:
    return dict(w.__dict__.get("_tahoe_write_options") or {})


def _create_named(spark: Any, name: str, df: Any, partition_by: list, location: str | None,
                  write: Callable[[str, bool], Any]) -> Any:
    """A new Delta table `name` written by `write(path, existing)` with `df`'s schema (catalog entry
    first, dropped again on failure)."""
    from ..types import from_spark_schema
    from .catalog import create_entry, drop_entry, spark_ddl

    table = _name(name)
    if table.is_path:
        return write(table.path, False)   # type: ignore[arg-type]
    entry = create_entry(spark, table.parts, spark_ddl(from_spark_schema(df.schema)), partition_by, location, None)
    try:
        return write(entry.location, False)   # type: ignore[arg-type]
    except BaseException:
        drop_entry(spark, entry)
        raise


def save_as_table(original: Callable, self: Any, name: str, format=None, mode=None, partitionBy=None, **options):
    spark = _session_of(self)
    if format is not None:
        self.format(format)
    if mode is not None:
        self.mode(mode)
    if options:
        self.options(**options)
    fmt = _writer_format(self)
    if fmt == "delta" and not _enabled(spark) and _refuse_by_name(spark):
        raise _facing(UnsupportedFeatureError(_catalog_message()))
    if _enabled(spark) and fmt in ("delta", "", "parquet"):
        try:
            done, result = _save_as_table(self, spark, name, fmt, partitionBy)
        except DeltaError as e:
            raise _facing(e) from None
        if done:
            return result
    return original(self, name, None, None, partitionBy)


def insert_into(original: Callable, self: Any, tableName: str, overwrite=None):
    spark = _session_of(self)
    if _enabled(spark):
        r = _delta_entry(spark, tableName)
        if r is not None:
            try:
                return _insert_into(self, spark, r.path, bool(overwrite) or _writer_mode(self) == "overwrite")
            except DeltaError as e:
                raise _facing(e) from None
    if overwrite is None:
        return original(self, tableName)
    return original(self, tableName, overwrite)


def _df_of(writer: Any) -> Any:
    """The DataFrame a writer writes (batch or streaming, classic or Connect)."""
    if internals._pyspark_class(writer).__name__ == "DataStreamWriter":
        return internals.stream_writer_dataframe(writer)
    return internals.writer_dataframe(writer)


def _save_as_table(w: Any, spark: Any, name: str, fmt: str, partition_by: Any) -> tuple[bool, Any]:
    """saveAsTable of a delta write (or of any write to an existing Delta table): (done, result)."""
    from ..calls import partition_columns as _partition_columns
    from ..fast_write import write_delta

    from .catalog import lookup, resolve

    df = _df_of(w)
    table = _name(name)
    existing = resolve(spark, table, must_exist=False)
    if existing is None and fmt != "delta":
        return False, None
    if existing is None and not table.is_path:
        entry = lookup(spark, table.parts)
        if entry is not None:
            if entry.temporary:
                return False, None
            from ...errors import AnalysisException

            raise AnalysisException(f"{entry.qualified} is a {entry.provider} table, not a Delta table: "
                                    f"saveAsTable with format('delta') cannot write to it")
    mode = _writer_mode(w)
    opts = {str(k).lower(): v for k, v in _writer_options(w).items()}
    cols = _partition_columns(partition_by) if partition_by is not None else (w.__dict__.get("_tahoe_partition_by") or [])
    merge_schema = str(opts.get("mergeschema", "false")).lower() == "true"
    overwrite_schema = str(opts.get("overwriteschema", "false")).lower() == "true"
    replace_where = opts.get("replacewhere")
    props = {k: str(v) for k, v in _writer_options(w).items() if str(k).startswith("delta.")}
    if existing is not None:
        if mode in ("error", "errorifexists", "default"):
            from ...errors import TableAlreadyExistsError

            raise TableAlreadyExistsError(f"[TABLE_OR_VIEW_ALREADY_EXISTS] Table {name} already exists. SQLSTATE: 42P07")
        if mode == "ignore":
            return True, None
        write_delta(df, existing.path, mode="overwrite" if mode == "overwrite" else "append",
                    partition_by=cols or None, replace_where=replace_where, merge_schema=merge_schema,
                    overwrite_schema=overwrite_schema)
        return True, None
    operation = "CREATE OR REPLACE TABLE AS SELECT" if mode == "overwrite" else "CREATE TABLE AS SELECT"
    location = opts.get("path")
    params = {"isManaged": str(location is None).lower(), "description": None, "partitionBy": cols,
              "properties": props}

    def write(path: str, _existing: bool) -> Any:
        write_delta(df, path, mode="error", partition_by=cols, properties=props, operation=(operation, params))
        return None

    _create_named(spark, name, df, cols, location, write)
    return True, None


def _insert_into(w: Any, spark: Any, path: str, overwrite: bool) -> None:
    """insertInto: the DataFrame's columns by position into the table's (Spark's rule)."""
    from pyspark.sql import functions as F

    from ...errors import AnalysisException
    from ...log import DeltaLog
    from ..types import to_spark_type
    from ..fast_write import write_delta

    df = _df_of(w)
    schema = DeltaLog.for_table(path).snapshot().schema
    if len(df.columns) != len(schema.fields):
        raise AnalysisException(f"[INSERT_COLUMN_ARITY_MISMATCH] insertInto: the table has {len(schema.fields)} "
                                f"columns, the data {len(df.columns)}")
    df = df.select(*[F.col(quote_identifier(c)).cast(to_spark_type(f.type)).alias(f.name) for c, f in zip(df.columns, schema.fields)])
    write_delta(df, path, mode="overwrite" if overwrite else "append")


def _v2_state(w: Any) -> dict:
    """What a DataFrameWriterV2 was told (classic ones keep it in the JVM): recorded as it is set."""
    return w.__dict__.setdefault("_tahoe_v2", {"props": {}, "options": {}})


def v2_init(original: Callable, self: Any, *args: Any, **kwargs: Any) -> None:
    original(self, *args, **kwargs)
    table = kwargs.get("table", args[-1] if args else None)
    if isinstance(table, str):
        self.__dict__["_tahoe_table"] = table


def v2_using(original: Callable, self: Any, provider: str) -> Any:
    out = original(self, provider)
    _v2_state(self)["provider"] = str(provider).lower()
    return out


def v2_partitioned_by(original: Callable, self: Any, col: Any, *cols: Any) -> Any:
    out = original(self, col, *cols)
    _v2_state(self)["partition"] = [_col_name(c) for c in (col, *cols)]
    return out


def v2_cluster_by(original: Callable, self: Any, col: Any, *cols: Any) -> Any:
    out = original(self, col, *cols)
    _v2_state(self)["cluster"] = [str(c) for c in (col, *cols)]
    return out


def v2_table_property(original: Callable, self: Any, property: str, value: str) -> Any:
    out = original(self, property, value)
    _v2_state(self)["props"][str(property)] = str(value)
    return out


def v2_option(original: Callable, self: Any, key: str, value: Any) -> Any:
    out = original(self, key, value)
    _v2_state(self)["options"][str(key)] = value
    return out


def v2_options(original: Callable, self: Any, **options: Any) -> Any:
    out = original(self, **options)
    _v2_state(self)["options"].update(options)
    return out


def _terminal(terminal: str) -> Callable:
    def behaviour(original: Callable, self: Any, *args: Any, **kwargs: Any) -> Any:
        spark = _session_of(self)
        state = self.__dict__.get("_tahoe_v2", {"props": {}, "options": {}})
        if state.get("provider") == "delta" and not _enabled(spark) and _refuse_by_name(spark):
            raise _facing(UnsupportedFeatureError(_catalog_message()))
        if _enabled(spark):
            try:
                done = _v2_terminal(self, spark, terminal, state, args, kwargs)
            except DeltaError as e:
                raise _facing(e) from None
            if done:
                return None
        return original(self, *args, **kwargs)

    behaviour.__name__ = f"v2_{terminal}"
    return behaviour


v2_create = _terminal("create")
v2_replace = _terminal("replace")
v2_create_or_replace = _terminal("createOrReplace")
v2_append = _terminal("append")
v2_overwrite = _terminal("overwrite")
v2_overwrite_partitions = _terminal("overwritePartitions")


def _col_name(c: Any) -> str:
    if isinstance(c, str):
        return c
    if internals.is_connect(c):
        return str(c).removeprefix("Column<'").removesuffix("'>")
    return internals.column_name(c)


def _v2_terminal(w: Any, spark: Any, terminal: str, state: dict, args: tuple, kwargs: dict) -> bool:
    from ...errors import AnalysisException, TableAlreadyExistsError, TableNotFoundError
    from ..fast_write import write_delta

    from .catalog import qualified, resolve

    name = internals.v2_table_name(w)
    df = _df_of(w)
    if name is None or df is None:
        return False
    table = _name(name)
    existing = resolve(spark, table, must_exist=False)
    if terminal in ("append", "overwrite", "overwritePartitions"):
        if existing is None:
            return False
        if terminal == "append":
            write_delta(df, existing.path, mode="append")
        elif terminal == "overwritePartitions":
            write_delta(df, existing.path, mode="overwrite", partition_overwrite_mode="dynamic")
        else:
            condition = args[0] if args else kwargs.get("condition")
            from ..dml import column_sql

            text = condition if isinstance(condition, str) else column_sql(df, condition)
            write_delta(df, existing.path, mode="overwrite", replace_where=text)
        return True
    if state.get("provider") != "delta" and existing is None:
        return False
    partition = state.get("partition") or []
    cluster = state.get("cluster")
    props = dict(state.get("props") or {})
    location = (state.get("options") or {}).get("path") or props.pop("location", None)
    if existing is not None:
        if terminal == "create":
            raise TableAlreadyExistsError(f"[TABLE_OR_VIEW_ALREADY_EXISTS] Table {name} already exists. SQLSTATE: 42P07")
        operation = "REPLACE TABLE AS SELECT" if terminal == "replace" else "CREATE OR REPLACE TABLE AS SELECT"
        params = {"isManaged": "false", "description": None, "partitionBy": partition, "clusterBy": cluster or [],
                  "properties": props}
        write_delta(df, existing.path, mode="overwrite", partition_by=partition, properties=props, replace_table=True,
                    cluster_by=cluster, operation=(operation, params))
        return True
    if terminal == "replace":
        raise TableNotFoundError(f"[TABLE_OR_VIEW_NOT_FOUND] The table or view `{name}` cannot be found: it cannot "
                                 f"be replaced as it did not exist (Spark's message; createOrReplace creates it). "
                                 f"SQLSTATE: 42P01")
    if not table.is_path and qualified(spark, table.parts) is None:
        raise AnalysisException(f"tahoe keeps Delta tables in the session catalog: {name} names another catalog")
    operation = "CREATE OR REPLACE TABLE AS SELECT" if terminal == "createOrReplace" else "CREATE TABLE AS SELECT"
    params = {"isManaged": str(location is None).lower(), "description": None, "partitionBy": partition,
              "clusterBy": cluster or [], "properties": props}

    def write(path: str, _existing: bool) -> Any:
        write_delta(df, path, mode="error", partition_by=partition, properties=props, cluster_by=cluster,
                    operation=(operation, params))

    _create_named(spark, name, df, partition, location, write)
    return True


def stream_to_table(original: Callable, self: Any, tableName: str, format=None, outputMode=None, partitionBy=None,
                    queryName=None, **options):
    spark = _session_of(self)
    if format is not None:
        self.format(format)
    fmt = _writer_format_stream(self)
    if fmt == "delta" and not _enabled(spark) and _refuse_by_name(spark):
        raise _facing(UnsupportedFeatureError(_catalog_message()))
    if _enabled(spark):
        try:
            r = _delta_entry(spark, tableName)
            if r is None and fmt == "delta":
                r = _create_stream_table(self, spark, tableName, partitionBy)
        except DeltaError as e:
            raise _facing(e) from None
        if r is not None:
            return self.format("delta").start(r.path, outputMode=outputMode, partitionBy=partitionBy,
                                              queryName=queryName, **options)
    return original(self, tableName, format, outputMode, partitionBy, queryName, **options)


def _writer_format_stream(w: Any) -> str:
    from ..calls import format_of

    return format_of(w)


def _create_stream_table(w: Any, spark: Any, name: str, partition_by: Any):
    """A streaming write to a new table name: an empty Delta table of the stream's schema."""
    from ...txn.table_ops import create_table
    from ..calls import partition_columns as _partition_columns
    from ..types import from_spark_schema
    from .catalog import Resolved, create_entry, drop_entry, spark_ddl

    df = _df_of(w)
    if df is None:
        return None
    table = _name(name)
    schema = from_spark_schema(df.schema)
    cols = _partition_columns(partition_by) if partition_by is not None else (w.__dict__.get("_tahoe_partition_by") or [])
    if table.is_path:
        create_table(table.path, schema, cols)
        return Resolved(table.path)   # type: ignore[arg-type]
    entry = create_entry(spark, table.parts, spark_ddl(schema), cols, None, None)
    try:
        create_table(entry.location, schema, cols)
    except BaseException:
        drop_entry(spark, entry)
        raise
    return Resolved(entry.location, entry)   # type: ignore[arg-type]
