#!/bin/bash
# tok_hf.sh -- ztrain's tokenizer against Hugging Face `tokenizers` itself, when Python can import it
# ($ZT_HF_PYTHON; default /opt/hfref/bin/python if present, else python3); a visible SKIP otherwise.
# For each fixture tokenizer (tests/fixtures/tok): the ids of the WHOLE bundled corpus
# (data/tinyshakespeare.txt, one document) and of 3000 random Unicode documents (JSON Lines: letters of
# many scripts, marks, digits, emoji, whitespace of every kind, special-token strings), written by
# `ztrain prep --tokenizer --doc-sep none`, must equal HF's encode(..., add_special_tokens=False) ids.
# Then 50 variants of the fixtures, one per implemented option (below), on random strings.
. "$(dirname "$0")/lib.sh"
PY=${ZT_HF_PYTHON:-}
if [ -z "$PY" ]; then
    if [ -x /opt/hfref/bin/python ]; then PY=/opt/hfref/bin/python; else PY=python3; fi
fi
if ! "$PY" -c 'import tokenizers' > /dev/null 2>&1; then
    skip_all "Python tokenizers not importable with '$PY' (set ZT_HF_PYTHON)"
fi
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1
FX="$ZT_SRCDIR/tests/fixtures/tok"
echo "# $("$PY" -c 'import tokenizers; print("HF tokenizers", tokenizers.__version__)')"

"$PY" - <<'PY' > /dev/null
import json, random
random.seed(20240520)
pools = [" \t\n\r\x0b\x0c\x85\xa0\u1680\u180e\u2000\u2009\u200a\u200b\u2028\u2029\u202f\u205f\u3000\ufeff",
         "abcXYZ'sStTLlDdmMvVeErR0123456789", "\u00e9\u00c9\u00f1\u00d1\u00fc\u00c5\u00df\u017fK\u212a\u0130\u0131\u01c5\u0301\u0308\u0327",
         "\u65e5\u672c\u8a9e\u4e2d\u6587\ud55c\uad6d\uc5b4\u3072\u3089\u304c\u306a\u30ab\u30bf",
         "\U0001f642\U0001f44d\U0001f3fd\u200d\U0001f468\ufe0f", ".,;:!?()[]{}<>|/\\\"#$%^&*-_=+~`@",
         "\u2460\u00b2\u00bd\ufb01\uff21\uff22\uff23\uff11\uff12\uff13\u2163\u00aa\u00b5\u0660\u0661\u0966\u00bc",
         "\U00031350\U0001e4d0\U00016d70\u1c89\U00011f50",
         "\x00\x01\x1f\x7f\ud7ff\ue000\U0010ffff\U0001d400",
         "\U0002ec81\U0002ebf0\U0001f775<s\u1c89\ua7cb\U000105c0\U00011380\U0001e5d0\U00016d40\U0001ccf0\u0897\U0001fa89"]
specials = ["<|endoftext|>", "<|begin_of_text|>", "<|eot_id|>", "<s>", "</s>", "<unk>", "Citizen", " </s> "]
with open("random.jsonl", "w", encoding="utf-8") as f:
    for i in range(3000):
        parts = []
        for _ in range(random.randint(0, 12)):
            if random.random() < 0.1:
                parts.append(random.choice(specials))
            else:
                pool = random.choice(pools)
                parts.append("".join(random.choice(pool) for _ in range(random.randint(1, 6))))
        f.write(json.dumps({"text": "".join(parts)}) + "\n")
PY
ok $? "random documents written"

FIXTURES="gpt2 llama3 llama2 metaspace deepseek3 classes digits punct unigram unigram_unk wordpiece"
for name in $FIXTURES; do
    "$ZTRAIN" prep --tokenizer "$FX/$name" --input "$ZT_SRCDIR/data/tinyshakespeare.txt" --output c_$name \
        --doc-sep none --val-fraction 0 --threads 2 > /dev/null 2> err.txt || diag err.txt
    "$ZTRAIN" prep --tokenizer "$FX/$name" --input random.jsonl --output r_$name \
        --doc-sep none --val-fraction 0 --threads 2 > /dev/null 2> err.txt || diag err.txt
    "$PY" - "$FX/$name/tokenizer.json" "$ZT_SRCDIR/data/tinyshakespeare.txt" c_${name}_train.bin \
        random.jsonl r_${name}_train.bin "$name" <<'PY'
import json, struct, sys
from tokenizers import Tokenizer
tj, corpus, cbin, rj, rbin, name = sys.argv[1:]
tok = Tokenizer.from_file(tj)
tok.no_padding(); tok.no_truncation()   # ztrain accepts these sections and ignores them (prep packs whole documents)

def shard(path):
    d = open(path, "rb").read()
    magic, ver, n = struct.unpack("<3i", d[:12])
    w = 2 if magic == 20240520 else 4
    return list(struct.unpack("<%d%s" % (n, "H" if w == 2 else "I"), d[1024:1024 + w * n]))

def report(what, got, want):
    i = next((k for k, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
    ok = got == want
    print("%s %s: %s: %d ids%s" % ("ok" if ok else "not ok", name, what, len(want),
          "" if ok else " (got %d, first difference at %d)" % (len(got), i)))

text = open(corpus, encoding="utf-8").read()
report("the whole corpus (%d bytes) == HF" % len(text.encode()), shard(cbin), tok.encode(text, add_special_tokens=False).ids)
docs = [json.loads(l)["text"] for l in open(rj, encoding="utf-8")]
want = [i for e in tok.encode_batch(docs, add_special_tokens=False) for i in e.ids]
report("3000 random Unicode documents == HF", shard(rbin), want)
PY
    [ $? -eq 0 ] || true
done > results.txt
# Every implemented component, also those the fixtures do not use: variants of the gpt2 / llama2 fixtures
# (Split with each behaviour, inverted or not, regex and string patterns; ByteLevel add_prefix_space; NFC,
# NFD, NFKC, NFKD, Replace (regex, empty content), Prepend; Metaspace with each prepend_scheme, split or not,
# and its decoder; Replace/Strip decoders; no decoder; unk with and without fuse_unk; no unk; added tokens
# lstrip + normalized), each on 800 random strings: ids with and without special tokens and both decodes,
# through tests/tok_batch.  Strings on which HF itself panics (its Strip decoder when a token is shorter
# than what it strips) would not be compared (these variants avoid such tokens).
RUST_BACKTRACE=0 "$PY" - "$FX" "$ZT_BUILDDIR/tests/tok_batch" <<'PY' >> results.txt 2> variants.err
import copy, json, random, subprocess, sys
from tokenizers import Tokenizer
fx, batch = sys.argv[1], sys.argv[2]
g = json.load(open(fx + "/gpt2/tokenizer.json", encoding="utf-8"))
l2 = json.load(open(fx + "/llama2/tokenizer.json", encoding="utf-8"))
V = {}
BL = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}
for beh in ["Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous"]:
    for inv in [False, True]:
        for pat in [{"Regex": r"\s+"}, {"String": " "}, {"Regex": r"\p{N}|[aeiou]"}]:
            v = copy.deepcopy(g)
            v["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
                {"type": "Split", "pattern": pat, "behavior": beh, "invert": inv}, BL]}
            V["Split %s invert=%s %s" % (beh, inv, json.dumps(pat))] = v
v = copy.deepcopy(g); v["pre_tokenizer"]["add_prefix_space"] = True; V["ByteLevel add_prefix_space"] = v
v = copy.deepcopy(g); v["pre_tokenizer"] = dict(BL, add_prefix_space=True); V["ByteLevel add_prefix_space, no regex"] = v
for nf in ["NFC", "NFD", "NFKC", "NFKD"]:
    v = copy.deepcopy(g); v["normalizer"] = {"type": nf}; V["normalizer " + nf] = v
v = copy.deepcopy(g)
v["normalizer"] = {"type": "Sequence", "normalizers": [
    {"type": "Replace", "pattern": {"Regex": r"\s+"}, "content": " "}, {"type": "Prepend", "prepend": "#"}]}
V["normalizers Replace(regex) + Prepend"] = v
v = copy.deepcopy(g); v["normalizer"] = {"type": "Replace", "pattern": {"String": "e"}, "content": ""}
V["normalizer Replace with empty content"] = v
for ps in ["always", "never", "first"]:
    for sp in [True, False]:
        v = copy.deepcopy(l2); v["normalizer"] = None
        v["pre_tokenizer"] = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": ps, "split": sp}
        v["decoder"] = {"type": "Sequence", "decoders": [
            {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": ps, "split": sp},
            {"type": "ByteFallback"}, {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 2, "stop": 0}]}
        V["Metaspace prepend_scheme=%s split=%s" % (ps, sp)] = v
v = copy.deepcopy(l2)
v["decoder"] = {"type": "Sequence", "decoders": [
    {"type": "Replace", "pattern": {"Regex": "\u2581+"}, "content": "_"}, {"type": "ByteFallback"},
    {"type": "Strip", "content": "_", "start": 1, "stop": 0}]}
V["decoders Replace(regex) + ByteFallback + Strip(start)"] = v
v = copy.deepcopy(g)
v["decoder"] = {"type": "Sequence", "decoders": [{"type": "Strip", "content": "e", "start": 0, "stop": 1},
                                                 {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True}]}
V["decoders Strip(stop) + ByteLevel"] = v
v = copy.deepcopy(l2); v["decoder"] = None; V["no decoder"] = v
v = copy.deepcopy(l2); v["model"]["byte_fallback"] = False; V["unk, fuse_unk"] = v
v = copy.deepcopy(l2); v["model"]["byte_fallback"] = False; v["model"]["fuse_unk"] = False; V["unk, no fuse_unk"] = v
v = copy.deepcopy(l2); v["model"]["byte_fallback"] = False; v["model"]["unk_token"] = None; V["no unk (dropped)"] = v
v = copy.deepcopy(l2)
for a in v["added_tokens"]:
    a["lstrip"] = True; a["normalized"] = True
V["added tokens lstrip + normalized"] = v

# issue 30: the char-predicate pre-tokenizers, Unigram and WordPiece
for beh in ["Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous"]:
    v = copy.deepcopy(g)
    v["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [{"type": "Punctuation", "behavior": beh}, BL]}
    V["Punctuation %s" % beh] = v
for ind in [True, False]:
    v = copy.deepcopy(g)
    v["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [{"type": "Digits", "individual_digits": ind}, BL]}
    V["Digits individual_digits=%s" % ind] = v
for pt in ["WhitespaceSplit", "Whitespace", "BertPreTokenizer"]:
    v = copy.deepcopy(g)
    v["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [{"type": pt}, BL]}
    V["pre_tokenizer " + pt] = v
v = copy.deepcopy(g); v["padding"] = {"strategy": "BatchLongest", "direction": "Left", "pad_to_multiple_of": 8, "pad_id": 0,
                                      "pad_type_id": 0, "pad_token": "<|endoftext|>"}
v["truncation"] = {"direction": "Left", "max_length": 3, "strategy": "OnlyFirst", "stride": 1}
V["padding + truncation (ignored)"] = v
u = json.load(open(fx + "/unigram/tokenizer.json", encoding="utf-8"))
v = copy.deepcopy(u); V["Unigram byte_fallback"] = v
v = copy.deepcopy(u); v["model"]["byte_fallback"] = False; V["Unigram unk (fused)"] = v
v = copy.deepcopy(u); v["pre_tokenizer"] = None; v["normalizer"] = {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}
V["Unigram without pre-tokenizer (whole text, Replace normalizer)"] = v
w = json.load(open(fx + "/wordpiece/tokenizer.json", encoding="utf-8"))
V["WordPiece + BertPreTokenizer + WordPiece decoder"] = copy.deepcopy(w)
v = copy.deepcopy(w); v["decoder"]["cleanup"] = False; v["model"]["max_input_chars_per_word"] = 4; V["WordPiece max 4 chars, no cleanup"] = v

random.seed(14)
pools = [" \t\n\r\u00a0\u3000\u2009", " ", "abcdeioXYZ0123456789", "\u00e9\u00f1\u00fc\u00c5\u00df\u0301\u0308",
         "\u65e5\u672c\u8a9e\u4e2d\u6587\ud55c\uad6d\uc5b4", "\U0001f642\U0001f44d", ".,;:!?()<>|/\\\"#$",
         "\u2460\u00b2\u00bd\ufb01\uff21\uff22\uff23\uff11\uff12\uff13", "<s></s><unk>\u2581\u2581",
         "\U0002ec81\U0001f775<s\u1c89\U00011f50\u0660\u0967\u2160\u00a7\u00bf\u2e3b\U0001e5ff\ufe30\uff08\u055a"]
recs = ["".join(random.choice(random.choice(pools)) for _ in range(random.randint(0, 30))) for _ in range(800)]
with open("variants.bin", "wb") as f:
    for r in recs:
        b = r.encode("utf-8"); f.write(b"%d\n" % len(b)); f.write(b)
for k, (name, js) in enumerate(V.items()):
    path = "variant%d.json" % k
    with open(path, "w", encoding="utf-8") as f:
        json.dump(js, f, ensure_ascii=False)
    tok = Tokenizer.from_file(path)
    tok.no_padding(); tok.no_truncation()
    out = subprocess.run([batch, path, "variants.bin"], capture_output=True).stdout.decode("utf-8", "replace").split("\n")
    bad = skipped = 0
    first = ""
    for r, line in zip(recs, out):
        try:
            e0 = tok.encode(r, add_special_tokens=False).ids
            e1 = tok.encode(r, add_special_tokens=True).ids
            want = "%s|%s|%s|%s|" % (" ".join(map(str, e0)), " ".join(map(str, e1)),
                                     tok.decode(e1, skip_special_tokens=False).encode().hex(),
                                     tok.decode(e1, skip_special_tokens=True).encode().hex())
        except BaseException:
            skipped += 1
            continue
        if want != line:
            bad += 1
            first = first or repr(r)
    print("%s %s: %d random strings == HF (ids, ids with specials, both decodes)%s%s" % (
          "not ok" if bad or len(out) < len(recs) else "ok", name, len(recs) - skipped,
          " [%d HF panics skipped]" % skipped if skipped else "",
          " [%d differ, first %s]" % (bad, first) if bad else ""))
PY

while read -r line; do
    case "$line" in
        "ok "*) ok 0 "${line#ok }" ;;
        "not ok "*) ok 1 "${line#not ok }" ;;
        *) echo "# $line" ;;
    esac
done < results.txt
NWANT=$((2 * $(echo $FIXTURES | wc -w) + 67))
check "$NWANT comparisons ran" test "$(grep -c '^ok \|^not ok ' results.txt)" -eq $NWANT
[ "$(grep -c '^ok \|^not ok ' results.txt)" -eq $NWANT ] || grep -v '^  ' variants.err | head -20 | diag
# issue 45 item 6c: every field of every component, missing, null, out of range, of the wrong type:
# ztrain accepts exactly what HF accepts (but for the differences the script names)
"$PY" "$ZT_SRCDIR/scripts/tok_fields_probe.py" "$ZTRAIN" > fields.txt 2>&1
ok $? "tokenizer.json fields: $(tail -n 1 fields.txt)"
grep '^differ' fields.txt | head -20 | diag
done_testing
