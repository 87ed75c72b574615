"""Serving tests: the shipped zoo pair's warm engine (one per test process).

Servers sharing an engine must not decode at the same time (the engine is single-threaded): each
test module starts its own servers (tests/helpers/serving.py), each stopped before the module ends,
and computes expected outputs with `engine.generate` only while no server of it decodes.
"""
from __future__ import annotations

import pytest

from specir.runtime.session import open_session


@pytest.fixture(scope="session")
def zoo():
    """(session, engine) of the shipped pair on the CPU (TVM kernels), as `specir serve` opens it."""
    session = open_session(None, "cpu")
    return session, session.engine()
