"""The HTTP routes (aiohttp): OpenAI's /v1/completions, /v1/chat/completions and /v1/models, plus
/health and /metrics.

Contract: `build_app(service)` -> aiohttp Application, `service` a `server.Service` (model name,
tokenizer, chat template, scheduler, metrics, context, vocabulary). A generation request is parsed
and checked (protocol.py), tokenized, submitted to the scheduler as one job per choice, then
answered as one JSON object or as server-sent events (`data: {chunk}` lines, then `data: [DONE]`).
Every error is `{"error": {...}}` with its status: 4xx for the request's fault, 429 when the queue
is full, 500 when the engine failed on it (the server goes on), 503 while shutting down. A stream
waits for its first event before answering, so a request that fails before any token still gets
its status; later errors arrive as a `data: {"error": ...}` event. When the client goes away
(aiohttp cancels the handler) or a stop string ends a choice, its job is cancelled at once and its
slot freed.
"""
from __future__ import annotations

import asyncio
import json
import sys
import time
import traceback

from aiohttp import web

from . import protocol
from .metrics import CONTENT_TYPE
from .protocol import ApiError
from .responses import FINISH, Choice, Shapes
from .scheduler import Job, choose_seed
from .text_stream import TextStream

MAX_BODY = 64 * 2**20
SERVICE = web.AppKey("service", object)


def build_app(service) -> web.Application:
    app = web.Application(middlewares=[_errors(service)], client_max_size=MAX_BODY)
    app[SERVICE] = service
    app.router.add_post("/v1/completions", completions)
    app.router.add_post("/v1/chat/completions", chat_completions)
    app.router.add_get("/v1/models", models)
    app.router.add_get("/v1/models/{model}", model)
    app.router.add_get("/health", health)
    app.router.add_get("/metrics", metrics)
    return app


def error_response(err: ApiError) -> web.Response:
    return web.json_response(err.body(), status=err.status)


def _errors(service):
    @web.middleware
    async def middleware(request, handler):
        route = request.match_info.route.resource
        path = route.canonical if route is not None else "other"
        try:
            response = await handler(request)
        except ApiError as err:
            response = error_response(err)
        except web.HTTPException as exc:
            if exc.status < 400:
                raise
            kind = "invalid_request_error" if exc.status < 500 else "server_error"
            message = {404: f"no route {request.method} {request.path} (see /v1/models, /v1/completions, "
                            f"/v1/chat/completions, /health, /metrics)",
                       405: f"{request.method} is not allowed on {request.path}",
                       413: f"the request body is larger than {MAX_BODY // 2**20} MiB"}.get(exc.status, exc.reason)
            response = error_response(ApiError(exc.status, message, kind))
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a bug in a handler: answered, logged, and the server goes on
            traceback.print_exc(file=sys.stderr)
            response = error_response(ApiError(500, f"internal error: {type(exc).__name__}: {exc}", "server_error"))
        service.metrics.response(path, response.status)
        return response
    return middleware


# ---------------------------------------------------------------------------- routes
async def completions(request: web.Request):
    service = request.app[SERVICE]
    body = protocol.parse_json(await request.read())
    req = protocol.parse_completion(body, service.model)
    prompts = [service.tokenize(p) if isinstance(p, str) else p for p in req.prompts]
    param = "prompt"
    budgets = [protocol.check_prompt(ids, req.sampling.max_tokens, service.context, service.vocab, param)
               for ids in prompts]
    return await generate(request, service, prompts, budgets, req.sampling, chat=False)


async def chat_completions(request: web.Request):
    service = request.app[SERVICE]
    body = protocol.parse_json(await request.read())
    req = protocol.parse_chat(body, service.model)
    ids = service.chat_ids(req.messages)
    budget = protocol.check_prompt(ids, req.sampling.max_tokens, service.context, service.vocab, "messages")
    return await generate(request, service, [ids], [budget], req.sampling, chat=True)


async def models(request: web.Request):
    service = request.app[SERVICE]
    return web.json_response({"object": "list", "data": [service.model_card()]})


async def model(request: web.Request):
    service = request.app[SERVICE]
    name = request.match_info["model"]
    if name != service.model:
        raise ApiError(404, f"The model `{name}` does not exist. This server serves `{service.model}`.",
                       "invalid_request_error", "model", "model_not_found")
    return web.json_response(service.model_card())


async def health(request: web.Request):
    service = request.app[SERVICE]
    if service.scheduler.alive():
        return web.json_response({"status": "ok"})
    return web.json_response({"status": "unavailable", "reason": "the engine loop is not running"}, status=503)


async def metrics(request: web.Request):
    service = request.app[SERVICE]
    text = service.metrics.render(service.scheduler.gauges())
    return web.Response(body=text.encode(), headers={"Content-Type": CONTENT_TYPE})


# ---------------------------------------------------------------------------- generation
async def generate(request: web.Request, service, prompts: list[list[int]], budgets: list[int],
                   sampling: protocol.Sampling, *, chat: bool):
    loop = asyncio.get_running_loop()
    events: asyncio.Queue = asyncio.Queue()
    jobs, choices = [], []
    for p, (ids, budget) in enumerate(zip(prompts, budgets)):
        for k in range(sampling.n):
            index = p * sampling.n + k
            sink = _sink(loop, events, index)
            jobs.append(Job(list(ids), budget, sampling.temperature, choose_seed(sampling.seed, index),
                            sampling.stop_ids, sink))
            choices.append(Choice(index, list(ids), TextStream(service.tokenizer, sampling.stop)))
    shapes = Shapes(chat, service.model, sampling.return_token_ids)
    prompt_tokens = sum(len(ids) for ids in prompts)
    service.scheduler.submit(jobs)
    try:
        if sampling.stream:
            return await _stream(request, service, jobs, choices, events, shapes, prompt_tokens, sampling)
        while not all(c.done for c in choices):
            index, event = await events.get()
            _apply(service, jobs[index], choices[index], event)
        failed = next((c.error for c in choices if c.error is not None), None)
        if failed is not None:
            raise failed
        return web.json_response(shapes.response(choices, prompt_tokens))
    finally:
        for job in jobs:  # a no-op for finished jobs; frees the slot of any other
            service.scheduler.cancel(job)


def _sink(loop, events: asyncio.Queue, index: int):
    """What the scheduler thread calls with a choice's events: hands them to this request's handler."""
    def put(event) -> None:
        if not loop.is_closed():
            loop.call_soon_threadsafe(events.put_nowait, (index, event))
    return put


def _apply(service, job: Job, choice: Choice, event) -> tuple[str, list[int]]:
    """Take one scheduler event into a choice: (text now safe to send, token ids of the event)."""
    if choice.done:
        return "", []
    if event.error is not None:
        choice.error = event.error
        return "", []
    tokens = event.tokens
    choice.tokens += tokens
    # the end-of-sequence or stop id that ended the choice is not part of its text
    shown = tokens[:-1] if event.finish_reason in ("eos", "stop") and tokens else tokens
    text = choice.stream.push(shown)
    if choice.stream.stopped:
        choice.finish_reason = "stop"
        service.scheduler.cancel(job, "stop")
    elif event.finish_reason is not None:
        if event.finish_reason not in FINISH:  # cancelled under us: the server is stopping
            choice.error = ApiError(503, "the server is shutting down", "server_error", None, "shutting_down")
            return "", tokens
        text += choice.stream.finish()
        choice.finish_reason = FINISH[event.finish_reason]
    choice.text += text
    return text, tokens


async def _stream(request, service, jobs, choices, events, shapes, prompt_tokens, sampling):
    first = await events.get()  # answer a request that fails before any token with its status
    if first[1].error is not None and len(choices) == 1:
        choices[0].error = first[1].error
        raise first[1].error
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache",
                                           "X-Accel-Buffering": "no"})
    await response.prepare(request)
    started = [False] * len(choices)

    async def send(obj) -> None:
        await response.write(b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n")

    try:
        pending = [first]
        while True:
            for index, event in pending:
                choice = choices[index]
                was_done = choice.done
                text, tokens = _apply(service, jobs[index], choice, event)
                if choice.error is not None and not was_done:
                    await send(choice.error.body())
                    continue
                ids = tokens if sampling.return_token_ids else []
                if was_done or not (text or ids or choice.finish_reason or not started[index]):
                    continue
                if shapes.chat and not started[index]:  # the role first, in a chunk of its own
                    await send(shapes.chunk(choice, "", [], None, first=True))
                    started[index] = True
                await send(shapes.chunk(choice, text, ids, choice.finish_reason, first=not started[index]))
                started[index] = True
            if all(c.done for c in choices):
                break
            pending = [await events.get()]
        if sampling.include_usage:
            await send(shapes.usage_chunk(choices, prompt_tokens))
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
    except (ConnectionResetError, ConnectionError):
        pass  # the client left: the caller's finally cancels what still runs
    return response
