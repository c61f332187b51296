"""delta-spark interval strings used by retention properties."""

import pytest

from tahoe.protocol.intervals import parse_interval_ms

DAY_MS = 86_400_000


@pytest.mark.parametrize("text,ms", [
    ("interval 1 week", 7 * DAY_MS), ("interval 30 days", 30 * DAY_MS), ("1 day", DAY_MS),
    ("interval 2 days 12 hours", 60 * 3_600_000), ("INTERVAL 90 MINUTES", 90 * 60_000),
    ("interval 500 milliseconds", 500), ("interval 1 second", 1000)])
def test_parse_interval(text, ms):
    assert parse_interval_ms(text) == ms


@pytest.mark.parametrize("text", ["interval 1 month", "1 year", "interval", "forever", "interval -1 day", "1 fortnight"])
def test_parse_interval_invalid(text):
    with pytest.raises(ValueError):
        parse_interval_ms(text)
