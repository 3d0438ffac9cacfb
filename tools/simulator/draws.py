"""Random draws and identifiers: fast stand-ins for ``random`` helpers on the hot
path, and ids that never collide (request ids, UUIDs, chunk-name hex).

Every draw takes its ``random.Random`` explicitly (never the global generator), so
the same seed gives the same bytes.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterator
from typing import Any


def mix32(x: int) -> int:
    """A bijective 32-bit integer mixer: distinct inputs give distinct ids."""
    x &= 0xFFFFFFFF
    x ^= x >> 16
    x = (x * 0x7FEB352D) & 0xFFFFFFFF
    x ^= x >> 15
    x = (x * 0x846CA68B) & 0xFFFFFFFF
    x ^= x >> 16
    return x


def hex_of(text: str, n: int) -> str:
    """``n`` hex characters that are a fixed function of ``text`` (chunk names, drift)."""
    return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()[:n]


def ri(rng: random.Random, a: int, b: int) -> int:
    """``rng.randint(a, b)``, faster (one ``random()`` call; the hot path uses it a lot)."""
    return a + int(rng.random() * (b - a + 1))


def pick(rng: random.Random, seq: Any) -> Any:
    """``rng.choice(seq)``, faster."""
    return seq[int(rng.random() * len(seq))]


def uuid4(rng: random.Random) -> str:
    """A version-4 UUID string drawn from ``rng`` (session ids, upstream request ids)."""
    h = f"{rng.getrandbits(128):032x}"
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{'89ab'[int(h[16], 16) & 3]}{h[17:20]}-{h[20:32]}"


def sorted_uniforms(rng: random.Random, n: int) -> Iterator[float]:
    """``n`` uniform(0, 1) draws in increasing order, one at a time (O(1) memory)."""
    x = 0.0
    for k in range(n, 0, -1):
        x = 1.0 - (1.0 - x) * rng.random() ** (1.0 / k)
        yield x
