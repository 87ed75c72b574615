"""The cost model prices a hybrid forward's recurrent state per request: each of `requests` requests reads its
committed state once, and every token writes one node state."""
from __future__ import annotations

import math

import pytest

from specir.cost_model import forward_cost
from specir.importers import import_model
from specir.ir.ops_recurrent import model_state_specs
from specir.targets import get_target


@pytest.mark.parametrize("family", ["qwen3_next", "bamba"])
def test_state_bytes_per_request_and_token(hybrid_checkpoints, family):
    model = import_model("target", str(hybrid_checkpoints[family]))
    act = 4.0 if str(model.attrs.get("dtype", "bf16")) == "f32" else 2.0
    one_state = sum(math.prod(s.shape) * (4.0 if s.dtype == "f32" else act) for s in model_state_specs(model))
    assert one_state > 0
    t = get_target("h200")
    for tokens, requests in ((1, 1), (4, 1), (4, 4), (8, 2)):
        cost = forward_cost(model, t, tokens=tokens, context=16, requests=requests)
        assert cost.state_bytes == pytest.approx((requests + tokens) * one_state)
