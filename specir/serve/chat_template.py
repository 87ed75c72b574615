"""Chat messages -> prompt token ids.

Contract: `ChatTemplate(tokenizer)`; `render(messages) -> str`, `encode(messages) -> [ids]`.
Where the checkpoint's tokenizer config has a chat template (`chat_template` in
tokenizer_config.json, or chat_template.jinja), it is applied with the generation prompt added, and
the text is encoded without adding special tokens again (the template writes them), as vLLM does.
Otherwise the fallback is a plain transcript, stated here and reported by /v1/models:

    System: <content>

    User: <content>

    Assistant:

(one "Role: content" paragraph per message, then "Assistant:"), encoded like a completion prompt.
A template that rejects the messages (e.g. roles that do not alternate) is a 400 naming its reason.
"""
from __future__ import annotations

from .protocol import bad

FALLBACK = "transcript"  # the fallback's name, as /v1/models reports it


class ChatTemplate:
    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        self.source = "checkpoint" if getattr(tokenizer, "chat_template", None) else FALLBACK

    def render(self, messages: list[dict]) -> str:
        if self.source == FALLBACK:
            return render_fallback(messages)
        try:
            return self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        except Exception as exc:  # jinja's TemplateError, raise_exception(...) in the template, ...
            raise bad(f"the model's chat template rejected the messages: {exc}", "messages") from None

    def encode(self, messages: list[dict]) -> list[int]:
        text = self.render(messages)
        return list(self.tokenizer(text, add_special_tokens=self.source == FALLBACK)["input_ids"])


def render_fallback(messages: list[dict]) -> str:
    parts = [f"{m['role'].capitalize()}: {m['content']}" for m in messages]
    return "\n\n".join(parts + ["Assistant:"])
