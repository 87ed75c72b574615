"""A served pipeline: the Service (what the routes read) and the Server (socket, event loop, engine loop).

Contract: `Service(session, engine, max_batch_size=8, max_queue=64, max_model_len=None)` holds the
model name (the pipeline's), the target's tokenizer and chat template, the vocabulary, the context
(`max_model_len`: prompt + completion tokens, at most the target's context; default the smaller of
it and 4096, which sizes every slot's cache rows), the metrics and the Scheduler.
`Server(service, host, port)`: `start()` binds the socket (port 0: a free one; `port` then tells
which), decodes a warm-up request and starts serving on a background thread; `stop()` ends it
(requests still running get a 503) and can be called more than once; `serve_forever()` starts and
blocks until Ctrl-C or SIGTERM. A socket that cannot be bound is a SpecirError.
"""
from __future__ import annotations

import asyncio
import signal
import socket
import threading

from ..errors import SpecirError
from ..runtime.baseline import target_name
from ..runtime.tokenizer import load_tokenizer
from .chat_template import ChatTemplate
from .metrics import Metrics
from .protocol import bad
from .scheduler import Scheduler

DEFAULT_MAX_MODEL_LEN = 4096


class NoTokenizer:
    """Stands in for a checkpoint without a tokenizer: token ids in, no text out."""

    def decode(self, ids, skip_special_tokens=True) -> str:
        return ""


class Service:
    def __init__(self, session, engine, *, max_batch_size: int = 8, max_queue: int = 64,
                 max_model_len: int | None = None, model_name: str | None = None):
        if max_batch_size < 1:
            raise SpecirError(f"--max-batch-size must be at least 1, got {max_batch_size}", hint="e.g. --max-batch-size 8")
        if max_queue < 0:
            raise SpecirError(f"--max-queue must be 0 or more, got {max_queue}", hint="e.g. --max-queue 64")
        context = engine.max_position
        if max_model_len is None:
            max_model_len = min(context, DEFAULT_MAX_MODEL_LEN)
        if not 2 <= max_model_len <= context:
            raise SpecirError(f"--max-model-len must be from 2 to the target's context of {context}, got {max_model_len}",
                              hint=f"e.g. --max-model-len {min(context, DEFAULT_MAX_MODEL_LEN)}")
        self.session, self.engine = session, engine
        self.model = model_name or session.pipeline.name
        self.context = max_model_len
        target = session.pipeline.model(target_name(session.pipeline))
        self.vocab = target.graph.result_type.width
        self.target_source = str(target.attrs.get("source", ""))
        try:
            self.tokenizer = load_tokenizer(str(session.target_folder()))
            self.chat = ChatTemplate(self.tokenizer)
            self.no_tokenizer = None
        except SpecirError as exc:
            self.tokenizer, self.chat, self.no_tokenizer = NoTokenizer(), None, exc.message
        self.metrics = Metrics(max(engine.info.emit_width - 1, 0))
        self.scheduler = Scheduler(engine, max_batch_size, engine.rows_needed(max_model_len, 0), max_queue,
                                   self.metrics)

    def tokenize(self, text: str) -> list[int]:
        if self.no_tokenizer:
            raise bad(f"{self.no_tokenizer}: send the prompt as token ids", "prompt")
        return list(self.tokenizer(text)["input_ids"])

    def chat_ids(self, messages: list[dict]) -> list[int]:
        if self.chat is None:
            raise bad(f"chat needs a tokenizer ({self.no_tokenizer}); use /v1/completions with token ids", "messages")
        return self.chat.encode(messages)

    def model_card(self) -> dict:
        return {"id": self.model, "object": "model", "created": 0, "owned_by": "specir",
                "max_model_len": self.context, "target": self.target_source,
                "chat_template": self.chat.source if self.chat else None,
                "max_batch_size": self.scheduler.capacity, "max_queue": self.scheduler.max_queue}


class Server:
    def __init__(self, service: Service, host: str = "127.0.0.1", port: int = 8000):
        self.service, self.host, self.port = service, host, port
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._failed: BaseException | None = None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def start(self) -> "Server":
        sock = self._bind()
        try:
            self.service.scheduler.start()
        except BaseException:
            sock.close()
            raise
        ready = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(sock, ready), name="specir-http", daemon=True)
        self._thread.start()
        ready.wait()
        if self._failed is not None:
            self.service.scheduler.stop()
            raise SpecirError(f"the HTTP server did not start: {self._failed}", hint="rerun with --debug")
        return self

    def _bind(self) -> socket.socket:
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        try:
            sock = socket.create_server((self.host, self.port), family=family, backlog=1024)
        except OSError as exc:
            raise SpecirError(f"cannot listen on {self.host}:{self.port}: {exc.strerror or exc}",
                              hint="choose another --port (0 picks a free one), or stop what listens there") from None
        self.port = sock.getsockname()[1]
        return sock

    def _run(self, sock: socket.socket, ready: threading.Event) -> None:
        from aiohttp import web

        from .app import build_app
        loop = self._loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)

        async def main():
            self._stop = asyncio.Event()
            runner = web.AppRunner(build_app(self.service), handler_cancellation=True, access_log=None,
                                   shutdown_timeout=5.0)
            await runner.setup()
            try:
                await web.SockSite(runner, sock).start()
            except BaseException as exc:
                self._failed = exc
                ready.set()
                await runner.cleanup()
                return
            ready.set()
            await self._stop.wait()
            await runner.cleanup()

        try:
            loop.run_until_complete(main())
        except BaseException as exc:  # noqa: BLE001 - reported by start()
            self._failed = exc
            ready.set()
        finally:
            loop.close()

    def stop(self) -> None:
        self.service.scheduler.stop()  # running and waiting requests get their 503 first
        if self._thread is not None and self._thread.is_alive() and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
            self._thread.join(30)

    def serve_forever(self, on_ready=None) -> None:
        self.start()
        done = threading.Event()
        previous = signal.signal(signal.SIGTERM, lambda *_: done.set())
        try:
            if on_ready:
                on_ready(self)
            while not done.wait(0.5):
                if not self._thread.is_alive():
                    break
        except KeyboardInterrupt:
            pass
        finally:
            signal.signal(signal.SIGTERM, previous)
            self.stop()

