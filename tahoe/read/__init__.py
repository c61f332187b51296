"""The Spark-free reader: plan a scan of a snapshot and read its rows as Arrow."""

from .arrow_reader import ArrowFileReader, logical_arrow_schema
from .scan import Scan

__all__ = ["ArrowFileReader", "Scan", "logical_arrow_schema"]
