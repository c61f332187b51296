"""The one rule for zone-less timestamps (`tahoe.protocol.timestamps`): expected instants derived
by hand from the zones' offsets (Los Angeles UTC-8 in winter, UTC-7 in summer; Kolkata UTC+5:30)."""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone

import pytest

from tahoe.protocol.timestamps import (
    DEFAULT_TIME_ZONE, instant_micros, instant_ms, parse_timestamp_text, to_instant, zone,
)

UTC = timezone.utc


def test_zone_less_text_is_wall_clock_time_in_the_given_zone():
    assert DEFAULT_TIME_ZONE == "UTC"
    assert parse_timestamp_text("2024-01-01 12:00:00") == datetime(2024, 1, 1, 12, tzinfo=UTC)
    assert parse_timestamp_text("2024-01-01 12:00:00", "America/Los_Angeles") == datetime(2024, 1, 1, 20, tzinfo=UTC)
    assert parse_timestamp_text("2024-01-01T12:00", "Asia/Kolkata") == datetime(2024, 1, 1, 6, 30, tzinfo=UTC)
    assert parse_timestamp_text("2024-07-01", "America/Los_Angeles") == datetime(2024, 7, 1, 7, tzinfo=UTC)
    assert parse_timestamp_text("2024-01-01 12:00:00.1234567", "UTC") == \
        datetime(2024, 1, 1, 12, 0, 0, 123456, tzinfo=UTC)


@pytest.mark.parametrize("tz", [None, "UTC", "America/Los_Angeles", "Asia/Kolkata", "+05:30"])
def test_text_with_its_own_zone_ignores_the_given_one(tz):
    want = datetime(2024, 1, 1, 20, tzinfo=UTC)
    for text in ("2024-01-01T20:00:00Z", "2024-01-01 20:00:00 UTC", "2024-01-01T12:00:00-08:00",
                 "2024-01-01 12:00:00 America/Los_Angeles", "2024-01-02T01:30:00+05:30", "2024-01-01T12:00:00-0800",
                 "2024-01-01 12:00:00 GMT-8"):
        assert parse_timestamp_text(text, tz) == want, text


def test_other_values_and_units():
    assert to_instant(datetime(2024, 1, 1, 12), "America/Los_Angeles") == datetime(2024, 1, 1, 20, tzinfo=UTC)
    aware = datetime(2024, 1, 1, 12, tzinfo=timezone(timedelta(hours=2)))
    assert to_instant(aware, "America/Los_Angeles") == datetime(2024, 1, 1, 10, tzinfo=UTC)
    assert to_instant(date(2024, 1, 1), "Asia/Kolkata") == datetime(2023, 12, 31, 18, 30, tzinfo=UTC)
    assert instant_ms(1_700_000_000_123, "Asia/Kolkata") == 1_700_000_000_123   # epoch ms: an instant
    assert instant_ms("1970-01-01 00:00:01", "UTC") == 1000
    assert instant_micros("1970-01-01 05:30:00.000001", "Asia/Kolkata") == 1
    assert zone("+08:00").utcoffset(None) == timedelta(hours=8)
    assert zone("UTC-03:30").utcoffset(None) == -timedelta(hours=3, minutes=30)
    assert zone("Z") is UTC


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="unknown time zone 'Mars/Olympus'"):
        zone("Mars/Olympus")
    with pytest.raises(ValueError, match="cannot parse timestamp 'yesterday'"):
        parse_timestamp_text("yesterday")
    with pytest.raises(ValueError, match="cannot parse timestamp '2024-13-01'"):
        parse_timestamp_text("2024-13-01")
