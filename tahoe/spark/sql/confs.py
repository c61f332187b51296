"""delta-spark's session confs that Delta's SQL statements honour, read at the statement:

  1. `spark.databricks.delta.properties.defaults.<name>`: `delta.<name>` of every table a statement
     creates; TBLPROPERTIES win (`default_properties`).
  2. `spark.databricks.delta.schema.autoMerge.enabled`: schema evolution for INSERT and MERGE (`auto_merge`).
  3. `spark.databricks.delta.write.txnAppId` / `.txnVersion` (and `.txnVersion.autoReset.enabled`):
     an idempotent INSERT (`idempotent_write`, `after_write`).
  4. `spark.databricks.delta.commitInfo.userMetadata` (`user_metadata`).
  5. `spark.databricks.delta.replaceWhere.constraintCheck.enabled` / `.dataColumns.enabled`
     (`replace_where_settings`)."""

from __future__ import annotations

from typing import Any

from ...errors import InvalidOptionError
from ..session import session_conf, replace_where_settings as settings

__all__ = ["conf", "is_true", "default_properties", "auto_merge", "idempotent_write", "after_write", "user_metadata",
           "replace_where_settings", "DEFAULTS_PREFIX", "AUTO_MERGE"]

DEFAULTS_PREFIX = "spark.databricks.delta.properties.defaults."
AUTO_MERGE = "spark.databricks.delta.schema.autoMerge.enabled"
TXN_APP_ID = "spark.databricks.delta.write.txnAppId"
TXN_VERSION = "spark.databricks.delta.write.txnVersion"
TXN_AUTO_RESET = "spark.databricks.delta.write.txnVersion.autoReset.enabled"
USER_METADATA = "spark.databricks.delta.commitInfo.userMetadata"
from ..session import REPLACE_WHERE_CHECK, REPLACE_WHERE_DATA_COLUMNS  # noqa: E402,F401 - re-exported


def conf(spark: Any, key: str) -> str | None:
    """The session's value of `key` (None when unset or unreadable)."""
    return session_conf(spark, key)


def is_true(spark: Any, key: str, default: bool = False) -> bool:
    v = conf(spark, key)
    if v is None:
        return default
    if v.strip().lower() not in ("true", "false"):
        raise InvalidOptionError(f"{key} must be true or false, got {v!r}")
    return v.strip().lower() == "true"


def default_properties(spark: Any) -> dict[str, str]:
    """The `delta.*` table properties the session's `...properties.defaults.*` confs give a new
    table."""
    try:
        everything = dict(spark.conf.getAll)
    except Exception:  # noqa: BLE001 - a session that cannot list its confs has none set
        return {}
    return {"delta." + k[len(DEFAULTS_PREFIX):]: str(v) for k, v in everything.items()
            if k.startswith(DEFAULTS_PREFIX) and len(k) > len(DEFAULTS_PREFIX)}


def auto_merge(spark: Any) -> bool:
    return is_true(spark, AUTO_MERGE)


def idempotent_write(spark: Any) -> tuple[str | None, int | None]:
    """(txnAppId, txnVersion) of the session; both or neither (delta-spark ignores a lone one)."""
    app, version = conf(spark, TXN_APP_ID), conf(spark, TXN_VERSION)
    if app is None or version is None:
        return None, None
    try:
        return app, int(version)
    except ValueError:
        raise InvalidOptionError(f"{TXN_VERSION} must be an integer, got {version!r}") from None


def after_write(spark: Any) -> None:
    """What the session does after a write: txnVersion unset when autoReset is on."""
    if is_true(spark, TXN_AUTO_RESET) and conf(spark, TXN_VERSION) is not None:
        spark.conf.unset(TXN_VERSION)


def user_metadata(spark: Any) -> str | None:
    return conf(spark, USER_METADATA)


def replace_where_settings(spark: Any) -> tuple[bool, bool]:
    """(constraint check on, data columns allowed) for INSERT ... REPLACE WHERE (the same confs
    every replaceWhere honours: `tahoe.spark.session.replace_where_settings`)."""
    return settings(spark)
