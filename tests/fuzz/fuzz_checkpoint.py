#!/usr/bin/python3
"""A mutation fuzzer of the converter's readers of untrusted input.

    tests/fuzz/fuzz_checkpoint.py [--seconds S]
        [--runs N] [--seed K] [--corpus DIR] [--crashes DIR] [--only KIND]

From the seeds in --corpus (tests/fuzz/corpus/checkpoint: tiny
checkpoints as torch.save writes them, see checkpoint-seeds.py) and the
hostile files of tests/test_badcheckpoints.py, it mutates inputs and
feeds each to what convert.py runs on a file of its kind:

  pickle       torch.save's zip archive, its legacy format, plain pickles
               (*.pt, *.bin, *.pkl): load_pickle, then the checkpoint in
               it (checkpoint_of: every tensor built, the hyperparameters
               checked as convert.py checks them) and the vocabulary in it
               (vocab_of)
  safetensors  parse_safetensors (*.safetensors)
  json         config.json and --config (*.json): parse_json, hf_hparams
               and convert.check_config of both

Mutations: bit flips, bytes and integers of interest written anywhere,
chunks deleted, repeated, spliced from another input of the kind; and
aware of the formats: an entry of a zip archive mutated and the archive
rebuilt with its checksums right, opcodes of a pickle deleted, repeated,
swapped or given other arguments (integers of interest, names of the
allow-list and beyond), values of a JSON tree given other types, depths
and sizes.  An input whose outcome (the error message without the names and
numbers in it, or the stage it reached) is new joins the corpus: a crude
guidance, without coverage.

Any exception other than the converter's own InputError is a crash, as
is anything printed on stderr, an input that takes more than --slow CPU
seconds, and an input after which the process has grown by more than
256 MB (its peak resident memory) or that was refused for want of memory:
the inputs are 256 KB at most, and what the readers build of a file is
bounded by its size.  Memory is limited (RLIMIT_AS, --max-mb beyond what
the process has at the start) so that a runaway allocation fails rather
than takes the machine.  A crash's input and traceback are written to
--crashes.  Everything is decided by --seed: a run is reproduced by the same
seed and --runs.  Prints executions, seconds, CPU seconds, executions per
second, corpus size and crashes; exit status 1 if anything crashed.
"""

import argparse
import functools
import glob
import warnings
import hashlib
import io
import json
import os
import pickle
import pickletools
import random
import re
import resource
import struct
import sys
import time
import traceback
import zipfile

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
warnings.simplefilter("ignore")          # zipfile's "Duplicate name"

import srctree  # noqa: F401,E402 (models/ on sys.path)
from txlgen import checkpoint, convert, vocab           # noqa: E402
from txlgen.errors import InputError                    # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "corpus", "checkpoint")

INTERESTING = [0, 1, 2, 3, 4, 7, 8, 16, 31, 32, 63, 64, 127, 128, 255, 256,
               -1, -2, -128, 0x7fff, 0x8000, 0xffff, 0x10000, 2 ** 31 - 1,
               2 ** 31, 2 ** 32 - 1, 2 ** 32, 2 ** 53, 2 ** 61, 2 ** 62,
               2 ** 63 - 1, 2 ** 63, 2 ** 64 - 1, 1 << 100, -(2 ** 63),
               500_000_000, 3_000_000_000, 0x1950a86a20f9469cfc6c]
NAMES = ["storage", "FloatStorage", "HalfStorage", "BFloat16Storage",
         "LongStorage", "cpu", "0", "1", "_modules", "_parameters",
         "_buffers", "cutoffs", "div_val", "n_token", "n_layer", "d_model",
         "sample_softmax", "__setstate__", "__dict__", "_cls", "_t",
         "data", "numel", "idx2sym", "sym2idx", "unk_idx", "dataset",
         "vocab", "wt103", "enwik8", "text8", "model", "state_dict",
         "r_w_bias", "word_emb.emb_layers.0.weight", "transformer.x", "",
         "x" * 300, "\u2581", "<eos>", "<unk>"]
GLOBALS = [("torch._utils", "_rebuild_tensor_v2"),
           ("torch._utils", "_rebuild_parameter"),
           ("torch._utils", "_rebuild_parameter_with_state"),
           ("torch", "FloatStorage"), ("torch", "HalfStorage"),
           ("torch", "BFloat16Storage"), ("torch", "Size"),
           ("collections", "OrderedDict"), ("collections", "Counter"),
           ("__builtin__", "set"), ("__builtin__", "object"),
           ("copy_reg", "_reconstructor"),
           ("mem_transformer", "MemTransformerLM"),
           ("mem_transformer", "AdaptiveEmbedding"),
           ("data_utils", "Corpus"), ("utils.vocabulary", "Vocab"),
           ("torch.nn.modules.container", "ModuleList"),
           ("posix", "system"), ("builtins", "eval"), ("os", "getcwd")]
JSON_KEYS = ["vocab_size", "n_token", "n_layer", "n_head", "d_model",
             "d_head", "d_inner", "d_embed", "div_val", "cutoffs",
             "tie_projs", "tie_weight", "pre_lnorm", "attn_type", "tgt_len",
             "ext_len", "mem_len", "clamp_len", "same_length", "untie_r",
             "max_klen", "sample_softmax", "layer_norm_epsilon", "adaptive",
             "proj_share_all_but_first", "tie_word_embeddings", "dropout",
             "dropatt", "adapt_inp"]


# inputs are cut to this: mutations that repeat would grow them without
# end, and a big input is slow without being more interesting
MAX_INPUT = 256 << 10
# peak resident memory (KiB) past which an input is a crash: set in main()
# to what the process holds after the seeds, plus 256 MB (the inputs are
# 256 KB at most; what the readers build of one is bounded by its size)
GROWTH_KB = None


# ---------------------------------------------------------------------------
# What convert.py does with a file of each kind

def run_pickle(data):
    f = io.BytesIO(data)
    obj = checkpoint.load_pickle(f, "fuzz.pt", len(data))
    reached = "pickle"
    try:
        ck = checkpoint.checkpoint_of(obj, "fuzz.pt")
        for name in ck.state:
            ck.state[name]
        reached = "state"
        if ck.hparams:
            convert.check_config({k: v for k, v in ck.hparams.items()
                                  if k in convert.HPARAM_NAMES}, "fuzz.pt")
            reached = "config"
    except InputError:
        pass
    vocab.vocab_of(obj, "fuzz.pt")
    return reached + "+vocab"


def run_safetensors(data):
    checkpoint.parse_safetensors(data, "fuzz.safetensors")
    return "safetensors"


def run_json(data):
    raw = checkpoint.parse_json(data, "fuzz.json")
    reached = "json"
    try:
        convert.check_config(raw, "fuzz.json")
        reached = "config"
    except InputError:
        pass
    hp = checkpoint.hf_hparams(raw, "fuzz.json")
    convert.check_config(hp, "fuzz.json")
    return reached + "+hf"


TARGETS = {"pickle": run_pickle, "safetensors": run_safetensors,
           "json": run_json}


def kind_of(path):
    if path.endswith(".safetensors"):
        return "safetensors"
    if path.endswith(".json"):
        return "json"
    return "pickle"


# ---------------------------------------------------------------------------
# Mutations

def interesting_bytes(rng):
    v = rng.choice(INTERESTING)
    n = rng.choice((1, 2, 4, 8))
    return (v % (1 << (8 * n))).to_bytes(n, rng.choice(("little", "big")))


def mutate_bytes(rng, data, others):
    b = bytearray(data)
    if not b:
        return bytes(rng.randbytes(rng.randint(1, 16)))
    for _ in range(rng.choice((1, 1, 1, 2, 4, 8))):
        op = rng.randrange(8)
        i = rng.randrange(len(b))
        if op == 0:
            b[i] ^= 1 << rng.randrange(8)
        elif op == 1:
            b[i] = rng.randrange(256)
        elif op == 2:
            v = interesting_bytes(rng)
            b[i:i + len(v)] = v
        elif op == 3:
            del b[i:i + rng.randint(1, 64)]
        elif op == 4:
            j = rng.randrange(len(b))
            b[i:i] = b[j:j + rng.randint(1, 64)]
        elif op == 5:
            b[i:i] = rng.randbytes(rng.randint(1, 16))
        elif op == 6 and others:
            o = rng.choice(others)
            if o:
                j = rng.randrange(len(o))
                b[i:] = o[j:j + rng.randint(1, 4096)]
        else:
            del b[rng.randrange(len(b) + 1):]
        if not b:
            break
    return bytes(b)


@functools.lru_cache(maxsize=4096)
def pickle_ops(data):
    """[(start, end, opcode, arg)] of the first pickle in data (None if
    it does not parse)."""
    try:
        ops = list(pickletools.genops(io.BytesIO(data)))
    except Exception:                  # noqa: BLE001 (not a pickle)
        return None
    out = []
    for k, (op, arg, pos) in enumerate(ops):
        end = ops[k + 1][2] if k + 1 < len(ops) else pos + 1
        out.append((pos, end, op, arg))
    return out


def pickled(v):
    """The opcodes that push value v (protocol 2, no PROTO or STOP)."""
    return pickle.dumps(v, 2)[2:-1]


def mutate_pickle(rng, data):
    """An opcode of the (first) pickle in data deleted, repeated, swapped
    with another, given another argument, or a value pushed before it."""
    ops = pickle_ops(data)
    if not ops or len(ops) < 3:
        return None
    end = ops[-1][1]
    k = rng.randrange(1, len(ops) - 1)         # not PROTO, not STOP
    s, e, op, arg = ops[k]
    what = rng.randrange(8)
    if what == 0:
        new = b""
    elif what == 1:
        new = data[s:e] * rng.choice((2, 3, 10))
    elif what == 2:
        j = rng.randrange(1, len(ops) - 1)
        s2, e2 = ops[j][:2]
        if s2 < s:
            return data[:s2] + data[s:e] + data[e2:s] + data[s2:e2] + \
                data[e:]
        new = data[s:e]
        return data[:s] + data[s2:e2] + data[e:s2] + new + data[e2:]
    elif what == 3 and isinstance(arg, int):
        new = pickled(rng.choice(INTERESTING))
    elif what == 4 and isinstance(arg, str):
        new = pickled(rng.choice(NAMES))
    elif what == 5:
        mod, name = rng.choice(GLOBALS)
        new = f"c{mod}\n{name}\n".encode() + data[s:e]
    elif what == 6 and op.name in ("PUT", "BINPUT", "LONG_BINPUT", "GET",
                                   "BINGET", "LONG_BINGET", "FRAME"):
        # the memo index or frame length, any size
        v = rng.choice(INTERESTING) % (1 << 32)
        new = (b"r" if "PUT" in op.name else b"j") + struct.pack("<I", v) \
            if op.name != "FRAME" else \
            b"\x95" + struct.pack("<Q", rng.choice(INTERESTING) % (1 << 64))
    else:
        v = rng.choice([rng.choice(INTERESTING), rng.choice(NAMES), None,
                        True, [], {}, (), 1.5, float("nan")])
        new = pickled(v) + data[s:e]
    return data[:s] + new + data[e:end] + data[end:]


@functools.lru_cache(maxsize=4096)
def zip_entries(data):
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            return tuple((i.filename, z.read(i)) for i in z.infolist())
    except Exception:                  # noqa: BLE001 (not a zip)
        return None


def mutate_zip(rng, entries, others):
    """One entry of a zip archive mutated (mostly data.pkl, as a pickle or
    as bytes), or an entry dropped, doubled or compressed; the archive
    rebuilt with its checksums right."""
    entries = list(entries)
    k = rng.randrange(len(entries))
    pkl = [i for i, (n, _) in enumerate(entries) if n.endswith("data.pkl")]
    if pkl and rng.random() < 0.6:
        k = pkl[0]
    name, data = entries[k]
    what = rng.randrange(10)
    compress = set()
    if what < 4 and name.endswith("data.pkl"):
        data = mutate_pickle(rng, data) or mutate_bytes(rng, data, [])
    elif what < 7:
        data = mutate_bytes(rng, data, [d for _, d in entries])
    elif what == 7:
        del entries[k]
        k = None
    elif what == 8:
        entries.append((name, data))
    else:
        compress.add(name)
    if k is not None:
        entries[k] = (name, data)
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        for n, d in entries:
            info = zipfile.ZipInfo(n)
            info.compress_type = zipfile.ZIP_DEFLATED if n in compress \
                else zipfile.ZIP_STORED
            z.writestr(info, d)
    return out.getvalue()


@functools.lru_cache(maxsize=4096)
def legacy_parts(data):
    """A legacy torch.save file as [pickle, pickle, ..., raw tail], or
    None."""
    parts, pos = [], 0
    for _ in range(5):
        ops = pickle_ops(data[pos:])
        if not ops:
            return None
        end = pos + ops[-1][1]
        parts.append(data[pos:end])
        pos = end
    return tuple(parts + [data[pos:]])


def random_json(rng, depth=0):
    r = rng.randrange(12 if depth < 3 else 8)
    if r == 0:
        return rng.choice(INTERESTING)
    if r == 1:
        return rng.choice(NAMES)
    if r == 2:
        return rng.choice((True, False, None))
    if r == 3:
        return rng.choice((0.5, -1e300, 1e-5, 1e5, float("1e400") * 0))
    if r == 4:
        n = rng.choice((10, 1000, 100_000))
        return json.loads("[" * n + "]" * n) if n < 900 else \
            {"deep": n}                      # made in mutate_json
    if r in (5, 6, 7):
        return rng.randint(-4, 40)
    if r < 10:
        return [random_json(rng, depth + 1) for _ in range(rng.randint(0, 5))]
    return {rng.choice(JSON_KEYS): random_json(rng, depth + 1)
            for _ in range(rng.randint(0, 4))}


def mutate_json(rng, data):
    """A value of the JSON tree in data replaced (another type, depth or
    size), a key dropped or added; None if data is not JSON."""
    try:
        tree = json.loads(data)
    except Exception:                  # noqa: BLE001 (not JSON)
        return None
    deep = None
    for _ in range(rng.randint(1, 3)):
        # the containers of the tree (a few hundred at most)
        nodes, todo = [], [tree]
        while todo and len(nodes) < 500:
            n = todo.pop()
            if isinstance(n, (dict, list)):
                nodes.append(n)
                todo.extend(n.values() if isinstance(n, dict) else n)
        if not nodes:
            tree = random_json(rng)
            continue
        node = rng.choice(nodes)
        keys = list(node) if isinstance(node, dict) else \
            list(range(len(node)))
        v = random_json(rng)
        if isinstance(v, dict) and "deep" in v:
            deep, v = v["deep"], "\0DEEP\0"
        r = rng.random()
        if isinstance(node, dict) and (r < 0.3 or not keys):
            node[rng.choice(JSON_KEYS)] = v
        elif keys and r < 0.45:
            del node[rng.choice(keys)]
        elif keys:
            node[rng.choice(keys)] = v
        else:
            node.append(v)
    text = json.dumps(tree, allow_nan=True)
    if deep:
        text = text.replace('"\\u0000DEEP\\u0000"', "[" * deep + "]" * deep)
    return text.encode()


def mutate(rng, kind, data, others):
    r = rng.random()
    if kind == "json" and r < 0.7:
        return mutate_json(rng, data) or mutate_bytes(rng, data, others)
    if kind == "safetensors" and r < 0.5 and len(data) >= 8:
        (n,) = struct.unpack("<Q", data[:8])
        head = mutate_json(rng, data[8:8 + n])
        if head is not None:
            return struct.pack("<Q", len(head) if rng.random() < 0.9 else
                               rng.choice(INTERESTING) % (1 << 64)) + \
                head + data[8 + n:]
    if kind == "pickle" and r < 0.7:
        if data[:2] == b"PK":
            entries = zip_entries(data)
            if entries:
                return mutate_zip(rng, entries, others)
        else:
            parts = legacy_parts(data)
            if parts and rng.random() < 0.8:
                parts = list(parts)
                k = rng.randrange(len(parts) - 1)
                parts[k] = mutate_pickle(rng, parts[k]) or parts[k]
                if rng.random() < 0.3:
                    parts[-1] = mutate_bytes(rng, parts[-1], [])
                return b"".join(parts)
            return mutate_pickle(rng, data) or mutate_bytes(rng, data,
                                                            others)
    return mutate_bytes(rng, data, others)


# ---------------------------------------------------------------------------
# The loop

def outcome(kind, data, slow):
    """What an input does: ("ok", stage), ("error", message with its
    numbers taken out) or ("crash", traceback)."""
    t = time.process_time()
    err, sys.stderr = sys.stderr, io.StringIO()
    try:
        stage = TARGETS[kind](data)
        res = ("ok", stage)
    except InputError as e:
        if "MemoryError" in str(e):    # an allocation the file did not bound
            return ("crash", f"refused for want of memory: {e}")
        # the message without what the input chose: names, numbers
        res = ("error", re.sub(r"'[^']*'|\"[^\"]*\"|[0-9]+", "_",
                               str(e))[:120])
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException:              # noqa: BLE001 (a crash: recorded)
        return ("crash", traceback.format_exc())
    finally:
        printed, sys.stderr = sys.stderr.getvalue(), err
    if printed:                        # convert.py prints one line only
        return ("crash", f"printed to stderr: {printed}")
    if time.process_time() - t > slow:
        return ("crash", f"slow: {time.process_time() - t:.1f} s of CPU")
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    if rss > GROWTH_KB:
        return ("crash", f"the process grew to {rss >> 10} MB")
    return res


def seeds(corpus):
    out = []
    for p in sorted(glob.glob(os.path.join(corpus, "*"))):
        with open(p, "rb") as f:
            out.append((kind_of(p), f.read()))
    return out


def hostile_seeds(tmp):
    """The hostile files of tests/test_badcheckpoints.py, where it can be
    imported (small ones only: the zip bomb's 3 MB would slow every
    mutation)."""
    try:
        import test_badcheckpoints as tb
    except ImportError:
        return []
    tb.TMP = tmp
    out = []
    for name, (make, _, _) in tb.CASES.items():
        if "bomb" in name or "100 MB" in name:
            continue
        try:
            args = make()
        except Exception:              # noqa: BLE001
            continue
        w = args[args.index("--weights") + 1]
        paths = [w] if os.path.isfile(w) else \
            glob.glob(os.path.join(w, "*"))
        if "--config" in args:
            paths.append(args[args.index("--config") + 1])
        for p in paths:
            if os.path.isfile(p):            # not the cases' FIFOs
                with open(p, "rb") as f:
                    out.append((kind_of(p), f.read()))
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=None)
    ap.add_argument("--runs", type=int, default=None)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--corpus", default=CORPUS)
    ap.add_argument("--crashes", default="fuzz-checkpoint-crashes")
    ap.add_argument("--only", choices=sorted(TARGETS))
    ap.add_argument("--slow", type=float, default=2.0,
                    help="CPU seconds an input may take (default 2)")
    ap.add_argument("--max-mb", type=int, default=1024,
                    help="memory the process may add (RLIMIT_AS)")
    ap.add_argument("--max-corpus", type=int, default=4000)
    a = ap.parse_args(argv)
    if a.seconds is None and a.runs is None:
        ap.error("give --seconds or --runs")
    import tempfile
    with tempfile.TemporaryDirectory(prefix="txl-fuzz-ckpt-") as tmp:
        corpus = seeds(a.corpus) + hostile_seeds(tmp)
    if a.only:
        corpus = [c for c in corpus if c[0] == a.only]
    if not corpus:
        ap.error(f"no seeds in {a.corpus}")
    vm = int(open("/proc/self/status").read().split("VmSize:")[1].split()[0])
    limit = (vm + a.max_mb * 1024) * 1024
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    rng = random.Random(a.seed)
    seen = set()
    by_kind = {}
    global GROWTH_KB
    GROWTH_KB = 1 << 40
    for kind, data in corpus:
        by_kind.setdefault(kind, []).append(data)
        seen.add((kind,) + outcome(kind, data, a.slow)[:2])
    GROWTH_KB = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss + \
        (256 << 10)
    runs = crashes = 0
    t0, c0 = time.monotonic(), time.process_time()
    while (a.runs is None or runs < a.runs) and \
            (a.seconds is None or time.monotonic() - t0 < a.seconds):
        kind, data = corpus[rng.randrange(len(corpus))]
        new = mutate(rng, kind, data, by_kind[kind])[:MAX_INPUT]
        res = outcome(kind, new, a.slow)
        runs += 1
        if res[0] == "crash":
            crashes += 1
            os.makedirs(a.crashes, exist_ok=True)
            h = hashlib.sha1(new).hexdigest()[:16]
            base = os.path.join(a.crashes, f"crash-{kind}-{h}")
            with open(base, "wb") as f:
                f.write(new)
            with open(base + ".txt", "w") as f:
                f.write(f"run {runs} of seed {a.seed}\n{res[1]}")
            print(f"CRASH ({kind}) {base}:\n{res[1]}", file=sys.stderr)
            if res[1].startswith("the process grew"):
                break                  # the peak stays: the run is over
            continue
        key = (kind,) + res
        if key not in seen and len(corpus) < a.max_corpus:
            seen.add(key)
            corpus.append((kind, new))
            by_kind[kind].append(new)
    secs, cpu = time.monotonic() - t0, time.process_time() - c0
    print(f"fuzz_checkpoint: seed {a.seed}: {runs} executions in "
          f"{secs:.0f} s ({cpu:.0f} s CPU, {runs / max(secs, 1e-9):.0f}/s), "
          f"corpus {len(corpus)}, outcomes {len(seen)}, crashes {crashes}")
    return 1 if crashes else 0


if __name__ == "__main__":
    sys.exit(main())
