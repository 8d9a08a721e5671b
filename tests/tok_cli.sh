#!/bin/bash
# tok_cli.sh -- `ztrain prep --tokenizer` (shard formats, document separators, JSON Lines, llm.c v7 shards
# for vocabularies > 65536), the trainer reading a v7 shard, `ztrain sample --tokenizer`, and bad inputs:
# one `ztrain: error:` line, a non-zero exit and no partial shard.  Expected ids come from the HF fixtures
# (tests/fixtures/tok, see scripts/make_tokenizer_fixtures.py); no Python needed.
. "$(dirname "$0")/lib.sh"
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1
FX="$ZT_SRCDIR/tests/fixtures/tok"

hdr() { od -An -t d4 -N 12 "$1" | tr -s ' ' | sed 's/^ //'; }               # magic version count
toks() {  # toks FILE: the tokens, space separated (uint16 or uint32 by the magic)
    local w=2; [ "$(od -An -t d4 -N 4 "$1" | tr -d ' ')" = 20240801 ] && w=4
    od -An -v -t u$w -j 1024 "$1" | tr -s ' \n' '  ' | sed 's/^ //; s/ $//'
}
ids() { tr -s ' \n' '  ' < "$1" | sed 's/^ //; s/ $//'; }
noleft() { ! ls "$@" 2> /dev/null | grep -q .; }

# ---- prep: exact ids, the three separators
"$ZTRAIN" prep --tokenizer "$FX/gpt2" --input "$FX/text.txt" --output out/a/none --val-fraction 0 --doc-sep none \
    > p1.out 2>&1
ok $? "prep --tokenizer (a directory) --doc-sep none succeeds, creating out/a/"
check "  ... llm.c GPT-2 shard header: magic 20240520, version 1, $(wc -w < "$FX/gpt2/ids.txt") tokens" \
    test "$(hdr out/a/none_train.bin)" = "20240520 1 $(wc -w < "$FX/gpt2/ids.txt")"
check "  ... the tokens are HF's ids" test "$(toks out/a/none_train.bin)" = "$(ids "$FX/gpt2/ids.txt")"
check "  ... the report names documents, vocab and width" grep -q '1 document, vocab 1200, uint16 tokens' p1.out
"$ZTRAIN" prep --tokenizer "$FX/gpt2/tokenizer.json" --input "$FX/text.txt" --output eos --val-fraction 0 > /dev/null 2>&1
check "default --doc-sep eos: HF's ids then <|endoftext|> (0)" test "$(toks eos_train.bin)" = "$(ids "$FX/gpt2/ids.txt") 0"
"$ZTRAIN" prep --tokenizer "$FX/llama3" --input "$FX/text.txt" --output bos --val-fraction 0 --doc-sep bos > /dev/null 2>&1
check "--doc-sep bos: <|begin_of_text|> then HF's ids (llama3)" \
    test "$(toks bos_train.bin)" = "$(ids "$FX/llama3/ids_special.txt")"

# JSON Lines: one document per line ("text"), two copies of the fixture text + a blank line
t=$(sed 's/\\/\\\\/g; s/"/\\"/g; s/\t/\\t/g; s/\r/\\r/g' "$FX/text.txt" | awk 'BEGIN{ORS="\\n"} {print}' | sed 's/\\n$//')
{ printf '{"id": 1, "text": "%s"}\n\n' "$t"; printf '{"text": "%s", "meta": {"x": [1]}}\n' "$t"; } > docs.jsonl
"$ZTRAIN" prep --tokenizer "$FX/llama2" --input docs.jsonl --output jl --val-fraction 0 --threads 2 > p2.out 2>&1
ok $? "prep --tokenizer on JSON Lines (by extension), 2 threads"
want="$(ids "$FX/llama2/ids.txt") 2 $(ids "$FX/llama2/ids.txt") 2"
check "  ... each document's HF ids then </s>" test "$(toks jl_train.bin)" = "$want"
check "  ... 2 documents reported" grep -q '2 documents' p2.out
cp docs.jsonl docs.txt
"$ZTRAIN" prep --tokenizer "$FX/llama2" --input docs.txt --jsonl --output jl2 --val-fraction 0 > /dev/null 2>&1
check "--jsonl forces JSON Lines whatever the name" cmp -s jl_train.bin jl2_train.bin
mkdir -p many && for i in 1 2 3; do cp "$FX/text.txt" many/f$i.txt; done
"$ZTRAIN" prep --tokenizer "$FX/metaspace" --input 'many/*.txt' --output g --val-fraction 0.2 --threads 2 > p3.out 2>&1
ok $? "prep --tokenizer on a glob of text files (one document each), with a val split"
n=$(( $(wc -w < "$FX/metaspace/ids.txt") * 3 + 3 ))
nv=$(( n / 5 ))
check "  ... $((n - nv)) train + $nv val tokens" test "$(hdr g_train.bin)" = "20240520 1 $((n - nv))" -a \
    "$(hdr g_val.bin)" = "20240520 1 $nv"

# ---- a vocabulary above 65536: llm.c's Llama-3 shard (magic 20240801, version 7, uint32)
mkdir big
# (an added token's id is HF's: the vocabulary's id of its content, so <|big|> is put in the vocabulary too)
sed -e 's/"added_tokens":\[/"added_tokens":[{"id":70000,"content":"<|big|>","single_word":false,"lstrip":false,"rstrip":false,"normalized":false,"special":true},/' \
    -e 's/"vocab":{/"vocab":{"<|big|>":70000,/' "$FX/gpt2/tokenizer.json" > big/tokenizer.json
printf '{"eos_token": "<|big|>"}\n' > big/tokenizer_config.json
for i in $(seq 1 40); do cat "$FX/text.txt"; printf '<|big|>'; done > big.txt
"$ZTRAIN" prep --tokenizer big --input big.txt --output v7 --val-fraction 0.1 > p4.out 2>&1
ok $? "prep with a 70001-token vocabulary"
check "  ... writes llm.c v7 shards (magic 20240801, version 7)" \
    test "$(hdr v7_train.bin | cut -d' ' -f1-2)" = "20240801 7" -a "$(hdr v7_val.bin | cut -d' ' -f1-2)" = "20240801 7"
cnt=$(hdr v7_train.bin | cut -d' ' -f3)
check "  ... 4-byte tokens: size 1024 + 4 x $cnt" test "$(stat -c %s v7_train.bin)" -eq $((1024 + 4 * cnt))
check "  ... token 70000 is there" grep -qw 70000 <(toks v7_train.bin | tr ' ' '\n')
check "  ... reported as uint32" grep -q 'vocab 70001, uint32 tokens' p4.out
"$ZTRAIN" prep --tokenizer big --input big.txt --output h7 --format hdf5 > p5.out 2>&1
ok $? "prep with a 70001-token vocabulary to HDF5"
check "  ... a uint32 /tokens dataset" grep -q 'wrote h7_train.h5 (.*vocab 70001, uint32 tokens' p5.out
"$ZTRAIN" prep --tokenizer big --input big.txt --output u16 --dtype uint16 > /dev/null 2> p6.err
rc=$?
u16ok() { [ $rc -eq 2 ] && [ ! -e u16_train.bin ] && grep -q 'a vocabulary of 70001 does not fit uint16' p6.err; }
check "--dtype uint16 with a 70001-token vocabulary: refused (exit 2), nothing written" u16ok || diag p6.err
base=(--config "$ZT_SRCDIR/configs/tiny.json" --threads 1 --steps 2 --sample-tokens 0 --eval-every 0
      --eval-batches 1 --log-every 1)
"$ZTRAIN" train "${base[@]}" --ztrain.model.vocab=70001 --train v7_train.bin --val v7_val.bin --ckpt-dir ck7 \
    --metrics m7.jsonl > t7.out 2> t7.err
ok $? "the trainer reads v7 shards (vocab 70001)"; [ -s t7.err ] && diag t7.err
"$ZTRAIN" train "${base[@]}" --ztrain.model.vocab=70001 --train h7_train.h5 --val h7_val.h5 --ckpt-dir ckh \
    --metrics mh.jsonl > th.out 2> th.err
ok $? "the trainer reads the uint32 HDF5 files"; [ -s th.err ] && diag th.err
"$ZTRAIN" train "${base[@]}" --ztrain.model.vocab=60000 --train v7_train.bin --val v7_val.bin --ckpt-dir ck8 \
    > t8.out 2> t8.err
rc=$?
t8ok() { [ $rc -eq 1 ] && [ "$(wc -l < t8.err)" -eq 1 ] &&
         grep -q '^ztrain: error: .*v7_train.bin: token 70000 .*>= vocab 60000' t8.err; }
check "a v7 token >= the model vocabulary: one error line naming the shard, exit 1" t8ok || diag t8.err

# ---- sample --tokenizer
"$ZTRAIN" prep --tokenizer "$FX/gpt2" --input "$ZT_SRCDIR/data/tinyshakespeare.txt" --output ts > /dev/null 2>&1
"$ZTRAIN" train "${base[@]}" --ztrain.model.vocab=1200 --train ts_train.bin --val ts_val.bin --ckpt-dir cks \
    > ts.out 2> ts.err
"$ZTRAIN" sample --weights cks/model.bin --tokenizer "$FX/gpt2" --prompt "First Citizen:" --length 20 > s.txt 2> s.err
ok $? "sample --tokenizer generates from a model trained on tokenizer shards"; [ -s s.err ] && diag s.err
check "  ... the output starts with the decoded prompt" test "$(head -c 14 s.txt)" = "First Citizen:"
check "  ... and is more than the prompt" test "$(wc -c < s.txt)" -gt 16

# ---- bad inputs: one error line, no partial shard
# expect_error NAME EXIT NEEDLE PREFIX -- ztrain ARGS...: PREFIX* must not exist afterwards
expect_error() {
    local name="$1" code="$2" needle="$3" prefix="$4"; shift 5
    "$ZTRAIN" "$@" > out.txt 2> err.txt
    local rc=$?
    if [ "$rc" -eq "$code" ] && [ "$(wc -l < err.txt)" -eq 1 ] && grep -q '^ztrain: error: ' err.txt &&
       grep -qF -- "$needle" err.txt && noleft "$prefix"*; then
        ok 0 "$name"
    else
        ok 1 "$name (exit $rc)"; diag err.txt; ls "$prefix"* 2>/dev/null | diag
    fi
}
{ cat "$FX/text.txt"; printf 'bad \xff byte\n'; } > bad.txt
expect_error "invalid UTF-8 text: exit 1, names the file and byte" 1 "bad.txt: tokenizer: the text is not valid UTF-8 (byte $(($(wc -c < "$FX/text.txt") + 4)))" \
    e1 -- prep --tokenizer "$FX/gpt2" --input bad.txt --output e1
cp docs.jsonl bad.jsonl; printf '{"txt": "no text key"}\n' >> bad.jsonl
expect_error "a JSON line without \"text\": names file:line" 1 'bad.jsonl:4: no "text" string' e2 -- \
    prep --tokenizer "$FX/gpt2" --input bad.jsonl --output e2
printf '{"text": "unterminated\n' > bad2.jsonl
expect_error "a line that is not JSON: names file:line" 1 'bad2.jsonl:1: not valid JSON' e3 -- \
    prep --tokenizer "$FX/gpt2" --input bad2.jsonl --output e3
head -c 5000 "$FX/gpt2/tokenizer.json" > trunc.json
expect_error "a truncated tokenizer.json: exit 1, names it" 1 "trunc.json: not valid JSON" e4 -- \
    prep --tokenizer trunc.json --input "$FX/text.txt" --output e4
sed 's/"type":"BPE"/"type":"WordLevel"/' "$FX/gpt2/tokenizer.json" > wl.json
expect_error "an unsupported model type: exit 2, named" 2 "wl.json: model type 'WordLevel' is not supported" e5 -- \
    prep --tokenizer wl.json --input "$FX/text.txt" --output e5
mkdir noeos && cp "$FX/llama2/tokenizer.json" noeos/
expect_error "--doc-sep eos without an EOS token: exit 2" 2 "defines no EOS token" e6 -- \
    prep --tokenizer noeos --input "$FX/text.txt" --output e6
expect_error "--doc-sep bogus: usage error" 2 "--doc-sep must be eos, bos or none" e7 -- \
    prep --tokenizer noeos --input "$FX/text.txt" --output e7 --doc-sep bogus
expect_error "--jsonl without --tokenizer: usage error" 2 "need --tokenizer" e8 -- \
    prep --input docs.jsonl --jsonl --output e8
expect_error "a missing tokenizer: exit 1, named" 1 "nothere.json" e9 -- \
    prep --tokenizer nothere.json --input "$FX/text.txt" --output e9
expect_error "a glob matching nothing" 1 "no file matches" e10 -- \
    prep --tokenizer "$FX/gpt2" --input 'none/*.txt' --output e10
# issue 45 item 6a: a JSON Lines line longer than --max-line-bytes (default 64 MiB): named, nothing written
{ cat docs.jsonl; printf '{"text": "%s"}\n' "$(head -c 3000 /dev/zero | tr '\0' a)"; } > long.jsonl
expect_error "a line over --max-line-bytes: exit 1, names file:line and the limit" 1 \
    "long.jsonl:4: the line is longer than 1000 bytes (the limit of a JSON Lines record; --max-line-bytes N raises it)" \
    e11 -- prep --tokenizer "$FX/gpt2" --input long.jsonl --output e11 --max-line-bytes 1000
"$ZTRAIN" prep --tokenizer "$FX/gpt2" --input long.jsonl --output e12 --max-line-bytes 3100 > out.txt 2> err.txt
ok $? "  ... accepted with --max-line-bytes 3100"
rm -f e12_*
expect_error "--max-line-bytes without --tokenizer: usage error" 2 "need --tokenizer" e13 -- \
    prep --input docs.jsonl --output e13 --max-line-bytes 10
expect_error "--max-line-bytes x: usage error" 2 "--max-line-bytes must be a number of bytes from 1 to 1099511627776, got 'x'" \
    e14 -- prep --tokenizer "$FX/gpt2" --input docs.jsonl --output e14 --max-line-bytes x
# read one line at a time: an endless line on a pipe stops at the limit + 1 bytes
head -c 200000000 /dev/zero | tr '\0' a | "$ZTRAIN" prep --tokenizer "$FX/gpt2" --input /dev/stdin --jsonl \
    --output e15 --max-line-bytes 1000 > out.txt 2> err.txt
check "a 200 MB line on a pipe: refused at line 1" grep -qx "ztrain: error: /dev/stdin:1: the line is longer than 1000 bytes .*" err.txt
# issue 45 item 6e: a NUL in tokenizer_config.json, in plain words (no parser flag)
mkdir nulcfg && cp "$FX/gpt2/tokenizer.json" nulcfg/ && printf '{"eos_token": "a\\u0000b"}\n' > nulcfg/tokenizer_config.json
expect_error "a NUL in tokenizer_config.json: a plain message" 1 \
    'tokenizer_config.json: not valid JSON (line 1, column 24: a NUL character (\u0000) in a string is not allowed near' \
    e16 -- prep --tokenizer nulcfg --input "$FX/text.txt" --output e16
check "  ... naming no JSON parser flag" test -z "$(grep JSON_ err.txt)"
# issue 45 item 6b: progress with the lines, documents and tokens so far (ZTRAIN_PROGRESS_INTERVAL=0: every update)
ZTRAIN_PROGRESS_INTERVAL=0 "$ZTRAIN" prep --tokenizer "$FX/llama2" --input docs.jsonl --output pg --val-fraction 0 \
    --threads 2 > pg.out 2> pg.err
n=$(sed -n 's/^wrote pg_train.bin (\([0-9]*\) tokens).*/\1/p' pg.out)
check "prep progress: 3 lines, 2 documents and the $n tokens written, at 100%" \
    grep -q "^ztrain: prep: tokenizing (3 lines, 2 documents, $n tokens): 1.3 kB of 1.3 kB (100%), .*/s, [0-9.]* s\$" pg.err
grep tokenizing pg.err | tail -n 1 | diag
check "no spool or temporary file left anywhere" noleft ./*.spool.* ./*.tmp.* out/a/*.tmp.*
done_testing
