"""The ORIGINAL Transformer-XL code (kimiyoung/transformer-xl), run beside
ours as an oracle by tools/check_original.py, tools/check_checkpoints.py
and bench/: import it from a checkout, build its MemTransformerLM, and
evaluate it with its own loss as its eval.py does.  Likewise the
adaptive-span code (facebookresearch/adaptive-span, CC-BY-NC) for
tools/check_adaptive_span.py and bench/bench_span.py: its TransformerSeq,
its trainer's checkpoints and evaluation, its Dictionary.

The original code cannot be committed here; the caller gives its
pytorch/ folder.  It is imported unmodified, as its own scripts import
it: with that folder and its utils/ on sys.path (the one place this
package puts a path there: someone else's code, found where the user
keeps it).  Its utils/proj_adaptive_softmax.py reads torch.version.cuda
at import time, which is None in CPU-only torch, so a version string is
put there before the import.  Its uint8 attention masks only trigger a
deprecation warning (silenced).
"""

import argparse
import os
import shutil
import sys
import tempfile
import warnings

import torch

from . import txl_ref


class OriginalError(Exception):
    pass


# the source tree (this package is ROOT/models/txlgen)
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))


def checker_args(doc, orig_help,
                 only_help="comma-separated configuration names",
                 keep_help="keep the models in this folder"):
    """The options of the tools that run an original code beside txlgen
    (tools/check_*.py): --orig, --txlgen, --tol, --only, --keep; the
    tool adds its own."""
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("--orig", required=True, help=orig_help)
    ap.add_argument("--txlgen", default=os.path.join(ROOT, "build", "cmd",
                                                     "txlgen"))
    ap.add_argument("--tol", type=float, default=1e-4)
    ap.add_argument("--only", help=only_help)
    ap.add_argument("--keep", help=keep_help)
    return ap


def only_names(prog, only, names):
    """The names --only @only picks from @names (None: all of them);
    exits naming those that are not among @names."""
    if not only:
        return None
    picked = set(only.split(","))
    if picked - set(names):
        sys.exit(f"{prog}: unknown configuration(s) "
                 f"{sorted(picked - set(names))}")
    return picked


def work_folder(keep, prefix):
    """The folder the tool works in: --keep's, or a new temporary one."""
    work = os.path.abspath(keep or tempfile.mkdtemp(prefix=prefix))
    os.makedirs(work, exist_ok=True)
    return work


def finish(work, keep, failures):
    """The tool's exit status: 1 with the count of @failures on stderr,
    0 without; its work folder removed unless --keep named it."""
    if not keep:
        shutil.rmtree(work, ignore_errors=True)
    if failures:
        print(f"{len(failures)} failure(s)", file=sys.stderr)
        return 1
    return 0


def import_original(orig):
    """The original's MemTransformerLM class, from its pytorch/ folder."""
    if not os.path.exists(os.path.join(orig, "mem_transformer.py")):
        raise OriginalError(f"{orig}: no mem_transformer.py (give the "
                            "pytorch/ folder of kimiyoung/transformer-xl)")
    if torch.version.cuda is None:
        torch.version.cuda = "11.0"      # read (split) at import time
    sys.path.insert(0, os.path.join(orig, "utils"))
    sys.path.insert(0, orig)
    warnings.filterwarnings("ignore", message=".*masked_fill_ received a "
                            "mask with dtype torch.uint8.*")
    import mem_transformer
    return mem_transformer.MemTransformerLM


def original_model(MemTransformerLM, cfg):
    return MemTransformerLM(
        cfg.n_token, cfg.n_layer, cfg.n_head, cfg.d_model, cfg.d_head,
        cfg.d_inner, dropout=0.0, dropatt=0.0, tie_weight=cfg.tie_weight,
        d_embed=cfg.d_embed, div_val=cfg.div_val,
        tie_projs=list(cfg.tie_projs), pre_lnorm=cfg.pre_lnorm,
        tgt_len=cfg.tgt_len, ext_len=0, mem_len=cfg.mem_len,
        cutoffs=list(cfg.cutoffs), adapt_inp=bool(cfg.cutoffs),
        same_length=cfg.same_length, attn_type=cfg.attn_type,
        clamp_len=cfg.clamp_len)


def in_token_order(loss, target, cfg):
    """The original's adaptive-softmax loss comes grouped by cluster (the
    clusters in order, the tokens of each in order): back in token order."""
    if not cfg.cutoffs:
        return loss
    order = torch.cat([((target >= lo) & (target < hi)).nonzero().flatten()
                       for lo, hi in cfg.cluster_bounds()])
    out = torch.empty_like(loss)
    out[order] = loss
    return out


@torch.no_grad()
def original_logprobs(model, cfg, ids, seg_len, mem_len, clamp_len,
                      same_length):
    """The original eval.py loop on one stream of ids."""
    model.eval()
    model.reset_length(seg_len, 0, mem_len)
    model.clamp_len = clamp_len
    model.same_length = same_length
    ids = torch.as_tensor(ids, dtype=torch.long)
    out, mems = [], tuple()
    for s in range(0, len(ids) - 1, seg_len):
        target = ids[s + 1:s + 1 + seg_len]
        data = ids[s:s + len(target)]
        ret = model(data[:, None], target[:, None], *mems)
        out.append(-in_token_order(ret[0][:, 0], target, cfg).double())
        mems = ret[1:]
    return torch.cat(out).tolist()


@torch.no_grad()
def original_windows(model, cfg, ids, seg_len, clamp_len, stride):
    """The sliding windows of txl_ref.score_windows (txl_ref.windows),
    each computed by the original's forward without memory: the losses of
    its last end - start targets."""
    model.eval()
    model.reset_length(seg_len, 0, 0)
    model.clamp_len = clamp_len
    model.same_length = False
    ids = torch.as_tensor(ids, dtype=torch.long)
    out = []
    for beg, start, end in txl_ref.windows(len(ids), seg_len, stride):
        target = ids[beg + 1:end + 1]
        loss = model(ids[beg:end, None], target[:, None])[0][:, 0]
        out.append(-in_token_order(loss, target, cfg)[start - beg:]
                   .double())
    return torch.cat(out).tolist()


# ---------------------------------------------------------------------------
# facebookresearch/adaptive-span

class SpanOriginal:
    """The adaptive-span code's pieces, imported unmodified from its
    checkout as its main.py imports them (its folder on sys.path)."""

    def __init__(self, orig):
        if not os.path.exists(os.path.join(orig, "adaptive_span.py")):
            raise OriginalError(f"{orig}: no adaptive_span.py (give a "
                                "checkout of facebookresearch/adaptive-span)")
        sys.path.insert(0, orig)
        warnings.filterwarnings("ignore", message=".*addcmul_.*")
        import data
        import models
        import trainer
        import utils
        self.TransformerSeq = models.TransformerSeq
        self.Dictionary, self.tokenize = data.Dictionary, data._tokenize
        self.full_eval = trainer.full_eval
        self.utils = utils

    def model(self, cfg, adapt_span=True, cache=True):
        """Its TransformerSeq of SpanConfig cfg, as main.py builds it
        (dropout 0), inside DataParallel as its trainer holds it."""
        m = self.TransformerSeq(
            vocab_size=cfg.n_token, hidden_size=cfg.d_model,
            nb_heads=cfg.n_head, nb_layers=cfg.n_layer,
            attn_span=cfg.attn_span, emb_dropout=0.0,
            inner_hidden_size=cfg.d_inner, dropout=0.0,
            block_size=cfg.block_size,
            adapt_io_params={"adapt_io_enabled": False},
            adapt_span_params={"adapt_span_enabled": adapt_span,
                               "adapt_span_loss": 0.0,
                               "adapt_span_ramp": cfg.span_ramp,
                               "adapt_span_init": 0.0,
                               "adapt_span_cache": cache},
            pers_mem_params={"pers_mem_size": 0})
        return torch.nn.DataParallel(m)

    def save_checkpoint(self, model, path, iter_no=1000, legacy=False):
        """What its trainer saves (utils.save_checkpoint): the model, its
        Adagrad with clipping (optim adagrad, as the published runs), a
        Logger; legacy: in torch's format before 1.6, as files of 2019
        are."""
        optimizer, scheduler = self.utils.get_optimizer_and_scheduler(
            model, {"optim": "adagrad", "lr": 0.07, "momentum": 0,
                    "grad_clip": 0.03, "lr_warmup": 32000})
        logger = self.utils.Logger("bpc")
        logger._log("step", iter_no)
        if not legacy:
            self.utils.save_checkpoint(path, iter_no, model, optimizer,
                                       scheduler, logger)
            return
        torch.save({"iter_no": iter_no, "model": model.state_dict(),
                    "logger": logger.state_dict(),
                    "optimizer": optimizer.state_dict(),
                    "scheduler_iter": scheduler.last_epoch}, path,
                   _use_new_zipfile_serialization=False)

    @torch.no_grad()
    def logprobs(self, model, ids, block_size):
        """Per-token log-probs of its evaluation of one stream
        (trainer.full_eval with a batch of 1): from a cache of zeros of
        each layer's get_cache_size(), blocks X = ids[p:p+B] predicting Y
        = ids[p+1:p+B+1], the cache carried, the last partial block
        skipped.  Returns (log-probs of ids[1:n+1], full_eval's own mean
        loss on the same data)."""
        model.eval()
        data = torch.as_tensor(ids, dtype=torch.long)[None]
        m = model.module
        h_cache = [torch.zeros(1, layer.attn.attn.get_cache_size(),
                               m.in_emb.weight.size(1))
                   for layer in m.layers]
        out, pos = [], 0
        while True:
            X = data[:, pos:pos + block_size]
            Y = data[:, pos + 1:pos + block_size + 1]
            lp, h_cache, _ = model(X, h_cache, target=Y)
            out.append(lp[0].double().gather(1, Y[0][:, None])[:, 0])
            pos += block_size
            if pos >= data.size(1) - block_size:
                break
        # (it clears an optimizer's gradients before each block)
        idle = torch.optim.SGD(model.parameters(), lr=0.0)
        mean = self.full_eval(model, idle, None, data, block_size,
                              m.in_emb.weight.size(1))
        return torch.cat(out).tolist(), mean
