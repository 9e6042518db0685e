#!/usr/bin/python3
"""Re-store a txlgen model file in another storage type and set its
metadata: see `txlfile.py --help` and txlgen/txlfile.py."""

import sys

from txlgen.txlfile import main

if __name__ == "__main__":
    sys.exit(main())
