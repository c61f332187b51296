"""tahoe on PySpark: read and write Delta tables with Spark, without the delta-spark jars.

  1. `DeltaTable.forPath(spark, path)`: delta-spark's Python API names.
  2. `read_delta` / `write_delta`: native parquet scans and writes with one commit.
  3. `register(spark)`: the `delta` and `deltaSharing` Python data sources (`tahoe.spark.datasource`,
     `tahoe.spark.sharing`); `local_session()` a quiet local session.
  4. `configure_spark_with_delta_pip(builder)` / `enable(spark)`: Delta SQL and tables by name
     (`tahoe.spark.sql`).
  5. Importing `tahoe.spark` installs the wrappers of PySpark's calls (`tahoe.spark.patches`), so tahoe's
     errors reach `load()` / `save()` / `spark.sql()` with their error class.
  6. Executors need tahoe importable for `format("delta")` (and `write_delta` to object stores): install it
     on every node or ship a zip (`--py-files`, `addPyFile`, Connect's `addArtifacts(..., pyfile=True)`)."""

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
