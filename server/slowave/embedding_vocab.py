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


def left_out(vocabulary: dict[str, int], keep_punctuation: bool = False, unknown: str = "[UNK]") -> frozenset[int]:
    """The ids a text's vector leaves out: the unknown token, and every punctuation token unless
    `keep_punctuation` (model2vec's own encoding keeps them)."""
    return frozenset(
        i for token, i in vocabulary.items() if token == unknown or (not keep_punctuation and punctuation_token(token))
    )
