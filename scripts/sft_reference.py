#!/usr/bin/env python3
"""sft_reference.py -- check a file written by `ztrain prep --sft` against
transformers: every example of the JSON Lines input is rendered with the
template's Jinja source (apply_chat_template), tokenized with the HF
tokenizer (tokenizer(text, add_special_tokens=False)) and masked with
transformers' assistant-token mask ({% generation %} copy of the template,
return_assistant_tokens_mask) or all ones (--mask all); the examples are
packed as docs/sft.md describes (no splitting; pad = EOS; the first token of
a window is never a target; windows without a counted target dropped) and
the windows, masks and counts must equal the .sft file byte for byte.

    /opt/hfref/bin/python scripts/sft_reference.py FILE.sft CHATS.jsonl TOKENIZER_DIR TEMPLATE SEQ_LEN [all|assistant|last]
"""
import json
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_sft_fixtures import MARKED, TEMPLATES  # noqa: E402
from transformers import PreTrainedTokenizerFast  # noqa: E402


def examples(path, tok, name, mode):
    for line in open(path, encoding="utf-8"):
        if not line.strip():
            continue
        o = json.loads(line)
        chat = o["messages"] if "messages" in o else [{"role": "user", "content": o["prompt"]},
                                                      {"role": "assistant", "content": o["completion"]}]
        text = tok.apply_chat_template(chat, chat_template=TEMPLATES[name], tokenize=False)
        ids = tok(text, add_special_tokens=False)["input_ids"]
        if mode == "all":
            yield ids, [1] * len(ids)
            continue
        out = tok.apply_chat_template(chat, chat_template=MARKED[name], tokenize=True, return_dict=True,
                                      return_assistant_tokens_mask=True)
        assert list(out["input_ids"]) == ids
        mask = list(out["assistant_masks"])
        if mode == "last":   # the last assistant turn: the last run of ones
            end = max(i for i, v in enumerate(mask) if v) + 1
            start = end
            while start > 0 and mask[start - 1]:
                start -= 1
            mask = [1 if start <= i < end else 0 for i in range(len(mask))]
        yield ids, mask


def main():
    sft, chats, tdir, name, seq = sys.argv[1:6]
    mode = sys.argv[6] if len(sys.argv) > 6 else "assistant"
    W = int(seq) + 1
    cfg = json.load(open(os.path.join(tdir, "tokenizer_config.json")))
    tok = PreTrainedTokenizerFast(tokenizer_file=os.path.join(tdir, "tokenizer.json"),
                                  bos_token=cfg.get("bos_token"), eos_token=cfg.get("eos_token"))
    pad = tok.eos_token_id if tok.eos_token_id is not None else 0
    windows, cur_t, cur_m = [], [], []

    def flush():
        nonlocal cur_t, cur_m
        if cur_t:
            t = cur_t + [pad] * (W - len(cur_t))
            m = cur_m + [0] * (W - len(cur_m))
            m[0] = 0
            if sum(m):
                windows.append((t, m))
        cur_t, cur_m = [], []

    for ids, mask in examples(chats, tok, name, mode):
        assert len(ids) <= W, "example longer than a window"
        if len(cur_t) + len(ids) > W:
            flush()
        cur_t += ids
        cur_m += mask
        if len(cur_t) == W:
            flush()
    flush()
    b = open(sft, "rb").read()
    h = struct.unpack("<256i", b[:1024])
    n, w, es = h[2], h[3], h[4]
    assert w == W, (w, W)
    R = 4 + W * es + W
    assert len(b) == 1024 + n * R
    got = []
    for k in range(n):
        r = b[1024 + k * R:1024 + (k + 1) * R]
        cnt = struct.unpack("<I", r[:4])[0]
        t = list(struct.unpack("<%d%s" % (W, "H" if es == 2 else "I"), r[4:4 + W * es]))
        m = list(r[4 + W * es:])
        assert cnt == sum(m[1:]), k
        got.append((t, m))
    if got != windows:
        bad = next((i for i, (a, c) in enumerate(zip(got, windows)) if a != c), min(len(got), len(windows)))
        print("# %s: %d windows, expected %d; first difference at window %d" % (sft, len(got), len(windows), bad))
        return 1
    print("# %s: %d windows of %d tokens equal transformers' rendering, ids and masks" % (sft, n, W))
    return 0


if __name__ == "__main__":
    sys.exit(main())
