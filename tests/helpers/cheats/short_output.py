"""Cheat: stop every request after its first step (fewer tokens than asked, no end-of-sequence),
or return no tokens at all (`stop-early{none=true}`)."""
from specir.pass_base import Option, Pass
from specir.runtime.engine import STEP_OPS

_commit = STEP_OPS["commit"]
MODE = {"none": False}


def _commit_then_stop(engine, op, env, state):
    _commit(engine, op, env, state)
    for r in env[op.values[0]]:
        if MODE["none"]:
            r.generated.clear()
        r.done = True


class StopEarly(Pass):
    name = "stop-early"
    options = {"none": Option(bool, False)}

    def run(self, pipeline):
        MODE["none"] = self.none
        STEP_OPS["commit"] = _commit_then_stop
        return pipeline
