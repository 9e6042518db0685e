"""What pyproject.toml cannot say: the version (meson.build's) and lib/'s
headers, copied into the package as txlgen/lib/ (txlgen/loadable.py reads
the loader's limits from them).  Both come from the source tree, so the
package is built from it: pip install ./models."""

import glob
import os
import re

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def source(path):
    if not os.path.exists(path):
        raise SystemExit(f"setup.py: {path} not found: the txlgen package "
                         "is built from txlgen's source tree "
                         "(pip install ./models)")
    return path


def version():
    with open(source(os.path.join(ROOT, "meson.build")),
              encoding="utf-8") as f:
        m = re.search(r"^\s*version\s*:\s*'([^']+)'", f.read(), re.M)
    if not m:
        raise SystemExit("setup.py: meson.build names no version")
    return m.group(1)


class BuildPy(build_py):
    """The package, and lib/'s headers in txlgen/lib/ in their layer
    folders, as the source tree holds them."""

    def run(self):
        super().run()
        lib = source(os.path.join(ROOT, "lib"))
        for h in glob.glob(os.path.join(lib, "**", "*.h"), recursive=True):
            dst = os.path.join(self.build_lib, "txlgen", "lib",
                               os.path.relpath(h, lib))
            self.mkpath(os.path.dirname(dst))
            self.copy_file(h, dst)


setup(version=version(), cmdclass={"build_py": BuildPy})
