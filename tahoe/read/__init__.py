"""The Spark-free reader: plan a scan of a snapshot (data skipping with a filter) and read its
rows as Arrow."""

from typing import Any

__all__ = ["ArrowFileReader", "Scan", "logical_arrow_schema", "plan_files"]


def __getattr__(name: str) -> Any:
    # imported on first use: the file reader (and with it pyarrow.parquet) by processes that read
    # rows, the scan planner (and with it the log and the expression engine) by those that plan —
    # Spark's Python workers of format("deltaSharing") only read, a file listing only plans
    if name in ("ArrowFileReader", "logical_arrow_schema"):
        from . import arrow_reader

        return getattr(arrow_reader, name)
    if name in ("Scan", "plan_files"):
        from . import scan

        return getattr(scan, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
