#!/bin/bash
# classifier_mpi.sh -- the LM head + loss in chunks of rows (ztrain.classifier_chunk_rows,
# libtrain/classifier.h) through `ztrain train`: each run with chunks that do not divide the
# rows of its micro batch against the same run in one chunk (the head as one [N, vocab]
# array): every step's loss and gradient norm and the validation losses within 5e-6 relative
# (a few units in the last of the metrics' 7 printed digits: the head's weight gradient sums
# its rows chunk by chunk, fp32 rounding that grows over the steps; measured: 0 to 5.3e-7 in
# the -O2 build, up to 1.05e-6 -- 1.902815 vs 1.902813 -- in the ASan/UBSan build, whose
# code rounds the chunked run apart from the one-chunk run), final parameters within 1e-5 after 4 AdamW steps (AdamW
# normalizes the difference; measured: at most 1.7e-6):
#  - gpt2: 1 rank; 2 ranks at stage 3 with gradient accumulation and activation
#    checkpointing; fp16 with its dynamic loss scale (the scale is in the gradient the
#    chunks form) at stage 1; bf16 at stage 2; LoRA (a frozen head: no head gradient);
#  - llama (tied) with sequence parallelism 2 (each rank's T/2 rows in chunks); untied;
#    gemma2 (final logit soft-cap inside the chunk loop);
#  - cpu-strict (device-memory discipline) bitwise the cpu backend, chunked;
#  - the fused head (classifier.h "fused": the training forward computes the head's
#    gradients) against ZT_TEST_NO_HEADFUSE=1 (the head recomputed in backward): every step's
#    loss and gradient norm, the validation losses and the final parameters bitwise, on 2 ranks
#    at stages 0-3 (stage 3 with accumulation and checkpointing), fp16 (the loss scale in the
#    fused dloss), LoRA, llama untied, sequence parallel 2, gemma2;
#  - the CLI refuses a negative chunk size, naming the key.
. "$(dirname "$0")/lib.sh"
need_mpi
need_python3
in_tmpdir
byte_corpus 30000
STEPS=4
GPT=(--config "$ZT_SRCDIR/configs/tiny.json")
LLAMA=(--config "$ZT_SRCDIR/configs/llama-tiny.json")
GEMMA=(--config "$ZT_SRCDIR/configs/gemma2-tiny.json")

# run TAG NRANKS ARGS...: STEPS steps at a global batch of 4, with the validation loss;
# the parameters exported from the final checkpoint (the llm.c weights file holds GPT-2s
# only: that one refusal after the final checkpoint is accepted)
run() {
    local tag=$1 n=$2; shift 2
    mpirun_np "$n" "$ZTRAIN" train --train c_train.bin --val c_val.bin --threads 1 \
        --steps "$STEPS" --eval-every 2 --sample-tokens 0 --batch-size 4 \
        --metrics "m_$tag.jsonl" --ckpt-dir "ck_$tag" --resume never "$@" > "o_$tag.txt" 2>&1
    local rc=$?
    if [ $rc != 0 ] && ! { grep -q "^checkpoint: saved step" "o_$tag.txt" &&
        [ "$(grep -c '^ztrain: error: ' "o_$tag.txt")" = 1 ] &&
        grep -q "^ztrain: error: .*llm.c model files hold the built-in GPT-2 only" "o_$tag.txt"; }; then
        diag "o_$tag.txt" | tail -5
        return 1
    fi
    "$ZTRAIN" ckpt export "ck_$tag" --output "w_$tag.safetensors" > /dev/null 2>&1
}
# pair TAG NRANKS CHUNK ARGS...: one chunk, then chunks of CHUNK rows; compared
pair() {
    local tag=$1 n=$2 k=$3; shift 3
    run "${tag}_1" "$n" "$@" --classifier-chunk-rows 1000000 && run "${tag}_k" "$n" "$@" --classifier-chunk-rows "$k" &&
        grep -q '"val_loss"' "m_${tag}_k.jsonl" &&
        python3 - "m_${tag}_1.jsonl" "m_${tag}_k.jsonl" <<'PY' &&
import json, sys
r = [[json.loads(l) for l in open(p)] for p in sys.argv[1:]]
t = [[d["loss"] for d in x if "loss" in d] for x in r]
g = [[d["grad_norm"] for d in x if "loss" in d] for x in r]
v = [[d["val_loss"] for d in x if "val_loss" in d] for x in r]
d = max(abs(x - y) / abs(x) for x, y in zip(t[0] + v[0] + g[0], t[1] + v[1] + g[1]))
print("# training losses, gradient norms and validation losses within %.2e relative (gradient norms %s vs %s)"
      % (d, g[0], g[1]))
sys.exit(0 if len(t[0]) == len(t[1]) == 4 and len(v[0]) == len(v[1]) >= 1 and d <= 5e-6 else 1)
PY
        python3 "$ZT_SRCDIR/tests/run_compare.py" "m_${tag}_1.jsonl" "m_${tag}_k.jsonl" \
            "w_${tag}_1.safetensors" "w_${tag}_k.safetensors" 1e-5 "$STEPS"
}

# gpt2 (tiny: seq_len 32): 128 rows in chunks of 7 (19 chunks, the last of 2)
pair g 1 7 "${GPT[@]}" --micro-batch 4
ok $? "gpt2, 1 rank, 128 rows in chunks of 7: losses and parameters match one chunk"
pair g3 2 5 "${GPT[@]}" --stage 3 --micro-batch 1 --grad-accum 2 --act-ckpt blocks
ok $? "gpt2, 2 ranks, stage 3, accumulation 2, checkpointing, 32 rows in chunks of 5: match one chunk"
pair g16 2 7 "${GPT[@]}" --stage 1 --micro-batch 2 --precision fp16
ok $? "gpt2, 2 ranks, stage 1, fp16 (loss scale): match one chunk"
pair gb 2 7 "${GPT[@]}" --stage 2 --micro-batch 2 --precision bf16
ok $? "gpt2, 2 ranks, stage 2, bf16: match one chunk"
pair gl 1 9 "${GPT[@]}" --micro-batch 4 --lora-r 4
ok $? "gpt2 LoRA (frozen head): match one chunk"
# llama (tiny: seq_len 64) with --sp 2: 2 x 32 rows per rank in chunks of 9
pair lsp 2 9 "${LLAMA[@]}" --micro-batch 2 --grad-accum 2 --sp 2
ok $? "llama, sequence parallel 2, 64 rows per rank in chunks of 9: match one chunk"
pair lu 1 11 "${LLAMA[@]}" --micro-batch 2 --grad-accum 2 --tie-embeddings false
ok $? "llama untied head, 128 rows in chunks of 11: match one chunk"
pair gm 1 6 "${GEMMA[@]}" --micro-batch 2 --grad-accum 2
ok $? "gemma2 (final logit soft-cap), 128 rows in chunks of 6: match one chunk"

# cpu-strict: every pointer the chunk loop hands the backend is device memory; bitwise cpu
run gs 1 "${GPT[@]}" --micro-batch 4 --classifier-chunk-rows 7 --backend cpu-strict &&
    python3 - m_g_k.jsonl m_gs.jsonl <<'PY' && cmp -s w_g_k.safetensors w_gs.safetensors
import json, sys
a, b = [[(d.get("loss"), d.get("val_loss")) for d in map(json.loads, open(p)) if "loss" in d or "val_loss" in d]
        for p in sys.argv[1:]]
sys.exit(0 if a and a == b else 1)
PY
ok $? "cpu-strict, chunks of 7: losses and parameters bitwise the cpu run's"

# fused TAG NRANKS ARGS...: the run with the fused head, then with ZT_TEST_NO_HEADFUSE=1; bitwise
fused() {
    local tag=$1 n=$2; shift 2
    run "${tag}_f" "$n" "$@" && ZT_TEST_NO_HEADFUSE=1 run "${tag}_n" "$n" "$@" &&
        python3 - "m_${tag}_f.jsonl" "m_${tag}_n.jsonl" <<'PY' && cmp -s "w_${tag}_f.safetensors" "w_${tag}_n.safetensors"
import json, sys
a, b = [[(d.get("loss"), d.get("grad_norm"), d.get("val_loss")) for d in map(json.loads, open(p))
         if "loss" in d or "val_loss" in d] for p in sys.argv[1:]]
sys.exit(0 if len(a) >= 4 and a == b else 1)
PY
}
fused hf0 2 "${GPT[@]}" --stage 0 --micro-batch 2 --classifier-chunk-rows 7
ok $? "fused head, gpt2, 2 ranks, stage 0, chunks of 7: bitwise ZT_TEST_NO_HEADFUSE=1"
fused hf1 2 "${GPT[@]}" --stage 1 --micro-batch 2 --precision fp16 --classifier-chunk-rows 7
ok $? "fused head, gpt2, 2 ranks, stage 1, fp16 (loss scale): bitwise ZT_TEST_NO_HEADFUSE=1"
fused hf2 2 "${GPT[@]}" --stage 2 --micro-batch 2 --precision bf16 --classifier-chunk-rows 7
ok $? "fused head, gpt2, 2 ranks, stage 2, bf16: bitwise ZT_TEST_NO_HEADFUSE=1"
fused hf3 2 "${GPT[@]}" --stage 3 --micro-batch 1 --grad-accum 2 --act-ckpt blocks --classifier-chunk-rows 5
ok $? "fused head, gpt2, 2 ranks, stage 3, accumulation 2, checkpointing: bitwise ZT_TEST_NO_HEADFUSE=1"
fused hfl 2 "${GPT[@]}" --stage 3 --micro-batch 2 --lora-r 4 --classifier-chunk-rows 9
ok $? "fused head, gpt2 LoRA (frozen head), 2 ranks, stage 3: bitwise ZT_TEST_NO_HEADFUSE=1"
fused hfu 2 "${LLAMA[@]}" --stage 3 --micro-batch 1 --grad-accum 2 --tie-embeddings false --classifier-chunk-rows 11
ok $? "fused head, llama untied, 2 ranks, stage 3, accumulation 2: bitwise ZT_TEST_NO_HEADFUSE=1"
fused hfsp 2 "${LLAMA[@]}" --micro-batch 2 --grad-accum 2 --sp 2 --classifier-chunk-rows 9
ok $? "fused head, llama, sequence parallel 2: bitwise ZT_TEST_NO_HEADFUSE=1"
fused hfg 2 "${GEMMA[@]}" --stage 2 --micro-batch 1 --grad-accum 2 --classifier-chunk-rows 6
ok $? "fused head, gemma2 (soft-cap), 2 ranks, stage 2: bitwise ZT_TEST_NO_HEADFUSE=1"

"$ZTRAIN" train "${GPT[@]}" --train c_train.bin --steps 1 --classifier-chunk-rows -1 > o_neg.txt 2>&1
[ $? != 0 ] && grep -q "ztrain.classifier_chunk_rows" o_neg.txt
ok $? "a negative ztrain.classifier_chunk_rows is refused, naming the key"
done_testing
