"""Words of a text, the same for every backend, and BM25 scoring for the Redis store.

Every store indexes the words this module finds, not the backend's own tokenizer, so a
search finds the same entries on SQLite, PostgreSQL and Redis: Unicode letters and digits,
NFKC-normalised and case-folded, no stemming, no stop words.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Final

_WORD: Final = re.compile(r"[^\W_]+")
_MAX_WORD: Final = 64  # longer "words" (hashes, base64) are not worth an index entry

BM25_K1: Final = 1.2
BM25_B: Final = 0.75


def words(text: str) -> list[str]:
    """The indexed words of ``text``, in order, repeats kept."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    return [w for w in _WORD.findall(folded) if len(w) <= _MAX_WORD]


def query_words(query: str) -> list[str]:
    """The distinct words of a query, in order of first appearance."""
    return list(dict.fromkeys(words(query)))


def indexed_text(text: str) -> str:
    """The words of ``text`` joined by spaces: what the SQL backends' full-text index reads."""
    return " ".join(words(text))


def bm25(
    terms: Sequence[str],
    document: Iterable[str],
    *,
    document_frequency: dict[str, int],
    documents: int,
    average_length: float,
) -> float:
    """The Okapi BM25 score of a document (its words) for the query ``terms``."""
    counts = Counter(document)
    length = sum(counts.values())
    norm = BM25_K1 * (1 - BM25_B + BM25_B * length / max(average_length, 1e-9))
    score = 0.0
    for term in terms:
        tf = counts.get(term, 0)
        if not tf:
            continue
        df = document_frequency.get(term, 0)
        idf = math.log(1 + (documents - df + 0.5) / (df + 0.5))
        score += idf * tf * (BM25_K1 + 1) / (tf + norm)
    return score
