"""The Spark-free reader: plan a scan of a snapshot (data skipping with a filter) and read its
rows as Arrow."""

from typing import Any

from .arrow_reader import ArrowFileReader, logical_arrow_schema

__all__ = ["ArrowFileReader", "Scan", "logical_arrow_schema", "plan_files"]


def __getattr__(name: str) -> Any:
    # the scan planner (and with it the log and the expression engine) is imported on first use:
    # processes that only read files (Spark's Python workers of format("deltaSharing")) skip it
    if name in ("Scan", "plan_files"):
        from . import scan

        return getattr(scan, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
