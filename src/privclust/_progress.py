"""Progress of long fits: a bar on a terminal, log lines elsewhere, nothing for quick fits.

Every estimator's fit loop reports its steps (iterations, tree levels, stages) through
:func:`fit_progress`. On a terminal a tqdm bar appears once a fit has run for
``DELAY_S`` seconds (quick fits, the common case, print nothing); without a terminal each step
that ends after that delay is logged on the ``privclust`` logger at INFO (configure
``logging`` to see it). The command line shows its own bar and turns these off with
:func:`disabled`.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import time

__all__ = ["DELAY_S", "disabled", "fit_progress"]

DELAY_S = 2.0
LOGGER = logging.getLogger("privclust")
_ENABLED = [True]


@contextlib.contextmanager
def disabled():
    """No progress output inside this block (the command line shows its own)."""
    before = _ENABLED[0]
    _ENABLED[0] = False
    try:
        yield
    finally:
        _ENABLED[0] = before


class _Steps:
    def __init__(self, name: str, total: int):
        self.name, self.total, self.done = name, total, 0
        self.t0 = time.perf_counter()
        self.bar = None
        try:
            on_terminal = sys.stderr.isatty()
        except (AttributeError, ValueError):
            on_terminal = False
        if _ENABLED[0] and on_terminal:
            from tqdm import tqdm

            self.bar = tqdm(total=total, desc=name, file=sys.stderr, leave=False,
                            delay=DELAY_S, bar_format="{desc} |{bar}| {n_fmt}/{total_fmt} "
                            "[{elapsed}<{remaining}]")

    def __call__(self, what: str = "") -> None:
        """One step done (``what``: a short description of the next one)."""
        self.done += 1
        if self.bar is not None:
            if what:
                self.bar.set_description_str(f"{self.name}: {what}", refresh=False)
            self.bar.update(1)
        elif _ENABLED[0] and time.perf_counter() - self.t0 >= DELAY_S:
            LOGGER.info("%s: step %d of %d done after %.1f s%s", self.name, self.done,
                        self.total, time.perf_counter() - self.t0,
                        f" (next: {what})" if what else "")

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


@contextlib.contextmanager
def fit_progress(name: str, total: int):
    """``with fit_progress("DPGaussianMixture", n_iter) as step: ... step()`` per step."""
    steps = _Steps(name, max(int(total), 1))
    try:
        yield steps
    finally:
        steps.close()
