"""Durations in table properties (`delta.logRetentionDuration`, `delta.deletedFileRetentionDuration`,
...): delta-spark's interval strings such as `interval 1 week` or `interval 2 days 12 hours`."""

from __future__ import annotations

import re

__all__ = ["parse_interval_ms"]

_UNIT_MS = {
    "microsecond": 0.001, "millisecond": 1, "second": 1000, "minute": 60_000, "hour": 3_600_000,
    "day": 86_400_000, "week": 7 * 86_400_000,
}
_INTERVAL_PART = re.compile(r"([+-]?\d+(?:\.\d+)?)\s*([a-z]+)")


def parse_interval_ms(text: str) -> int:
    """Milliseconds of a delta-spark interval string: `interval 1 week`, `interval 30 days`,
    `interval 2 days 12 hours`, `1 week` (the `interval` keyword is optional). Units from
    microseconds to weeks; months and years are refused, as delta-spark refuses them (their length
    is not fixed). ValueError for anything else."""
    s = str(text).strip().lower()
    if s.startswith("interval"):
        s = s[len("interval"):].strip()
    if not s:
        raise ValueError(f"invalid interval {text!r}: no amount")
    total = 0.0
    pos = 0
    for m in _INTERVAL_PART.finditer(s):
        if s[pos:m.start()].strip():
            break
        amount, unit = float(m.group(1)), m.group(2)
        unit = unit[:-1] if unit.endswith("s") and unit[:-1] in _UNIT_MS else unit
        if unit in ("month", "year", "months", "years"):
            raise ValueError(
                f"invalid interval {text!r}: months and years are not allowed (use days or weeks)")
        if unit not in _UNIT_MS:
            raise ValueError(f"invalid interval {text!r}: unknown unit '{m.group(2)}'")
        total += amount * _UNIT_MS[unit]
        pos = m.end()
    if pos == 0 or s[pos:].strip():
        raise ValueError(
            f"invalid interval {text!r}; expected e.g. 'interval 1 week' or 'interval 30 days'")
    if total < 0:
        raise ValueError(f"invalid interval {text!r}: negative durations are not allowed")
    return int(total)
