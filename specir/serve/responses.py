"""The JSON shapes of OpenAI responses and stream chunks (text_completion, chat.completion[.chunk]).

Contract: pure functions of what was generated; `Choice` is one choice's state while it is produced
(text sent, token ids, finish reason). OpenAI's finish reasons: "stop" (an end-of-sequence token,
a stop id or a stop string) and "length" (max_tokens or the context). With `return_token_ids`
(as in vLLM) each choice also carries `token_ids` and `prompt_token_ids`.
"""
from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field

FINISH = {"length": "length", "eos": "stop", "stop": "stop"}


@dataclass
class Choice:
    index: int
    prompt: list[int]
    stream: object  # TextStream
    text: str = ""
    tokens: list[int] = field(default_factory=list)
    finish_reason: str | None = None
    error: object = None

    @property
    def done(self) -> bool:
        return self.finish_reason is not None or self.error is not None


class Shapes:
    def __init__(self, chat: bool, model: str, return_token_ids: bool):
        self.chat, self.model, self.ids = chat, model, return_token_ids
        self.id = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex
        self.created = int(time.time())

    def _head(self, obj: str) -> dict:
        return {"id": self.id, "object": obj, "created": self.created, "model": self.model}

    def response(self, choices: list[Choice], prompt_tokens: int) -> dict:
        out = []
        for c in choices:
            if self.chat:
                item = {"index": c.index, "message": {"role": "assistant", "content": c.text},
                        "logprobs": None, "finish_reason": c.finish_reason}
            else:
                item = {"index": c.index, "text": c.text, "logprobs": None, "finish_reason": c.finish_reason}
            if self.ids:
                item |= {"token_ids": c.tokens, "prompt_token_ids": c.prompt}
            out.append(item)
        return {**self._head("chat.completion" if self.chat else "text_completion"), "choices": out,
                "usage": usage(prompt_tokens, sum(len(c.tokens) for c in choices))}

    def chunk(self, choice: Choice, text: str, tokens: list[int], finish_reason: str | None,
              first: bool = False) -> dict:
        """One choice's piece; `first`: the choice's first chunk (chat: the assistant role)."""
        if self.chat:
            delta = {"role": "assistant", "content": text} if first else ({"content": text} if text or tokens else {})
            item = {"index": choice.index, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
        else:
            item = {"index": choice.index, "text": text, "logprobs": None, "finish_reason": finish_reason}
        if self.ids:
            item["token_ids"] = tokens
            if first:
                item["prompt_token_ids"] = choice.prompt
        return {**self._head("chat.completion.chunk" if self.chat else "text_completion"), "choices": [item]}

    def usage_chunk(self, choices: list[Choice], prompt_tokens: int) -> dict:
        return {**self._head("chat.completion.chunk" if self.chat else "text_completion"), "choices": [],
                "usage": usage(prompt_tokens, sum(len(c.tokens) for c in choices))}


def usage(prompt_tokens: int, completion_tokens: int) -> dict:
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens}
