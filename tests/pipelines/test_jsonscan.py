"""The scanner finds where a JSON array's elements end, and which nest too deep, fed in pieces that split strings,
escapes and brackets anywhere: checked against the offsets at which Python's own encoder wrote each element, and
each element's depth as Python counts it."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from pipelines.jsonscan import ArrayScanner, max_depth

# String fragments that trip a naive scanner: quotes, backslash runs, brackets and separators in strings.
_FRAGMENTS = ["a", '"', "\\", "\\\\", '\\"', "{", "}", "[", "]", ",", " ", "\n", "é", "\u2028"]
_SEPARATORS = [",", ", ", ",\n", "\r\n,\r\n  ", " ,\t"]


def _string(rng: random.Random) -> str:
    return "".join(rng.choice(_FRAGMENTS) for _ in range(rng.randint(0, 12)))


def _value(rng: random.Random, depth: int = 0) -> Any:
    roll = rng.random()
    if depth > 3 or roll < 0.3:
        return rng.choice([1, -2.5, None, True, _string(rng)])
    if roll < 0.6:
        return [_value(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    return {_string(rng): _value(rng, depth + 1) for _ in range(rng.randint(0, 4))}


def _depth(value: Any) -> int:
    """Levels of objects and lists: ``{"a": []}`` is 2, a scalar 0."""
    if isinstance(value, dict):
        return 1 + max(map(_depth, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(_depth, value), default=0)
    return 0


def _element(rng: random.Random) -> Any:
    roll = rng.random()
    if roll < 0.85:
        return {_string(rng): _value(rng, 1) for _ in range(rng.randint(0, 5))}
    if roll < 0.93:
        return [_value(rng, 1) for _ in range(rng.randint(0, 3))]
    return rng.choice([42, "}]", None])  # scalars end nowhere of their own


@pytest.mark.parametrize("seed", range(4))
def test_element_ends_match_where_the_encoder_wrote_them(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(100):
        elements = [_element(rng) for _ in range(rng.randint(0, 30))]
        options = rng.choice([{}, {"separators": (",", ":")}, {"indent": 1}, {"indent": 4}, {"ensure_ascii": False}])
        limit = rng.randint(1, 4)
        text, expected, expected_deep, pending_depth = b"", [], [], 0
        for index, element in enumerate(elements):
            if index:
                text += rng.choice(_SEPARATORS).encode()
            text += json.dumps(element, **options).encode()
            pending_depth = max(pending_depth, _depth(element))
            if isinstance(element, (dict, list)):  # it ends here, with the scalars before it
                expected.append(len(text))
                expected_deep.append(pending_depth > limit)
                pending_depth = 0
        assert max_depth(b"[" + text + b"]") == 1 + max(map(_depth, elements), default=0), text
        close = len(text) + 1
        text += b" ]" + rng.choice([b"}", b', "x": "]"}'])

        scanner = ArrayScanner(limit)
        ends: list[int] = []
        deep: list[bool] = []
        found = -1
        offset = 0
        while found < 0 and offset < len(text):
            piece = text[offset : offset + rng.randint(1, 40)]
            # Half the pieces are scanned in place at the end of a larger buffer, as the chunker does.
            buffer, start = (piece, 0) if rng.random() < 0.5 else (bytearray(b"[{\"") + piece, 3)
            piece_ends, piece_close, piece_deep = scanner.scan(buffer, start)
            ends += [int(end) - start + offset for end in piece_ends]
            deep += piece_deep.tolist()
            if piece_close >= 0:
                found = piece_close - start + offset
            offset += len(piece)

        assert ends == expected, text
        assert deep == expected_deep, text
        assert found == close, text
        assert scanner.closed
