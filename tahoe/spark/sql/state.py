"""Whether Delta's SQL layer is on in a session (see `tahoe.spark.sql`): marked by `enable` /
`disable`, or by the session conf `spark.tahoe.sql.enabled` (a session built by
`configure_spark_with_delta_pip`, or configured with `--conf`). Kept apart so that the call
wrappers can ask without importing what turns the layer on."""

from __future__ import annotations

from typing import Any

__all__ = ["ENABLED_CONF", "is_enabled", "mark"]

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
