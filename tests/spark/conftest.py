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
