#!/bin/bash
# chat_auto_hf.sh -- the `--template auto` fixtures against transformers, when
# the reference Python stack is installed (/opt/hfref/bin/python, or
# $ZT_HFREF_PYTHON): scripts/make_chat_auto_fixtures.py re-renders every
# real template's conversations and snippets with apply_chat_template today,
# and its output must equal the committed tests/data/sft/auto.json (which
# tests/test_chat_auto compares with ztrain's renderings, ids and masks).
. "$(dirname "$0")/lib.sh"
PY=${ZT_HFREF_PYTHON:-/opt/hfref/bin/python}
[ -x "$PY" ] && "$PY" -c "import transformers" 2> /dev/null || skip_all "no transformers ($PY)"
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
cd "$ZT_SRCDIR" || exit 1
"$PY" scripts/make_chat_auto_fixtures.py "$T" > "$T/out" 2> "$T/err"
ok $? "scripts/make_chat_auto_fixtures.py runs (transformers renders every case; the traced text == its text)"
diag "$T/out"
for f in auto.json auto/tokenizer.json; do
    check "tests/data/sft/$f is what the script writes today" cmp -s "$T/$f" "tests/data/sft/$f"
done
done_testing
