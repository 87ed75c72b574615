"""Writing an output folder atomically: everything goes to a temp folder beside the target,
which then replaces the old output in one rename. Nothing a user wrote is lost: a folder is
replaced only when every file in it belongs to the previous output of the same kind (a build's
files are the ones its manifest lists); a folder holding anything else is refused, untouched.

Temp folders are named `.<out>.tmp-<pid>-<random>` (and a replaced build waits as
`.<out>.old-<pid>` for the instant of the swap), so a run killed with -9 leaves folders whose
process is dead: the next run for the same output removes those (and only those), or moves a
previous output back into place when the kill came between the two renames.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path

from .errors import SpecirError

MANIFEST = "manifest.json"


def is_build_folder(path: Path) -> bool:
    return (path / MANIFEST).is_file() and (path / "pipeline.spec").is_file()


def build_files(folder: Path) -> set[str] | None:
    """The files a previous build in `folder` owns (relative paths: its manifest's `files`), or
    None when `folder` is not a specir build."""
    if not is_build_folder(folder):
        return None
    try:
        listed = json.loads((folder / MANIFEST).read_text()).get("files")
    except (OSError, ValueError, AttributeError):
        listed = None
    owned = {MANIFEST, "pipeline.spec"}
    if isinstance(listed, list):
        owned |= {f for f in listed if isinstance(f, str)}
    return owned


def foreign_entries(folder: Path, owned: set[str]) -> list[str]:
    """Entries of `folder` (relative paths, sorted) that are neither an owned file nor a folder
    on the way to one. Symbolic links count as entries of their own (never followed)."""
    parents = {str(Path(f).parent) for f in owned} | {str(p) for f in owned for p in Path(f).parents}
    foreign = []
    for root, dirs, files in os.walk(folder, followlinks=False):
        rel_root = Path(root).relative_to(folder)
        for name in sorted(dirs):
            rel = str(rel_root / name)
            if os.path.islink(os.path.join(root, name)) or rel not in parents:
                foreign.append(rel + ("" if os.path.islink(os.path.join(root, name)) else "/"))
        dirs[:] = [d for d in dirs if str(rel_root / d) in parents and not os.path.islink(os.path.join(root, d))]
        for name in files:
            rel = str(rel_root / name)
            if rel not in owned or os.path.islink(os.path.join(root, name)):
                foreign.append(rel)
    return sorted(foreign)


def check_output(out: Path, owned: Callable[[Path], set[str] | None] = build_files,
                 kind: str = "a specir build", option: str = "-o") -> None:
    """Refuse (SpecirError) an output that cannot be written or whose replacement would lose a file
    that the previous output of this `kind` does not own."""
    out = Path(out)
    if out.is_symlink() or (out.exists() and not out.is_dir()):
        what = "a symbolic link" if out.is_symlink() else "a file"
        raise SpecirError(f"output {str(out)!r} is {what}, not a folder", path=str(out),
                          hint=f"give {option} a folder name (e.g. build/)")
    if out.is_dir() and any(out.iterdir()):
        mine = owned(out)
        if mine is None:
            raise SpecirError(f"output folder {str(out)!r} is not empty and is not {kind}", path=str(out),
                              hint=f"choose another {option}, or empty the folder yourself")
        foreign = foreign_entries(out, mine)
        if foreign:
            shown = ", ".join(foreign[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3 else "")
            raise SpecirError(f"output folder {str(out)!r} holds files that are not part of its previous "
                              f"{kind.split()[-1]}: {shown}", path=str(out),
                              hint=f"the whole folder is replaced: move those files out of it, or choose "
                                   f"another {option}")
    parent = out.parent if str(out.parent) else Path(".")
    blocking = next((p for p in [parent, *parent.parents] if p.exists()), None)
    if blocking is not None and not blocking.is_dir():
        raise SpecirError(f"cannot create {str(out)!r}: {str(blocking)!r} is a file, not a folder", path=str(out),
                          hint=f"choose an {option} whose parent folders are folders")
    if parent.exists() and not os.access(parent, os.W_OK | os.X_OK):
        raise SpecirError(f"cannot write into {str(parent)!r} (permission denied)", path=str(parent),
                          hint=f"choose an {option} in a folder you can write")
    if out.is_dir() and not os.access(out, os.R_OK | os.W_OK | os.X_OK):
        raise SpecirError(f"cannot read or replace {str(out)!r} (permission denied)", path=str(out),
                          hint=f"choose another {option}")


_TEMP = re.compile(r"^\.(?P<name>.+)\.(?P<kind>tmp|old)-(?P<pid>\d+)(-.*)?$")


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True


def remove_stale_temps(out: Path) -> list[Path]:
    """Remove the temp folders that a killed run for `out` left beside it (their pid is dead); a
    stale `.old-` folder goes back into place when `out` is missing. Returns what was removed."""
    parent = out.parent if str(out.parent) else Path(".")
    removed = []
    try:
        entries = sorted(parent.iterdir())
    except OSError:
        return removed
    for entry in entries:
        m = _TEMP.match(entry.name)
        if not m or m["name"] != out.name or not entry.is_dir() or entry.is_symlink() or _alive(int(m["pid"])):
            continue
        if m["kind"] == "old" and not out.exists():
            try:
                os.rename(entry, out)
                continue
            except OSError:
                pass
        shutil.rmtree(entry, ignore_errors=True)
        removed.append(entry)
    return removed


@contextmanager
def atomic_build(out: Path, owned: Callable[[Path], set[str] | None] = build_files,
                 kind: str = "a specir build", option: str = "-o"):
    """Yield a temp folder; on success it replaces `out` atomically, on failure it is removed.
    `owned(folder)` names the files of a previous output that may be replaced (check_output)."""
    out = Path(out)
    remove_stale_temps(out)
    check_output(out, owned, kind, option)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-{os.getpid()}-", dir=out.parent))
    except OSError as exc:
        raise SpecirError(f"cannot create the output folder: {exc.strerror}", path=str(out),
                          hint=f"choose an {option} in a folder you can write") from None
    try:
        yield tmp
        check_output(out, owned, kind, option)  # again: files may have landed there meanwhile
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
    """Write a file by rename, so a crash never leaves it half-written. Only a regular file (which
    keeps its permission bits) or a new path is written: a folder, symbolic link, device, FIFO or
    socket is refused, untouched. A new file gets the usual 0666 & ~umask."""
    path = Path(path)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise SpecirError(f"cannot write {str(path)!r}: {exc.strerror}", path=str(path),
                          hint="give a file name in a folder you can write") from None
    if st is not None and not stat.S_ISREG(st.st_mode):
        what = _KINDS.get(stat.S_IFMT(st.st_mode), "not a regular file")
        raise SpecirError(f"{str(path)!r} is {what}; specir writes only regular files", path=str(path),
                          hint="give the name of a new or regular file (to see the IR, drop -o: it goes to stdout)")
    if st is not None:
        mode = stat.S_IMODE(st.st_mode)
    else:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    parent = path.parent if str(path.parent) else Path(".")
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=parent)
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
        tmp = None
    except OSError as exc:
        raise SpecirError(f"cannot write {str(path)!r}: {exc.strerror}", path=str(path),
                          hint="give a file name in a folder you can write") from None
    finally:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)


_KINDS = {stat.S_IFDIR: "a folder", stat.S_IFLNK: "a symbolic link", stat.S_IFCHR: "a device",
          stat.S_IFBLK: "a device", stat.S_IFIFO: "a FIFO (named pipe)", stat.S_IFSOCK: "a socket"}
