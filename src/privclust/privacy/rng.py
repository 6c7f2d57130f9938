"""Random sources: a secure default, reproducible runs on request.

``random_state=None`` (the default everywhere in privclust) draws from a cryptographically
secure bit generator inside NumPy's ``Generator``: randomgen's ChaCha with 20 rounds, keyed with
256 bits from the operating system (``secrets``). An int or a ``numpy.random.Generator`` gives
reproducible runs for tests and benchmarks; the privacy report then says "reproducible, not
secure", because anyone who knows the seed can subtract the noise.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

import numpy as np

__all__ = ["RandomSource", "public_offsets", "public_unit_directions", "resolve_random_state"]


@dataclass(frozen=True)
class RandomSource:
    """A generator together with a description of where its randomness comes from."""

    generator: np.random.Generator
    description: str
    secure: bool


def _secure_generator() -> np.random.Generator:
    from randomgen import ChaCha

    return np.random.Generator(ChaCha(key=secrets.randbits(256), rounds=20))


def resolve_random_state(random_state) -> RandomSource:
    """Turn a ``random_state`` argument into a :class:`RandomSource`.

    None -> secure ChaCha20 keyed from the OS; int -> PCG64 seeded with it; Generator -> used
    as given. Anything else raises ``TypeError`` naming what is accepted.
    """
    if random_state is None:
        return RandomSource(
            _secure_generator(), "secure: ChaCha20 (randomgen) keyed from the OS", True
        )
    if isinstance(random_state, np.random.Generator):
        return RandomSource(
            random_state, "reproducible (user-supplied Generator), not secure", False
        )
    if isinstance(random_state, (int, np.integer)) and not isinstance(random_state, bool):
        if random_state < 0:
            raise ValueError(f"random_state must be a non-negative int, got {random_state}")
        return RandomSource(
            np.random.default_rng(int(random_state)),
            "reproducible (int seed; the seed is not recorded), not secure",
            False,
        )
    raise TypeError(
        "random_state must be None (secure randomness), an int seed or a "
        f"numpy.random.Generator; got {type(random_state).__name__}"
    )


def public_unit_directions(generator: np.random.Generator, shape) -> np.ndarray:
    """Directions uniform on the unit sphere, shape ``(..., d)``: *public* randomness.

    Not noise: the caller uses them to place candidates or orientations inside regions that are
    already public (e.g. a released convergent zone), so they carry no information about the
    data and need no ledger entry. Kept here so that every Gaussian draw in privclust lives in
    ``privclust.privacy``.
    """
    shape = tuple(np.atleast_1d(shape))
    g = generator.standard_normal(shape)
    norm = np.linalg.norm(g, axis=-1, keepdims=True)
    g[..., 0] += norm[..., 0] == 0  # probability zero; keeps the division defined
    return g / np.maximum(norm, 1e-300)


def public_offsets(generator: np.random.Generator):
    """A callable ``offsets(n)``: ``n`` independent offsets uniform in ``[-1/2, 1/2)``, *public*
    randomness. DPM dithers rounded values with them (one offset per record, independent of the
    data) before it measures neighbour gaps; a record added to the data brings its own offset
    and leaves the others' unchanged, so every sensitivity argument over the gaps holds as for
    undithered values. Not noise: no ledger entry."""

    def offsets(n: int) -> np.ndarray:
        return generator.random(n) - 0.5

    return offsets
