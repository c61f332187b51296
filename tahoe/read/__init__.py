"""The Spark-free reader: plan a scan of a snapshot (data skipping with a filter) and read its
rows as Arrow."""

from .arrow_reader import ArrowFileReader, logical_arrow_schema
from .scan import Scan, plan_files

__all__ = ["ArrowFileReader", "Scan", "logical_arrow_schema", "plan_files"]
