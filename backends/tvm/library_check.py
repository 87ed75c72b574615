"""Is a cached kernel library whole? Checked before `dlopen`, which would fault (SIGBUS) on a file
cut short or fail with an opaque error on an empty or garbage one.

`library_problem(path, sha256=None)` returns None for a library that looks whole, else a short
reason: missing, empty, not an ELF shared object, or truncated (a program segment or the section
header table lies past the end of the file); with `sha256` (recorded next to the library when it
was compiled), any other change of its bytes too.
"""
from __future__ import annotations

import hashlib
import struct
from pathlib import Path

_PT_LOAD = 1


def library_problem(path: Path, sha256: str | None = None) -> str | None:
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        return "missing"
    except OSError as exc:
        return f"unreadable ({exc.strerror or exc})"
    if not data:
        return "empty"
    if sha256 and hashlib.sha256(data).hexdigest() != sha256:
        return "changed since it was compiled (its digest differs)"
    return _elf_problem(data)


def file_digest(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _elf_problem(data: bytes) -> str | None:
    if len(data) < 64 or data[:4] != b"\x7fELF":
        return "not an ELF shared library"
    wide, order = data[4] == 2, "<" if data[5] == 1 else ">"
    try:
        if wide:
            phoff, shoff = struct.unpack_from(order + "QQ", data, 0x20)
            phentsize, phnum, shentsize, shnum = struct.unpack_from(order + "HHHH", data, 0x36)
        else:
            phoff, shoff = struct.unpack_from(order + "II", data, 0x1C)
            phentsize, phnum, shentsize, shnum = struct.unpack_from(order + "HHHH", data, 0x2A)
        if phoff + phnum * phentsize > len(data) or (shnum and shoff + shnum * shentsize > len(data)):
            return f"truncated ({len(data)} bytes; its headers reach past the end)"
        for i in range(phnum):
            at = phoff + i * phentsize
            if wide:
                p_type, = struct.unpack_from(order + "I", data, at)
                p_offset, = struct.unpack_from(order + "Q", data, at + 0x08)
                p_filesz, = struct.unpack_from(order + "Q", data, at + 0x20)
            else:
                p_type, p_offset = struct.unpack_from(order + "II", data, at)
                p_filesz, = struct.unpack_from(order + "I", data, at + 0x10)
            if p_type == _PT_LOAD and p_offset + p_filesz > len(data):
                return f"truncated ({len(data)} bytes; a segment ends at byte {p_offset + p_filesz})"
    except struct.error:
        return "truncated (its ELF header is cut short)"
    return None
