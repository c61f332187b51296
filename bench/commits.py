"""Small commits per second and checkpoint write time: tahoe beside delta-rs, in one run.

    python -m bench.commits            # 500 commits x 1 writer, 8 writers x 50 commits; 100k and 1M files
    python -m bench.commits --quick    # 100 commits x 1 writer, 8 writers x 15; 10k and 100k files

Commits (local disk, each table created first, then timed appends; default table properties,
so tahoe checkpoints every 10 commits and delta-rs every 100; every writer process first makes
5 untimed warm-up commits, so the figures are steady-state rates, not interpreter start-up):
  - tahoe write_table:   `tahoe.write_table(path, one_row)` — one tiny parquet file + one commit
  - tahoe log-only:      `Transaction(...).add_files([AddFile]).commit()` — a blind append of an
                         add action (no data file): the cost of the commit protocol alone
  - delta-rs:            `deltalake.write_deltalake(path, one_row, mode="append")` (with
                         max_commit_retries=1000: its default of 15 gives up under 8 writers)
  for 1 writer, and for 8 writer processes appending to the same table concurrently (commits
  per second over the wall time of the whole run; conflicts are retried by each library).

Checkpoints (a table with N active files: checkpoint 0 holds N adds, written straight from Arrow;
commit 1 adds one file):
  - tahoe:    `write_checkpoint(DeltaLog.for_table(p))` of version 1 (loads the snapshot from
              checkpoint 0 + commit 1, writes checkpoint 1, `_last_checkpoint`)
  - delta-rs: `DeltaTable(p).create_checkpoint()` on an identical copy of the log (load + write)
  and, for the table whose commit 0 holds the N adds as JSON (no checkpoint yet), the same pair.
Ratios are tahoe / delta-rs (lower is better for times, higher for commits/s). Each commit rate
comes with the CPU time of a commit (user + sys of the writer process), the figure a busy machine
disturbs least. Target (issue 18): tahoe write_table >= 300 commits/s for one local writer.

Measured 2026-11-27 (2-core machine, load 2-5, deltalake 1.6.6), after the post-commit snapshot
is derived from the read one (no re-listing or replay between a writer's commits):
  --no-checkpoints --dir /tmp/bench-commits (500 commits): tahoe write_table 479.1 commits/s
      (1.76 ms CPU a commit), log-only 583.5 (1.40 ms), delta-rs 50.1 (20.64 ms) — 9.6x delta-rs,
      target >= 300 met; 8 writers 229.1 / 242.7 / 39.9.
  the same in the default bench/.data (under /work, same ext4 device): 184.6-234.7 commits/s at
      3.9-5.1 ms of CPU a commit, of which ~3.4 ms is kernel time creating files there (measured
      in process: user 1.4-1.6 ms, sys 3.4 ms per commit under /work against 0.2-0.4 ms under /tmp)
      — that directory's file creation, not tahoe's work; delta-rs 38.8-40.8 there.
  checkpoint write (load + write): 100k files from checkpoint + 1 commit 0.26 s vs delta-rs 0.29 s
      (0.89), from a JSON commit 0.22 vs 0.39 (0.56); 1M files 3.68 vs 2.71 (1.36) and 2.17 vs
      5.07 (0.43).
Before (2026-11-25, `--quick --no-checkpoints`, load 14.6-16.6): 38.0 commits/s at 4.76 ms CPU;
reloading the snapshot (listing, .crc, replay) was ~25% of a commit's CPU, the checkpoint ~25%.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import shutil
import sys
import time
import uuid
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

DATA = Path(__file__).resolve().parent / ".data" / "commits"


# --- commits -----------------------------------------------------------------------------------

def _row(i: int) -> pa.Table:
    return pa.table({"id": pa.array([i], pa.int64()), "value": pa.array([f"v{i}"])})


def _tahoe_write(path: str, n: int, offset: int) -> None:
    import tahoe

    for i in range(n):
        tahoe.write_table(path, _row(offset + i))


def _tahoe_log_only(path: str, n: int, offset: int) -> None:
    from tahoe.log import DeltaLog
    from tahoe.protocol.actions import AddFile
    from tahoe.txn import Transaction

    log = DeltaLog.for_table(path)
    for i in range(n):
        txn = Transaction(log, "WRITE", {"mode": "Append", "partitionBy": []}, max_retries=1000)
        txn.add_files([AddFile(path=f"fake-{offset + i}-{uuid.uuid4()}.parquet", partition_values={},
                               size=100, modification_time=int(time.time() * 1000),
                               stats='{"numRecords":1}')])
        txn.commit()


def _deltars_write(path: str, n: int, offset: int) -> None:
    from deltalake import CommitProperties, write_deltalake

    props = CommitProperties(max_commit_retries=1000)   # its default (15) gives up under 8 writers
    for i in range(n):
        write_deltalake(path, _row(offset + i), mode="append", commit_properties=props)


WARMUP_COMMITS = 5   # per writer process, for every library alike, before the clock starts

_KINDS = {"tahoe write_table": _tahoe_write, "tahoe log-only": _tahoe_log_only,
          "delta-rs write_deltalake": _deltars_write}


def _create(kind: str, path: str) -> None:
    shutil.rmtree(path, ignore_errors=True)
    if kind.startswith("delta-rs"):
        from deltalake import write_deltalake

        write_deltalake(path, _row(-1), mode="error")
    else:
        import tahoe

        tahoe.write_table(path, _row(-1), mode="error")


def _worker(kind: str, path: str, n: int, offset: int, start_at: float, q) -> None:
    try:
        _KINDS[kind](path, WARMUP_COMMITS, 10_000_000 + offset)  # imports and first-call costs, untimed
        while time.time() < start_at:
            time.sleep(0.001)
        import resource

        r0 = resource.getrusage(resource.RUSAGE_SELF)
        t0 = time.time()
        _KINDS[kind](path, n, offset)
        t1 = time.time()
        r1 = resource.getrusage(resource.RUSAGE_SELF)
        q.put(("ok", t0, t1, r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime))
    except BaseException as e:  # noqa: BLE001
        q.put(("error", f"{type(e).__name__}: {e}", 0.0, 0.0))
    q.close()
    q.join_thread()   # flush the result before the hard exit below
    sys.stdout.flush()
    os._exit(0)   # delta-rs can abort in interpreter teardown


def _run(kind: str, path: str, writers: int, per_writer: int) -> tuple[float, float]:
    """(commits per second, CPU ms per commit) of `writers` processes doing `per_writer` appends
    each."""
    ctx = mp.get_context("spawn")
    setup = ctx.Process(target=_setup_worker, args=(kind, path))
    setup.start()
    setup.join()
    q = ctx.Queue()
    start_at = time.time() + 4.0 + 0.5 * writers   # let the spawned interpreters import and warm up first
    procs = [ctx.Process(target=_worker, args=(kind, path, per_writer, w * per_writer, start_at, q))
             for w in range(writers)]
    for p in procs:
        p.start()
    results = [q.get(timeout=1800) for _ in procs]
    for p in procs:
        p.join()
    errors = [r[1] for r in results if r[0] != "ok"]
    if errors:
        raise RuntimeError(f"{kind}: {errors[0]}")
    begin = min(r[1] for r in results)
    end = max(r[2] for r in results)
    _check_version(kind, path, writers * (per_writer + WARMUP_COMMITS))
    return writers * per_writer / (end - begin), sum(r[3] for r in results) / (writers * per_writer) * 1000


def _setup_worker(kind: str, path: str) -> None:
    _create(kind, path)
    os._exit(0)


def _check_version(kind: str, path: str, commits: int) -> None:
    latest = max(int(f.name[:20]) for f in (Path(path) / "_delta_log").glob("*.json"))
    assert latest == commits, f"{kind}: expected version {commits}, the log ends at {latest}"


# --- checkpoints -------------------------------------------------------------------------------

SCHEMA = json.dumps({"type": "struct", "fields": [
    {"name": "id", "type": "long", "nullable": True, "metadata": {}},
    {"name": "value", "type": "string", "nullable": True, "metadata": {}},
    {"name": "part", "type": "integer", "nullable": True, "metadata": {}},
]}, separators=(",", ":"))


def _adds_arrow(n: int) -> dict[str, pa.Array]:
    """Columns of n add actions (partitioned by `part`, realistic stats), built in Arrow."""
    i = pa.array(np.arange(n, dtype=np.int64))
    part = pc.cast(pc.bit_wise_and(i, 127), pa.string())
    s = pc.cast(i, pa.string())
    path = pc.binary_join_element_wise("part=", part, "/part-", s, "-", pa.scalar(str(uuid.uuid4())),
                                       "-c000.snappy.parquet", "")
    lo = pc.cast(pc.multiply(i, 100), pa.string())
    hi = pc.cast(pc.add(pc.multiply(i, 100), 99), pa.string())
    stats = pc.binary_join_element_wise('{"numRecords":100,"minValues":{"id":', lo, ',"value":"a', s,
                                        '"},"maxValues":{"id":', hi, ',"value":"z', s,
                                        '"},"nullCount":{"id":0,"value":0}}', "")
    size = pc.add(pc.bit_wise_and(i, 1023), 1000)
    return {"path": path, "part": part, "size": size, "stats": stats}


def _head_actions():
    from tahoe.protocol.actions import CommitInfo, Metadata, Protocol

    return [CommitInfo({"timestamp": 1700000000000, "operation": "WRITE"}), Protocol(1, 2),
            Metadata(id="bench", schema_string=SCHEMA, partition_columns=("part",), configuration={},
                     created_time=1700000000000)]


def _json_adds(cols: dict[str, pa.Array]) -> bytes:
    stats_escaped = pc.replace_substring(cols["stats"], '"', '\\"')
    lines = pc.binary_join_element_wise(
        '{"add":{"path":"', cols["path"], '","partitionValues":{"part":"', cols["part"],
        '"},"size":', pc.cast(cols["size"], pa.string()),
        ',"modificationTime":1700000000000,"dataChange":true,"stats":"', stats_escaped, '"}}', "")
    return ("\n".join(lines.to_pylist()) + "\n").encode()


def _build_checkpointed(path: Path, n: int) -> None:
    """Commit 0 (protocol + metaData), checkpoint 0 with n adds written straight from Arrow in the
    checkpoint schema, commit 1 with one more add."""
    from tahoe.log import DeltaLog
    from tahoe.log.checkpoint_schema import checkpoint_schema
    from tahoe.log.last_checkpoint import LastCheckpoint, write_last_checkpoint
    from tahoe.protocol.actions import AddFile, actions_to_json_lines
    from tahoe.protocol.filenames import checkpoint_file_name, commit_file_name
    from tahoe.storage import log_store_for

    shutil.rmtree(path, ignore_errors=True)
    store, root = log_store_for(str(path))
    log_dir = store.join(root, "_delta_log")
    store.write(store.join(log_dir, commit_file_name(0)), actions_to_json_lines(_head_actions()))
    snap = DeltaLog.for_table(str(path)).snapshot()
    schema = checkpoint_schema(snap)
    add_t = schema.field("add").type
    cols = _adds_arrow(n)
    children = []
    for k in range(add_t.num_fields):
        f = add_t.field(k)
        if f.name == "path":
            children.append(cols["path"])
        elif f.name == "partitionValues":
            keys = pa.array(["part"] * n)
            children.append(pa.MapArray.from_arrays(pa.array(np.arange(n + 1, dtype=np.int32)), keys, cols["part"]))
        elif f.name == "size":
            children.append(cols["size"])
        elif f.name == "modificationTime":
            children.append(pa.array(np.full(n, 1700000000000, dtype=np.int64)))
        elif f.name == "dataChange":
            children.append(pa.array(np.zeros(n, dtype=bool)))
        elif f.name == "stats":
            children.append(cols["stats"])
        elif f.name == "partitionValues_parsed":
            children.append(pa.StructArray.from_arrays([pc.cast(cols["part"], pa.int32())], names=["part"]))
        else:
            children.append(pa.nulls(n, f.type))
    add = pa.StructArray.from_arrays(children, fields=list(add_t))
    head = pa.Table.from_pylist([
        {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
        {"metaData": {"id": "bench", "format": {"provider": "parquet", "options": []}, "schemaString": SCHEMA,
                      "partitionColumns": ["part"], "configuration": [], "createdTime": 1700000000000}},
    ], schema=schema)
    body = pa.Table.from_arrays([add if name == "add" else pa.nulls(n, schema.field(name).type)
                                 for name in schema.names], schema=schema)
    table = pa.concat_tables([head, body])
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression="snappy")
    data = sink.getvalue().to_pybytes()
    store.write(store.join(log_dir, checkpoint_file_name(0)), data)
    write_last_checkpoint(store, log_dir, LastCheckpoint(0, table.num_rows, None, len(data), n))
    extra = AddFile(path=f"part=0/extra-{uuid.uuid4()}.parquet", partition_values={"part": "0"}, size=1000,
                    modification_time=1700000000001, stats='{"numRecords":1}')
    store.write(store.join(log_dir, commit_file_name(1)), actions_to_json_lines([extra]))


def _build_json(path: Path, n: int) -> None:
    """Commit 0 holds protocol, metaData and n adds as JSON; no checkpoint."""
    from tahoe.protocol.actions import actions_to_json_lines
    from tahoe.protocol.filenames import commit_file_name
    from tahoe.storage import log_store_for

    shutil.rmtree(path, ignore_errors=True)
    store, root = log_store_for(str(path))
    store.write(store.join(store.join(root, "_delta_log"), commit_file_name(0)),
                actions_to_json_lines(_head_actions()) + _json_adds(_adds_arrow(n)))


def _copy_log(src: Path, dst: Path) -> None:
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst)


def _time_tahoe_checkpoint(path: Path) -> tuple[float, int]:
    from tahoe.log import DeltaLog
    from tahoe.log.checkpoints import write_checkpoint

    t0 = time.perf_counter()
    lc = write_checkpoint(DeltaLog.for_table(str(path)))
    return time.perf_counter() - t0, lc.num_of_add_files or 0


def _time_deltars_checkpoint(path: Path) -> float:
    from deltalake import DeltaTable

    t0 = time.perf_counter()
    DeltaTable(str(path)).create_checkpoint()
    return time.perf_counter() - t0


def _checkpoint_rows(sizes: list[int]) -> list[tuple[str, int, float, float]]:
    rows = []
    for n in sizes:
        for layout, build in (("from checkpoint + 1 commit", _build_checkpointed), ("from a JSON commit", _build_json)):
            base = DATA / f"cp-{n}-{'cp' if build is _build_checkpointed else 'json'}"
            t0 = time.perf_counter()
            build(base, n)
            print(f"  built {n:,}-file table ({layout}) in {time.perf_counter() - t0:.1f} s", flush=True)
            ours, theirs = base.with_name(base.name + "-tahoe"), base.with_name(base.name + "-deltars")
            _copy_log(base, ours)
            _copy_log(base, theirs)
            t_tahoe, n_adds = _time_tahoe_checkpoint(ours)
            expected = n + 1 if build is _build_checkpointed else n
            assert n_adds == expected, (n_adds, expected)
            t_rs = _time_deltars_checkpoint(theirs)
            rows.append((layout, n, t_tahoe, t_rs))
            print(f"  {n:>9,} files, {layout:<27}: tahoe {t_tahoe:7.2f} s   delta-rs {t_rs:7.2f} s", flush=True)
            for p in (base, ours, theirs):
                shutil.rmtree(p, ignore_errors=True)
    return rows


# --- main --------------------------------------------------------------------------------------

def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="a small run")
    ap.add_argument("--dir", help="where to build the tables (default bench/.data/commits; e.g. /dev/shm "
                                  "to take the disk's fsync latency out of the commit figures)")
    ap.add_argument("--no-checkpoints", action="store_true", help="only the commit rates")
    args = ap.parse_args()
    global DATA
    if args.dir:
        DATA = Path(args.dir) / "tahoe-bench-commits"
    single, per_writer, writers = (100, 15, 8) if args.quick else (500, 50, 8)
    sizes = [10_000, 100_000] if args.quick else [100_000, 1_000_000]
    DATA.mkdir(parents=True, exist_ok=True)

    print(f"commits ({os.cpu_count()} CPUs): 1 writer x {single}, {writers} writers x {per_writer}", flush=True)
    commit_rows = []
    for kind in _KINDS:
        one, one_cpu = _run(kind, str(DATA / "t1"), 1, single)
        many, _ = _run(kind, str(DATA / "t8"), writers, per_writer)
        commit_rows.append((kind, one, many))
        target = "   target >= 300 (1 writer)" if kind == "tahoe write_table" else ""
        print(f"  {kind:<26} {one:8.1f} commits/s (1 writer, {one_cpu:.2f} ms CPU a commit)   "
              f"{many:8.1f} commits/s ({writers} writers){target}   load {os.getloadavg()[0]:.1f}", flush=True)
    shutil.rmtree(DATA / "t1", ignore_errors=True)
    shutil.rmtree(DATA / "t8", ignore_errors=True)

    if args.no_checkpoints:
        sys.stdout.flush()
        os._exit(0)
    print("checkpoints:", flush=True)
    cp_rows = _checkpoint_rows(sizes)

    rs = {k: (o, m) for k, o, m in commit_rows}["delta-rs write_deltalake"]
    print()
    print(f"{'commits/s':<28} | {'1 writer':>9} {'vs rs':>6} | {f'{writers} writers':>10} {'vs rs':>6}")
    for kind, one, many in commit_rows:
        print(f"{kind:<28} | {one:9.1f} {one / rs[0]:6.2f} | {many:10.1f} {many / rs[1]:6.2f}")
    print()
    print(f"{'checkpoint write (s)':<44} | {'tahoe':>7} {'delta-rs':>9} {'tahoe/rs':>9}")
    for layout, n, tt, tr in cp_rows:
        print(f"{f'{n:,} files, {layout}':<44} | {tt:7.2f} {tr:9.2f} {tt / tr:9.2f}")
    print("\n(commits/s: higher is better, 'vs rs' = tahoe / delta-rs; checkpoint seconds include loading"
          " the snapshot; lower is better)")
    sys.stdout.flush()
    os._exit(0)   # delta-rs can abort in interpreter teardown


if __name__ == "__main__":
    main()
