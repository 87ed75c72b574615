"""`specir zoo install`: make trained model folders (or their tars) the shipped default pair.

Each source is a `code-target` / `code-drafter` / `code-mid` / `code-hybrid-target` folder written by `specir zoo train`, or the
`.tar` of one. A folder must hold config.json, model.safetensors, tokenizer.json,
tokenizer_config.json and train_log.json; it replaces `specir/zoo/models/<name>` atomically.
All shipped models must share one tokenizer.
"""
from __future__ import annotations

import shutil
import tarfile
import tempfile
from pathlib import Path

from specir.errors import SpecirError
from specir.zoo.paths import MODELS

REQUIRED = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
            "train_log.json")
NAMES = ("code-target", "code-drafter", "code-mid", "code-hybrid-target")
PAIR = NAMES[:2]  # the shipped default pair: one tokenizer, one size budget
SIZE_LIMIT_BYTES = 20_000_000


def _unpack(source: Path, scratch: Path) -> Path:
    if source.is_dir():
        return source
    if not tarfile.is_tarfile(source):
        raise SpecirError(f"{source} is neither a model folder nor a tar file", path=str(source))
    with tarfile.open(source) as tar:
        try:
            tar.extractall(scratch, filter="data")
        except TypeError:  # Python without tar filters
            tar.extractall(scratch)
    folders = [p for p in scratch.iterdir() if p.is_dir()]
    if len(folders) != 1:
        raise SpecirError(f"{source} should hold one model folder", path=str(source))
    return folders[0]


def install_models(sources: list[Path], models_dir: Path = MODELS, log=print) -> list[Path]:
    """Install each source into `models_dir`; returns the installed folders."""
    installed = []
    models_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        for i, source in enumerate(sources):
            if not source.exists():
                raise SpecirError(f"{source} does not exist", path=str(source))
            folder = _unpack(source, Path(tmp) / str(i))
            if folder.name not in NAMES:
                raise SpecirError(f"model folder '{folder.name}' is not one of {', '.join(NAMES)}",
                                  path=str(source), hint="install folders written by `specir zoo train`")
            lacking = [f for f in REQUIRED if not (folder / f).is_file()]
            if lacking:
                raise SpecirError(f"{folder.name} lacks {', '.join(lacking)}", path=str(source))
            staging = models_dir / f".{folder.name}.installing"
            shutil.rmtree(staging, ignore_errors=True)
            shutil.copytree(folder, staging)
            for f in staging.iterdir():
                f.chmod(0o644)
            target = models_dir / folder.name
            shutil.rmtree(target, ignore_errors=True)
            staging.rename(target)
            installed.append(target)
            log(f"install: {folder.name} <- {source}")
    present = [models_dir / n for n in NAMES if (models_dir / n / "tokenizer.json").exists()]
    if len({(folder / "tokenizer.json").read_bytes() for folder in present}) > 1:
        raise SpecirError("the shipped models have different tokenizers", path=str(models_dir),
                          hint="install models trained from the same corpus")
    total = sum(f.stat().st_size for n in PAIR for f in (models_dir / n).glob("*") if f.is_file())
    if total > SIZE_LIMIT_BYTES:
        log(f"install: warning: the shipped pair takes {total / 1e6:.1f} MB (> 20 MB)")
    return installed
