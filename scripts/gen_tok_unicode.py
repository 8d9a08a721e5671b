#!/usr/bin/env python3
"""gen_tok_unicode.py -- the Unicode character classes of HF tokenizers' regex engine, as C tables.

    /opt/hfref/bin/python scripts/gen_tok_unicode.py [SRCDIR]     (writes SRCDIR/io/tokenizer_unicode.c)

HF tokenizers compiles Split/Replace patterns with the Oniguruma built into the `tokenizers` wheel (0.23:
Unicode 16.0 tables); ztrain matches with PCRE2 (Debian 12: Unicode 14.0) and Debian 12's utf8proc knows
Unicode 15.0, so neither library's tables can be used as they are.  This script takes every class from the
reference engine itself: for each class it runs a Split pre-tokenizer (invert, "removed": the matches are
kept) with the pattern CLASS+ over one string of all 1,112,064 Unicode scalar values, and records the
members as code-point ranges.  Every alias spelling listed below is probed too and must give the same set
as its canonical name (Oniguruma ignores case, spaces, '_' and '-' in property names), and every negated
spelling (\\P{..}, \\p{^..}, [:^..:], \\S \\W \\D \\H) must give the complement.  The predicates of HF's own
pre-tokenizers (Punctuation/BertPreTokenizer, Digits, WhitespaceSplit) are taken the same way.  The output
is committed; tests/test_tok_unicode checks it against utf8proc over all code points, and
tests/tok_unicode_hf.sh checks the rewritten patterns against tokenizers over all code points.
"""
import os
import sys

import tokenizers
from tokenizers import Regex, pre_tokenizers

SRC = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
CPS = [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
TEXT = "".join(map(chr, CPS))


def runs(pieces):
    """(start, end) character offsets of pieces -> merged index runs (a canonical form)"""
    r = []
    for _, (a, b) in pieces:
        if r and r[-1][1] == a:
            r[-1][1] = b
        elif b > a:
            r.append([a, b])
    return tuple(map(tuple, r))


def members(pat):
    return runs(pre_tokenizers.Split(Regex(pat), behavior="removed", invert=True).pre_tokenize_str(TEXT))


def complement(rs):
    out, prev = [], 0
    for a, b in rs:
        if a > prev:
            out.append((prev, a))
        prev = b
    if prev < len(CPS):
        out.append((prev, len(CPS)))
    return tuple(out)


def ranges(rs):
    """index runs -> code-point [lo, hi] ranges (a run crossing the surrogate gap is split)"""
    r = []
    for a, b in rs:
        lo, hi = CPS[a], CPS[b - 1]
        if lo < 0xD800 < hi:
            r += [[lo, 0xD7FF], [0xE000, hi]]
        else:
            r.append([lo, hi])
    return r


def count(rs):
    return sum(b - a for a, b in rs)


GC = {  # general categories: short name -> long aliases
    "Lu": ["Uppercase_Letter"], "Ll": ["Lowercase_Letter"], "Lt": ["Titlecase_Letter"], "Lm": ["Modifier_Letter"],
    "Lo": ["Other_Letter"], "Mn": ["Nonspacing_Mark"], "Mc": ["Spacing_Mark"], "Me": ["Enclosing_Mark"],
    "Nd": ["Decimal_Number"], "Nl": ["Letter_Number"], "No": ["Other_Number"], "Pc": ["Connector_Punctuation"],
    "Pd": ["Dash_Punctuation"], "Ps": ["Open_Punctuation"], "Pe": ["Close_Punctuation"],
    "Pi": ["Initial_Punctuation"], "Pf": ["Final_Punctuation"], "Po": ["Other_Punctuation"],
    "Sm": ["Math_Symbol"], "Sc": ["Currency_Symbol"], "Sk": ["Modifier_Symbol"], "So": ["Other_Symbol"],
    "Zs": ["Space_Separator"], "Zl": ["Line_Separator"], "Zp": ["Paragraph_Separator"], "Cc": ["Control"],
    "Cf": ["Format"], "Cs": ["Surrogate"], "Co": ["Private_Use"], "Cn": ["Unassigned"],
    "L": ["Letter"], "LC": ["Cased_Letter"], "M": ["Mark", "Combining_Mark"], "N": ["Number"],
    "P": ["Punctuation"], "S": ["Symbol"], "Z": ["Separator"], "C": ["Other"],
}
# other \p{..} names (Oniguruma's POSIX-like properties, a few binary properties and scripts)
PROPS = {
    "Any": [], "Assigned": [], "ASCII": [], "Alpha": ["Alphabetic"], "Alnum": [], "Punct": [], "Space": ["White_Space"],
    "Digit": [], "Word": [], "Upper": ["Uppercase"], "Lower": ["Lowercase"], "Cntrl": [], "Blank": [], "Graph": [],
    "Print": [], "XDigit": [],
    "Latin": [], "Greek": [], "Cyrillic": [], "Armenian": [], "Hebrew": [], "Arabic": [], "Devanagari": [],
    "Bengali": [], "Tamil": [], "Thai": [], "Georgian": [], "Hangul": [], "Hiragana": [], "Katakana": [],
    "Han": [], "Common": [], "Inherited": [], "Emoji": [],
}
POSIX = ["alpha", "alnum", "ascii", "blank", "cntrl", "digit", "graph", "lower", "print", "punct", "space",
         "upper", "xdigit", "word"]

sets = []          # distinct member sets (index runs)
index = {}
names = []         # (kind, normalized name, set number)


def intern(s):
    if s not in index:
        index[s] = len(sets)
        sets.append(s)
    return index[s]


def norm(n):
    return "".join(ch for ch in n.lower() if ch not in " _-")


for table in (GC, PROPS):
    for name, aliases in table.items():
        s = members(r"\p{%s}+" % name)
        k = intern(s)
        names.append(("p", norm(name), k))
        for a in aliases:
            if members(r"\p{%s}+" % a) != s:
                sys.exit("alias %s of %s differs" % (a, name))
            names.append(("p", norm(a), k))
for p in POSIX:
    names.append(("posix", p, intern(members(r"[[:%s:]]+" % p))))
for esc in "wdsh":
    names.append(("esc", esc, intern(members("\\%s+" % esc))))
for kind, n, k in names:   # the negated spellings must be complements
    pats = {"p": [r"\P{%s}+" % n, r"\p{^%s}+" % n], "posix": [r"[[:^%s:]]+" % n], "esc": ["\\" + n.upper() + "+"]}[kind]
    for pat in pats:
        if members(pat) != complement(sets[k]):
            sys.exit("%s is not the complement of %s" % (pat, n))
# the predicates of HF's pre-tokenizers: what Punctuation(removed) and WhitespaceSplit remove; the numeric
# runs of Digits(individual_digits=False) (Contiguous: numeric and other runs alternate, U+0000 is not numeric)
names.append(("hf", "punct", intern(complement(runs(pre_tokenizers.Punctuation(behavior="removed").pre_tokenize_str(TEXT))))))
names.append(("hf", "whitespace", intern(complement(runs(pre_tokenizers.WhitespaceSplit().pre_tokenize_str(TEXT))))))
dig = pre_tokenizers.Digits(individual_digits=False).pre_tokenize_str(TEXT)
names.append(("hf", "numeric", intern(runs(dig[1::2]))))

nr = sum(len(ranges(s)) for s in sets)
with open(os.path.join(SRC, "io", "tokenizer_unicode.c"), "w") as f:
    f.write("/* tokenizer_unicode.c -- GENERATED by scripts/gen_tok_unicode.py from HF tokenizers %s (its Oniguruma's\n"
            " * Unicode tables), do not edit.  %d distinct classes, %d ranges, %d names.  See io/tokenizer_int.h. */\n"
            % (tokenizers.__version__, len(sets), nr, len(names)))
    f.write('#include "tokenizer_int.h"\n\n')
    f.write("/* the classes' code-point ranges, [lo, hi] pairs, one class after another */\n")
    f.write("static const uint32_t R[] = {\n")
    offs = []
    pos = 0
    for s in sets:
        r = ranges(s)
        offs.append((pos, len(r)))
        pos += len(r)
        line = "   "
        for lo, hi in r:
            item = " 0x%X,0x%X," % (lo, hi)
            if len(line) + len(item) > 118:
                f.write(line + "\n")
                line = "   "
            line += item
        if line.strip():
            f.write(line + "\n")
    f.write("};\n\n")
    f.write("const zt_uc_class zt_uc_classes[] = {\n")
    for k, (o, n) in enumerate(offs):
        f.write("    {R + %d, %d, %d},\n" % (2 * o, n, count(sets[k])))
    f.write("};\n")
    f.write("const int zt_uc_nclasses = %d;\n\n" % len(sets))
    f.write("/* kind: 'p' \\p{NAME} (NAME lower-cased without ' ', '_', '-'), 'x' [:NAME:], 'e' the escape \\NAME,\n"
            " * 'h' a predicate of HF's pre-tokenizers (punct: Punctuation/BertPreTokenizer, whitespace:\n"
            " * WhitespaceSplit, numeric: Digits) */\n")
    f.write("const zt_uc_name zt_uc_names[] = {\n")
    for kind, n, k in names:
        f.write('    {\'%s\', "%s", %d},\n' % ({"p": "p", "posix": "x", "esc": "e", "hf": "h"}[kind], n, k))
    f.write("};\n")
    f.write("const int zt_uc_nnames = %d;\n" % len(names))
    f.write('const char zt_uc_source[] = "HF tokenizers %s";\n' % tokenizers.__version__)
print("%d classes, %d ranges, %d names" % (len(sets), nr, len(names)))
