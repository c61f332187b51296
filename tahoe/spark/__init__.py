"""tahoe on PySpark: read and write Delta tables with Spark, without the delta-spark jars.

- `DeltaTable.forPath(spark, path)` — delta-spark's Python API names (`toDF`, `history`,
  `detail`, `alias`, `create*` builders).
- `read_delta(spark, path, version=, timestamp=, filters=)` — the fast read: a native parquet scan
  over exactly the snapshot's files (partition pruning, data skipping, column mapping, DVs).
- `write_delta(df, path, mode=..., ...)` — the fast write: native parquet files + one commit
  (object stores such as s3://, which plain PySpark cannot write: pyarrow in the executors).
- `register(spark)` — registers the `delta` Python data source, so
  `spark.read.format("delta").load(path)` and `df.write.format("delta").save(path)` work (all
  four save modes: see `tahoe.spark.datasource`), and the `deltaSharing` one, so
  `spark.read.format("deltaSharing").load("profile.share#share.schema.table")` and
  `spark.readStream.format("deltaSharing")` read shared tables (see `tahoe.spark.sharing`).
- `local_session()` — a quiet local SparkSession with tahoe's settings (scripts, tests).
- `configure_spark_with_delta_pip(builder)` / `enable(spark)` — Delta's SQL (`MERGE INTO`,
  `DELETE FROM`, `OPTIMIZE`, `DESCRIBE HISTORY`, time travel, ...) and tables by name
  (`DeltaTable.forName`, `saveAsTable`, `spark.table`) in the session (see `tahoe.spark.sql`).

Importing `tahoe.spark` installs tahoe's wrappers of PySpark's reader, writer and session calls
(`tahoe.spark.patches`, the one list of what tahoe changes in PySpark): `format("delta")`'s save
modes and `partitionBy`, Delta SQL in enabled sessions, and tahoe's errors surfacing — an error
tahoe raises inside the data source reaches `load()` / `save()` / `spark.sql()` as tahoe's error
class and message (still an instance of Spark's exception class too).

Shipping tahoe to a cluster: executors need `tahoe` importable only for the data-source path
(`format("delta")`), whose readers/writers run Python on executors. Either `pip install tahoe` on
every node (same version as the driver), or ship it with the job:
`spark-submit --py-files tahoe.zip ...`, `spark.submit.pyFiles`, `spark.sparkContext.addPyFile(zip)`
or, over Spark Connect, `spark.addArtifacts("tahoe.zip", pyfile=True)`. The fast paths
(`read_delta`, `write_delta` to local paths, `DeltaTable.toDF`) run tahoe on the driver only;
executors run Spark's own parquet reader/writer. `write_delta` to an object store runs tahoe's
file writer in the executors too.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

__all__ = ["DeltaTable", "IdentityGenerator", "read_delta", "write_delta", "register", "local_session",
           "enable", "configure_spark_with_delta_pip", "__version__"]

from . import patches as _patches

_patches.install()

_LAZY = {
    "__version__": ("tahoe.version", "__version__"),
    "DeltaTable": ("tahoe.spark.delta_table", "DeltaTable"),
    "IdentityGenerator": ("tahoe.spark.delta_table", "IdentityGenerator"),
    "read_delta": ("tahoe.spark.delta_table", "read_delta"),
    "write_delta": ("tahoe.spark.fast_write", "write_delta"),
    "register": ("tahoe.spark.datasource", "register"),
    "local_session": ("tahoe.spark.session", "local_session"),
    "enable": ("tahoe.spark.sql", "enable"),
    "configure_spark_with_delta_pip": ("tahoe.spark.sql", "configure_spark_with_delta_pip"),
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        mod, attr = _LAZY[name]
        value = getattr(import_module(mod), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'tahoe.spark' has no attribute {name!r}")
