"""Zone-less timestamps as instants: the one rule every layer uses (delta-spark's, in the session time zone
`spark.sql.session.timeZone`); `now_ms()`, the clock every writer stamps actions with.

  1. A value that carries its zone (`Z`, `+05:30`, ` UTC`, ` America/Los_Angeles`, aware datetime) is that instant.
  2. A zone-less value is wall-clock time in `time_zone`: the session's on Spark, else UTC.
  3. A skipped wall-clock time moves forward by the gap, a repeated one takes the earlier offset (Java's).
  4. Epoch numbers are milliseconds.
Zone names: IANA ids, `UTC` / `GMT` / `Z`, fixed offsets (`+08:00`, `-0530`, `UTC+8`, `GMT-03:30`)."""

from __future__ import annotations

import datetime as _dt
import functools
import re
import time
from typing import Any

__all__ = ["DEFAULT_TIME_ZONE", "zone", "parse_timestamp_text", "localize", "to_instant", "instant_ms",
           "instant_micros", "normalize_zone_name", "now_ms"]

DEFAULT_TIME_ZONE = "UTC"


def now_ms() -> int:
    """Now, in epoch milliseconds."""
    return int(time.time() * 1000)


_UTC = _dt.timezone.utc
_OFFSET_RE = re.compile(r"^(?:UTC|GMT|UT)?([+-])(\d{1,2})(?::?(\d{2}))?(?::?(\d{2}))?$", re.IGNORECASE)
# date, optional time (fraction up to 9 digits), optional zone (Z, an offset, or a zone id after a space)
_TEXT_RE = re.compile(
    r"^\s*([+-]?\d{4,})(?:-(\d{1,2})(?:-(\d{1,2}))?)?"
    r"(?:[T ](\d{1,2}):(\d{1,2})(?::(\d{1,2})(?:\.(\d{0,9}))?)?)?"
    r"\s*([A-Za-z][A-Za-z0-9_/+\-:]*|[+-]\d{1,2}(?::?\d{2}(?::?\d{2})?)?)?\s*$")


def normalize_zone_name(name: str | None) -> str:
    """`name` as a zone id (None / blank: DEFAULT_TIME_ZONE; `Z` → `UTC`)."""
    s = (name or "").strip()
    if not s:
        return DEFAULT_TIME_ZONE
    return "UTC" if s.upper() == "Z" else s


@functools.lru_cache(maxsize=128)
def zone(name: str | None) -> _dt.tzinfo:
    """The tzinfo of a zone name (see the module docstring); ValueError naming it when unknown."""
    s = normalize_zone_name(name)
    if s.upper() in ("UTC", "GMT", "UT"):
        return _UTC
    m = _OFFSET_RE.match(s)
    if m:
        sign, h, mi, se = m.groups()
        delta = _dt.timedelta(hours=int(h), minutes=int(mi or 0), seconds=int(se or 0))
        if delta > _dt.timedelta(hours=18):
            raise ValueError(f"invalid time zone offset {name!r}: more than 18 hours")
        return _dt.timezone(-delta if sign == "-" else delta)
    from zoneinfo import ZoneInfo

    try:
        return ZoneInfo(s)
    except Exception:  # noqa: BLE001 - ZoneInfoNotFoundError, ValueError on odd keys
        raise ValueError(f"unknown time zone {name!r} (use a region id such as America/Los_Angeles, "
                         f"UTC, or an offset such as +08:00)") from None


def localize(naive: _dt.datetime, time_zone: str | None = None) -> _dt.datetime:
    """A wall-clock datetime (its tzinfo ignored) as the instant it names in `time_zone`, aware in
    UTC (rule 3 of the module docstring for gaps and repeats)."""
    tz = zone(time_zone)
    return naive.replace(tzinfo=tz, fold=0).astimezone(_UTC)


def parse_timestamp_text(text: str, time_zone: str | None = None) -> _dt.datetime:
    """A timestamp string (`2024`, `2024-01`, `2024-01-01`, `2024-01-01 10:00[:00[.123456]]`, `T` between date and
    time, an optional zone: `Z`, `+05:30`, ` UTC`, ` America/Los_Angeles`) as an aware datetime in
    UTC; zone-less text is wall-clock time in `time_zone`. ValueError when it does not parse."""
    m = _TEXT_RE.match(text)
    if not m:
        raise ValueError(f"cannot parse timestamp {text!r}: use e.g. 2024-01-01 10:00:00, "
                         f"2024-01-01T10:00:00Z or 2024-01-01T10:00:00+05:30")
    year, month, day, hh, mi, ss, frac, zone_text = m.groups()
    if hh is not None and day is None:
        raise ValueError(f"cannot parse timestamp {text!r}: a time needs a full date before it")
    micros = int((frac or "0").ljust(6, "0")[:6])
    try:
        naive = _dt.datetime(int(year), int(month or 1), int(day or 1), int(hh or 0), int(mi or 0), int(ss or 0),
                             micros)
    except ValueError as e:
        raise ValueError(f"cannot parse timestamp {text!r}: {e}") from None
    try:
        return localize(naive, zone_text if zone_text else time_zone)
    except OverflowError:
        raise ValueError(f"timestamp {text!r} is out of range") from None


def to_instant(value: Any, time_zone: str | None = None) -> _dt.datetime:
    """`value` as an aware datetime in UTC: a string (`parse_timestamp_text`), a datetime (naive:
    wall-clock time in `time_zone`), a date (its midnight in `time_zone`), epoch milliseconds (int
    or float), a pandas Timestamp or numpy datetime64 (naive: as a naive datetime)."""
    if isinstance(value, str):
        return parse_timestamp_text(value.strip(), time_zone)
    if isinstance(value, bool):
        raise TypeError(f"cannot use {value!r} as a timestamp")
    if isinstance(value, (int, float)):
        return _dt.datetime(1970, 1, 1, tzinfo=_UTC) + _dt.timedelta(milliseconds=value)
    if hasattr(value, "to_pydatetime"):   # pandas
        value = value.to_pydatetime()
    elif type(value).__name__ == "datetime64":
        value = value.astype("datetime64[us]").astype(_dt.datetime)
    if isinstance(value, _dt.datetime):
        return value.astimezone(_UTC) if value.tzinfo is not None else localize(value, time_zone)
    if isinstance(value, _dt.date):
        return localize(_dt.datetime(value.year, value.month, value.day), time_zone)
    raise TypeError(f"cannot use {value!r} as a timestamp")


def instant_ms(value: Any, time_zone: str | None = None) -> int:
    """`to_instant(value, time_zone)` in milliseconds since the epoch (epoch numbers as given)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return int(value)
    return instant_micros(value, time_zone) // 1000


def instant_micros(value: Any, time_zone: str | None = None) -> int:
    """`to_instant(value, time_zone)` in microseconds since the epoch."""
    d = to_instant(value, time_zone) - _dt.datetime(1970, 1, 1, tzinfo=_UTC)
    return (d.days * 86_400 + d.seconds) * 1_000_000 + d.microseconds
