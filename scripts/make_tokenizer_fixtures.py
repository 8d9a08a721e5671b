#!/usr/bin/env python3
"""make_tokenizer_fixtures.py -- build the tokenizer exactness fixtures (run once, outputs committed).

    /opt/hfref/bin/python scripts/make_tokenizer_fixtures.py [SRCDIR]

Needs Hugging Face `tokenizers` (0.23 was used).  Trains small BPE tokenizers on data/tinyshakespeare.txt and
writes, under tests/fixtures/tok/:
  text.txt                    the test text (ASCII, accented Latin, CJK, emoji, code, numbers, whitespace
                              runs, CRLF, tabs, special-token strings, NFKC material)
  <name>/tokenizer.json       the tokenizer (plus tokenizer_config.json: bos/eos tokens)
  <name>/ids.txt              encode(text, add_special_tokens=False).ids, space separated
  <name>/ids_special.txt      encode(text, add_special_tokens=True).ids
  <name>/decoded.txt          decode(ids_special, skip_special_tokens=False)
  <name>/decoded_skip.txt     decode(ids_special, skip_special_tokens=True)
Fixtures:
  gpt2      ByteLevel BPE, GPT-2 split pattern (ByteLevel use_regex), <|endoftext|>, merges as "a b" strings
  llama3    Split(Llama-3 pattern) + ByteLevel(use_regex false), ignore_merges (with a vocab entry that only
            ignore_merges produces), Llama-3 special tokens, TemplateProcessing BOS
  llama2    Metaspace-style BPE with byte_fallback (<0x00>..<0xFF>), normalizers Prepend + Replace,
            decoders Replace/ByteFallback/Fuse/Strip, <unk>/<s>/</s>, TemplateProcessing BOS
  metaspace the llama2 vocabulary behind NFKC + the Metaspace pre-tokenizer (prepend_scheme first) and the
            Metaspace decoder; added tokens with lstrip/rstrip, normalized, and non-special ones
"""
import json
import os
import sys

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

SRC = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
CORPUS = os.path.join(SRC, "data", "tinyshakespeare.txt")
OUT = os.path.join(SRC, "tests", "fixtures", "tok")

LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                  r"|\s*[\r\n]+|\s+(?!\S)|\s+")
LLAMA3_SPECIAL = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>",
                  "<|eot_id|>"]

TEXT = (
    "First Citizen:\nBefore we proceed any further, hear me speak.\n\n"
    "All:\r\nSpeak, speak.\r\n"
    "Don't, I'LL, it's, we'VE, they'd\u2014caf\u00e9 na\u00efve \u00c5ngstr\u00f6m fa\u00e7ade "
    "se\u0301ance (combining)\n"
    "\u65e5\u672c\u8a9e\u306e\u6587\u7ae0\u3002\u4e2d\u6587\uff0c\ud55c\uad6d\uc5b4 "
    "\U0001f642\U0001f44d\U0001f3fd \U0001f468\u200d\U0001f469\u200d\U0001f467\n"
    "def f(x):\n\treturn x**2  # comment\n\tif x >= 10: print(\"{}\".format(x))\n"
    "12345 3.14159 1,000,000 007 2024-05-20\n"
    "a    b\t\tc   \n   leading and trailing   \n\n\n"
    "\uff21\uff22\uff23\uff11\uff12\uff13 \ufb01ne \u2460 x\u00b2 \u00bd\n"
    "zzyzx zzyzx!zzyzx\n"
    "<|endoftext|>next doc <|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|>"
    " <s> x</s>y <unk> <|end_of_text|>\n"
    "   \u00a0 \u3000end"
)


def write_case(name, tok, config, raw=None):
    """raw: the JSON to write as is (else tok's serialization, which writes merges as pairs)"""
    d = os.path.join(OUT, name)
    os.makedirs(d, exist_ok=True)
    js = raw if raw is not None else json.loads(tok.to_str())
    with open(os.path.join(d, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(js, f, ensure_ascii=False, separators=(",", ":"))
    # expected values come from HF loading exactly the file written
    tok = Tokenizer.from_file(os.path.join(d, "tokenizer.json"))
    with open(os.path.join(d, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f, indent=1)
    plain = tok.encode(TEXT, add_special_tokens=False).ids
    spec = tok.encode(TEXT, add_special_tokens=True).ids
    with open(os.path.join(d, "ids.txt"), "w") as f:
        f.write(" ".join(map(str, plain)) + "\n")
    with open(os.path.join(d, "ids_special.txt"), "w") as f:
        f.write(" ".join(map(str, spec)) + "\n")
    for fname, skip in (("decoded.txt", False), ("decoded_skip.txt", True)):
        with open(os.path.join(d, fname), "w", encoding="utf-8", newline="") as f:
            f.write(tok.decode(spec, skip_special_tokens=skip))
    print(f"{name}: vocab {tok.get_vocab_size()}, {len(plain)} ids ({len(spec)} with specials)")


def gpt2():
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    tr = trainers.BpeTrainer(vocab_size=1200, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                             special_tokens=["<|endoftext|>"], show_progress=False)
    tok.train([CORPUS], tr)
    js = json.loads(tok.to_str())
    js["model"]["merges"] = [" ".join(m) for m in js["model"]["merges"]]   # the older "a b" form
    write_case("gpt2", Tokenizer.from_str(json.dumps(js)),
               {"bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>"}, raw=js)


def llama3():
    tok = Tokenizer(models.BPE(ignore_merges=True))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    tr = trainers.BpeTrainer(vocab_size=1500, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                             show_progress=False)
    tok.train([CORPUS], tr)
    js = json.loads(tok.to_str())
    js["model"]["ignore_merges"] = True
    vocab = js["model"]["vocab"]
    # a word only ignore_merges produces whole: "Ġzzyzx" has no merge path
    vocab["\u0120zzyzx"] = len(vocab)
    base = len(vocab)
    js["added_tokens"] = [{"id": base + i, "content": c, "single_word": False, "lstrip": False, "rstrip": False,
                           "normalized": False, "special": True} for i, c in enumerate(LLAMA3_SPECIAL)]
    tok = Tokenizer.from_str(json.dumps(js))
    bos = tok.token_to_id("<|begin_of_text|>")
    tok.post_processor = processors.Sequence([
        processors.ByteLevel(trim_offsets=False),
        processors.TemplateProcessing(single="<|begin_of_text|> $A", pair="<|begin_of_text|> $A <|begin_of_text|> $B",
                                      special_tokens=[("<|begin_of_text|>", bos)])])
    write_case("llama3", tok, {"bos_token": "<|begin_of_text|>", "eos_token": "<|end_of_text|>"})


def llama2_json():
    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always", split=True)
    tr = trainers.BpeTrainer(vocab_size=1000, special_tokens=["<unk>", "<s>", "</s>"], show_progress=False)
    tok.train([CORPUS], tr)
    js = json.loads(tok.to_str())
    old = js["model"]["vocab"]
    vocab = {}
    for t, i in sorted(old.items(), key=lambda kv: kv[1]):
        if i < 3:
            vocab[t] = i
    for b in range(256):
        vocab["<0x%02X>" % b] = 3 + b
    for t, i in sorted(old.items(), key=lambda kv: kv[1]):
        if i >= 3:
            vocab[t] = i + 256
    js["model"]["vocab"] = vocab
    for a in js["added_tokens"]:
        a["id"] = vocab[a["content"]]
    return js


def llama2(js):
    js = json.loads(json.dumps(js))
    js["normalizer"] = {"type": "Sequence", "normalizers": [
        {"type": "Prepend", "prepend": "\u2581"},
        {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]}
    js["pre_tokenizer"] = None
    js["decoder"] = {"type": "Sequence", "decoders": [
        {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
        {"type": "ByteFallback"}, {"type": "Fuse"},
        {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}
    tok = Tokenizer.from_str(json.dumps(js))
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B",
                                                       special_tokens=[("<s>", 1)])
    write_case("llama2", tok, {"bos_token": "<s>", "eos_token": "</s>"})


def metaspace(js):
    js = json.loads(json.dumps(js))
    js["normalizer"] = {"type": "NFKC"}
    js["pre_tokenizer"] = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first",
                           "split": False}
    js["decoder"] = {"type": "Sequence", "decoders": [
        {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first", "split": False},
        {"type": "ByteFallback"}, {"type": "Fuse"}]}
    # added-token options: </s> strips the spaces around it, <unk> is matched in the normalized text, and
    # "Citizen" / "ＡＢＣ" are non-special added tokens matched after NFKC (the second only as "ABC")
    for a in js["added_tokens"]:
        if a["content"] == "</s>":
            a["lstrip"] = a["rstrip"] = True
        if a["content"] == "<unk>":
            a["normalized"] = True
    n = len(js["model"]["vocab"])
    js["added_tokens"] += [
        {"id": n, "content": "Citizen", "single_word": False, "lstrip": False, "rstrip": False,
         "normalized": True, "special": False},
        {"id": n + 1, "content": "\uff21\uff22\uff23", "single_word": False, "lstrip": False, "rstrip": False,
         "normalized": True, "special": False}]
    write_case("metaspace", Tokenizer.from_str(json.dumps(js)), {"bos_token": "<s>", "eos_token": "</s>"})


def main():
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "text.txt"), "w", encoding="utf-8", newline="") as f:
        f.write(TEXT)
    gpt2()
    llama3()
    js = llama2_json()
    llama2(js)
    metaspace(js)


if __name__ == "__main__":
    main()
