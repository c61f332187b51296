"""Fixtures of the client tests (import the fixtures into a test module to use them): a sharing
server process sharing every conformance table that has expected rows (share `g`, schema `t`,
table names with `-` → `_`), and tables these tests write (share `w`, schema `t`): the hand-built
`cdf` table of `conftest.build_tables` and `dvcm` — written by tahoe with deletion vectors, column
mapping (a column named with a space), timestamp_ntz, a partition column and the change data feed —
whose rows are written down here (`DVCM_*`), derived by hand from how it is built — and `growing`
(version 0: ids 0..9), which the streaming test appends to.

Recipients: `alice` (bearer; g and w), `other` (bearer; g only), and OAuth clients `oa` (w),
`oa_short` (w; access tokens live 2 s) and `oa_revoked` (w; revoked before the tests run)."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pytest
import yaml

from tests.conftest import GOLDEN, MANIFEST
from tests.sharing.conftest import REPO, build_tables, free_port, start_server, stop_server


def tname(golden: str) -> str:
    return golden.replace("-", "_").lower()


ROWS_TABLES = [e for e in MANIFEST if e["expect"] == "rows"]

# `dvcm`: v0 ids 0..19 ("Grp Name" x for even ids, y for odd), v1 deletes ids 0 and 6 (rows 0 and
# 3 of the x file) and id 3 (row 1 of the y file) with deletion vectors, v2 appends 100 (z), 101 (x)
DVCM_V0 = [(i, "x" if i % 2 == 0 else "y") for i in range(20)]
DVCM_DELETED = [(0, "x"), (6, "x"), (3, "y")]
DVCM_V2_ADDED = [(100, "z"), (101, "x")]
DVCM_LATEST = sorted([r for r in DVCM_V0 if r not in DVCM_DELETED] + DVCM_V2_ADDED)


def build_dvcm(path: str) -> None:
    from tahoe import Table
    from tahoe.write import delete_rows, write_table

    def rows(pairs):
        return pa.table({"id": pa.array([i for i, _ in pairs], pa.int64()), "Grp Name": [g for _, g in pairs],
                         "ts": pa.array([None] * len(pairs), pa.timestamp("us"))})
    write_table(path, rows(DVCM_V0), partition_by=["Grp Name"],
                properties={"delta.enableDeletionVectors": "true", "delta.columnMapping.mode": "name",
                            "delta.enableChangeDataFeed": "true"})
    files = Table(path).files()
    by_part = {dict(pv)[next(iter(dict(pv)))]: p for p, pv in
               zip(files.column("path").to_pylist(), files.column("partitionValues").to_pylist())}
    delete_rows(path, {by_part["x"]: [0, 3], by_part["y"]: [1]})
    write_table(path, rows(DVCM_V2_ADDED), mode="append")


@dataclass
class ClientServer:
    url: str
    dir: Path
    config: str
    profiles: dict[str, str] = field(default_factory=dict)
    tables: dict[str, str] = field(default_factory=dict)   # share.table -> location

    def table_url(self, who: str, share: str, table: str) -> str:
        return f"{self.profiles[who]}#{share}.t.{table}"


def add_recipient(config: str, d: Path, name: str, shares: list[str], *extra: str) -> tuple[str, dict]:
    args = [sys.executable, "-m", "tahoe", "sharing", "recipient", "add", name, "--config", config, *extra]
    for s in shares:
        args += ["--share", s]
    out = subprocess.run(args, cwd=str(REPO), capture_output=True, text=True, check=True).stdout
    prof = json.loads(out)
    p = d / f"{name}.share"
    p.write_text(json.dumps(prof))
    return str(p), prof


@pytest.fixture(scope="session")
def share_server(tmp_path_factory) -> ClientServer:
    d = tmp_path_factory.mktemp("client-sharing")
    hand = build_tables(d / "hand")
    build_dvcm(str(d / "dvcm"))
    from tahoe.write import write_table

    write_table(str(d / "growing"), pa.table({"id": pa.array(range(10), pa.int64())}))
    written = {"cdf": hand["cdf"], "stats": hand["stats"], "dvcm": str(d / "dvcm"), "growing": str(d / "growing")}
    golden = {tname(e["name"]): str(GOLDEN / e["table"]) for e in ROWS_TABLES} if GOLDEN.exists() else {}
    cfg = {
        "shares": [
            {"name": "g", "schemas": [{"name": "t", "tables": [
                {"name": n, "location": loc, "historyShared": True} for n, loc in golden.items()]}]},
            {"name": "w", "schemas": [{"name": "t", "tables": [
                {"name": n, "location": loc, "historyShared": True} for n, loc in written.items()]}]},
        ],
        "host": "127.0.0.1", "endpoint": "/delta-sharing", "preSignedUrlTimeoutSeconds": 900,
    }
    port = free_port()
    cfg["port"] = port
    config = str(d / "server.yaml")
    Path(config).write_text(yaml.safe_dump(cfg))
    srv = ClientServer(f"http://127.0.0.1:{port}/delta-sharing", d, config,
                       tables={**{f"g.{k}": v for k, v in golden.items()}, **{f"w.{k}": v for k, v in written.items()}})
    srv.profiles["alice"], _ = add_recipient(config, d, "alice", ["g", "w"])
    srv.profiles["other"], _ = add_recipient(config, d, "other", ["g"])
    srv.profiles["oa"], _ = add_recipient(config, d, "oa", ["w"], "--oauth")
    srv.profiles["oa_short"], _ = add_recipient(config, d, "oa_short", ["w"], "--oauth", "--token-ttl-seconds", "2")
    srv.profiles["oa_revoked"], _ = add_recipient(config, d, "oa_revoked", ["w"], "--oauth")
    subprocess.run([sys.executable, "-m", "tahoe", "sharing", "recipient", "revoke", "oa_revoked", "--config", config],
                   cwd=str(REPO), check=True, capture_output=True)
    proc = start_server(config, port)
    yield srv
    stop_server(proc)
