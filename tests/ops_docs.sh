#!/bin/bash
# ops_docs.sh -- docs/config.md's key table agrees with the code's one key
# table (issue 16, item 9): every key `ztrain train --print-config` prints has
# a row, every row (outside the pseudo-key table) is a key, and the default
# column names the code's default.
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
done_testing
