"""`LocalLogStore`: the log store for a POSIX (or Windows) file system.

Put-if-absent (`write(path, data)`): the data goes to a unique temp file `.<name>.<uuid>.tmp`
in the target's directory and is fsync'ed; then `os.link(tmp, target)` publishes it. A hard link
is created atomically and fails with EEXIST if the target exists, so of several concurrent
writers exactly one wins, and the target is complete the moment it appears. The temp file is
then unlinked and the directory fsync'ed.

Fallback, only where the file system cannot make hard links (FAT, some FUSE/SMB mounts):
`os.open(target, O_CREAT | O_EXCL)` then write + fsync. Mutual exclusion still holds, but
atomic creation does not: a reader can see the file empty or partially written while it is being
written, and a crash mid-write leaves a truncated file that occupies the version for good.

Replace (`write(path, data, overwrite=True)`): temp file + `os.replace`, atomic on POSIX.

Listings skip names starting with "." — our temp files and Hadoop's `.<name>.crc` side files.
Paths are OS paths; `file:` URIs are accepted too and converted.
"""

from __future__ import annotations

import errno
import os
import re
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING
from urllib.parse import unquote

from tahoe.storage.base import FileStatus, LogStore

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow.fs

__all__ = ["LocalLogStore", "file_uri_to_path"]

# errno values with which link(2) says "this file system does not do hard links".
_LINK_UNSUPPORTED = frozenset(
    e for e in (getattr(errno, n, None) for n in ("EPERM", "EOPNOTSUPP", "ENOTSUP", "ENOSYS", "EXDEV"))
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
    """Persist a directory entry change (best effort: not possible on Windows)."""
    try:
        fd = os.open(dir_path, os.O_RDONLY)
    except OSError:  # pragma: no cover - e.g. Windows
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover - some file systems refuse fsync on directories
        pass
    finally:
        os.close(fd)


def _makedirs(dir_path: str) -> None:
    """os.makedirs, except that a file in the way is a NotADirectoryError naming that file (never
    a FileExistsError, which callers read as "another writer won")."""
    try:
        os.makedirs(dir_path, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        blocker = dir_path
        while blocker and not os.path.lexists(blocker):
            blocker = os.path.dirname(blocker)
        raise NotADirectoryError(errno.ENOTDIR, f"cannot create the directory: {blocker or dir_path} is a file, "
                                 "not a directory", dir_path) from None


def _unlink_quiet(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def _write_fd(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]
    os.fsync(fd)


_O_BINARY = getattr(os, "O_BINARY", 0)


class LocalLogStore(LogStore):
    """Log store on the local file system. Stateless apart from remembering which directories
    turned out not to support hard links; safe to share between threads."""

    def __init__(self) -> None:
        self._no_hardlinks: set[str] = set()
        self._fs: pyarrow.fs.FileSystem | None = None

    def __repr__(self) -> str:
        return "LocalLogStore()"

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
                out.append(FileStatus(os.path.join(dir_path, name), st.st_size,
                                      st.st_mtime_ns // 1_000_000))
        out.sort(key=lambda f: f.path)
        return iter(out)

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

    # --- writing -------------------------------------------------------------------------

    def write(self, path: str, data: bytes, overwrite: bool = False) -> None:
        target = self._p(path)
        dir_path, name = os.path.split(target)
        if not name:
            raise ValueError(f"cannot write to a directory path: {path!r}")
        dir_path = dir_path or "."
        if not overwrite and os.path.lexists(target):  # cheap early exit for the loser
            raise FileExistsError(errno.EEXIST, "file already exists", target)
        _makedirs(dir_path)

        if overwrite:
            tmp = self._write_temp(dir_path, name, data)
            try:
                os.replace(tmp, target)
            except BaseException:
                _unlink_quiet(tmp)
                raise
            _fsync_dir(dir_path)
            return

        if dir_path not in self._no_hardlinks:
            tmp = self._write_temp(dir_path, name, data)
            try:
                os.link(tmp, target)
            except FileExistsError:
                raise FileExistsError(errno.EEXIST, "file already exists", target) from None
            except OSError as e:
                if e.errno not in _LINK_UNSUPPORTED:
                    raise
                self._no_hardlinks.add(dir_path)  # fall through to the O_EXCL path
            else:
                _fsync_dir(dir_path)
                return
            finally:
                _unlink_quiet(tmp)

        self._write_exclusive(target, data)
        _fsync_dir(dir_path)

    @staticmethod
    def _write_temp(dir_path: str, name: str, data: bytes) -> str:
        tmp = os.path.join(dir_path, f".{name}.{uuid.uuid4().hex}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_BINARY, 0o666)
        try:
            _write_fd(fd, data)
        except BaseException:
            os.close(fd)
            _unlink_quiet(tmp)
            raise
        os.close(fd)
        return tmp

    @staticmethod
    def _write_exclusive(target: str, data: bytes) -> None:
        """Weaker fallback: exclusive create, then write in place (see module docstring)."""
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_BINARY, 0o666)
        try:
            _write_fd(fd, data)
        except BaseException:
            os.close(fd)
            _unlink_quiet(target)
            raise
        os.close(fd)

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
        _makedirs(self._p(dir_path))

    # --- data files and paths ------------------------------------------------------------

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
