#!/usr/bin/python3
"""The README's screenshots of txlgen-server's page (docs/page-generate.png,
docs/page-score.png): the server with the default model on a free port of
127.0.0.1, the page in Debian's chromium through tests/page.mjs --shots
(puppeteer-core from tests/node, as the tests use it).  The sampled text
has a fixed seed, so the pictures change only when the page or the model
does.

Run:  /usr/bin/python3 tools/page_screenshots.py [BUILD_DIR]   (default: build)
"""

import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build")
    server = os.path.join(build, "server", "txlgen-server")
    out = os.path.join(ROOT, "docs")
    os.makedirs(out, exist_ok=True)
    proc = subprocess.Popen(
        [server, "-m", os.path.join(ROOT, "models", "sotu.bin"), "--port",
         "0"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        m = re.search(r"http://127\.0\.0\.1:(\d+)/", proc.stderr.readline())
        if not m:
            sys.exit("page_screenshots.py: the server did not start")
        subprocess.run(["node", os.path.join(ROOT, "tests", "page.mjs"),
                        "--shots", f"http://127.0.0.1:{m.group(1)}/", out],
                       check=True, timeout=120)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    for name in ("page-generate.png", "page-score.png"):
        path = os.path.join(out, name)
        print(f"{path}: {os.path.getsize(path) // 1024} KiB")


if __name__ == "__main__":
    main()
