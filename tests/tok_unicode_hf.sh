#!/bin/bash
# tok_unicode_hf.sh -- the character classes of tokenizer regexes against HF tokenizers' own regex engine
# (Oniguruma, as built into the `tokenizers` wheel), over all 1,112,064 Unicode scalar values, when Python
# can import tokenizers ($ZT_HF_PYTHON; default /opt/hfref/bin/python if present, else python3); a visible
# SKIP otherwise.  For each pattern below (one atom), the code points matched by PATTERN+ over one text of every
# scalar value: HF's (a Split pre-tokenizer, invert, Removed: the matches kept) == ztrain's (tests/tok_classes).
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
echo "# $("$PY" -c 'import tokenizers; print("HF tokenizers", tokenizers.__version__)')"
cat > patterns.txt <<'PAT'
\p{L}
\p{Lu}
\p{Ll}
\p{Lt}
\p{Lm}
\p{Lo}
\p{LC}
\p{M}
\p{Mn}
\p{Mc}
\p{Me}
\p{N}
\p{Nd}
\p{Nl}
\p{No}
\p{P}
\p{Pc}
\p{Pd}
\p{Ps}
\p{Pe}
\p{Pi}
\p{Pf}
\p{Po}
\p{S}
\p{Sm}
\p{Sc}
\p{Sk}
\p{So}
\p{Z}
\p{Zs}
\p{C}
\p{Cc}
\p{Cf}
\p{Co}
\p{Cn}
\P{L}
\p{^N}
[\P{P}]
[^\p{L}\p{N}]
[\p{L}\p{M}]
[^\r\n\p{L}\p{P}\p{S}]
[^\s\p{L}\p{N}]
[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]
\s
\S
\w
\W
[\W\d]
[\w]
[\W]
[\p{Word}]
[\P{Word}]
\d
\D
\h
\v
[[:alpha:]]
[[:^alpha:]]
[[:alnum:]]
[[:punct:]]
[[:space:]]
[[:upper:]]
[[:lower:]]
[[:word:]]
[[:cntrl:]]
[[:graph:]]
[[:print:]]
[[:xdigit:]]
[[:blank:]]
\p{Alpha}
\p{Punct}
\p{Word}
\p{Upper}
\p{Assigned}
\p{Han}
\p{Hiragana}
\p{Katakana}
\p{Hangul}
\p{Latin}
\p{Cyrillic}
\p{Arabic}
\p{Common}
\p{Emoji}
\p{Uppercase_Letter}
\p{ other letter }
[a[bc]\d]
.
\pL
PAT
"$ZT_BUILDDIR/tests/tok_classes" patterns.txt > ours.txt 2> err.txt || diag err.txt
"$PY" - patterns.txt ours.txt <<'PY' > results.txt
import sys
from tokenizers import Regex, pre_tokenizers
pats = [l.rstrip("\n") for l in open(sys.argv[1], encoding="utf-8")]
ours = [l.rstrip("\n") for l in open(sys.argv[2])]
CPS = [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
TEXT = "".join(map(chr, CPS))
def merge(rs):
    out = []
    for a, b in sorted(rs):
        if out and a <= out[-1][1] + 1: out[-1][1] = max(out[-1][1], b)
        else: out.append([a, b])
    return out
total = 0
for pat, line in zip(pats, ours):
    pieces = pre_tokenizers.Split(Regex("%s+" % pat), behavior="removed", invert=True).pre_tokenize_str(TEXT)
    hf = []
    for _, (a, b) in pieces:
        for i in range(a, b):
            c = CPS[i]
            if hf and hf[-1][1] == c - 1: hf[-1][1] = c
            else: hf.append([c, c])
    hf = merge(hf)
    if line.startswith("ERR"):
        print("not ok %s: ztrain refuses it (%s)" % (pat, line)); continue
    got = merge([[int(x, 16) for x in r.split("-")] for r in line.split()])
    n = sum(b - a + 1 for a, b in hf)
    total += len(CPS)
    if got == hf:
        print("ok %s: the same %d of 1112064 code points as HF's Oniguruma" % (pat, n))
    else:
        gs = set(c for a, b in got for c in range(a, b + 1)); hs = set(c for a, b in hf for c in range(a, b + 1))
        d = sorted(gs ^ hs)
        print("not ok %s: %d code points differ from HF's (first U+%04X; HF %d members, ztrain %d)" % (pat, len(d), d[0], len(hs), len(gs)))
print("# %d code point memberships compared" % total)
PY
while read -r line; do
    case "$line" in
        "ok "*) ok 0 "${line#ok }" ;;
        "not ok "*) ok 1 "${line#not ok }" ;;
        *) echo "$line" ;;
    esac
done < results.txt
want=$(grep -c . patterns.txt)
check "$want patterns compared" test "$(grep -c '^ok \|^not ok ' results.txt)" -eq "$want"
done_testing
