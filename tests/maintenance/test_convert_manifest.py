"""CONVERT TO DELTA (tahoe.convert_to_delta) and symlink manifests (`Table.generate`).

Oracles: the rows pyarrow wrote into the parquet files (read back with pyarrow), delta-rs reading
the converted table, the parquet footers (pyarrow) for the stats, the directory listing before and
after a refused conversion; for manifests, the data files the log lists."""

from __future__ import annotations

import datetime as dt
import json
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import tahoe
from tahoe.errors import InvalidTableOperationError, SchemaError, TableAlreadyExistsError
from tests.maintenance.helpers import delta_rs_read, rows, tree

UTC = dt.timezone.utc


def _raw(root: str) -> pa.Table:
    """Hive-partitioned parquet files from "several writers": an int96 writer, a microsecond one, a
    file missing a column, a null partition, a _SUCCESS marker and a .crc side file."""
    parts = {
        "day=2024-01-01/country=FR/part-0.parquet": (pa.table({"id": [1, 2], "amount": [1.5, None],
                                                               "ts": pa.array([dt.datetime(2024, 1, 1, tzinfo=UTC)] * 2)}),
                                                     {"use_deprecated_int96_timestamps": True}),
        "day=2024-01-01/country=DE/part-1.parquet": (pa.table({"id": [3], "amount": [7.25],
                                                               "ts": pa.array([dt.datetime(2024, 1, 1, 5, tzinfo=UTC)])}), {}),
        "day=2024-01-02/country=__HIVE_DEFAULT_PARTITION__/part-2.parquet": (pa.table({"id": [4]}), {}),
    }
    out = []
    for rel, (t, kw) in parts.items():
        os.makedirs(os.path.dirname(os.path.join(root, rel)), exist_ok=True)
        pq.write_table(t, os.path.join(root, rel), **kw)
        day, country = (seg.split("=")[1] for seg in rel.split("/")[:2])
        out.append({"id": t.column("id").to_pylist(), "day": day,
                    "country": None if country == "__HIVE_DEFAULT_PARTITION__" else country})
    for junk in ("_SUCCESS", "day=2024-01-01/country=FR/.part-0.parquet.crc", "_committed_123"):
        with open(os.path.join(root, junk), "w") as f:
            f.write("")
    return out


def test_convert_in_place_schema_stats_and_delta_rs(tmp_path):
    root = str(tmp_path / "raw")
    written = _raw(root)
    before = tree(root)
    m = tahoe.convert_to_delta(root, "day DATE, country STRING")
    assert m["numConvertedFiles"] == 3 and m["version"] == 0 and m["numRecords"] == 4
    assert tree(root) == before | {"_delta_log/00000000000000000000.json",     # no data file rewritten;
                               "_delta_log/00000000000000000000.crc"}      # the commit and its checksum
    t = tahoe.Table(root)
    assert [(f.name, f.type.simple_string()) for f in t.schema.fields] == [
        ("id", "long"), ("amount", "double"), ("ts", "timestamp"), ("day", "date"), ("country", "string")]
    expected = sorted(((i, dt.date.fromisoformat(w["day"]), w["country"]) for w in written for i in w["id"]), key=repr)
    assert rows(t.to_arrow(), ["id", "day", "country"]) == expected
    got = {r["id"]: r for r in t.to_arrow().to_pylist()}
    assert got[1]["ts"] == dt.datetime(2024, 1, 1, tzinfo=UTC) and got[3]["amount"] == 7.25
    # stats: from the footers (pyarrow's own reading of them is the oracle)
    stats = {f["path"]: json.loads(f["stats"]) for f in t.files(["path", "stats"]).to_pylist()}
    de = stats["day=2024-01-01/country=DE/part-1.parquet"]
    assert de["numRecords"] == 1 and de["minValues"]["id"] == 3 and de["maxValues"]["ts"] == "2024-01-01T05:00:00.000Z"
    missing = stats["day=2024-01-02/country=__HIVE_DEFAULT_PARTITION__/part-2.parquet"]
    assert missing["nullCount"]["amount"] == 1 and missing["nullCount"]["ts"] == 1      # absent columns: all null
    commit = [json.loads(x) for x in open(os.path.join(root, "_delta_log", f"{0:020d}.json"))]
    ci = commit[0]["commitInfo"]
    assert ci["operation"] == "CONVERT" and ci["operationMetrics"] == {"numConvertedFiles": "3"}
    assert ci["operationParameters"] == {"numFiles": "3", "partitionedBy": '["day", "country"]',
                                         "collectStats": "true", "sourceFormat": "parquet"}
    theirs = delta_rs_read([(root, None)], tmp_path)[0]
    assert rows(theirs, ["id", "country"]) == sorted(((i, w["country"]) for w in written for i in w["id"]), key=repr)
    with pytest.raises(TableAlreadyExistsError, match="already a Delta table"):
        tahoe.convert_to_delta(root, "day DATE, country STRING")
    assert tahoe.convert_to_delta(root, mode="ignore")["numConvertedFiles"] == 0


@pytest.mark.parametrize("case", ["not parquet", "schemas differ", "no partition schema", "bad partition value",
                                  "partition column in files"])
def test_convert_refusals_change_nothing(tmp_path, case):
    root = str(tmp_path / "raw")
    os.makedirs(os.path.join(root, "p=1"))
    pq.write_table(pa.table({"id": pa.array([1], pa.int64())}), os.path.join(root, "p=1", "a.parquet"))
    schema, err, match = "p INT", InvalidTableOperationError, None
    if case == "not parquet":
        with open(os.path.join(root, "p=1", "b.csv"), "w") as f:
            f.write("id\n2\n")
        match = "b.csv is not a parquet file"
    elif case == "schemas differ":
        pq.write_table(pa.table({"id": pa.array([2], pa.int32())}), os.path.join(root, "p=1", "b.parquet"))
        err, match = SchemaError, "column 'id' is long in p=1/a.parquet and integer in p=1/b.parquet"
    elif case == "no partition schema":
        schema, match = None, "give the partition schema"
    elif case == "bad partition value":
        os.makedirs(os.path.join(root, "p=x"))
        pq.write_table(pa.table({"id": [3]}), os.path.join(root, "p=x", "c.parquet"))
        match = "'x' is not a valid integer value for partition column 'p'"
    else:
        schema, err, match = "id INT", InvalidTableOperationError, None
    before = tree(root)
    with pytest.raises((err, SchemaError)) as e:
        tahoe.convert_to_delta(root, schema)
    if match:
        assert match in str(e.value)
    assert tree(root) == before and not os.path.exists(os.path.join(root, "_delta_log"))


def test_symlink_manifests_follow_the_table(tmp_path):
    root = str(tmp_path / "t")
    tahoe.write_table(root, pa.table({"id": [1, 2, 3], "p": ["a", "b", None]}), partition_by=["p"])
    t = tahoe.Table(root)
    assert t.generate("symlink_format_manifest")["numManifests"] == 3

    def manifests() -> dict[str, list[str]]:
        base = os.path.join(root, "_symlink_format_manifest")
        return {os.path.relpath(d, base): open(os.path.join(d, "manifest")).read().split()
                for d, _, fs in os.walk(base) if "manifest" in fs}

    def expected() -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for f in tahoe.Table(root).files(["path"])["path"].to_pylist():
            out.setdefault(f.split("/")[0], []).append("file://" + root + "/" + f)
        return {k: sorted(v) for k, v in out.items()}

    assert manifests() == expected() and "p=__HIVE_DEFAULT_PARTITION__" in manifests()
    t.set_properties({"delta.compatibility.symlinkFormatManifest.enabled": "true"})
    tahoe.write_table(root, pa.table({"id": [9], "p": ["z"]}), mode="overwrite")   # the hook regenerates
    assert manifests() == expected() == {"p=z": expected()["p=z"]}
    with pytest.raises(Exception, match="not supported"):
        t.generate("hive")
    dv = str(tmp_path / "dv")
    tahoe.write_table(dv, pa.table({"id": [1]}), properties={"delta.enableDeletionVectors": "true"})
    with pytest.raises(InvalidTableOperationError, match="deletion vectors"):
        tahoe.Table(dv).generate("symlink_format_manifest")
