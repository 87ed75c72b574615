"""Writing a build folder atomically: everything goes to a temp folder beside the target,
which then replaces the old build in one rename. A folder that is not a specir build is never
overwritten (nothing a user wrote is lost)."""
from __future__ import annotations

import json
import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path

from .errors import SpecirError

MANIFEST = "manifest.json"


def is_build_folder(path: Path) -> bool:
    return (path / MANIFEST).is_file() and (path / "pipeline.spec").is_file()


def check_output(out: Path) -> None:
    if out.exists() and not out.is_dir():
        raise SpecirError(f"output {str(out)!r} is a file, not a folder", path=str(out),
                          hint="give -o a folder name (e.g. build/)")
    if out.is_dir() and any(out.iterdir()) and not is_build_folder(out):
        raise SpecirError(f"output folder {str(out)!r} is not empty and is not a specir build", path=str(out),
                          hint="choose another -o, or empty the folder yourself")
    parent = out.parent if str(out.parent) else Path(".")
    blocking = next((p for p in [parent, *parent.parents] if p.exists()), None)
    if blocking is not None and not blocking.is_dir():
        raise SpecirError(f"cannot create {str(out)!r}: {str(blocking)!r} is a file, not a folder", path=str(out),
                          hint="choose an -o whose parent folders are folders")
    if parent.exists() and not os.access(parent, os.W_OK | os.X_OK):
        raise SpecirError(f"cannot write into {str(parent)!r} (permission denied)", path=str(parent),
                          hint="choose an -o in a folder you can write")
    if out.is_dir() and not os.access(out, os.R_OK | os.W_OK | os.X_OK):
        raise SpecirError(f"cannot read or replace {str(out)!r} (permission denied)", path=str(out),
                          hint="choose another -o")


@contextmanager
def atomic_build(out: Path):
    """Yield a temp folder; on success it replaces `out` atomically, on failure it is removed."""
    out = Path(out)
    check_output(out)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))
    except OSError as exc:
        raise SpecirError(f"cannot create the output folder: {exc.strerror}", path=str(out),
                          hint="choose an -o in a folder you can write") from None
    try:
        yield tmp
        old = None
        if out.exists():
            old = out.parent / f".{out.name}.old-{os.getpid()}"
            os.rename(out, old)
        os.rename(tmp, out)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def read_manifest(build: Path) -> dict:
    try:
        return json.loads((Path(build) / MANIFEST).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise SpecirError(f"{build}/{MANIFEST} is unreadable: {exc}", path=str(build),
                          hint="recompile with specir compile") from None


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write a file by rename, so a crash never leaves it half-written."""
    path = Path(path)
    if path.is_dir():
        raise SpecirError(f"{str(path)!r} is a folder", path=str(path), hint="give a file name")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent if str(path.parent) else ".")
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except OSError as exc:
        raise SpecirError(f"cannot write {str(path)!r}: {exc.strerror}", path=str(path)) from None
