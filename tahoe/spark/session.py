"""Spark session plumbing for tahoe: the settings the fast paths rely on, and a local session
factory for tests, benchmarks and scripts.

Owns: `configure(spark)` (runtime SQL confs the native scan/write need, applied idempotently),
reading the session's confs (`session_conf`, the time zone, partitionOverwriteMode, delta-spark's
auto compaction confs), its SparkContext and default parallelism where there is one
(`spark_context`, `default_parallelism`) and `local_session(...)` (a quiet `local[n]` session bound to 127.0.0.1).
"""

from __future__ import annotations

import os
import sys
import tempfile
from typing import Any

__all__ = ["configure", "local_session", "session_conf", "spark_context", "default_parallelism", "session_overwrite_mode", "session_time_zone",
           "replace_where_settings", "REPLACE_WHERE_CHECK", "REPLACE_WHERE_DATA_COLUMNS",
           "session_timestamp_ms", "registered", "mark_registered", "auto_compact_session_value",
           "auto_compact_settings", "DELTA_CONF", "RUNTIME_CONF", "STATIC_CONF"]

DELTA_CONF = "spark.databricks.delta."   # delta-spark's session confs

# Runtime confs (settable on a live session). Field-id reads only act when the requested schema
# carries `parquet.field.id` metadata (tahoe's id-mode scans), so they are harmless elsewhere.
RUNTIME_CONF = {
    "spark.sql.sources.parallelPartitionDiscovery.threshold": "1000000",
    "spark.sql.parquet.fieldId.read.enabled": "true",
    "spark.sql.parquet.fieldId.read.ignoreMissing": "true",
    "spark.sql.parquet.fieldId.write.enabled": "true",
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
    "spark.sql.python.filterPushdown.enabled": "true",
}

# Confs that must be given when the session is built.
STATIC_CONF = {
    "spark.hadoop.fs.file.impl": "org.apache.hadoop.fs.RawLocalFileSystem",
    "spark.hadoop.fs.file.impl.disable.cache": "true",
    "spark.hadoop.mapreduce.fileoutputcommitter.marksuccessfuljobs": "false",
    "spark.hadoop.parquet.enable.summary-metadata": "false",
    "spark.sql.session.timeZone": "UTC",
}

_configured: set[int] = set()
_registered: set[int] = set()


def registered(spark: Any) -> bool:
    """Whether `tahoe.spark.register` ran for this session (its sources are tahoe's)."""
    return id(spark) in _registered


def mark_registered(spark: Any) -> None:
    _registered.add(id(spark))


def configure(spark: Any) -> Any:
    """Apply `RUNTIME_CONF` to `spark` (once per session object)."""
    key = id(spark)
    if key in _configured:
        return spark
    for k, v in RUNTIME_CONF.items():
        try:
            if spark.conf.get(k, None) != v:
                spark.conf.set(k, v)
        except Exception:  # a conf a remote server refuses: the scan still works without it
            pass
    _configured.add(key)
    return spark


def spark_context(spark: Any) -> Any:
    """The session's SparkContext; None on Spark Connect (which has none)."""
    try:
        return spark.sparkContext
    except Exception:  # noqa: BLE001 - Spark Connect raises on the attribute
        return None


def default_parallelism(spark: Any) -> int | None:
    """The session's default parallelism (classic: the SparkContext's; Spark Connect: the
    `spark.default.parallelism` conf when set), or None."""
    sc = spark_context(spark)
    try:
        if sc is not None:
            return int(sc.defaultParallelism)
    except Exception:  # noqa: BLE001 - a stopped context
        pass
    try:
        v = spark.conf.get("spark.default.parallelism", None)
        return int(v) if v else None
    except Exception:  # noqa: BLE001 - a server that does not answer confs
        return None


def session_conf(spark: Any, key: str) -> str | None:
    """A session conf's value (None when unset, blank or unreadable, e.g. refused by a remote
    session)."""
    try:
        v = spark.conf.get(key, None)
    except Exception:  # noqa: BLE001 - a remote session that refuses to read a conf
        return None
    return None if v is None or str(v).strip() == "" else str(v)


def auto_compact_session_value(spark: Any) -> str | None:
    """spark.databricks.delta.autoCompact.enabled as set (see `tahoe.write.auto_compact`)."""
    return session_conf(spark, DELTA_CONF + "autoCompact.enabled")


def auto_compact_settings(spark: Any):
    """AutoCompactSettings from spark.databricks.delta.autoCompact.* (those set)."""
    from ..write.auto_compact import AutoCompactSettings
    from ..write.optimize import parse_size

    changes: dict[str, Any] = {}
    v = session_conf(spark, DELTA_CONF + "autoCompact.minNumFiles")
    if v is not None:
        changes["min_num_files"] = int(v)
    for field, key in (("max_file_size", "autoCompact.maxFileSize"), ("min_file_size", "autoCompact.minFileSize")):
        v = session_conf(spark, DELTA_CONF + key)
        if v is not None:
            changes[field] = parse_size(v, DELTA_CONF + key)
    return AutoCompactSettings(**changes)


def session_time_zone(spark: Any) -> str:
    """The session's `spark.sql.session.timeZone` — where Spark, and delta-spark, read zone-less
    timestamps (`tahoe.protocol.timestamps`) — on a classic or Spark Connect session alike (both
    answer `spark.conf.get`); UTC when unset or unreadable."""
    from ..protocol.timestamps import normalize_zone_name

    try:
        return normalize_zone_name(spark.conf.get("spark.sql.session.timeZone", None))
    except Exception:  # noqa: BLE001 - a stopped session or a server that does not answer confs
        return normalize_zone_name(None)


REPLACE_WHERE_CHECK = "spark.databricks.delta.replaceWhere.constraintCheck.enabled"
REPLACE_WHERE_DATA_COLUMNS = "spark.databricks.delta.replaceWhere.dataColumns.enabled"
UTC_PARTITION_VALUES = "spark.databricks.delta.write.utcTimestampPartitionValues"


def utc_timestamp_partition_values(spark: Any) -> bool:
    """delta-spark's `spark.databricks.delta.write.utcTimestampPartitionValues` (default true:
    timestamp partition values written as UTC instants with a `Z`; false: as session-zone
    wall-clock time without a zone, as delta-spark < 3.3 wrote them). A value other than true /
    false is an InvalidOptionError naming the conf."""
    from ..errors import InvalidOptionError

    v = session_conf(spark, UTC_PARTITION_VALUES)
    if v is None:
        return True
    if v.strip().lower() not in ("true", "false"):
        raise InvalidOptionError(f"{UTC_PARTITION_VALUES} must be true or false, got {v!r}")
    return v.strip().lower() == "true"


def replace_where_settings(spark: Any) -> tuple[bool, bool]:
    """delta-spark's replaceWhere confs of the session: (the written rows must satisfy the
    predicate — `replaceWhere.constraintCheck.enabled`, default true —, the predicate may read
    data columns — `replaceWhere.dataColumns.enabled`, default true since delta-spark 1.1).
    A value other than true / false is an InvalidOptionError naming the conf."""
    from ..errors import InvalidOptionError

    out = []
    for key in (REPLACE_WHERE_CHECK, REPLACE_WHERE_DATA_COLUMNS):
        v = session_conf(spark, key)
        if v is not None and v.strip().lower() not in ("true", "false"):
            raise InvalidOptionError(f"{key} must be true or false, got {v!r}")
        out.append(v is None or v.strip().lower() == "true")
    return out[0], out[1]


def session_overwrite_mode(spark: Any) -> str | None:
    """The session's `spark.sql.sources.partitionOverwriteMode` (None when unset or unreadable)."""
    try:
        return spark.conf.get("spark.sql.sources.partitionOverwriteMode", None)
    except Exception:  # noqa: BLE001 - a session without the conf
        return None


def session_timestamp_ms(spark: Any, text: Any) -> int:
    """A timestamp (string, datetime or epoch ms) as epoch ms, a zone-less one read in the session
    time zone — as delta-spark reads time travel, RESTORE and CLONE timestamps; strings with their
    own zone keep it."""
    from ..log.delta_log import parse_timestamp

    return parse_timestamp(text.strip() if isinstance(text, str) else text, session_time_zone(spark))


def _log4j_file() -> str:
    path = os.path.join(tempfile.gettempdir(), "tahoe-log4j2.properties")
    if not os.path.exists(path):
        with open(path, "w") as f:
            f.write("rootLogger.level = error\nrootLogger.appenderRef.stdout.ref = console\n"
                    "appender.console.type = Console\nappender.console.name = console\n"
                    "appender.console.target = SYSTEM_ERR\n"
                    "appender.console.layout.type = PatternLayout\n"
                    "appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n\n")
    return path


def local_session(master: str = "local[2]", app_name: str = "tahoe", extra: dict | None = None,
                  quick_start: bool = False) -> Any:
    """A quiet local SparkSession with tahoe's settings (UI off, 127.0.0.1, this interpreter
    for Python workers, 2 shuffle partitions). `tahoe.spark.register(spark)` adds the `delta`
    data source. `quick_start` limits the JVM to its C1 compiler:
    seconds faster to a first result, but long scans run slower — for tests and short jobs."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    java_opts = f"-Dlog4j.configurationFile=file:{_log4j_file()}"
    if quick_start:  # C1 only: a faster start and less JIT CPU, slower long scans (tests, short jobs)
        java_opts += " -XX:TieredStopAtLevel=1"
    b = (SparkSession.builder.master(master).appName(app_name)
         .config("spark.ui.enabled", "false")
         .config("spark.sql.shuffle.partitions", "2")
         .config("spark.ui.showConsoleProgress", "false")
         .config("spark.driver.host", "127.0.0.1")
         .config("spark.driver.bindAddress", "127.0.0.1")
         .config("spark.driver.extraJavaOptions", java_opts)
         .config("spark.executor.extraJavaOptions", java_opts)
         .config("spark.sql.execution.arrow.pyspark.enabled", "true"))
    for k, v in {**STATIC_CONF, **RUNTIME_CONF, **(extra or {})}.items():
        b = b.config(k, v)
    spark = b.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    _configured.add(id(spark))
    return spark
