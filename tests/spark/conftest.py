"""One Spark session for the whole Spark test run (local[2], quiet, bound to 127.0.0.1)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def spark():
    from tahoe.spark.session import local_session

    s = local_session("local[2]", "tahoe-tests", quick_start=True)
    import tahoe.spark

    tahoe.spark.register(s)
    yield s
    s.stop()


@pytest.fixture
def datasource_reads(spark):
    """`format("delta")` batch reads through tahoe's Python data source for this test (by default
    a read of a local table is Spark's native parquet scan: `tahoe.spark.calls`, rule 5)."""
    from tahoe.spark.calls import NATIVE_READ_CONF

    spark.conf.set(NATIVE_READ_CONF, "false")
    yield spark
    spark.conf.unset(NATIVE_READ_CONF)


from tests.fixtures.connect import connect, connect_server  # noqa: E402,F401 - a shared Spark Connect server
