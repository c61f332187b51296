"""Where the Spark wing gets a table's storage options: the caller's, and the session's Hadoop
file-system confs that delta-spark users set (`spark.hadoop.fs.s3a.access.key`, ...), mapped by
`tahoe.storage.hadoop`.

1. `session_storage_options(spark, uri)`: the session's `spark.hadoop.fs.*` confs (the SparkConf's
   and the runtime conf's) as storage options, keys that cannot be mapped left unread (they may be
   for Spark's own connectors).
2. `merged_storage_options(spark, uri, given)`: those, overridden by `given` — a dict of storage
   options and / or Hadoop keys (`DeltaTable.forPath(spark, path, hadoopConf)`; Hadoop keys that
   cannot be mapped are refused by name).
3. `hand_over(reader_or_writer, spark, uri)`: the session's options as `storage.<key>` options of a
   `format("delta")` read or write (the data source runs in Python workers that cannot read the
   session), each only where the caller gave no option for that key.
"""

from __future__ import annotations

from typing import Any, Mapping

from ..storage.hadoop import is_hadoop_key, storage_options_from_hadoop
from .internals import runtime_conf_with_prefix, spark_conf_with_prefix

__all__ = ["session_storage_options", "merged_storage_options", "split_storage_options", "hand_over"]

_PREFIX = "spark.hadoop."


def _session_hadoop_confs(spark: Any) -> dict[str, str]:
    out: dict[str, str] = {}
    sc = getattr(spark, "_sc", None)
    if sc is not None:
        try:
            try:    # (read by prefix on the JVM side, not the whole conf copied entry by entry)
                found = spark_conf_with_prefix(sc, _PREFIX)
            except Exception:  # noqa: BLE001 - read as PySpark reads it, below
                found = dict(sc.getConf().getAll())
            out.update({k: v for k, v in found.items() if k.startswith(_PREFIX) and is_hadoop_key(k)})
        except Exception:  # noqa: BLE001 - a stopped context: nothing to add
            pass
    try:
        every = None
        if sc is not None:    # (classic: read by prefix on the JVM side, not entry by entry)
            try:
                every = runtime_conf_with_prefix(spark, _PREFIX)
            except Exception:  # noqa: BLE001 - read as PySpark reads them, below
                every = None
        if every is None:
            every = spark.conf.getAll
            every = every() if callable(every) else every
        out.update({k: v for k, v in dict(every).items() if str(k).startswith(_PREFIX) and is_hadoop_key(str(k))})
    except Exception:  # noqa: BLE001 - a server that does not answer confs
        pass
    return out


def session_storage_options(spark: Any, uri: str | None = None) -> dict[str, str]:
    """See the module docstring (1)."""
    if spark is None:
        return {}
    confs = _session_hadoop_confs(spark)
    return storage_options_from_hadoop(confs, uri, strict=False) if confs else {}


def split_storage_options(given: Mapping[str, Any] | None, uri: str | None = None) -> dict[str, Any]:
    """`given` with its Hadoop keys mapped (strictly) and its other keys kept as storage options
    (which win over mapped ones)."""
    if not given:
        return {}
    hadoop = {k: v for k, v in given.items() if is_hadoop_key(str(k))}
    rest = {k: v for k, v in given.items() if not is_hadoop_key(str(k))}
    return {**(storage_options_from_hadoop(hadoop, uri) if hadoop else {}), **rest}


def merged_storage_options(spark: Any, uri: str, given: Mapping[str, Any] | None) -> dict | None:
    """See the module docstring (2); None when there are none."""
    out = {**session_storage_options(spark, uri), **split_storage_options(given, uri)}
    return out or None


def hand_over(rw: Any, spark: Any, uri: str | None, given: Mapping[str, Any]) -> None:
    """See the module docstring (3). `given`: the options the caller set on `rw` so far."""
    session = session_storage_options(spark, uri)
    if not session:
        return
    low = {str(k).lower(): v for k, v in given.items()}
    explicit = {k[len("storage."):] for k in low if k.startswith("storage.")}
    try:
        explicit |= set(storage_options_from_hadoop({k: v for k, v in given.items() if is_hadoop_key(str(k))},
                                                    uri, strict=False))
    except Exception:  # noqa: BLE001 - the source refuses bad options by name
        pass
    for k, v in session.items():
        if k.lower() not in explicit:
            rw.option(f"storage.{k}", v)
