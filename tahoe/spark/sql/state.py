"""Whether Delta's SQL layer is on in a session (see `tahoe.spark.sql`): marked by `enable` /
`disable`, or by the session conf `spark.tahoe.sql.enabled` (a session built by
`configure_spark_with_delta_pip`, or configured with `--conf`); and `passthrough()`, within
which `SparkSession.sql` goes straight to Spark (tahoe's own statements). Kept apart so that the
call wrappers can ask without importing what turns the layer on."""

from __future__ import annotations

import contextlib
import threading
from typing import Any, Iterator

__all__ = ["ENABLED_CONF", "is_enabled", "mark", "passthrough", "in_passthrough"]

ENABLED_CONF = "spark.tahoe.sql.enabled"
_enabled: dict[int, bool] = {}


def mark(spark: Any, on: bool) -> None:
    try:
        spark.conf.set(ENABLED_CONF, "true" if on else "false")
    except Exception:  # noqa: BLE001 - a server that refuses the conf: the session is known here
        pass
    _enabled[id(spark)] = on


def is_enabled(spark: Any) -> bool:
    key = id(spark)
    if key not in _enabled:
        try:
            _enabled[key] = str(spark.conf.get(ENABLED_CONF, "false")).lower() == "true"
        except Exception:  # noqa: BLE001
            _enabled[key] = False
    return _enabled[key]


_state = threading.local()


@contextlib.contextmanager
def passthrough() -> Iterator[None]:
    """Within it, `SparkSession.sql` goes straight to Spark (tahoe's own statements, and the
    queries it has already rewritten)."""
    depth = getattr(_state, "depth", 0)
    _state.depth = depth + 1
    try:
        yield
    finally:
        _state.depth = depth


def in_passthrough() -> bool:
    return getattr(_state, "depth", 0) > 0
