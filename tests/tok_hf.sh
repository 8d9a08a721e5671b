#!/bin/bash
# tok_hf.sh -- ztrain's tokenizer against Hugging Face `tokenizers` itself, when Python can import it
# ($ZT_HF_PYTHON; default /opt/hfref/bin/python if present, else python3); a visible SKIP otherwise.
# For each fixture tokenizer (tests/fixtures/tok): the ids of the WHOLE bundled corpus
# (data/tinyshakespeare.txt, one document) and of 3000 random Unicode documents (JSON Lines: letters of
# many scripts, marks, digits, emoji, whitespace of every kind, special-token strings), written by
# `ztrain prep --tokenizer --doc-sep none`, must equal HF's encode(..., add_special_tokens=False) ids.
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
         "\x00\x01\x1f\x7f\ud7ff\ue000\U0010ffff\U0001d400"]
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

for name in gpt2 llama3 llama2 metaspace; do
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
while read -r line; do
    case "$line" in
        "ok "*) ok 0 "${line#ok }" ;;
        "not ok "*) ok 1 "${line#not ok }" ;;
        *) echo "# $line" ;;
    esac
done < results.txt
check "8 comparisons ran" test "$(grep -c '^ok \|^not ok ' results.txt)" -eq 8
done_testing
