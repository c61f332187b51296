"""LocalLogStore: listing, reading, put-if-absent, replace, and a multi-process commit race."""

from __future__ import annotations

import ctypes
import errno
import multiprocessing as mp
import os
import stat
import sys
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tahoe.storage import FileStatus, LocalLogStore
from tests.storage import _workers


def commit(v: int) -> str:
    return f"{v:020d}.json"


@pytest.fixture
def store() -> LocalLogStore:
    return LocalLogStore()


@pytest.fixture
def log_dir(tmp_path) -> str:
    d = tmp_path / "t" / "_delta_log"
    d.mkdir(parents=True)
    return str(d)


def names(statuses) -> list[str]:
    return [os.path.basename(s.path) for s in statuses]


# --- listing -----------------------------------------------------------------------------


def test_list_from_orders_and_starts_at_key(store, log_dir):
    for v in (3, 0, 10, 2, 1):
        store.write(os.path.join(log_dir, commit(v)), b"{}")
    store.write(os.path.join(log_dir, "00000000000000000002.checkpoint.parquet"), b"PAR1")
    store.write(os.path.join(log_dir, "_last_checkpoint"), b"{}", overwrite=True)

    # ".checkpoint" < ".json": listing from commit 2 skips checkpoint 2, listing from the bare
    # version prefix includes it
    got = list(store.list_from(os.path.join(log_dir, commit(2))))
    assert names(got) == [commit(2), commit(3), commit(10), "_last_checkpoint"]
    assert names(store.list_from(os.path.join(log_dir, "00000000000000000002")))[:2] == [
        "00000000000000000002.checkpoint.parquet", commit(2)]
    assert all(isinstance(s, FileStatus) and os.path.isabs(s.path) for s in got)
    assert got[0].size == 2 and abs(got[0].modification_time - time.time() * 1000) < 60_000
    assert got[0].name == commit(2)

    # a start key that is not an existing file: the next names from there
    assert names(store.list_from(os.path.join(log_dir, "00000000000000000004"))) == [
        commit(10), "_last_checkpoint"]
    # a directory path ending in "/" lists everything; so does list_dir
    everything = [commit(0), commit(1), "00000000000000000002.checkpoint.parquet", commit(2),
                  commit(3), commit(10), "_last_checkpoint"]
    assert names(store.list_from(log_dir + "/")) == everything
    assert names(store.list_dir(log_dir)) == everything
    assert names(store.list_from(os.path.join(log_dir, "zzz"))) == []


def test_list_skips_crc_temp_files_and_subdirectories(store, log_dir):
    store.write(os.path.join(log_dir, commit(0)), b"{}")
    for hidden in (".00000000000000000000.json.crc", ".00000000000000000001.json.abc.tmp",
                   "._last_checkpoint.crc"):
        with open(os.path.join(log_dir, hidden), "wb") as f:
            f.write(b"x")
    os.mkdir(os.path.join(log_dir, "_sidecars"))
    os.mkdir(os.path.join(log_dir, "00000000000000000001.json.d"))
    assert names(store.list_from(os.path.join(log_dir, commit(0)))) == [commit(0)]
    assert names(store.list_dir(log_dir)) == [commit(0)]


def test_list_missing_directory_raises(store, tmp_path):
    with pytest.raises(FileNotFoundError):
        store.list_from(str(tmp_path / "nope" / "_delta_log" / commit(0)))  # eager, no next()
    with pytest.raises(FileNotFoundError):
        store.list_dir(str(tmp_path / "nope"))
    with pytest.raises(FileNotFoundError):
        store.walk(str(tmp_path / "nope"))


def test_file_uris_are_accepted(store, log_dir):
    store.write("file://" + os.path.join(log_dir, commit(0)), b"a")
    assert store.read("file:" + os.path.join(log_dir, commit(0))) == b"a"
    assert names(store.list_from("file://" + log_dir + "/")) == [commit(0)]


# --- reading -----------------------------------------------------------------------------


def test_read_and_read_range(store, log_dir):
    p = os.path.join(log_dir, commit(0))
    store.write(p, b"0123456789")
    assert store.read(p) == b"0123456789"
    assert store.read_range(p, 0, 4) == b"0123"
    assert store.read_range(p, 6, 100) == b"6789"
    assert store.read_range(p, 10, 5) == b""
    assert store.read_range(p, 3, 0) == b""
    with pytest.raises(ValueError):
        store.read_range(p, -1, 2)
    with pytest.raises(FileNotFoundError):
        store.read(os.path.join(log_dir, commit(1)))
    with pytest.raises(FileNotFoundError):
        store.read_range(os.path.join(log_dir, commit(1)), 0, 1)


# --- writing -----------------------------------------------------------------------------


def test_put_if_absent_keeps_first_content(store, log_dir):
    p = os.path.join(log_dir, commit(0))
    store.write(p, b"first")
    with pytest.raises(FileExistsError) as ei:
        store.write(p, b"second")
    assert ei.value.errno == errno.EEXIST and ei.value.filename == p
    assert store.read(p) == b"first"
    assert sorted(os.listdir(log_dir)) == [commit(0)]  # no temp file left behind


def test_put_if_absent_loses_race_after_early_check(store, log_dir, monkeypatch):
    """The target appears between the early exists-check and the link: still FileExistsError,
    and the temp file is cleaned up."""
    p = os.path.join(log_dir, commit(0))
    real_link = os.link

    def link_after_someone_else(src, dst):
        with open(dst, "wb") as f:
            f.write(b"other")
        return real_link(src, dst)

    monkeypatch.setattr(os, "link", link_after_someone_else)
    with pytest.raises(FileExistsError):
        store.write(p, b"mine")
    assert store.read(p) == b"other"
    assert os.listdir(log_dir) == [commit(0)]


def _refuse_links(monkeypatch):
    def no_links(src, dst, *a, **kw):
        raise OSError(errno.EPERM, "Operation not permitted", src)

    monkeypatch.setattr(os, "link", no_links)


def test_without_hard_links_publishes_by_rename_noreplace(store, log_dir, monkeypatch):
    """link(2) refused (EPERM): the temp file is renamed onto the target without replacing —
    still put-if-absent, for every later write too, and no temp file is left behind."""
    _refuse_links(monkeypatch)
    p = os.path.join(log_dir, commit(0))
    store.write(p, b"first")
    with pytest.raises(FileExistsError):
        store.write(p, b"second")
    store.write(os.path.join(log_dir, commit(1)), b"next")
    with pytest.raises(FileExistsError):
        store.write(os.path.join(log_dir, commit(1)), b"again")
    assert store.read(p) == b"first"
    assert store.read(os.path.join(log_dir, commit(1))) == b"next"
    assert sorted(os.listdir(log_dir)) == [commit(0), commit(1)]


def test_race_lost_between_check_and_rename(store, log_dir, monkeypatch):
    """Without hard links, the target appearing between the early check and the rename is still
    FileExistsError, with the other writer's content kept."""
    _refuse_links(monkeypatch)
    from tahoe.storage import local

    real = local._rename_noreplace
    p = os.path.join(log_dir, commit(0))

    def other_writer_first(src, dst):
        with open(dst, "wb") as f:
            f.write(b"other")
        return real(src, dst)

    monkeypatch.setattr(local, "_rename_noreplace", other_writer_first)
    with pytest.raises(FileExistsError):
        store.write(p, b"mine")
    assert store.read(p) == b"other"
    assert os.listdir(log_dir) == [commit(0)]


def _findmnt_fstype(path: str) -> str:
    import subprocess

    return subprocess.run(["findmnt", "-n", "-o", "FSTYPE", "--target", path], check=True,
                          capture_output=True, text=True).stdout.strip()


def test_refused_when_neither_link_nor_rename_noreplace(store, log_dir, monkeypatch):
    """A file system that refuses hard links and RENAME_NOREPLACE (EINVAL from renameat2 /
    renamex_np): the write is refused — no file appears, nothing is half-written — naming the
    file system where the OS tells it (Linux: findmnt is the oracle)."""
    _refuse_links(monkeypatch)
    from tahoe.errors import UnsupportedStorageError
    from tahoe.storage import local

    def renameat2_einval(src, dst):   # the libc call, as such a file system answers it
        ctypes.set_errno(errno.EINVAL)
        return -1

    monkeypatch.setattr(local, "_renamer", renameat2_einval)
    p = os.path.join(log_dir, commit(0))
    with pytest.raises(UnsupportedStorageError) as ei:
        store.write(p, b"data")
    msg = str(ei.value)
    assert "hard links" in msg and commit(0) in msg
    if sys.platform.startswith("linux"):
        assert _findmnt_fstype(log_dir) in msg
    assert os.listdir(log_dir) == []


def _fsync_recorder(monkeypatch) -> list[tuple[int, int]]:
    """(device, inode) of every file or directory fsync'ed from now on."""
    synced: list[tuple[int, int]] = []
    real = os.fsync

    def fsync(fd):
        st = os.fstat(fd)
        synced.append((st.st_dev, st.st_ino))
        return real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    return synced


def test_new_delta_log_is_synced_in_its_parent(store, tmp_path, monkeypatch):
    """The first commit of a new table creates `<root>/_delta_log`: the new directories' parents
    are fsync'ed (the table root and the directory holding it), then the log directory."""
    synced = _fsync_recorder(monkeypatch)
    root = tmp_path / "new" / "table"
    store.write(str(root / "_delta_log" / commit(0)), b"{}\n")
    for d in (tmp_path, tmp_path / "new", root, root / "_delta_log"):
        st = os.stat(d)
        assert (st.st_dev, st.st_ino) in synced, d


@pytest.mark.parametrize("overwrite", [False, True])
def test_fsync_errors_are_raised(store, log_dir, monkeypatch, overwrite):
    """An I/O error syncing the directory is not swallowed (the write may not be durable)."""
    real = os.fsync

    def fsync(fd):
        if stat.S_ISDIR(os.fstat(fd).st_mode):
            raise OSError(errno.EIO, "Input/output error")
        return real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    with pytest.raises(OSError) as ei:
        store.write(os.path.join(log_dir, commit(0)), b"{}\n", overwrite=overwrite)
    assert ei.value.errno == errno.EIO


def test_directory_fsync_einval_means_not_supported(store, log_dir, monkeypatch):
    """EINVAL from fsync on a directory is how a file system says it cannot: accepted."""
    real = os.fsync

    def fsync(fd):
        if stat.S_ISDIR(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "Invalid argument")
        return real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    store.write(os.path.join(log_dir, commit(0)), b"ok")
    assert store.read(os.path.join(log_dir, commit(0))) == b"ok"


def test_overwrite_replaces(store, log_dir):
    p = os.path.join(log_dir, "_last_checkpoint")
    store.write(p, b'{"version":1}', overwrite=True)
    store.write(p, b'{"version":22}', overwrite=True)
    assert store.read(p) == b'{"version":22}'
    assert os.listdir(log_dir) == ["_last_checkpoint"]


def test_write_creates_parent_directories(store, tmp_path):
    p = str(tmp_path / "new" / "_delta_log" / commit(0))
    store.write(p, b"{}")
    assert store.read(p) == b"{}"


def test_exists_delete_mkdirs_walk(store, tmp_path):
    root = str(tmp_path / "t")
    store.mkdirs(store.join(root, "p=1"))
    store.mkdirs(store.join(root, "p=1"))  # idempotent
    store.write(store.join(root, "p=1", "a.parquet"), b"a")
    store.write(store.join(root, "b.parquet"), b"bb")
    store.write(store.join(root, "_delta_log", commit(0)), b"{}")
    assert store.exists(store.join(root, "b.parquet"))
    assert store.exists(store.join(root, "p=1"))
    assert not store.exists(store.join(root, "c.parquet"))
    walked = [os.path.relpath(s.path, root) for s in store.walk(root)]
    assert walked == [os.path.join("_delta_log", commit(0)), "b.parquet",
                      os.path.join("p=1", "a.parquet")]
    store.delete(store.join(root, "b.parquet"))
    store.delete(store.join(root, "b.parquet"))  # missing is fine
    assert not store.exists(store.join(root, "b.parquet"))


def test_filesystem_reads_and_writes_parquet(store, tmp_path):
    path = store.join(str(tmp_path), "t", "part-0.parquet")
    store.mkdirs(os.path.dirname(path))
    table = pa.table({"x": [1, 2, 3]})
    pq.write_table(table, store.to_fs_path(path), filesystem=store.filesystem)
    assert pq.read_table(store.to_fs_path(path), filesystem=store.filesystem).equals(table)


# --- the race ----------------------------------------------------------------------------


@pytest.mark.slow
def test_concurrent_put_if_absent_processes(log_dir):
    """8 processes each try to create versions 0..49 in order; every version must be won by
    exactly one of them, its content must be the winner's, and no loser may read a torn file."""
    writers, versions = 8, 50
    ctx = mp.get_context("spawn")
    barrier, queue = ctx.Barrier(writers), ctx.Queue()
    procs = [ctx.Process(target=_workers.local_writer,
                         args=(log_dir, w, versions, 16 * 1024, barrier, queue))
             for w in range(writers)]
    for p in procs:
        p.start()
    results = [queue.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(timeout=30)
        assert p.exitcode == 0

    winner_of: dict[int, int] = {}
    for writer, wins, torn in results:
        assert torn == [], f"writer {writer} read partial files for versions {torn}"
        for v in wins:
            assert v not in winner_of, f"version {v} won by {winner_of[v]} and {writer}"
            winner_of[v] = writer
    assert sorted(winner_of) == list(range(versions))

    assert sorted(os.listdir(log_dir)) == [commit(v) for v in range(versions)]  # no temp files
    store = LocalLogStore()
    listed = list(store.list_dir(log_dir))
    assert names(listed) == [commit(v) for v in range(versions)]
    for v in range(versions):
        meta = _workers.parse_payload(store.read(listed[v].path))
        assert meta is not None and meta["version"] == v and meta["writer"] == winner_of[v]


def test_concurrent_put_if_absent_without_hard_links(log_dir):
    """The same race on a file system that refuses link(2) and writes slowly (each process
    patches its own os.link/os.write): still exactly one winner per version and no loser ever
    reads a partial file, however long the winner takes to write it."""
    writers, versions = 4, 12
    ctx = mp.get_context("spawn")
    barrier, queue = ctx.Barrier(writers), ctx.Queue()
    procs = [ctx.Process(target=_workers.local_writer,
                         args=(log_dir, w, versions, 256 * 1024, barrier, queue, True))
             for w in range(writers)]
    for p in procs:
        p.start()
    results = [queue.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=30)
        assert p.exitcode == 0
    winner_of: dict[int, int] = {}
    for writer, wins, torn in results:
        assert torn == [], f"writer {writer} read partial files for versions {torn}"
        for v in wins:
            assert v not in winner_of, f"version {v} won by {winner_of[v]} and {writer}"
            winner_of[v] = writer
    assert sorted(winner_of) == list(range(versions))
    assert sorted(os.listdir(log_dir)) == [commit(v) for v in range(versions)]
    store = LocalLogStore()
    for v in range(versions):
        meta = _workers.parse_payload(store.read(os.path.join(log_dir, commit(v))))
        assert meta is not None and meta["writer"] == winner_of[v]
