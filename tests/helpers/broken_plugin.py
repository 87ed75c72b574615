"""Deliberately broken step ops, loaded with --plugin, to show that `specir check` catches them.

- accept.trusting: accepts every drafted token without verifying it;
- commit.shifted: commits the KV rows one slot too far along (the wrong KV slot);
- accept.no_correction: on the first rejected draft, emits the drafter's token instead of the
  target's correction (skips the bonus-token correction).
Each registers an op definition (so the IR verifies) and a runtime (so it executes).
"""
from specir.ir.opdefs import OPS, OpDef, register_op
from specir.pass_base import Pass
from specir.runtime import acceptance
from specir.runtime.engine import STEP_OPS
from specir.runtime.values import Accepted

register_op(OpDef("accept.trusting", "step", OPS["accept.greedy"].operands, {}, OPS["accept.greedy"].infer))
register_op(OpDef("accept.no_correction", "step", OPS["accept.greedy"].operands, {}, OPS["accept.greedy"].infer))
register_op(OpDef("commit.shifted", "step", OPS["commit"].operands, {}, OPS["commit"].infer, pure=False))


def _trusting(engine, op, env, state):
    v = env[op.values[-1]]
    greedy = acceptance.greedy(v.logits, v.tokens, v.parents)
    paths = [list(range(len(t))) for t in v.tokens]  # every node of a chain, verified or not
    emitted = [t[1:] + [g[-1]] for t, g in zip(v.tokens, greedy.emitted)]
    return Accepted(paths, emitted)


def _no_correction(engine, op, env, state):
    v = env[op.values[-1]]
    good = acceptance.greedy(v.logits, v.tokens, v.parents)
    emitted = []
    for toks, path, out in zip(v.tokens, good.paths, good.emitted):
        nxt = path[-1] + 1
        emitted.append(out[:-1] + [toks[nxt]] if nxt < len(toks) else out)
    return Accepted(good.paths, emitted)


def _commit_shifted(engine, op, env, state):
    active, accepted = env[op.values[0]], env[op.values[1]]
    runner = engine.runners[engine.target]
    for r, path in zip(active, accepted.paths):
        runner.cache.commit_path(r.slot, [p + 1 for p in path])  # one row too far: another token's KV
    engine.record(active, accepted)


STEP_OPS["accept.trusting"] = _trusting
STEP_OPS["accept.no_correction"] = _no_correction
STEP_OPS["commit.shifted"] = _commit_shifted


class UseBroken(Pass):
    """Rewrite the step to use one broken op: which = trusting | shifted | no_correction."""
    name = "use-broken"
    from specir.pass_base import Option
    options = {"which": Option(str, "trusting", choices=("trusting", "shifted", "no_correction"))}

    def run(self, pipeline):
        from dataclasses import replace
        targets = {"trusting": ("accept.greedy", "accept.sample"),
                   "no_correction": ("accept.greedy", "accept.sample"), "shifted": ("commit",)}[self.which]
        new = {"trusting": "accept.trusting", "no_correction": "accept.no_correction",
               "shifted": "commit.shifted"}[self.which]
        ops = tuple(replace(op, name=new, attrs=op.attrs.set(kv=None)) if op.name in targets else op
                    for op in pipeline.step.ops)
        if ops == pipeline.step.ops:
            raise ValueError(f"use-broken: nothing to replace for {self.which}")
        return replace(pipeline, step=replace(pipeline.step, ops=ops))
