"""OpenAI request bodies: parsing and validation, and the OpenAI-style error.

Contract: `parse_json(raw)` -> dict; `parse_completion(body, model)` -> CompletionRequest;
`parse_chat(body, model)` -> ChatRequest. Every bad field raises `ApiError` (status 4xx, one message
naming the field in `param`); nothing here touches the tokenizer or the engine (the app checks
token ids and the context with `check_prompt`). Parameters specir does not implement (logprobs,
top_p != 1, penalties, tools, ...) are refused by name instead of being ignored: an answer computed
without them would be silently different from what was asked.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

DEFAULT_COMPLETION_MAX_TOKENS = 16  # OpenAI's default for /v1/completions
DEFAULT_TEMPERATURE = 1.0  # OpenAI's default; 0 is greedy
MAX_N = 64


@dataclass
class ApiError(Exception):
    """An error answered as `{"error": {"message", "type", "param", "code"}}` with HTTP `status`."""

    status: int
    message: str
    type: str = "invalid_request_error"
    param: str | None = None
    code: str | None = None

    def __post_init__(self):
        super().__init__(self.message)

    def body(self) -> dict:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}


def bad(message: str, param: str | None = None, code: str | None = None) -> ApiError:
    return ApiError(400, message, "invalid_request_error", param, code)


@dataclass
class Sampling:
    """What every choice of a request is generated with. `max_tokens` None: up to the context."""

    max_tokens: int | None
    temperature: float
    seed: int | None
    stop: tuple[str, ...] = ()
    stop_ids: frozenset = frozenset()
    n: int = 1
    stream: bool = False
    include_usage: bool = False
    return_token_ids: bool = False


@dataclass
class CompletionRequest:
    prompts: list  # each a str or a list of token ids
    sampling: Sampling


@dataclass
class ChatRequest:
    messages: list[dict] = field(default_factory=list)  # {"role", "content": str}
    sampling: Sampling = None


def parse_json(raw: bytes) -> dict:
    try:
        body = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise bad(f"the request body is not valid JSON: {exc}", code="invalid_json") from None
    if not isinstance(body, dict):
        raise bad(f"the request body must be a JSON object, got {type(body).__name__}", code="invalid_json")
    return body


def check_model(body: dict, served: str) -> None:
    model = body.get("model")
    if model is None:
        return  # one model is served: leaving it out means that one
    if not isinstance(model, str):
        raise bad(f"model must be a string, got {json.dumps(model)}", "model")
    if model != served:
        raise ApiError(404, f"The model `{model}` does not exist. This server serves `{served}` (see /v1/models).",
                       "invalid_request_error", "model", "model_not_found")


def parse_completion(body: dict, served: str) -> CompletionRequest:
    check_model(body, served)
    _refuse_unsupported(body, COMPLETION_UNSUPPORTED)
    if "prompt" not in body or body["prompt"] is None:
        raise bad("prompt is required", "prompt")
    return CompletionRequest(_prompts(body["prompt"]), _sampling(body, DEFAULT_COMPLETION_MAX_TOKENS, "max_tokens"))


def parse_chat(body: dict, served: str) -> ChatRequest:
    check_model(body, served)
    _refuse_unsupported(body, CHAT_UNSUPPORTED)
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise bad("messages must be a non-empty list of {role, content} objects", "messages")
    parsed = [_message(m, i) for i, m in enumerate(messages)]
    key = "max_completion_tokens" if body.get("max_completion_tokens") is not None else "max_tokens"
    return ChatRequest(parsed, _sampling(body, None, key))


# ---------------------------------------------------------------------------- fields
ROLES = ("system", "developer", "user", "assistant", "tool")


def _message(m, i: int) -> dict:
    where = f"messages[{i}]"
    if not isinstance(m, dict):
        raise bad(f"{where} must be an object with role and content", where)
    role = m.get("role")
    if role not in ROLES:
        raise bad(f"{where}.role must be one of {', '.join(ROLES)}, got {json.dumps(role)}", f"{where}.role")
    content = m.get("content")
    if content is None and role == "assistant":
        content = ""
    if isinstance(content, list):  # content parts: only text is understood
        texts = []
        for j, part in enumerate(content):
            if not isinstance(part, dict) or part.get("type") != "text" or not isinstance(part.get("text"), str):
                raise bad(f"{where}.content[{j}] must be a text part ({{\"type\": \"text\", \"text\": ...}}); "
                          f"this model reads text only", f"{where}.content")
            texts.append(part["text"])
        content = "".join(texts)
    if not isinstance(content, str):
        raise bad(f"{where}.content must be a string or a list of text parts", f"{where}.content")
    out = {"role": role, "content": content}
    if isinstance(m.get("name"), str):
        out["name"] = m["name"]
    return out


def _prompts(prompt) -> list:
    if isinstance(prompt, str):
        return [prompt]
    if isinstance(prompt, list) and prompt:
        if all(_is_int(t) for t in prompt):
            return [list(prompt)]
        if all(isinstance(p, str) for p in prompt):
            return list(prompt)
        if all(isinstance(p, list) and p and all(_is_int(t) for t in p) for p in prompt):
            return [list(p) for p in prompt]
    raise bad("prompt must be a string, a list of strings, a list of token ids or a list of lists of token ids "
              "(none empty)", "prompt")


def _sampling(body: dict, default_max: int | None, max_key: str) -> Sampling:
    max_tokens = body.get(max_key)
    if max_tokens is None:
        max_tokens = default_max
    elif not _is_int(max_tokens):
        raise bad(f"{max_key} must be an integer, got {json.dumps(max_tokens)}", max_key)
    elif max_tokens < 1:
        raise bad(f"{max_key} must be at least 1, got {max_tokens}", max_key)
    temperature = body.get("temperature")
    if temperature is None:
        temperature = DEFAULT_TEMPERATURE
    elif isinstance(temperature, bool) or not isinstance(temperature, (int, float)):
        raise bad(f"temperature must be a number, got {json.dumps(temperature)}", "temperature")
    elif not math.isfinite(temperature) or temperature < 0:
        raise bad(f"temperature must be a finite number >= 0 (0 = greedy), got {temperature}", "temperature")
    seed = body.get("seed")
    if seed is not None and not _is_int(seed):
        raise bad(f"seed must be an integer, got {json.dumps(seed)}", "seed")
    n = body.get("n")
    if n is None:
        n = 1
    elif not _is_int(n) or not 1 <= n <= MAX_N:
        raise bad(f"n must be an integer from 1 to {MAX_N}, got {json.dumps(n)}", "n")
    stop, stop_ids = _stop(body.get("stop"))
    extra = body.get("stop_token_ids")
    if extra is not None:
        if not isinstance(extra, list) or not all(_is_int(t) and t >= 0 for t in extra):
            raise bad("stop_token_ids must be a list of token ids", "stop_token_ids")
        stop_ids |= frozenset(extra)
    stream = body.get("stream", False)
    if stream is None:
        stream = False
    if not isinstance(stream, bool):
        raise bad(f"stream must be true or false, got {json.dumps(stream)}", "stream")
    options = body.get("stream_options") or {}
    if not isinstance(options, dict):
        raise bad("stream_options must be an object", "stream_options")
    include_usage = bool(options.get("include_usage", False))
    return_ids = body.get("return_token_ids", False)
    if not isinstance(return_ids, bool):
        raise bad("return_token_ids must be true or false", "return_token_ids")
    return Sampling(max_tokens, float(temperature), seed, stop, stop_ids, n, stream, include_usage, return_ids)


def _stop(stop) -> tuple[tuple[str, ...], frozenset]:
    """OpenAI's `stop`: a string or a list; specir also takes token ids in the list."""
    if stop is None:
        return (), frozenset()
    items = [stop] if isinstance(stop, (str, int)) and not isinstance(stop, bool) else stop
    if not isinstance(items, list):
        raise bad("stop must be a string, or a list of strings and token ids", "stop")
    texts, ids = [], set()
    for s in items:
        if isinstance(s, str) and s:
            texts.append(s)
        elif _is_int(s) and s >= 0:
            ids.add(s)
        else:
            raise bad(f"stop entries must be non-empty strings or token ids, got {json.dumps(s)}", "stop")
    return tuple(dict.fromkeys(texts)), frozenset(ids)


def _is_int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


# Parameters that would change the answer and that specir does not implement: refused unless they ask
# for the default. (field -> the values that mean "default")
_COMMON_UNSUPPORTED = {
    "top_p": (None, 1, 1.0), "frequency_penalty": (None, 0, 0.0), "presence_penalty": (None, 0, 0.0),
    "logit_bias": (None, {}), "top_k": (None, -1, 0), "min_p": (None, 0, 0.0),
    "repetition_penalty": (None, 1, 1.0),
}
COMPLETION_UNSUPPORTED = {**_COMMON_UNSUPPORTED, "logprobs": (None, 0), "echo": (None, False),
                          "best_of": (None, 1), "suffix": (None, "")}
CHAT_UNSUPPORTED = {**_COMMON_UNSUPPORTED, "logprobs": (None, False), "top_logprobs": (None, 0),
                    "tools": (None, []), "tool_choice": (None, "none", "auto"), "functions": (None, []),
                    "function_call": (None, "none", "auto"), "response_format": (None, {"type": "text"}),
                    "audio": (None,), "modalities": (None, ["text"])}


def _refuse_unsupported(body: dict, table: dict) -> None:
    for key, defaults in table.items():
        if key in body and not any(body[key] == d for d in defaults):
            raise bad(f"{key}={json.dumps(body[key])} is not supported by specir serve (leave it out, or use "
                      f"its default {json.dumps(defaults[1]) if len(defaults) > 1 else 'null'})", key,
                      "unsupported_parameter")


def check_prompt(ids: list[int], max_tokens: int | None, context: int, vocab: int, param: str = "prompt") -> int:
    """The tokens to generate for this prompt (max_tokens, or up to the context when None); raises
    ApiError when the prompt is empty, holds an id outside the vocabulary, or does not fit."""
    if not ids:
        raise bad("the prompt is empty: give at least one token", param)
    wrong = next((t for t in ids if not 0 <= t < vocab), None)
    if wrong is not None:
        raise bad(f"token id {wrong} is outside the model's vocabulary (0 to {vocab - 1})", param)
    if len(ids) >= context:
        raise bad(f"This model's maximum context length is {context} tokens. However, your prompt has {len(ids)} "
                  f"tokens, which leaves no room for a completion. Please shorten the prompt.", param,
                  "context_length_exceeded")
    if max_tokens is None:
        return context - len(ids)
    if len(ids) + max_tokens > context:
        raise bad(f"This model's maximum context length is {context} tokens. However, you requested "
                  f"{len(ids) + max_tokens} tokens ({len(ids)} in the prompt, {max_tokens} for the completion). "
                  f"Please reduce the length of the prompt or max_tokens.", "max_tokens", "context_length_exceeded")
    return max_tokens
