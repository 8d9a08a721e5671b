#!/bin/bash
# sft_prep.sh -- `ztrain prep --sft`: the four templates on the tokenizer
# fixtures, packing (--allow-split, --truncate, too-long examples), the mask
# modes, and bad inputs: one `ztrain: error:` line naming the line, a
# non-zero exit and no output left behind; training on SFT files with the
# wrong seq_len names the file.
. "$(dirname "$0")/lib.sh"
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1
CH="$ZT_SRCDIR/tests/data/sft/chats.jsonl"
L3="$ZT_SRCDIR/tests/fixtures/tok/llama3"
nothing_left() {  # no file but the captured *.out / *.err
    local left; left=$(ls | grep -v '\.\(out\|err\)$')
    [ -z "$left" ] || { sed 's/^/# left: /' <<< "$left"; false; }
}
prep() { "$ZTRAIN" prep --sft "$@"; }

# ---- the templates
for t in llama3:tests/fixtures/tok/llama3 chatml:tests/data/sft/chatml qwen2:tests/data/sft/chatml \
         mistral:tests/fixtures/tok/llama2; do
    name=${t%%:*}
    mkdir "$name" && prep --input "$CH" --tokenizer "$ZT_SRCDIR/${t#*:}" --template "$name" --seq-len 128 \
        --output "$name/c" --val-fraction 0.25 > "$name.out" 2>&1
    ok $? "prep --sft --template $name"
    check "  ... writes train and val files, 72 + 24 examples" \
        grep -q "wrote $name/c_train.sft (.* windows of 129 tokens, 72 examples) and $name/c_val.sft (.* windows, 24 examples)" "$name.out"
done
prep --input "$CH" --tokenizer "$L3" --template llama3 --seq-len 128 --output new/dir/c > nd.out 2>&1
check "missing directories in PREFIX are created" test -s new/dir/c_train.sft
# llama3 with --mask all / last: more / fewer counted targets than assistant
for m in all last assistant; do
    prep --input "$CH" --tokenizer "$L3" --template llama3 --seq-len 128 --output "m_$m" --mask "$m" > "m_$m.out" 2>&1
done
ta=$(sed -n 's/.* \([0-9]*\) counted targets.*/\1/p' m_assistant.out)
tl=$(sed -n 's/.* \([0-9]*\) counted targets.*/\1/p' m_last.out)
tall=$(sed -n 's/.* \([0-9]*\) counted targets.*/\1/p' m_all.out)
diag <<< "counted targets: last $tl, assistant $ta, all $tall"
check "--mask last < assistant < all counted targets" test -n "$ta" -a "$tl" -lt "$ta" -a "$ta" -lt "$tall"
rm -rf ./*

# ---- packing
prep --input "$CH" --tokenizer "$L3" --template llama3 --seq-len 48 --output p > p.out 2> p.err
check "an example longer than a window: exit 1" test $? -eq 1
check "  ... one error line naming the line and the lengths" \
    grep -qx "ztrain: error: $CH:[0-9]*: the example is [0-9]* tokens, longer than a window of 49 tokens (seq_len 48 + 1); use --truncate, --allow-split or a larger --seq-len" p.err
check "  ... and nothing left behind" nothing_left
prep --input "$CH" --tokenizer "$L3" --template llama3 --seq-len 48 --output p --truncate > p.out 2>&1
ok $? "--truncate cuts long examples"
check "  ... and reports them" grep -q "examples truncated" p.out
prep --input "$CH" --tokenizer "$L3" --template llama3 --seq-len 48 --output s --allow-split > s.out 2>&1
ok $? "--allow-split packs examples across windows"
ns=$(sed -n 's/.*(\([0-9]*\) windows of 49 tokens.*/\1/p' s.out)
ne=$(sed -n 's/.*; \([0-9]*\) example tokens.*/\1/p' s.out)
np=$(sed -n 's/.* \([0-9]*\) pad tokens.*/\1/p' s.out)
nd=$(sed -n 's/.* \([0-9]*\) windows without a counted target dropped.*/\1/p' s.out)
check "  ... filling every window: 49 x ($ns windows + ${nd:-0} dropped) = $ne tokens + $np pad (< 49)" \
    test -n "$ns" -a $((49 * (ns + ${nd:-0}))) -eq $((ne + np)) -a "$np" -lt 49
rm -rf ./*

# ---- bad inputs: one error line naming FILE:LINE, exit 1, nothing left
bad() {  # bad NAME WANT JSONL-LINES...: the last line is the bad one
    local name=$1 want=$2; shift 2
    printf '%s\n' "$@" > in.jsonl
    prep --input in.jsonl --tokenizer "$L3" --template llama3 --seq-len 128 --output b > b.out 2> b.err
    local rc=$?
    [ "$rc" -eq 1 ] && [ "$(wc -l < b.err)" -eq 1 ] && grep -q "^ztrain: error: in.jsonl:$#: $want" b.err &&
        rm in.jsonl b.out b.err && nothing_left
    ok $? "$name: exit 1, one line 'in.jsonl:$#: $want...', no output"
    [ -f b.err ] && diag b.err
    rm -f ./*
}
good='{"prompt": "a", "completion": "b"}'
bad "malformed JSON" "malformed JSON: .*(column" "$good" "$good" '{"prompt": "a", "completion": '
bad "not an object" "expected a JSON object" "$good" '[1, 2]'
bad "unknown role" "message 1: unknown role 'tool' (expected system, user or assistant)" \
    "$good" '{"messages": [{"role": "user", "content": "x"}, {"role": "tool", "content": "y"}]}'
bad "content not a string" "message 0: \"content\" must be a string" '{"messages": [{"role": "user", "content": 3}]}'
bad "neither form" "expected \"messages\"" "$good" '{"text": "plain"}'
bad "both forms" "has both" '{"messages": [], "prompt": "a", "completion": "b"}'
bad "empty messages" "\"messages\" must be a non-empty list" '{"messages": []}'
bad "no assistant turn" "no assistant message: nothing to train on with --mask assistant" \
    '{"messages": [{"role": "user", "content": "x"}]}'
# issue 45 item 6e: a NUL in a string, in plain words (no parser flag)
bad "a NUL character" 'malformed JSON: a NUL character (\\u0000) in a string is not allowed near .* (column' \
    "$good" '{"prompt": "a\u0000b", "completion": "c"}'
printf '%s\n' '{"prompt": "a\u0000b", "completion": "c"}' > in.jsonl
prep --input in.jsonl --tokenizer "$L3" --template llama3 --seq-len 128 --output b > b.out 2> b.err
check "  ... the message names no JSON parser flag" test -s b.err -a -z "$(grep JSON_ b.err)"
rm -f ./*
# issue 45 item 6a: a line longer than --max-line-bytes (default 64 MiB) is refused by number
long="{\"prompt\": \"$(head -c 3000 /dev/zero | tr '\0' a)\", \"completion\": \"b\"}"
printf '%s\n' "$good" "$good" "$long" "$good" > in.jsonl
prep --input in.jsonl --tokenizer "$L3" --template llama3 --seq-len 4096 --output b --max-line-bytes 2000 > b.out 2> b.err
ok $([ $? = 1 ] && [ "$(cat b.err)" = "ztrain: error: in.jsonl:3: the line is longer than 2000 bytes (the limit of a JSON Lines record; --max-line-bytes N raises it)" ] &&
     [ ! -e b_train.sft ]; echo $?) "a line over --max-line-bytes: exit 1, one line naming file:line and the limit, no output"
diag b.err
prep --input in.jsonl --tokenizer "$L3" --template llama3 --seq-len 4096 --output b --max-line-bytes 3100 > b.out 2> b.err
ok $? "  ... the same file with --max-line-bytes 3100 (the line is $(sed -n 3p in.jsonl | wc -c) bytes with its newline)"
prep --input in.jsonl --tokenizer "$L3" --template llama3 --seq-len 4096 --output b --max-line-bytes 0 > b.out 2> b.err
check "--max-line-bytes 0: usage error" test $? -eq 2 -a -n "$(grep -F -- "--max-line-bytes must be a number of bytes from 1" b.err)"
rm -f ./*
# the input is read one line at a time: an endless line stops at the limit + 1 bytes
# (head ends once prep stops reading; reading the line whole would take 200 MB)
head -c 200000000 /dev/zero | tr '\0' a | prep --input /dev/stdin --tokenizer "$L3" --template llama3 --seq-len 64 \
    --output b --max-line-bytes 1000 > b.out 2> b.err
check "a 200 MB line on a pipe: refused at line 1" grep -qx "ztrain: error: /dev/stdin:1: the line is longer than 1000 bytes .*" b.err
rm -f ./*
# issue 45 item 6b: progress lines with the lines, examples and tokens so far (ZTRAIN_PROGRESS_INTERVAL=0:
# at every update)
ZTRAIN_PROGRESS_INTERVAL=0 prep --input "$CH" --tokenizer "$L3" --template llama3 --seq-len 128 --output p \
    > p.out 2> p.err
nl=$(wc -l < "$CH") nex=$(grep -c . "$CH")
ntok=$(sed -n 's/.*; \([0-9]*\) example tokens.*/\1/p' p.out)
check "prep --sft progress: counting the lines, then lines, examples and tokens ($nl lines, $nex examples, $ntok tokens)" \
    grep -q "^ztrain: prep --sft: counting ($nl lines): .* (100%), .*, [0-9.]* s\$" p.err -a \
    -n "$(grep "^ztrain: prep --sft ($nl lines, $nex examples, $ntok tokens): .* (100%), .*/s, [0-9.]* s\$" p.err)"
tail -n 1 p.err | diag
rm -f ./*
printf '%s\n' '{"messages": [{"role": "user", "content": "x"}, {"role": "user", "content": "y"}]}' > in.jsonl
prep --input in.jsonl --tokenizer "$ZT_SRCDIR/tests/fixtures/tok/llama2" --template mistral --seq-len 64 --output b 2> b.err
check "mistral: roles that do not alternate -> exit 1" test $? -eq 1
check "  ... naming the line and the template's rule" grep -q "in.jsonl:1: template mistral: after the optional system message, conversation roles must alternate" b.err
prep --input in.jsonl --tokenizer "$ZT_SRCDIR/tests/data/sft/chatml" --template llama3 --seq-len 64 --output b 2> b.err
check "a template whose special tokens the tokenizer lacks -> exit 2" test $? -eq 2
check "  ... naming the token" grep -q "template llama3 writes <|start_header_id|>, which is not a token of this tokenizer" b.err
rm -f ./*
prep --input "$CH" --tokenizer "$L3" --template vicuna --seq-len 64 --output b 2> b.err
check "unknown template: usage error (exit 2) listing the known ones" test $? -eq 2 -a -n "$(grep 'llama3, chatml, qwen2, mistral' b.err)"
prep --input "$CH" --tokenizer "$L3" --template llama3 --seq-len 64 --output b --mask some 2> b.err
check "--mask some: usage error" test $? -eq 2
"$ZTRAIN" prep --input "$CH" --output b --template llama3 2> b.err
check "--template without --sft: usage error" test $? -eq 2
rm -f ./*

# ---- training on SFT files
prep --input "$CH" --tokenizer "$L3" --template llama3 --seq-len 128 --output c > /dev/null 2>&1
"$ZTRAIN" train --config "$ZT_SRCDIR/configs/tiny.json" --train c_train.sft --val '' --vocab 1536 \
    --threads 1 --steps 3 --sample-tokens 0 > t.out 2> t.err
check "training with another seq_len (32): exit 1" test $? -eq 1
check "  ... naming the file and both lengths" grep -q "c_train.sft: SFT windows of 129 tokens were packed for seq_len 128, but the run trains with seq_len 32" t.err
"$ZTRAIN" train --config "$ZT_SRCDIR/configs/tiny.json" --train c_train.sft --val c_train.sft --vocab 1536 \
    --context 128 --seq-len 128 --threads 1 --steps 2 --eval-every 1 --eval-batches 1 --sample-tokens 0 \
    --metrics m.jsonl > t.out 2>&1
ok $? "training and evaluation on an SFT file"
check "  ... reports a finite masked val loss" grep -q '"val_loss": [0-9]' m.jsonl
cp c_train.sft bad.sft && printf '\002' | dd of=bad.sft bs=1 seek=$((1024 + 4 + 2 * 129 + 5)) conv=notrunc 2> /dev/null
"$ZTRAIN" train --config "$ZT_SRCDIR/configs/tiny.json" --train bad.sft --val '' --vocab 1536 \
    --context 128 --seq-len 128 --threads 1 --steps 3 --sample-tokens 0 > t.out 2> t.err
check "a corrupted SFT file: exit 1 naming the file" test $? -eq 1 -a -n "$(grep 'bad.sft: ' t.err)"
diag t.err
"$ZTRAIN" prep --tokens-in c_train.sft --output x > t.out 2> t.err
check "prep --tokens-in an SFT file: exit 1, saying it is no plain token stream" \
    test $? -eq 1 -a -n "$(grep 'c_train.sft: an SFT window file (windows with a loss mask) is not a plain token stream' t.err)"
done_testing
