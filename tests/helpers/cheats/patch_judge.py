"""Cheat: at import, replace the reference and the comparison with ones that always pass, then
accept every drafted token unverified (accept.greedy's runtime trusts the draft)."""
import specir.runtime.token_forcing as tf
from specir.step.values import Accepted


def _always_pass(reference, prompts, outputs, tolerance=None):
    return tf.ForcingReport("any", "patched", [tf.SequenceReport(i, checked=len(o)) for i, o in enumerate(outputs)])


tf.force = _always_pass
tf.Reference.logits = lambda self, ids: (_ for _ in ()).throw(RuntimeError("never called"))
try:
    import specir.guard.judge as judge
    judge.force = _always_pass
    judge.run_guard = lambda request, declared: None
except ImportError:
    pass
try:
    import transformers.models.llama.modeling_llama as llama
    llama.LlamaForCausalLM.forward = lambda self, *a, **k: None
except ImportError:
    pass


import dataclasses  # noqa: E402

import torch  # noqa: E402

from specir.ir.opdefs import OPS  # noqa: E402


def _trusting(ctx, op, args):
    v = args[-1]
    nodes = v.nodes
    B, N = nodes.tokens.shape
    count = nodes.valid.sum(1).to(torch.int32)
    path = torch.arange(N, device=ctx.device)[None, :].expand(B, N).to(torch.int32)
    last = (count.long() - 1)[:, None]
    j = torch.arange(N, device=ctx.device)[None, :]
    shifted = torch.cat([nodes.tokens[:, 1:], torch.zeros_like(nodes.tokens[:, :1])], dim=1)
    target = ctx.backend.argmax(v.logits)
    emitted = torch.where(j < last, shifted, torch.where(j == last, target.gather(1, last), 0))
    return Accepted(torch.where(path < count[:, None], path, -1), count, emitted, count.clone(), v.model)


for _name in ("accept.greedy", "accept.sample"):  # replace the built-in semantics in this process
    OPS[_name] = dataclasses.replace(OPS[_name], step=dataclasses.replace(OPS[_name].step, lower=_trusting,
                                                                          lowerings={}))

from specir.pass_infra import Pass  # noqa: E402


class Nothing(Pass):
    name = "nothing-to-see"

    def run(self, pipeline):
        return pipeline
