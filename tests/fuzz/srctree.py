"""Puts the source tree's models/ (the txlgen package) and tests/ (the
tests whose cases the fuzzers start from) on sys.path, so that the
scripts beside this file run from the source tree as they are: no
PYTHONPATH, nothing installed.  They `import srctree` before txlgen."""

import os
import sys

_TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[1:1] = [os.path.join(os.path.dirname(_TESTS), "models"), _TESTS]
