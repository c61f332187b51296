"""`tahoe.DeltaTable` / `tahoe.write_deltalake`: a deltalake user's script runs with `deltalake`
replaced by `tahoe` (issue 31, point 4).

The oracle is delta-rs itself: the same script (create, write, delete, update, merge, optimize,
vacuum, history, time travel, change data feed) runs once with `deltalake` and once with `tahoe`
as the module, each on its own directory; rows, metrics that count rows, history operations and
change rows must agree, and delta-rs must read the table tahoe wrote as tahoe does.
"""

from __future__ import annotations

import os
import types

import deltalake
import pyarrow as pa
import pytest

import tahoe
from tahoe.errors import UnsupportedFeatureError

SCHEMA = pa.schema([("id", pa.int64()), ("country", pa.string()), ("amount", pa.float64())])


def _batch(ids, countries, amounts) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "country": pa.array(countries, pa.string()),
                     "amount": pa.array(amounts, pa.float64())})


def _rows(t: pa.Table, drop=()) -> list[tuple]:
    cols = [c for c in t.column_names if c not in drop]
    return sorted(tuple(r[c] for c in cols) for r in t.select(cols).to_pylist())


def script(dl: types.ModuleType, path: str) -> dict:
    """A deltalake user's script; `dl` is the `deltalake` module or `tahoe`."""
    out: dict = {}
    dt = dl.DeltaTable.create(path, SCHEMA, partition_by=["country"],
                              configuration={"delta.enableChangeDataFeed": "true"})        # v0
    dl.write_deltalake(path, _batch([1, 2, 3, 4], ["FR", "FR", "US", "US"], [1.0, 10.0, 3.0, 30.0]),
                       mode="append")                                                      # v1
    dl.write_deltalake(dt, _batch([5, 6], ["DE", "FR"], [50.0, 4.0]), mode="append")      # v2
    dt = dl.DeltaTable(path)
    out["version_after_writes"] = dt.version()
    out["v2"] = _rows(dt.to_pyarrow_table())

    d = dt.delete("amount < 2")                                                            # v3
    out["delete"] = {k: d[k] for k in ("num_deleted_rows", "num_copied_rows")}
    u = dt.update(updates={"amount": "amount * 2"}, predicate="country = 'FR'")            # v4
    out["update"] = {k: u[k] for k in ("num_updated_rows", "num_copied_rows")}
    source = _batch([3, 6, 7], ["US", "FR", "IT"], [300.0, 600.0, 70.0])
    m = (dt.merge(source, "t.id = s.id", source_alias="s", target_alias="t")                # v5
         .when_matched_update(updates={"amount": "s.amount"}, predicate="s.amount > 400")
         .when_matched_delete()
         .when_not_matched_insert_all()
         .when_not_matched_by_source_update(updates={"amount": "t.amount + 1"}, predicate="t.country = 'DE'")
         .execute())
    out["merge"] = {k: m[k] for k in ("num_source_rows", "num_target_rows_inserted", "num_target_rows_updated",
                                      "num_target_rows_deleted", "num_target_rows_copied", "num_output_rows")}
    out["version_after_merge"] = dt.version()
    out["v5"] = _rows(dt.to_pyarrow_table())
    out["count"] = dt.count()

    c = dt.optimize.compact()                                                              # v6
    out["compact_keys"] = {"numFilesAdded", "numFilesRemoved", "partitionsOptimized", "totalConsideredFiles"} <= set(c)
    z = dt.optimize.z_order(["id"])                                                        # v7
    out["z_order_keys"] = {"numFilesAdded", "numFilesRemoved"} <= set(z)
    out["v7"] = _rows(dt.to_pyarrow_table())

    out["history"] = [h["operation"] for h in dt.history()][::-1]
    out["history_limit"] = [h["version"] for h in dt.history(2)]

    cdf = pa.table(dt.load_cdf(starting_version=3, ending_version=5).read_all())
    # by name: delta-rs puts partition columns last, delta-spark (and tahoe) keep the schema's order
    out["cdf"] = _rows(cdf.select(sorted(cdf.column_names)), drop=("_commit_timestamp",))

    dt.load_as_version(2)                                                                  # time travel
    out["travel_v2"] = _rows(dt.to_pyarrow_table())
    out["open_v4"] = _rows(dl.DeltaTable(path, version=4).to_pyarrow_table(filters=[("country", "=", "FR")]))
    dt.update_incremental()
    out["latest"] = dt.version()

    dt.create_checkpoint()
    out["checkpoint"] = os.path.exists(os.path.join(path, "_delta_log", f"{dt.version():020d}.checkpoint.parquet"))

    restored = dt.restore(5)                                                               # v8
    out["restore_keys"] = sorted(restored)
    out["after_restore"] = (dt.version(), _rows(dt.to_pyarrow_table()))
    return out


def test_a_deltalake_script_runs_with_tahoe_as_with_deltalake(tmp_path):
    ours = script(tahoe, str(tmp_path / "tahoe"))
    theirs = script(deltalake, str(tmp_path / "delta_rs"))
    assert ours == theirs
    # rows by hand, so that agreement is not agreement on nothing
    assert theirs["v5"] == [(2, "FR", 20.0), (4, "US", 30.0), (5, "DE", 51.0), (6, "FR", 600.0), (7, "IT", 70.0)]
    assert theirs["merge"]["num_target_rows_deleted"] == 1 and theirs["merge"]["num_target_rows_inserted"] == 1
    assert theirs["history"][:6] == ["CREATE TABLE", "WRITE", "WRITE", "DELETE", "UPDATE", "MERGE"]
    # delta-rs reads what tahoe wrote (and the reverse) row for row
    assert _rows(deltalake.DeltaTable(str(tmp_path / "tahoe")).to_pyarrow_table()) == theirs["after_restore"][1]
    assert _rows(tahoe.DeltaTable(str(tmp_path / "delta_rs")).to_pyarrow_table()) == ours["after_restore"][1]


def test_vacuum_deletes_what_no_version_in_the_window_names(tmp_path):
    path = str(tmp_path / "t")
    tahoe.write_deltalake(path, _batch([1, 2], ["FR", "US"], [1.0, 2.0]))
    dt = tahoe.DeltaTable(path)
    dt.delete("id = 1")
    assert dt.vacuum() == []                               # default retention: 7 days
    live = set(deltalake.DeltaTable(path).file_uris())
    on_disk = {os.path.join(r, f) for r, _, fs in os.walk(path) if "_delta_log" not in r
               for f in fs if f.endswith(".parquet")}
    gone = dt.vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    assert {os.path.join(path, p) for p in gone} == {p for p in on_disk if "file://" + p not in live and p not in live}
    assert _rows(deltalake.DeltaTable(path).to_pyarrow_table()) == [(2, "US", 2.0)]


def test_write_deltalake_default_mode_refuses_an_existing_table(tmp_path):
    path = str(tmp_path / "t")
    tahoe.write_deltalake(path, _batch([1], ["FR"], [1.0]))
    with pytest.raises(Exception) as ours:
        tahoe.write_deltalake(path, _batch([2], ["FR"], [2.0]))
    with pytest.raises(Exception) as theirs:
        deltalake.write_deltalake(path, _batch([2], ["FR"], [2.0]))
    assert "exists" in str(ours.value).lower() and "exists" in str(theirs.value).lower()


def test_deltalake_options_tahoe_does_not_implement_are_refused_by_name(tmp_path):
    path = str(tmp_path / "t")
    tahoe.write_deltalake(path, _batch([1], ["FR"], [1.0]))
    dt = tahoe.DeltaTable(path)
    with pytest.raises(UnsupportedFeatureError, match="statistics_truncate_length"):
        dt.delete("id = 1", writer_properties=tahoe.WriterProperties(statistics_truncate_length=8))
    with pytest.raises(UnsupportedFeatureError, match="max_spill_size"):
        dt.merge(_batch([2], ["FR"], [2.0]), "s.id = t.id", "s", "t", max_spill_size=1 << 20)
    assert dt.version() == 0 and _rows(dt.to_pyarrow_table()) == [(1, "FR", 1.0)]


def test_alter_as_deltalake(tmp_path):
    path = str(tmp_path / "t")
    tahoe.write_deltalake(path, _batch([1, 5], ["FR", "US"], [1.0, 5.0]))
    dt = tahoe.DeltaTable(path)
    with pytest.raises(tahoe.errors.ConstraintViolationError):
        dt.alter.add_constraint({"positive": "amount > 2"})
    dt.alter.add_constraint({"positive": "amount > 0"})
    dt.alter.add_columns(tahoe.Field("note", "string"))
    dt.alter.set_table_properties({"delta.appendOnly": "true"})
    assert dt.metadata().configuration["delta.constraints.positive"] == "amount > 0"
    assert dt.schema().names == ["id", "country", "amount", "note"]
    # delta-rs reads the altered table
    rs = deltalake.DeltaTable(path)
    assert rs.metadata().configuration["delta.appendOnly"] == "true"
    assert [f.name for f in rs.schema().fields] == ["id", "country", "amount", "note"]


def test_table_carries_the_dml_with_delta_spark_metrics(tmp_path):
    path = str(tmp_path / "t")
    tahoe.write_table(path, _batch([1, 2, 3], ["FR", "FR", "US"], [1.0, 2.0, 3.0]))
    t = tahoe.Table(path)
    assert t.delete("id = 1")["numDeletedRows"] == 1 and t.version == 1
    assert t.update({"amount": "amount + 1"}, predicate="id = 2")["numUpdatedRows"] == 1 and t.version == 2
    m = (t.merge(_batch([3, 4], ["US", "DE"], [30.0, 40.0]), "t.id = s.id", "s", "t")
         .when_matched_update_all().when_not_matched_insert_all().execute())
    assert (m["numTargetRowsUpdated"], m["numTargetRowsInserted"], m["version"], t.version) == (1, 1, 3, 3)
    assert _rows(deltalake.DeltaTable(path).to_pyarrow_table()) == [
        (2, "FR", 3.0), (3, "US", 30.0), (4, "DE", 40.0)]
