"""The log store contract: every byte of a Delta log is read, listed and written through a `LogStore`
(made in one place, `tahoe.storage.store_for`). What the protocol needs (spec "Blob Store Requirements"):

  1. atomic creation: a file appears whole or not at all (`write`);
  2. mutual exclusion: of two writers creating one file exactly one succeeds, the other gets
     FileExistsError (`write(..., overwrite=False)`);
  3. partial listing: a directory's files in lexicographic order from a given name (`list_from`).
Paths are in the store's own spelling; `FileStatus.path` is accepted back. Data files use `open_input_file`,
`read_buffer`, `write_data`; `sign` makes URLs."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import UnsupportedStorageError
from .options import parse_location

if TYPE_CHECKING:  # pragma: no cover - typing only; keeps `import tahoe.storage` light
    import pyarrow.fs

__all__ = ["FileStatus", "DirStatus", "LogStore"]


@dataclass(frozen=True)
class FileStatus:
    """One listed file."""

    path: str               # full path/URI, as accepted by the store's methods
    size: int               # bytes
    modification_time: int  # milliseconds since the epoch

    @property
    def name(self) -> str:
        """The file name (last path component)."""
        return self.path.rstrip("/").rsplit("/", 1)[-1]


@dataclass(frozen=True)
class DirStatus:
    """One listed directory (stores with real directories only; see `LogStore.walk_tree`)."""

    path: str               # full path, as accepted by the store's methods
    modification_time: int  # milliseconds since the epoch
    empty: bool             # it held no entry at all (hidden ones included) when listed

    @property
    def name(self) -> str:
        return self.path.rstrip("/").rsplit("/", 1)[-1]


class LogStore(ABC):
    """Abstract store; see the module docstring for the guarantees each method must give."""

    # Whether a `write` that raised may still take effect later (a request in flight to a remote
    # store). False only for stores whose writes are settled when the call returns, either way:
    # then a file absent after a failed write is surely not written.
    puts_may_land_late: bool = True

    # How many deletes `delete_many` keeps in flight when the caller does not say: requests of
    # up to 1000 keys on object stores; single unlinks on a local file system, where each waits on
    # the file system's journal (measured on an ext4 mounted with `discard`, 20k-50k files: one at
    # a time ~1.4 ms an unlink, 64 at a time ~0.06 ms, 128 ~0.04 ms, 256 ~0.035 ms).
    delete_concurrency: int = 8

    # --- listing -------------------------------------------------------------------------

    @abstractmethod
    def list_from(self, path: str) -> Iterator[FileStatus]:
        """Files in the directory of `path` whose name is >= basename(path), sorted by name.

        Only direct children that are files; names starting with "." (temp files, Hadoop
        `.crc` side files) are never returned. A `path` ending in "/" lists the whole directory.
        Raises FileNotFoundError (eagerly, on the call) if the directory does not exist.
        """

    def list_dir(self, dir_path: str) -> Iterator[FileStatus]:
        """All files directly in `dir_path`, sorted by name (same filtering as `list_from`)."""
        return self.list_from(self.join(dir_path, ""))

    def list_names(self, dir_path: str) -> list[str]:
        """The names in `dir_path`, sorted, without their status (cheaper than `list_dir` where a
        status costs a call of its own); names starting with "." are left out, and a store with
        real directories may return the names of subdirectories too. FileNotFoundError if the
        directory does not exist."""
        return [st.name for st in self.list_dir(dir_path)]

    @abstractmethod
    def walk(self, dir_path: str) -> Iterator[FileStatus]:
        """Every file under `dir_path`, recursively, sorted by path. Unlike the listings above
        this returns hidden files too (VACUUM decides what to skip).
        FileNotFoundError if the directory does not exist."""

    def walk_tree(self, dir_path: str, skip: Callable[[str], bool] | None = None) -> Iterator[FileStatus | DirStatus]:
        """Every file under `dir_path` (and, on stores with real directories, every
        subdirectory as a `DirStatus`), recursively; a file or directory whose NAME `skip(name)`
        accepts is left out, and a skipped directory is not descended into. Order unspecified.
        FileNotFoundError if the directory does not exist. (Object stores: files only; `skip` is
        applied to every component of a key below `dir_path`.)"""
        root = dir_path.rstrip("/")
        for st in self.walk(dir_path):
            if skip is not None:
                rel = st.path[len(root) + 1:] if st.path.startswith(root) else st.name
                if any(skip(part) for part in rel.split("/")):
                    continue
            yield st

    def delete_many(self, paths: Sequence[str], max_workers: int | None = None,
                    progress: Callable[[int], None] | None = None) -> int:
        """Delete files (missing ones are fine), `max_workers` (default `delete_concurrency`) at
        a time; returns how many
        deletes were sent without error. The first error is raised after the others ran.
        `progress(n)` is called (on the calling thread) with the number done so far."""
        if not paths:
            return 0
        from concurrent.futures import ThreadPoolExecutor

        errors: list[BaseException] = []
        max_workers = max_workers or self.delete_concurrency

        def some(chunk: Sequence[str]) -> int:
            n = 0
            for p in chunk:
                try:
                    self.delete(p)
                    n += 1
                except Exception as e:  # noqa: BLE001 - collected, the first one is raised below
                    errors.append(e)
            return n

        # one task per chunk (a thread pool ignores map's chunksize: a future per path costs more
        # than a local delete)
        size = max(1, min(256, -(-len(paths) // max(1, max_workers))))
        chunks = [paths[i:i + size] for i in range(0, len(paths), size)]
        done = 0
        if max_workers <= 1 or len(chunks) == 1:
            for chunk in chunks:
                done += some(chunk)
                if progress is not None:
                    progress(done)
        else:
            with ThreadPoolExecutor(max_workers=max_workers) as ex:
                for n in ex.map(some, chunks):
                    done += n
                    if progress is not None:
                        progress(done)
        if errors:
            raise errors[0]
        return done

    # --- reading -------------------------------------------------------------------------

    @abstractmethod
    def read(self, path: str) -> bytes:
        """The whole file. FileNotFoundError if absent."""

    @abstractmethod
    def read_range(self, path: str, start: int, length: int) -> bytes:
        """`length` bytes from offset `start` (fewer if the file ends first; b"" past the end).
        FileNotFoundError if absent."""

    @abstractmethod
    def exists(self, path: str) -> bool:
        """Whether a file (or, for the local store, a directory) exists at `path`."""

    def status(self, path: str) -> FileStatus | None:
        """The status of the file at `path` (as `list_from` would list it), or None when there is
        no such file. By default one listing from the name."""
        name = path.rstrip("/").rsplit("/", 1)[-1]
        try:
            for st in self.list_from(path):
                return st if st.name == name else None
        except (FileNotFoundError, NotADirectoryError):
            pass
        return None

    # Stores whose `status` is cheap (a local stat, not a request) name a namespace here: the
    # snapshots committed through them may be kept in memory and recognised again by their
    # files' status (`tahoe.log.snapshot_cache`). None: no snapshot is kept.
    snapshot_cache_namespace: str | None = None

    # --- writing -------------------------------------------------------------------------

    @abstractmethod
    def write(self, path: str, data: bytes, overwrite: bool = False) -> None:
        """Write a whole file atomically; readers never observe a partial file.

        overwrite=False: put-if-absent. Exactly one of several concurrent writers of the same
        path succeeds; the others (and any writer of an existing path) get FileExistsError and
        the existing content is untouched.
        overwrite=True: atomic replace (used for `_last_checkpoint`).
        Missing parent directories are created.
        """

    def write_optional(self, path: str, data: bytes) -> None:
        """Put-if-absent of a file readers can do without (a version checksum `<v>.crc`: a
        reader that cannot read one replays the log instead): atomic and exclusive like
        `write(path, data)`, but a store may skip making it durable (no fsync), since losing it
        in a crash loses nothing. By default the same as `write`."""
        self.write(path, data, overwrite=False)

    @abstractmethod
    def delete(self, path: str) -> None:
        """Delete a file; a missing file is not an error."""

    @abstractmethod
    def mkdirs(self, dir_path: str) -> None:
        """Create a directory and its parents (no-op where directories are implicit)."""

    # --- data files ------------------------------------------------------------------------

    # The storage options the store was made with: a path of another store (a shallow clone's
    # files in another bucket or cloud) is reached through a store made from the same options.
    options: dict = {}

    def owns(self, path: str) -> bool:
        """Whether `path` is in this store's spelling (its scheme); other paths are read through
        a store of their own (`_foreign`)."""
        return True

    def _foreign(self, path: str) -> "LogStore | None":
        """The store for `path` when it is not this store's (None when it is)."""
        if self.owns(path):
            return None

        kind = parse_location(path).kind
        cache = self.__dict__.setdefault("_foreign_stores", {})
        st = cache.get(kind)
        if st is None:
            st = cache[kind] = LogStore.make_store(path, self.options)
        return st

    # The store factory (`tahoe.storage.store_for_path`), installed by the package: a store of
    # another kind is made the one way every store is made.
    make_store: Callable[[str, dict | None], "LogStore"] = staticmethod(
        lambda path, options: (_ for _ in ()).throw(RuntimeError("tahoe.storage is not initialised")))

    def open_input_file(self, path: str, size: int | None = None) -> "pyarrow.NativeFile":
        """A random-access pyarrow file over the file at `path` (parquet reads); `size`, when the
        caller knows it (the log does), saves asking the store. FileNotFoundError if absent."""
        import pyarrow as pa

        other = self._foreign(path)
        if other is not None:
            return other.open_input_file(path, size)
        return pa.BufferReader(self.read(path))

    def read_buffer(self, path: str) -> "pyarrow.Buffer":
        """The whole file as a pyarrow Buffer."""
        import pyarrow as pa

        return pa.py_buffer(self.read(path))

    def write_data(self, path: str, data) -> None:
        """Write a data file (parquet, deletion vectors; bytes or a pyarrow Buffer): it appears
        whole or not at all; an existing file is replaced (data file names are unique)."""
        self.write(path, bytes(data), overwrite=True)

    def open_output_stream(self, path: str):
        """A writable stream whose bytes become the file at `path` (for writers that stream)."""
        raise NotImplementedError

    def copy(self, src: str, dst: str) -> None:
        """Copy the file at `src` (this store's, or another's) to `dst` (this store's)."""
        other = self._foreign(src)
        self.write_data(dst, (other or self).read_buffer(src))

    def rename_data(self, src: str, dst: str) -> None:
        """Move a data file within this store (a staged file into its table): by default a copy,
        then a delete of `src`; a local file system renames. `dst` is replaced if it exists."""
        self.copy(src, dst)
        self.delete(src)

    def delete_tree(self, dir_path: str) -> None:
        """Delete every file under `dir_path` (a staging directory); a missing one is fine."""
        try:
            paths = [st.path for st in self.walk(dir_path)]
        except FileNotFoundError:
            return
        self.delete_many(paths)

    def sign(self, path: str, method: str = "GET", expires: float = 3600) -> str:
        """A URL that lets its holder `method` the file until `expires` (seconds, or a
        timedelta) pass, without credentials (S3 pre-signed, Azure SAS, GCS V4 signed).
        UnsupportedStorageError where the store has no such URLs (a local file system)."""
        raise UnsupportedStorageError(f"{self.describe()} cannot sign URLs", store=self.describe(), path=path)

    def presign(self, path: str, expires_seconds: float = 3600, method: str = "GET") -> str:
        """`sign` with the argument order the S3 store always had."""
        return self.sign(path, method, expires_seconds)

    def describe(self) -> str:
        """The store, for messages."""
        return type(self).__name__

    # --- paths ---------------------------------------------------------------------------

    @abstractmethod
    def join(self, *parts: str) -> str:
        """Join path components in the store's spelling."""
