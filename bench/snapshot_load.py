"""Snapshot load + active-file list: tahoe beside delta-rs and beside the limit, in one run.

    python -m bench.snapshot_load            # 100k and 1M active files
    python -m bench.snapshot_load --quick    # 10k and 100k

Each table is built here: commit 0 holds protocol, metaData and N adds (partitioned by `part`,
with realistic stats), tahoe writes a checkpoint of it, then 1,000 JSON commits of one add each
follow. Timed (best of 3, warm cache):
  - tahoe:    DeltaLog.for_table(p).snapshot().files_table(["path"])  (and with partitionValues,
              size, stats: the full add list)
  - delta-rs: deltalake.DeltaTable(p) and dt.file_uris()  (and dt.get_add_actions())
  - limit:    pyarrow reading only the checkpoint's add.path column + json-parsing the tail
Ratios are tahoe / reference.

Then the log-compaction measure (spec "Log Compaction Files", issue 20): a table with no checkpoint
and a long JSON tail (10,000 commits; 2,000 with --quick) of one add each, every tenth commit also
removing the file added ten commits before. Three copies of it: the bare log, one compaction file
covering the whole tail (`compact_log(log)`), and one compaction per 1,000 commits. Timed (best of
5, the variants interleaved, warm cache): tahoe's snapshot + full add list on each copy, and delta-rs (DeltaTable +
get_add_actions) on each copy in the same run; all must list the same files.
Measured 2026-11-27 (`--compaction-only`, 10,000 commits, 9,001 active files, load 1.8-1.9):
  no compaction tahoe 0.204 s / delta-rs 2.182 s; one compaction file 0.089 s (0.43 of the bare
  log); one per 1,000 commits 0.115 s (0.56); delta-rs 0.91-0.92 of its bare time.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
import uuid
from pathlib import Path

import pyarrow.parquet as pq

from tahoe.log import DeltaLog
from tahoe.log.checkpoints import write_checkpoint
from tahoe.log.compaction import compact_log
from tahoe.protocol.actions import AddFile, CommitInfo, Metadata, Protocol, actions_to_json_lines
from tahoe.protocol.filenames import commit_file_name
from tahoe.storage import log_store_for

DATA = Path(__file__).resolve().parent / ".data"
SCHEMA = json.dumps({"type": "struct", "fields": [
    {"name": "id", "type": "long", "nullable": True, "metadata": {}},
    {"name": "value", "type": "string", "nullable": True, "metadata": {}},
    {"name": "part", "type": "integer", "nullable": True, "metadata": {}},
]}, separators=(",", ":"))
TAIL_COMMITS = 1000


def _add_line(i: int) -> str:
    stats = ('{"numRecords":100,"minValues":{"id":%d,"value":"a%d"},"maxValues":{"id":%d,"value":"z%d"},'
             '"nullCount":{"id":0,"value":0}}' % (i * 100, i, i * 100 + 99, i))
    return json.dumps({"add": {
        "path": f"part={i % 100}/part-{i:08d}-{uuid.UUID(int=i)}-c000.snappy.parquet",
        "partitionValues": {"part": str(i % 100)}, "size": 1000 + i % 977,
        "modificationTime": 1700000000000 + i, "dataChange": True, "stats": stats}},
        separators=(",", ":"))


def build(path: Path, n_files: int) -> None:
    marker = path / "_delta_log" / "_bench_complete"
    if marker.exists():
        return
    shutil.rmtree(path, ignore_errors=True)
    store, root = log_store_for(str(path))
    log_dir = store.join(root, "_delta_log")
    head = [
        CommitInfo({"timestamp": 1700000000000, "operation": "WRITE"}),
        Protocol(1, 2),
        Metadata(id=str(uuid.uuid4()), schema_string=SCHEMA, partition_columns=("part",),
                 configuration={}, created_time=1700000000000),
    ]
    body = actions_to_json_lines(head) + ("\n".join(_add_line(i) for i in range(n_files)) + "\n").encode()
    store.write(store.join(log_dir, commit_file_name(0)), body)
    write_checkpoint(DeltaLog.for_table(str(path)), 0)
    for v in range(1, TAIL_COMMITS + 1):
        i = n_files + v
        add = AddFile(path=f"part={i % 100}/part-{i:08d}-{uuid.UUID(int=i)}-c000.snappy.parquet",
                      partition_values={"part": str(i % 100)}, size=1000, modification_time=1700000000000 + i,
                      stats=json.dumps({"numRecords": 100}))
        ci = CommitInfo({"timestamp": 1700000000000 + v, "operation": "WRITE", "readVersion": v - 1,
                         "isBlindAppend": True})
        store.write(store.join(log_dir, commit_file_name(v)), actions_to_json_lines([ci, add]))
    marker.write_text("ok")


def build_tail(path: Path, n_commits: int, compact_every: int | None) -> int:
    """The long-tail table (see the module docstring); `compact_every` None: no compaction files,
    0: one compaction of the whole log, k: one per k commits. Returns the expected file count."""
    expected = n_commits + 1 - n_commits // 10
    marker = path / "_delta_log" / "_bench_complete"
    if marker.exists():
        return int(marker.read_text())
    shutil.rmtree(path, ignore_errors=True)
    if compact_every is not None:   # the same commits as the bare table, plus compaction files
        bare = path.parent / f"tail_{n_commits}_none"
        build_tail(bare, n_commits, None)
        shutil.copytree(bare, path, ignore=shutil.ignore_patterns("_bench_complete"))
    else:
        _write_tail_commits(path, n_commits)
    log = DeltaLog.for_table(str(path))
    if compact_every == 0:
        compact_log(log)
    elif compact_every:
        for start in range(0, n_commits + 1, compact_every):
            end = min(start + compact_every - 1, n_commits)
            if end > start:
                compact_log(log, start, end)
    n = DeltaLog.for_table(str(path)).snapshot().files_table(["path"]).num_rows
    assert n == expected, (n, expected)
    marker.write_text(str(expected))
    return expected


def _write_tail_commits(path: Path, n_commits: int) -> None:
    store, root = log_store_for(str(path))
    log_dir = store.join(root, "_delta_log")
    head = [
        CommitInfo({"timestamp": 1700000000000, "operation": "CREATE TABLE"}),
        Protocol(1, 2),
        Metadata(id=str(uuid.uuid4()), schema_string=SCHEMA, partition_columns=("part",),
                 configuration={}, created_time=1700000000000),
    ]

    def add(i: int) -> AddFile:
        return AddFile(path=f"part={i % 100}/part-{i:08d}-{uuid.UUID(int=i)}-c000.snappy.parquet",
                       partition_values={"part": str(i % 100)}, size=1000 + i % 977,
                       modification_time=1700000000000 + i, stats=json.loads(_add_line(i))["add"]["stats"])

    store.write(store.join(log_dir, commit_file_name(0)), actions_to_json_lines(head + [add(0)]))
    for v in range(1, n_commits + 1):
        ci = CommitInfo({"timestamp": 1700000000000 + v, "operation": "WRITE", "readVersion": v - 1})
        acts = [ci, add(v)]
        if v % 10 == 0:
            acts.append(add(v - 10).remove(1700000000000 + v))
        store.write(store.join(log_dir, commit_file_name(v)), actions_to_json_lines(acts))


def compaction_measure(n_commits: int, repeat: int = 5) -> None:
    variants = [("no compaction", None), ("1 compaction", 0), ("per 1,000", 1000)]
    paths: dict[str, str] = {}
    listed = None
    for label, every in variants:
        path = DATA / f"tail_{n_commits}_{'none' if every is None else every}"
        t0 = time.perf_counter()
        expected = build_tail(path, n_commits, every)
        print(f"tail table ({label}, {n_commits:,} commits) ready ({time.perf_counter() - t0:.1f} s)",
              flush=True)
        p = paths[label] = str(path)
        files = set(DeltaLog.for_table(p).snapshot().files_table(["path"]).column("path").to_pylist())
        if listed is None:
            listed = files
        assert files == listed, f"{label}: a different file list than the bare log's"
    # the variants interleaved, so that a shared machine's load swings hit them alike
    times: dict[tuple[str, str], list[float]] = {}
    for _ in range(repeat):
        for label, _every in variants:
            p = paths[label]
            for who, fn in (("tahoe", tahoe_full), ("delta-rs", deltars_full)):
                t, count = best(lambda: fn(p), 1)
                assert count == expected, (label, who, count, expected)
                times.setdefault((label, who), []).append(t)
    results = [(label, min(times[(label, "tahoe")]), min(times[(label, "delta-rs")])) for label, _ in variants]
    base_t, base_r = results[0][1], results[0][2]
    print(f"\nlong JSON tail: {n_commits:,} commits, no checkpoint ({expected:,} active files)")
    print(f"{'log':>14} | {'tahoe':>8} {'delta-rs':>9} | {'tahoe/rs':>8} | {'tahoe vs bare':>13} {'rs vs bare':>10}")
    for label, tt, tr in results:
        print(f"{label:>14} | {tt:8.3f} {tr:9.3f} | {tt / tr:8.2f} | {tt / base_t:13.2f} {tr / base_r:10.2f}")
    print("(seconds, best of 5; snapshot + full add list; 'vs bare' = time / time on the log without"
          " compaction files)")


def best(fn, repeat: int = 3) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return min(times), out


def tahoe_paths(p: str):
    return DeltaLog.for_table(p).snapshot().files_table(["path"]).num_rows


def tahoe_full(p: str):
    return DeltaLog.for_table(p).snapshot().files_table(
        ["path", "partitionValues", "size", "modificationTime", "stats"]).num_rows


def deltars_paths(p: str):
    import deltalake

    return len(deltalake.DeltaTable(p).file_uris())


def deltars_full(p: str):
    import deltalake

    return deltalake.DeltaTable(p).get_add_actions(flatten=False).num_rows


def limit(p: str):
    log = Path(p) / "_delta_log"
    parts = sorted(log.glob("00000000000000000000.checkpoint*.parquet"))  # single or multi-part
    n = sum(pq.read_table(f, columns=["add.path"]).num_rows for f in parts)
    for v in range(1, TAIL_COMMITS + 1):
        for line in (log / commit_file_name(v)).read_bytes().splitlines():
            json.loads(line)
    return n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="10k and 100k files instead of 100k and 1M")
    ap.add_argument("--compaction-only", action="store_true", help="only the log-compaction measure")
    args = ap.parse_args()
    sizes = [10_000, 100_000] if args.quick else [100_000, 1_000_000]
    if args.compaction_only:
        sizes = []
    DATA.mkdir(parents=True, exist_ok=True)
    rows = []
    for n in sizes:
        path = DATA / f"snapshot_{n}"
        t0 = time.perf_counter()
        build(path, n)
        print(f"table with {n:,} checkpointed files + {TAIL_COMMITS} commits ready "
              f"({time.perf_counter() - t0:.1f} s)", flush=True)
        p = str(path)
        t_tahoe, c1 = best(lambda: tahoe_paths(p))
        t_rs, c2 = best(lambda: deltars_paths(p))
        t_lim, c3 = best(lambda: limit(p))
        t_tahoe_full, c4 = best(lambda: tahoe_full(p))
        t_rs_full, c5 = best(lambda: deltars_full(p))
        expected = n + TAIL_COMMITS
        assert c1 == c2 == c4 == c5 == expected, (c1, c2, c4, c5, expected)
        assert c3 >= n  # the limit counts checkpoint rows (incl. protocol/metaData rows)
        rows.append((n, t_tahoe, t_rs, t_lim, t_tahoe_full, t_rs_full))
    if rows:
        print()
        print(f"{'files':>10} | {'tahoe':>8} {'delta-rs':>9} {'limit':>8} | {'vs rs':>6} {'vs limit':>8} |"
              f" {'tahoe full':>10} {'rs full':>8} {'vs rs':>6}")
    for n, tt, tr, tl, ttf, trf in rows:
        print(f"{n:>10,} | {tt:8.3f} {tr:9.3f} {tl:8.3f} | {tt / tr:6.2f} {tt / tl:8.2f} |"
              f" {ttf:10.3f} {trf:8.3f} {ttf / trf:6.2f}")
    if rows:
        print("\n(seconds, best of 3; 'full' = paths + partitionValues + size + modificationTime + stats;"
              " ratios = tahoe / reference)")
    compaction_measure(2_000 if args.quick else 10_000)
    sys.stdout.flush()
    os._exit(0)  # delta-rs can abort in interpreter teardown


if __name__ == "__main__":
    main()
