#!/usr/bin/env python3
"""make_tokenizer_fixtures_cov.py -- the fixtures of issue 30 (Unicode classes, more components); run once,
outputs committed.

    /opt/hfref/bin/python scripts/make_tokenizer_fixtures_cov.py [SRCDIR]

Needs Hugging Face `tokenizers` (0.23.3 was used) and the fixtures of make_tokenizer_fixtures.py (gpt2 and
llama2 give their vocabularies).  Writes under tests/fixtures/tok/:
  unicode.txt               random Unicode (every plane, code points assigned in Unicode 15.0-16.0,
                            "\\U0001F775<s", CJK Extension I) -- valid UTF-8, no surrogates
  <name>/...                as make_tokenizer_fixtures.py (tokenizer.json, ids.txt, ids_special.txt, decoded*.txt
                            for text.txt) plus ids_unicode.txt: encode(unicode.txt, add_special_tokens=False)
Fixtures:
  deepseek3   a byte-level BPE (its merges cross character classes: trained on white-space separated words of
              the corpus and unicode.txt) behind DeepSeek-V3's pre-tokenizer (Split \\p{N}{1,3}, Split CJK, Split with
              \\p{L} \\p{P} \\p{S} \\p{M} classes, ByteLevel without regex)
  classes     the same vocabulary, a Split that keeps only its matches (invert, Removed) with \\p{Lo}, \\p{Lu},
              \\p{Ll}, \\p{N}, \\p{P}, \\p{S}, \\s: what no class matches is dropped, by HF too
  digits      the same vocabulary: Digits(individual_digits) + ByteLevel; padding and truncation set (ignored)
  punct       llama2 vocabulary: WhitespaceSplit, Punctuation(MergedWithNext), Digits(contiguous), Metaspace
  unigram     a Unigram trained on data/tinyshakespeare.txt (SentencePiece style: Metaspace, scores,
              <0xNN> pieces with byte_fallback, unk_id), Metaspace + ByteFallback + Fuse decoders
  unigram_unk the same pieces without byte_fallback and without the byte pieces (unknown characters fuse
              into one unk)
  wordpiece   a WordPiece trained on data/tinyshakespeare.txt, BertPreTokenizer, WordPiece decoder,
              [CLS] $A [SEP]
"""
import copy
import json
import os
import random
import sys

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

SRC = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
CORPUS = os.path.join(SRC, "data", "tinyshakespeare.txt")
OUT = os.path.join(SRC, "tests", "fixtures", "tok")
TEXT = open(os.path.join(OUT, "text.txt"), encoding="utf-8", newline="").read()

random.seed(30)
NEW = ("\U0002EC81\U0002EBF0\U00031350\u1C89\uA7CB\U000105C0\U00011380\U0001E5D0\U00016D40\U0001CCF0"
       "\U0001D2C0\U00011F50\U0001F775<s \U0001FA89\u2FFC\u31EF\U0001F8B0\u0897\U00010D4A")
chars = []
for _ in range(1500):
    r = random.random()
    if r < 0.3:
        c = random.randrange(0x20, 0x3000)
    elif r < 0.6:
        c = random.randrange(0x10000, 0x40000)
    elif r < 0.75:
        c = random.choice([0x20, 0x20, 0x0A, 0x09, 0x3000, 0xA0])
    else:
        c = random.randrange(0, 0x110000)
    if 0xD800 <= c <= 0xDFFF:
        c = 0x41
    chars.append(chr(c))
    if random.random() < 0.05:
        chars.append(random.choice(NEW))
UNI = NEW + " " + "".join(chars) + " " + NEW
with open(os.path.join(OUT, "unicode.txt"), "w", encoding="utf-8", newline="") as f:
    f.write(UNI)


def write_case(name, js, config):
    d = os.path.join(OUT, name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(js, f, ensure_ascii=False, separators=(",", ":"))
    tok = Tokenizer.from_file(os.path.join(d, "tokenizer.json"))
    tok.no_padding()
    tok.no_truncation()
    with open(os.path.join(d, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f, indent=1)
    plain = tok.encode(TEXT, add_special_tokens=False).ids
    spec = tok.encode(TEXT, add_special_tokens=True).ids
    uni = tok.encode(UNI, add_special_tokens=False).ids
    for fname, ids in (("ids.txt", plain), ("ids_special.txt", spec), ("ids_unicode.txt", uni)):
        with open(os.path.join(d, fname), "w") as f:
            f.write(" ".join(map(str, ids)) + "\n")
    for fname, skip in (("decoded.txt", False), ("decoded_skip.txt", True)):
        with open(os.path.join(d, fname), "w", encoding="utf-8", newline="") as f:
            f.write(tok.decode(spec, skip_special_tokens=skip))
    print(f"{name}: vocab {tok.get_vocab_size()}, {len(plain)} ids ({len(spec)} with specials), {len(uni)} unicode ids")


# "wide": a byte-level BPE whose merges cross the class boundaries the patterns below split at (trained on
# white-space separated words of the corpus and of unicode.txt), so that a different split gives other ids
wide = Tokenizer(models.BPE())
wide.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(),
                                              pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
wide.decoder = decoders.ByteLevel()
SENS = [c + x for c in NEW for x in ("<s", "!", "a", ".", "一", c)] + ["a" + c for c in NEW]
lines = (open(CORPUS, encoding="utf-8").read().split("\n") + [UNI[i:i + 40] for i in range(0, len(UNI), 7)] * 3
         + [" ".join(SENS)] * 200)
wide.train_from_iterator(lines, trainers.BpeTrainer(vocab_size=3000, special_tokens=["<|endoftext|>"],
                                                   initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
g = json.loads(wide.to_str())
g["post_processor"] = None
l2 = json.load(open(os.path.join(OUT, "llama2", "tokenizer.json"), encoding="utf-8"))
BL = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}
GCFG = {"bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>"}
LCFG = {"bos_token": "<s>", "eos_token": "</s>"}

DS3 = ("[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+"
       "| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+")
v = copy.deepcopy(g)
v["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
    {"type": "Split", "pattern": {"Regex": "\\p{N}{1,3}"}, "behavior": "Isolated", "invert": False},
    {"type": "Split", "pattern": {"Regex": "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+"}, "behavior": "Isolated", "invert": False},
    {"type": "Split", "pattern": {"Regex": DS3}, "behavior": "Isolated", "invert": False}, BL]}
write_case("deepseek3", v, GCFG)

v = copy.deepcopy(g)
v["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
    {"type": "Split", "pattern": {"Regex": "\\p{Lo}+|\\p{Lu}\\p{Ll}*|\\p{Ll}+|\\p{N}+|\\p{P}+|\\p{S}+|\\s+"},
     "behavior": "Removed", "invert": True}, BL]}
write_case("classes", v, GCFG)

v = copy.deepcopy(g)
v["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
    {"type": "Digits", "individual_digits": True},
    {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}]}
v["truncation"] = {"direction": "Right", "max_length": 16, "strategy": "LongestFirst", "stride": 0}
v["padding"] = {"strategy": {"Fixed": 4096}, "direction": "Right", "pad_to_multiple_of": None, "pad_id": 0,
                "pad_type_id": 0, "pad_token": "<|endoftext|>"}
write_case("digits", v, GCFG)

v = copy.deepcopy(l2)
v["normalizer"] = None
v["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
    {"type": "WhitespaceSplit"}, {"type": "Punctuation", "behavior": "MergedWithNext"},
    {"type": "Digits", "individual_digits": False},
    {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": True}]}
v["decoder"] = {"type": "Sequence", "decoders": [
    {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": True},
    {"type": "ByteFallback"}, {"type": "Fuse"}]}
write_case("punct", v, LCFG)

# Unigram, SentencePiece style
uni = Tokenizer(models.Unigram())
uni.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always")
uni.decoder = decoders.Metaspace(replacement="\u2581", prepend_scheme="always")
uni.train([CORPUS], trainers.UnigramTrainer(vocab_size=700, special_tokens=["<unk>", "<s>", "</s>"],
                                            unk_token="<unk>", shrinking_factor=0.75, max_piece_length=12))
js = json.loads(uni.to_str())
pieces = js["model"]["vocab"]
have = {p for p, _ in pieces}
lo = min(s for _, s in pieces)
bf = copy.deepcopy(js)
bf["model"]["vocab"] = pieces + [["<0x%02X>" % b, 0.0] for b in range(256) if "<0x%02X>" % b not in have]
bf["model"]["byte_fallback"] = True
bf["decoder"] = {"type": "Sequence", "decoders": [
    {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": True},
    {"type": "ByteFallback"}, {"type": "Fuse"}]}
bf["post_processor"] = {"type": "TemplateProcessing",
                        "single": [{"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": "</s>", "type_id": 0}}],
                        "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 0}}],
                        "special_tokens": {"</s>": {"id": "</s>", "ids": [2], "tokens": ["</s>"]}}}
write_case("unigram", bf, LCFG)
nb = copy.deepcopy(js)
nb["model"]["byte_fallback"] = False
write_case("unigram_unk", nb, LCFG)

wp = Tokenizer(models.WordPiece(unk_token="[UNK]", max_input_chars_per_word=12))
wp.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
wp.decoder = decoders.WordPiece(prefix="##", cleanup=True)
wp.train([CORPUS], trainers.WordPieceTrainer(vocab_size=800, special_tokens=["[UNK]", "[CLS]", "[SEP]"]))
cls, sep = wp.token_to_id("[CLS]"), wp.token_to_id("[SEP]")
wp.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]", special_tokens=[("[CLS]", cls), ("[SEP]", sep)])
write_case("wordpiece", json.loads(wp.to_str()), {"bos_token": "[CLS]", "eos_token": "[SEP]"})
