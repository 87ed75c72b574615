"""Generated token ids -> text, incrementally, with stop strings.

Contract: `TextStream(tokenizer, stop)`; `push(ids) -> str` takes a step's tokens and returns the
text that is now safe to send; `finish() -> str` returns the rest. Text is decoded the way
`specir run` decodes (skip_special_tokens) over a window that starts a few tokens back, so a
character split over tokens (an incomplete UTF-8 sequence, shown as U+FFFD) is held until it is
whole, and the concatenated pieces equal the decode of all the ids. With stop strings, the text is
cut before the first occurrence of any of them (`stopped` is then True; later pushes return
nothing), and a tail that could be the start of a stop string is held back until it is decided.
"""
from __future__ import annotations


class TextStream:
    def __init__(self, tokenizer, stop: tuple[str, ...] = ()):
        self.tokenizer, self.stop = tokenizer, tuple(stop)
        self.ids: list[int] = []
        self.text = ""  # decoded so far (cut at a stop string)
        self.sent = 0  # characters of `text` returned
        self.stopped = False
        self._prefix = self._read = 0  # decode window: ids[_prefix:_read] were decoded into text

    def _decode(self, ids) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=True)

    def push(self, ids: list[int]) -> str:
        if self.stopped:
            return ""
        self.ids += ids
        before = self._decode(self.ids[self._prefix:self._read])
        now = self._decode(self.ids[self._prefix:])
        if len(now) > len(before) and not now.endswith("\ufffd"):
            self._grow(now[len(before):])
            self._prefix, self._read = self._read, len(self.ids)
        return self._take(final=False)

    def finish(self) -> str:
        if not self.stopped and self._read < len(self.ids):
            before = self._decode(self.ids[self._prefix:self._read])
            now = self._decode(self.ids[self._prefix:])
            self._grow(now[len(before):])
            self._read = len(self.ids)
        return self._take(final=True)

    def _grow(self, piece: str) -> None:
        start = max(0, len(self.text) - max((len(s) for s in self.stop), default=0) + 1)
        self.text += piece
        hits = [i for i in (self.text.find(s, start) for s in self.stop) if i >= 0]
        if hits:
            self.text, self.stopped = self.text[:min(hits)], True

    def _take(self, final: bool) -> str:
        end = len(self.text) if final or self.stopped else len(self.text) - self._held()
        piece = self.text[self.sent:end] if end > self.sent else ""
        self.sent = max(self.sent, end)
        return piece

    def _held(self) -> int:
        """Length of the longest tail of the text that begins some stop string."""
        longest = 0
        for s in self.stop:
            for k in range(min(len(s) - 1, len(self.text)), longest, -1):
                if self.text.endswith(s[:k]):
                    longest = k
                    break
        return longest
