#!/bin/bash
# ops_docs.sh -- docs/config.md's key table agrees with the code's one key
# table (issue 16, item 9): every key `ztrain train --print-config` prints has
# a row, every row (outside the pseudo-key table) is a key, and every row's
# environment column names the variable the code reads for it.
. "$(dirname "$0")/lib.sh"
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1
"$ZTRAIN" train --train x --val '' --print-config > cfg.txt 2>&1
ok $? "ztrain train --print-config"
sed -n 's/^  \([a-z_0-9.]*\) *= .*/\1/p' cfg.txt | sort > code.txt
# the rows of the key table: up to the pseudo-key section
sed -n '/^## Keys/,/^### Pseudo-keys/p' "$ZT_SRCDIR/docs/config.md" |
    sed -n 's/^| `\([a-z_0-9.]*\)`.*/\1/p' | sort > doc.txt
ok $(cmp -s code.txt doc.txt; echo $?) \
   "docs/config.md lists exactly the code's $(wc -l < code.txt) keys ($(diff code.txt doc.txt | grep '^[<>]' | tr '\n' ' '))"
ok $(grep -q '^| `zero_optimization.shard_group_size`' "$ZT_SRCDIR/docs/config.md" &&
     grep -q '^| `ztrain.comm_timeout_s`' "$ZT_SRCDIR/docs/config.md"; echo $?) \
   "shard_group_size and comm_timeout_s have rows"
# each row's environment column names the variable the code reads
"$ZTRAIN" train --help > help.txt
if command -v python3 > /dev/null; then
    out=$(python3 - help.txt "$ZT_SRCDIR/docs/config.md" <<'PY'
import re, sys
help_txt = open(sys.argv[1]).read().split("\n")
doc = open(sys.argv[2]).read()
rows = {}
for l in doc.split("\n"):
    m = re.match(r"^\| `([a-z_0-9.]+)`", l)
    if m: rows.setdefault(m.group(1), l)
bad = []
key = None
for l in help_txt:
    m = re.match(r"^  --([a-z_0-9.]+)", l)
    if m: key = m.group(1); continue
    m = re.search(r"; env (ZTRAIN_[A-Z0-9_]+)", l)
    if key and m:
        if key in rows and m.group(1) not in rows[key]: bad.append("%s: %s" % (key, m.group(1)))
        key = None
print(" ".join(bad))
sys.exit(1 if bad else 0)
PY
)
    ok $? "every row names the code's generic environment variable of its key${out:+ (wrong: $out)}"
else
    echo "ok $((TAP_N + 1)) - environment column # SKIP python3 not found"; TAP_N=$((TAP_N + 1))
fi
done_testing
