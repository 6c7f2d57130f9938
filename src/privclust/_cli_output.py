"""What the command line writes besides its results: one-line warnings and notes, output-path
checks, and progress (a moving bar on a terminal, a log line per stage otherwise)."""

from __future__ import annotations

import contextlib
import re
import sys
from pathlib import Path

PROG = "privclust"


def _cut(match) -> str:
    text = match.group(0)
    return f"{text[:20]}...{text[-10:]} ({len(text):,} characters)"


def _one_line(text: str) -> str:
    """A message on one line, with what echoes the user's input cut short: a quoted value or
    a run of digits of more than 40 characters (a field of a million characters, a number of
    300 digits) keeps its ends and its length."""
    text = " ".join(str(text).split())
    return re.sub(r"'[^']{41,}'|\d{41,}", _cut, text)


def _warn_line(text: str) -> None:
    from tqdm import tqdm

    tqdm.write(f"{PROG}: warning: {_one_line(text)}", file=sys.stderr)


def _note(text: str) -> None:
    print(f"{PROG}: note: {_one_line(text)}", file=sys.stderr)


def _show_warning(message, category, filename, lineno, file=None, line=None):
    _warn_line(str(message))


def _check_output_path(path: str | Path, what: str) -> Path:
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"{what} {path} is a folder; give a file name")
    if not path.parent.is_dir():
        raise FileNotFoundError(
            f"cannot write {what} {path}: the folder {path.parent} does not exist; create it first"
        )
    return path


@contextlib.contextmanager
def _progress(total: int):
    """Progress on stderr: on a terminal a tqdm bar whose clock keeps moving during a long
    stage (refreshed twice a second); otherwise one log line per stage with the time taken."""
    try:
        enabled = sys.stderr.isatty()
    except (AttributeError, ValueError):
        enabled = False
    bar = _TickingBar(total) if enabled else _StageLog()
    try:
        yield bar
    finally:
        bar.close()


class _TickingBar:
    def __init__(self, total: int):
        import threading

        from tqdm import tqdm

        self._bar = tqdm(total=total, file=sys.stderr, leave=False,
                         bar_format="{desc} |{bar}| {n_fmt}/{total_fmt} [{elapsed}]")
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._tick, daemon=True)
        self._thread.start()

    def _tick(self):
        while not self._stop.wait(0.5):
            self._bar.refresh()

    def set_description_str(self, text: str) -> None:
        self._bar.set_description_str(text)

    def update(self, n: int = 1) -> None:
        self._bar.update(n)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=1.0)
        self._bar.close()


class _StageLog:
    """Without a terminal (piped, logged): a line per stage that takes a second or more, and
    a line every 15 s while one runs, so a long fit is never silent (short runs stay quiet)."""

    def __init__(self):
        import threading
        import time

        self._clock = time.perf_counter
        self._stage, self._t0 = None, self._clock()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._heartbeat, daemon=True)
        self._thread.start()

    def _say(self, text: str) -> None:
        print(f"{PROG}: {text}", file=sys.stderr, flush=True)

    def _heartbeat(self):
        while not self._stop.wait(15.0):
            with self._lock:
                if self._stage is not None:
                    self._say(f"{self._stage} ... ({self._clock() - self._t0:.0f} s so far)")

    def _end_stage(self) -> None:
        if self._stage is not None:
            took = self._clock() - self._t0
            if took >= 1.0:
                self._say(f"{self._stage}: done in {took:.1f} s")
            self._stage = None

    def set_description_str(self, text: str) -> None:
        with self._lock:
            self._end_stage()
            self._stage, self._t0 = text, self._clock()

    def update(self, n: int = 1) -> None:
        with self._lock:
            self._end_stage()

    def close(self) -> None:
        self._stop.set()
        with self._lock:
            self._stage = None  # an error ends the run: no "done" line after it


