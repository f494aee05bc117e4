"""Which tokens of the static model's vocabulary a text's vector leaves out.

Shared by the service's encoder (slowave.embedding.StaticEncoder) and the build of the model
(tools/distill_model.py), which fits the token vectors to the teacher on the same tokens the
service averages. Plain Python, no dependencies: the build runs in its own virtualenv."""

from __future__ import annotations

import unicodedata


def punctuation_token(token: str) -> bool:
    """A WordPiece token made only of punctuation (`.`, `?`, `##;`, `—`, `«`). Symbols such as `$`,
    `%` or `+` say something and are kept."""
    text = token[2:] if token.startswith("##") else token
    return bool(text) and all(unicodedata.category(ch).startswith("P") for ch in text)


def number_token(token: str) -> bool:
    """A WordPiece token made only of digits (`2023`, `##65`). A number reaches the tokenizer as
    arbitrary pieces (`56658` is `56`, `##65`, `##8`) whose vectors say nothing of it; the lexical
    channel matches numbers exactly. A token with letters (`mp3`, `2nd`) is a word and stays."""
    text = token[2:] if token.startswith("##") else token
    return text.isascii() and text.isdigit()


def left_out(
    vocabulary: dict[str, int], keep_punctuation: bool = False, unknown: str = "[UNK]", keep_numbers: bool = True
) -> frozenset[int]:
    """The ids a text's vector leaves out: the unknown token, every punctuation token unless
    `keep_punctuation` (model2vec's own encoding keeps them), and every number token unless
    `keep_numbers`."""
    return frozenset(
        i
        for token, i in vocabulary.items()
        if token == unknown
        or (not keep_punctuation and punctuation_token(token))
        or (not keep_numbers and number_token(token))
    )
