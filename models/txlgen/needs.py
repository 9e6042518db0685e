"""The Python modules the programs need beyond the standard library, and
the one line that says which one this python3 lacks.

Debian's /usr/bin/python3 finds python3-numpy, python3-sentencepiece and
python3-torch; another python3 (a venv, a python3 of its own) may not.
The programs check what they need before anything else: exit status 1
(a runtime error, as txlgen's) and the line, never a traceback.  Standard
library only.
"""

import importlib
import sys

# module: (its project's name, the Debian package)
PACKAGES = {"numpy": ("NumPy", "python3-numpy"),
            "sentencepiece": ("SentencePiece", "python3-sentencepiece"),
            "torch": ("PyTorch", "python3-torch")}
EXIT_MISSING = 1
DEBIAN_PYTHON = "/usr/bin/python3"


def missing(name):
    """What to say of module @name that cannot be imported."""
    what, pkg = PACKAGES[name]
    if sys.executable != DEBIAN_PYTHON:
        how = f"run it with {DEBIAN_PYTHON} (apt-get install {pkg})"
    else:
        how = f"apt-get install {pkg}"
    return (f"needs {what} (the Python module {name}), which "
            f"{sys.executable or 'this python3'} cannot import: {how}")


def require(prog, *names):
    """Exit (status 1) with one line on stderr if one of the modules
    @names cannot be imported: the first that cannot."""
    for name in names:
        try:
            importlib.import_module(name)
        except ImportError:
            print(f"{prog}: {missing(name)}", file=sys.stderr)
            sys.exit(EXIT_MISSING)
