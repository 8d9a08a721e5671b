#!/bin/bash
# sft_hf.sh -- `ztrain prep --sft` against transformers, when the reference
# Python stack is installed (/opt/hfref/bin/python, or $ZT_HFREF_PYTHON):
# the committed fixtures are what scripts/make_sft_fixtures.py produces now,
# and for every template the .sft windows (tokens, masks, counts) of the
# chats fixture equal transformers' apply_chat_template + tokenizer +
# assistant-token masks (all of them, the last turn's, or every token)
# packed as docs/sft.md says (scripts/sft_reference.py).
. "$(dirname "$0")/lib.sh"
PY=${ZT_HFREF_PYTHON:-/opt/hfref/bin/python}
[ -x "$PY" ] && "$PY" -c "import transformers" 2> /dev/null || skip_all "no transformers ($PY)"
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
cd "$ZT_SRCDIR" || exit 1
mkdir -p "$T/fx"
"$PY" scripts/make_sft_fixtures.py "$T/fx" > /dev/null 2> "$T/fx.err"
ok $? "scripts/make_sft_fixtures.py runs"
for f in render.json tokens.json chatml/tokenizer.json chatml/tokenizer_config.json; do
    check "tests/data/sft/$f is what the script writes today" cmp -s "$T/fx/$f" "tests/data/sft/$f"
done
for t in llama3:tests/fixtures/tok/llama3 chatml:tests/data/sft/chatml qwen2:tests/data/sft/chatml \
         mistral:tests/fixtures/tok/llama2; do
    name=${t%%:*}
    for m in assistant last all; do
        "$ZTRAIN" prep --sft --input tests/data/sft/chats.jsonl --tokenizer "${t#*:}" --template "$name" \
            --seq-len 128 --mask "$m" --output "$T/$name-$m" > /dev/null 2>&1 &&
            "$PY" scripts/sft_reference.py "$T/$name-${m}_train.sft" tests/data/sft/chats.jsonl "${t#*:}" "$name" 128 "$m"
        ok $? "$name, --mask $m: the .sft windows equal transformers' tokens and masks, packed"
    done
done
done_testing
