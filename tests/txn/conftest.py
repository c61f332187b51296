"""Fixtures for the transaction tests."""

from __future__ import annotations

import pytest

from tahoe.log import DeltaLog
from tahoe.txn import create_table


@pytest.fixture
def table(tmp_path) -> str:
    """A partitioned table (id long, p string) at version 0."""
    path = str(tmp_path / "t")
    create_table(path, "id BIGINT, p STRING", ["p"])
    return path


@pytest.fixture
def log(table) -> DeltaLog:
    return DeltaLog.for_table(table)
