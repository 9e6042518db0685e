#!/usr/bin/python3
"""models/txlgen-get against a local HTTP server (nothing leaves
127.0.0.1: every run sets TXLGEN_GET_ONLY_LOCAL, and the catalog's
addresses are mapped onto the server with TXLGEN_GET_MIRROR).

The server plays the parts the real sources play: the Hugging Face Hub's
resolve/<revision>/<file> (files in git answered with their git blob
SHA-1 as ETag, LFS files redirected to a CDN address with the sha256 in
X-Linked-Etag, X-Linked-Size and X-Repo-Commit; a renamed repository
answered with a relative redirect, as the Hub does), and plain static
servers like dl.fbaipublicfiles.com and mattmahoney.net; all with Range
requests, and on demand a connection dropped or stalled part-way, a body
that differs from its stated digest, a 404.  It serves a tiny Hugging Face
TransfoXL directory (config.json, pytorch_model.bin in the legacy
torch.save format of the real 2019 file, vocab.bin) made from
tests/make_random_model.py's random model, run as a command.

Programs: $TXLGEN (meson test sets it) or build/cmd/txlgen; the getter
$TXLGEN_GET or models/txlgen-get.  Run: /usr/bin/python3 tests/test_get.py
"""

import hashlib
import http.server
import importlib.machinery
import importlib.util
import io
import json
import os
import pty
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unicodedata
import unittest
import zipfile

import srctree  # noqa: F401 (models/ on sys.path)
from txlgen.conventions import LAYER_NORM_EPS, REL_PARTIAL  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
GET = os.environ.get("TXLGEN_GET") or os.path.join(ROOT, "models",
                                                   "txlgen-get")
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") \
    else sys.executable


def find_txlgen():
    path = os.environ.get("TXLGEN") or os.path.join(ROOT, "build", "cmd",
                                                    "txlgen")
    return path if os.path.exists(path) else None


TXLGEN = find_txlgen()


def load_getter():
    """The getter as a module (for its data preparation)."""
    loader = importlib.machinery.SourceFileLoader("txlgen_get", GET)
    spec = importlib.util.spec_from_loader("txlgen_get", loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


def sha256(b):
    return hashlib.sha256(b).hexdigest()


def git_sha1(b):
    return hashlib.sha1(b"blob %d\0" % len(b) + b).hexdigest()


# ---------------------------------------------------------------------------
# The server

class Route:
    """What a path answers.  kind: "file" (a body, with Range), "redirect"
    (status and Location), "lfs" (the Hub's redirect of an LFS file to its
    CDN address), "git" (the Hub's answer for a file in git), "custom"
    (fn(handler, Range header) writes the whole answer: a hostile
    server)."""

    def __init__(self, kind, body=b"", location=None, status=302,
                 headers=None, fn=None):
        self.fn = fn
        self.kind, self.body, self.location = kind, body, location
        self.status, self.headers = status, dict(headers or {})
        self.drop_after = None      # close the connection after N bytes
        self.drops = 0              # ...on this many GETs
        self.stall_after = None     # stop sending after N bytes
        self.served = body          # what is sent (differs when corrupt)


class Server:
    def __init__(self):
        self.routes = {}
        self.log = []                   # (path, Range header or None)
        self.release = threading.Event()
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_GET(self):
                outer.handle(self)

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0),
                                                     Handler)
        self.httpd.daemon_threads = True
        self.base = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever,
                                       daemon=True)
        self.thread.start()

    def close(self):
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()

    def custom(self, path, fn):
        self.routes[path] = Route("custom", fn=fn)

    def file(self, path, body, **kw):
        r = Route("file", body, **kw)
        self.routes[path] = r
        return r

    def hub(self, repo, rev, name, body, lfs):
        """A file of a Hub repository at revision rev; LFS files are
        served from /cdn/<sha256> after a redirect, as the Hub does."""
        path = f"/hf/{repo}/resolve/{rev}/{name}"
        common = {"X-Repo-Commit": rev}
        if lfs:
            cdn = f"/cdn/lfs/{sha256(body)}"
            self.routes[path] = Route("lfs", location=(
                f"{self.base}{cdn}?X-Amz-Signature=abc"), headers=dict(
                common, **{"X-Linked-Etag": f'"{sha256(body)}"',
                           "X-Linked-Size": str(len(body)),
                           "ETag": f'"{git_sha1(b"pointer")}"'}))
            r = self.file(cdn, body, headers={"ETag": '"cdn-etag"'})
        else:
            r = self.file(path, body, headers=dict(
                common, ETag=f'"{git_sha1(body)}"'))
        return r

    def requests(self, prefix):
        return [x for x in self.log if x[0].startswith(prefix)]

    def handle(self, h):
        path = h.path.split("?")[0]
        rng = h.headers.get("Range")
        self.log.append((path, rng))
        r = self.routes.get(path)
        if r is None:
            # the Hub answers a renamed repository with a relative redirect
            m = re.match(r"/hf/legacy-([\w-]+)/(resolve/.*)", path)
            if m:
                r = Route("redirect", status=307,
                          location=f"/hf/tiny-org/{m.group(1)}/{m.group(2)}")
            else:
                body = b"Entry not found"
                h.send_response(404)
                h.send_header("X-Error-Code", "EntryNotFound")
                h.send_header("Content-Length", str(len(body)))
                h.end_headers()
                h.wfile.write(body)
                return
        if r.kind == "custom":
            h.close_connection = True
            try:
                r.fn(h, rng)
            except (BrokenPipeError, ConnectionResetError):
                pass                    # the getter hung up: the point
            return
        if r.kind in ("redirect", "lfs"):
            h.send_response(r.status)
            h.send_header("Location", r.location)
            for k, v in r.headers.items():
                h.send_header(k, v)
            h.send_header("Content-Length", "0")
            h.end_headers()
            return
        body, start = r.served, 0
        if rng:
            m = re.fullmatch(r"bytes=(\d+)-", rng)
            start = int(m.group(1))
            if start >= len(body):
                h.send_response(416)
                h.send_header("Content-Range", f"bytes */{len(body)}")
                h.send_header("Content-Length", "0")
                h.end_headers()
                return
            h.send_response(206)
            h.send_header("Content-Range",
                          f"bytes {start}-{len(body) - 1}/{len(body)}")
        else:
            h.send_response(200)
        h.send_header("Accept-Ranges", "bytes")
        h.send_header("Content-Length", str(len(body) - start))
        for k, v in r.headers.items():
            h.send_header(k, v)
        h.end_headers()
        end = len(body)
        if r.drops and r.drop_after is not None and r.drop_after > start:
            r.drops -= 1
            end = r.drop_after
        elif r.stall_after is not None and r.stall_after > start:
            h.wfile.write(body[start:r.stall_after])
            h.wfile.flush()
            self.release.wait(60)
            h.close_connection = True
            return
        h.wfile.write(body[start:end])
        h.wfile.flush()
        if end < len(body):
            h.close_connection = True
            h.connection.shutdown(socket.SHUT_RDWR)


# ---------------------------------------------------------------------------
# A tiny Hugging Face TransfoXL directory

REV = "0123456789abcdef0123456789abcdef01234567"
WORDS = ("<eos> the , . <unk> of and in to a = was @-@ The cat sat on mat "
         "dog").split()


def make_hf_dir(outdir):
    """config.json, pytorch_model.bin and vocab.bin as the Hub's
    transfo-xl-wt103 has them (adaptive input and softmax, per-layer
    relative biases, legacy torch.save files), from a random model."""
    import torch
    work = os.path.join(outdir, "random")
    r = subprocess.run(
        [PYTHON, os.path.join(HERE, "make_random_model.py"), "-o", work,
         "--cutoffs", "40,120", "--div-val", "2", "--d-embed", "32",
         "--tie-projs", "false,true,true", "--untie-r", "true",
         "--tgt-len", "6", "--mem-len", "8", "--same-length", "true",
         "--clamp-len", "6", "--seed", "5"],
        capture_output=True, text=True, timeout=600,
        env=dict(os.environ, OMP_WAIT_POLICY="PASSIVE"))
    if r.returncode:
        raise RuntimeError(f"make_random_model.py: {r.stderr}")
    with open(os.path.join(work, "cfg.json")) as f:
        cfg = json.load(f)
    state = torch.load(os.path.join(work, "state.pt"))
    hf = {}
    for k, v in state.items():
        if k in ("r_w_bias", "r_r_bias"):
            for i in range(cfg["n_layer"]):
                hf[f"transformer.layers.{i}.dec_attn.{k}"] = v[i].clone()
        elif k.startswith("crit."):
            hf[k] = v
        else:
            hf["transformer." + k] = v
    d = os.path.join(outdir, "hf")
    os.makedirs(d)
    torch.save(hf, os.path.join(d, "pytorch_model.bin"),
               _use_new_zipfile_serialization=False)
    n = cfg["n_token"]
    syms = WORDS + [f"w{i}" for i in range(n - len(WORDS))]
    torch.save({"special": ["<eos>"], "min_freq": 0, "max_size": None,
                "lower_case": False, "delimiter": None, "vocab_file": None,
                "counter": {s: 1 for s in syms}, "idx2sym": syms,
                "sym2idx": {s: i for i, s in enumerate(syms)},
                "eos_idx": 0, "unk_idx": syms.index("<unk>")},
               os.path.join(d, "vocab.bin"),
               _use_new_zipfile_serialization=False)
    conf = {"adaptive": True, "architectures": ["TransfoXLLMHeadModel"],
            "attn_type": REL_PARTIAL, "clamp_len": cfg["clamp_len"],
            "cutoffs": cfg["cutoffs"], "d_embed": cfg["d_embed"],
            "d_head": cfg["d_head"], "d_inner": cfg["d_inner"],
            "d_model": cfg["d_model"], "div_val": cfg["div_val"],
            "dropatt": 0.0, "dropout": 0.1, "eos_token_id": 0, "ext_len": 0,
            "init": "normal", "init_range": 0.01, "init_std": 0.02,
            "layer_norm_epsilon": LAYER_NORM_EPS["huggingface"],
            "mem_len": cfg["mem_len"],
            "model_type": "transfo-xl", "n_head": cfg["n_head"],
            "n_layer": cfg["n_layer"], "pre_lnorm": False,
            "proj_init_std": 0.01, "same_length": True,
            "sample_softmax": -1, "tgt_len": cfg["tgt_len"],
            "tie_projs": cfg["tie_projs"], "tie_weight": True,
            "untie_r": True, "vocab_size": n}
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(conf, f)
    return d, os.path.join(work, "m.bin")


def read(path):
    with open(path, "rb") as f:
        return f.read()


def meta(path):
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        return json.loads(f.read(n))["__metadata__"]


def drop_meta(path, key):
    """Rewrite a model file's header without metadata key (padded to the
    same length), as a converter that did not write it left it."""
    with open(path, "r+b") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
        del header["__metadata__"][key]
        raw = json.dumps(header, separators=(",", ":")).encode()
        assert len(raw) <= n
        f.seek(8)
        f.write(raw + b" " * (n - len(raw)))


# ---------------------------------------------------------------------------

class Base(unittest.TestCase):
    """A local server, a tiny Hub directory, and the getter run with its
    data, cache and models directories in a temporary directory."""

    @classmethod
    def setUpClass(cls):
        cls.root = tempfile.mkdtemp(prefix="txlgen-get-")
        cls.hfdir, cls.small_model = make_hf_dir(cls.root)
        cls.files = {fn: read(os.path.join(cls.hfdir, fn)) for fn in
                     ("config.json", "pytorch_model.bin", "vocab.bin")}

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.root, ignore_errors=True)

    def setUp(self):
        self.server = Server()
        self.addCleanup(self.server.close)
        self.tmp = tempfile.mkdtemp(dir=self.root)
        self.data_home = os.path.join(self.tmp, "data")
        self.cache = os.path.join(self.tmp, "cache", "txlgen", "downloads")
        self.models = os.path.join(self.data_home, "txlgen", "models")
        self.mirror = (f"https://huggingface.co={self.server.base}/hf "
                       f"https://dl.fbaipublicfiles.com={self.server.base}/fb "
                       f"http://mattmahoney.net={self.server.base}/mm")

    # -- helpers ------------------------------------------------------------

    def env(self, **kw):
        e = dict(os.environ, XDG_DATA_HOME=self.data_home,
                 XDG_CACHE_HOME=os.path.join(self.tmp, "cache"),
                 TXLGEN_GET_ONLY_LOCAL="1", TXLGEN_GET_MIRROR=self.mirror,
                 OMP_WAIT_POLICY="PASSIVE")
        e.pop("TXLGEN_CONVERT", None)
        e.update(kw)
        return e

    def get(self, *args, env=None, timeout=300):
        p = subprocess.run([PYTHON, GET, *args], capture_output=True,
                           text=True, env=env or self.env(), timeout=timeout)
        return p.returncode, p.stdout, p.stderr

    def serve_tiny(self, repo="tiny-xl", corrupt=None):
        """The tiny directory at REV; corrupt: a file whose body differs
        from what the server states for it."""
        routes = {}
        for fn, body in self.files.items():
            r = self.server.hub(f"tiny-org/{repo}", REV, fn, body,
                                lfs=fn != "config.json")
            if fn == corrupt:
                b = bytearray(body)
                b[len(b) // 2] ^= 0xff
                r.served = bytes(b)
            routes[fn] = r
        return routes

    def catalog(self, models, datasets=None, name="catalog.json"):
        path = os.path.join(self.tmp, name)
        with open(path, "w") as f:
            json.dump({"models": models, "datasets": datasets or {}}, f)
        return path

    def tiny_entry(self, repo="legacy-tiny-xl", pin=True, **kw):
        url = f"https://huggingface.co/{repo}/resolve/{REV}/"
        files = [{"name": "config.json", "url": url + "config.json",
                  "size": len(self.files["config.json"])},
                 {"name": "pytorch_model.bin",
                  "url": url + "pytorch_model.bin"},
                 {"name": "vocab.bin", "url": url + "vocab.bin"}]
        if pin:
            files[1]["sha256"] = sha256(self.files["pytorch_model.bin"])
        e = {"family": "transformer-xl", "what": "a tiny test model",
             "source": "https://huggingface.co/tiny-org/tiny-xl",
             "server": "huggingface", "revision": REV, "files": files,
             "convert": ["--weights", "{dir}"],
             "description": "tiny random Transformer-XL; from the tests"}
        e.update(kw)
        return e

    def stand_in_converter(self, body, name="convert.py"):
        """A convert.py (with every family's option) that writes what
        `body` says to its -o file, `out`."""
        path = os.path.join(self.tmp, name)
        with open(path, "w") as f:
            f.write("import os, shutil, sys, time\n"
                    "if '--help' in sys.argv:\n"
                    "    print('usage: convert.py --weights W "
                    "--vocab-corpus C -o OUT')\n"
                    "    sys.exit(0)\n"
                    "out = sys.argv[sys.argv.index('-o') + 1]\n" + body)
        return path

    def interrupted(self, args, ready, env=None):
        """The getter run with @args and sent SIGINT once ready() (within
        120 s, the getter running until then): (exit status, stdout,
        stderr)."""
        p = subprocess.Popen([PYTHON, GET, *args], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True,
                             env=env or self.env())
        try:
            deadline = time.monotonic() + 120
            while not ready():
                self.assertIsNone(p.poll(), p.stderr.read() if p.poll()
                                  is not None else "")
                self.assertLess(time.monotonic(), deadline)
                time.sleep(0.05)
            p.send_signal(signal.SIGINT)
            out, err = p.communicate(timeout=60)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
        return p.returncode, out, err

    def serve_broken(self, cut):
        """The tiny model, its pytorch_model.bin's connection closed once
        after @cut bytes: (that file, cut, catalog)."""
        routes = self.serve_tiny()
        r = routes["pytorch_model.bin"]
        r.drop_after, r.drops = cut, 1
        return (self.files["pytorch_model.bin"], cut,
                self.catalog({"tiny": self.tiny_entry()}))

    def serve_endless(self, name, pins, status=200, headers=()):
        """Catalog entry t of one file, @name (@pins: its size, digest...),
        which the server sends without end: (catalog, [bytes sent])."""
        fn, sent = endless(status, headers)
        self.server.custom("/fb/t/" + name, fn)
        return self.catalog({"t": self.plain_entry((name, pins))}), sent

    def copy_converter(self):
        """A convert.py that writes the small model to its -o file: for
        tests that are about the files."""
        return self.stand_in_converter(
            f"shutil.copyfile({self.small_model!r}, out)\n",
            "copy-convert.py")

    def plain_entry(self, *files, **kw):
        """A model of files (name, spec) on a plain static server, the
        dl.fbaipublicfiles.com layout: served at /fb/t/NAME."""
        e = {"family": "transformer-xl", "what": "a test model",
             "files": [dict(name=n, url=f"https://dl.fbaipublicfiles.com/"
                            f"t/{n}", **spec) for n, spec in files],
             "convert": ["--weights", "{dir}"]}
        e.update(kw)
        return e

    def get_plain(self, *args, **env):
        """The getter with the copying converter."""
        return self.get(*args, env=self.env(
            TXLGEN_CONVERT=self.copy_converter(), **env))

    def leave_part(self, model, name, content, url=None):
        """A partial download of an earlier run in the cache."""
        d = os.path.join(self.cache, "models", model)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, name + ".part"), "wb") as f:
            f.write(content)
        with open(os.path.join(d, name + ".part.json"), "w") as f:
            json.dump({"url": url or "https://dl.fbaipublicfiles.com/t/" +
                       name, "validator": None}, f)
        return os.path.join(d, name + ".part")

    def assert_clean_error(self, rc, code, err, *words):
        self.assertEqual(rc, code, err)
        self.assertNotIn("Traceback", err)
        last = err.splitlines()[-1]
        for w in words:
            self.assertIn(w, last)

    def assert_nothing_installed(self, name="tiny"):
        if os.path.isdir(self.models):
            self.assertEqual(os.listdir(self.models), [], name)

    def assert_one_line(self, err):
        self.assertEqual(len(err.strip().splitlines()), 1, err)


@unittest.skipIf(TXLGEN is None, "txlgen not built")
class Getter(Base):

    # -- the whole way ------------------------------------------------------

    def test_get_convert_install_and_generate(self):
        self.serve_tiny()
        cat = self.catalog({"tiny": self.tiny_entry()})
        rc, out, err = self.get("tiny", "--catalog", cat)
        self.assertEqual(rc, 0, err)
        path = os.path.join(self.models, "tiny.bin")
        self.assertEqual(out.strip(), path)
        # the model convert.py makes of the same files, byte for byte
        ref = os.path.join(self.tmp, "ref.bin")
        p = subprocess.run([PYTHON, os.path.join(ROOT, "models", "convert.py"),
                            "--weights", self.hfdir, "-o", ref, "--dtype",
                            "Q8_0", "--description",
                            "tiny random Transformer-XL; from the tests"],
                           capture_output=True, text=True, timeout=300)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(read(path), read(ref))
        self.assertEqual(meta(path)["description"],
                         "tiny random Transformer-XL; from the tests")
        # the renamed repository's relative redirect, then the CDN
        log = self.server.log
        self.assertIn(("/hf/legacy-tiny-xl/resolve/%s/vocab.bin" % REV, None),
                      log)
        self.assertIn((f"/cdn/lfs/{sha256(self.files['vocab.bin'])}", None),
                      log)
        self.assertIn("matches the pinned sha256", err)
        self.assertIn("git SHA-1 the server states", err)
        # downloads removed after installing; nothing else in the directory
        self.assertEqual(os.listdir(self.models), ["tiny.bin"])
        self.assertFalse(os.path.exists(os.path.join(self.cache, "models",
                                                     "tiny")))
        # txlgen generates with it: words of the served vocabulary
        words = set(WORDS) | {f"w{i}" for i in range(400)}
        argv = ["-p", "the cat", "--echo", "-n", "12", "--seed", "3",
                "--threads", "1"]
        r = subprocess.run([TXLGEN, "--model", path] + argv,
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(r.stdout.startswith("the cat "), r.stdout)
        self.assertGreater(len(r.stdout.split()), 4)
        self.assertLessEqual(set(r.stdout.split()), words)
        by_path = r.stdout
        # a second get finds it installed and fetches nothing
        n = len(self.server.log)
        rc, out, err = self.get("tiny", "--catalog", cat)
        self.assertEqual((rc, out.strip()), (0, path), err)
        self.assertIn("installed already", err)
        self.assertEqual(len(self.server.log), n)
        # the same by name, where this txlgen looks models up by name
        r = subprocess.run([TXLGEN, "-m", "tiny"] + argv, capture_output=True,
                           text=True, timeout=120, cwd=self.tmp,
                           env=self.env())
        if r.returncode != 0 and "tiny" in r.stderr and \
                "No such file" in r.stderr:
            self.skipTest("this txlgen does not look models up by name")
        self.assertEqual((r.returncode, r.stdout), (0, by_path), r.stderr)

    def test_installed_by_an_older_converter(self):
        """A model whose catalog entry needs a newer converter than the
        one that wrote the installed file (no converter_version: 1) is
        not fetched again, but txlgen-get says to convert it again and
        how; a file of the current converter is just installed already;
        --force converts it again."""
        self.serve_tiny()
        cat = self.catalog({"tiny": self.tiny_entry(
            min_converter_version=2,
            why_convert_again="its clusters were swapped")})
        rc, out, err = self.get("tiny", "--catalog", cat)
        self.assertEqual(rc, 0, err)
        path = out.strip()
        self.assertEqual(meta(path)["converter_version"], "2")
        rc, out, err = self.get("tiny", "--catalog", cat)
        self.assertEqual((rc, out.strip()), (0, path), err)
        self.assertIn("installed already", err)
        self.assertNotIn("convert it again", err)
        drop_meta(path, "converter_version")
        n = len(self.server.log)
        rc, out, err = self.get("tiny", "--catalog", cat)
        self.assertEqual((rc, out.strip()), (0, path), err)
        self.assertIn("was converted before converter version 2 (its "
                      "clusters were swapped): convert it again with: "
                      "txlgen-get --force tiny", err)
        self.assert_one_line(err)
        self.assertEqual(len(self.server.log), n)
        rc, out, err = self.get("tiny", "--catalog", cat, "--force")
        self.assertEqual(rc, 0, err)
        self.assertEqual(meta(path)["converter_version"], "2")

    def test_keep_downloads_and_dtype(self):
        self.serve_tiny()
        cat = self.catalog({"tiny": self.tiny_entry()})
        rc, _, err = self.get("tiny", "--catalog", cat, "--dtype", "f32",
                              "--keep-downloads")
        self.assertEqual(rc, 0, err)
        self.assertEqual(meta(os.path.join(self.models, "tiny.bin"))
                         ["description"],
                         "tiny random Transformer-XL; from the tests")
        kept = os.path.join(self.cache, "models", "tiny")
        for fn, body in self.files.items():
            self.assertEqual(read(os.path.join(kept, fn)), body, fn)
        # F32: the converter's F32 file of the same weights
        with open(os.path.join(self.models, "tiny.bin"), "rb") as f:
            n = int.from_bytes(f.read(8), "little")
            header = json.loads(f.read(n))
        self.assertEqual({v["dtype"] for k, v in header.items()
                          if k.endswith(".weight")}, {"F32"})
        # --force converts again from the kept files, fetching nothing
        n = len(self.server.log)
        rc, _, err = self.get("tiny", "--catalog", cat, "--force")
        self.assertEqual(rc, 0, err)
        self.assertEqual(len(self.server.log), n)
        self.assertIn("using the verified copy", err)

    # -- digests ------------------------------------------------------------

    def test_body_that_differs_from_its_digest_is_refused(self):
        for corrupt, pinned in (("pytorch_model.bin", True),
                                ("vocab.bin", False),
                                ("config.json", False)):
            with self.subTest(corrupt=corrupt):
                self.server.routes.clear()
                self.serve_tiny(corrupt=corrupt)
                cat = self.catalog({"tiny": self.tiny_entry()})
                cache = os.path.join(self.tmp, "cache-" + corrupt)
                rc, out, err = self.get("tiny", "--catalog", cat, "--cache",
                                        cache)
                self.assertEqual(rc, 4, err)
                self.assert_one_line(err.splitlines()[-1])
                last = err.splitlines()[-1]
                self.assertIn(corrupt, last)
                body = self.files[corrupt]
                if corrupt == "config.json":
                    self.assertIn(f"git blob SHA-1 ", last)
                    self.assertIn(git_sha1(body), last)
                else:
                    self.assertIn(sha256(body), last)
                self.assertEqual(out, "")
                self.assert_nothing_installed()
                # the bad file is not kept
                self.assertFalse(os.path.exists(os.path.join(
                    cache, "models", "tiny", corrupt)))
                self.assertFalse(os.path.exists(os.path.join(
                    cache, "models", "tiny", corrupt + ".part")))

    def test_server_digest_that_differs_from_the_pin_is_refused(self):
        self.serve_tiny()
        e = self.tiny_entry()
        e["files"][1]["sha256"] = "ab" * 32
        rc, _, err = self.get("tiny", "--catalog", self.catalog({"tiny": e}))
        self.assertEqual(rc, 4, err)
        self.assertIn("the server states sha256 "
                      f"{sha256(self.files['pytorch_model.bin'])}, the "
                      f"catalog pins {'ab' * 32}", err)
        # refused before the download: the CDN was not asked for it
        self.assertEqual(self.server.requests(
            f"/cdn/lfs/{sha256(self.files['pytorch_model.bin'])}"), [])
        self.assert_nothing_installed()
        # a revision other than the pinned one is refused too
        e = self.tiny_entry(revision="f" * 40)
        rc, _, err = self.get("tiny", "--catalog", self.catalog({"tiny": e}))
        self.assertEqual(rc, 4, err)
        self.assertIn(f"revision {REV}, the catalog pins {'f' * 40}", err)

    def test_the_real_catalog_pins_are_enforced(self):
        # files at the real wt103 addresses (mapped onto the server) that
        # are not the published ones: config.json padded to the pinned
        # 856 bytes passes (its git SHA-1 is the server's), the sha256
        # the server states for pytorch_model.bin is not the pinned one
        conf = self.files["config.json"].rstrip()
        conf += b" " * (856 - len(conf) - 1) + b"\n"
        rev = "40a186da79458c9f9de846edfaea79c412137f97"
        self.server.hub("transfo-xl/transfo-xl-wt103", rev, "config.json",
                        conf, lfs=False)
        for fn in ("pytorch_model.bin", "vocab.bin"):
            self.server.hub("transfo-xl/transfo-xl-wt103", rev, fn,
                            self.files[fn], lfs=True)
        rc, _, err = self.get("wt103")
        self.assertEqual(rc, 4, err)
        want = ("edd5e62f5edb8ef65703ef827ab0bcd16ab29f2b853cfd9d11d81faa1bc7"
                "a0fb")
        last = err.splitlines()[-1]
        self.assertIn("pytorch_model.bin", last)
        self.assertIn(f"the catalog pins {want}", last)
        # refused before the download
        self.assertEqual(self.server.requests("/cdn/"), [])
        self.assertIn(("/hf/transfo-xl/transfo-xl-wt103/resolve/"
                       f"{rev}/config.json", None), self.server.log)
        self.assert_nothing_installed()

    # -- broken, resumed, interrupted ---------------------------------------

    def test_broken_download_resumes_with_a_range_request(self):
        body, cut, cat = self.serve_broken(len(self.files[
            "pytorch_model.bin"]) // 3)
        rc, _, err = self.get("tiny", "--catalog", cat)
        self.assertEqual(rc, 0, err)
        cdn = self.server.requests(f"/cdn/lfs/{sha256(body)}")
        self.assertEqual(cdn, [(cdn[0][0], None),
                               (cdn[0][0], f"bytes={cut}-")])
        self.assertIn("resuming", err)
        self.assertTrue(os.path.exists(os.path.join(self.models,
                                                    "tiny.bin")))

    def test_broken_download_kept_for_the_next_run(self):
        body, cut, cat = self.serve_broken(len(self.files[
            "pytorch_model.bin"]) // 2)
        rc, out, err = self.get("tiny", "--catalog", cat, "--retries", "0")
        self.assertEqual(rc, 3, err)
        self.assert_one_line(err.splitlines()[-1])
        part = os.path.join(self.cache, "models", "tiny",
                            "pytorch_model.bin.part")
        self.assertIn(part, err.splitlines()[-1])
        self.assertEqual(read(part), body[:cut])
        self.assert_nothing_installed()
        rc, _, err = self.get("tiny", "--catalog", cat, "--retries", "0")
        self.assertEqual(rc, 0, err)
        self.assertEqual(self.server.requests(f"/cdn/lfs/{sha256(body)}")[-1]
                         [1], f"bytes={cut}-")
        self.assertFalse(os.path.exists(part))

    def test_interrupt_keeps_the_partial_download_and_installs_nothing(self):
        routes = self.serve_tiny()
        body = self.files["pytorch_model.bin"]
        cut = len(body) // 4
        routes["pytorch_model.bin"].stall_after = cut
        cat = self.catalog({"tiny": self.tiny_entry()})
        part = os.path.join(self.cache, "models", "tiny",
                            "pytorch_model.bin.part")
        rc, _, err = self.interrupted(
            ["tiny", "--catalog", cat],
            lambda: os.path.exists(part) and os.path.getsize(part) == cut)
        self.assertEqual(rc, 130, err)
        self.assertIn("interrupted", err)
        self.assertIn(part, err)
        self.assertEqual(read(part), body[:cut])
        self.assert_nothing_installed()
        # the next run resumes it
        routes["pytorch_model.bin"].stall_after = None
        rc, _, err = self.get("tiny", "--catalog", cat)
        self.assertEqual(rc, 0, err)
        self.assertEqual(self.server.requests(f"/cdn/lfs/{sha256(body)}")[-1]
                         [1], f"bytes={cut}-")

    def test_complete_partial_file_is_verified(self):
        # a partial file that has every byte: the server answers its Range
        # request with 416, and the digest the download began with decides
        self.serve_tiny()
        cat = self.catalog({"tiny": self.tiny_entry()})
        body = self.files["config.json"]
        d = os.path.join(self.cache, "models", "tiny")
        os.makedirs(d)
        path = f"/hf/tiny-org/tiny-xl/resolve/{REV}/config.json"

        def leave_partial(content):
            with open(os.path.join(d, "config.json.part"), "wb") as f:
                f.write(content)
            with open(os.path.join(d, "config.json.part.json"), "w") as f:
                json.dump({"url": "https://huggingface.co/legacy-tiny-xl/"
                           f"resolve/{REV}/config.json",
                           "validator": git_sha1(body), "sha256": None,
                           "git_sha1": git_sha1(body)}, f)
        # the right size, not the right content
        leave_partial(body.replace(b"{", b" ", 1))
        rc, _, err = self.get("tiny", "--catalog", cat)
        self.assertEqual(rc, 4, err)
        self.assertIn(f"git blob SHA-1 {git_sha1(body.replace(b'{', b' ', 1))}"
                      f", the server states {git_sha1(body)}",
                      err.splitlines()[-1])
        self.assertIn((path, f"bytes={len(body)}-"), self.server.log)
        self.assert_nothing_installed()
        # the file itself: used without downloading it again
        self.server.log.clear()
        leave_partial(body)
        rc, _, err = self.get("tiny", "--catalog", cat)
        self.assertEqual(rc, 0, err)
        self.assertEqual(self.server.requests(path),
                         [(path, f"bytes={len(body)}-")])

    # -- progress -----------------------------------------------------------

    def test_progress_only_on_a_terminal(self):
        self.serve_tiny()
        cat = self.catalog({"tiny": self.tiny_entry()})
        master, slave = pty.openpty()
        p = subprocess.Popen([PYTHON, GET, "tiny", "--catalog", cat,
                              "--keep-downloads"], stdout=subprocess.DEVNULL,
                             stderr=slave, env=self.env())
        os.close(slave)
        tty = b""
        while True:
            try:
                b = os.read(master, 65536)
            except OSError:
                break
            if not b:
                break
            tty += b
        os.close(master)
        p.wait(timeout=300)
        self.assertEqual(p.returncode, 0, tty)
        size = load_getter().human(len(self.files["pytorch_model.bin"]))
        self.assertRegex(tty.decode(), r"\rpytorch_model\.bin +100\.0% +"
                         + re.escape(f"{size} of {size}"))
        # not a terminal: no progress line
        rc, _, err = self.get("tiny", "--catalog", cat, "--force",
                              "--cache", os.path.join(self.tmp, "c2"))
        self.assertEqual(rc, 0, err)
        self.assertNotIn("\r", err)
        self.assertNotIn("%", err)

    # -- errors -------------------------------------------------------------

    def test_usage_errors(self):
        for args, code, words in (
                (["wt10"], 2, ["unknown model 'wt10'", "did you mean wt103"]),
                (["wt103", "--dtype", "Q9"], 2, ["--dtype", "Q9"]),
                ([], 2, ["NAME"]),
                (["wt103", "--list"], 2, ["NAME"]),
                (["wt103", "--retries", "-1"], 2, ["--retries"]),
                (["wt103", "--mirror", "nonsense"], 2, ["nonsense"]),
                (["wt103", "--catalog", "/nonexistent/c.json"], 2,
                 ["/nonexistent/c.json"])):
            with self.subTest(args=args):
                rc, out, err = self.get(*args)
                self.assertEqual(rc, code, err)
                self.assert_one_line(err)
                for w in words:
                    self.assertIn(w, err)
                self.assertEqual(out, "")
        self.assertEqual(self.server.log, [])

    def test_404_and_refused_addresses(self):
        self.serve_tiny()
        e = self.tiny_entry()
        e["files"][2]["url"] = e["files"][2]["url"].replace("vocab.bin",
                                                            "vocab.pkl")
        cases = [(e, 3, ["vocab.pkl", "HTTP 404"])]
        e = self.tiny_entry()
        e["files"][0]["url"] = "https://example.invalid/config.json"
        cases.append((e, 3, ["https://example.invalid/config.json",
                             "TXLGEN_GET_ONLY_LOCAL"]))
        self.server.routes["/hf/tiny-org/evil/resolve/x/config.json"] = \
            Route("redirect", location="https://evil.example/config.json")
        self.server.routes["/hf/tiny-org/cdn/resolve/x/config.json"] = \
            Route("redirect", location="https://cdn-lfs.hf.co/x/config.json")
        for repo, words in (("evil", ["refused a redirect to "
                                      "https://evil.example"]),
                            ("cdn", ["https://cdn-lfs.hf.co/x/config.json",
                                     "TXLGEN_GET_ONLY_LOCAL"])):
            e = self.tiny_entry()
            e["files"][0]["url"] = (f"https://huggingface.co/tiny-org/{repo}"
                                    "/resolve/x/config.json")
            cases.append((e, 3, words))
        for e, code, words in cases:
            with self.subTest(words=words):
                rc, out, err = self.get("tiny", "--catalog",
                                        self.catalog({"tiny": e}))
                self.assertEqual(rc, code, err)
                last = err.splitlines()[-1]
                for w in words:
                    self.assertIn(w, last)
                self.assertEqual(out, "")
                self.assert_nothing_installed()

    def test_conversion_failure_installs_nothing(self):
        self.serve_tiny()
        e = self.tiny_entry()
        e["convert"] = ["--weights", "{dir}", "--config", "/nonexistent.json"]
        rc, out, err = self.get("tiny", "--catalog", self.catalog({"tiny": e}))
        self.assertEqual(rc, 1, err)
        self.assertIn("conversion failed", err.splitlines()[-1])
        self.assertIn("/nonexistent.json", err.splitlines()[-1])
        self.assert_nothing_installed()

    def test_what_the_converter_writes_is_checked(self):
        # a converter that exits 0 without writing a model file
        self.serve_tiny()
        conv = self.stand_in_converter(
            "open(out, 'wb').write(b'\\x10' + bytes(7) + b'not json')\n")
        rc, out, err = self.get("tiny", "--catalog", self.catalog(
            {"tiny": self.tiny_entry()}), env=self.env(TXLGEN_CONVERT=conv))
        self.assertEqual(rc, 1, err)
        self.assertIn("did not write a txlgen model", err.splitlines()[-1])
        self.assertEqual(out, "")
        self.assert_nothing_installed()

    def test_interrupt_during_conversion_installs_nothing(self):
        self.serve_tiny()
        marker = os.path.join(self.tmp, "converting")
        conv = self.stand_in_converter(
            "open(out, 'wb').write(b'half a model')\n"
            f"open({marker!r}, 'w').write(str(os.getpid()))\n"
            "time.sleep(120)\n")
        # SIGINT to the getter only
        rc, _, err = self.interrupted(
            ["tiny", "--catalog", self.catalog({"tiny": self.tiny_entry()})],
            lambda: os.path.exists(marker) and read(marker),
            env=self.env(TXLGEN_CONVERT=conv))
        child = int(read(marker))
        self.assertEqual(rc, 130, err)
        self.assertIn("nothing was installed", err)
        self.assert_nothing_installed()
        # the converter was stopped with it
        with self.assertRaises(ProcessLookupError):
            for _ in range(100):
                os.kill(child, 0)
                time.sleep(0.05)

    # -- the catalog --------------------------------------------------------

    def test_list_aligns_cjk_by_columns(self):
        # a Chinese character takes two columns: descriptions wrap by
        # columns, Chinese (no spaces) between characters, never before
        # its punctuation
        what = ("dwdb/transformer-xl 的古诗模型，字符级：人间三月天，春风十里"
                "柳如烟。江山如画，一时多少豪杰！年年岁岁花相似，岁岁年年人"
                "不同。 then words")
        cat = self.catalog({"poetry": self.tiny_entry(what=what),
                            "tiny": self.tiny_entry(what="a tiny model")})
        rc, out, err = self.get("--list", "--catalog", cat)
        self.assertEqual(rc, 0, err)

        def cols(s):
            return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1
                       for c in s)
        lines = out.splitlines()
        rows = [ln for ln in lines[1:] if not ln.startswith(" ")]
        self.assertEqual([r.split()[0] for r in rows], ["poetry", "tiny"])
        # the status column starts at one column on every row
        starts = {cols(r[:r.index("available")]) for r in rows}
        self.assertEqual(len(starts), 1, rows)
        desc = lines[lines.index(rows[0]) + 1:lines.index(rows[1])]
        desc = [d for d in desc if "://" not in d]
        self.assertGreater(len(desc), 1)
        for d in desc:
            self.assertLessEqual(cols(d), 78, d)
            self.assertNotIn(d.strip()[0], "，。！：")
        self.assertEqual("".join(d.strip() for d in desc).replace(" ", ""),
                         what.replace(" ", ""))

    def test_list_shows_the_real_catalog(self):
        rc, out, err = self.get("--list")
        self.assertEqual(rc, 0, err)
        lines = out.splitlines()
        names = [ln.split()[0] for ln in lines[1:] if not ln.startswith(" ")]
        self.assertEqual(names, ["wt103", "enwik8", "text8", "enwik8-large",
                                 "text8-large", "xl-enwik8", "xl-text8",
                                 "xl-wt103", "xl-lm1b"])
        for addr in ("https://huggingface.co/transfo-xl/transfo-xl-wt103 @ "
                     "40a186da7945",
                     "https://dl.fbaipublicfiles.com/adaptive-span/enwik8.pt",
                     "https://dl.fbaipublicfiles.com/adaptive-span/text8.pt",
                     "https://dl.fbaipublicfiles.com/adaptive-span/"
                     "enwik8_large.pt",
                     "https://dl.fbaipublicfiles.com/adaptive-span/"
                     "text8_large.pt",
                     "http://mattmahoney.net/dc/enwik8.zip",
                     "http://mattmahoney.net/dc/text8.zip",
                     "http://curtis.ml.cmu.edu/datasets/pretrained_xl/"
                     "tf_enwiki8/",
                     "http://curtis.ml.cmu.edu/datasets/pretrained_xl/"
                     "tf_lm1b/",
                     "https://s3.amazonaws.com/research.metamind.io/"
                     "wikitext/wikitext-103-v1.zip"):
            self.assertIn(addr, out)
        row = {ln.split()[0]: ln for ln in lines[1:]
               if not ln.startswith(" ")}
        self.assertIn("available", row["wt103"])
        self.assertRegex(row["wt103"], r"~1\.15 GB")
        # what it is, indented below its row; every line fits 80 columns
        block = out.split("\nwt103 ", 1)[1].split("\nenwik8 ", 1)[0]
        self.assertIn("WikiText-103", block)
        self.assertIn("\n  Transformer-XL", block)
        for ln in lines:
            self.assertLessEqual(len(ln), 80, ln)
        for n in ("enwik8", "text8", "enwik8-large", "text8-large",
                  "xl-enwik8", "xl-text8", "xl-wt103", "xl-lm1b"):
            self.assertIn("available", row[n])
        # an installed model says so
        os.makedirs(self.models)
        shutil.copyfile(self.small_model, os.path.join(self.models,
                                                       "wt103.bin"))
        _, out, _ = self.get("--list")
        self.assertIn("installed", out.splitlines()[1])
        self.assertEqual(self.server.log, [])

    def test_adaptive_span_refused_by_a_converter_without_it(self):
        # a convert.py whose --help lacks --vocab-corpus (an older one)
        old = os.path.join(self.tmp, "convert.py")
        with open(old, "w") as f:
            f.write("import sys\nprint('usage: convert.py --weights W "
                    "--vocab V')\n")
        env = self.env(TXLGEN_CONVERT=old)
        for name in ("enwik8", "text8", "enwik8-large", "text8-large"):
            with self.subTest(name=name):
                rc, out, err = self.get(name, env=env)
                self.assertEqual(rc, 5, err)
                self.assert_one_line(err)
                self.assertIn("adaptive-span", err)
                self.assertIn("--vocab-corpus", err)
        rc, out, err = self.get("--list", env=env)
        self.assertIn("needs the adaptive-span family", out)
        self.assertEqual(self.server.log, [])
        self.assertFalse(os.path.exists(self.cache))


class Completion(unittest.TestCase):
    def test_completion_offers_the_names_and_options(self):
        # bash-completion's helpers stubbed, as tests/test_cli.py does
        def complete(*words):
            stubs = ('_init_completion() { cur=${COMP_WORDS[COMP_CWORD]}; '
                     'prev=${COMP_WORDS[COMP_CWORD-1]}; }\n'
                     '_filedir() { COMPREPLY=(FILE); }\n'
                     'complete() { :; }\n'
                     'source "$0"; shift\n'
                     'COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); '
                     '_txlgen_get "$1"\n'
                     'printf "%s\\n" "${COMPREPLY[@]}"\n')
            p = subprocess.run(["bash", "-c", stubs, os.path.join(
                ROOT, "cmd", "txlgen.bash-completion"), "x", GET, *words],
                capture_output=True, text=True, timeout=120)
            self.assertEqual(p.stderr, "")
            return set(p.stdout.split())
        self.assertEqual(complete(""), set(load_getter().CATALOG["models"]))
        self.assertEqual(complete("text"), {"text8", "text8-large"})
        p = subprocess.run([PYTHON, GET, "--help"], capture_output=True,
                           text=True, timeout=60)
        self.assertEqual(complete("--"), set(re.findall(
            r"(?m)^\s+(?:-\w, )?(--[a-z-]+)", p.stdout)))
        # the types the converter writes, as the getter lists them
        types = subprocess.run([PYTHON, GET, "--list-types"],
                               capture_output=True, text=True,
                               timeout=60).stdout.split()
        self.assertTrue({"F32", "Q8_0", "Q4_0"} <= set(types), types)
        self.assertEqual(complete("--dtype", ""), set(types))
        self.assertEqual(complete("--cache", ""), {"FILE"})


class Manual(unittest.TestCase):
    def test_man_page_renders_and_says_what_the_tool_does(self):
        if not shutil.which("man"):
            self.skipTest("man-db is not installed")
        p = subprocess.run(["man", "--warnings", "-l", os.path.join(
            ROOT, "man", "txlgen-get.1")], capture_output=True, timeout=60,
            env=dict(os.environ, MANWIDTH="80", MAN_KEEP_FORMATTING="0"))
        self.assertEqual(p.returncode, 0)
        self.assertEqual(p.stderr.decode(), "")     # can't break line...
        text = re.sub(r".\x08", "", p.stdout.decode())
        flat = " ".join(text.split())
        # every exit status --help gives, and each option
        h = subprocess.run([PYTHON, GET, "--help"], capture_output=True,
                           text=True, timeout=60).stdout
        codes = re.findall(r"(\d+) [a-z]", h.split("Exit status:")[1]
                           .split("Environment")[0])
        self.assertIn("6", codes)
        for code in codes:
            self.assertRegex(text, rf"(?m)^ +{code}$|^ +{code} ")
        for opt in re.findall(r"(?m)^\s+(--[a-z-]+)", h):
            self.assertIn(opt, flat)
        # no source-tree paths, no test internals, no stale claims
        for words in ("the tests", "tests/", "models/txlgen", "not have yet",
                      "the script holds"):
            self.assertNotIn(words, flat)
        self.assertIn("a6640522afe85d1963ad56c05b0ede0a0c000dddc9671758a6cc"
                      "09b7a38e5232", flat)


# ---------------------------------------------------------------------------
# enwik8 and text8: the data the adaptive-span vocabularies are built from

ENWIK8 = b"a\nb c\n\xffd"          # 8 bytes: train 4, valid 2, test 2
TEXT8 = b" anarchism originated as a term"


class Prepare(unittest.TestCase):
    """The preparation of prep_enwik8.py / prep_text8.py, on small data
    with the expected files written out by hand."""

    @classmethod
    def setUpClass(cls):
        cls.g = load_getter()

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="txlgen-prep-")
        self.addCleanup(shutil.rmtree, self.tmp, True)

    def files(self):
        return {fn: read(os.path.join(self.tmp, fn))
                for fn in sorted(os.listdir(self.tmp))}

    def test_enwik8(self):
        self.g.prepare_enwik8(ENWIK8, self.tmp, 2)
        self.assertEqual(self.files(), {
            "train.txt": b"97 \n 98 32", "train.txt.raw": b"a\nb ",
            "valid.txt": b"99 \n", "valid.txt.raw": b"c\n",
            "test.txt": b"255 100", "test.txt.raw": b"\xffd"})

    def test_enwik8_across_chunks(self):
        # the symbols of a long split are written in pieces: one space
        # between pieces, as between any two symbols
        data = bytes(range(256)) * 9000 + b"xyz"
        self.g.prepare_enwik8(data, self.tmp, 1)
        want = " ".join("\n" if b == 10 else str(b) for b in data[:-2])
        self.assertEqual(self.files()["train.txt"], want.encode())

    def test_text8(self):
        self.g.prepare_text8(TEXT8, self.tmp, 5)
        self.assertEqual(self.files(), {
            "train.txt": b"a n a r c h i s m _ o r i g i n a t e d",
            "train.txt.raw": b" anarchism originated",
            "valid.txt": b"a s _ a", "valid.txt.raw": b" as a",
            "test.txt": b"t e r m", "test.txt.raw": b" term"})


@unittest.skipIf(TXLGEN is None, "txlgen not built")
def span_entries(zip_bytes, member, convert=(), **data):
    """The catalog entries of a tiny adaptive-span model (enwik8.pt, more
    @convert arguments) and of its data set: enwik8.zip of @zip_bytes,
    its member @member, more @data keys."""
    pt = {"family": "adaptive-span", "what": "tiny adaptive span",
          "source": "https://dl.fbaipublicfiles.com/adaptive-span/enwik8.pt",
          "files": [{"name": "enwik8.pt", "url":
                     "https://dl.fbaipublicfiles.com/adaptive-span/"
                     "enwik8.pt"}],
          "data": "enwik8",
          "convert": ["--weights", "{file:enwik8.pt}", "--vocab-corpus",
                      "{data}/train.txt", "--dataset", "enwik8", *convert],
          "description": "tiny adaptive span; from the tests"}
    ds = {"enwik8": dict({
        "what": "enwik8", "files": [{
            "name": "enwik8.zip", "url": "http://mattmahoney.net/dc/"
            "enwik8.zip", "size": len(zip_bytes),
            "sha256": sha256(zip_bytes)}],
        "member": "enwik8", "member_size": len(member),
        "member_sha1": hashlib.sha1(member).hexdigest(),
        "format": "enwik8"}, **data)}
    return pt, ds


class AdaptiveSpanFlow(Base):
    """The whole way for an adaptive-span model with a converter that
    has --vocab-corpus (a stand-in that records its arguments): the .pt
    from the fbaipublicfiles layout, the data set from the mattmahoney.net
    layout, prepared, then converted and installed."""

    def fake_converter(self):
        path = os.path.join(self.tmp, "convert.py")
        with open(path, "w") as f:
            f.write(f"""import hashlib, json, shutil, sys
if "--help" in sys.argv:
    print("usage: convert.py --weights W --vocab-corpus TRAIN ...")
    sys.exit(0)
a = sys.argv[1:]
w = open(a[a.index("--weights") + 1], "rb").read()
c = open(a[a.index("--vocab-corpus") + 1], "rb").read()
json.dump({{"args": a, "weights_sha256": hashlib.sha256(w).hexdigest(),
           "corpus": c.decode("latin-1")}},
          open({json.dumps(os.path.join(self.tmp, "convert.log"))}, "w"))
shutil.copyfile({json.dumps(self.small_model)}, a[a.index("-o") + 1])
""")
        return path

    def entries(self, zip_bytes, prepared_sha1):
        pt, ds = span_entries(zip_bytes, ENWIK8, test_size=2,
                              prepared_sha1=prepared_sha1)
        return self.catalog({"enwik8-tiny": pt}, ds)

    def test_adaptive_span_data_and_conversion(self):
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
            z.writestr("enwik8", ENWIK8)
        zbytes = buf.getvalue()
        weights = os.urandom(5000)
        self.server.file("/fb/adaptive-span/enwik8.pt", weights,
                         headers={"ETag": '"d41d8cd98f00b204e9800998ecf8427e"'})
        self.server.file("/mm/dc/enwik8.zip", zbytes)
        env = self.env(TXLGEN_CONVERT=self.fake_converter())
        sums = {"train.txt": hashlib.sha1(b"97 \n 98 32").hexdigest(),
                "valid.txt": hashlib.sha1(b"99 \n").hexdigest(),
                "test.txt": hashlib.sha1(b"255 100").hexdigest()}
        # a preparation that does not give the original's files is refused
        bad = dict(sums, **{"test.txt": "0" * 40})
        rc, _, err = self.get("enwik8-tiny", "--catalog",
                              self.entries(zbytes, bad), env=env)
        self.assertEqual(rc, 4, err)
        self.assertIn("test.txt", err.splitlines()[-1])
        data = os.path.join(self.data_home, "txlgen", "data")
        self.assertEqual(os.listdir(data), [])
        self.assert_nothing_installed()
        rc, out, err = self.get("enwik8-tiny", "--catalog",
                                self.entries(zbytes, sums), env=env)
        self.assertEqual(rc, 0, err)
        prepared = os.path.join(data, "enwik8")
        self.assertEqual(read(os.path.join(prepared, "test.txt.raw")),
                         b"\xffd")
        with open(os.path.join(self.tmp, "convert.log")) as f:
            log = json.load(f)
        tmp_out = log["args"][log["args"].index("-o") + 1]
        self.assertEqual(log["args"], [
            "--weights", os.path.join(self.cache, "models", "enwik8-tiny",
                                      "enwik8.pt"),
            "--vocab-corpus", os.path.join(prepared, "train.txt"),
            "--dataset", "enwik8", "-o", tmp_out, "--dtype", "Q8_0",
            "--description", "tiny adaptive span; from the tests"])
        self.assertEqual(os.path.dirname(tmp_out), self.models)
        self.assertEqual(log["weights_sha256"], sha256(weights))
        self.assertEqual(log["corpus"], "97 \n 98 32")
        self.assertEqual(os.listdir(self.models), ["enwik8-tiny.bin"])
        # no digest for the .pt: its sha256 is shown
        self.assertIn(sha256(weights), err)
        # the prepared data is used again; the zip was removed
        self.assertEqual(len(self.server.requests("/mm/")), 1)
        rc, _, err = self.get("enwik8-tiny", "--catalog",
                              self.entries(zbytes, sums), "--force", env=env)
        self.assertEqual(rc, 0, err)
        self.assertEqual(len(self.server.requests("/mm/")), 1)
        self.assertIn("using the prepared data", err)

    # -- the data set: what the zip holds, what is in the data directory ---

    def sums(self):
        return {"train.txt": hashlib.sha1(b"97 \n 98 32").hexdigest(),
                "valid.txt": hashlib.sha1(b"99 \n").hexdigest(),
                "test.txt": hashlib.sha1(b"255 100").hexdigest()}

    def serve_zip(self, member_bytes=None, chunks=None):
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED,
                             compresslevel=1) as z:
            with z.open("enwik8", "w") as f:
                if chunks:
                    for c in chunks:
                        f.write(c)
                else:
                    f.write(member_bytes)
        zbytes = buf.getvalue()
        self.server.file("/fb/adaptive-span/enwik8.pt", os.urandom(5000))
        self.server.file("/mm/dc/enwik8.zip", zbytes)
        return zbytes

    def test_a_zip_bomb_is_refused_before_it_inflates(self):
        # a 2 MB zip whose enwik8 inflates to 512 MiB, run with 256 MiB of
        # address space: refused from its directory, and not kept
        zbytes = self.serve_zip(chunks=[bytes(1 << 20)] * 512)
        env = self.env(TXLGEN_CONVERT=self.fake_converter())
        cat = self.entries(zbytes, self.sums())

        def small():
            import resource
            resource.setrlimit(resource.RLIMIT_AS, (256 << 20, 256 << 20))
        for run in (1, 2):
            p = subprocess.run([PYTHON, GET, "enwik8-tiny", "--catalog", cat],
                               capture_output=True, text=True, env=env,
                               preexec_fn=small, timeout=300)
            self.assert_clean_error(p.returncode, 4, p.stderr, "enwik8.zip: "
                                    f"enwik8 has {512 << 20} bytes, "
                                    f"expected {len(ENWIK8)}")
            self.assertFalse(os.path.exists(os.path.join(
                self.cache, "data", "enwik8", "enwik8.zip")))
            # each run fetches it again: the bad zip is not kept as verified
            self.assertEqual(len(self.server.requests("/mm/")), run)
        self.assert_nothing_installed()

    def test_a_member_that_inflates_past_its_size_is_refused(self):
        # the zip's directory says 8 bytes; the data inflates to 64 KiB
        data = ENWIK8 * 8192
        zbytes = bytearray(self.serve_zip(data))
        for sig, off in ((b"PK\x03\x04", 22), (b"PK\x01\x02", 24)):
            at = zbytes.index(sig) + off
            self.assertEqual(int.from_bytes(zbytes[at:at + 4], "little"),
                             len(data))
            zbytes[at:at + 4] = len(ENWIK8).to_bytes(4, "little")
        self.server.file("/mm/dc/enwik8.zip", bytes(zbytes))
        env = self.env(TXLGEN_CONVERT=self.fake_converter())
        rc, _, err = self.get("enwik8-tiny", "--catalog", self.entries(
            bytes(zbytes), self.sums()), env=env)
        self.assert_clean_error(rc, 4, err, "enwik8.zip: ")
        self.assertFalse(os.path.exists(os.path.join(
            self.cache, "data", "enwik8", "enwik8.zip")))

    def test_text8_zip_is_pinned_by_its_sha256(self):
        # the published size, other bytes: refused by the pinned sha256
        self.server.file("/mm/dc/text8.zip", bytes(31344016))
        env = self.env(TXLGEN_CONVERT=self.fake_converter())
        rc, _, err = self.get("text8", env=env)
        self.assert_clean_error(rc, 4, err, "http://mattmahoney.net/dc/"
                                "text8.zip: sha256 ", "expected a6640522afe85"
                                "d1963ad56c05b0ede0a0c000dddc9671758a6cc09b7"
                                "a38e5232")
        self.assertEqual(self.server.requests("/fb/"), [])

    def test_a_data_directory_the_user_made_is_never_removed(self):
        zbytes = self.serve_zip(ENWIK8)
        env = self.env(TXLGEN_CONVERT=self.fake_converter())
        cat = self.entries(zbytes, self.sums())
        data = os.path.join(self.tmp, "adaptive-span", "data")
        mine = os.path.join(data, "enwik8")
        os.makedirs(mine)
        with open(os.path.join(mine, "notes.txt"), "w") as f:
            f.write("mine")
        rc, out, err = self.get("enwik8-tiny", "--catalog", cat,
                                "--data-dir", data, env=env)
        self.assert_clean_error(rc, 1, err, mine, "not a preparation",
                                "--data-dir")
        self.assertEqual(os.listdir(mine), ["notes.txt"])
        self.assertEqual(self.server.log, [])
        # the original's preparation (get_data.sh's tree): used as it is
        for fn, body in (("train.txt", b"97 \n 98 32"), ("valid.txt",
                         b"99 \n"), ("test.txt", b"255 100")):
            with open(os.path.join(mine, fn), "wb") as f:
                f.write(body)
        rc, out, err = self.get("enwik8-tiny", "--catalog", cat,
                                "--data-dir", data, env=env)
        self.assertEqual(rc, 0, err)
        self.assertIn("match the original preparation", err)
        self.assertEqual(self.server.requests("/mm/"), [])
        self.assertEqual(sorted(os.listdir(mine)), ["notes.txt", "test.txt",
                                                    "train.txt", "valid.txt"])
        # an older preparation of the getter's own is replaced
        ours = os.path.join(self.data_home, "txlgen", "data", "enwik8")
        os.makedirs(ours)
        with open(os.path.join(ours, "prepared.json"), "w") as f:
            json.dump({"format": "enwik8", "member_sha1": "1" * 40}, f)
        with open(os.path.join(ours, "train.txt"), "w") as f:
            f.write("old")
        rc, out, err = self.get("enwik8-tiny", "--catalog", cat, "--force",
                                env=env)
        self.assertEqual(rc, 0, err)
        self.assertEqual(read(os.path.join(ours, "train.txt")), b"97 \n 98 32")


# text in the enwik8 layout: 10 symbols in train (with <eos>), test bytes
# among them
ENWIK8_SPAN = (b"<page>\n  the cat sat on the mat\n  a tac\n" * 6 +
               b"the mat\n" + b"  the cat\n" + b"at\n")


@unittest.skipIf(TXLGEN is None, "txlgen not built")
class AdaptiveSpanReal(Base):
    """The whole way with the real converter: an adaptive-span checkpoint
    in the trainer's layout (the dict with the DataParallel state_dict and
    an Adagrad state, torch's format before 1.6 as the published files),
    whose vocabulary is the data set's: downloaded, prepared, converted
    with --vocab-corpus, installed, and run."""

    def test_enwik8_checkpoint_end_to_end(self):
        from txlgen import span_model, vocab
        test_size = 20
        g = load_getter()
        prep = os.path.join(self.tmp, "prep")
        os.makedirs(prep)
        g.prepare_enwik8(ENWIK8_SPAN, prep, test_size)
        syms = vocab.corpus_symbols(os.path.join(prep, "train.txt"))
        ckpt = os.path.join(self.tmp, "enwik8.pt")
        model = span_model.make_checkpoint(
            ckpt, len(syms), spans=[[0.0, 0.4], [0.9, 0.1]], attn_span=64,
            span_ramp=8, d_model=32, d_inner=48, legacy=True)
        weights = read(ckpt)
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
            z.writestr("enwik8", ENWIK8_SPAN)
        zbytes = buf.getvalue()
        self.server.file("/fb/adaptive-span/enwik8.pt", weights)
        self.server.file("/mm/dc/enwik8.zip", zbytes)
        entry, ds = span_entries(zbytes, ENWIK8_SPAN, ["--span-ramp", "8"],
                                 test_size=test_size)
        rc, out, err = self.get("span-tiny", "--catalog",
                                self.catalog({"span-tiny": entry}, ds),
                                "--dtype", "F32")
        self.assertEqual(rc, 0, err)
        installed = os.path.join(self.models, "span-tiny.bin")
        self.assertEqual(out.strip(), installed)
        m = meta(installed)
        self.assertEqual((m["attn_type"], m["attn_span"], m["span_ramp"],
                          m["n_token"], m["vocab_newline"]),
                         ("4", "64", "8", str(len(syms)), "eos"))
        env = dict(self.env(), TXLGEN_MODEL_PATH=self.models)
        info = json.loads(subprocess.run(
            [TXLGEN, "-m", "span-tiny", "--info", "--json"],
            capture_output=True, text=True, env=env, timeout=60).stdout)
        self.assertEqual(info["attention"]["attn_type"], 4)
        self.assertEqual(len(info["attention"]["spans"]), 2)
        # the prepared test split scored: the reference's log-probs
        raw = os.path.join(self.data_home, "txlgen", "data", "enwik8",
                           "test.txt.raw")
        r = subprocess.run([TXLGEN, "-m", "span-tiny", "--score", raw,
                            "--json", "--seg-len", "5"], capture_output=True,
                           text=True, env=env, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        recs = [json.loads(ln) for ln in r.stdout.splitlines()
                if '"pos"' in ln]
        from txlgen import span_ref
        index = {s2: i for i, s2 in enumerate(syms)}
        ids = [index["<eos>" if b == 10 else str(b)] for b in read(raw)]
        self.assertEqual([x["id"] for x in recs], ids[1:])
        ref = span_ref.score_ids(model, ids, 5).tolist()
        self.assertLess(max(abs(x["logprob"] - y) for x, y in
                            zip(recs, ref)), 1e-4)
        r = subprocess.run([TXLGEN, "-m", "span-tiny", "--text", "the ",
                            "-n", "10", "--seed", "1"], capture_output=True,
                           text=True, env=env, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)


# ---------------------------------------------------------------------------
# A hostile server

BIG = 64 << 20          # the most an "endless" body sends (a bounded loop)


def send_head(h, status, headers, reason):
    """The status line and @headers, the connection to close after."""
    h.send_response(status, reason)
    for k, v in headers:
        h.send_header(k, v)
    h.send_header("Connection", "close")
    h.end_headers()


def endless(status=200, headers=(), reason=None):
    """A route function that answers with headers and then sends up to BIG
    bytes until the getter hangs up; sent[0] counts what went out."""
    sent = [0]

    def fn(h, rng):
        send_head(h, status, headers, reason)
        chunk = b"x" * 65536
        while sent[0] < BIG:
            h.wfile.write(chunk)
            sent[0] += len(chunk)
    return fn, sent


def answer(status, headers=(), body=b"", reason=None):
    """A route function that sends one fixed answer, whatever was asked."""
    def fn(h, rng):
        send_head(h, status, headers, reason)
        h.wfile.write(body)
    return fn


URL = "https://dl.fbaipublicfiles.com/t/"


@unittest.skipIf(TXLGEN is None, "txlgen not built")
class Hostile(Base):
    """What a server that does not keep to HTTP, or lies, gets."""

    def test_a_pinned_size_stops_an_endless_body(self):
        cat, sent = self.serve_endless("config.json", {"size": 856})
        rc, out, err = self.get_plain("t", "--catalog", cat)
        self.assert_clean_error(rc, 4, err, f"{URL}config.json: the server "
                                "sends more than the 856 bytes the catalog "
                                "pins")
        self.assertLess(sent[0], BIG // 2)
        d = os.path.join(self.cache, "models", "t")
        self.assertEqual(os.listdir(d) if os.path.isdir(d) else [], [])
        self.assertEqual(out, "")

    def test_unknown_sizes_are_capped(self):
        # a negative Content-Length: no size stated; the estimate caps it
        cat, sent = self.serve_endless("w.pt", {"approx_size": 1000},
                                       headers=[("Content-Length", "-1")])
        rc, _, err = self.get_plain("t", "--catalog", cat)
        self.assert_clean_error(rc, 4, err, f"{URL}w.pt: the server sends "
                                "more than the 4000 bytes a file of unknown "
                                "size may have")
        self.assertLess(sent[0], BIG // 2)
        self.assertFalse(os.path.exists(os.path.join(
            self.cache, "models", "t", "w.pt.part")))
        # an endless 206 for an unpinned file: the size it states
        fn, sent = endless(206, [("Content-Range", "bytes 10-99/100")])
        self.server.custom("/fb/t/w.pt", fn)
        part = self.leave_part("t", "w.pt", b"0123456789")
        rc, _, err = self.get_plain("t", "--catalog", cat, "--retries", "0")
        self.assert_clean_error(rc, 4, err, "more than the 100 bytes the "
                                "server states")
        self.assertLess(sent[0], BIG // 2)
        self.assertFalse(os.path.exists(part))

    def test_a_part_that_outgrew_its_file_is_dropped(self):
        body = os.urandom(300)
        self.server.file("/fb/t/w.pt", body)
        cat = self.catalog({"t": self.plain_entry(
            ("w.pt", {"size": 300, "sha256": sha256(body)}))})
        self.leave_part("t", "w.pt", body + os.urandom(200))
        rc, out, err = self.get_plain("t", "--catalog", cat)
        self.assertEqual(rc, 0, err)
        self.assertIn("starting again", err)
        self.assertEqual(self.server.requests("/fb/t/w.pt"),
                         [("/fb/t/w.pt", None)])

    def test_a_range_answered_from_byte_0_starts_over(self):
        body = os.urandom(300)
        self.server.custom("/fb/t/w.pt", answer(206, [
            ("Content-Range", "bytes 0-299/300"),
            ("Content-Length", "300")], body))
        cat = self.catalog({"t": self.plain_entry(("w.pt", {}))})
        part = self.leave_part("t", "w.pt", body[:100])
        rc, out, err = self.get_plain("t", "--catalog", cat,
                                      "--keep-downloads")
        self.assertEqual(rc, 0, err)
        self.assertIn("from the first byte", err)
        self.assertEqual(read(part[:-len(".part")]), body)

    def test_malformed_headers_are_errors_not_tracebacks(self):
        # a Location urllib cannot parse
        self.server.custom("/fb/t/w.pt", answer(302, [
            ("Location", "http://[::1"), ("Content-Length", "0")]))
        cat = self.catalog({"t": self.plain_entry(("w.pt", {}))})
        rc, _, err = self.get_plain("t", "--catalog", cat)
        self.assert_clean_error(rc, 3, err, f"{URL}w.pt", "malformed address",
                                "http://[::1")
        # a Content-Length of "²": a digit to str.isdigit, no number
        body = os.urandom(300)
        self.server.custom("/fb/t/w.pt", answer(200, [
            ("Content-Length", "\u00b2")], body))
        cat = self.catalog({"t": self.plain_entry(
            ("w.pt", {"size": 300, "sha256": sha256(body)}))})
        rc, _, err = self.get_plain("t", "--catalog", cat)
        self.assertEqual(rc, 0, err)
        # an X-Linked-Size of "²" from the Hub
        self.serve_tiny()
        self.server.routes[f"/hf/tiny-org/tiny-xl/resolve/{REV}/vocab.bin"]\
            .headers["X-Linked-Size"] = "\u00b2"
        rc, _, err = self.get_plain("tiny", "--catalog", self.catalog(
            {"tiny": self.tiny_entry(repo="tiny-org/tiny-xl")}))
        self.assertEqual(rc, 0, err)

    def test_terminal_escapes_from_the_server_are_shown_escaped(self):
        # the reason phrase, a redirect's origin, X-Repo-Commit
        esc = "\x1b]2;owned\x07\x1b[2J"
        self.server.custom("/fb/t/a", answer(404, reason="Gone" + esc))
        self.server.routes["/fb/t/b"] = Route(
            "redirect", location="https://evil\x1b\x9b2J.example/b")
        repo = "tiny-org/tiny-xl"
        self.serve_tiny()
        self.server.routes[f"/hf/{repo}/resolve/{REV}/config.json"]\
            .headers["X-Repo-Commit"] = "f" * 40 + esc
        for entry, code, shown in (
                (self.plain_entry(("a", {})), 3, "Gone\\x1b]2;owned\\x07"),
                (self.plain_entry(("b", {})), 3,
                 "refused a redirect to https://evil\\x1b\\x9b2J.example"),
                (self.tiny_entry(repo=repo), 4, "\\x1b]2;owned\\x07")):
            with self.subTest(entry=entry["files"][0]["url"]):
                rc, _, err = self.get_plain("t", "--catalog", self.catalog(
                    {"t": entry}))
                self.assert_clean_error(rc, code, err, shown)
                for c in "\x1b\x07\x9b":
                    self.assertNotIn(c, err)

    def test_a_pinned_git_sha1_is_checked_against_the_server(self):
        self.serve_tiny()
        e = self.tiny_entry(repo="tiny-org/tiny-xl")
        body = self.files["config.json"]
        e["files"][0]["git_sha1"] = "0" * 40
        rc, _, err = self.get_plain("tiny", "--catalog", self.catalog(
            {"tiny": e}))
        self.assert_clean_error(rc, 4, err, "the server states git blob "
                                f"SHA-1 {git_sha1(body)}, the catalog pins "
                                f"{'0' * 40}")
        self.assertEqual(self.server.requests("/cdn/"), [])
        e["files"][0]["git_sha1"] = git_sha1(body)
        rc, _, err = self.get_plain("tiny", "--catalog", self.catalog(
            {"tiny": e}))
        self.assertEqual(rc, 0, err)
        self.assertIn("matches the pinned git SHA-1", err)

    # -- no network ---------------------------------------------------------

    def closed_port(self):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        return f"http://127.0.0.1:{port}"

    def test_without_a_network_it_says_what_to_do(self):
        mirror = f"https://dl.fbaipublicfiles.com={self.closed_port()}/fb"
        cat = self.catalog({"t": self.plain_entry(("w.pt", {}))})
        rc, out, err = self.get_plain("t", "--catalog", cat, "--retries",
                                      "1", TXLGEN_GET_MIRROR=mirror)
        self.assert_clean_error(rc, 3, err, f"{URL}w.pt", "check the network",
                                "--mirror", os.path.join(self.cache,
                                                         "models", "t"),
                                "FILES")
        self.assertNotIn("resuming", err)
        self.assertIn("trying again in 1 s (retry 1 of 1)", err)
        # a name that does not resolve (.invalid never does, RFC 6761):
        # no retry, one line naming it.  (Only the lookup leaves the
        # machine: no proxy, and nothing to connect to.)
        mirror = "https://dl.fbaipublicfiles.com=http://nonexistent.invalid/fb"
        rc, out, err = self.get_plain(
            "t", "--catalog", cat, "--retries", "3",
            TXLGEN_GET_MIRROR=mirror, TXLGEN_GET_ONLY_LOCAL="0",
            http_proxy="", HTTP_PROXY="", all_proxy="", ALL_PROXY="")
        self.assert_clean_error(rc, 3, err, f"{URL}w.pt", "cannot look up "
                                "nonexistent.invalid", "check the network")
        self.assert_one_line(err)
        # the files placed there by hand: checked, used, and left there
        d = os.path.join(self.cache, "models", "tiny")
        os.makedirs(d)
        for fn, body in self.files.items():
            with open(os.path.join(d, fn), "wb") as f:
                f.write(body)
        mirror = f"https://huggingface.co={self.closed_port()}/hf"
        rc, out, err = self.get_plain("tiny", "--catalog", self.catalog(
            {"tiny": self.tiny_entry()}), TXLGEN_GET_MIRROR=mirror)
        self.assertEqual(rc, 0, err)
        self.assertIn("placed in the cache by hand", err)
        self.assertIn("matches the pinned digest", err)
        self.assertEqual(sorted(os.listdir(d)), sorted(self.files))
        # one that does not match its pin is refused and left there
        with open(os.path.join(d, "pytorch_model.bin"), "ab") as f:
            f.write(b"x")
        rc, out, err = self.get_plain("tiny", "--catalog", self.catalog(
            {"tiny": self.tiny_entry()}), "--force",
            TXLGEN_GET_MIRROR=mirror)
        self.assert_clean_error(rc, 4, err, os.path.join(
            d, "pytorch_model.bin"), "by hand")
        self.assertTrue(os.path.exists(os.path.join(d, "pytorch_model.bin")))

    # -- a full disk --------------------------------------------------------

    def run_on_small_disk(self, *args, size="256k", full=False):
        """The getter with its cache on a tmpfs of `size` (in a mount
        namespace of its own; full: filled before it starts); returns rc,
        stderr and the files the cache held when it ended."""
        if subprocess.run(["unshare", "-rm", "true"],
                          capture_output=True).returncode:
            self.skipTest("no mount namespaces here")
        cache = os.path.join(self.tmp, "small")
        os.makedirs(cache, exist_ok=True)
        script = ('mount -t tmpfs -o size="$1" none "$2" || exit 99\n'
                  'if [ -n "$FULL" ]; then cat /dev/zero > "$2/filler"; fi\n'
                  'shift 2; "$@"; rc=$?; find "$CACHE"; exit $rc')
        p = subprocess.run(
            ["unshare", "-rm", "sh", "-c", script, "sh", size, cache, PYTHON,
             GET, *args, "--cache", cache], capture_output=True, text=True,
            env=self.env(TXLGEN_CONVERT=self.copy_converter(), CACHE=cache,
                         FULL="1" if full else ""), timeout=300)
        if p.returncode == 99:
            self.skipTest("cannot mount a tmpfs here")
        return p.returncode, p.stderr, p.stdout

    def test_a_full_disk_is_a_disk_error(self):
        # no size stated: the write fails
        cat, _ = self.serve_endless("w.pt", {})
        rc, err, listing = self.run_on_small_disk("t", "--catalog", cat)
        part = os.path.join(self.tmp, "small", "models", "t", "w.pt.part")
        self.assert_clean_error(rc, 6, err, part, "No space left on device")
        self.assertNotIn("retry", err)
        self.assertNotIn(".tmp-", listing)
        # a disk full before the download's record is written
        rc, err, listing = self.run_on_small_disk("t", "--catalog", cat,
                                                  full=True)
        self.assert_clean_error(rc, 6, err, part + ".json: No space left")
        self.assertIn("filler", listing)
        self.assertNotIn(".tmp-", listing)
        # a stated size larger than the free space: refused before
        self.server.file("/fb/t/w.pt", b"y" * (1 << 20))
        rc, err, listing = self.run_on_small_disk("t", "--catalog", cat)
        self.assert_clean_error(rc, 6, err, "free, 1.05 MB to download")


@unittest.skipIf(TXLGEN is None, "txlgen not built")
class Catalogs(Base):
    """--catalog is checked whole before anything is fetched or removed."""

    def test_malformed_catalogs_are_refused_before_anything_is_done(self):
        victim = os.path.join(self.tmp, "victim")
        with open(victim, "w") as f:
            f.write("keep me")
        good = self.tiny_entry()

        def entry(**kw):
            e = json.loads(json.dumps(good))
            e.update(kw)
            return e

        def with_file(i, **kw):
            e = json.loads(json.dumps(good))
            for k, v in kw.items():
                if v is None:
                    del e["files"][i][k]
                else:
                    e["files"][i][k] = v
            return e
        ds = {"what": "d", "files": [{"name": "d.zip", "url":
                                      "http://mattmahoney.net/dc/d.zip"}],
              "member": "d", "member_size": 10, "member_sha1": "0" * 40,
              "format": "enwik8", "test_size": 2}
        cases = [
            ({"tiny": with_file(0, name=victim)}, "is not a plain name"),
            ({"tiny": with_file(0, name="../../escape")}, "not a plain name"),
            ({"tiny": with_file(0, name="..")}, "not a plain name"),
            ({"../x": good}, "model '../x' is not a plain name"),
            ({"/abs": good}, "not a plain name"),
            ({"tiny": with_file(1, url=None)}, '"url" (a string) is missing'),
            ({"tiny": with_file(1, url="http://[::1")}, "Invalid IPv6"),
            ({"tiny": with_file(1, url="file:///etc/passwd")},
             "not an http or https address"),
            ({"tiny": with_file(0, size="856")}, '"size" must be a whole'),
            ({"tiny": with_file(0, size=-1)}, '"size" must be a whole'),
            ({"tiny": with_file(0, size=True)}, '"size" must be a whole'),
            ({"tiny": with_file(1, approx_size="big")}, '"approx_size"'),
            ({"tiny": with_file(1, sha256="xyz")}, '"sha256" must be 64'),
            ({"tiny": with_file(1, name="config.json")}, "taken by another"),
            ({"tiny": entry(revision=5)}, '"revision" must be a string'),
            ({"tiny": entry(revision="../x")}, '"revision" must be'),
            ({"tiny": entry(files=[])}, '"files" must be a non-empty list'),
            ({"tiny": entry(files="x")}, '"files" must be a non-empty list'),
            ({"tiny": entry(files=[5])}, "file 1: not an object"),
            ({"tiny": entry(convert=["--weights", "{dirr}"])},
             "names {dirr}; known: {dir}, {file:config.json}"),
            ({"tiny": entry(convert=["{file:other.bin}"])},
             "names {file:other.bin}"),
            ({"tiny": entry(convert=["{data}"])}, "names {data}"),
            ({"tiny": entry(convert="--weights")}, '"convert" must be'),
            ({"tiny": entry(family="gpt2")}, '"family" must be one of'),
            ({"tiny": entry(server="evil")}, '"server" must be one of'),
            ({"tiny": entry(dtype="Q9")}, '"dtype" must be one of'),
            ({"tiny": entry(data="nope")}, "names data set 'nope'"),
            ({"tiny": entry(what=["x"])}, '"what" must be a string'),
            ({"tiny": "x"}, "model 'tiny': not an object"),
            ({}, '"models" names no model'),
        ]
        for key, bad in (("member_size", "x"), ("member_size", 1 << 40),
                         ("member_sha1", "0"), ("format", "gz"),
                         ("test_size", 6), ("member", None),
                         ("files", []), ("prepared_sha1", {"x.txt": "0"})):
            d = dict(ds)
            if bad is None:
                del d[key]
            else:
                d[key] = bad
            cases.append(({"tiny": entry(data="d")}, "data set 'd'", d))
        for case in cases:
            models, words = case[:2]
            datasets = {"d": case[2]} if len(case) > 2 else {"d": ds}
            with self.subTest(words=words, models=str(models)[:60]):
                cat = self.catalog(models, datasets)
                rc, out, err = self.get("tiny", "--catalog", cat)
                self.assert_clean_error(rc, 2, err, cat, words)
                self.assert_one_line(err)
                self.assertEqual(out, "")
        self.assertEqual(read(victim), b"keep me")
        self.assertEqual(self.server.log, [])
        self.assertFalse(os.path.exists(self.cache))
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "escape")))

    def test_catalogs_that_are_not_files_are_refused_at_once(self):
        fifo = os.path.join(self.tmp, "fifo")
        os.mkfifo(fifo)
        big = os.path.join(self.tmp, "big.json")
        with open(big, "w") as f:
            f.write('{"models": {}, "x": "' + "x" * (2 << 20) + '"}')
        deep = os.path.join(self.tmp, "deep.json")
        with open(deep, "w") as f:
            f.write("[" * 100000)
        for path, words in (("/dev/zero", "not a regular file"),
                            (fifo, "not a regular file"),
                            (self.tmp, "not a regular file"),
                            (big, "more than 1048576 bytes"),
                            (deep, "not JSON")):
            with self.subTest(path=path):
                rc, out, err = self.get("tiny", "--catalog", path,
                                        timeout=60)
                self.assert_clean_error(rc, 2, err, path, words)
                self.assert_one_line(err)

    def test_the_built_in_catalog_is_valid(self):
        g = load_getter()
        self.assertIs(g.load_catalog(None), g.CATALOG)
        self.assertEqual(g.CATALOG["datasets"]["text8"]["files"][0]["sha256"],
                         "a6640522afe85d1963ad56c05b0ede0a0c000dddc9671758a6"
                         "cc09b7a38e5232")

    # -- what is there already ----------------------------------------------

    def test_what_is_not_a_model_is_not_installed_already(self):
        self.serve_tiny()
        cat = self.catalog({"tiny": self.tiny_entry()})
        final = os.path.join(self.models, "tiny.bin")
        os.makedirs(final)
        with open(os.path.join(final, "mine"), "w") as f:
            f.write("mine")
        for args in ((), ("--force",)):
            rc, out, err = self.get_plain("tiny", "--catalog", cat, *args)
            self.assert_clean_error(rc, 1, err, final, "a directory",
                                    "move it away")
            self.assertEqual(out, "")
        self.assertEqual(read(os.path.join(final, "mine")), b"mine")
        _, out, _ = self.get_plain("--list", "--catalog", cat)
        self.assertIn("tiny.bin is not a model", out)
        shutil.rmtree(final)
        open(final, "w").close()
        rc, out, err = self.get_plain("tiny", "--catalog", cat)
        self.assert_clean_error(rc, 1, err, final, "an empty file",
                                "--force replaces it")
        self.assertEqual(self.server.log, [])
        rc, out, err = self.get_plain("tiny", "--catalog", cat, "--force")
        self.assertEqual(rc, 0, err)
        self.assertEqual(read(final), read(self.small_model))

    def test_a_model_installed_meanwhile_is_not_replaced(self):
        # another txlgen-get (another cache) installs the model while this
        # one converts: this one keeps it
        self.serve_tiny()
        final = os.path.join(self.models, "tiny.bin")
        conv = self.stand_in_converter(
            f"import shutil\n"
            f"shutil.copyfile({self.small_model!r}, {final!r})\n"
            f"open({final!r}, 'ab').write(b'the other run')\n"
            f"shutil.copyfile({self.small_model!r}, out)\n")
        rc, out, err = self.get("tiny", "--catalog", self.catalog(
            {"tiny": self.tiny_entry()}), env=self.env(TXLGEN_CONVERT=conv))
        self.assertEqual(rc, 0, err)
        self.assertIn("installed by another", err)
        self.assertTrue(read(final).endswith(b"the other run"))
        self.assertEqual(os.listdir(self.models), ["tiny.bin"])
        self.assertEqual(out.strip(), final)
        self.assertFalse(os.path.exists(os.path.join(self.cache, "models",
                                                     "tiny")))

    def test_a_relative_xdg_directory_is_ignored(self):
        self.serve_tiny()
        home = os.path.join(self.tmp, "home")
        work = os.path.join(self.tmp, "work")
        os.makedirs(work)
        env = self.env(HOME=home, XDG_DATA_HOME="rel-data",
                       XDG_CACHE_HOME="rel-cache",
                       TXLGEN_CONVERT=self.copy_converter())
        p = subprocess.run([PYTHON, GET, "tiny", "--catalog", self.catalog(
            {"tiny": self.tiny_entry()})], capture_output=True, text=True,
            env=env, cwd=work, timeout=300)
        self.assertEqual(p.returncode, 0, p.stderr)
        final = os.path.join(home, ".local", "share", "txlgen", "models",
                             "tiny.bin")
        self.assertEqual(p.stdout.strip(), final)
        self.assertEqual(os.listdir(work), [])
        # txlgen finds it where the getter put it
        r = subprocess.run([TXLGEN, "-m", "tiny", "--info", "--json"],
                           capture_output=True, text=True, env=env, cwd=work,
                           timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)


# tf/sota/download.sh's files of each model (the .meta graph, which the
# converter does not read, left out)
DOWNLOAD_SH = {
    "xl-enwik8": ("tf_enwiki8", 0), "xl-text8": ("tf_text8", 0),
    "xl-wt103": ("tf_wt103", 0), "xl-lm1b": ("tf_lm1b", 1191000)}
TF_WORDS = ["<eos>"] + ("the , . of and in to a was The cat sat on mat dog "
                        "= @-@ it is").split()


def tiny_tf_checkpoint(root):
    """A directory as download.sh lays it out, of a 1-layer random model
    of the TF code over TF_WORDS (wt103's conventions)."""
    import numpy as np
    from txlgen import tfwrite
    rng = np.random.default_rng(1)
    n = len(TF_WORDS)
    T, L = "transformer/", "transformer/layer_0/"
    shapes = {T + "r_w_bias": (1, 2, 4), T + "r_r_bias": (1, 2, 4),
              T + "adaptive_embed/lookup_table": (n, 8),
              T + "adaptive_softmax/bias": (n,),
              L + "rel_attn/qkv/kernel": (8, 24), L + "rel_attn/r/kernel":
              (8, 8), L + "rel_attn/o/kernel": (8, 8),
              L + "rel_attn/LayerNorm/gamma": (8,),
              L + "rel_attn/LayerNorm/beta": (8,),
              L + "ff/layer_1/kernel": (8, 16), L + "ff/layer_1/bias": (16,),
              L + "ff/layer_2/kernel": (16, 8), L + "ff/layer_2/bias": (8,),
              L + "ff/LayerNorm/gamma": (8,), L + "ff/LayerNorm/beta": (8,)}
    tensors = {k: rng.standard_normal(v).astype(np.float32)
               for k, v in shapes.items()}
    tensors.update({k + "/Adam": v for k, v in list(tensors.items())})
    tensors["global_step"] = np.array(0, np.int64)
    vocab = tfwrite.tf_vocab(TF_WORDS, special=["<eos>"])
    corpus = tfwrite.tf_corpus("wt103", vocab, {
        "train": np.arange(5000, dtype=np.int64) % n,
        "valid": np.zeros(5, np.int64), "test": np.ones(5, np.int64)}, [])
    d = os.path.join(root, "tf_wt103")
    tfwrite.write_tf_dir(d, tensors, tfwrite.py2_pickle(corpus),
                         {"vocab_size": n, "cutoffs": [],
                          "dataset": "wt103"})
    return d


@unittest.skipIf(TXLGEN is None, "txlgen not built")
class TFCheckpointFlow(Base):
    """xl-wt103 of the real catalog, the whole way: the authors' files in
    download.sh's layout from a plain http server (no digest: each file's
    size and sha256 recorded in the model), a dropped connection resumed
    with a Range request, WikiText-103's test split from its zip
    (SHA-1s checked), converted with the real convert.py, installed,
    shown by txlgen --info, and scored."""

    def test_real_entries_are_download_sh_files(self):
        cat = load_getter().CATALOG
        for name, (remote, step) in DOWNLOAD_SH.items():
            base = ("http://curtis.ml.cmu.edu/datasets/pretrained_xl/"
                    f"{remote}/")
            names = ["data/cache.pkl", "data/corpus-info.json",
                     "model/checkpoint", f"model/model.ckpt-{step}.index",
                     f"model/model.ckpt-{step}.data-00000-of-00001"]
            m = cat["models"][name]
            self.assertEqual(sorted(f["name"] for f in m["files"]),
                             sorted(names), name)
            for f in m["files"]:
                self.assertEqual(f["url"], base + f["name"])
                self.assertNotIn("sha256", f)
            self.assertIn(m["data"], cat["datasets"])

    def test_lm1b_test_split_from_its_tar_gz(self):
        """One Billion Word's archive is a gzipped tar: the held-out part
        is read from the stream, a missing member is refused."""
        import tarfile
        g = load_getter()
        member = g.CATALOG["datasets"]["lm1b"]["member"]
        path = os.path.join(self.tmp, "lm1b.tar.gz")
        text = b"The cat sat .\nA dog .\n"
        with tarfile.open(path, "w:gz") as t:
            for name, body in (("x/training/news.en-00001", b"no\n"),
                               (member, text)):
                info = tarfile.TarInfo(name)
                info.size = len(body)
                t.addfile(info, io.BytesIO(body))
        ds = {"member": member, "member_sha1": None}
        self.assertEqual(g.read_member(path, ds), text)
        with self.assertRaises(g.GetError):
            g.read_member(path, dict(ds, member=member + "1"))
        # a member longer than its pinned size stops there
        with self.assertRaises(g.GetError):
            g.read_member(path, dict(ds, member_size=len(text) - 1))

    def test_xl_wt103(self):
        g = load_getter()
        d = tiny_tf_checkpoint(self.tmp)
        bodies = {}
        entry = g.CATALOG["models"]["xl-wt103"]
        for f in entry["files"]:
            bodies[f["name"]] = read(os.path.join(d, f["name"]))
            r = self.server.file("/cmu/datasets/pretrained_xl/tf_wt103/" +
                                 f["name"], bodies[f["name"]])
            if f["name"].endswith("data-00000-of-00001"):
                r.drop_after, r.drops = len(bodies[f["name"]]) // 2, 1
        test = b" = The cat = \n the cat sat on the mat . \n the dog was it .\n"
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
            z.writestr("wikitext-103/wiki.test.tokens", test)
            z.writestr("wikitext-103/wiki.valid.tokens", b"x\n")
        zbytes = buf.getvalue()
        self.server.file("/s3/research.metamind.io/wikitext/"
                         "wikitext-103-v1.zip", zbytes)
        ds = dict(g.CATALOG["datasets"]["wt103"])
        self.assertEqual(ds["member_sha1"],
                         "8a5befc548865cec54ed4273cf87dbbad60d1e47")
        ds["files"] = [dict(ds["files"][0],
                            sha1=hashlib.sha1(zbytes).hexdigest())]
        ds["member_sha1"] = hashlib.sha1(test).hexdigest()
        cat = self.catalog({"xl-wt103": entry}, {"wt103": ds})
        env = self.env(TXLGEN_GET_MIRROR=(
            f"http://curtis.ml.cmu.edu={self.server.base}/cmu "
            f"https://s3.amazonaws.com={self.server.base}/s3"))
        rc, out, err = self.get("xl-wt103", "--catalog", cat, "--dtype",
                                "F32", env=env)
        self.assertEqual(rc, 0, err)
        path = os.path.join(self.models, "xl-wt103.bin")
        self.assertEqual(out.strip(), path)
        self.assertIn("publish no digest", err)
        self.assertIn("plain http", err)
        # the broken download was resumed where it broke
        shard = ("/cmu/datasets/pretrained_xl/tf_wt103/model/"
                 "model.ckpt-0.data-00000-of-00001")
        half = len(bodies["model/model.ckpt-0.data-00000-of-00001"]) // 2
        self.assertEqual(self.server.requests(shard),
                         [(shard, None), (shard, f"bytes={half}-")])
        m = meta(path)
        self.assertEqual(json.loads(m["source_files"]), [
            {"name": fn, "url": ("http://curtis.ml.cmu.edu/datasets/"
                                 "pretrained_xl/tf_wt103/" + fn),
             "size": len(b), "sha256": sha256(b)}
            for fn, b in bodies.items()])
        self.assertEqual(m["origin"], "tensorflow")
        rec = json.loads(m["recommended"])
        self.assertEqual((rec["seg_len"], rec["mem_len"], rec["clamp_len"]),
                         (128, 1600, 1000))
        r = subprocess.run([TXLGEN, "-m", path, "--info"],
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        for b in bodies.values():
            self.assertIn(sha256(b), r.stdout)
        # the test split, prepared, scored with the model's settings
        prepared = os.path.join(self.data_home, "txlgen", "data", "wt103",
                                "test.txt")
        self.assertEqual(read(prepared), test)
        r = subprocess.run([TXLGEN, "-m", path, "--score", prepared,
                            "--json", "--threads", "1"],
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        ids = [json.loads(x)["id"] for x in r.stdout.splitlines()
               if '"pos"' in x]
        words = [w for line in test.decode().split("\n")[:-1]
                 for w in line.split() + ["<eos>"]]
        self.assertEqual(ids, [TF_WORDS.index(w) for w in words][1:])


if __name__ == "__main__":
    unittest.main()
