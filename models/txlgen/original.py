"""The ORIGINAL Transformer-XL code (kimiyoung/transformer-xl), run beside
ours as an oracle by tools/check_original.py, tools/check_checkpoints.py
and bench/: import it from a checkout, build its MemTransformerLM, and
evaluate it with its own loss as its eval.py does.

The original code cannot be committed here; the caller gives its
pytorch/ folder.  It is imported unmodified, as its own scripts import
it: with that folder and its utils/ on sys.path (the one place this
package puts a path there: someone else's code, found where the user
keeps it).  Its utils/proj_adaptive_softmax.py reads torch.version.cuda
at import time, which is None in CPU-only torch, so a version string is
put there before the import.  Its uint8 attention masks only trigger a
deprecation warning (silenced).
"""

import os
import sys
import warnings

import torch

from . import txl_ref


class OriginalError(Exception):
    pass


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
