"""Sessions for the SQL tests: a new session of the shared Spark session (its own temporary
views, current database and confs) with tahoe's Delta SQL enabled, so the other Spark tests'
session stays as it was; and a database per test, located in the test's tmp_path, so managed
tables land there."""

from __future__ import annotations

import uuid

import pytest


@pytest.fixture(scope="session")
def sql_spark(spark):
    import tahoe.spark

    s = spark.newSession()
    tahoe.spark.enable(s)
    return s


@pytest.fixture
def db(sql_spark, tmp_path):
    """A fresh database (managed tables under tmp_path/db), current for the test."""
    from tahoe.spark.sql.catalog import raw_sql

    name = f"t_{uuid.uuid4().hex[:10]}"
    raw_sql(sql_spark, f"CREATE DATABASE {name} LOCATION '{tmp_path / 'db'}'")
    previous = sql_spark.catalog.currentDatabase()
    sql_spark.catalog.setCurrentDatabase(name)
    yield name
    sql_spark.catalog.setCurrentDatabase(previous)
    raw_sql(sql_spark, f"DROP DATABASE IF EXISTS {name} CASCADE")
