"""Static-tree (EAGLE-2-style expansion on the device, tree mask, KV compaction) and n-gram
(host lookup, device verify) pipelines on the Triton backend pass token forcing at batch 1 and 2.
(A file apart from AR/chain so that the two run in parallel under xdist.)"""
from __future__ import annotations

import pytest

from tests.triton_backend.pipelines import assert_device_step_lossless


@pytest.mark.parametrize("kind", ["tree", "ngram"])
def test_device_step_is_lossless(kind, tiny_pair):
    assert_device_step_lossless(kind, *tiny_pair)
