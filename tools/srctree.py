"""Puts the source tree's models/ (the txlgen package) on sys.path, after
this folder and before PYTHONPATH and the installed packages, so that the
scripts beside this file run from the source tree as they are: no
PYTHONPATH, nothing installed.  They `import srctree` before txlgen."""

import os
import sys

sys.path.insert(1, os.path.join(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))), "models"))
