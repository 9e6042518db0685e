#!/usr/bin/python3
"""Re-store a txlgen model file in another storage type and set its
metadata: see `txlfile.py --help` and txlgen/txlfile.py."""

import sys

from txlgen.needs import require

require("txlfile.py", "numpy", "sentencepiece")
from txlgen.txlfile import main  # noqa: E402 (after the check)

if __name__ == "__main__":
    sys.exit(main())
