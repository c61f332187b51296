"""Names of the files in `_delta_log` (spec "Delta Log Entries", "Checkpoints", "Log Compaction
Files", "Version Checksum File"): parsing a listed name into what it is, and formatting names.

  00000000000000000007.json                                   commit 7
  00000000000000000010.checkpoint.parquet                     classic checkpoint
  00000000000000000010.checkpoint.0000000001.0000000003.parquet   multi-part checkpoint, part 1 of 3
  00000000000000000010.checkpoint.<uuid>.json|parquet         v2 (UUID-named) checkpoint
  00000000000000000004.00000000000000000006.compacted.json    log compaction (4..6)
  00000000000000000007.crc                                    version checksum
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum

__all__ = [
    "LogFileKind", "LogFileName", "parse_log_file_name", "commit_file_name",
    "checkpoint_file_name", "multipart_checkpoint_file_names", "v2_checkpoint_file_name",
    "sidecar_file_name", "compaction_file_name", "crc_file_name", "LAST_CHECKPOINT", "LOG_DIR",
    "SIDECAR_DIR",
]

LOG_DIR = "_delta_log"
LAST_CHECKPOINT = "_last_checkpoint"
SIDECAR_DIR = "_sidecars"   # under _delta_log: the sidecar files of v2 checkpoints


class LogFileKind(str, Enum):
    COMMIT = "commit"
    CHECKPOINT = "checkpoint"            # classic single-file
    MULTIPART_CHECKPOINT = "multipart"   # n.checkpoint.o.p.parquet
    V2_CHECKPOINT = "v2"                 # n.checkpoint.<uuid>.(json|parquet)
    COMPACTION = "compaction"
    CRC = "crc"


@dataclass(frozen=True)
class LogFileName:
    name: str
    kind: LogFileKind
    version: int
    part: int | None = None          # multi-part: 1-based part number
    num_parts: int | None = None     # multi-part: number of parts
    end_version: int | None = None   # compaction: last version covered
    uuid: str | None = None          # v2 checkpoint
    ext: str = "json"

    @property
    def is_checkpoint(self) -> bool:
        return self.kind in (LogFileKind.CHECKPOINT, LogFileKind.MULTIPART_CHECKPOINT, LogFileKind.V2_CHECKPOINT)


_COMMIT = re.compile(r"^(\d{20})\.json$")
_CLASSIC = re.compile(r"^(\d{20})\.checkpoint\.parquet$")
_MULTI = re.compile(r"^(\d{20})\.checkpoint\.(\d{10})\.(\d{10})\.parquet$")
_V2 = re.compile(r"^(\d{20})\.checkpoint\.([0-9a-fA-F-]{36})\.(json|parquet)$")
_COMPACTED = re.compile(r"^(\d{20})\.(\d{20})\.compacted\.json$")
_CRC = re.compile(r"^(\d{20})\.crc$")


def parse_log_file_name(name: str) -> LogFileName | None:
    """What a file name in `_delta_log` is, or None for anything else (temp files, `.crc` Hadoop
    checksums, `_last_checkpoint`, unknown names)."""
    if m := _COMMIT.match(name):
        return LogFileName(name, LogFileKind.COMMIT, int(m.group(1)))
    if m := _CLASSIC.match(name):
        return LogFileName(name, LogFileKind.CHECKPOINT, int(m.group(1)), ext="parquet")
    if m := _MULTI.match(name):
        return LogFileName(name, LogFileKind.MULTIPART_CHECKPOINT, int(m.group(1)),
                           part=int(m.group(2)), num_parts=int(m.group(3)), ext="parquet")
    if m := _V2.match(name):
        return LogFileName(name, LogFileKind.V2_CHECKPOINT, int(m.group(1)), uuid=m.group(2), ext=m.group(3))
    if m := _COMPACTED.match(name):
        return LogFileName(name, LogFileKind.COMPACTION, int(m.group(1)), end_version=int(m.group(2)))
    if m := _CRC.match(name):
        return LogFileName(name, LogFileKind.CRC, int(m.group(1)), ext="crc")
    return None


def commit_file_name(version: int) -> str:
    return f"{version:020d}.json"


def checkpoint_file_name(version: int) -> str:
    return f"{version:020d}.checkpoint.parquet"


def multipart_checkpoint_file_names(version: int, num_parts: int) -> list[str]:
    return [f"{version:020d}.checkpoint.{i:010d}.{num_parts:010d}.parquet" for i in range(1, num_parts + 1)]


def v2_checkpoint_file_name(version: int, uuid: str, ext: str = "parquet") -> str:
    return f"{version:020d}.checkpoint.{uuid}.{ext}"


def sidecar_file_name(version: int, part: int, num_parts: int, uuid: str) -> str:
    """A v2 checkpoint's sidecar (in `_delta_log/_sidecars/`), named as delta-spark names them:
    `<version>.checkpoint.<part>.<parts>.<uuid>.parquet` (any unique name is valid)."""
    return f"{version:020d}.checkpoint.{part:010d}.{num_parts:010d}.{uuid}.parquet"


def compaction_file_name(start: int, end: int) -> str:
    return f"{start:020d}.{end:020d}.compacted.json"


def crc_file_name(version: int) -> str:
    return f"{version:020d}.crc"
