#!/bin/bash
# memplan_mpi.sh -- the memory planner against real runs: tests/test_memplan_run
# at 1 to 4 ranks (grid of stages, shard groups, checkpointing, micro batches;
# bf16/fp16 grid with 16-bit reductions and optimizer offload; parameter
# offload, a QLoRA base's too; checkpointing equivalence; refusal; auto micro
# batch), then the CLI:
# `ztrain train --memory-report` with real data loaders (fp32, bf16, fp16,
# optimizer and parameter offload, pin_memory on cpu / cpu-strict), the pre-flight
# refusal and its first suggestion, micro batch auto, and `ztrain estimate`
# (a 70B QLoRA shape on 2 x 24 GB: the 4-bit base's offload suggested, fits).
. "$(dirname "$0")/lib.sh"
command -v "$ZT_MPIRUN" > /dev/null || skip_all "no MPI launcher ($ZT_MPIRUN)"
command -v python3 > /dev/null || skip_all "no python3"
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
for n in 1 2 3 4; do tap_mpi "$n" "$ZT_BUILDDIR/tests/test_memplan_run"; done

cd "$T" || exit 1
head -c 120000 "$ZT_SRCDIR/data/tinyshakespeare.txt" > corpus.txt
"$ZTRAIN" prep --input corpus.txt --output c > /dev/null
# train TAG NRANKS ARGS...: 3 steps of the tiny config with real loaders
train() {
    local tag=$1 n=$2; shift 2
    mpirun_np "$n" "$ZTRAIN" train --config "$ZT_SRCDIR/configs/tiny.json" --train c_train.bin \
        --val c_val.bin --threads 1 --steps 3 --eval-every 0 --sample-tokens 0 --save "w_$tag.bin" \
        --ckpt-dir "ck_$tag" "$@" > "o_$tag.txt" 2> "e_$tag.txt"
}
# within5 TAG: the end-of-training report's prediction is within 5% of the accounted peak
within5() {
    python3 - "o_$1.txt" <<'PY'
import re, sys
m = re.search(r"memory peak per rank: accounted (\d+) bytes, predicted (\d+) bytes", open(sys.argv[1]).read())
a, p = int(m.group(1)), int(m.group(2))
print("# accounted %d, predicted %d (%.3f%%)" % (a, p, 100.0 * (p - a) / a))
sys.exit(0 if abs(p - a) <= 0.05 * a else 1)
PY
}
for spec in "1 0 none 4" "2 1 blocks 2" "3 2 every-2 5" "4 3 blocks 3" "4 3 none 1 --shard-group 2" \
            "1 0 none 4 --precision bf16" "2 1 blocks 2 --precision bf16 --offload optimizer" \
            "3 2 none 2 --precision fp16 --comm-dtype bf16" \
            "4 3 blocks 1 --shard-group 2 --precision bf16 --comm-dtype bf16 --offload optimizer" \
            "2 3 none 2 --offload params" "4 3 blocks 2 --precision bf16 --offload params" \
            "3 3 none 2 --shard-group 3 --precision fp16 --offload params"; do
    set -- $spec
    n=$1 s=$2 k=$3 mb=$4; shift 4
    tag="r$n$s$k$mb$#"
    if train "$tag" "$n" --stage "$s" --act-ckpt "$k" --micro-batch "$mb" --eval-batch-size $((2 * mb)) \
        --n-layer 3 --memory-report "$@" && grep -q "memory report (end of training)" "o_$tag.txt"; then
        within5 "$tag"
    else diag "e_$tag.txt"; false; fi
    ok $? "CLI, $n ranks, stage $s, $k, micro $mb $*: --memory-report prediction within 5% (data loaders, eval)"
done
# parameter offload on the CLI: the report's params and optimizer rows are
# wholly offloaded, exactly as predicted (rank 0 owns the largest slices);
# pin_memory on the cpu and cpu-strict backends pins nothing (predicted 0)
offp_exact() {
    python3 - "o_$1.txt" <<'PY'
import re, sys
t = open(sys.argv[1]).read()
rows = {m.group(1): m for m in re.finditer(
    r"^ *(params|optimizer|pinned) +(\S+ \S+) +(\S+ \S+) +(\S+ \S+)(.*)$", t, re.M)}
ok = all(k in rows for k in ("params", "optimizer", "pinned"))
for k in ("params", "optimizer"):
    ok = ok and rows[k].group(3) == rows[k].group(4) and "host memory" in rows[k].group(5)
ok = ok and rows["pinned"].group(3) == "0 B" and rows["pinned"].group(4) == "0 B"
print("# " + " | ".join(rows[k].group(0).strip() for k in rows))
sys.exit(0 if ok else 1)
PY
}
PIN=(--zero_optimization.offload_optimizer.pin_memory true --zero_optimization.offload_param.pin_memory true)
for be in cpu cpu-strict; do
    if train "offp_$be" 2 --stage 3 --offload params --precision bf16 --memory-report --backend "$be" "${PIN[@]}"; then
        offp_exact "offp_$be"
    else diag "e_offp_$be.txt"; false; fi
    ok $? \
       "CLI $be, 2 ranks, bf16 stage 3 --offload params, pin_memory: params + optimizer offloaded as predicted, 0 bytes pinned"
done

train rep2 1 --memory-report=2 --steps 4
ok $([ "$(grep -c 'memory report (' o_rep2.txt)" = 2 ] && grep -q 'memory report (step 2)' o_rep2.txt &&
     grep -q '  eval ' o_rep2.txt; echo $?) "--memory-report=2: a report every 2 steps and at the end, eval included"

# the pre-flight refusal: one error line, suggestions; the first one fits and runs
peak=$("$ZTRAIN" estimate --config "$ZT_SRCDIR/configs/tiny.json" --world-size 2 --train c_train.bin \
       --val c_val.bin --micro-batch 8 --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["peak_bytes"])')
limit=$((peak * 3 / 4))
train refuse 2 --micro-batch 8 --memory-limit "$limit"
rc=$?
first=$(sed -n 's/.*changes that fit: [^(]*(\([^)]*\)).*/\1/p' e_refuse.txt)
ok $([ $rc = 1 ] && [ "$(grep -c '^ztrain: error:' e_refuse.txt)" = 1 ] && grep -q "^ztrain: error: predicted peak" e_refuse.txt &&
     [ -n "$first" ] && ! grep -q "^step" o_refuse.txt; echo $?) \
   "refused before training: exit 1, one error line with suggestions (first: $first)"
grep "^ztrain: error:" e_refuse.txt | sed 's/^/# /'
# shellcheck disable=SC2086
train fixed 2 --micro-batch 8 --memory-limit "$limit" $first
ok $? "the first suggestion applied ($first): it fits and trains"
train forced 2 --micro-batch 8 --memory-limit "$limit" --force
ok $([ $? = 0 ] && grep -q "^warning: memory: predicted peak .* starting anyway" e_forced.txt; echo $?) \
   "--force starts anyway, with a warning"

# micro batch auto under a small limit keeps the global batch
m4=$("$ZTRAIN" estimate --config "$ZT_SRCDIR/configs/tiny.json" --world-size 2 --train c_train.bin \
     --val c_val.bin --micro-batch 4 --grad-accum 3 --eval-batch-size 4 --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["peak_bytes"])')
alimit=$(python3 -c "print(int($m4 / 0.9) + 1)")
train auto 2 --micro-batch auto --grad-accum auto --batch-size 24 --memory-limit "$alimit" --eval-batch-size 4
ok $([ $? = 0 ] && grep -q "train_micro_batch_size_per_gpu=auto: micro batch 4 x accumulation 3 x 2 ranks = batch 24" o_auto.txt &&
     grep -q "micro batch 6 would need" o_auto.txt && grep -q "batch: 24 global = 4 micro x 3 accumulation x 2 ranks" o_auto.txt;
     echo $?) "micro batch auto: 4 x 3 x 2 = 24 under the limit; says why (6 would not fit)"
grep "auto:" o_auto.txt | sed 's/^/# /'

# the ranks plan "auto" from the memory each measures; rank 1 sees less (its own
# /proc/meminfo in a mount namespace): every rank takes the smallest plan, and a rank
# that cannot plan at all gives every rank its error (before: a hang or a mismatch)
if unshare -m true 2> /dev/null; then
    # rank1_meminfo FILE CMD...: CMD, with FILE as /proc/meminfo on rank 1
    cat > rank1_meminfo.sh <<'SH'
#!/bin/bash
f=$1; shift
[ "$OMPI_COMM_WORLD_RANK" = 1 ] || exec "$@"
exec unshare -m bash -c 'mount --bind "$1" /proc/meminfo && shift && exec "$@"' _ "$f" "$@"
SH
    # lowmem KB: a 2-rank auto run with MemAvailable KB on rank 1
    lowmem() {
        local kb=$1
        printf 'MemTotal: %s kB\nMemFree: %s kB\nMemAvailable: %s kB\n' "$kb" "$kb" "$kb" > "meminfo_$kb"
        timeout 120 "$ZT_MPIRUN" --oversubscribe -np 2 --bind-to none bash rank1_meminfo.sh "$PWD/meminfo_$kb" \
            "$ZTRAIN" train --config "$ZT_SRCDIR/configs/tiny.json" \
            --train c_train.bin --val c_val.bin --threads 1 --steps 3 --eval-every 0 --sample-tokens 0 \
            --ckpt-dir "ck_low$kb" --micro-batch auto --grad-accum auto --batch-size 24 --eval-batch-size 4 \
            > "o_low$kb.txt" 2> "e_low$kb.txt"
    }
    kb=$(python3 -c "print(2 * $alimit // 1024 + 1)")   # rank 1: the limit above (/ 2 ranks per node)
    lowmem "$kb"
    ok $([ $? = 0 ] && grep -q "auto: micro batch 4, the smallest plan of any rank" "o_low$kb.txt" &&
         grep -q "batch: 24 global = 4 micro x 3 accumulation x 2 ranks" "o_low$kb.txt"; echo $?) \
       "micro batch auto with less memory on rank 1: both ranks take its plan (4 x 3 x 2)"
    grep "auto:" "o_low$kb.txt" | sed 's/^/# /'
    lowmem 64
    rc=$?
    ok $([ $rc = 2 ] || [ $rc = 1 ]; r1=$?; grep -q "^ztrain: error: rank 1: " "e_low64.txt"; echo $((r1 + $?))) \
       "micro batch auto that rank 1 cannot plan: every rank stops with rank 1's error (exit $rc)"
    grep "^ztrain: error" e_low64.txt | head -1 | cut -c1-300 | sed 's/^/# /'
else
    skip "micro batch auto with per-rank memory" "unshare -m not permitted here"
    skip "micro batch auto that rank 1 cannot plan" "unshare -m not permitted here"
fi

# ztrain estimate: GPT-2 124M stage 0 fp32 on 1 rank; 8B-shaped on 64 ranks
"$ZTRAIN" estimate --world-size 1 --n-layer 12 --n-head 12 --n-embd 768 --context 1024 --vocab 50257 \
    --micro-batch 4 --json > g2.json
python3 - g2.json <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
P = j["model"]["num_params"]; s = j["model_states"]
ok = P == 124439808 and s["params_bytes"] == 4 * P and s["grads_bytes"] == 4 * P and \
     s["optimizer_bytes"] == 8 * P and s["total_bytes"] == 16 * P == s["formula_bytes"] and \
     j["peak_bytes"] == j["host"]["peak_bytes"] > 16 * P and len(j["options"]) == 8
print("# GPT-2 124M: Psi %d, states %d = 16 Psi, peak %d" % (P, s["total_bytes"], j["peak_bytes"]))
sys.exit(0 if ok else 1)
PY
ok $? "estimate GPT-2 124M stage 0 fp32 1 rank: model states = 16 Psi exactly (JSON)"
ok8=0
for prec in fp32 bf16; do for s in 0 1 2 3; do
    "$ZTRAIN" estimate --world-size 64 --ranks-per-node 8 --n-layer 32 --n-head 32 --n-embd 4096 \
        --context 8192 --vocab 128256 --micro-batch 1 --stage $s --precision $prec --device gpu \
        --device-memory 80G --json > e8.json || ok8=1
    python3 - e8.json $s $prec <<'PY' || ok8=1
import json, sys
j = json.load(open(sys.argv[1])); s = int(sys.argv[2]); mixed = sys.argv[3] != "fp32"
P = j["model"]["num_params"]; N = 64.0
f = ([16*P, 8*P + 8*P/N, 4*P + 12*P/N, 16*P/N] if not mixed else
     [16*P, 4*P + 12*P/N, 2*P + 14*P/N, 16*P/N])[s]
# what the engine keeps: fp32 gradients in every precision (2 bytes more per gradient element)
e = f if not mixed else [18*P, 6*P + 12*P/N, 2*P + 16*P/N, 18*P/N][s]
ms = j["model_states"]; t = ms["total_bytes"]
print("# 8B %s stage %d: states %.3f GiB vs engine %.3f GiB, ZeRO formula %.3f GiB, peak %.2f GiB, fits 80G: %s" %
      (sys.argv[3], s, t / 2**30, e / 2**30, f / 2**30, j["peak_bytes"] / 2**30, j["fits"]))
sys.exit(0 if abs(t - e) <= 1e-4 * e and abs(ms["formula_bytes"] - f) <= 1 and
         abs(ms["engine_formula_bytes"] - e) <= 1 and j["peak_bytes"] == j["device"]["peak_bytes"] else 1)
PY
done; done
ok $ok8 "estimate 8B-shaped (32 x 4096, vocab 128256, context 8192) on 64 ranks: model states match the ZeRO formulas in fp32 and the engine's (fp32 gradients) in bf16, stages 0-3"
# --device-memory: the fit is checked as the run checks it, against the device less the CUDA
# context (--cuda-context, default 1.25 GiB) and the run's reserve (512 MiB + 2% of the device);
# the process's figure (nvidia-smi) is the peak plus the context
okd=0
for ctx in "" 0 3G; do
    "$ZTRAIN" estimate --world-size 1 --n-layer 4 --n-embd 128 --device gpu --device-memory 16G \
        ${ctx:+--cuda-context $ctx} --json > dm.json || okd=1
    "$ZTRAIN" estimate --world-size 1 --n-layer 4 --n-embd 128 --device gpu --device-memory 16G \
        ${ctx:+--cuda-context $ctx} > dm.txt || okd=1
    python3 - dm.json dm.txt "${ctx:-default}" <<'PY' || okd=1
import json, re, sys
j = json.load(open(sys.argv[1])); txt = open(sys.argv[2]).read(); ctx = sys.argv[3]
G, M = 2**30, 2**20
c = {"default": 1280 * M, "0": 0, "3G": 3 * G}[ctx]
dev = 16 * G
want = dev - (512 * M + int(dev * 0.02)) - c
ok = (j["limit_bytes"] == want and j["cuda_context_bytes"] == c and
      j["process_peak_bytes"] == j["peak_bytes"] + c and j["fits"] == (j["peak_bytes"] <= want))
m = re.search(r"^fits: .* <= ([0-9.]+) GiB \(--device-memory 16.00 GiB less the CUDA context .* and the run's reserve 839.68 MiB\)$",
              txt, re.M)
ok = ok and m is not None and abs(float(m.group(1)) - want / G) < 0.006
print("# --cuda-context %s: limit %.3f GiB (want %.3f), process peak %.3f GiB" %
      (ctx, j["limit_bytes"] / G, want / G, j["process_peak_bytes"] / G))
sys.exit(0 if ok else 1)
PY
done
"$ZTRAIN" estimate --world-size 1 --device gpu --device-memory 16G --cuda-context 2X > dm.txt 2>&1
[ $? = 2 ] && grep -q "^ztrain: error: --cuda-context must be a size such as 1G, got '2X'" dm.txt || okd=1
ok $okd "estimate --device-memory 16G: limit = 16 GiB - CUDA context (default 1.25 GiB, --cuda-context 0, 3G) - 839.68 MiB reserve (512 MiB + 2%); process peak = peak + context; a bad --cuda-context is refused"
# a LoRA run whose frozen base does not fit one GPU next to its activations, where no change of
# stage, micro batch or checkpointing fits: the parameters offloaded to the host are suggested
# (offered only then), and with them it fits
cat > l8b.json <<'EOF'
{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
 "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32,
 "num_key_value_heads": 8, "vocab_size": 128256, "max_position_embeddings": 8192,
 "rms_norm_eps": 1e-05, "hidden_act": "silu", "tie_word_embeddings": false,
 "rope_theta": 500000.0, "torch_dtype": "bfloat16"}
EOF
LORA8=(--model l8b.json --world-size 1 --bf16.enabled true --micro-batch 1
       --seq-len 2048 --act-ckpt blocks --lora-r 16 --lora-alpha 32 --lora-targets all-linear)
"$ZTRAIN" estimate "${LORA8[@]}" --device gpu --device-memory 20G > lo1.txt 2>&1
"$ZTRAIN" estimate "${LORA8[@]}" --device gpu --device-memory 20G --stage 3 --offload params > lo2.txt 2>&1
ok $(grep -q "^does not fit: .*; changes that fit: ZeRO stage 3 with the parameters offloaded to the host (--stage 3 --offload params): -[0-9]*%$" lo1.txt &&
     grep -q "^fits: " lo2.txt; echo $?) \
   "estimate: Llama-3-8B LoRA on one 20 GB GPU: only parameter offload fits, and it is suggested; with it, fits"
# the bf16 base's embedding and head units make no fp32 copy of their [128256, 4096] matrices (the
# lookup and the GEMMs read the bf16 storage): 2048 tokens fit one 24 GB GPU
# fits8 NAME FLAGS...: estimate --json of the 8B run with FLAGS fits (the planner's peak_bytes <=
# limit_bytes: --device-memory less the CUDA context and the run's reserve)
fits8() {
    local name=$1; shift
    "$ZTRAIN" estimate "${LORA8[@]}" "$@" --json > f8.json 2> f8.err
    python3 - f8.json <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
print("# peak %d B <= limit %d B: %s" % (j["peak_bytes"], j["limit_bytes"], j["fits"]))
sys.exit(0 if j["fits"] is True and 0 < j["peak_bytes"] <= j["limit_bytes"] else 1)
PY
    ok $? "$name"
}
fits8 "estimate: Llama-3-8B LoRA (bf16 base, 2048 tokens) on one 24 GB GPU fits" \
    --device gpu --device-memory 24G
# QLoRA (docs/lora.md): the NF4 base, its embeddings' and head's units without an fp32 copy of
# their [128256, 4096] matrices: 2048 tokens with checkpointing fit one 16 GB GPU
fits8 "estimate: Llama-3-8B QLoRA (nf4 base, 2048 tokens, checkpointing) on one 16 GB GPU fits" \
    --device gpu --device-memory 16G --lora-base nf4
grep -h "^does not fit\|^fits" lo1.txt lo2.txt | sed 's/^/# /'
# QLoRA of a Llama-3-70B shape (docs/lora.md) on 2 x 24 GB, stage 3: the 4-bit base (19.9 GiB a
# rank) does not fit next to the activations; its offload to the host is suggested, and with it
# (the NF4 slices in host memory, uploaded per unit) the run fits, the parameters on the host
# being exactly the 4-bit base and the adapters
cat > l70b.json <<'EOF'
{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 8192,
 "intermediate_size": 28672, "num_hidden_layers": 80, "num_attention_heads": 64,
 "num_key_value_heads": 8, "vocab_size": 128256, "max_position_embeddings": 8192,
 "rms_norm_eps": 1e-05, "hidden_act": "silu", "tie_word_embeddings": false,
 "rope_theta": 500000.0, "torch_dtype": "bfloat16"}
EOF
Q70=(--model l70b.json --world-size 2 --device gpu --device-memory 24G --bf16.enabled true --micro-batch 1
     --seq-len 2048 --act-ckpt blocks --stage 3 --lora-r 16 --lora-alpha 32 --lora-targets all-linear
     --lora-base nf4)
"$ZTRAIN" estimate "${Q70[@]}" > q70a.txt 2>&1
"$ZTRAIN" estimate "${Q70[@]}" --offload params --json > q70b.json 2> q70b.err
grep -q "^does not fit: .*; changes that fit: ZeRO stage 3 with the parameters offloaded to the host (--offload params): -[0-9]*%$" q70a.txt &&
python3 - q70b.json <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
lo, off = j["lora"], j["host"]["offloaded_categories"]["params"]
print("# 70B QLoRA offloaded: device peak %d B <= limit %d B; params offloaded %d B = 4-bit base %d B + adapters %d B" %
      (j["peak_bytes"], j["limit_bytes"], off, lo["frozen_base_bytes"], lo["adapter_bytes"]))
ok = (j["fits"] is True and 0 < j["peak_bytes"] <= j["limit_bytes"] and
      j["device"]["categories"]["params"] == 0 and
      off == lo["frozen_base_bytes"] + lo["adapter_bytes"] and lo["frozen_base_bytes"] > 0)
sys.exit(0 if ok else 1)
PY
ok $? "estimate: Llama-3-70B QLoRA (nf4) on 2 x 24 GB, stage 3: does not fit, --offload params suggested; with it fits, the 4-bit base and the adapters wholly offloaded"
grep -h "^does not fit" q70a.txt | sed 's/^/# /'
# issue 41's memory target: Llama-3-8B at 8192 tokens, bf16, 8 ranks, stage 3, no checkpointing:
# activations per rank <= 0.6 x 74.2 GiB, with the bf16 activations and GEMM outputs (the fp32
# activations, ZT_TEST_NO_ACT16=1, for comparison: above it)
L8E=(--model l8b.json --world-size 8 --device gpu --device-memory 80G --bf16.enabled true
     --micro-batch 1 --seq-len 8192 --stage 3 --json)
"$ZTRAIN" estimate "${L8E[@]}" > a16.json 2>&1
ZT_TEST_NO_ACT16=1 "$ZTRAIN" estimate "${L8E[@]}" > a32.json 2>&1
o=$(python3 - a16.json a32.json <<'PY'
import json, sys
a16, a32 = (json.load(open(f))["device"]["categories"]["activations"] for f in sys.argv[1:3])
bound = 0.6 * 74.2 * 2**30
print("%.2f GiB (fp32 activations %.2f GiB, bound %.2f GiB)" % (a16 / 2**30, a32 / 2**30, bound / 2**30))
sys.exit(0 if a16 <= bound < a32 else 1)
PY
)
ok $? "estimate: Llama-3-8B, 8192 tokens, bf16, 8 ranks, stage 3: activations per rank $o <= 0.6 x 74.2 GiB"
# the bf16 activations take no memory beyond the arrays they keep in bf16: the block is the fp32
# activations' block (ZT_TEST_NO_ACT16=1) less half of each slot's arrays kept in bf16, exactly (Llama:
# xn, q|k|v, the attention output, xn2, gate|up and h, 2 (2C + QKV + AD + 3H) bytes a token; GPT-2:
# ln1, q|k|v, the attention output, ln2, fc's output and its GELU, 2 x 14C), and half of the final
# norm's output (the LM head's input, kept in bf16 alone: 2C bytes a token).  So the bf16 copies of
# the gradients the backward GEMMs read take none of their own (the residual gradient's lies over
# the final norm's bf16 output, gate|up's over the slot's gate|up), nor do the fp32 stagings (inside
# the backward's scratch at these shapes).  GPT-2's one buffer of its own with the bf16 activations:
# the MLP projections' bias sums, mlpsum [L, C] fp32 (ZT_W16_MLPSUM: 4 L C bytes more).  (fp32
# logits in both: ZT_TEST_NO_L16=1; every array here a multiple of 256 bytes.)
# acts16 NAME SAVED_BYTES FLAGS...: `ztrain estimate FLAGS` (--json among them)
acts16() {
    local name=$1 want=$2 o; shift 2
    ZT_TEST_NO_L16=1 "$ZTRAIN" estimate "$@" > b16.json 2>&1
    ZT_TEST_NO_L16=1 ZT_TEST_NO_ACT16=1 "$ZTRAIN" estimate "$@" > b32.json 2>&1
    o=$(python3 - b16.json b32.json "$want" <<'PY'
import json, sys
a16, a32 = (json.load(open(f))["device"]["categories"]["activations"] for f in sys.argv[1:3])
want = int(sys.argv[3])
print("%d bytes = fp32 activations %d less %d (%+d)" % (a16, a32, want, a32 - a16 - want))
sys.exit(0 if a32 - a16 == want else 1)
PY
)
    ok $? "estimate, $name: bf16 activations $o, the halves of the slots' bf16 arrays and the final norm's"
}
L_TOK=$((2 * (2 * 4096 + (32 + 2 * 8) * 128 + 32 * 128 + 3 * 14336)))   # Llama-3-8B, a token, a slot
acts16 "Llama-3-8B, 8192 tokens, 8 ranks, stage 3 (32 slots)" $((8192 * (32 * L_TOK + 2 * 4096))) "${L8E[@]}"
acts16 "Llama-3-8B QLoRA, 2048 tokens, checkpointing (1 slot)" $((2048 * (L_TOK + 2 * 4096))) "${LORA8[@]}" \
    --device gpu --lora-base nf4 --json
acts16 "GPT-2 12 x 768, 2048 tokens (12 slots; mlpsum's 4 L C bytes more)" $((2048 * 2 * (12 * 14 + 1) * 768 - 4 * 12 * 768)) --world-size 2 \
    --n-layer 12 --n-embd 768 --device gpu --bf16.enabled true --micro-batch 16 --seq-len 128 --json
# optimizer offload on a GPU target: master + m + v on the host, offloaded; the rest on the device
"$ZTRAIN" estimate --world-size 8 --n-layer 4 --n-embd 128 --stage 2 --precision bf16 --offload optimizer \
    --device gpu --json > off.json
python3 - off.json <<'PY'
import json, sys
j = json.load(open(sys.argv[1])); P = j["model"]["num_params"]; ms = j["model_states"]
d, h = j["device"]["categories"], j["host"]["categories"]
ok = (ms["optimizer_bytes"] == h["optimizer"] == ms["offloaded_bytes"] ==
      j["host"]["offloaded_categories"]["optimizer"] and d["optimizer"] == 0 and
      abs(ms["optimizer_bytes"] - 12 * P / 8) <= 12 * 8 and d["params"] == 2 * P and
      d["grads"] == ms["grads_bytes"] and h["params"] == h["grads"] == 0)
print("# bf16 stage 2, 8 GPUs, offload: optimizer %d bytes on the host (12 Psi/N = %.0f), params %d on the device" %
      (h["optimizer"], 12 * P / 8, d["params"]))
sys.exit(0 if ok else 1)
PY
ok $? "estimate, GPU target, bf16 + optimizer offload: fp32 master + m + v (12 Psi/N) on the host and reported offloaded; 16-bit params and fp32 grads on the device"
"$ZTRAIN" estimate --world-size 8 --n-layer 4 --n-embd 128 --stage 2 --precision bf16 --offload optimizer \
    --device gpu > tbl.txt
ok $([ $? = 0 ] && grep -q "^options" tbl.txt && grep -Eq "^  3 +params" tbl.txt &&
     grep -q "DeepSpeed GPU" tbl.txt && grep -q "peak_bytes per rank" tbl.txt; echo $?) \
   "estimate text: categories, device/host, one row per stage/offload option with DeepSpeed's figures"
"$ZTRAIN" estimate --n-layer 4 > /dev/null 2> err.txt
ok $([ $? = 2 ] && grep -q "world-size" err.txt; echo $?) "estimate without --world-size: usage error"
# inside a Slurm job the shape defaults to Slurm's (tests/slurm/multinode.sh
# runs this in real jobs; here the variables as Slurm writes them)
o=$(SLURM_NTASKS=7 SLURM_TASKS_PER_NODE='2(x3),1' "$ZTRAIN" estimate --n-layer 4 2>&1)
ok $([ $? = 0 ] && grep -q "^run: 7 ranks (2 per node)" <<<"$o" &&
     grep -qF "(world size 7 from SLURM_NTASKS, 2 ranks per node from SLURM_TASKS_PER_NODE=2(x3),1)" <<<"$o"; echo $?) \
   "estimate in a Slurm job: world size from SLURM_NTASKS, ranks per node = the busiest node of SLURM_TASKS_PER_NODE"
o=$(SLURM_NTASKS=8 SLURM_NTASKS_PER_NODE=4 SLURM_TASKS_PER_NODE='4(x2)' "$ZTRAIN" estimate --n-layer 4 \
        --world-size 16 2>&1)
ok $([ $? = 0 ] && grep -q "^run: 16 ranks (4 per node)" <<<"$o" && grep -qF "(4 ranks per node from SLURM_NTASKS_PER_NODE=4)" <<<"$o" &&
     grep -q "host memory per node (4 ranks)" <<<"$o"; echo $?) \
   "estimate: --world-size wins over SLURM_NTASKS; SLURM_NTASKS_PER_NODE gives the ranks per node"
# (issue 45 item 6d: a malformed value is refused like a bad key, no longer ignored)
o=$(SLURM_NTASKS=4 SLURM_TASKS_PER_NODE='4(x' "$ZTRAIN" estimate --n-layer 4 2>&1)
ok $([ $? = 2 ] && [ "$o" = "ztrain: error: SLURM_TASKS_PER_NODE='4(x': expected task counts per node such as 2(x3),1 (each from 1 to 16777215)" ]; echo $?) \
   "estimate: a malformed SLURM_TASKS_PER_NODE is refused, one line naming it ($o)"
# the topology line: every rank's node and host name
train topo 2 --micro-batch 4
ok $(grep -qF "topology: 2 ranks on 1 node (2 per node): $(hostname -s) ranks 0-1" "o_topo.txt"; echo $?) \
   "train prints the topology: 2 ranks on this node, by host name"
train topoh 4 --micro-batch 4 --stage 3 --shard-group 2
ok $(grep -qF "hybrid sharding: 2 groups of 2 ranks, each inside one node" "o_topoh.txt"; echo $?) \
   "hybrid sharding on one node: the groups are reported inside the node"
# shard_group_size "node": the ranks of one node (here all 4: full sharding)
train gnode 4 --micro-batch 4 --stage 3 --shard-group node --metrics m_gnode.jsonl &&
    train gfull 4 --micro-batch 4 --stage 3 --shard-group 0 --metrics m_gfull.jsonl
ok $([ $? = 0 ] && grep -q 'shard_group_size *= "node"' o_gnode.txt &&
     [ "$(sed 's/"tokens_per_s.*//' m_gnode.jsonl)" = "$(sed 's/"tokens_per_s.*//' m_gfull.jsonl)" ] &&
     cmp -s w_gnode.bin w_gfull.bin; echo $?) \
   "--shard-group node on a 4-rank node: bitwise the full-sharding run (losses and weights)"
o=$("$ZTRAIN" estimate --n-layer 4 --world-size 8 --ranks-per-node 4 --stage 3 --shard-group node 2>&1)
ok $([ $? = 0 ] && grep -q "^run: 8 ranks (4 per node), ZeRO stage 3, shard group 4," <<<"$o"; echo $?) \
   "estimate --shard-group node: the group is the ranks per node (8 ranks, 4 per node: 4)"
o=$("$ZTRAIN" estimate --n-layer 4 --world-size 8 --ranks-per-node 3 --stage 3 --shard-group node 2>&1)
ok $([ $? = 2 ] && grep -qF 'shard_group_size="node" (3 ranks per node) must divide the world size 8' <<<"$o"; echo $?) \
   "estimate --shard-group node with 3 ranks per node of 8: refused, naming both"
o=$("$ZTRAIN" estimate --n-layer 4 --world-size 8 --shard-group nodes 2>&1)
ok $([ $? = 2 ] && grep -qF 'must be an integer >= 0 or "node"' <<<"$o"; echo $?) \
   "--shard-group nodes: refused, saying what is accepted"
"$ZTRAIN" ckpt inspect ck_gnode/step-3 > insp.txt 2>&1
ok $([ $? = 0 ] && grep -q '"shard_group_size": "node"' insp.txt &&
     grep -q "4 ranks, ZeRO stage 3, shard group 4" insp.txt; echo $?) \
   "the checkpoint's configuration keeps \"node\"; its layout records the group used (4)"
echo '{"zero_optimization": {"stage": 3, "shard_group_size": "node"}}' > node.json
"$ZTRAIN" train --config node.json --train c_train.bin --print-config > pc.txt 2>&1
ok $(grep -q 'zero_optimization.shard_group_size *= "node" *(file)' pc.txt; echo $?) \
   "\"shard_group_size\": \"node\" in a JSON file"
done_testing
