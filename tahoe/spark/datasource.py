"""The `delta` Python data source: `spark.read.format("delta")` / `df.write.format("delta")`.

Owns the data-source path. Reading: the driver plans the snapshot's files (with partition pruning
and stats skipping from pushed-down filters) and splits them into input partitions of about
128 MB (small files packed together, large files split into runs of row groups); executors read
them as Arrow one row group at a time with tahoe's Spark-free reader
(`tahoe.read.ArrowFileReader`: column mapping, DVs, partition values) — so it reaches any store
tahoe's storage layer reaches (s3:// via pyarrow) even when the JVM cannot. Options:
`versionAsOf`, `timestampAsOf`, storage options as `storage.<key>`. Writing: executors write
parquet files with pyarrow under the table root and send back AddFile actions; the driver-side
`commit` makes one transaction (`tahoe.spark.write`: the same plan and commit as `write_delta` —
schema rules, generated/identity columns, constraints, stats). Options (names case-insensitive; Spark lower-cases them): `mergeSchema`, `overwriteSchema`,
`replaceWhere` (every row must match; rows outside it fail the job, nothing is committed),
`partitionOverwriteMode` (`dynamic`: an overwrite replaces only the partitions the data writes
to), `userMetadata`, `txnAppId` + `txnVersion` (idempotent writes), `delta.<property>` (table
properties of a table the write creates, as delta-spark's DataFrameWriter), `partitionBy`
(`.partitionBy()` is refused by Spark for Python data sources), storage options, `saveMode`.

Save modes: Spark hands a Python data source only append/overwrite; `ErrorIfExists` — also the
default when `.mode()` is not called — and `Ignore` are refused at analysis
(UNSUPPORTED_DATA_SOURCE_SAVE_MODE) before any Python runs. `register` therefore wraps
`DataFrameWriter.save` (classic and Spark Connect): for `format("delta")` in a session where tahoe
registered the source, those modes become `append` plus the option `saveMode=error|ignore`, which
the writer enforces like delta-spark — error: refuse an existing table; ignore: leave it alone
(the job still runs, its tasks write nothing); either creates a missing table. The option can be
given directly where the wrapper is not installed. The wrapper also hands the writer the session's
`spark.sql.sources.partitionOverwriteMode` (the writer runs in a Python worker that cannot read the
session's confs); an explicit `partitionOverwriteMode` option wins over it, as in delta-spark.
Executors need tahoe importable (see `tahoe.spark` on shipping it to a cluster).
"""

from __future__ import annotations

import json
from typing import Any, Iterator

from pyspark.sql.datasource import DataSource, DataSourceArrowWriter, DataSourceReader, InputPartition

from .session import session_overwrite_mode
from .write import SAVE_MODE_OPTION, SESSION_OVERWRITE_MODE_OPTION

__all__ = ["DeltaDataSource", "register", "read_via_datasource"]

# about what one task reads (Spark's spark.sql.files.maxPartitionBytes default)
_PARTITION_BYTES = 128 << 20
_OPEN_COST_BYTES = 4 << 20  # Spark's spark.sql.files.openCostInBytes default


def _storage_options(options: dict) -> dict | None:
    so = {k[len("storage."):]: v for k, v in options.items() if k.lower().startswith("storage.")}
    return so or None


def _opt(options, name):
    for k, v in options.items():
        if k.lower() == name.lower():
            return v
    return None


class _FilesPartition(InputPartition):
    def __init__(self, files: list[tuple[str, dict, Any]]):
        super().__init__(None)
        self.files = files


class DeltaDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "delta"

    def _path(self) -> str:
        p = _opt(self.options, "path")
        if not p:
            raise ValueError("format('delta') needs a path: .load(path) / .save(path)")
        return p

    def _snapshot(self):
        from ..log import DeltaLog

        if getattr(self, "_snap", None) is None:
            log = DeltaLog.for_table(self._path(), _storage_options(dict(self.options)))
            v = _opt(self.options, "versionAsOf")
            ts = _opt(self.options, "timestampAsOf")
            if v is not None and ts is not None:
                raise ValueError("give versionAsOf or timestampAsOf, not both")
            self._snap = log.snapshot(version=int(v) if v is not None else None, timestamp=ts)
        return self._snap

    def schema(self):
        from ..protocol.schema import is_void
        from ..protocol.schema import StructType
        from .types import to_spark_schema

        snap = self._snapshot()
        fields = [f for f in snap.schema.fields if not is_void(f.type)]
        return to_spark_schema(StructType(fields), strip_metadata=True, nullable=True)

    def reader(self, schema):
        return DeltaReader(self, schema)

    def writer(self, schema, overwrite: bool):
        return DeltaWriter(self._path(), dict(self.options), schema, overwrite)


class DeltaReader(DataSourceReader):
    def __init__(self, source: DeltaDataSource, schema):
        snap = source._snapshot()
        self.table_root = snap.table_root
        self.schema_json = snap.schema.to_json()
        self.partition_columns = snap.partition_columns
        self.mode = snap.column_mapping_mode
        self.storage_options = _storage_options(dict(source.options))
        self.columns = [f.name for f in schema.fields]
        self.out_schema_json = schema.json()
        self._snap = snap
        self._filters: list = []

    def __getstate__(self):
        # what the executors' read() needs: not the snapshot nor the filters (driver-side planning)
        return {k: v for k, v in self.__dict__.items() if k not in ("_snap", "_filters")}

    def pushFilters(self, filters):
        # Spark re-applies every filter; tahoe uses the supported ones for file skipping only.
        for f in filters:
            sql = _filter_to_sql(f)
            if sql is not None:
                self._filters.append(sql)
            yield f

    def partitions(self):
        """Input partitions of at most about `_PARTITION_BYTES`, packed as Spark packs file
        splits: a file larger than that is cut into runs of its row groups (its footer read
        here; a single larger row group is a run of its own), the pieces are sorted largest
        first and each goes into the open partition while it fits (counting
        `_OPEN_COST_BYTES` a piece), else opens the next."""
        from .skipping import plan_files

        files = plan_files(self._snap, self._filters)
        pieces = []  # ((path, partition values, DV, row groups | None), bytes)
        reader = None
        for p, pv, dv, sz in zip(files.column("path").to_pylist(), files.column("partitionValues").to_pylist(),
                                 files.column("deletionVector").to_pylist(), files.column("size").to_pylist()):
            pv = dict(pv) if pv else {}
            dv = dict(dv) if dv else None
            if (sz or 0) <= _PARTITION_BYTES:
                pieces.append(((p, pv, dv, None), sz or 0))
                continue
            reader = reader or self._arrow_reader()
            run, run_size = [], 0
            for i, b in enumerate(reader.row_group_bytes(p)):
                if run and run_size + b > _PARTITION_BYTES:
                    pieces.append(((p, pv, dv, run), run_size))
                    run, run_size = [], 0
                run.append(i)
                run_size += b
            if run:
                pieces.append(((p, pv, dv, run), run_size))
        pieces.sort(key=lambda x: -x[1])
        parts, cur, cur_size = [], [], 0
        for entry, size in pieces:
            if cur and cur_size + size > _PARTITION_BYTES:
                parts.append(_FilesPartition(cur))
                cur, cur_size = [], 0
            cur.append(entry)
            cur_size += size + _OPEN_COST_BYTES
        if cur:
            parts.append(_FilesPartition(cur))
        return parts or [_FilesPartition([])]

    def _arrow_reader(self):
        from ..protocol.schema import StructType
        from ..read.arrow_reader import ArrowFileReader
        from ..storage import log_store_for

        store, root = log_store_for(self.table_root, self.storage_options)
        return ArrowFileReader(store, root, StructType.from_json(self.schema_json), self.partition_columns,
                               self.mode, self.columns)

    def read(self, partition: _FilesPartition) -> Iterator:
        from pyspark.sql.pandas.types import to_arrow_schema
        from pyspark.sql.types import StructType as SparkStruct

        reader = self._arrow_reader()
        target = to_arrow_schema(SparkStruct.fromJson(json.loads(self.out_schema_json)), timezone="UTC")
        for path, pv, dv, row_groups in partition.files:
            for t in reader.read_row_groups(path, pv, dv, row_groups):
                t = t.select(target.names) if target.names else t
                for b in t.cast(target).to_batches(max_chunksize=65536):
                    yield b


def _filter_to_sql(f) -> str | None:
    from pyspark.sql import datasource as ds

    def name(attr) -> str | None:
        return "`" + attr[0].replace("`", "``") + "`" if len(attr) == 1 else None

    def lit(v) -> str | None:
        import datetime as dt
        if isinstance(v, bool):
            return "TRUE" if v else "FALSE"
        if isinstance(v, (int, float)):
            return repr(v)
        if isinstance(v, str):
            return "'" + v.replace("\\", "\\\\").replace("'", "\\'") + "'"
        if isinstance(v, (dt.date, dt.datetime)):
            return "'" + v.isoformat(sep=" ") + "'" if isinstance(v, dt.datetime) else "'" + v.isoformat() + "'"
        return None

    ops = {ds.EqualTo: "=", ds.GreaterThan: ">", ds.GreaterThanOrEqual: ">=", ds.LessThan: "<",
           ds.LessThanOrEqual: "<="}
    for cls, op in ops.items():
        if type(f) is cls:
            n, v = name(f.attribute), lit(f.value)
            return f"{n} {op} {v}" if n and v else None
    if isinstance(f, ds.IsNull):
        n = name(f.attribute)
        return f"{n} IS NULL" if n else None
    if isinstance(f, ds.IsNotNull):
        n = name(f.attribute)
        return f"{n} IS NOT NULL" if n else None
    if isinstance(f, ds.In):
        n = name(f.attribute)
        vs = [lit(v) for v in f.value]
        return f"{n} IN ({', '.join(vs)})" if n and vs and all(vs) else None
    return None


class DeltaWriter(DataSourceArrowWriter):
    def __init__(self, path: str, options: dict, schema, overwrite: bool):
        from .write import prepare_datasource_write

        self.path = path
        self.options = options
        self.overwrite = overwrite
        self.plan = prepare_datasource_write(path, options, schema, overwrite)

    def write(self, iterator):
        from .write import datasource_write_task

        return datasource_write_task(self.plan, iterator)

    def commit(self, messages):
        from .write import datasource_commit

        datasource_commit(self.plan, [m for m in messages if m is not None])

    def abort(self, messages):
        from .write import datasource_abort

        datasource_abort(self.plan, [m for m in messages if m is not None])


_registered: set[int] = set()


def register(spark) -> None:
    """Register the `delta` data source on `spark` (once per session) — and `deltaSharing`
    (`tahoe.spark.sharing`) —, apply tahoe's confs and map the error/ignore save modes (see the
    module docstring)."""
    from .session import configure

    configure(spark)
    key = id(spark)
    if key in _registered:
        return
    spark.dataSource.register(DeltaDataSource)
    from .sharing import DeltaSharingDataSource   # format("deltaSharing") too

    spark.dataSource.register(DeltaSharingDataSource)
    _registered.add(key)
    _install_save_modes()


# --- save modes Spark does not hand to Python data sources ---------------------------------------

_MAPPED_MODES = {"errorifexists": "error", "error": "error", "default": "error", "ignore": "ignore"}


def _classic_state(w) -> tuple[str, str]:
    """(format, save mode) of a classic DataFrameWriter, from its JVM object (`source`/`curmode`
    are Spark-internal accessors; should they go away, the wrapper stands aside and Spark's own
    UNSUPPORTED_DATA_SOURCE_SAVE_MODE error stands)."""
    return str(w._jwrite.source()), str(w._jwrite.curmode().toString())


def _connect_state(w) -> tuple[str, str]:
    return str(w._write.source or ""), str(w._write.mode or "errorifexists")


def _wrap_save(cls, state) -> None:
    original = cls.save
    if getattr(original, "_tahoe_save_modes", False):
        return

    def save(self, path=None, format=None, mode=None, partitionBy=None, **options):
        if format is not None:
            self.format(format)
        if mode is not None:
            self.mode(mode)
        try:
            source, current = state(self)
        except Exception:  # noqa: BLE001 - an unexpected writer: leave it to Spark
            source, current = "", ""
        if source.lower() == "delta" and id(self._spark) in _registered:
            mapped = _MAPPED_MODES.get(current.lower())
            if mapped is not None:
                self.mode("append").option(SAVE_MODE_OPTION, mapped)
            session_mode = session_overwrite_mode(self._spark)
            if session_mode is not None:
                self.option(SESSION_OVERWRITE_MODE_OPTION, session_mode)
        return original(self, path, None, None, partitionBy, **options)

    save.__doc__ = original.__doc__
    save._tahoe_save_modes = True  # type: ignore[attr-defined]
    cls.save = save


def _install_save_modes() -> None:
    from pyspark.sql.readwriter import DataFrameWriter

    _wrap_save(DataFrameWriter, _classic_state)
    try:
        from pyspark.sql.connect.readwriter import DataFrameWriter as ConnectWriter
    except Exception:  # noqa: BLE001 - Spark Connect extras not installed
        return
    _wrap_save(ConnectWriter, _connect_state)


def read_via_datasource(spark, path: str, version: int | None = None, options: dict | None = None):
    register(spark)
    r = spark.read.format("delta")
    if version is not None:
        r = r.option("versionAsOf", str(version))
    for k, v in (options or {}).items():
        r = r.option(f"storage.{k}", v)
    return r.load(path)
