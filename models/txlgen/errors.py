"""The one error class of bad input.

Every reader and writer here raises InputError (or a subclass) for what
is wrong with a file, an option or a value, with a message that names
the file and the problem on one line; the programs print it after their
name and exit 3, as txlgen does for a bad model (2 is a usage error, 1
is left to what fails while writing or a bug).  Any other exception is
a bug.
"""

import argparse
import os
import stat
import sys


# the exit status of bad input: txlgen's for a bad model
EXIT_BAD_INPUT = 3


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


def open_input(path):
    """path opened to read, if it is a regular file; else InputError
    naming it.  Opened without waiting, and refused, where it is a FIFO (a
    reader would wait for a writer forever), a device or a directory."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC |
                     os.O_NOCTTY)
    except OSError as e:
        raise InputError(f"{path}: {e.strerror or e}")
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        kind = ("a directory" if stat.S_ISDIR(mode) else
                "a FIFO" if stat.S_ISFIFO(mode) else
                "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else
                "a socket" if stat.S_ISSOCK(mode) else "not a plain file")
        raise InputError(f"{path}: not a regular file ({kind})")
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


class OneLineParser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line, as every other
    error of the programs (exit status 2, as argparse's)."""

    def error(self, message):
        self.exit(2, f"{self.prog}: {message} (see --help)\n")


def run_tool(prog, path, fn, *args):
    """fn(*args) for program prog, its failures one line each on stderr
    (path: the input they are about): 0, or EXIT_BAD_INPUT for bad input,
    130 when interrupted, 1 with a plea to report anything else (a
    bug)."""
    try:
        fn(*args)
    except InputError as e:
        print(f"{prog}: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
    except MemoryError:
        print(f"{prog}: {path}: out of memory", file=sys.stderr)
        return 1
    except Exception as e:             # noqa: BLE001 (one line, not a trace)
        print(f"{prog}: {path}: unexpected {type(e).__name__}: "
              f"{str(e)[:200]} (a bug: please report it with the file)",
              file=sys.stderr)
        return 1
    return 0
