"""The one error class of bad input.

Every reader and writer here raises InputError (or a subclass) for what
is wrong with a file, an option or a value, with a message that names
the file and the problem on one line; the programs print it after their
name and exit 1.  Any other exception is a bug.
"""

import argparse


class InputError(Exception):
    pass


def describe(v):
    """A short description of a value from a file, for messages: small
    scalars as they are, anything else by its type (never the repr of
    something that could be huge or nested without end)."""
    if isinstance(v, int) and v.bit_length() > 64:
        return "a very large integer"       # (repr() refuses the largest)
    if v is None or isinstance(v, (bool, int, float)):
        s = repr(v)
    elif isinstance(v, str):
        s = repr(v[:40]) + ("..." if len(v) > 40 else "")
    else:
        return f"a {type(v).__name__}"
    return s if len(s) <= 60 else s[:57] + "..."


class OneLineParser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line, as every other
    error of the programs (exit status 2, as argparse's)."""

    def error(self, message):
        self.exit(2, f"{self.prog}: {message} (see --help)\n")
