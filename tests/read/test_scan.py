"""`tahoe.Table` reads with a filter: files that cannot match are not opened (counted), the rows
returned are exactly the matching ones (checked against the rows written, filtered in Python)."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest

import tahoe
from tahoe.errors import AnalysisException, ParseException
from tahoe.read import ArrowFileReader

DAYS = ["mon", "tue", "wed"]
ROWS = [{"id": i, "day": DAYS[i // 40], "v": None if i % 9 == 0 else i * 1.5,
         "ts": dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(hours=i)} for i in range(120)]


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("scan") / "events")
    data = pa.Table.from_pylist(ROWS, pa.schema([("id", pa.int64()), ("day", pa.string()), ("v", pa.float64()),
                                                 ("ts", pa.timestamp("us", tz="UTC"))]))
    tahoe.write_table(path, data, partition_by=["day"], target_file_rows=10)   # 12 files, 10 ids each
    return tahoe.Table(path)


@pytest.fixture
def opened(monkeypatch):
    """The data files the reader opens (the real reader, counted)."""
    paths: list[str] = []
    real = ArrowFileReader.read_file

    def counting(self, path, *a, **kw):
        paths.append(path)
        return real(self, path, *a, **kw)

    monkeypatch.setattr(ArrowFileReader, "read_file", counting)
    return paths


def ids(t: pa.Table) -> list[int]:
    return sorted(t.column("id").to_pylist())


@pytest.mark.parametrize("filter, match, files", [
    ("day = 'mon' and id > 10", lambda r: r["day"] == "mon" and r["id"] > 10, 3),
    ("id BETWEEN 55 AND 64", lambda r: 55 <= r["id"] <= 64, 2),
    ("day IN ('tue', 'wed') AND v IS NULL AND id < 50", lambda r: r["day"] != "mon" and r["v"] is None and r["id"] < 50, 1),
    ("ts >= '2024-01-05 00:00:00'", lambda r: r["ts"] >= dt.datetime(2024, 1, 5, tzinfo=dt.timezone.utc), 3),
    ([("day", "=", "wed"), ("id", ">=", 115)], lambda r: r["day"] == "wed" and r["id"] >= 115, 1),
    ([[("id", "<", 3)], [("id", ">", 117)]], lambda r: r["id"] < 3 or r["id"] > 117, 2),
    ("v < -1", lambda r: False, 0),
    # a double's max is no bound (NaN, above every value, may hide behind it in files whose writer left
    # NaN out of min/max, as delta-rs does): every file is opened, none matches
    ("v > 1000", lambda r: False, 12),
    ("id % 2 = 0 AND day = 'tue'", lambda r: r["id"] % 2 == 0 and r["day"] == "tue", 4),
])
def test_filter_skips_files_and_filters_rows(table, opened, filter, match, files):
    got = table.to_arrow(filter=filter)
    assert ids(got) == sorted(r["id"] for r in ROWS if match(r))
    assert len(opened) == files
    assert table.files(["path"], filter=filter).num_rows == files
    # streamed, the same files in the same order
    streamed = pa.Table.from_batches(list(table.files_reader(["path", "size"], filter=filter)),
                                     pa.schema([("path", pa.string()), ("size", pa.int64())]))
    assert streamed.to_pylist() == table.files(["path", "size"], filter=filter).to_pylist()


def test_filter_columns_need_not_be_selected(table, opened):
    got = table.to_arrow(columns=["v"], filter="id < 5")
    assert got.column_names == ["v"] and got.column("v").to_pylist() == [None, 1.5, 3.0, 4.5, 6.0]
    df = table.to_pandas(columns=["id"], filter="day = 'wed'")
    assert list(df.columns) == ["id"] and sorted(df["id"]) == list(range(80, 120))
    assert len(opened) == 1 + 4


def test_bad_filters_fail_before_any_file_is_read(table, opened):
    with pytest.raises(AnalysisException, match=r"UNRESOLVED_COLUMN.*`nope`"):
        table.to_arrow(filter="nope = 1")
    with pytest.raises(ParseException, match="id >"):
        table.to_arrow(filter="id >")
    # the streamed listing refuses them when asked, not when first read from
    with pytest.raises(AnalysisException, match=r"UNRESOLVED_COLUMN.*`nope`"):
        table.files_reader(filter="nope = 1")
    with pytest.raises(ParseException, match="id >"):
        table.files_reader(filter="id >")
    with pytest.raises(ValueError, match="unknown add column 'nope'"):
        table.files_reader(["path", "nope"])
    assert opened == []


def test_scan_plans_then_reads(table, opened):
    scan = table.scan(filter="day = 'tue' AND id >= 70", limit=3)
    planned = scan.plan_files()
    assert planned.num_rows == 1 and opened == []
    assert ids(scan.to_arrow()) == [70, 71, 72]
