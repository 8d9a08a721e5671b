#!/bin/bash
# seqpar_mpi.sh -- sequence parallelism (DeepSpeed-Ulysses, docs/long-context.md)
# with `ztrain train --sp N` on the bundled byte corpus, against the 1-rank run
# of the same global batch (per-step losses within 1e-5 relative, final
# parameters within 1e-5, fp32):
#  - llama (8 query / 4 key-value heads, tied head): N=2 (2 ranks, stage 0),
#    N=4 (4 ranks, stage 0), N=2 x data parallel 2 at stage 3 with gradient
#    accumulation 2 and activation checkpointing; blocks-attn (llama and gpt2, N=2 x dp 2 stage 3
#    and N=4 stage 0, fp32 and bf16) bitwise blocks', its all-to-all bytes the formula;
#  - gpt2: N=2 at stage 3, N=4 at stage 0 (with the validation loss);
#  - llama with longrope RoPE past its original context at N=2;
#  - losses: LoRA at N=2; masked SFT data at N=2 x dp 2 (training and
#    validation); bf16 at N=2 within 1e-3;
#  - the all-to-all bytes per step of every run (the comm layer's accounting,
#    the metrics' alltoall_bytes) equal the documented formula and `ztrain
#    estimate --json`'s figure; the planner's peak equals the accounted one;
#  - the estimate for Llama-3.1-8B at 131072 tokens on 8 x 80 GB suggests --sp 4 (and --sp 8 fits too);
#  - a checkpoint saved at N=2 on 2 ranks restores at N=1 on 3 ranks (stage 3)
#    and at N=4 on 4 ranks; the resumed runs match the uninterrupted one;
#  - sp16: bf16 activations send the attention output and the q|k|v gradient
#    in bf16, bitwise the fp32 exchanges (ZT_TEST_NO_SP16=1) at half their bytes;
#  - cpu-strict (device-memory discipline, host-staged all-to-alls) bitwise == cpu,
#    fp32 and bf16 (the bf16 exchanges);
#  - refusals: key/value heads not divisible by N (naming both), N not
#    dividing the ranks, sampling at N > 1.
. "$(dirname "$0")/lib.sh"
need_mpi
need_python3
in_tmpdir
byte_corpus 30000
STEPS=4
COMPARE_TOL=1e-5   # (compare, lib.sh)
LLAMA=(--config "$ZT_SRCDIR/configs/llama-tiny.json" --n-head 8 --n-kv-head 4)
GPT=(--config "$ZT_SRCDIR/configs/tiny.json" --n-head 4)

# finished TAG RC: trained to the end (llama_mpi.sh: the llm.c weights file
# holds GPT-2s only, that one refusal after the final checkpoint is accepted)
finished() {
    [ "$2" -eq 0 ] && return 0
    grep -q "^checkpoint: saved step" "o_$1.txt" &&
        [ "$(grep -c '^ztrain: error: ' "o_$1.txt")" = 1 ] &&
        grep -q "^ztrain: error: .*llm.c model files hold the built-in GPT-2 only" "o_$1.txt"
}
# run TAG NRANKS ARGS...: STEPS steps at a global batch of 4
run() {
    local tag=$1 n=$2; shift 2
    mpirun_np "$n" "$ZTRAIN" train --train c_train.bin --val c_val.bin --threads 1 \
        --steps "$STEPS" --eval-every 0 --sample-tokens 0 --batch-size 4 \
        --scheduler.params.total_num_steps 4 --metrics "m_$tag.jsonl" --ckpt-dir "ck_$tag" \
        --resume never "$@" > "o_$tag.txt" 2>&1
    finished "$tag" $? || { diag "o_$tag.txt" | tail -5; return 1; }
    "$ZTRAIN" ckpt export "ck_$tag" --output "w_$tag.safetensors" > /dev/null 2>&1 || true
}
# a2a TAG N B T L QKV AD A RECOMPUTED: every step's alltoall_bytes equal
# A (2 L + R) (N - 1) (B T/N QKV/N + B T/N AD/N) 4 (docs/long-context.md)
a2a() {
    python3 - "m_$1.jsonl" "${@:2}" <<'PY'
import json, sys
p, N, B, T, L, QKV, AD, A, R = sys.argv[1], *map(int, sys.argv[2:])
Tl = T // N
want = A * (2 * L + R) * (N - 1) * (B * Tl * QKV // N + B * Tl * AD // N) * 4
got = [json.loads(l).get("alltoall_bytes") for l in open(p) if '"loss"' in l]
print("# all-to-all bytes per step and rank: %s, formula %d" % (got[0], want))
sys.exit(0 if got and all(g == want for g in got) else 1)
PY
}

# llama: QKV = (8 + 2*4) * 8 = 128, AD = 64, 2 layers, seq_len 32
run lref 1 "${LLAMA[@]}" --micro-batch 4
ok $? "llama reference: 1 rank, stage 0"
run l2 2 "${LLAMA[@]}" --sp 2 --micro-batch 4 && compare lref l2 && a2a l2 2 4 32 2 128 64 1 0 &&
    grep -q "sequence parallel: 2 ranks per group share each sample, 16 of its 32 tokens" o_l2.txt
ok $? "llama N=2 (2 ranks, stage 0) == 1 rank; all-to-all bytes == formula"
run l4 4 "${LLAMA[@]}" --sp 4 --micro-batch 4 && compare lref l4 && a2a l4 4 4 32 2 128 64 1 0
ok $? "llama N=4 (4 ranks, stage 0) == 1 rank; all-to-all bytes == formula"
L22=("${LLAMA[@]}" --sp 2 --stage 3 --micro-batch 1 --grad-accum 2 --act-ckpt blocks)
run l22 4 "${L22[@]}" --memory-report end && compare lref l22 && a2a l22 2 1 32 2 128 64 2 1
ok $? "llama N=2 x data parallel 2, stage 3, accumulation 2, checkpointing == 1 rank; bytes == formula"
grep -q "memory peak per rank: accounted \([0-9]*\) bytes, predicted \1 bytes (+0.00%)" o_l22.txt &&
    "$ZTRAIN" estimate --world-size 4 "${L22[@]}" --train c_train.bin --val c_val.bin --batch-size 4 \
        --json > e_l22.json && python3 - e_l22.json m_l22.jsonl <<'PY'
import json, sys
e = json.load(open(sys.argv[1]))["run"]
m = [json.loads(l)["alltoall_bytes"] for l in open(sys.argv[2]) if '"loss"' in l]
print("# estimate: all-to-all %d bytes per step, measured %s" % (e["alltoall_bytes_per_step"], m))
sys.exit(0 if e["sequence_parallel_size"] == 2 and all(x == e["alltoall_bytes_per_step"] for x in m) else 1)
PY
ok $? "N=2 x dp 2: predicted peak == accounted peak; ztrain estimate's all-to-all bytes == measured"
# blocks-attn with sequence parallel (model_acts.h zt_acts_katt_on): each layer's head-sharded
# attention output, lse and token-sharded output kept, the recompute running q|k|v's GEMM and
# to-heads exchange but neither the attention nor the output's exchange: per micro-batch
# 2L + R q|k|v exchanges (forward, recompute, backward) and 2L output ones (blocks: 2L + R of
# each; R = L - 1 recomputed layers, the last one kept), so the bytes per step are
# A ((2 L + R) q + 2 L o) against blocks' A (2 L + R) (q + o), with q, o one exchange's bytes of
# q|k|v and of the output.  Bitwise blocks' parameters, losses and gradient norms (fp32 here, bf16 with
# sp16's bf16 exchanges below, GPT-2 at stage 0 and N=4); the planner's peak == accounted, above
# blocks' by the kept arrays; ztrain estimate's all-to-all bytes == measured.
a2ak() {  # a2ak TAG N B T L QKV AD A R X16: the blocks-attn bytes (X16 as a2a16's)
    python3 - "m_$1.jsonl" "${@:2}" <<'PY'
import json, sys
p, N, B, T, L, QKV, AD, A, R, X = sys.argv[1], *map(int, sys.argv[2:])
Tl = T // N
q, o = (N - 1) * (B * Tl * QKV // N), (N - 1) * (B * Tl * AD // N)
want = A * (4 * q * (L + R) + (2 if X & 1 else 4) * o * L + 4 * o * L + (2 if X & 2 else 4) * q * L)
got = [json.loads(l).get("alltoall_bytes") for l in open(p) if '"loss"' in l]
print("# blocks-attn all-to-all bytes per step and rank: %s, formula %d" % (got[0], want))
sys.exit(0 if got and all(g == want for g in got) else 1)
PY
}
same_bits() {  # same_bits A B: per-step losses and gradient norms (as the metrics print them)
    # equal, the final parameters bitwise (compare's tolerance 0)
    python3 - "m_$1.jsonl" "m_$2.jsonl" <<'PY' && compare "$1" "$2" 0
import json, sys
k = ("loss", "grad_norm")
a, b = [[tuple(json.loads(l).get(x) for x in k) for l in open(p) if '"loss"' in l] for p in sys.argv[1:]]
print("# %s\n# %s" % (a, b))
sys.exit(0 if a and a == b else 1)
PY
}
peak_above() {  # peak_above A B: both peaks planned exactly, B's above A's
    grep -q "$PK" "o_$1.txt" && grep -q "$PK" "o_$2.txt" && python3 - "o_$1.txt" "o_$2.txt" <<'PY'
import re, sys
pk = [int(re.search(r"accounted (\d+) bytes", open(f).read()).group(1)) for f in sys.argv[1:]]
print("# peak blocks %d, blocks-attn %d" % tuple(pk))
sys.exit(0 if pk[0] < pk[1] else 1)
PY
}
est_a2a() {  # est_a2a TAG WORLD ARGS...: ztrain estimate's all-to-all bytes == every step's measured
    local tag=$1 w=$2; shift 2
    "$ZTRAIN" estimate --world-size "$w" "$@" --train c_train.bin --val c_val.bin --batch-size 4 \
        --json > "e_$tag.json" && python3 - "e_$tag.json" "m_$tag.jsonl" <<'PY'
import json, sys
e = json.load(open(sys.argv[1]))["run"]
m = [json.loads(l)["alltoall_bytes"] for l in open(sys.argv[2]) if '"loss"' in l]
print("# estimate: all-to-all %d bytes per step, measured %s" % (e["alltoall_bytes_per_step"], m))
sys.exit(0 if m and all(x == e["alltoall_bytes_per_step"] for x in m) else 1)
PY
}
PK="memory peak per rank: accounted \([0-9]*\) bytes, predicted \1 bytes (+0.00%)"
run l22a 4 "${L22[@]}" --act-ckpt blocks-attn --memory-report end && same_bits l22 l22a &&
    a2ak l22a 2 1 32 2 128 64 2 1 0 && peak_above l22 l22a &&
    est_a2a l22a 4 "${L22[@]}" --act-ckpt blocks-attn &&
    ! grep -q "blocks-attn with sequence parallel" o_l22a.txt
ok $? "llama N=2 x dp 2 stage 3 --act-ckpt blocks-attn: bitwise blocks'; bytes == formula == estimate; peak planned, above blocks'"
L4K=("${LLAMA[@]}" --sp 4 --micro-batch 4 --n-layer 3 --memory-report end)
run l4k 4 "${L4K[@]}" --act-ckpt blocks && run l4ka 4 "${L4K[@]}" --act-ckpt blocks-attn &&
    same_bits l4k l4ka && a2a l4k 4 4 32 3 128 64 1 2 && a2ak l4ka 4 4 32 3 128 64 1 2 0 &&
    peak_above l4k l4ka && est_a2a l4ka 4 "${L4K[@]}" --act-ckpt blocks-attn
ok $? "llama N=4 stage 0, 3 layers --act-ckpt blocks-attn: bitwise blocks'; bytes == formula == estimate; peak planned"
G22=("${GPT[@]}" --sp 2 --stage 3 --micro-batch 1 --grad-accum 2 --memory-report end)
run g22 4 "${G22[@]}" --act-ckpt blocks && run g22a 4 "${G22[@]}" --act-ckpt blocks-attn &&
    same_bits g22 g22a && a2a g22 2 1 32 2 96 32 2 1 && a2ak g22a 2 1 32 2 96 32 2 1 0 &&
    peak_above g22 g22a && est_a2a g22a 4 "${G22[@]}" --act-ckpt blocks-attn
ok $? "gpt2 N=2 x dp 2 stage 3 --act-ckpt blocks-attn: bitwise blocks'; bytes == formula == estimate; peak planned"
G4K=("${GPT[@]}" --sp 4 --micro-batch 4 --memory-report end)
run g4k 4 "${G4K[@]}" --act-ckpt blocks && run g4ka 4 "${G4K[@]}" --act-ckpt blocks-attn &&
    same_bits g4k g4ka && a2ak g4ka 4 4 32 2 96 32 1 1 0 && peak_above g4k g4ka
ok $? "gpt2 N=4 stage 0 --act-ckpt blocks-attn: bitwise blocks'; bytes == formula; peak planned"

# gpt2: QKV = 3 * 32, AD = 32, 2 layers, seq_len 32 (its context)
run gref 1 "${GPT[@]}" --micro-batch 4 --eval-every 4
ok $? "gpt2 reference: 1 rank, stage 0"
run g2 2 "${GPT[@]}" --sp 2 --stage 3 --micro-batch 4 && compare gref g2 && a2a g2 2 4 32 2 96 32 1 0
ok $? "gpt2 N=2 (2 ranks, stage 3) == 1 rank; all-to-all bytes == formula"
run g4 4 "${GPT[@]}" --sp 4 --micro-batch 4 --eval-every 4 && compare gref g4 &&
    python3 - m_gref.jsonl m_g4.jsonl <<'PY'
import json, sys
v = [[json.loads(l)["val_loss"] for l in open(p) if "val_loss" in l] for p in sys.argv[1:]]
print("# val loss %s vs %s" % (v[0], v[1]))
sys.exit(0 if len(v[0]) == 1 and abs(v[0][0] - v[1][0]) <= 1e-5 * abs(v[0][0]) else 1)
PY
ok $? "gpt2 N=4 (4 ranks, stage 0) == 1 rank, the validation loss too"

# losses only: LoRA (frozen base, all-linear adapters) at N=2 stage 3; masked SFT data (the
# loss's token count spans the group) with the gpt2 at N=2 x dp 2 stage 3, evaluation too
losses_eq() {  # losses_eq A B TOL: per-step losses (and validation losses) within TOL relative
    python3 - "m_$1.jsonl" "m_$2.jsonl" "$3" <<'PY'
import json, sys
def get(p, k): return [json.loads(l)[k] for l in open(p) if '"%s"' % k in l]
a, b, tol = sys.argv[1], sys.argv[2], float(sys.argv[3])
ok = True
for k in ("loss", "val_loss"):
    x, y = get(a, k), get(b, k)
    d = max([abs(u - v) / abs(u) for u, v in zip(x, y)] or [0])
    print("# %s: %d values, max relative difference %.2e" % (k, len(x), d))
    ok = ok and len(x) == len(y) and d <= tol
ok = ok and len(get(a, "loss")) > 0
sys.exit(0 if ok else 1)
PY
}
LORA=(--lora-r 4 --lora-targets all-linear)
run loref 1 "${LLAMA[@]}" "${LORA[@]}" --micro-batch 4 && run lo2 2 "${LLAMA[@]}" "${LORA[@]}" --sp 2 --stage 3 --micro-batch 4 &&
    losses_eq loref lo2 1e-5
ok $? "LoRA at N=2 (2 ranks, stage 3): losses == 1 rank"
# longrope past the original context (16 of 32 tokens): each rank rotates all
# 32 positions with long_factor, chosen by the global length, not its 16 rows
LONGROPE=(--rope-scaling longrope --ztrain.model.rope_original_max_positions 16
          --ztrain.model.rope_factor 4 --ztrain.model.rope_short_factor 1,1.25,1.5,2
          --ztrain.model.rope_long_factor 1,2,4.5,8.25)
run lrref 1 "${LLAMA[@]}" "${LONGROPE[@]}" --micro-batch 4 &&
    run lr2 2 "${LLAMA[@]}" "${LONGROPE[@]}" --sp 2 --micro-batch 4 && compare lrref lr2
ok $? "longrope past the original context at N=2 (2 ranks, stage 0) == 1 rank"
"$ZTRAIN" prep --sft --input "$ZT_SRCDIR/tests/data/sft/chats.jsonl" --tokenizer "$ZT_SRCDIR/tests/fixtures/tok/llama3" \
    --template llama3 --seq-len 64 --allow-split --output s --val-fraction 0.25 > prep.out 2>&1
SFT=("${GPT[@]}" --train s_train.sft --val s_val.sft --vocab 1536 --context 64 --seq-len 64 --eval-every 4
     --eval-batch-size 4 --eval-batches 1)
run sref 1 "${SFT[@]}" --micro-batch 4 && run s22 4 "${SFT[@]}" --sp 2 --stage 3 --micro-batch 2 &&
    losses_eq sref s22 1e-5
ok $? "masked SFT data, gpt2 N=2 x dp 2, stage 3: training and validation losses == 1 rank"
# hybrid sharding: 4 ranks, sequence groups of 2, ZeRO-3 shard groups of 2
run lh 4 "${LLAMA[@]}" --sp 2 --stage 3 --shard-group 2 --micro-batch 2 && compare lref lh
ok $? "llama N=2 x data parallel 2, stage 3 with shard groups of 2 (hybrid) == 1 rank"
# fp16 with dynamic loss scaling
run fref 1 "${LLAMA[@]}" --micro-batch 4 --precision fp16 && run f2 2 "${LLAMA[@]}" --sp 2 --stage 3 \
    --micro-batch 4 --precision fp16 && losses_eq fref f2 1e-3
ok $? "fp16 at N=2 (2 ranks, stage 3): losses within 1e-3 of 1 rank"
# Qwen3's per-head q/k RMSNorm (on the local rows, before the exchange)
run qref 1 "${LLAMA[@]}" --qk-norm true --micro-batch 4 &&
    run q2 2 "${LLAMA[@]}" --qk-norm true --sp 2 --stage 3 --micro-batch 4 && compare qref q2
ok $? "Qwen3 q/k norms at N=2 (2 ranks, stage 3): losses and parameters == 1 rank"
run bref 1 "${LLAMA[@]}" --micro-batch 4 --bf16.enabled true && run b2 2 "${LLAMA[@]}" --sp 2 --stage 3 \
    --micro-batch 4 --bf16.enabled true && losses_eq bref b2 1e-3
ok $? "bf16 at N=2 (2 ranks, stage 3): losses within 1e-3 of 1 rank (16-bit rounding of sums in another order)"

# sp16 (docs/long-context.md): bf16 activations (bf16 GEMMs) send the attention output and the
# q|k|v gradient in bf16, the values the GEMMs after the exchanges round anyway: losses and
# parameters bitwise those of the fp32 exchanges (ZT_TEST_NO_SP16=1), the bytes per step the
# formula with those exchanges at 2 bytes an element (their 4 with the hook), as estimate says;
# with checkpointing (the recomputed forwards' exchanges) and N=4; Qwen3's q/k norms (the
# q|k|v gradient stays fp32, the attention output bf16) and LoRA too
a2a16() {  # a2a16 TAG N B T L QKV AD A RECOMPUTED X16: a2a's with X16 (1 attention output, 2 dq|k|v in bf16)
    python3 - "m_$1.jsonl" "${@:2}" <<'PY'
import json, sys
p, N, B, T, L, QKV, AD, A, R, X = sys.argv[1], *map(int, sys.argv[2:])
Tl = T // N
q, o = (N - 1) * (B * Tl * QKV // N), (N - 1) * (B * Tl * AD // N)
fwd = 4 * q + (2 if X & 1 else 4) * o
bwd = 4 * o + (2 if X & 2 else 4) * q
want = A * (fwd * (L + R) + bwd * L)
got = [json.loads(l).get("alltoall_bytes") for l in open(p) if '"loss"' in l]
print("# all-to-all bytes per step and rank: %s, formula %d" % (got[0], want))
sys.exit(0 if got and all(g == want for g in got) else 1)
PY
}
sp16() {  # sp16 TAG NRANKS X16 A2A_ARGS (N B T L QKV AD A R) -- RUN_ARGS...: with and without the hook
    local tag=$1 n=$2 x=$3; shift 3
    local a=(); while [ "$1" != -- ]; do a+=("$1"); shift; done; shift
    ZT_TEST_NO_SP16=1 run "${tag}h" "$n" "$@" && a2a16 "${tag}h" "${a[@]}" 0 &&
        run "$tag" "$n" "$@" && a2a16 "$tag" "${a[@]}" "$x" && compare "${tag}h" "$tag" 0
}
B16=("${LLAMA[@]}" --bf16.enabled true --matmul-precision bf16)
sp16 x2 2 3 2 4 32 2 128 64 1 0 -- "${B16[@]}" --sp 2 --stage 3 --micro-batch 4
ok $? "sp16 at N=2, stage 3: bitwise the fp32 exchanges' losses and parameters; bf16 bytes == formula"
sp16 x4 4 3 4 4 32 2 128 64 1 0 -- "${B16[@]}" --sp 4 --micro-batch 4
ok $? "sp16 at N=4, stage 0: bitwise the fp32 exchanges; bytes == formula"
X22=("${B16[@]}" --sp 2 --stage 3 --micro-batch 1 --grad-accum 2 --act-ckpt blocks)
sp16 x22 4 3 2 1 32 2 128 64 2 1 -- "${X22[@]}" --memory-report end &&
    grep -q "memory peak per rank: accounted \([0-9]*\) bytes, predicted \1 bytes (+0.00%)" o_x22.txt &&
    grep -q "memory peak per rank: accounted \([0-9]*\) bytes, predicted \1 bytes (+0.00%)" o_x22h.txt &&
    "$ZTRAIN" estimate --world-size 4 "${X22[@]}" --train c_train.bin --val c_val.bin --batch-size 4 \
        --json > e_x22.json && python3 - e_x22.json m_x22.jsonl o_x22.txt o_x22h.txt <<'PY'
import json, re, sys
e = json.load(open(sys.argv[1]))["run"]
m = [json.loads(l)["alltoall_bytes"] for l in open(sys.argv[2]) if '"loss"' in l]
pk = [int(re.search(r"accounted (\d+) bytes", open(f).read()).group(1)) for f in sys.argv[3:]]
print("# estimate: all-to-all %d bytes per step, measured %s; peak %d (fp32 exchanges: %d)" %
      (e["alltoall_bytes_per_step"], m, pk[0], pk[1]))
sys.exit(0 if all(x == e["alltoall_bytes_per_step"] for x in m) and pk[0] < pk[1] else 1)
PY
ok $? "sp16 at N=2 x dp 2, stage 3, accumulation, checkpointing: bitwise; bytes == formula == estimate; peak planned exactly, below the hook's"
run x22a 4 "${X22[@]}" --act-ckpt blocks-attn --memory-report end && same_bits x22 x22a &&
    a2ak x22a 2 1 32 2 128 64 2 1 3 && peak_above x22 x22a &&
    est_a2a x22a 4 "${X22[@]}" --act-ckpt blocks-attn
ok $? "sp16 blocks-attn at N=2 x dp 2, stage 3 (bf16 kept output): bitwise blocks'; bytes == formula == estimate; peak planned"
sp16 xq 2 1 2 4 32 2 128 64 1 0 -- "${B16[@]}" --qk-norm true --sp 2 --stage 3 --micro-batch 4
ok $? "sp16 with Qwen3 q/k norms: attention output in bf16, q|k|v gradient fp32; bitwise"
# (LoRA: the adapters' GEMMs read the bf16 q|k|v gradient too, arch.h zt_lora_dq16_of;
# ZT_TEST_NO_QKV16=1 the fp32 one, as before: bitwise the same)
# (the bf16 gradient's buffer, sp_dq16, in place of sp_h's fp32 one: the peak planned exactly)
# (PK: above)
sp16 xl 2 3 2 4 32 2 128 64 1 0 -- "${B16[@]}" "${LORA[@]}" --sp 2 --stage 3 --micro-batch 4 \
    --memory-report end && grep -q "$PK" o_xl.txt && grep -q "$PK" o_xlh.txt
ok $? "sp16 with LoRA: attention output and q|k|v gradient in bf16; bitwise; peak planned exactly"
ZT_TEST_NO_QKV16=1 sp16 xlq 2 1 2 4 32 2 128 64 1 0 -- "${B16[@]}" "${LORA[@]}" --sp 2 --stage 3 \
    --micro-batch 4 --memory-report end && compare xlq xl 0 && grep -q "$PK" o_xlq.txt &&
    python3 - o_xl.txt o_xlq.txt <<'PY'
import re, sys
pk = [int(re.search(r"accounted (\d+) bytes", open(f).read()).group(1)) for f in sys.argv[1:]]
print("# LoRA sp16 peak %d (ZT_TEST_NO_QKV16: %d)" % tuple(pk))
sys.exit(0 if pk[0] < pk[1] else 1)
PY
ok $? "sp16 with LoRA, ZT_TEST_NO_QKV16: q|k|v gradient fp32; bitwise, and bitwise the bf16 one's; its peak above"

# device-memory discipline: cpu-strict (the host never touches device memory; host-staged
# all-to-alls) bitwise equal to cpu at N=2, stage 3, checkpointing (scripts/engine-check.sh)
ZTRAIN="$ZTRAIN" bash "$ZT_SRCDIR/scripts/engine-check.sh" --backend cpu-strict --np 2 --steps 3 \
    --config "$ZT_SRCDIR/configs/llama-tiny.json" --cases none \
    --case "sp2s3 fp32 --stage 3 --sp 2 --micro-batch 8 --act-ckpt blocks" \
    --case "sp2bf16s3 bf16 --stage 3 --sp 2 --micro-batch 8 --act-ckpt blocks" > ec.tap 2>&1 &&
    grep -q "^ok 1 - n2sp2s3: cpu-strict == cpu within rtol 0" ec.tap &&
    grep -q "^ok 2 - n2sp2bf16s3: cpu-strict == cpu within rtol 0" ec.tap
ok $? "cpu-strict at N=2, stage 3, checkpointing: bitwise equal to cpu (fp32, and bf16 with sp16's bf16 exchanges)"

# checkpoints: steps 1-2 at N=2 on 2 ranks, steps 3-4 elsewhere
resume() {  # resume TAG NB ARGS_B...
    local tag=$1 nb=$2; shift 2
    mkdir -p "ck_$tag" && cp -r ck_la/step-2 "ck_$tag/" || return 1
    mpirun_np "$nb" "$ZTRAIN" train "${LLAMA[@]}" --train c_train.bin --val c_val.bin --threads 1 \
        --steps 4 --eval-every 0 --sample-tokens 0 --batch-size 4 --scheduler.params.total_num_steps 4 \
        --metrics "m_${tag}_b.jsonl" --ckpt-dir "ck_$tag" --resume auto "$@" > "o_$tag.txt" 2>&1
    finished "$tag" $? || { diag "o_$tag.txt" | tail -5; return 1; }
    grep -q "resumed from ck_$tag/step-2 at step 2" "o_$tag.txt" || return 1
    cat m_la.jsonl "m_${tag}_b.jsonl" > "m_$tag.jsonl"
    "$ZTRAIN" ckpt export "ck_$tag" --output "w_$tag.safetensors" > /dev/null 2>&1
}
STEPS=2 run la 2 "${LLAMA[@]}" --sp 2 --micro-batch 4 --sample-tokens 4 &&
    resume r1 2 --sp 1 --stage 3 --micro-batch 2 && compare lref r1
ok $? "save at N=2 (2 ranks), restore at N=1 on 2 ranks, stage 3: losses and parameters match"
resume r4 4 --sp 4 --stage 2 --micro-batch 4 && compare lref r4
ok $? "save at N=2 (2 ranks), restore at N=4 on 4 ranks, stage 2: losses and parameters match"

# the documented target (docs/long-context.md): Llama-3.1-8B's shape at 131072 tokens, 8 x 80 GB,
# bf16, ZeRO-3, activation checkpointing: refused, suggesting sequence parallel 4 (the LM head in
# chunks: one [T/N, vocab] logits array no more), which fits, as does 8
L8B=(--arch llama --n-layer 32 --n-head 32 --n-kv-head 8 --n-embd 4096 --intermediate-size 14336
     --vocab 128256 --context 131072 --seq-len 131072 --rope-theta 500000 --rope-scaling llama3
     --tie-embeddings false --bf16.enabled true --stage 3 --act-ckpt blocks --micro-batch 1)
"$ZTRAIN" estimate --world-size 8 --device gpu --device-memory 80G "${L8B[@]}" > e_8b.txt 2>&1
grep -q "^does not fit: .* > 76.65 GiB (--device-memory 80.00 GiB less the CUDA context 1.25 GiB and the run's reserve 2.10 GiB); changes that fit: sequence parallel 4 .*(--sp 4 --grad-accum 4)" e_8b.txt &&
    "$ZTRAIN" estimate --world-size 8 --device gpu --device-memory 80G "${L8B[@]}" --sp 4 --grad-accum 4 > e_8b4.txt 2>&1 &&
    grep -q "^fits: .* <= 76.65 GiB (--device-memory 80.00 GiB less" e_8b4.txt &&
    "$ZTRAIN" estimate --world-size 8 --device gpu --device-memory 80G "${L8B[@]}" --sp 8 --grad-accum 8 > e_8b8.txt 2>&1 &&
    grep -q "^fits: .* <= 76.65 GiB (--device-memory 80.00 GiB less" e_8b8.txt &&
    grep -q "^sequence parallel: 8 ranks share each sample (data parallel 1), 16384 of its 131072 tokens per rank" e_8b8.txt &&
    grep -q "^    with sample .*(no text sample: a sequence- or expert-parallel run skips it)$" e_8b8.txt &&
    grep -q "^    with sample .*(if the text sample runs: a \[1, 256\] forward" e_8b.txt
ok $? "estimate: Llama-3.1-8B at 131072 tokens on 8 x 80 GB does not fit, --sp 4 is suggested and fits, so does --sp 8 (and plans no closing text sample)"
grep "^does not fit\|^fits\|^sequence parallel" e_8b.txt e_8b4.txt e_8b8.txt | sed 's/^/# /'

# refusals
mpirun_np 4 "$ZTRAIN" train --config "$ZT_SRCDIR/configs/llama-tiny.json" --train c_train.bin \
    --threads 1 --steps 1 --sp 4 --batch-size 4 > o_kv.txt 2>&1
[ $? != 0 ] && grep -q "sequence_parallel_size=4 must divide the 2 key/value heads (ztrain.model.n_kv_head; 4 query heads)" o_kv.txt
ok $? "N=4 with 2 key/value heads is refused, naming the heads and N"
mpirun_np 3 "$ZTRAIN" train "${LLAMA[@]}" --train c_train.bin --threads 1 --steps 1 --sp 2 \
    --batch-size 3 > o_w.txt 2>&1
[ $? != 0 ] && grep -q "sequence_parallel_size=2 must divide the number of ranks (3)" o_w.txt
ok $? "N=2 on 3 ranks is refused"
"$ZTRAIN" sample --checkpoint ck_la --prompt "To" --length 4 > o_s.txt 2>&1 &&
    grep -q "sample: skipped (sequence_parallel_size=2; sample from the checkpoint" o_la.txt
ok $? "train at N=2 skips its closing sample; ztrain sample --checkpoint of an N=2 run samples at N=1"
done_testing
