import os
import secrets

import pytest
import torch


@pytest.fixture
def seed():
    """Fresh random inputs every run; the seed is printed and can be pinned with SPECIR_TEST_SEED."""
    value = int(os.environ.get("SPECIR_TEST_SEED", secrets.randbits(31)))
    print(f"seed={value} (rerun with SPECIR_TEST_SEED={value})")
    torch.manual_seed(value)
    return value
