"""`LocalLogStore`: the log store for a POSIX (or Windows) file system.

  1. Put-if-absent: a fsync'ed temp file `.<name>.<uuid>.tmp` published by `link` or, where hard links are
     refused, a rename that never replaces; exactly one concurrent writer wins and readers never see a
     partial file. Neither available: UnsupportedStorageError, never a non-atomic write.
  2. Replace (`overwrite=True`): temp file + `os.replace`. `write_optional` publishes without fsyncs.
  3. Durability: data fsync'ed before publishing, the directory after; fsync errors are raised (only EINVAL
     on a directory is accepted).
  4. Listings skip names starting with "."; `file:` URIs are accepted."""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import re
import stat
import sys
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING
from urllib.parse import unquote

from tahoe.errors import UnsupportedStorageError
from tahoe.storage.base import DirStatus, FileStatus, LogStore

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow.fs

__all__ = ["LocalLogStore", "file_uri_to_path"]

# errno values with which link(2) says "this file system does not do hard links".
_LINK_UNSUPPORTED = frozenset(
    e for e in (getattr(errno, n, None) for n in ("EPERM", "EOPNOTSUPP", "ENOTSUP", "ENOSYS", "EXDEV"))
    if e is not None
)

# errno values with which a rename-without-replace says "not here".
_RENAME_UNSUPPORTED = frozenset(
    e for e in (getattr(errno, n, None) for n in ("ENOSYS", "EINVAL", "EOPNOTSUPP", "ENOTSUP"))
    if e is not None
)

_WINDOWS_DRIVE = re.compile(r"^/[A-Za-z]:")


def file_uri_to_path(uri: str) -> str:
    """`file:/x`, `file:///x`, `file://localhost/x` → the OS path `/x`, percent-decoded."""
    if not uri[:5].lower() == "file:":
        raise ValueError(f"not a file URI: {uri!r}")
    rest = uri[5:]
    if rest.startswith("//"):
        host, _, tail = rest[2:].partition("/")
        if host not in ("", "localhost"):
            raise ValueError(f"file URI with a remote host is not supported: {uri!r}")
        rest = "/" + tail
    path = unquote(rest)
    if os.name == "nt" and _WINDOWS_DRIVE.match(path):  # pragma: no cover - Windows only
        path = path[1:]
    return path


def _fsync_dir(dir_path: str) -> None:
    """Persist the directory's entries. Errors are raised, except EINVAL (the file system has no
    directory fsync). Windows cannot open a directory; NTFS journals its metadata itself."""
    if os.name == "nt":  # pragma: no cover - Windows only
        return
    fd = os.open(dir_path or ".", os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    except OSError as e:
        if e.errno != errno.EINVAL:
            e.add_note(f"while syncing directory {dir_path} to disk")
            raise
    finally:
        os.close(fd)


def _makedirs_durable(dir_path: str) -> None:
    """`os.makedirs(dir_path, exist_ok=True)`, then fsync the parent of every directory it
    created, so that a new `_delta_log` (and a new table directory) survive a crash. A file in the
    way is a NotADirectoryError naming that file."""
    missing = []
    d = os.path.abspath(dir_path)
    while not os.path.isdir(d):
        missing.append(d)
        parent = os.path.dirname(d)
        if parent == d:
            break
        d = parent
    for d in reversed(missing):
        try:
            os.mkdir(d)
        except (FileExistsError, NotADirectoryError):
            if not os.path.isdir(d):
                # a file in the way is never a FileExistsError, which callers read as "another
                # writer won": name the file
                blocker = d
                while blocker and not os.path.lexists(blocker):
                    blocker = os.path.dirname(blocker)
                raise NotADirectoryError(errno.ENOTDIR, f"cannot create the directory: {blocker or d} is a "
                                         "file, not a directory", dir_path) from None
        _fsync_dir(os.path.dirname(d))


# --- rename without replacing: the atomic publish where hard links are refused ---------------

_AT_FDCWD = -100
_RENAME_NOREPLACE = 1          # linux/fs.h
_RENAME_EXCL = 0x4             # macOS sys/stdio.h
_SYS_RENAMEAT2 = {"x86_64": 316, "amd64": 316, "aarch64": 276, "arm64": 276}


def _libc_renamer():
    """The C function behind `_rename_noreplace` on this OS, or None."""
    if os.name == "nt":  # pragma: no cover - Windows only
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:  # pragma: no cover
        return None
    if sys.platform == "darwin":  # pragma: no cover - macOS only
        fn = getattr(libc, "renamex_np", None)
        if fn is not None:
            fn.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_uint]
            return lambda src, dst: fn(src, dst, _RENAME_EXCL)
        return None
    fn = getattr(libc, "renameat2", None)
    if fn is not None:
        fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
        return lambda src, dst: fn(_AT_FDCWD, src, _AT_FDCWD, dst, _RENAME_NOREPLACE)
    nr = _SYS_RENAMEAT2.get(platform.machine().lower()) if sys.platform.startswith("linux") else None
    if nr is not None:  # pragma: no cover - glibc older than 2.28
        sc = libc.syscall
        return lambda src, dst: sc(nr, _AT_FDCWD, ctypes.c_char_p(src), _AT_FDCWD, ctypes.c_char_p(dst),
                                   _RENAME_NOREPLACE)
    return None


_renamer = _libc_renamer()


def _rename_noreplace(src: str, dst: str) -> None:
    """Rename `src` to `dst` atomically unless `dst` exists (FileExistsError). OSError with
    ENOSYS/EINVAL/ENOTSUP when the OS or the file system cannot."""
    if os.name == "nt":  # pragma: no cover - Windows: MoveFileEx without REPLACE_EXISTING
        os.rename(src, dst)
        return
    if _renamer is None:
        raise OSError(errno.ENOSYS, "no rename-without-replace on this system", dst)
    if _renamer(os.fsencode(src), os.fsencode(dst)) != 0:
        err = ctypes.get_errno()
        if err == errno.EEXIST:
            raise FileExistsError(errno.EEXIST, "file already exists", dst)
        raise OSError(err, os.strerror(err), dst)


def _filesystem_of(path: str) -> str:
    """`<type> at <mount point>` of the file system holding `path` (Linux: /proc/self/mounts), or
    a description of the path where that is unknown."""
    real = os.path.realpath(path)
    best = None
    try:
        with open("/proc/self/mounts", encoding="utf-8", errors="replace") as f:
            for line in f:
                parts = line.split()
                if len(parts) < 3:
                    continue
                mnt = parts[1].replace("\\040", " ")
                if real == mnt or real.startswith(mnt.rstrip("/") + "/"):
                    if best is None or len(mnt) >= len(best[0]):
                        best = (mnt, parts[2])
    except OSError:
        pass
    if best is None:
        return f"the file system of {path}"
    return f"the {best[1]} file system at {best[0]}"


def _unlink_quiet(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def _write_fd(fd: int, data: bytes, sync: bool = True) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]
    if sync:
        os.fsync(fd)


_O_BINARY = getattr(os, "O_BINARY", 0)


class LocalLogStore(LogStore):
    """Log store on the local file system. Stateless apart from remembering which directories
    refuse hard links (they publish by rename-without-replace); safe to share between threads."""

    puts_may_land_late = False   # a write is settled when the call returns (or raises)
    delete_concurrency = 128     # see LogStore.delete_concurrency

    def __init__(self, options: dict | None = None) -> None:
        self._no_hardlinks: set[str] = set()
        self._fs: pyarrow.fs.FileSystem | None = None
        self.options = dict(options or {})

    def __repr__(self) -> str:
        return "LocalLogStore()"

    def __reduce__(self):
        return (LocalLogStore, (self.options,))

    def describe(self) -> str:
        return "the local file system"

    def owns(self, path: str) -> bool:
        """Plain paths and `file:` URIs (a one-letter "scheme" is a Windows drive)."""
        m = re.match(r"^([A-Za-z][A-Za-z0-9+.\-]*):", path)
        return m is None or len(m.group(1)) == 1 or m.group(1).lower() == "file"

    @staticmethod
    def _p(path: str) -> str:
        if path[:5].lower() == "file:":
            return file_uri_to_path(path)
        return os.fspath(path)

    # --- listing -------------------------------------------------------------------------

    def list_from(self, path: str) -> Iterator[FileStatus]:
        dir_path, start = os.path.split(self._p(path))
        out: list[FileStatus] = []
        with os.scandir(dir_path or ".") as it:
            for entry in it:
                name = entry.name
                if name.startswith(".") or name < start:
                    continue
                try:
                    if not entry.is_file():
                        continue
                    st = entry.stat()
                except FileNotFoundError:  # deleted while we listed
                    continue
                out.append(FileStatus(entry.path if dir_path else name, st.st_size,   # path: scandir's join
                                      st.st_mtime_ns // 1_000_000))
        out.sort(key=lambda f: f.path)
        return iter(out)

    def list_names(self, dir_path: str) -> list[str]:
        return sorted(n for n in os.listdir(self._p(dir_path) or ".") if not n.startswith("."))

    def walk(self, dir_path: str) -> Iterator[FileStatus]:
        root = self._p(dir_path)
        if not os.path.isdir(root):
            raise FileNotFoundError(errno.ENOENT, "no such directory", root)
        return self._walk(root)

    def _walk(self, dir_path: str) -> Iterator[FileStatus]:
        try:
            with os.scandir(dir_path) as it:
                entries = sorted(it, key=lambda e: e.name)
        except FileNotFoundError:  # a subdirectory removed while walking
            return
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    yield from self._walk(entry.path)
                elif entry.is_file():
                    st = entry.stat()
                    yield FileStatus(entry.path, st.st_size, st.st_mtime_ns // 1_000_000)
            except FileNotFoundError:
                continue

    def walk_tree(self, dir_path: str, skip=None) -> Iterator[FileStatus | DirStatus]:
        root = self._p(dir_path)
        if not os.path.isdir(root):
            raise FileNotFoundError(errno.ENOENT, "no such directory", root)
        return self._walk_tree(root, skip)

    def _walk_tree(self, dir_path: str, skip) -> Iterator[FileStatus | DirStatus]:
        stack: list[tuple[str, int | None]] = [(dir_path, None)]
        while stack:
            d, mtime = stack.pop()
            try:
                with os.scandir(d) as it:
                    entries = list(it)
            except (FileNotFoundError, NotADirectoryError):  # removed while walking
                continue
            if mtime is not None:   # not the root itself
                yield DirStatus(d, mtime, not entries)
            for entry in entries:
                if skip is not None and skip(entry.name):
                    continue
                try:
                    if entry.is_dir(follow_symlinks=False):
                        stack.append((entry.path, entry.stat(follow_symlinks=False).st_mtime_ns // 1_000_000))
                    elif entry.is_file(follow_symlinks=False):
                        st = entry.stat(follow_symlinks=False)
                        yield FileStatus(entry.path, st.st_size, st.st_mtime_ns // 1_000_000)
                except FileNotFoundError:
                    continue

    # --- reading -------------------------------------------------------------------------

    def read(self, path: str) -> bytes:
        with open(self._p(path), "rb") as f:
            return f.read()

    def read_range(self, path: str, start: int, length: int) -> bytes:
        if start < 0 or length < 0:
            raise ValueError(f"invalid range start={start} length={length}")
        with open(self._p(path), "rb") as f:
            f.seek(start)
            return f.read(length)

    def exists(self, path: str) -> bool:
        return os.path.exists(self._p(path))

    snapshot_cache_namespace = "local"

    def status(self, path: str) -> FileStatus | None:
        p = self._p(path)
        try:
            st = os.stat(p)
        except (FileNotFoundError, NotADirectoryError):
            return None
        if not stat.S_ISREG(st.st_mode):
            return None
        return FileStatus(p, st.st_size, st.st_mtime_ns // 1_000_000)

    # --- writing -------------------------------------------------------------------------

    def write(self, path: str, data: bytes, overwrite: bool = False) -> None:
        target = self._p(path)
        dir_path, name = os.path.split(target)
        if not name:
            raise ValueError(f"cannot write to a directory path: {path!r}")
        dir_path = dir_path or "."
        if not overwrite and os.path.lexists(target):  # cheap early exit for the loser
            raise FileExistsError(errno.EEXIST, "file already exists", target)
        _makedirs_durable(dir_path)

        if overwrite:
            tmp = self._write_temp(dir_path, name, data)
            try:
                os.replace(tmp, target)
            except BaseException:
                _unlink_quiet(tmp)
                raise
            _fsync_dir(dir_path)
            return

        tmp = self._write_temp(dir_path, name, data)
        try:
            self._publish(tmp, target, dir_path)
        finally:
            _unlink_quiet(tmp)
        _fsync_dir(dir_path)

    def write_optional(self, path: str, data: bytes) -> None:
        """Put-if-absent as `write`, published the same way (complete or absent to readers), with
        neither the file nor its directory fsync'ed: half of a commit's fsyncs are its `.crc`."""
        target = self._p(path)
        dir_path, name = os.path.split(target)
        dir_path = dir_path or "."
        if not name:
            raise ValueError(f"cannot write to a directory path: {path!r}")
        if os.path.lexists(target):
            raise FileExistsError(errno.EEXIST, "file already exists", target)
        _makedirs_durable(dir_path)
        tmp = self._write_temp(dir_path, name, data, sync=False)
        try:
            self._publish(tmp, target, dir_path)
        finally:
            _unlink_quiet(tmp)

    def _publish(self, tmp: str, target: str, dir_path: str) -> None:
        """Give the complete temp file the name `target` atomically, unless it exists."""
        if dir_path not in self._no_hardlinks:
            try:
                os.link(tmp, target)
                return
            except FileExistsError:
                raise FileExistsError(errno.EEXIST, "file already exists", target) from None
            except OSError as e:
                if e.errno not in _LINK_UNSUPPORTED:
                    raise
                self._no_hardlinks.add(dir_path)   # this directory publishes by rename from now on
        try:
            _rename_noreplace(tmp, target)
        except FileExistsError:
            raise FileExistsError(errno.EEXIST, "file already exists", target) from None
        except OSError as e:
            if e.errno not in _RENAME_UNSUPPORTED:
                raise
            raise UnsupportedStorageError(
                f"cannot commit {target} atomically: {_filesystem_of(dir_path)} supports neither "
                f"hard links nor rename without replace ({os.strerror(e.errno)}); a Delta log "
                f"needs an atomic put-if-absent — put the table on another file system") from None

    @staticmethod
    def _write_temp(dir_path: str, name: str, data: bytes, sync: bool = True) -> str:
        tmp = os.path.join(dir_path, f".{name}.{uuid.uuid4().hex}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_BINARY, 0o666)
        try:
            _write_fd(fd, data, sync)
        except BaseException:
            os.close(fd)
            _unlink_quiet(tmp)
            raise
        os.close(fd)
        return tmp

    def delete(self, path: str) -> None:
        """Delete a file; a directory is removed only if empty (OSError otherwise)."""
        p = self._p(path)
        try:
            os.remove(p)
        except FileNotFoundError:
            pass
        except OSError:
            if not os.path.isdir(p):
                raise
            os.rmdir(p)

    def mkdirs(self, dir_path: str) -> None:
        _makedirs_durable(self._p(dir_path))

    # --- data files and paths ------------------------------------------------------------

    def open_input_file(self, path: str, size: int | None = None):
        other = self._foreign(path)
        if other is not None:
            return other.open_input_file(path, size)
        return self.filesystem.open_input_file(self.to_fs_path(path))

    def read_buffer(self, path: str):
        with self.open_input_file(path) as f:
            return f.read_buffer()

    def write_data(self, path: str, data) -> None:
        """Written in place (a data file is referenced only once its commit lands)."""
        with self.filesystem.open_output_stream(self.to_fs_path(path)) as out:
            out.write(data)

    def open_output_stream(self, path: str):
        return self.filesystem.open_output_stream(self.to_fs_path(path))

    def copy(self, src: str, dst: str) -> None:
        if self.owns(src):
            import shutil

            os.makedirs(os.path.dirname(self._p(dst)) or ".", exist_ok=True)
            shutil.copyfile(self._p(src), self._p(dst))
            return
        self.mkdirs(os.path.dirname(self._p(dst)) or ".")
        super().copy(src, dst)

    def rename_data(self, src: str, dst: str) -> None:
        """A rename (the staging directory is under the table root: one file system)."""
        d = self._p(dst)
        os.makedirs(os.path.dirname(d) or ".", exist_ok=True)
        os.replace(self._p(src), d)

    def delete_tree(self, dir_path: str) -> None:
        import shutil

        shutil.rmtree(self._p(dir_path), ignore_errors=True)

    @property
    def filesystem(self) -> pyarrow.fs.FileSystem:
        if self._fs is None:
            import pyarrow.fs

            self._fs = pyarrow.fs.LocalFileSystem()
        return self._fs

    def to_fs_path(self, path: str) -> str:
        return os.path.abspath(self._p(path))

    def join(self, *parts: str) -> str:
        return os.path.join(*parts)
