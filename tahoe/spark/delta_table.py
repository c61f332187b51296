"""`tahoe.spark.DeltaTable`: delta-spark's Python `DeltaTable` API over tahoe.

Owns the delta-spark-compatible surface: `forPath`, `isDeltaTable`, `toDF`, `alias`, `history`,
`detail`, DML — `delete`, `update`, `merge` with its `DeltaMergeBuilder` (planned by
`tahoe.write.dml_plan`, run by `tahoe.spark.dml`) — and the `create` / `createIfNotExists` /
`createOrReplace` builders (`location`, `addColumn(s)` with generated and identity columns
(`IdentityGenerator`), `partitionedBy`, `property`, `comment`, `execute`). Reads go through the
fast path (`tahoe.spark.read`); table creation through `tahoe.txn.table_ops.create_table`.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from ..errors import DeltaError, TableNotFoundError
from ..log import DeltaLog
from .read import read_snapshot

__all__ = ["DeltaTable", "DeltaTableBuilder", "DeltaMergeBuilder", "IdentityGenerator"]


class DeltaTable:
    def __init__(self, spark, path: str, alias: str | None = None, storage_options: dict | None = None):
        self._spark = spark
        self._path = path
        self._alias = alias
        self._storage_options = storage_options
        self._log = DeltaLog.for_table(path, storage_options)

    # --- opening ----------------------------------------------------------------------------
    @classmethod
    def forPath(cls, sparkSession, path: str, hadoopConf: dict | None = None) -> "DeltaTable":
        from .datasource import register

        t = cls(sparkSession, path, storage_options=hadoopConf or None)
        t._log.snapshot()  # fails now (TableNotFoundError) when there is no table
        register(sparkSession)  # only once the table is there: a failed forPath changes nothing
        return t

    @classmethod
    def forName(cls, sparkSession, tableOrViewName: str) -> "DeltaTable":
        raise NotImplementedError("tahoe has no catalog: use DeltaTable.forPath(spark, path)")

    @classmethod
    def isDeltaTable(cls, sparkSession, identifier: str) -> bool:
        """True when `identifier` (a path) holds a Delta table; False for a missing path, a
        directory without a log, or a file — as delta-spark. A table tahoe cannot read (corrupt
        log, unsupported features) is still a Delta table: True."""
        try:
            DeltaLog.for_table(identifier).snapshot()
            return True
        except (TableNotFoundError, FileNotFoundError, NotADirectoryError, ValueError):
            return False
        except DeltaError:
            return True

    # --- reading ----------------------------------------------------------------------------
    def toDF(self):
        df = read_snapshot(self._spark, self._log.snapshot())
        return df.alias(self._alias) if self._alias else df

    def alias(self, aliasName: str) -> "DeltaTable":
        return DeltaTable(self._spark, self._path, aliasName, self._storage_options)

    def history(self, limit: int | None = None):
        from pyspark.sql.types import (
            BooleanType, LongType, MapType, StringType, StructField, StructType, TimestampType,
        )
        import datetime as dt

        rows = []
        for e in self._log.history(limit):
            ci = e.commit_info
            params = ci.get("operationParameters") or {}
            metrics = ci.get("operationMetrics") or {}
            rows.append((
                e.version, dt.datetime.fromtimestamp(e.timestamp / 1000, tz=dt.timezone.utc),
                ci.get("userId"), ci.get("userName"), ci.get("operation"),
                {str(k): (v if isinstance(v, str) else json.dumps(v)) for k, v in params.items()},
                ci.get("clusterId"), ci.get("readVersion"), ci.get("isolationLevel"), ci.get("isBlindAppend"),
                {str(k): str(v) for k, v in metrics.items()}, ci.get("userMetadata"), ci.get("engineInfo"),
            ))
        schema = StructType([
            StructField("version", LongType()), StructField("timestamp", TimestampType()),
            StructField("userId", StringType()), StructField("userName", StringType()),
            StructField("operation", StringType()),
            StructField("operationParameters", MapType(StringType(), StringType())),
            StructField("clusterId", StringType()), StructField("readVersion", LongType()),
            StructField("isolationLevel", StringType()), StructField("isBlindAppend", BooleanType()),
            StructField("operationMetrics", MapType(StringType(), StringType())),
            StructField("userMetadata", StringType()), StructField("engineInfo", StringType()),
        ])
        return self._spark.createDataFrame(rows, schema)

    def detail(self):
        from pyspark.sql.types import (
            ArrayType, IntegerType, LongType, MapType, StringType, StructField, StructType, TimestampType,
        )
        import datetime as dt

        from ..protocol.table_features import reader_features_of, writer_features_of

        snap = self._log.snapshot()
        md = snap.metadata
        created = dt.datetime.fromtimestamp(md.created_time / 1000, tz=dt.timezone.utc) if md.created_time else None
        features = sorted(reader_features_of(snap.protocol) | writer_features_of(snap.protocol))
        row = ("delta", md.id, md.name, md.description, self._log.table_root, created,
               dt.datetime.fromtimestamp(snap.timestamp / 1000, tz=dt.timezone.utc),
               list(md.partition_columns), [], snap.num_files, snap.size_in_bytes, dict(md.configuration),
               snap.protocol.min_reader_version, snap.protocol.min_writer_version, features)
        schema = StructType([
            StructField("format", StringType()), StructField("id", StringType()), StructField("name", StringType()),
            StructField("description", StringType()), StructField("location", StringType()),
            StructField("createdAt", TimestampType()), StructField("lastModified", TimestampType()),
            StructField("partitionColumns", ArrayType(StringType())), StructField("clusteringColumns", ArrayType(StringType())),
            StructField("numFiles", LongType()), StructField("sizeInBytes", LongType()),
            StructField("properties", MapType(StringType(), StringType())),
            StructField("minReaderVersion", IntegerType()), StructField("minWriterVersion", IntegerType()),
            StructField("tableFeatures", ArrayType(StringType())),
        ])
        return self._spark.createDataFrame([row], schema)

    # --- DML ------------------------------------------------------------------------------------
    def delete(self, condition=None):
        """delta-spark's `delete(condition=None)`: delete the rows where `condition` (a SQL
        string or a Column) is TRUE — all rows when None. Deletion vectors when the table has
        `delta.enableDeletionVectors`, else copy-on-write; one commit. Returns delta-spark's
        result DataFrame (`num_affected_rows`)."""
        from ..write.dml_plan import plan_delete
        from .dml import run_dml

        cond = _condition(self, condition)
        snap = self._log.snapshot()
        plan = plan_delete(snap, cond, self._alias, storage_options=self._storage_options)
        return self._result(plan, run_dml(self._spark, self._log, snap, plan))

    def update(self, condition=None, set=None):
        """delta-spark's `update(condition=None, set=None)`: `set` maps columns to new values (SQL
        strings or Columns) for the rows where `condition` is TRUE (all rows when None). Returns
        delta-spark's result DataFrame (`num_affected_rows`)."""
        from ..write.dml_plan import plan_update
        from .dml import run_dml, spark_typer

        if set is None:
            raise ValueError("'set' cannot be None")
        if type(set) is not dict:
            raise TypeError(f"'set' must be a dict, found to be {type(set)}")
        cond = _condition(self, condition)
        values = _assignments(self, set, "'set'")
        snap = self._log.snapshot()
        target = self.toDF()
        plan = plan_update(snap, cond, values, self._alias, typer=spark_typer(target),
                           storage_options=self._storage_options)
        return self._result(plan, run_dml(self._spark, self._log, snap, plan))

    def merge(self, source, condition) -> "DeltaMergeBuilder":
        """delta-spark's `merge(source, condition)`: a `DeltaMergeBuilder` for MERGE INTO this
        table (its `alias()` names it in conditions) USING `source` (a DataFrame, `alias()`-ed
        to name it) ON `condition` (SQL string or Column)."""
        from pyspark.sql import DataFrame

        if source is None:
            raise ValueError("'source' in merge cannot be None")
        if not isinstance(source, DataFrame) and type(source).__name__ != "DataFrame":
            raise TypeError("Type of 'source' in merge must be DataFrame.")
        if condition is None:
            raise ValueError("'condition' in merge cannot be None")
        _check_condition_type(condition)
        return DeltaMergeBuilder(self, source, condition)

    def _result(self, plan, metrics: dict):
        """delta-spark's DML result DataFrame from the operation's metrics."""
        from pyspark.sql.types import LongType, StructField, StructType

        from ..write.dml_plan import operation_result

        row = operation_result(plan, metrics)
        schema = StructType([StructField(k, LongType(), False) for k in row])
        return self._spark.createDataFrame([tuple(row.values())], schema)

    # --- builders ---------------------------------------------------------------------------
    @classmethod
    def create(cls, sparkSession=None) -> "DeltaTableBuilder":
        return DeltaTableBuilder(sparkSession, "error")

    @classmethod
    def createIfNotExists(cls, sparkSession=None) -> "DeltaTableBuilder":
        return DeltaTableBuilder(sparkSession, "ignore")

    @classmethod
    def createOrReplace(cls, sparkSession=None) -> "DeltaTableBuilder":
        return DeltaTableBuilder(sparkSession, "overwrite")

    @classmethod
    def replace(cls, sparkSession=None) -> "DeltaTableBuilder":
        return DeltaTableBuilder(sparkSession, "replace")

    def __repr__(self) -> str:
        return f"DeltaTable({self._log.table_root!r})"


def _check_condition_type(condition, argname: str = "'condition'") -> None:
    from pyspark.sql import Column

    if condition is not None and not isinstance(condition, (str, Column)):
        raise TypeError(f"{argname} must be a Spark SQL Column or a string (expression in SQL syntax), "
                        f"found to be of type {type(condition)}")


def _condition(table: "DeltaTable", condition, source=None, argname: str = "'condition'"):
    """A condition (SQL string or Column) as the planner takes it: SQL text, or a Column's
    analyzed SQL (resolved against the target — and the source, for a MERGE)."""
    from pyspark.sql import Column

    _check_condition_type(condition, argname)
    if condition is None or isinstance(condition, str):
        return condition
    from ..expressions import parse
    from .dml import column_sql

    return parse(column_sql(_resolution_frame(table, source), condition))


def _assignments(table: "DeltaTable", mapping, argname: str, source=None) -> dict:
    from pyspark.sql import Column

    if mapping is None:
        raise ValueError(f"{argname} cannot be None")
    if type(mapping) is not dict:
        raise TypeError(f"{argname} must be a dict, found to be {type(mapping)}")
    out = {}
    for k, v in mapping.items():
        if type(k) is not str:
            raise TypeError(f"Keys of dict in {argname} must contain only strings with column names, "
                            f"found '{k}' of type '{type(k)}")
        if isinstance(v, str):
            out[k] = v
        elif isinstance(v, Column):
            from ..expressions import parse
            from .dml import column_sql

            out[k] = parse(column_sql(_resolution_frame(table, source), v))
        else:
            raise TypeError(f"Values of dict in {argname} must contain only Spark SQL Columns or strings "
                            f"(expressions in SQL syntax) as values, found '{v}' of type '{type(v)}'")
    return out


def _resolution_frame(table: "DeltaTable", source=None):
    """What Column arguments are resolved against: the target (its alias, or the planner's
    default one), joined with the source for a MERGE (no rows are read)."""
    from ..write.dml_plan import DEFAULT_SOURCE_ALIAS, DEFAULT_TARGET_ALIAS
    from .dml import dataframe_alias

    target = table.toDF()
    if source is None:
        return target
    if table._alias is None:
        target = target.alias(DEFAULT_TARGET_ALIAS)
    if dataframe_alias(source) is None:
        source = source.alias(DEFAULT_SOURCE_ALIAS)
    return target.crossJoin(source)


class DeltaMergeBuilder:
    """delta-spark's `DeltaMergeBuilder` (from `DeltaTable.merge`): WHEN clauses in the order
    given — matched (update / updateAll / delete), not matched (insert / insertAll), not
    matched by source (update / delete), conditions and values as SQL strings or Columns —
    `withSchemaEvolution()`, and `execute()`, which runs the MERGE in one commit and returns
    delta-spark's result DataFrame (num_affected_rows, num_updated_rows, num_deleted_rows,
    num_inserted_rows). Within a kind only the last clause may omit its condition; a target row
    matched by several source rows fails the MERGE
    ([DELTA_MULTIPLE_SOURCE_ROW_MATCHING_TARGET_ROW_IN_MERGE]) unless the only matched clause
    is an unconditional delete."""

    def __init__(self, table: DeltaTable, source, condition):
        self._table = table
        self._source = source
        self._condition = condition
        self._clauses: list = []
        self._schema_evolution = False

    def _add(self, kind: str, action: str, condition, values=None, argname: str = "") -> "DeltaMergeBuilder":
        _check_condition_type(condition)
        if values is not None and type(values) is not dict:
            raise TypeError(f"{argname} must be a dict, found to be {type(values)}")
        self._clauses.append((kind, action, condition, values, argname))
        return self

    def whenMatchedUpdate(self, condition=None, set=None) -> "DeltaMergeBuilder":
        if set is None:
            raise ValueError("'set' in whenMatchedUpdate cannot be None")
        return self._add("matched", "update", condition, set, "'set' in whenMatchedUpdate")

    def whenMatchedUpdateAll(self, condition=None) -> "DeltaMergeBuilder":
        return self._add("matched", "update", condition)

    def whenMatchedDelete(self, condition=None) -> "DeltaMergeBuilder":
        return self._add("matched", "delete", condition)

    def whenNotMatchedInsert(self, condition=None, values=None) -> "DeltaMergeBuilder":
        if values is None:
            raise ValueError("'values' in whenNotMatchedInsert cannot be None")
        return self._add("notMatched", "insert", condition, values, "'values' in whenNotMatchedInsert")

    def whenNotMatchedInsertAll(self, condition=None) -> "DeltaMergeBuilder":
        return self._add("notMatched", "insert", condition)

    def whenNotMatchedBySourceUpdate(self, condition=None, set=None) -> "DeltaMergeBuilder":
        if set is None:
            raise ValueError("'set' in whenNotMatchedBySourceUpdate cannot be None")
        return self._add("notMatchedBySource", "update", condition, set, "'set' in whenNotMatchedBySourceUpdate")

    def whenNotMatchedBySourceDelete(self, condition=None) -> "DeltaMergeBuilder":
        return self._add("notMatchedBySource", "delete", condition)

    def withSchemaEvolution(self) -> "DeltaMergeBuilder":
        self._schema_evolution = True
        return self

    def execute(self):
        from ..write.dml_plan import DEFAULT_SOURCE_ALIAS, DEFAULT_TARGET_ALIAS, MergeClause, plan_merge
        from .dml import dataframe_alias, run_dml, spark_typer
        from .types import from_spark_schema

        t = self._table
        source = self._source
        sa = dataframe_alias(source)
        clauses = []
        for kind, action, cond, values, argname in self._clauses:
            c = _condition(t, cond, source)
            v = _assignments(t, values, argname, source) if values is not None else None
            clauses.append(MergeClause(kind, action, c, v))
        on = _condition(t, self._condition, source)
        snap = t._log.snapshot()
        target = t.toDF() if t._alias else t.toDF().alias(DEFAULT_TARGET_ALIAS)
        src = source if sa is not None else source.alias(DEFAULT_SOURCE_ALIAS)
        plan = plan_merge(snap, from_spark_schema(source.schema), on, clauses, t._alias, sa,
                          schema_evolution=self._schema_evolution, typer=spark_typer(target.crossJoin(src)),
                          storage_options=t._storage_options)
        return t._result(plan, run_dml(t._spark, t._log, snap, plan, src))


@dataclasses.dataclass(frozen=True)
class IdentityGenerator:
    """delta-spark's identity column spec for `DeltaTableBuilder.addColumn`: generated values
    are `start + k * step` (k = 0, 1, ...), beyond the column's high-water mark."""

    start: int = 1
    step: int = 1

    def __post_init__(self):
        for name in ("start", "step"):
            v = getattr(self, name)
            if type(v) is not int:
                raise TypeError(f"IdentityGenerator {name} must be int. Found {v!r} with type {type(v)}")
        if self.step == 0:
            raise ValueError("IdentityGenerator step cannot be 0.")


class DeltaTableBuilder:
    """delta-spark's DeltaTableBuilder: collect the definition, `execute()` creates the table."""

    def __init__(self, spark, mode: str):
        self._spark = spark
        self._mode = mode
        self._location: str | None = None
        self._fields: list = []
        self._partition: list[str] = []
        self._props: dict[str, str] = {}
        self._comment: str | None = None
        self._name: str | None = None

    def tableName(self, identifier: str) -> "DeltaTableBuilder":
        self._name = identifier
        return self

    def location(self, location: str) -> "DeltaTableBuilder":
        self._location = location
        return self

    def comment(self, comment: str) -> "DeltaTableBuilder":
        self._comment = comment
        return self

    def property(self, key: str, value: str) -> "DeltaTableBuilder":
        self._props[key] = value
        return self

    def partitionedBy(self, *cols) -> "DeltaTableBuilder":
        for c in cols:
            self._partition.extend([c] if isinstance(c, str) else list(c))
        return self

    def addColumn(self, colName: str, dataType, nullable: bool = True,
                  generatedAlwaysAs: "str | IdentityGenerator | None" = None,
                  generatedByDefaultAs: "IdentityGenerator | None" = None,
                  comment: str | None = None) -> "DeltaTableBuilder":
        """delta-spark's `addColumn`: `generatedAlwaysAs` is a generation expression (SQL) or an
        `IdentityGenerator` (an identity column whose values are always generated);
        `generatedByDefaultAs` an `IdentityGenerator` (explicit values allowed)."""
        from ..protocol.schema import StructField
        from ..txn.ddl import parse_ddl
        from ..protocol.properties import (
            GENERATION_EXPRESSION, IDENTITY_ALLOW_EXPLICIT_INSERT, IDENTITY_START, IDENTITY_STEP,
        )
        from .types import from_spark_schema

        if type(colName) is not str:
            raise TypeError(f"Column name must be str. Found {colName!r} with type {type(colName)}")
        if type(nullable) is not bool:
            raise TypeError(f"Column nullable must be bool. Found {nullable!r} with type {type(nullable)}")
        if generatedAlwaysAs is not None and generatedByDefaultAs is not None:
            raise ValueError("generatedByDefaultAs and generatedAlwaysAs cannot both be set.")
        if generatedAlwaysAs is not None and not isinstance(generatedAlwaysAs, (str, IdentityGenerator)):
            raise TypeError("Generated always as expression must be str or IdentityGenerator. "
                            f"Found {generatedAlwaysAs!r} with type {type(generatedAlwaysAs)}")
        if generatedByDefaultAs is not None and not isinstance(generatedByDefaultAs, IdentityGenerator):
            raise TypeError("Generated by default expression must be IdentityGenerator. "
                            f"Found {generatedByDefaultAs!r} with type {type(generatedByDefaultAs)}")
        if comment is not None and type(comment) is not str:
            raise TypeError(f"Comment must be str or None. Found {comment!r} with type {type(comment)}")
        if isinstance(dataType, str):
            dt = parse_ddl(f"`{colName.replace('`', '``')}` {dataType}").fields[0].type
        else:
            from pyspark.sql.types import DataType, StructField as SF, StructType as SS
            if not isinstance(dataType, DataType):
                raise TypeError(f"Column data type must be str or DataType. Found {dataType!r} with type {type(dataType)}")
            dt = from_spark_schema(SS([SF("x", dataType)])).fields[0].type
        md: dict[str, Any] = {}
        if comment:
            md["comment"] = comment
        if isinstance(generatedAlwaysAs, str):
            md[GENERATION_EXPRESSION] = generatedAlwaysAs
        identity = generatedByDefaultAs or (generatedAlwaysAs if isinstance(generatedAlwaysAs, IdentityGenerator) else None)
        if identity is not None:
            md[IDENTITY_START] = identity.start
            md[IDENTITY_STEP] = identity.step
            md[IDENTITY_ALLOW_EXPLICIT_INSERT] = generatedByDefaultAs is not None
        self._fields.append(StructField(colName, dt, nullable, md))
        return self

    def addColumns(self, cols) -> "DeltaTableBuilder":
        from .types import from_spark_schema

        for f in from_spark_schema(cols).fields:
            self._fields.append(f)
        return self

    def execute(self) -> DeltaTable:
        from ..protocol.schema import StructType
        from ..txn.table_ops import create_table

        if not self._location:
            raise ValueError("tahoe has no catalog: give the table a location()")
        mode = self._mode
        if mode == "replace" and not DeltaTable.isDeltaTable(self._spark, self._location):
            raise TableNotFoundError(f"no Delta table at {self._location} to replace")
        create_table(self._location, StructType(self._fields), self._partition, self._props,
                     name=self._name, description=self._comment, mode=mode)
        return DeltaTable.forPath(self._spark, self._location) if self._spark is not None else \
            DeltaTable(None, self._location)
