"""Nothing a user wrote is deleted or replaced: compile over a build, zoo inflate over a folder,
opt -o onto something that is not a regular file, and temp folders left by a kill -9."""
from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.harden.conftest import assert_error


def _compile(specir_cli, spec, out):
    return specir_cli("compile", spec, "--target", "cpu", "-o", out)


def test_compile_over_a_build_keeps_user_files(tmp_path, specir_cli, ngram_spec):
    build = tmp_path / "build"
    code, _, err = _compile(specir_cli, ngram_spec, build)
    assert code == 0, err
    code, _, err = _compile(specir_cli, ngram_spec, build)  # a build's own files: replaced
    assert code == 0, err
    (build / "notes.txt").write_text("mine")
    (build / "tvm" / "extra.txt").write_text("mine too")
    err = assert_error(_compile(specir_cli, ngram_spec, build), "holds files that are not part of its previous build: "
                       "notes.txt, tvm/extra.txt", str(build), hint="move those files out of it")
    assert (build / "notes.txt").read_text() == "mine" and (build / "tvm" / "extra.txt").read_text() == "mine too"
    assert (build / "manifest.json").is_file()


def test_compile_of_a_spec_inside_its_own_build_keeps_the_spec(tmp_path, specir_cli, ngram_spec):
    build = tmp_path / "build"
    assert _compile(specir_cli, ngram_spec, build)[0] == 0
    inside = build / "mine.spec"
    inside.write_text(ngram_spec.read_text())
    assert_error(_compile(specir_cli, inside, build), "mine.spec")
    assert inside.read_text() == ngram_spec.read_text()


def test_zoo_inflate_keeps_user_files_and_refuses_a_file(tmp_path, specir_cli, pair):
    target = pair[0]
    folder = tmp_path / "D"
    folder.mkdir()
    (folder / "notes.txt").write_text("mine")
    assert_error(specir_cli("zoo", "inflate", target, "--shape", "llama-3.2-1b", "--out", folder),
                 "is not empty and is not an inflated model", str(folder))
    assert (folder / "notes.txt").read_text() == "mine"
    afile = tmp_path / "afile"
    afile.write_text("mine")
    assert_error(specir_cli("zoo", "inflate", target, "--shape", "llama-3.2-1b", "--out", afile),
                 "is a file, not a folder", hint="give --out a folder name")
    assert afile.read_text() == "mine"


def test_inflate_replaces_its_own_output_only(tmp_path):
    from specir.build_folder import foreign_entries
    from specir.zoo.inflate import inflated_files
    folder = tmp_path / "big"
    folder.mkdir()
    (folder / "inflation.json").write_text("{}")
    (folder / "model.safetensors.index.json").write_text('{"weight_map": {"a": "model-1-of-2.safetensors"}}')
    for name in ("config.json", "model-1-of-2.safetensors", "tokenizer.json"):
        (folder / name).write_text("x")
    assert foreign_entries(folder, inflated_files(folder)) == []
    (folder / "mine.md").write_text("x")
    assert foreign_entries(folder, inflated_files(folder)) == ["mine.md"]


@pytest.mark.parametrize("kind", ["symlink", "fifo", "device"])
def test_opt_output_that_is_not_a_regular_file_is_refused(tmp_path, specir_cli, ngram_spec, kind):
    if kind == "symlink":
        real = tmp_path / "real.spec"
        real.write_text("mine")
        target = tmp_path / "link.spec"
        target.symlink_to(real)
        what = "a symbolic link"
    elif kind == "fifo":
        target = tmp_path / "fifo"
        os.mkfifo(target)
        what = "a FIFO (named pipe)"
    else:
        target = Path("/dev/null")
        what = "a device"
    before = os.lstat(target)
    assert_error(specir_cli("opt", ngram_spec, "-o", target), f"is {what}; specir writes only regular files",
                 str(target), hint="regular file")
    after = os.lstat(target)
    assert (after.st_mode, after.st_ino) == (before.st_mode, before.st_ino)
    if kind == "symlink":
        assert (tmp_path / "real.spec").read_text() == "mine" and target.is_symlink()


def test_opt_output_keeps_the_files_mode_and_new_files_follow_the_umask(tmp_path, specir_cli, ngram_spec):
    existing = tmp_path / "out.spec"
    existing.write_text("old")
    existing.chmod(0o644)
    assert specir_cli("opt", ngram_spec, "-o", existing)[0] == 0
    assert stat.S_IMODE(existing.stat().st_mode) == 0o644 and existing.read_text().startswith("pipeline")
    existing.chmod(0o640)
    assert specir_cli("opt", ngram_spec, "-o", existing)[0] == 0
    assert stat.S_IMODE(existing.stat().st_mode) == 0o640
    umask = os.umask(0o022)
    try:
        fresh = tmp_path / "new.spec"
        assert specir_cli("opt", ngram_spec, "-o", fresh)[0] == 0
        assert stat.S_IMODE(fresh.stat().st_mode) == 0o644
    finally:
        os.umask(umask)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp file left


_HANG_IN_LOWERING = """
import sys, time
import specir.compiler as compiler
def hang(*args, **kwargs):
    open(sys.argv[1], "w").close()
    time.sleep(600)
compiler.lower = hang
from specir.cli.main import main
sys.exit(main(sys.argv[2:]))
"""


def test_kill_9_during_compile_leaves_nothing_after_the_next_compile(tmp_path, specir_cli, ngram_spec):
    build = tmp_path / "build"
    assert _compile(specir_cli, ngram_spec, build)[0] == 0
    before = sorted(p.name for p in build.rglob("*"))
    sentinel = tmp_path / "lowering-started"
    proc = subprocess.Popen([sys.executable, "-c", _HANG_IN_LOWERING, str(sentinel), "compile", str(ngram_spec),
                             "--target", "cpu", "-o", str(build)], cwd=tmp_path)
    try:
        deadline = time.monotonic() + 120
        while not sentinel.exists():
            assert proc.poll() is None and time.monotonic() < deadline, "compile ended before lowering"
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()
    left = [p for p in tmp_path.iterdir() if p.name.startswith(".build.tmp-")]
    assert len(left) == 1 and str(proc.pid) in left[0].name  # what kill -9 leaves: the dead run's temp folder
    # another live process's temp folder (this test's own pid) must survive the cleanup
    live = tmp_path / f".build.tmp-{os.getpid()}-live"
    live.mkdir()
    assert sorted(p.name for p in build.rglob("*")) == before  # the old build is intact
    code, _, err = _compile(specir_cli, ngram_spec, build)
    assert code == 0, err
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == [live.name]
    assert sorted(p.name for p in build.rglob("*")) == before


def test_a_build_moved_aside_by_a_killed_swap_comes_back(tmp_path, specir_cli, ngram_spec):
    """kill -9 between the two renames of the swap: the previous build waits as .build.old-<pid>."""
    build = tmp_path / "build"
    assert _compile(specir_cli, ngram_spec, build)[0] == 0
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    aside = tmp_path / f".build.old-{dead.pid}"
    build.rename(aside)
    from specir.build_folder import remove_stale_temps
    remove_stale_temps(build)
    assert build.is_dir() and not aside.exists() and (build / "manifest.json").is_file()
