"""The session-wide Spark fixture of tests/spark, for the Spark translation tests here."""

from tests.spark.conftest import spark  # noqa: F401
