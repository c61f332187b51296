"""The session-wide Spark fixture of tests/spark, for the tests here that take Spark as their oracle."""

from tests.spark.conftest import spark  # noqa: F401
