#!/bin/bash
# sample_ckpt.sh -- `ztrain sample --checkpoint` on every checkpoint the
# trainer writes (issue 46, item 4), and --chat:
#  - a LoRA and a QLoRA (NF4 base) checkpoint of the llama fixture: sample
#    loads the base the checkpoint records (ztrain.init_from) and applies the
#    adapters: its tokens are the trainer's own closing sample's (same prompt,
#    seed and temperature), and the LoRA one's are also those of a sample of
#    the merged model (ztrain ckpt export --hf --merge, checkpointed by a run
#    whose one step at lr 1e-30 leaves it as it is);
#  - --chat TEXT renders one user message with add_generation_prompt through
#    the tokenizer's chat_template.jinja: the same ids, so the same output,
#    as --prompt with the rendering written out; errors for a tokenizer
#    without a template, and for no tokenizer at all.
. "$(dirname "$0")/lib.sh"
command -v python3 > /dev/null || skip_all "no python3"
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1
FIX="$ZT_SRCDIR/tests/fixtures/hf"
python3 - "$FIX/llama.ref.json" one.bin <<'PY'
import json, struct, sys
tok = json.load(open(sys.argv[1]))["tokens"][0]
hdr = [20240520, 1, len(tok)] + [0] * 253
open(sys.argv[2], "wb").write(struct.pack("<256i", *hdr) + struct.pack("<%dH" % len(tok), *tok))
PY
cp -r "$FIX/llama" base
# the trainer's closing sample: its token line
trained() { sed -n '/^---- sample/{n;n;p;}' "$1" | sed 's/ *$//'; }
lora_run() {   # lora_run OUT ARGS...: 2 steps of the one window, checkpoint at step 2
    local out=$1; shift
    "$ZTRAIN" train --init-from base --seq-len 16 --train_micro_batch_size_per_gpu 1 --steps 2 --lr 1e-2 \
        --clip 0 --scheduler.type none --train one.bin --val "" --sample-tokens 8 --threads 1 --ckpt-every 2 \
        --resume never "$@" > "$out" 2>&1
}
for kind in lora:"--lora-r 4 --lora-alpha 8" qlora:"--lora-r 4 --lora-alpha 8 --lora-base nf4"; do
    k=${kind%%:*}
    # shellcheck disable=SC2086
    lora_run "t_$k.txt" --ckpt-dir "ck_$k" ${kind#*:}
    ok $? "$k: 2 steps on the llama fixture, checkpoint ck_$k/step-2"
    "$ZTRAIN" sample --checkpoint "ck_$k" --length 8 > "s_$k.txt" 2> "s_$k.err"
    ok $([ $? = 0 ] && [ -n "$(trained "t_$k.txt")" ] && [ "$(cat "s_$k.txt")" = "$(trained "t_$k.txt")" ]; echo $?) \
       "$k: ztrain sample --checkpoint ck_$k loads the base and its adapters: the trainer's tokens ($(cat "s_$k.txt"; cat "s_$k.err"))"
done
"$ZTRAIN" ckpt export ck_lora/step-2 --hf merged --merge > ex.txt 2>&1 &&
    "$ZTRAIN" train --init-from merged --seq-len 16 --train_micro_batch_size_per_gpu 1 --steps 1 --lr 1e-30 \
        --scheduler.type none --train one.bin --val "" --sample-tokens 0 --threads 1 --ckpt-dir ck_m \
        --ckpt-every 1 --resume never > t_m.txt 2>&1 &&
    "$ZTRAIN" sample --checkpoint ck_m --length 8 > s_m.txt 2>&1
ok $([ $? = 0 ] && [ "$(cat s_m.txt)" = "$(cat s_lora.txt)" ]; echo $?) \
   "lora: the merged model samples the same tokens ($(cat s_m.txt))"
"$ZTRAIN" sample --checkpoint ck_lora --chat "hi" > x.txt 2>&1
ok $([ $? = 2 ] && grep -q "^ztrain: error: sample --chat needs a tokenizer with a chat template: --tokenizer PATH (the checkpoint's ztrain.init_from has no tokenizer.json)$" x.txt; echo $?) \
   "--chat without a tokenizer: $(cat x.txt)"

# --chat: a byte-level BPE tokenizer (GPT-2 fixture) with a chat template, on a
# model whose vocabulary holds its ids
mkdir tok && cp "$ZT_SRCDIR/tests/fixtures/tok/gpt2/tokenizer.json" "$ZT_SRCDIR/tests/fixtures/tok/gpt2/tokenizer_config.json" tok/
"$ZTRAIN" sample --checkpoint ck_lora --tokenizer tok --chat "hi" > x.txt 2>&1
ok $([ $? = 2 ] && grep -q "^ztrain: error: sample --chat: tok has no chat template (chat_template.jinja or tokenizer_config.json's chat_template)$" x.txt; echo $?) \
   "--chat with a tokenizer without a template: $(cat x.txt)"
printf '%s' '{% for m in messages %}<|{{ m.role }}|>{{ m.content }}
{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}' > tok/chat_template.jinja
head -c 60000 "$ZT_SRCDIR/data/tinyshakespeare.txt" > corpus.txt
"$ZTRAIN" prep --input corpus.txt --output c > /dev/null &&
    "$ZTRAIN" train --config "$ZT_SRCDIR/configs/tiny.json" --vocab 1216 --train c_train.bin --val "" --steps 2 \
        --sample-tokens 0 --threads 1 --ckpt-dir ck_v --ckpt-every 2 --resume never > t_v.txt 2>&1
ok $? "a 2-step run of a 1216-token vocabulary, checkpoint ck_v/step-2"
"$ZTRAIN" sample --checkpoint ck_v --tokenizer tok --chat "Hello there" --length 6 --seed 7 > chat.txt 2>&1
rc=$?
"$ZTRAIN" sample --checkpoint ck_v --tokenizer tok --prompt "<|user|>Hello there
<|assistant|>" --length 6 --seed 7 > prompt.txt 2>&1
ok $([ $rc = 0 ] && [ $? = 0 ] && cmp -s chat.txt prompt.txt && head -c 33 chat.txt | cmp -s - <(printf '<|user|>Hello there\n<|assistant|>')
     echo $?) "--chat \"Hello there\" renders <|user|>Hello there\\n<|assistant|> (add_generation_prompt) and samples as that prompt does"
"$ZTRAIN" sample --checkpoint ck_v --tokenizer tok --chat "x" --prompt "y" > x.txt 2>&1
ok $([ $? = 2 ] && grep -q "^ztrain: error: sample: give one of --prompt TEXT and --chat TEXT$" x.txt; echo $?) \
   "--chat and --prompt together: $(cat x.txt)"
done_testing
