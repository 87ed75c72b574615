"""Cheat: stop every request after its first step (fewer tokens than asked, no end-of-sequence),
or return no tokens at all (`stop-early{none=true}`): the pipeline's process is told so by a
patched engine loop."""
from specir.pass_infra import Option, Pass
from specir.step import engine

_generate = engine.StepEngine.generate
MODE = {"none": False}


def _short(self, prompts, max_new_tokens=64, **kwargs):
    results = _generate(self, prompts, 1, **kwargs)
    for r in results:
        if MODE["none"]:
            r.tokens.clear()
    return results


class StopEarly(Pass):
    name = "stop-early"
    options = {"none": Option(bool, False)}

    def run(self, pipeline):
        MODE["none"] = self.none
        engine.StepEngine.generate = _short
        return pipeline
