"""The search loop behind `specir search` (the CLI parses flags into `Settings` and calls `search`).

Contract: `search(settings) -> report dict`. It loads the input pipeline, chooses the guard and
timing prompts (disjoint), compiles the AR baseline, calibrates and profiles the cost model,
builds the space (the registry's passes, --plugin passes described in the sandbox), seeds it from
the memory's nearest deployments, then keeps `workers` candidates in flight (local pool or Ray)
until `budget` evaluations have finished: the input pipeline first; with an agent, then one
candidate per agent reply (up to `agent_calls`); then --plugin passes alone, the memory's seeds
and the proposer's candidates. A finite `space` (--space) limits the seeds and the proposer to its
pipelines (by final IR); the input, --plugin passes and agent replies are tried as before. Each finished candidate is committed to
`<out>/search.sqlite` and the report is rewritten; validated improvements go to the memory.
Ctrl-C writes the report of what finished; `resume` continues a killed or interrupted search.
"""
from __future__ import annotations

import ast
import contextlib
import hashlib
import io
import json
import random
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from specir.errors import SpecirError

from . import report as reporting
from .memory import Memory
from .proposer import Proposer
from .space import Space
from .state import State


@dataclass
class Settings:
    spec: str
    target: str
    out: str
    workload: str | None = None
    prompts: str | None = None
    batch_size: int = 1
    budget: int = 20
    workers: int = 2
    ray: str | None = None
    agent: str | None = None
    agent_base_url: str | None = None
    agent_calls: int = 4
    memory: str | None = None
    plugins: list = field(default_factory=list)
    resume: bool = False
    max_new_tokens: int = 24
    guard_prompts: int = 2
    rounds: int = 3
    prompts_per_round: int = 2
    prompt_tokens: int = 64
    timeout: float = 600.0
    memory_limit_gb: float = 8.0
    seed: int = 0
    progress: bool = True
    sweep: list | None = None  # evaluate exactly these pass pipelines, in order (an exhaustive sweep)
    space: list | None = None  # search only these pass pipelines (a finite space; None: the registry's)


def _quiet():
    return contextlib.redirect_stderr(io.StringIO())


def ir_digest(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def pass_names(source: str) -> list[str]:
    """The `name = "..."` of every class in `source`, read with ast (the code is never run here)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    names = []
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            for stmt in node.body:
                if (isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "name" for t in stmt.targets)
                        and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str)):
                    names.append(stmt.value.value)
    return names


class Search:
    def __init__(self, settings: Settings):
        self.s = settings
        self.out = Path(settings.out)
        if self.out.exists() and not self.out.is_dir():
            raise SpecirError(f"--out {settings.out!r} is a file, not a folder", hint="give --out a folder name")
        self.out.mkdir(parents=True, exist_ok=True)
        self.notes: list[str] = []
        self.bar = None  # the progress bar while run() runs
        self._scored_now = 0  # candidates the cost model scored since the last proposal
        self._said_at = 0.0  # when the bar last said so
        self._scores: dict = {}  # spelling -> score (see score)
        self._allowed = None  # the IR digests of a finite `space`, or None

    # ------------------------------------------------------------------ set-up
    def prepare(self) -> None:
        from specir.calibration import calibration
        from specir.declared_target import read as read_declared
        from specir.load import load_pipeline
        from specir.targets import get_target, require_available
        s = self.s
        self.target = get_target(s.target)
        require_available(self.target)
        if s.space is not None:  # before the folder keeps these settings: a bad space never sticks to it
            from .space_file import check_pipeline
            for n, text in enumerate(s.space, 1):
                try:
                    check_pipeline(text, plugins=bool(s.plugins))
                except SpecirError as e:
                    raise SpecirError(f"space entry {n} `{text}`: {e.message}", hint=e.hint) from None
        self.state = State(self.out)
        settings = {k: v for k, v in asdict(s).items() if k not in ("progress", "resume", "out")}
        self.state.check_settings(settings, s.resume)
        with _quiet():
            self.pipeline = load_pipeline(s.spec)
        self.declared = read_declared(self.pipeline)
        if self.declared is None:
            raise SpecirError(f"{s.spec} declares no target", path=s.spec, hint="write it with specir init")
        self.device = "cuda:0" if self.target.kind == "gpu" else "cpu"
        self._prompts()
        self._baseline()
        self.calibration = calibration(self.target)
        self._profile()
        self.deployment = self._deployment()
        self.memory = Memory(s.memory)
        self.space = Space.from_registry(self._describe_plugins())
        from .sandbox import probe
        self.sandbox = probe() if (s.plugins or s.agent) else None
        if self.sandbox:
            self.notes += [f"sandbox: {n}" for n in self.sandbox.get("notes", [])]

    def _prompts(self) -> None:
        from specir.importers import resolve_source
        from specir.runtime.prompts import read_prompts_file, to_ids, workload_records
        s = self.s
        need = s.guard_prompts + s.rounds * s.prompts_per_round
        records = read_prompts_file(s.prompts) if s.prompts else workload_records(s.workload, None)
        target = self.pipeline.model(self.declared.model)
        ids = to_ids(records, str(resolve_source(self.declared.source)), target.graph.result_type.width)
        ids = [p[-s.prompt_tokens:] for p in ids if len(p) >= 4]
        if len(ids) < need:
            raise SpecirError(f"the search needs {need} prompts ({s.guard_prompts} to guard, {s.rounds} x "
                              f"{s.prompts_per_round} to time) and has {len(ids)}",
                              hint="give --prompts FILE.jsonl with more prompts, or lower --rounds")
        rng = random.Random(s.seed)
        rng.shuffle(ids)
        self.guard_set = ids[:s.guard_prompts]
        timing = ids[s.guard_prompts:need]
        self.rounds = [timing[r * s.prompts_per_round:(r + 1) * s.prompts_per_round] for r in range(s.rounds)]

    def _baseline(self) -> None:
        from specir.compiler import compile_pipeline
        self.baseline_build = self.out / "baseline" / "build"
        if not (self.baseline_build / "manifest.json").is_file():
            with _quiet():
                compile_pipeline(self.s.spec, self.target.name, self.baseline_build, "")

    def _profile(self) -> None:
        """The acceptance profile (and the AR step time the cost model's overhead is fitted to)."""
        from specir import acceptance_model
        from specir.prediction import draft_op
        from specir.runtime.baseline import ar_pipeline
        from specir.runtime.session import open_session
        from specir.step_time import fit_overhead
        path = self.out / "profile.json"
        if path.is_file():
            data = json.loads(path.read_text())
        else:
            with _quiet():
                session = open_session(str(self.baseline_build))
                from specir.runtime.session import make_engine
                engine = make_engine(ar_pipeline(session.pipeline), session.backend, session.device, session.build,
                                     weights=None)
                prompts = self.guard_set + [p for r in self.rounds for p in r]
                engine.generate(prompts[:1], 4)
                start = time.perf_counter()
                conts = [r.tokens for r in engine.generate(prompts, self.s.max_new_tokens)]
                seconds = time.perf_counter() - start
                op = draft_op(self.pipeline)
                drafter = self.pipeline.model(op.symbols[0]) if op is not None and op.symbols else None
                profile = acceptance_model.profile(drafter, prompts, conts)
                engine.close()
                del engine, session
                from specir.device_memory import release
                release()  # the workers' candidates and guards need this process's device memory
            data = {"profile": profile.as_dict(), "ar_step_seconds": seconds / max(sum(len(c) for c in conts), 1)}
            path.write_text(json.dumps(data))
        self.profile = acceptance_model.Profile.from_dict(data["profile"])
        self.profile.device = self.device if str(self.device).startswith("cuda") else "cpu"  # two-level mid ranks
        self.profile_data = data["profile"]
        self.ar_step = data["ar_step_seconds"]
        self.overhead_scale = fit_overhead(ar_pipeline(self.pipeline, stock=False), self.target, self.calibration,
                                           self.ar_step)

    def _deployment(self) -> dict:
        from specir.prediction import draft_op
        op = draft_op(self.pipeline)
        drafter = "ngram" if op is None or not op.symbols else str(self.pipeline.model(op.symbols[0]).attrs.get("source"))
        workload = self.s.workload or "all shipped workloads"
        if self.s.prompts:
            workload = "prompts:" + hashlib.sha256(Path(self.s.prompts).read_bytes()).hexdigest()[:16]
        return {"target_identity": self.declared.digest, "drafter": drafter, "workload": workload,
                "target": self.target.name, "batch_size": self.s.batch_size}

    def _describe_plugins(self) -> dict:
        """--plugin passes as data, from a sandboxed process (their code never runs here)."""
        if not self.s.plugins:
            return {}
        from .evaluate import _sandbox_parts, _stage
        plugins = [str(Path(p).resolve()) for p in self.s.plugins]
        for p in plugins:
            if not Path(p).is_file():
                raise SpecirError(f"plugin file {p!r} does not exist", path=p, hint="--plugin takes a .py file")
        folder = self.out / "plugins"
        folder.mkdir(exist_ok=True)
        job = {"timeout": min(self.s.timeout, 120), "memory": int(self.s.memory_limit_gb * 2**30), "device": self.device}
        limits, _, wrap = _sandbox_parts(job, folder)
        result = _stage(job, folder, {"kind": "describe", "plugins": plugins}, wrap, limits)
        if "passes" not in result:
            raise SpecirError(f"the --plugin files could not be loaded: {result.get('error') or result.get('killed')}",
                              hint="check them with specir opt SPEC --plugin FILE -p NAME")
        described = result["passes"]
        for name, d in described.items():
            # which file defines it: the first whose source names it
            d["origin"] = next((p for p in plugins if f'"{name}"' in Path(p).read_text()
                                or f"'{name}'" in Path(p).read_text()), plugins[0])
        return described

    # ------------------------------------------------------------------ candidates
    def score(self, steps):
        """(IR digest, predicted speedup, draft kind, prediction, IR text) of a candidate, or None when
        it is invalid or outside a finite `space` (compared by final IR, not by spelling)."""
        scored = self._score(steps)
        if scored and self._allowed is not None and scored[0] not in self._allowed \
                and not scored[0].startswith("pre:"):  # a --plugin pass is tried whatever the space
            return None
        return scored

    def _score(self, steps):
        key = Space.spell(steps)
        if key in self._scores:
            return self._scores[key]
        self._scored_now += 1
        if self.bar is not None:  # the proposer's scoring can take a while: say so (at most once a second)
            now = time.monotonic()
            refresh = now - self._said_at >= 1.0
            self._said_at = now if refresh else self._said_at
            self.bar.set_description(f"search (cost model scored {self._scored_now})", refresh=refresh)
        from specir.compiler import optimise
        from specir.ir.printer import print_pipeline
        from specir.prediction import draft_op, predict
        plugins = self.space.plugins_of(steps)
        builtin = tuple(st for st in steps if self.space.passes.get(st.name, None) is None
                        or self.space.passes[st.name].origin == "builtin")
        try:
            with _quiet():
                pipeline, _ = optimise(self.pipeline, Space.spell(builtin), target=self.target.name)
        except SpecirError:
            self._scores[key] = None
            return None
        text = print_pipeline(pipeline)
        digest = ir_digest(text) if not plugins else "pre:" + ir_digest(key + "|" + "|".join(plugins))
        pred = predict(pipeline, self.target, self.calibration, self.profile, self.overhead_scale)
        op = draft_op(pipeline)
        kind = "none" if op is None else op.name
        self._scores[key] = (digest, pred.speedup, kind, pred.as_dict(), text if not plugins else None)
        return self._scores[key]

    def _finite_space(self):
        """With a finite `space`: its candidates (the proposer's pool), and `_allowed` set to the IR
        digests that score() lets through (the space's valid pipelines and the input); else None."""
        self._allowed = None
        if self.s.space is None:
            return None
        pool = [self.space.parse(t) for t in self.s.space]
        valid = {d[0] for d in map(self._score, pool) if d}
        if not valid:
            raise SpecirError("no pipeline of the space compiles on this input",
                              hint="try one with specir opt SPEC -p PIPELINE to see why")
        invalid = [t or "(input)" for t, p in zip(self.s.space, pool) if self._score(p) is None]
        if invalid:
            self.notes.append(f"{len(invalid)} of the space's {len(pool)} pipelines do not compile on this input and "
                              f"are left out: {', '.join(f'`{t}`' for t in invalid[:5])}")
        self._allowed = valid | {d[0] for d in [self._score(())] if d}  # the input is always timed
        return pool

    def job(self, index: int, passes: str, plugins: list[str], origin: str, scored) -> dict:
        s = self.s
        drop = index % 3  # timing prompts vary per candidate: outputs cached by one candidate help no other
        rounds = [[p[drop:] if len(p) - drop >= 4 else p for p in r] for r in self.rounds]
        return {"index": index, "passes": passes, "plugins": plugins, "origin": origin,
                "folder": str(self.out / "candidates" / f"{index:04d}"), "spec": str(Path(s.spec).resolve()),
                "target": self.target.name, "baseline_build": str(self.baseline_build.resolve()),
                "guard_prompts": self.guard_set, "rounds": rounds, "max_new": s.max_new_tokens,
                "batch_size": s.batch_size, "timeout": s.timeout, "memory": int(s.memory_limit_gb * 2**30),
                "device": self.device, "reference_device": "cuda" if self.device.startswith("cuda") else "cpu",
                "declared": self.declared.as_dict(),
                "ir_digest": scored[0] if scored and not plugins else None,
                "key": scored[0] if scored else None,  # the proposer's key (IR digest, or a plugin candidate's)
                "predicted": scored[3] if scored and not plugins else None,
                "kind": scored[2] if scored else None,
                "known": sorted(self.taken) if plugins else [],
                "predict": bool(plugins), "calibration": self.calibration.as_dict(), "profile": self.profile_data,
                "overhead_scale": self.overhead_scale}

    def agent_candidate(self, n: int):
        """Ask the agent for a pass; returns (passes, plugins, note) or None with a note."""
        from specir.prediction import gaps, predict
        from . import agent
        best = self.best
        passes = best["passes"] if best else ""
        scored = self._score(self.space.parse(passes)) if passes is not None else None
        ir = scored[4] if scored and scored[4] else (self.out / "baseline" / "build" / "pipeline.spec").read_text()
        from specir.ir.parser import parse
        try:
            gap = gaps(predict(parse(ir, "<best>"), self.target, self.calibration, self.profile, self.overhead_scale))
        except Exception:  # noqa: BLE001
            gap = self.gap
        context = {"deployment": self.deployment, "best_passes": passes,
                   "best_speedup": best["measured"]["speedup"] if best else 1.0, "gap": gap, "ir": ir,
                   "nearest": self.memory.nearest(self.deployment, 3)}
        source, note = agent.ask(self.s.agent, self.s.agent_base_url, context)
        if source is None:
            return None, note
        path = agent.write(self.out, n, source)
        names = pass_names(source)
        plugins = list(best.get("plugins") or []) if best else []
        return (",".join(x for x in (passes, names[0] if names else "") if x), plugins + [str(path.resolve())],
                source if names else None), note

    # ------------------------------------------------------------------ the loop
    def run(self) -> dict:
        from .executors import make_executor
        s = self.s
        self._scores: dict = {}
        pool = self._finite_space()
        self.records = self.state.records()
        self.taken = {d for r in self.records for d in (r.get("ir_digest"), r.get("key")) if d}
        self.best = reporting.summarise(self.records)["best"]
        from specir.prediction import gaps, predict
        self.gap = gaps(predict(self.pipeline, self.target, self.calibration, self.profile, self.overhead_scale))
        # a pass offered with --plugin is tried on its own first, then the memory's nearest mechanisms
        seeds = [(self.space.step(name),) for name, info in self.space.passes.items() if info.origin != "builtin"]
        seeds += [self.space.parse(m["pipeline"]) for m in self.memory.nearest(self.deployment, 5)
                  if not m.get("pass_source") and self._known_passes(m["pipeline"])]
        proposer = Proposer(self.space, self.score, seeds, random.Random(s.seed + len(self.records)), pool)
        if s.sweep is not None:
            proposer = _Sweep(self, [self.space.parse(t) for t in s.sweep])
        counted = [r for r in self.records if r["status"] != "duplicate"]
        index = max((r["index"] for r in self.records), default=-1) + 1
        agent_calls = sum(1 for r in self.records if r["origin"] == "agent")
        executor = make_executor(s.workers, s.ray)
        inflight: dict = {}
        bar = self.bar = self._bar(len(counted))
        interrupted = False
        try:
            while True:
                while len(inflight) < s.workers and len(counted) + len(inflight) < s.budget:
                    job = None
                    if s.agent and agent_calls < s.agent_calls and self.records:  # after the input, the agent first
                        agent_calls += 1
                        cand, note = self.agent_candidate(agent_calls)
                        if cand is None:
                            self.notes.append(f"agent call {agent_calls}: {note}")
                        else:
                            passes, plugins, named = cand
                            job = self.job(index, passes, plugins, "agent", None)
                            if named is None:
                                rec = {**{k: job[k] for k in ("index", "passes", "plugins", "origin")},
                                       "status": "import failed", "error": "the reply defines no Pass subclass with a "
                                                                           "name", "verdict": None, "measured": None,
                                       "predicted": None, "ir_digest": None, "seconds": 0.0}
                                index += 1
                                self._finish(rec, counted, bar)
                                continue
                    if job is None:
                        self._scored_now = 0
                        steps = proposer.next(self.records, self.taken | self._inflight_digests(inflight))
                        if bar:
                            bar.set_description("search", refresh=False)
                        if steps is None:
                            break
                        scored = self.score(steps)
                        job = self.job(index, Space.spell(steps), self.space.plugins_of(steps), "proposer"
                                       if len(self.records) + len(inflight) else "input", scored)
                    inflight[executor.submit(job)] = job
                    index += 1
                if not inflight:
                    break
                done, _ = executor.wait(list(inflight))
                for handle in done:
                    job = inflight.pop(handle)
                    try:
                        rec = executor.result(handle)
                    except Exception as exc:  # noqa: BLE001 - a lost worker loses its candidate only
                        rec = {**{k: job[k] for k in ("index", "passes", "plugins", "origin")}, "status": "failed",
                               "error": f"the worker failed: {type(exc).__name__}: {exc}", "verdict": None,
                               "measured": None, "predicted": job.get("predicted"), "ir_digest": job.get("ir_digest"),
                               "seconds": None}
                    rec["kind"], rec["key"] = job.get("kind"), job.get("key")
                    self._finish(rec, counted, bar)
        except KeyboardInterrupt:
            interrupted = True
            executor.close(cancel=True)
            executor = None
        finally:
            if executor is not None:
                executor.close()
            if bar:
                bar.close()
                self.bar = None
        rep = self.write(interrupted)
        if interrupted:
            raise KeyboardInterrupt
        return rep

    def _known_passes(self, text: str) -> bool:
        try:
            return all(s.name in self.space.passes for s in self.space.parse(text))
        except SpecirError:
            return False

    def _inflight_digests(self, inflight) -> set:
        return {d for j in inflight.values() for d in (j.get("ir_digest"), j.get("key")) if d}

    def _finish(self, rec: dict, counted: list, bar) -> None:
        improved = rec["status"] == "validated" and (self.best is None or
                                                     rec["measured"]["speedup"] > self.best["measured"]["speedup"])
        rec["kept"] = bool(improved)
        self.taken |= {d for d in (rec.get("ir_digest"), rec.get("key")) if d}
        self.state.record(rec)
        self.records.append(rec)
        if rec["status"] != "duplicate":
            counted.append(rec)
        if improved:
            self.best = rec
            self._remember(rec)
        self.write(False)
        if bar:
            bar.update(1 if rec["status"] != "duplicate" else 0)
            if self.best:
                bar.set_postfix_str(f"best {self.best['measured']['speedup']:.3f}x "
                                    f"{self.best['passes'] or '(input)'}"[:70])

    def _ir_text(self, rec: dict) -> str | None:
        if not rec.get("plugins"):
            scored = self._score(self.space.parse(rec["passes"]))
            if scored and scored[4]:
                return scored[4]
        build = Path(rec["folder"]) / "build" / "pipeline.spec" if rec.get("folder") else None
        return build.read_text() if build and build.is_file() else None

    def _remember(self, rec: dict) -> None:
        text = self._ir_text(rec) or ""
        source = None
        if rec["origin"] == "agent" and rec.get("plugins"):
            source = Path(rec["plugins"][0]).read_text()
        m = rec["measured"]
        self.memory.add(self.deployment, {"pipeline": rec["passes"], "pipeline_text": text,
                                          "ir_digest": rec["ir_digest"], "pass_source": source,
                                          "speedup": m["speedup"], "tau": m["tau"], "tokens_per_s": m["tokens_per_s"],
                                          "verdict": rec["verdict"], "search": str(self.out.resolve())})

    def write(self, interrupted: bool) -> dict:
        meta = {"spec": self.s.spec, "target": self.target.name, "budget": self.s.budget, "workers": self.s.workers,
                "ray": self.s.ray, "agent": self.s.agent, "deployment": self.deployment,
                "memory": str(self.memory.path), "gap": self.gap, "calibration": self.calibration.as_dict(),
                "overhead_scale": self.overhead_scale, "acceptance_by_depth": self.profile.acceptance_by_depth(),
                "acceptance_by_rank": self.profile.acceptance_by_rank(), "sandbox": self.sandbox,
                "notes": self.notes + ["CPU timing on a shared machine is noisy: each speedup is the median of "
                                       f"{self.s.rounds} interleaved rounds against AR" if self.device == "cpu" else ""],
                "prompts": {"guard": len(self.guard_set), "rounds": len(self.rounds),
                            "per_round": self.s.prompts_per_round, "max_new_tokens": self.s.max_new_tokens}}
        best = self.best
        return reporting.write(self.out, meta, self.records, self._ir_text(best) if best else None, interrupted)

    def _bar(self, initial: int):
        if not self.s.progress:
            return None
        try:
            from tqdm import tqdm
        except ImportError:
            return None
        return tqdm(total=self.s.budget, initial=initial, desc="search", unit="cand", file=sys.stderr,
                    dynamic_ncols=True)


class _Sweep:
    """Proposes exactly the given candidates, in order (skipping invalid and repeated ones)."""

    def __init__(self, search: Search, candidates):
        self.search, self.left = search, list(candidates)

    def next(self, history, taken):
        while self.left:
            steps = self.left.pop(0)
            scored = self.search.score(steps)
            if scored and scored[0] not in taken:
                return steps
        return None


def search(settings: Settings) -> dict:
    s = Search(settings)
    s.prepare()
    return s.run()
