#!/usr/bin/python3
"""Choose a model's recommended sampling settings by measurement: see
`sampling.py --help` and txlgen/sampling.py."""

import sys

from txlgen.sampling import main

if __name__ == "__main__":
    sys.exit(main())
