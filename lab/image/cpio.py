"""A small writer for the cpio 'newc' format the kernel unpacks as an initramfs.

Written here rather than shelling out to cpio so layers are byte-for-byte
reproducible (fixed uid, gid and mtime) and can be built from memory.
Concatenated newc archives are unpacked in order by the kernel, which is how lab
stacks a cached base image with a per-run job layer.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from ..atomic import atomic_file


@dataclass(frozen=True)
class Entry:
    path: str  # inside the archive, no leading '/'
    mode: int  # full st_mode (type bits included)
    data: bytes = b""  # file contents, or the target of a symlink
    source: Path | None = None  # read the contents from here instead of data


def _pad(n: int) -> bytes:
    return b"\0" * ((4 - n % 4) % 4)


class Writer:
    def __init__(self, fh: BinaryIO):
        self.fh = fh
        self.ino = 1
        self.dirs: set[str] = set()

    def _header(self, name: str, mode: int, size: int, nlink: int = 1) -> None:
        nb = name.encode() + b"\0"
        fields = [self.ino, mode, 0, 0, nlink, 0, size, 0, 0, 0, 0, len(nb), 0]
        self.ino += 1
        hdr = b"070701" + b"".join(f"{f:08x}".encode() for f in fields)
        self.fh.write(hdr + nb + _pad(len(hdr) + len(nb)))

    def mkdirs(self, path: str) -> None:
        parts = path.strip("/").split("/")
        for i in range(1, len(parts) + 1):
            d = "/".join(parts[:i])
            if d and d not in self.dirs:
                self.dirs.add(d)
                self._header(d, stat.S_IFDIR | 0o755, 0, 2)

    def add(self, e: Entry) -> None:
        path = e.path.strip("/")
        parent = os.path.dirname(path)
        if parent:
            self.mkdirs(parent)
        if stat.S_ISDIR(e.mode):
            self.mkdirs(path)
            return
        data = e.source.read_bytes() if e.source is not None else e.data
        self._header(path, e.mode, len(data))
        self.fh.write(data)
        self.fh.write(_pad(len(data)))

    def close(self) -> None:
        self._header("TRAILER!!!", 0, 0)
        # The kernel wants whole 512-byte blocks between concatenated archives.
        pos = self.fh.tell()
        self.fh.write(b"\0" * ((512 - pos % 512) % 512))


def write(path: Path, entries: Iterable[Entry]) -> None:
    """Write *entries* as one newc archive at *path* (atomically: a temporary file of
    its own, renamed into place; removed if anything fails)."""
    with atomic_file(path) as tmp, open(tmp, "wb") as fh:
        w = Writer(fh)
        for e in entries:
            w.add(e)
        w.close()


def file(path: str, source: Path | None = None, data: bytes = b"", mode: int = 0o644) -> Entry:
    return Entry(path, stat.S_IFREG | mode, data, source)


def symlink(path: str, target: str) -> Entry:
    return Entry(path, stat.S_IFLNK | 0o777, target.encode())


def directory(path: str) -> Entry:
    return Entry(path, stat.S_IFDIR | 0o755)


def tree(root: Path, prefix: str = "") -> list[Entry]:
    """Entries for every file, symlink and directory under *root* (sorted, reproducible)."""
    out: list[Entry] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        rel = os.path.relpath(dirpath, root)
        base = prefix.strip("/") if rel == "." else os.path.join(prefix.strip("/"), rel).strip("/")
        if base:
            out.append(directory(base))
        for name in sorted(
            filenames + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]
        ):
            full = Path(dirpath) / name
            arc = f"{base}/{name}" if base else name
            st = full.lstat()
            if stat.S_ISLNK(st.st_mode):
                out.append(symlink(arc, os.readlink(full)))
            elif stat.S_ISREG(st.st_mode):
                out.append(file(arc, source=full, mode=stat.S_IMODE(st.st_mode)))
    return out
