"""Hand-built Delta tables for the sharing tests: parquet files plus JSON commits written directly
(no writer dependency), with stats, partitions, CDF (`cdc` files) and controlled commit times."""

from __future__ import annotations

import json
import os
import uuid
from datetime import date, datetime, timezone

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

_TYPES = {pa.int64(): "long", pa.int32(): "integer", pa.string(): "string", pa.float64(): "double",
          pa.bool_(): "boolean", pa.date32(): "date"}


def delta_type(t: pa.DataType) -> str:
    if pa.types.is_timestamp(t):
        return "timestamp" if t.tz else "timestamp_ntz"
    return _TYPES[t]


def schema_string(schema: pa.Schema) -> str:
    return json.dumps({"type": "struct", "fields": [
        {"name": f.name, "type": delta_type(f.type), "nullable": True, "metadata": {}} for f in schema]})


def _stat(v):
    if isinstance(v, datetime):
        return v.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.") + f"{v.microsecond // 1000:03d}Z"
    if isinstance(v, date):
        return v.isoformat()
    return v


def stats_of(t: pa.Table) -> str:
    mins, maxs, nulls = {}, {}, {}
    for name in t.column_names:
        col = t.column(name)
        nulls[name] = col.null_count
        if pa.types.is_boolean(col.type) or col.null_count == len(col):
            continue
        mm = pc.min_max(col).as_py()
        mins[name], maxs[name] = _stat(mm["min"]), _stat(mm["max"])
    return json.dumps({"numRecords": t.num_rows, "minValues": mins, "maxValues": maxs, "nullCount": nulls})


def _pv(v) -> str | None:
    if v is None:
        return None
    if isinstance(v, bool):
        return str(v).lower()
    return str(v)


class TableBuilder:
    """`TableBuilder(root, schema, partition_by, configuration)`; `.append(tbl)`, `.delete_files(...)`,
    `.commit(...)`. Commit v gets mtime `base_time + v * 3600 s`."""

    BASE = datetime(2024, 1, 1, tzinfo=timezone.utc).timestamp()

    def __init__(self, root: str, schema: pa.Schema, partition_by=(), configuration=None, table_id=None):
        self.root = str(root)
        self.schema = schema
        self.partition_by = list(partition_by)
        self.version = -1
        self.files: dict[str, dict] = {}
        os.makedirs(os.path.join(self.root, "_delta_log"), exist_ok=True)
        md = {"id": table_id or str(uuid.uuid4()), "format": {"provider": "parquet", "options": {}},
              "schemaString": schema_string(schema), "partitionColumns": self.partition_by,
              "configuration": dict(configuration or {}), "createdTime": 1704067200000}
        self.commit([{"protocol": {"minReaderVersion": 1, "minWriterVersion": 4 if configuration else 2}},
                     {"metaData": md}])

    def _write(self, t: pa.Table, sub: str = "") -> list[dict]:
        adds = []
        if self.partition_by:
            keys = t.select(self.partition_by).to_pylist()
            groups: dict[tuple, list[int]] = {}
            for i, k in enumerate(keys):
                groups.setdefault(tuple(k[c] for c in self.partition_by), []).append(i)
        else:
            groups = {(): list(range(t.num_rows))}
        for key, idx in groups.items():
            part = t.take(pa.array(idx, pa.int64()))
            data = part.drop_columns(self.partition_by) if self.partition_by else part
            d = "/".join(f"{c}={'__HIVE_DEFAULT_PARTITION__' if v is None else v}" for c, v in zip(self.partition_by, key))
            rel = "/".join(x for x in (sub, d, f"part-{uuid.uuid4()}.parquet") if x)
            full = os.path.join(self.root, *rel.split("/"))
            os.makedirs(os.path.dirname(full), exist_ok=True)
            pq.write_table(data, full)
            adds.append({"path": rel, "partitionValues": {c: _pv(v) for c, v in zip(self.partition_by, key)},
                         "size": os.path.getsize(full), "modificationTime": 1704067200000, "dataChange": True,
                         "stats": stats_of(data.drop_columns([c for c in data.column_names if c.startswith("_")]))})
        return adds

    def commit(self, actions: list[dict]) -> int:
        self.version += 1
        path = os.path.join(self.root, "_delta_log", f"{self.version:020d}.json")
        ts = int((self.BASE + self.version * 3600) * 1000)
        lines = [{"commitInfo": {"timestamp": ts, "operation": "WRITE"}}] + actions
        with open(path, "w") as f:
            f.write("\n".join(json.dumps(a) for a in lines) + "\n")
        os.utime(path, (ts / 1000, ts / 1000))
        for a in actions:
            if "add" in a:
                self.files[a["add"]["path"]] = a["add"]
            if "remove" in a:
                self.files.pop(a["remove"]["path"], None)
        return self.version

    def append(self, t: pa.Table) -> int:
        return self.commit([{"add": a} for a in self._write(t)])

    def remove(self, paths, cdc: pa.Table | None = None) -> int:
        acts = [{"remove": {"path": p, "deletionTimestamp": 1, "dataChange": True,
                            "partitionValues": self.files[p]["partitionValues"], "size": self.files[p]["size"]}}
                for p in paths]
        if cdc is not None:
            acts += [{"cdc": {k: v for k, v in a.items() if k in ("path", "partitionValues", "size", "dataChange")}}
                     for a in self._write(cdc, "_change_data")]
        return self.commit(acts)

    def rewrite(self, paths, new: pa.Table, cdc: pa.Table | None = None) -> int:
        """Replace files by `new` (an update), with cdc rows when given."""
        acts = [{"remove": {"path": p, "deletionTimestamp": 1, "dataChange": True,
                            "partitionValues": self.files[p]["partitionValues"], "size": self.files[p]["size"]}}
                for p in paths]
        acts += [{"add": a} for a in self._write(new)]
        if cdc is not None:
            acts += [{"cdc": {k: v for k, v in a.items() if k in ("path", "partitionValues", "size", "dataChange")}}
                     for a in self._write(cdc, "_change_data")]
        return self.commit(acts)

    def set_configuration(self, conf: dict) -> int:
        from tahoe.log import DeltaLog

        md = DeltaLog.for_table(self.root).snapshot().metadata.to_dict()
        md["configuration"] = {**md.get("configuration", {}), **conf}
        return self.commit([{"metaData": md}])
