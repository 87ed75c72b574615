"""Shared fixtures: tiny checkpoints of each family and a target/drafter pair that mostly agrees."""
from __future__ import annotations

import os
import secrets
from pathlib import Path

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("SPECIR_THREADS", "1")  # tests run two workers on two cores
torch.set_num_threads(1)
if "SPECIR_CACHE" not in os.environ:  # one compiled-kernel cache (TVM) per test run, shared by xdist workers
    import atexit
    import shutil
    import tempfile
    os.environ["SPECIR_CACHE"] = tempfile.mkdtemp(prefix="specir-test-cache-")
    atexit.register(shutil.rmtree, os.environ["SPECIR_CACHE"], True)

from tests.helpers.checkpoints import FAMILIES, make_checkpoint, write_tokenizer  # noqa: E402


@pytest.fixture(scope="session")
def family_checkpoints(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("families")
    return {f: make_checkpoint(f, root / f, seed=i) for i, f in enumerate(FAMILIES)}


@pytest.fixture(scope="session")
def pair(tmp_path_factory) -> tuple[Path, Path]:
    """(target, drafter): a random Llama and a noisy copy of it, sharing a tokenizer (vocab 259)."""
    root = tmp_path_factory.mktemp("pair")
    target = make_checkpoint("llama", root / "target", seed=3, vocab_size=259, initializer_range=0.3)
    drafter = make_checkpoint("llama", root / "drafter", seed=4, noise_from=target, noise=0.02)
    for folder in (target, drafter):
        write_tokenizer(folder, 259)
    return target, drafter


@pytest.fixture
def specir_cli(capsys):
    """Run the specir CLI in-process: returns (exit code, stdout, stderr)."""
    from specir.cli.main import main

    def run(*argv):
        capsys.readouterr()  # drop whatever the test printed before
        code = main([str(a) for a in argv])
        out = capsys.readouterr()
        return code, out.out, out.err
    return run


@pytest.fixture
def seed():
    """Fresh random inputs every run; the seed is printed and can be pinned with SPECIR_TEST_SEED."""
    value = int(os.environ.get("SPECIR_TEST_SEED", secrets.randbits(31)))
    print(f"seed={value} (rerun with SPECIR_TEST_SEED={value})")
    torch.manual_seed(value)
    return value
