#!/usr/bin/python3
"""Seeds of fuzz_checkpoint.py: tiny checkpoints as PyTorch writes them.

    /usr/bin/python3 tests/fuzz/checkpoint-seeds.py \\
        -o tests/fuzz/corpus/checkpoint

A one-layer Transformer-XL of 12 words with an adaptive softmax (cutoffs
4 and 8, div_val 2, tie_projs mixed), saved by torch.save in every form
convert.py reads: a state_dict (zip, legacy, BF16), the whole model with
the original code's class names (zip, legacy), the corpus cache with its
Vocab (zip, legacy), Hugging Face's pytorch_model.bin (legacy, HF's
names), model.safetensors, vocab.pkl and config.json, and a --config of
the original names.  The files are committed (they are what torch.save
writes, which the harness cannot make without torch); run this again
after a change of what the converter reads.  Needs python3-torch.
"""

import argparse
import json
import os
import pickle

import torch

import srctree  # noqa: F401 (models/ on sys.path)
from txlgen.conventions import LAYER_NORM_EPS
import test_checkpoints as tc
from txlgen import checkpoint, random_model as mrm


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-o", "--outdir", required=True)
    a = ap.parse_args()
    os.makedirs(a.outdir, exist_ok=True)

    def out(name):
        return os.path.join(a.outdir, name)

    cfg = mrm.make_config(n_token=len(tc.WT_SYMS), n_layer=1, n_head=2,
                          d_model=8, d_head=4, d_inner=8, d_embed=8,
                          cutoffs=[4, 8], div_val=2,
                          tie_projs=[False, True, False], tgt_len=4,
                          mem_len=4)
    ref, orig = tc.original_pickle(cfg, seed=1)
    state = ref.state_dict()
    torch.save(state, out("state-zip.pt"))
    torch.save(state, out("state-legacy.pt"),
               _use_new_zipfile_serialization=False)
    torch.save({k: v.bfloat16() for k, v in state.items()},
               out("state-bf16.pt"))
    torch.save(orig, out("model-zip.pt"))
    torch.save(orig, out("model-legacy.pt"),
               _use_new_zipfile_serialization=False)
    vocab = tc.make_vocab(tc.WT_SYMS, False)
    tc.save_corpus(out("cache-zip.pt"), "wt103", vocab)
    tc.save_corpus(out("cache-legacy.pt"), "wt103", vocab, False)
    with open(out("vocab.pkl"), "wb") as f:
        pickle.dump(dict(vocab.__dict__), f)
    hf = tc.hf_state(orig)
    torch.save(hf, out("hf-pytorch_model.bin"),
               _use_new_zipfile_serialization=False)
    checkpoint.write_safetensors(out("model.safetensors"),
                                 tc.hf_state(orig, tied_once=True))
    hp = cfg.hparams()
    with open(out("hf-config.json"), "w") as f:
        json.dump(dict({k: v for k, v in hp.items()
                        if k not in ("n_token", "tie_projs")},
                       vocab_size=cfg.n_token, untie_r=True,
                       proj_share_all_but_first=True,
                       layer_norm_epsilon=LAYER_NORM_EPS["huggingface"],
                       adaptive=True,
                       sample_softmax=-1, model_type="transfo-xl"), f)
    with open(out("config.json"), "w") as f:
        json.dump(hp, f)


if __name__ == "__main__":
    main()
