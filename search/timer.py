"""A timing process: `python -m specir.search.timer SOURCE MODE` (MODE: pipeline | ar).

It opens SOURCE (a build folder; `ar`: the autoregressive baseline of its target, built with
runtime.baseline.ar_pipeline and the same backend), warms up, prints `{"ready": ...}` and then
answers one JSON line per request on stdin: `{"prompts": [[ids]], "max_new": N, "batch": B}` ->
`{"outputs": [[ids]], "accept_lengths": [[n]]}`. It never times itself: the caller measures the
wall time between its request and the answer, so what this process says about time is not used.
"""
from __future__ import annotations

import json
import sys


def _engine(source: str, mode: str):
    from specir.runtime.baseline import ar_pipeline
    from specir.runtime.session import make_engine, open_session
    session = open_session(source)
    if mode == "ar":
        return make_engine(ar_pipeline(session.pipeline), session.backend, session.device, session.build, weights=None)
    return session.engine()


def main(argv: list[str]) -> int:
    source, mode = argv
    out = sys.stdout
    sys.stdout = sys.stderr  # whatever the pipeline prints must not corrupt the protocol
    try:
        engine = _engine(source, mode)
        engine.generate([[1, 2, 3, 4]], 4)
    except Exception as exc:  # noqa: BLE001 - reported to the caller as this candidate's failure
        from specir.errors import SpecirError
        text = exc.format() if isinstance(exc, SpecirError) else f"{type(exc).__name__}: {exc}"
        out.write(json.dumps({"error": text}) + "\n")
        out.flush()
        return 2
    out.write(json.dumps({"ready": engine.backend.name}) + "\n")
    out.flush()
    for line in sys.stdin:
        request = json.loads(line)
        prompts, size = request["prompts"], int(request.get("batch") or 1)
        outputs, accepts = [], []
        for i in range(0, len(prompts), size):
            for r in engine.generate(prompts[i:i + size], int(request["max_new"])):
                outputs.append([int(t) for t in r.tokens])
                accepts.append([int(a) for a in r.accept_lengths])
        out.write(json.dumps({"outputs": outputs, "accept_lengths": accepts}) + "\n")
        out.flush()
    return 0


if __name__ == "__main__":
    from specir.parent_death import die_with_parent
    die_with_parent()  # a timer never outlives the worker it times for
    sys.exit(main(sys.argv[1:]))
