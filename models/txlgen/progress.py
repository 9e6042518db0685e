"""The progress line of the programs' long steps (writing a model file's
tensors, a calibration's text) and the size of what they wrote: on
stderr, only when it is a terminal; a pipe or a log gets the one line of
the end alone.  Standard library only."""

import sys
import time


def human_size(n):
    """@n bytes for people: 812 bytes, 45.2 kB, 448.0 MB, 1.2 GB."""
    if n < 1000:
        return f"{n} bytes"
    for unit in ("kB", "MB", "GB", "TB"):
        n /= 1000
        if n < 1000 or unit == "TB":
            return f"{n:.1f} {unit}"


class Progress:
    """'PROG: WHAT I/N [DETAIL]' rewritten in place, at most ten times a
    second; done() clears it.  Off (every call a no-op) unless stderr is
    a terminal."""

    def __init__(self, prog, what, total, unit=""):
        self.on = sys.stderr.isatty()
        self.prog, self.what, self.total, self.unit = prog, what, total, unit
        self.last = 0.0
        self.shown = False

    def update(self, done, detail=""):
        if not self.on:
            return
        now = time.monotonic()
        if now - self.last < 0.1 and done < self.total:
            return
        self.last = now
        pct = 100 * done / self.total if self.total else 100
        line = (f"{self.prog}: {self.what} {done}/{self.total}{self.unit} "
                f"({pct:.0f}%) {detail}")
        sys.stderr.write("\r" + line[:200] + "\x1b[K")
        sys.stderr.flush()
        self.shown = True

    def done(self):
        if self.shown:
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()
            self.shown = False
