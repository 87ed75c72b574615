"""The zoo's byte-level BPE tokenizer: training with `tokenizers`, saving in Hugging Face form.

Contract: byte-level (every byte string encodes, decode(encode(s)) == s), no normalisation, no
BOS; `<|endoftext|>` (id 0) separates documents and is the EOS and padding token. A model folder
gets `tokenizer.json` and `tokenizer_config.json`, so `AutoTokenizer.from_pretrained(folder)`
loads it standalone.
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterable

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

EOS_TOKEN = "<|endoftext|>"
EOS_ID = 0


def train_tokenizer(texts: Iterable[str], vocab_size: int) -> Tokenizer:
    """A byte-level BPE tokenizer of `vocab_size` entries (EOS and the 256 bytes included)."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, min_frequency=2, show_progress=False,
        special_tokens=[EOS_TOKEN], initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(texts, trainer=trainer)
    assert tokenizer.token_to_id(EOS_TOKEN) == EOS_ID
    return tokenizer


def load_tokenizer(path: Path) -> Tokenizer:
    return Tokenizer.from_file(str(path))


def save_hf_tokenizer(tokenizer_json: Path, folder: Path) -> None:
    """Write `tokenizer.json` and `tokenizer_config.json` for `AutoTokenizer` into `folder`."""
    from transformers import PreTrainedTokenizerFast

    hf = PreTrainedTokenizerFast(tokenizer_file=str(tokenizer_json), eos_token=EOS_TOKEN,
                                 pad_token=EOS_TOKEN, unk_token=None, bos_token=None,
                                 model_max_length=131072, clean_up_tokenization_spaces=False)
    folder.mkdir(parents=True, exist_ok=True)
    hf.save_pretrained(str(folder))
