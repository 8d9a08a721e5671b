#!/bin/bash
# engine.sh [ZTRAIN] -- make check-cudasim: the training engine with
# --backend cuda on the CUDA simulator against --backend cpu.
#
# ZTRAIN (default tests/cudasim/ztrain_sim) is the ztrain CLI linked
# with the simulated CUDA backend (tests/cudasim/cudasim.am).  The runs are
# scripts/engine-check.sh's: the same arguments on both backends, a few
# steps of a tiny model, the per-step losses, gradient norms and
# validation losses compared, comm_bytes equal, and for GPT-2 the saved
# weights element by element.  Every cuda run has --memory-report and the
# simulator's device report (ZT_CUDASIM_REPORT=-: a `cudasim-report:` line
# per rank at exit, tests/cudasim/README), from which this script checks:
#   - every rank ran the simulated device (kernels launched; each rank is a
#     process with its own simulated device);
#   - the backend's own count of device bytes (zt_cuda_mem, "measured" in
#     the memory report at the end of training) equals the memory planner's
#     device prediction P byte for byte;
#   - the simulator's peak of device bytes over the whole process S (every
#     cudaMalloc and cudaMallocAsync, a cudaFreeAsync counted when queued:
#     stream order) is at least the backend's count (nothing allocated
#     behind the backend's back is missed by the count either way) and at
#     most the plan's end-of-run device peak E (training plus what the CLI
#     does after the report: the weights export, a sample); where E = P,
#     S equals it.  That is rank 0; on the other ranks S <= E (the plan is
#     for shard-group index 0, which owns the largest slices).  With NCCL
#     the bounds get up to 12 bytes more: the NCCL comm backend's barrier word
#     (cudaMalloc of 4 bytes per NCCL group: world, shard, sequence; outside the backend's count).
#
# Tolerances (scripts/engine-check.sh; docs/gpu.md): losses and validation
# losses |cuda - cpu| <= rtol |cpu| with rtol 1e-4 in fp32 and 2e-3 in bf16
# (gradient norms 10 rtol), as on a GPU: the simulator's kernels and cuBLAS
# sum in another order than the CPU kernels and OpenBLAS, so results differ
# by rounding.  The saved weights: |cuda - cpu| <= 2e-5 per element in fp32.
# bf16 runs round matmul and attention operands to bf16 on both backends
# (ztrain.matmul_precision bf16), where a sum in another order can round an
# operand the other way, and AdamW makes a near-zero gradient of the other
# sign a whole lr-sized step: there at most 1% of the weights may exceed
# 2e-5 and none 2 lr per step (scripts/engine-check.sh, same()).  The first runs measured at most 1.8e-6 after
# 4 AdamW steps at lr 1e-3 (weights up to 1 in magnitude), so 2e-5 is a
# 10x margin that still catches any kernel error bigger than rounding
# (one step's update is about lr = 1e-3 per weight).  GPT-2 on cuDNN's attention, whose O and
# dQ|dK|dV are bf16 where the cpu's are fp32: 4.4e-5, derived at its group below.
#
# The default matrix covers each feature once or more in about a minute of
# one core: GPT-2 (configs/tiny.json) at 1 rank (stage 0; bf16 stage 1 with
# activation checkpointing; stage 3 save + resume in a new process) and 2
# ranks (fp32 stage 0; fp32 stage 2 with activation checkpointing; bf16
# stage 3 with optimizer offload), the Llama (configs/llama-tiny.json) at 1 rank (bf16
# stage 3) and 2 ranks (stage 1 with activation checkpointing): 2 ranks
# share the simulated device through host-staged MPI; and GPT-2 at 2 ranks
# over the simulator's NCCL (ztrain.comm_backend=nccl, a device per rank:
# fp32 stage 3 with gradient accumulation 2 and a sample; bf16 stage 2
# with bf16 reductions; fp32 stages 0 and 1; bf16 hybrid stage 2, shard
# groups of 1, with bf16 reductions); a Gemma 2 (configs/gemma2-tiny.json) at 1 rank
# (fp32 stage 0, bf16 stage 3); the Llama with LoRA adapters on every linear
# layer at 1 rank (bf16 stage 3 with activation checkpointing; QLoRA's NF4
# base, bf16 stage 0, and nf4-dq offloaded to pinned host memory at stage 3); the LM head in chunks (ztrain.classifier_chunk_rows:
# Llama bf16 stage 3, Gemma 2 fp32 stage 0); a Mixture of Experts
# (configs/moe-tiny.json) at 1 rank (fp32 stage 0, bf16 stage 3) and 2
# ranks (fp32 stage 2 with activation checkpointing), and with expert
# parallelism 2 at 4 experts (fp32 stage 3 host-staged; fp32 stage 2 with
# activation checkpointing over NCCL); and the Llama in bf16 at seq_len 64, micro batch 16, on
# cuDNN's fused attention (ZT_CUDA_DETERMINISTIC=0: the plan counts its buffers and plan
# workspace) and on ztrain's kernels, and GPT-2 in bf16 on cuDNN's
# attention, its weights compared.  With
# CUDASIM_ENGINE_FULL=1: engine-check.sh's whole matrix (stages 0-3, bf16,
# offload fp32 and bf16, resume, at 1 and 2 ranks) for both models, plus
# the activation-checkpointing cases, and over NCCL GPT-2 stages 2 and 3,
# bf16, bf16 with offload and resume, Llama stage 3 fp32 and bf16.  Prints
# TAP.
set -uo pipefail
SRC=${ZT_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
sim=${1:-tests/cudasim/ztrain_sim}
mpirun=${ZT_MPIRUN:-mpirun}
# (its own mpirun runs as root too, run by hand as well as through check.sh:
# as scripts/engine-check.sh, Open MPI allowed to start as root unless set)
export OMPI_ALLOW_RUN_AS_ROOT=${OMPI_ALLOW_RUN_AS_ROOT:-1}
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=${OMPI_ALLOW_RUN_AS_ROOT_CONFIRM:-1}
[ -x "$sim" ] || { echo "Bail out! no $sim (make tests/cudasim/ztrain_sim)"; exit 1; }
sim=$(cd "$(dirname "$sim")" && echo "$PWD/$(basename "$sim")")
W=$(dirname "$sim")/engine.d
rm -rf "$W" && mkdir -p "$W" || { echo "Bail out! cannot create $W"; exit 1; }
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 ZT_CUDASIM_REPORT=- ZT_CUDASIM_RACECHECK=0
export ZT_CUDASIM_ORDER=${ZT_CUDASIM_ORDER:-forward}
unset ZT_CUDASIM_DEVICES ZT_CUDASIM_MEM_MB

N=0; FAILED=0
ok() {  # ok STATUS NAME
    N=$((N + 1))
    if [ "$1" -eq 0 ]; then echo "ok $N - $2"; else echo "not ok $N - $2"; FAILED=$((FAILED + 1)); fi
}
# launches FILE: a run's launches (its cudasim-report line)
launches() { sed -n 's/^cudasim-report: .* launches \([0-9]*\) .*/\1/p' "$1" 2> /dev/null; }
# peaks_why PREFIX: " run H: ...;" for each of the runs PREFIX0.out, PREFIX1.out whose backend's
# device peak is not the planner's prediction (nothing when both are)
peaks_why() {
    local h m p
    for h in 0 1; do
        read -r m p <<< "$(sed -n 's/^device memory peak per rank (cuda .*: measured \([0-9]*\) bytes, predicted \([0-9]*\) bytes.*/\1 \2/p' \
            "$1$h.out" 2> /dev/null | tail -1)"
        [ -n "$m" ] && [ "$m" = "$p" ] || printf " run %s: the backend's device peak %s != predicted %s;" "$h" "${m:-?}" "${p:-?}"
    done
}
PATOL=2e-5
# within16 A.jsonl B.jsonl: prints the largest relative differences of the logged losses and
# gradient norms of two 4-step runs; 0 when both are within 2^-12 / 2^-9 and not bitwise
within16() {
    python3 - "$1" "$2" <<'PY'
import json, sys
def recs(p):
    return [(r["step"], r["loss"], r.get("grad_norm")) for r in map(json.loads, open(p)) if "loss" in r]
a, b = recs(sys.argv[1]), recs(sys.argv[2])
dl = max(abs(x[1] - y[1]) / abs(y[1]) for x, y in zip(a, b)) if a and b else 1
dg = max(abs(x[2] - y[2]) / abs(y[2]) for x, y in zip(a, b)) if a and b else 1
print("%.3g %.3g" % (dl, dg))
sys.exit(0 if len(a) == 4 and len(b) == 4 and dl <= 2 ** -12 and dg <= 2 ** -9 and a != b else 1)
PY
}
# group NAME NP CONFIG ARGS...: engine-check.sh in $W/NAME, its TAP renumbered;
# COMM=nccl: ztrain.comm_backend=nccl, a simulated device per rank
group() {
    local name=$1 np=$2 config=$3; shift 3
    local comm=${COMM:-mpi}
    [ "$comm" = nccl ] && export ZT_CUDASIM_DEVICES=2 || unset ZT_CUDASIM_DEVICES
    echo "$comm" > "$W/$name.comm"
    bash "$SRC/scripts/engine-check.sh" --backend cuda --comm-backend "$comm" --np "$np" --steps 4 \
        --config "$SRC/configs/$config" --ztrain "$sim" --mpirun "$mpirun" --param-atol "$PATOL" \
        --args "--memory-report" --workdir "$W/$name" --log "$W/$name.log" "$@" > "$W/$name.tap" 2>&1
    local line
    while IFS= read -r line; do
        case $line in
            "ok "*) ok 0 "$name ${line#ok [0-9]* - }" ;;
            "not ok "*) ok 1 "$name ${line#not ok [0-9]* - }" ;;
            "Bail out!"*) ok 1 "$name: engine-check.sh: ${line#Bail out! }" ;;
            "1.."*) ;;
            *) echo "$line" ;;
        esac
    done < "$W/$name.tap"
}

if [ "${CUDASIM_ENGINE_FULL:-0}" = 1 ]; then
    CK=(--case "ck fp32 --stage 2 --act-ckpt blocks" --case "ckbf16 bf16 --stage 1 --act-ckpt blocks")
    group gpt "1 2" tiny.json "${CK[@]}"
    group llama "1 2" llama-tiny.json "${CK[@]}"
    COMM=nccl group nccl 2 tiny.json --cases "s2 s3 bf16s3 offbf16s3 resume"
    COMM=nccl group llamanccl 2 llama-tiny.json --cases "s3 bf16s3"
else
    group gpt1 1 tiny.json --cases "s0 resume" --case "ckbf16s1 bf16 --stage 1 --act-ckpt blocks"
    group gpt2 2 tiny.json --cases "s0 offbf16s3" --case "cks2 fp32 --stage 2 --act-ckpt blocks"
    group llama1 1 llama-tiny.json --cases "bf16s3" --case "chbf16s3 bf16 --stage 3 --classifier-chunk-rows 9"
    group llama2 2 llama-tiny.json --cases none --case "cks1 fp32 --stage 1 --act-ckpt blocks"
    COMM=nccl group nccl 2 tiny.json --cases none --case "accs3 fp32 --stage 3 --grad-accum 2 --micro-batch 2 --sample-tokens 8" \
        --case "c16s2 bf16 --stage 2 --comm-dtype bf16" --case "ars0 fp32 --stage 0" \
        --case "rss1 fp32 --stage 1" --case "hybs2 bf16 --stage 2 --shard-group 1 --comm-dtype bf16"
fi
# Gemma 2 (configs/gemma2-tiny.json: attention and final soft-caps, window 8 < seq 32 on every
# other layer, GeGLU, (1 + w) norms): gqa_ext, geglu and softcap on the device against the CPU
# (and its LM head in chunks of 7 rows: the soft-cap and xent_fused inside the chunk loop)
group gemma 1 gemma2-tiny.json --cases none --case "g2s0 fp32 --stage 0" --case "g2bf16s3 bf16 --stage 3" \
    --case "g2ch fp32 --stage 0 --classifier-chunk-rows 7"
# LoRA and QLoRA (all-linear, rank 4, bf16): the adapters' GEMMs, the frozen base read in bf16 (or
# dequantized from NF4 per unit, nf4_dequant), the bf16 activations rounded after the adapters' delta;
# the 4-bit base offloaded (its slices in pinned host memory, uploaded per unit; absmax2 on the device)
group lora 1 llama-tiny.json --cases none \
    --case "lorabf16s3ck bf16 --stage 3 --lora-r 4 --lora-targets all-linear --act-ckpt blocks" \
    --case "qlorabf16s0 bf16 --stage 0 --lora-r 4 --lora-targets all-linear --lora-base nf4" \
    --case "qloraoffs3 bf16 --stage 3 --lora-r 4 --lora-targets all-linear --lora-base nf4-dq --offload params --zero_optimization.offload_param.pin_memory true"
# Mixture of Experts (configs/moe-tiny.json: 5 experts, 2 a token, expert width 37 (odd: the
# per-expert GEMMs' row slices are not 16-byte aligned), a shared expert and its sigmoid gate,
# the load-balancing loss): cuda_moe.cu's routing, gather/scatter and sigmoid on the device
group moe1 1 moe-tiny.json --cases none --case "m0 fp32 --stage 0" --case "mbf16s3 bf16 --stage 3" \
    --case "mbf16cks0 bf16 --stage 0 --act-ckpt blocks"
group moe2 2 moe-tiny.json --cases none --case "mcks2 fp32 --stage 2 --act-ckpt blocks"
# expert parallelism (docs/moe.md): 4 experts, 2 a rank; the rows to their experts' ranks and
# back through the all-to-all of variable counts, host-staged MPI and the simulator's NCCL
group moeep 2 moe-tiny.json --cases none --case "ep2s3 fp32 --stage 3 --ep 2 --ztrain.model.n_experts 4"
COMM=nccl group moeepnccl 2 moe-tiny.json --cases none \
    --case "ep2cks2 fp32 --stage 2 --ep 2 --ztrain.model.n_experts 4 --act-ckpt blocks"
# sequence parallelism (docs/long-context.md): the all-to-alls through NCCL's send/recv
# (bf16: the attention output and the q|k|v gradient exchanged in bf16, sp16, on both backends)
# (blocks-attn: each layer's attention output kept on the device, the recompute's exchange of
# q|k|v alone)
COMM=nccl group llamasp 2 llama-tiny.json --cases none --case "sp2s3 fp32 --stage 3 --sp 2 --micro-batch 8 --act-ckpt blocks" \
    --case "sp2bf16s3 bf16 --stage 3 --sp 2 --micro-batch 8 --act-ckpt blocks" \
    --case "sp2bf16s3a bf16 --stage 3 --sp 2 --micro-batch 8 --act-ckpt blocks-attn"
# sp16 on the device: bitwise the fp32 exchanges (ZT_TEST_NO_SP16=1; losses, gradient norms,
# validation losses) at fewer all-to-all bytes, through the simulated NCCL
G=$W/llamasp
if [ -f "$G/c_train.bin" ]; then
    sp16r() {  # sp16r TAG [ENV...] (ACT: the checkpointing policy, blocks unless set)
        local tag=$1; shift
        (cd "$G" && env ZT_CUDASIM_DEVICES=2 "$@" timeout 600 "$mpirun" --oversubscribe -np 2 --bind-to none \
            "$sim" train --config "$SRC/configs/llama-tiny.json" --train c_train.bin --val c_val.bin \
            --batch-size 8 --micro-batch 8 --steps 3 --eval-every 3 --eval-batches 2 --sample-tokens 0 \
            --backend cuda --comm-backend nccl --precision bf16 --stage 3 --sp 2 --act-ckpt "${ACT:-blocks}" \
            --resume never --ckpt-dir "ck_$tag" --metrics "$tag.jsonl" > "$tag.out" 2>&1)
    }
    # fewer_a2a BASE NEW WHAT: NEW's losses, gradient norms and validation losses bitwise BASE's,
    # at fewer all-to-all bytes every step (WHAT names BASE in the diagnostic)
    fewer_a2a() {
        python3 - "$G/$1.jsonl" "$G/$2.jsonl" "$3" <<'PY'
import json, sys
h, x = ([json.loads(l) for l in open(p) if '"loss"' in l or '"val_loss"' in l] for p in sys.argv[1:3])
k = ("loss", "grad_norm", "val_loss")
a, b = ([[r.get(n) for n in k] for r in v] for v in (h, x))
ah = [r["alltoall_bytes"] for r in h if "alltoall_bytes" in r]
ax = [r["alltoall_bytes"] for r in x if "alltoall_bytes" in r]
print("# %d records; all-to-all bytes per step %s (%s: %s)" % (len(a), ax[:1], sys.argv[3], ah[:1]))
sys.exit(0 if a and a == b and ax and len(ax) == len(ah) and all(u < v for u, v in zip(ax, ah)) else 1)
PY
    }
    sp16r sp16h ZT_TEST_NO_SP16=1 && sp16r sp16 && fewer_a2a sp16h sp16 "fp32 exchanges"
    ok $? "llamasp sp16 (cuda, NCCL, bf16, stage 3, checkpointing): bitwise the fp32 exchanges (ZT_TEST_NO_SP16=1), fewer all-to-all bytes"
    # blocks-attn on the device: bitwise blocks' (losses, gradient norms, validation losses), the
    # recompute's output exchanges gone (fewer all-to-all bytes)
    ACT=blocks-attn sp16r sp16a && fewer_a2a sp16 sp16a blocks
    ok $? "llamasp blocks-attn (cuda, NCCL, bf16, stage 3): bitwise blocks', fewer all-to-all bytes"
else
    ok 1 "llamasp sp16: no $G/c_train.bin"
    ok 1 "llamasp blocks-attn: no $G/c_train.bin"
fi
# the attention path the memory plan counts (docs/gpu.md): every group above runs ztrain's
# kernels (engine-check.sh sets ZT_CUDA_DETERMINISTIC=1); these run the Llama in bf16 at
# seq_len 64, micro batch 16, on cuDNN's fused attention (ZT_CUDA_DETERMINISTIC=0: its
# buffers and plan workspace, which only cuDNN reports; since its GQA full-head dK / dV are
# virtual tensors, h-sdpa, both paths' scratch rounds to the same MiB here) and on ztrain's
# kernels, each planned from the backend's answer at the run's shapes
ZT_CUDA_DETERMINISTIC=0 group attcudnn 1 llama-tiny.json --batch-size 16 --cases none \
    --case "cudnn bf16 --stage 0 --ztrain.seq_len 64"
ZT_CUDA_DETERMINISTIC=1 group attdet 1 llama-tiny.json --batch-size 16 --cases none \
    --case "det bf16 --stage 0 --ztrain.seq_len 64"
# GPT-2 (configs/tiny.json, head size 16) in bf16 on cuDNN's fused attention, its saved weights
# against the cpu's.  The cpu's bf16 attention (kernels/cpu/cpu_attention.c) rounds what ztrain's
# tensor-core kernels round (q, k, v, dout, P, dS); cuDNN's graph rounds two more: its O and its
# dQ|dK|dV are bf16 tensors, the cpu's fp32.  Each rounding is within u = 2^-9 of the value, so
# to first order every gradient term moves by at most 2u relative, and a gradient whose terms do
# not cancel by at most 2u (the gradient clip's scale, common to a step, moves with the norm,
# which the group checks: measured 2.6e-5 relative, << u).  AdamW's step lr_t m/(sqrt(v) + eps)
# with every gradient within d relative moves m/sqrt(v) by at most 2 K_t d (Cauchy-Schwarz;
# K_t = sqrt(sum_s c_s^2 / e_s), c and e the bias-corrected weights of m and v: at most 1.002
# for t <= 4 at betas 0.9, 0.95), so after the 4 steps (lr 5e-4, 1e-3, 1e-3, 5.5e-4: the sum
# 3.05e-3) the weights by at most 2 * 1.002 * 3.05e-3 * 2u = 2.4e-5 more than on ztrain's
# kernels: atol 2e-5 + 2.4e-5 = 4.4e-5.  Gradients whose terms cancel (near zero) can move by
# more, up to the sign flip of an lr-sized step that the bf16 rule (at most 1% beyond atol, none
# beyond 2 lr a step) already allows for.  Measured: 192 of 34688 weights beyond 4.4e-5 (0.55%;
# 616 beyond 2e-5, 1.8%), the largest 3.9e-3 (< 8e-3)
ZT_CUDA_DETERMINISTIC=0 PATOL=4.4e-5 group gptcudnn 1 tiny.json --cases none --case "cudnn bf16 --stage 0"

# ---- the attention output's gradient in bf16 (libtrain/arch.h zt_do16_of): on cuDNN's path
# (ZT_CUDA_DETERMINISTIC=0) the attention projection's backward writes dO in bf16
# (matmul_bwd_o16) and cuDNN reads it as it is (gqa_ext_bwd16do); after 4 steps every
# parameter and AdamW moment bitwise those of ZT_TEST_NO_DO16=1 (the fp32 dO, rounded by
# k_sdpa_round: the path of before; the final checkpoints' tensor checksums), the logged
# losses and gradient norms the same, GPT-2 and the Llama in bf16 at stage 0, with n_layer
# k_sdpa_round launches a step fewer (the launch counts of the device report), and each run's
# device peak the planner's (cuDNN's scratch without its dO buffer, ZT_ATT_DO16).  HOOK=ZT_TEST_NO_LORAPATH
# (config.h ZT_W16_LORAPATH): the Llama with LoRA adapters on q_proj,v_proj, whose o projection
# has none and so takes that path as without LoRA, against the fp32 dO of before.
# HOOK=ZT_TEST_NO_QKB16 PER=4 (config.h ZT_W16_QKB16): the Llama with Qwen3's q/k norms, whose
# backward runs on cuDNN's bf16 dQ|dK|dV in place (qknorm_rope_bwd16), against widening it, the
# fp32 k_rope, two k_headnorm_bwd and the GEMM's k_round_bf16 of before: 4 launches a block and
# step fewer (PER), the planner's device peak with k_qknorm_rope_bwd16's scratch; both runs with
# ZT_TEST_NO_DOUT16N=1 (BOTH: with the bf16 gradient the q|k|v GEMM would write its input
# gradient in bf16, one rounding more, not bitwise: tests/test_count's bf16_dout16n)
do16() {  # [HOOK=VAR PER=N | FEWER=N WHAT=S BOTH="VAR=V ..."] do16 TAG DIR CONFIG ARGS...: runs in DIR (its c_train.bin), with and without the hook (FEWER: the launches fewer, else 4 L PER)
    local tag=$1 dir=$2 cfg=$3; shift 3
    local h r=0 la lb L why="" hk=${HOOK:-ZT_TEST_NO_DO16} per=${PER:-1} what=${WHAT:-k_sdpa_round}
    local both
    read -r -a both <<< "${BOTH:-}"
    [ -f "$dir/c_train.bin" ] || { ok 1 "do16 $tag: no $dir/c_train.bin (its group did not run)"; return; }
    for h in 0 1; do
        local hook=("${both[@]}")
        [ $h = 1 ] && hook+=("$hk=1")
        (cd "$dir" && env ZT_CUDA_DETERMINISTIC=0 "${hook[@]}" \
            timeout 600 "$sim" train --config "$SRC/configs/$cfg" --train c_train.bin --val c_val.bin \
            --batch-size 8 --micro-batch 8 --steps 4 --eval-every 100 --eval-batches 1 --log-every 1 \
            --sample-tokens 0 --backend cuda --precision bf16 --matmul-precision bf16 --resume never \
            --ckpt-dir "do16_ck_${tag}_$h" --metrics "do16_${tag}_$h.jsonl" --memory-report "$@" \
            > "do16_${tag}_$h.out" 2>&1) ||
            why="$why run $h failed;"
    done
    grep -q '^attention: cuDNN fused attention' "$dir/do16_${tag}_0.out" 2> /dev/null || why="$why not on cuDNN's path;"
    python3 - "$dir/do16_${tag}_0.jsonl" "$dir/do16_${tag}_1.jsonl" <<'PY' || why="$why losses or gradient norms differ;"
import json, sys
def recs(p):
    return [(r["step"], r["loss"], r.get("grad_norm")) for r in map(json.loads, open(p)) if "loss" in r]
a, b = recs(sys.argv[1]), recs(sys.argv[2])
sys.exit(0 if len(a) == 4 and a == b else 1)
PY
    # (the final checkpoints' parameters and AdamW moments, by their checksums: bitwise the same)
    local ca cb
    ca=$("$sim" ckpt inspect "$dir/do16_ck_${tag}_0/step-4" --tensors --no-config 2> /dev/null | grep ' checksum ')
    cb=$("$sim" ckpt inspect "$dir/do16_ck_${tag}_1/step-4" --tensors --no-config 2> /dev/null | grep ' checksum ')
    [ -n "$ca" ] && [ "$ca" = "$cb" ] || why="$why the checkpoints' tensors differ;"
    la=$(launches "$dir/do16_${tag}_0.out")
    lb=$(launches "$dir/do16_${tag}_1.out")
    L=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["ztrain"]["model"]["n_layer"])' "$SRC/configs/$cfg")
    local fewer=${FEWER:-$((4 * L * per))}
    [ -n "$la" ] && [ -n "$lb" ] && [ $((lb - la)) = "$fewer" ] || why="$why launches $la vs $lb, not $fewer fewer;"
    # (the planner counts cuDNN's scratch without its dO buffer: the backend's device peak its prediction)
    why="$why$(peaks_why "$dir/do16_${tag}_")"
    [ -n "$why" ] && grep -hE '^ztrain: error|^attention:' "$dir/do16_${tag}_"*.out | sed 's/^/# /'
    ok "$([ -z "$why" ]; echo $?)" "do16 $tag: after 4 steps parameters and AdamW moments bitwise those of $hk=1 (losses and gradient norms the same), launches $la ($lb with the hook: $fewer fewer, $what)${why:+: $why}"
}
G=$W/gpt1; [ -d "$G" ] || G=$W/gpt
do16 gpt2 "$G" tiny.json
do16 llama "$W/attcudnn" llama-tiny.json --ztrain.seq_len 64
HOOK=ZT_TEST_NO_LORAPATH do16 lorapath "$W/attcudnn" llama-tiny.json --ztrain.seq_len 64 \
    --lora-r 4 --lora-alpha 8 --lora-targets q_proj,v_proj
HOOK=ZT_TEST_NO_QKB16 PER=4 BOTH=ZT_TEST_NO_DOUT16N=1 \
    WHAT="k_sdpa_widen, k_rope, 2 k_headnorm_bwd and k_round_bf16 for k_qknorm_rope_bwd16 a block" \
    do16 qwen3 "$W/attcudnn" llama-tiny.json --ztrain.seq_len 64 --ztrain.model.qk_norm true

# ---- GPT-2's attention projection's bias gradient summed by ln_2's backward (config.h
# ZT_W16_LNSUM, backend.h layernorm_bwd16d's dsum): bitwise the projection's own column sum
# (ZT_TEST_NO_LNSUM=1), its k_colsum_part and k_colsum_final a block and step fewer (ln_2's one
# final launch sums the partials), each run's device peak the planner's (layernorm_bwd16d's third
# array of partials in the kernel workspace)
HOOK=ZT_TEST_NO_LNSUM PER=2 \
    WHAT="the attention projection's k_colsum_part and k_colsum_final a block, summed by ln_2" \
    do16 lnsum "$G" tiny.json
# ---- GPT-2's MLP projection's bias gradient summed by the norm above (config.h ZT_W16_MLPSUM:
# the next block's ln_1 or the final norm, layernorm_bwd16d's dsum, into a row of the
# activations' mlpsum, added to the bias gradient by the block's own backward): bitwise the
# projection's own column sum (ZT_TEST_NO_MLPSUM=1); a block and step its k_colsum_part and
# k_colsum_final for one k_add (a launch fewer; the memset zeroing mlpsum once a step is not a
# kernel launch); each run's device peak the planner's (mlpsum [L, C] in the activations)
HOOK=ZT_TEST_NO_MLPSUM \
    WHAT="the MLP projection's k_colsum_part and k_colsum_final a block for a k_add" \
    do16 mlpsum "$G" tiny.json
# ---- a tied head's gradient written fresh (config.h ZT_W16_HEADFRESH, shard.h
# zt_shard_head_fresh): the embedding's gradient left out of the step's zeroing and written by the
# first micro-batch's fused head's first dW GEMM (beta 0), against ZT_TEST_NO_HEADFRESH=1 (zeroed,
# every chunk adding): bitwise (-0.0 aside, which no checksum here met), the same launches (the
# zeroing is a memset, not a kernel launch), each run's device peak the planner's; GPT-2 with 2
# micro-batches a step (the second adds), and the tied Llama
HOOK=ZT_TEST_NO_HEADFRESH PER=0 WHAT="the same kernels: one memset's bytes fewer a step" \
    do16 headfresh "$G" tiny.json --micro-batch 4 --grad-accum 2
HOOK=ZT_TEST_NO_HEADFRESH PER=0 WHAT="the same kernels: one memset's bytes fewer a step" \
    do16 headfreshl "$W/attcudnn" llama-tiny.json --ztrain.seq_len 64
# ---- a unit's fp32 copy of its tensors other than the GEMM-only ones in one launch (backend.h
# from_bf16_runs, k_from_bf16_runs; precision.h zt_widen_runs_of), against ZT_TEST_NO_WIDENRUNS=1
# (a k_from_bf16 a run of adjacent tensors): bitwise, each run's device peak the planner's; a
# block's copy in each pass (a step's forward and backward, and the final evaluation's forward:
# 9 passes of 2 blocks) one launch for GPT-2's 5 runs (ln_1, the q|k|v bias, the projection's
# bias with ln_2, fc's bias, the projection's bias: 4 fewer) and for Llama's 2 (its two norms)
HOOK=ZT_TEST_NO_WIDENRUNS FEWER=72 WHAT="9 passes x 2 blocks x 4: a block's 5 k_from_bf16 for a k_from_bf16_runs" \
    do16 widenruns "$G" tiny.json
HOOK=ZT_TEST_NO_WIDENRUNS FEWER=18 WHAT="9 passes x 2 blocks x 1: a block's 2 k_from_bf16 for a k_from_bf16_runs" \
    do16 widenrunsl "$W/attcudnn" llama-tiny.json --ztrain.seq_len 64
# ---- GPT-2's norms' output gradient in bf16 (config.h ZT_W16_GPTN16): fc's and q|k|v's GEMMs
# writing their input gradient in bf16 (matmul_bwd_o16; q|k|v's on cuDNN's bf16 dQ|dK|dV) and
# ln_2's / ln_1's backward reading it (layernorm_bwd16d), bf16 at stage 1, checkpointed, 2
# micro-batches a step, against ZT_TEST_NO_GPTN16=1 (the fp32 gradient): NOT bitwise (that
# gradient rounded once), so the logged losses within 2^-12 and the gradient norms within 2^-9
# relative, the same launches, each run's device peak the planner's (no buffer added)
# The same for GPT-2's fc and GELU in one bf16 GEMM (config.h ZT_W16_GELUE, matmul_gelu_fwd_o16:
# cuBLASLt's GELU_AUX_BIAS with a bf16 D and aux), against ZT_TEST_NO_GELUE=1 (matmul_fwd_o16 then
# gelu_fwd16, the GELU of the rounded pre): NOT bitwise, one k_gelu_fwd16 launch fewer a block's
# forward (FEWER: 4 steps x 2 micro-batches x 3 block forwards, the 2 blocks and the first's
# recompute; the last group is kept)
gptn16() {  # [HOOK=VAR TAG=T FEWER=N] gptn16 DIR: runs in DIR (its c_train.bin), with and without the hook
    local dir=$1 h la lb why="" d hk=${HOOK:-ZT_TEST_NO_GPTN16} tag=${TAG:-gptn16} fewer=${FEWER:-0}
    [ -f "$dir/c_train.bin" ] || { ok 1 "$tag: no $dir/c_train.bin (its group did not run)"; return; }
    for h in 0 1; do
        local hook=()
        [ $h = 1 ] && hook=("$hk=1")
        (cd "$dir" && env ZT_CUDA_DETERMINISTIC=0 "${hook[@]}" \
            timeout -s KILL 600 "$sim" train --config "$SRC/configs/tiny.json" --train c_train.bin --val c_val.bin \
            --batch-size 8 --micro-batch 4 --grad-accum 2 --steps 4 --eval-every 100 --eval-batches 1 --log-every 1 \
            --sample-tokens 0 --backend cuda --precision bf16 --matmul-precision bf16 --resume never \
            --stage 1 --act-ckpt blocks --ckpt-dir "${tag}_ck_$h" --metrics "${tag}_$h.jsonl" --memory-report \
            > "${tag}_$h.out" 2>&1) || why="$why run $h failed (exit $?);"
    done
    grep -q '^attention: cuDNN fused attention' "$dir/${tag}_0.out" 2> /dev/null || why="$why not on cuDNN's path;"
    d=$(within16 "$dir/${tag}_0.jsonl" "$dir/${tag}_1.jsonl") || why="$why losses or gradient norms not within 2^-12 / 2^-9 (or bitwise);"
    la=$(launches "$dir/${tag}_0.out")
    lb=$(launches "$dir/${tag}_1.out")
    [ -n "$la" ] && [ -n "$lb" ] && [ $((lb - la)) = "$fewer" ] || why="$why launches $la vs $lb, not $fewer fewer;"
    why="$why$(peaks_why "$dir/${tag}_")"
    [ -n "$why" ] && grep -hE '^ztrain: error|^cudasim' "$dir/${tag}_"*.out | sed 's/^/# /'
    ok "$([ -z "$why" ]; echo $?)" "$tag GPT-2 stage 1 checkpointed: after 4 steps losses and gradient norms within 2^-12 / 2^-9 of $hk=1, not bitwise (max ${d:-?}), launches $la ($lb with the hook), each run's device peak the planner's${why:+: $why}"
}
gptn16 "$G"
HOOK=ZT_TEST_NO_GELUE TAG=gelue FEWER=24 gptn16 "$G"
# (and GPT-2's residual branches in bf16, config.h ZT_W16_GBRANCH16: the projections' bf16 D and
# add_layernorm_fwd16b against the fp32 branches, the same launches)
HOOK=ZT_TEST_NO_GBRANCH16 TAG=gbranch16 gptn16 "$G"

# ---- LoRA's q|k|v gradient in bf16 (libtrain/arch.h zt_lora_dq16_of): the Llama with adapters on
# every linear layer, bf16 at stage 0, on cuDNN's path (ZT_CUDA_DETERMINISTIC=0): cuDNN writes
# dQ|dK|dV in bf16 (gqa_ext_bwd16d), RoPE's backward rotates them in bf16 (rope_bwd16) and the
# q|k|v GEMM and its adapters' GEMMs read them; after 4 steps every adapter and AdamW moment
# bitwise those of ZT_TEST_NO_QKV16=1 (k_sdpa_widen, the fp32 k_rope, the GEMMs rounding dy: the
# path of before; the final checkpoints' tensor checksums), losses and gradient norms the same,
# per block and step 4 launches fewer (k_sdpa_widen, k_rope for k_rope_bwd16, the 3 k_round_bf16
# of the q|k|v GEMM's and its adapters' two dy operands), each run's device peak the planner's.
# Both runs with ZT_TEST_NO_LGRAD16=1 (config.h ZT_W16_LGRAD16): with dQ|dK|dV in bf16 the q|k|v
# adapters' share of the input gradient would go first in bf16 (not bitwise the hook's path).
# o's adapters give cuDNN a bf16 dO in both runs (config.h ZT_W16_LO16; gqa_ext_bwd16do, with
# ZT_TEST_NO_QKV16 writing the fp32 dQ|dK|dV): the same dO either way
qkv16() {  # qkv16 DIR CONFIG ARGS...: runs in DIR (its c_train.bin), with and without the hook
    local dir=$1 cfg=$2; shift 2
    local h la lb L why=""
    [ -f "$dir/c_train.bin" ] || { ok 1 "qkv16: no $dir/c_train.bin (its group did not run)"; return; }
    for h in 0 1; do
        local hook=()
        [ $h = 1 ] && hook=(ZT_TEST_NO_QKV16=1)
        (cd "$dir" && env ZT_CUDA_DETERMINISTIC=0 ZT_TEST_NO_LGRAD16=1 "${hook[@]}" \
            timeout 600 "$sim" train --config "$SRC/configs/$cfg" --train c_train.bin --val c_val.bin \
            --batch-size 8 --micro-batch 8 --steps 4 --eval-every 100 --eval-batches 1 --log-every 1 \
            --sample-tokens 0 --backend cuda --precision bf16 --matmul-precision bf16 --resume never \
            --lora-r 4 --lora-targets all-linear --ckpt-dir "qkv16_ck_$h" --metrics "qkv16_$h.jsonl" \
            --memory-report "$@" > "qkv16_$h.out" 2>&1) ||
            why="$why run $h failed;"
    done
    grep -q '^attention: cuDNN fused attention' "$dir/qkv16_0.out" 2> /dev/null || why="$why not on cuDNN's path;"
    python3 - "$dir/qkv16_0.jsonl" "$dir/qkv16_1.jsonl" <<'PY' || why="$why losses or gradient norms differ;"
import json, sys
def recs(p):
    return [(r["step"], r["loss"], r.get("grad_norm")) for r in map(json.loads, open(p)) if "loss" in r]
a, b = recs(sys.argv[1]), recs(sys.argv[2])
sys.exit(0 if len(a) == 4 and a == b else 1)
PY
    local ca cb
    ca=$("$sim" ckpt inspect "$dir/qkv16_ck_0/step-4" --tensors --no-config 2> /dev/null | grep ' checksum ')
    cb=$("$sim" ckpt inspect "$dir/qkv16_ck_1/step-4" --tensors --no-config 2> /dev/null | grep ' checksum ')
    [ -n "$ca" ] && [ "$ca" = "$cb" ] || why="$why the checkpoints' tensors differ;"
    la=$(launches "$dir/qkv16_0.out")
    lb=$(launches "$dir/qkv16_1.out")
    L=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["ztrain"]["model"]["n_layer"])' "$SRC/configs/$cfg")
    [ -n "$la" ] && [ -n "$lb" ] && [ $((lb - la)) = $((16 * L)) ] || why="$why launches $la vs $lb, not $((16 * L)) fewer;"
    why="$why$(peaks_why "$dir/qkv16_")"
    [ -n "$why" ] && grep -hE '^ztrain: error|^attention:' "$dir/qkv16_"*.out | sed 's/^/# /'
    ok "$([ -z "$why" ]; echo $?)" "qkv16 llama LoRA: after 4 steps adapters and AdamW moments bitwise those of ZT_TEST_NO_QKV16=1 (losses and gradient norms the same), launches $la ($lb with the hook: $((16 * L)) fewer)${why:+: $why}"
}
qkv16 "$W/attcudnn" llama-tiny.json --ztrain.seq_len 64

# ---- LoRA's bf16 adapters (config.h ZT_W16_LORA16, lora.h ad16): the adapters' GEMMs read the
# adapter engine's bf16 storage (A as it is, a group's B^T placed in bf16) instead of rounding the
# fp32 adapters per GEMM: the Llama with adapters on every linear layer, bf16 at stage 1,
# checkpointed, accumulating 2 micro-batches a step; after 4 steps every adapter and AdamW moment
# bitwise those of ZT_TEST_NO_LORA16=1 (the final checkpoints' tensor checksums), losses and
# gradient norms the same, fewer launches (a k_round_bf16 each bf16 weight operand fewer; an
# operand not 256-byte aligned is copied instead: at this shape none is, 1187 against 1587), each
# run's device peak the planner's
lorahook() {  # lorahook TAG HOOK TARGETS FEWER DIR CONFIG ARGS...: TAG's runs in DIR (its c_train.bin)
    # with and without HOOK=1, LoRA on TARGETS; FEWER=1: launches fewer with the change, else no more
    local tag=$1 hookvar=$2 targets=$3 fewer=$4 dir=$5 cfg=$6; shift 6
    local h la lb why=""
    [ -f "$dir/c_train.bin" ] || { ok 1 "$tag: no $dir/c_train.bin (its group did not run)"; return; }
    for h in 0 1; do
        local hook=()
        [ $h = 1 ] && hook=("$hookvar=1")
        (cd "$dir" && env "${hook[@]}" \
            timeout -s KILL 600 "$sim" train --config "$SRC/configs/$cfg" --train c_train.bin --val c_val.bin \
            --batch-size 8 --micro-batch 4 --grad-accum 2 --steps 4 --eval-every 100 --eval-batches 1 --log-every 1 \
            --sample-tokens 0 --backend cuda --precision bf16 --matmul-precision bf16 --resume never \
            --stage 1 --act-ckpt blocks --lora-r 4 --lora-targets "$targets" \
            --ckpt-dir "${tag}_ck_$h" --metrics "${tag}_$h.jsonl" \
            --memory-report "$@" > "${tag}_$h.out" 2>&1) ||
            why="$why run $h failed (exit $?);"
    done
    python3 - "$dir/${tag}_0.jsonl" "$dir/${tag}_1.jsonl" <<'PY' || why="$why losses or gradient norms differ;"
import json, sys
def recs(p):
    return [(r["step"], r["loss"], r.get("grad_norm")) for r in map(json.loads, open(p)) if "loss" in r]
a, b = recs(sys.argv[1]), recs(sys.argv[2])
sys.exit(0 if len(a) == 4 and a == b else 1)
PY
    local ca cb
    ca=$("$sim" ckpt inspect "$dir/${tag}_ck_0/step-4" --tensors --no-config 2> /dev/null | grep ' checksum ')
    cb=$("$sim" ckpt inspect "$dir/${tag}_ck_1/step-4" --tensors --no-config 2> /dev/null | grep ' checksum ')
    [ -n "$ca" ] && [ "$ca" = "$cb" ] || why="$why the checkpoints' tensors differ;"
    la=$(launches "$dir/${tag}_0.out")
    lb=$(launches "$dir/${tag}_1.out")
    if [ "$fewer" = 1 ]; then
        [ -n "$la" ] && [ -n "$lb" ] && [ "$la" -lt "$lb" ] || why="$why launches $la, not fewer than $lb;"
    else
        [ -n "$la" ] && [ -n "$lb" ] && [ "$la" -le "$lb" ] || why="$why launches $la, more than $lb;"
    fi
    why="$why$(peaks_why "$dir/${tag}_")"
    [ -n "$why" ] && grep -hE '^ztrain: error|^cudasim' "$dir/${tag}_"*.out | sed 's/^/# /'
    ok "$([ -z "$why" ]; echo $?)" "$tag llama LoRA $targets: after 4 steps adapters and AdamW moments bitwise those of $hookvar=1 (losses and gradient norms the same), launches $la ($lb with the hook), each run inside its timeout${why:+: $why}"
}
lorahook lora16 ZT_TEST_NO_LORA16 all-linear 1 "$W/attcudnn" llama-tiny.json --ztrain.seq_len 64

# ---- o's adapters giving cuDNN a bf16 dO (config.h ZT_W16_LO16): the Llama (o) and GPT-2
# (c_proj) with adapters on every linear layer, bf16 at stage 1, checkpointed, 2 micro-batches a step, on cuDNN's path
# (ZT_CUDA_DETERMINISTIC=0): o's adapters' share of dO written in bf16 first, the base GEMM adding
# into it (matmul_bwd_acc16), cuDNN reading it as it is (gqa_ext_bwd16do), against
# ZT_TEST_NO_LO16=1 (the fp32 dO, k_sdpa_round): NOT bitwise (the share rounded once), so the
# logged losses within 2^-12 and the gradient norms within 2^-9 relative, one launch fewer per
# block and micro-batch (k_sdpa_round; GPT-2 two: its fp32 path's adapters round their A for
# matmul_dinp_acc, the bf16 share reads A's bf16 copy), and each run's device peak the planner's (the planner
# takes the same decision from the config: arch.h zt_do16_of, no dO buffer in cuDNN's workspace)
lo16() {  # lo16 TAG PER DIR CONFIG ARGS...: runs in DIR (its c_train.bin), with and without the
    # hook; PER: the launches fewer a block and micro-batch
    local tag=$1 per=$2 dir=$3 cfg=$4; shift 4
    local h la lb L why=""
    [ -f "$dir/c_train.bin" ] || { ok 1 "lo16: no $dir/c_train.bin (its group did not run)"; return; }
    for h in 0 1; do
        local hook=()
        [ $h = 1 ] && hook=(ZT_TEST_NO_LO16=1)
        (cd "$dir" && env ZT_CUDA_DETERMINISTIC=0 "${hook[@]}" \
            timeout -s KILL 600 "$sim" train --config "$SRC/configs/$cfg" --train c_train.bin --val c_val.bin \
            --batch-size 8 --micro-batch 4 --grad-accum 2 --steps 4 --eval-every 100 --eval-batches 1 --log-every 1 \
            --sample-tokens 0 --backend cuda --precision bf16 --matmul-precision bf16 --resume never \
            --stage 1 --act-ckpt blocks --lora-r 4 --lora-targets all-linear \
            --ckpt-dir "lo16_${tag}_ck_$h" --metrics "lo16_${tag}_$h.jsonl" --memory-report "$@" > "lo16_${tag}_$h.out" 2>&1) ||
            why="$why run $h failed (exit $?);"
    done
    local d
    d=$(within16 "$dir/lo16_${tag}_0.jsonl" "$dir/lo16_${tag}_1.jsonl") || why="$why losses or gradient norms not within 2^-12 / 2^-9 (or bitwise);"
    la=$(launches "$dir/lo16_${tag}_0.out")
    lb=$(launches "$dir/lo16_${tag}_1.out")
    L=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["ztrain"]["model"]["n_layer"])' "$SRC/configs/$cfg" 2> /dev/null)
    [ -n "$la" ] && [ -n "$lb" ] && [ -n "$L" ] && [ $((lb - la)) -eq $((per * L * 4 * 2)) ] ||
        why="$why launches $la, not $lb less $per a block and micro-batch;"
    why="$why$(peaks_why "$dir/lo16_${tag}_")"
    [ -n "$why" ] && grep -hE '^ztrain: error|^cudasim' "$dir/lo16_${tag}_"*.out | sed 's/^/# /'
    ok "$([ -z "$why" ]; echo $?)" "lo16 $tag LoRA all-linear: after 4 steps losses and gradient norms within 2^-12 / 2^-9 of ZT_TEST_NO_LO16=1, not bitwise (max ${d:-?}), launches $la ($lb with the hook: $per fewer a block and micro-batch), each run's device peak the planner's${why:+: $why}"
}
lo16 llama 1 "$W/attcudnn" llama-tiny.json --ztrain.seq_len 64
lo16 gpt2 2 "$W/attcudnn" tiny.json

# ---- GPT-2's bf16 paths with LoRA (config.h ZT_W16_GPT16): on cuDNN's path
# (ZT_CUDA_DETERMINISTIC=0), adapters on c_attn (the q|k|v adapters reading cuDNN's bf16
# dQ|dK|dV, the bf16 dO, fc's GEMM writing bf16, fc's backward through the GELU in bf16) and on
# every linear layer (fc's gradient rounded once for its GEMMs and adapters); after 4 steps the
# adapters and their AdamW moments bitwise those of ZT_TEST_NO_GPT16=1 (the fp32 paths of
# before; the final checkpoints' tensor checksums), the logged losses and gradient norms the
# same, fewer launches (the device report's), and each run's device peak the planner's
gpt16() {  # gpt16 TAG DIR TARGETS: runs in DIR (its c_train.bin), with and without the hook
    local tag=$1 dir=$2 targets=$3
    local h la lb why=""
    [ -f "$dir/c_train.bin" ] || { ok 1 "gpt16 $tag: no $dir/c_train.bin (its group did not run)"; return; }
    for h in 0 1; do
        local hook=()
        [ $h = 1 ] && hook=(ZT_TEST_NO_GPT16=1)
        # (c_proj's adapters' bf16 dO off in both runs, ZT_TEST_NO_LO16: not bitwise, the lo16 pair;
        # and fc's GEMM and GELU as two calls and the fp32 residual branches, ZT_TEST_NO_GELUE,
        # ZT_TEST_NO_GBRANCH16: the layers without adapters take them only with ZT_W16_GPT16, not
        # bitwise, the gelue and gbranch16 pairs above)
        (cd "$dir" && env ZT_CUDA_DETERMINISTIC=0 ZT_TEST_NO_LO16=1 ZT_TEST_NO_GELUE=1 ZT_TEST_NO_GBRANCH16=1 \
            "${hook[@]}" \
            timeout 600 "$sim" train --config "$SRC/configs/tiny.json" --train c_train.bin --val c_val.bin \
            --batch-size 8 --micro-batch 8 --steps 4 --eval-every 100 --eval-batches 1 --log-every 1 \
            --sample-tokens 0 --backend cuda --precision bf16 --matmul-precision bf16 --resume never \
            --lora-r 4 --lora-alpha 8 --lora-targets "$targets" \
            --ckpt-dir "gpt16_ck_${tag}_$h" --metrics "gpt16_${tag}_$h.jsonl" --memory-report \
            > "gpt16_${tag}_$h.out" 2>&1) ||
            why="$why run $h failed;"
    done
    grep -q '^attention: cuDNN fused attention' "$dir/gpt16_${tag}_0.out" 2> /dev/null || why="$why not on cuDNN's path;"
    python3 - "$dir/gpt16_${tag}_0.jsonl" "$dir/gpt16_${tag}_1.jsonl" <<'PY' || why="$why losses or gradient norms differ;"
import json, sys
def recs(p):
    return [(r["step"], r["loss"], r.get("grad_norm")) for r in map(json.loads, open(p)) if "loss" in r]
a, b = recs(sys.argv[1]), recs(sys.argv[2])
sys.exit(0 if len(a) == 4 and a == b else 1)
PY
    local ca cb
    ca=$("$sim" ckpt inspect "$dir/gpt16_ck_${tag}_0/step-4" --tensors --no-config 2> /dev/null | grep ' checksum ')
    cb=$("$sim" ckpt inspect "$dir/gpt16_ck_${tag}_1/step-4" --tensors --no-config 2> /dev/null | grep ' checksum ')
    [ -n "$ca" ] && [ "$ca" = "$cb" ] || why="$why the checkpoints' tensors differ;"
    la=$(launches "$dir/gpt16_${tag}_0.out")
    lb=$(launches "$dir/gpt16_${tag}_1.out")
    [ -n "$la" ] && [ -n "$lb" ] && [ "$la" -lt "$lb" ] || why="$why launches $la, not fewer than $lb;"
    why="$why$(peaks_why "$dir/gpt16_${tag}_")"
    [ -n "$why" ] && grep -hE '^ztrain: error|^attention:' "$dir/gpt16_${tag}_"*.out | sed 's/^/# /'
    ok "$([ -z "$why" ]; echo $?)" "gpt16 $tag: after 4 steps adapters and AdamW moments bitwise those of ZT_TEST_NO_GPT16=1 (losses and gradient norms the same), launches $la ($lb with the hook)${why:+: $why}"
}
gpt16 c_attn "$G" c_attn
gpt16 all-linear "$G" all-linear

# ---- the Llama with LoRA on q_proj,v_proj only (the common PEFT targets: gate|up, o and down
# untargeted, config.h ZT_W16_LGATE: gate|up's GEMM writes its bf16 output itself): engine.sh's
# lora16 run (bf16, stage 1, checkpointed, accumulating 2 micro-batches a step, 4 steps, NCCL
# on 1 rank) with and without ZT_TEST_NO_LGATE: every adapter and AdamW moment bitwise the
# same (the final checkpoints' tensor checksums), losses and gradient norms the same, each
# run's device peak the planner's.  Each run must end inside its timeout (killed otherwise):
# this run was seen to hang (the host polling the batch upload's event forever): an
# incremental simulator build whose gen/mesh.o predated a new kernels/backend.h entry called
# the wrong table slot for copy_done (the gen/ objects now track their headers, cudasim.am)
lorahook loraqv ZT_TEST_NO_LGATE q_proj,v_proj 0 "$W/attcudnn" llama-tiny.json --ztrain.seq_len 64

# ---- the simulator's device report against the backend and the planner
for out in "$W"/*/x_*.out; do
    [ -f "$out" ] || continue
    run=$(basename "$(dirname "$out")")/$(basename "$out" .out)
    np=$(grep -c '^cudasim-report: ' "$out")
    dline=$(grep '^device memory peak per rank (cuda device 0 ' "$out" | tail -1)
    read -r meas pred <<< "$(sed -n 's/.*: measured \([0-9]*\) bytes, predicted \([0-9]*\) bytes.*/\1 \2/p' <<< "$dline")"
    end=$(sed -n 's/.*with the end of a CLI run \([0-9]*\) bytes.*/\1/p' <<< "$dline")
    end=${end:-$pred}
    # device bytes outside the backend: the NCCL comm backend's barrier word
    # (4 bytes per NCCL group, libtrain/comm_nccl.c; the world, the shard
    # group and the sequence- or expert-parallel group: at most 3)
    slack=0
    [ "$(cat "$(dirname "$out").comm" 2> /dev/null)" = nccl ] && slack=12
    why=""
    if [ "$np" -lt 1 ]; then
        why="no cudasim-report line: the run did not use the simulated device"
    elif [ -z "$meas" ]; then
        why="no device line in the memory report"
    else
        [ "$meas" = "$pred" ] || why="$why backend's peak $meas != predicted $pred;"
        while read -r _ _ rank _ dev _ peak _ _ _ _ _ _ _ launches _ _; do
            [ "$dev" -ge 0 ] && [ "$launches" -gt 0 ] || why="$why rank $rank: device $dev, $launches launches;"
            [ "$peak" -le $((end + slack)) ] ||
                why="$why rank $rank: simulator peak $peak > predicted end of run $end (+ $slack);"
            if [ "$rank" = 0 ]; then
                p0=$peak
                [ "$peak" -ge "$meas" ] || why="$why rank 0: simulator peak $peak < backend's $meas;"
                [ "$end" != "$pred" ] || [ "$peak" -le $((pred + slack)) ] ||
                    why="$why rank 0: simulator peak $peak > predicted $pred (+ $slack);"
            fi
        done < <(grep '^cudasim-report: ' "$out")
    fi
    if [ -n "$why" ]; then
        grep -E '^cudasim-report: |^device memory peak|^ztrain: error' "$out" | sed 's/^/# /'
    fi
    ok "$([ -z "$why" ]; echo $?)" "memory $run: backend's device peak == planner's ($meas bytes), simulator's ${p0:-?} in [$meas, $end + $slack] ($np rank(s))${why:+: $why}"
    p0=""
done
# ---- the two attention paths: cuDNN ran in attcudnn (its start-up line), ztrain's kernels in
# attdet, each run's planned kernel workspace reported (each equal to the device's peak: the
# memory checks above).  (Until h-sdpa cuDNN's was larger here, 34 MiB against 33, by its fp32
# GQA full-head dK / dV buffers; they are virtual tensors of cuDNN's graph now, as
# cudnn-frontend's, and both round to the same MiB at this shape and at micro batch 32 and 128.)
kw() { sed -n 's/^device memory peak per rank (cuda .*; of it kernel workspace \([0-9]*\) bytes).*/\1/p' "$1" 2> /dev/null | tail -1; }
kc=$(kw "$W/attcudnn/x_n1cudnn.out"); kd=$(kw "$W/attdet/x_n1det.out")
grep -q '^attention: cuDNN fused attention' "$W/attcudnn/x_n1cudnn.out" 2> /dev/null &&
    grep -q '^attention: ztrain.s kernels (deterministic mode' "$W/attdet/x_n1det.out" 2> /dev/null &&
    [ -n "$kc" ] && [ -n "$kd" ]
ok $? "attention paths: cuDNN in attcudnn, ztrain's kernels in attdet; planned kernel workspace ${kc:-?} and ${kd:-?} bytes (each == the device's)"
# (and GPT-2's bf16 run above took cuDNN's path, so its weights were compared on it)
grep -q '^attention: cuDNN fused attention' "$W/gptcudnn/x_n1cudnn.out" 2> /dev/null
ok $? "attention paths: GPT-2's gptcudnn run ruled onto cuDNN's fused attention (its start-up line)"
# ---- host waits per step (the simulator's count, host_waits in the device report): GPT-2
# over NCCL on 2 ranks (no accumulation: one token upload a step, covered by the step's read)
# waits for every collective of the step on the stream only -- the stage 0 gradient
# all-reduces (1 MiB pieces), the stage 1 reduce-scatters (bf16 reductions), the stage 2
# reduce-scatters with and without overlap_comm, the stage 1-2 all-gathers after the update,
# the stage 3 gathers, hybrid sharding's replica all-reduces (shard groups of 1, bf16) -- so
# its one host synchronization a step is the read of the step's scalars: 4 steps wait 2 more
# times than 2 steps on every rank (before: stage 3 10 a step, one per unit and pass; stages
# 0-2 and hybrid one per collective)
hw() {  # hw TAG STEPS ARGS...: rank:host_waits of each rank
    local tag=$1 steps=$2; shift 2
    (cd "${HWDIR:-$W/nccl}" && ZT_CUDASIM_DEVICES=2 timeout 300 "$mpirun" --oversubscribe -np "${HWNP:-2}" --bind-to none "$sim" train \
        --config "$SRC/configs/${HWCFG:-tiny.json}" --train c_train.bin --val c_val.bin --batch-size 8 --micro-batch 4 \
        --steps "$steps" --eval-every 100 --eval-batches 1 --sample-tokens 0 --backend cuda --comm-backend nccl \
        --resume never --ckpt-dir "hw_ck_${tag}_$steps" "$@" > "hw_${tag}_$steps.out" 2>&1) &&
        sed -n 's/^cudasim-report: rank \([0-9]*\) .* host_waits \([0-9]*\).*/\1:\2/p' "${HWDIR:-$W/nccl}/hw_${tag}_$steps.out" | sort
}
hw_case() {  # hw_case TAG WHAT ARGS...: one host wait a step (TAG A=a: gradient accumulation a,
    # 1 + 2 (a - 1): each micro-step after the first waits for its inputs' and targets' uploads)
    local tag=$1 what=$2; shift 2
    local a b per r acc=1
    case $tag in A=*) acc=${tag#A=}; tag=acc$acc ;; esac
    local n=$((1 + 2 * (acc - 1)))
    a=$(hw "$tag" 2 "$@" | tr '\n' ' '); b=$(hw "$tag" 4 "$@" | tr '\n' ' ')
    per=$(python3 -c 'import sys
a = dict(x.split(":") for x in sys.argv[1].split()); b = dict(x.split(":") for x in sys.argv[2].split())
print(" ".join("%s:%g" % (r, (int(b[r]) - int(a[r])) / 2) for r in sorted(b) if r in a))' "$a" "$b" 2> /dev/null)
    [ "$per" = "0:$n 1:$n" ]; r=$?
    [ $r = 0 ] || { echo "# 2 steps: $a; 4 steps: $b"; grep -E '^ztrain: error' "$W"/nccl/hw_"$tag"_*.out | sed 's/^/# /'; }
    ok $r "host waits per step, GPT-2 $what over NCCL on 2 ranks: ${per:-none} (rank:waits; $n each: the read of the step's scalars and $((n - 1)) token upload wait(s))"
}
if [ -f "$W/nccl/c_train.bin" ]; then
    hw_case s0 "stage 0" --stage 0
    hw_case s1 "bf16 stage 1, bf16 reductions" --stage 1 --precision bf16 --comm-dtype bf16
    hw_case s2 "stage 2" --stage 2
    hw_case s2nov "stage 2, overlap_comm false" --stage 2 --overlap-comm false
    hw_case s3 "stage 3" --stage 3
    hw_case hyb "stage 2 hybrid (shard groups of 1), bf16 reductions" --stage 2 --shard-group 1 --comm-dtype bf16
    # gradient accumulation 2: the second micro-step's waits for the first's token uploads
    # (inputs, targets), queued after the step's earlier collectives, are bounded polls
    # (zt_mesh_copy_wait) and add no host wait: 2, as before (3 a step)
    hw_case A=2 "stage 3, gradient accumulation 2" --stage 3 --grad-accum 2 --micro-batch 2
else
    ok 1 "host waits per step: no $W/nccl/c_train.bin (the nccl group did not run)"
fi
# ---- pageable reads (pageable_d2h in the device report): a cudaMemcpyAsync from the device
# into host memory that is not page-locked returns only once the copy has completed (CUDA's
# documented behaviour, which the simulator follows), so an asynchronous read would wait inside
# the call, with no bound, for everything queued before it -- a hung NCCL collective included --
# instead of in the fence's bounded wait.  Over NCCL a step's reads are all asynchronous, into
# page-locked memory: the step's scalars, and a Mixture of Experts' routing counts and router
# sums (docs/gpu.md "Over NCCL"), so 4 steps make as many as 2 on every rank.  (The backend's
# synchronous to_host, cudaMemcpyAsync and a stream synchronize, counts too: set-up, the
# checkpoint and the weights export read that way, the same in both runs.)
pd() {  # pd FILE: rank:pageable_d2h of each rank, sorted
    sed -n 's/^cudasim-report: rank \([0-9]*\) .* pageable_d2h \([0-9]*\).*/\1:\2/p' "$1" 2> /dev/null | sort | tr '\n' ' '
}
pd_case() {  # pd_case NP DIR CONFIG TAG WHAT ARGS...: 2 and 4 steps over NCCL in $W/DIR
    local np=$1 dir=$2 cfg=$3 tag=pd$4 what=$5; shift 5
    local a b per r=0 n
    for n in 2 4; do
        HWNP=$np HWDIR=$W/$dir HWCFG=$cfg hw "$tag" "$n" --batch-size $((4 * np)) "$@" > /dev/null &&
            [ "$(grep -c '^step ' "$W/$dir/hw_${tag}_$n.out")" = "$n" ] || r=1
    done
    a=$(pd "$W/$dir/hw_${tag}_2.out"); b=$(pd "$W/$dir/hw_${tag}_4.out")
    per=$(python3 -c 'import sys
a = dict(x.split(":") for x in sys.argv[1].split()); b = dict(x.split(":") for x in sys.argv[2].split())
print(" ".join("%s:%g" % (k, (int(b[k]) - int(a[k])) / 2) for k in sorted(b) if k in a))' "$a" "$b" 2> /dev/null)
    [ $r = 0 ] && [ "$per" = "$(seq -s ' ' -f '%g:0' 0 $((np - 1)))" ] || r=1
    [ $r = 0 ] || { echo "# 2 steps: $a; 4 steps: $b"; grep -E '^ztrain: error' "$W/$dir"/hw_"$tag"_*.out | sed 's/^/# /'; }
    ok $r "pageable reads per step, $what over NCCL on $np rank(s): ${per:-none} (rank:reads; 0 each)"
}
if [ -f "$W/nccl/c_train.bin" ]; then
    pd_case 1 nccl tiny.json n1s0 "GPT-2 stage 0" --stage 0 --micro-batch 4
    pd_case 1 nccl tiny.json n1s3 "GPT-2 stage 3" --stage 3 --micro-batch 4
    pd_case 2 nccl tiny.json n2s0 "GPT-2 stage 0" --stage 0 --micro-batch 4
    pd_case 2 nccl tiny.json n2s3 "GPT-2 stage 3" --stage 3 --micro-batch 4
else
    ok 1 "pageable reads: no $W/nccl/c_train.bin (the nccl group did not run)"
fi
# the Mixture of Experts with expert parallelism (its routing counts read in every MoE layer's
# forward and backward, the router's sums after each forward)
if [ -f "$W/moeepnccl/c_train.bin" ]; then
    pd_case 2 moeepnccl moe-tiny.json ep2s2 "MoE (4 experts, expert parallelism 2) stage 2" --stage 2 \
        --micro-batch 4 --ep 2 --ztrain.model.n_experts 4
else
    ok 1 "pageable reads: no $W/moeepnccl/c_train.bin (the moeepnccl group did not run)"
fi
# ---- expert parallelism's bf16 exchanges over the simulated NCCL (docs/moe.md): with the bf16
# activations the routed inputs, the experts' outputs and their gradients go in bf16, bitwise the fp32
# exchanges (ZT_TEST_NO_EP16=1: metrics and exported weights) where the input gradients go back in
# fp32 (ZT_TEST_NO_EPDX16=1); every token on rank 0's experts (ZT_TEST_MOE_ROUTE_ALL=0), so rank 0
# sends only the outputs (bf16) and the input gradients (fp32): 3/4 of the fp32 exchanges' bytes;
# with the input gradients in bf16 too (the default) 1/2, the output gradients regrouped in bf16
# bitwise widened ones (ZT_TEST_NO_EPDY16=1)
if [ -f "$W/moeepnccl/c_train.bin" ]; then
    ep16() {  # ep16 TAG [ENV=VALUE...]: 3 steps, EP 2, stage 1, bf16; exported weights w_TAG
        local tag=$1; shift
        (cd "$W/moeepnccl" && env "$@" ZT_TEST_MOE_ROUTE_ALL=0 ZT_CUDASIM_DEVICES=2 timeout 600 \
            "$mpirun" --oversubscribe -np 2 --bind-to none "$sim" train --config "$SRC/configs/moe-tiny.json" \
            --train c_train.bin --val c_val.bin --batch-size 8 --micro-batch 4 --steps 3 --eval-every 100 \
            --eval-batches 1 --sample-tokens 0 --backend cuda --comm-backend nccl --resume never \
            --ckpt-dir "ep16_ck_$tag" --stage 1 --ep 2 --ztrain.model.n_experts 4 --bf16.enabled true \
            --memory-report end --metrics "ep16_m_$tag.jsonl" > "ep16_$tag.out" 2>&1 &&
            "$sim" ckpt export "ep16_ck_$tag" --output "ep16_w_$tag.safetensors" > /dev/null 2>&1)
    }
    # (and the received rows and the outputs kept in bf16, ZT_W16_EPX16 and ZT_W16_EPYP16: bitwise
    # their fp32 copies', the device peak the planner's)
    ep16 b16 ZT_TEST_NO_EPDX16=1 && ep16 f32 ZT_TEST_NO_EP16=1 &&
        ep16 y32 ZT_TEST_NO_EPYP16=1 ZT_TEST_NO_EPX16=1 ZT_TEST_NO_EPDX16=1 &&
        grep -q "^device memory peak per rank (cuda.*: measured \([0-9]*\) bytes, predicted \1 bytes" \
            "$W/moeepnccl/ep16_b16.out" && cmp -s "$W/moeepnccl/ep16_w_b16.safetensors" \
        "$W/moeepnccl/ep16_w_f32.safetensors" && cmp -s "$W/moeepnccl/ep16_w_b16.safetensors" \
        "$W/moeepnccl/ep16_w_y32.safetensors" && cmp -s <(grep -o '"loss": [^,]*, "lr": [^,]*, "grad_norm": [^,]*' \
        "$W/moeepnccl/ep16_m_b16.jsonl") <(grep -o '"loss": [^,]*, "lr": [^,]*, "grad_norm": [^,]*' \
        "$W/moeepnccl/ep16_m_y32.jsonl") && python3 - "$W/moeepnccl/ep16_m_b16.jsonl" \
        "$W/moeepnccl/ep16_m_f32.jsonl" <<'PY'
import json, sys
a, b = ([json.loads(l) for l in open(f) if '"loss"' in l] for f in sys.argv[1:3])
la, lb = [(r["loss"], r["grad_norm"]) for r in a], [(r["loss"], r["grad_norm"]) for r in b]
ba, bb = [r.get("alltoall_bytes") for r in a], [r.get("alltoall_bytes") for r in b]
print("# bf16 exchanges: losses, grad norms %s; rank 0's all-to-all bytes %s, fp32 %s" % (la, ba, bb))
sys.exit(0 if len(a) == 3 and la == lb and all(x and y and 4 * x == 3 * y for x, y in zip(ba, bb)) else 1)
PY
    r=$?
    [ $r = 0 ] || grep -E '^ztrain: error' "$W"/moeepnccl/ep16_*.out | sed 's/^/# /'
    ok $r "MoE EP 2 bf16 exchanges over NCCL: weights and metrics bitwise the fp32 exchanges' and the fp32 kept rows and outputs', device peak == predicted, rank 0's bytes 3/4 of theirs"
    ep16 dx && ep16 dy ZT_TEST_NO_EPDY16=1 &&
        grep -q "^device memory peak per rank (cuda.*: measured \([0-9]*\) bytes, predicted \1 bytes" \
            "$W/moeepnccl/ep16_dx.out" && cmp -s "$W/moeepnccl/ep16_w_dx.safetensors" \
        "$W/moeepnccl/ep16_w_dy.safetensors" && ! cmp -s "$W/moeepnccl/ep16_w_dx.safetensors" \
        "$W/moeepnccl/ep16_w_b16.safetensors" && python3 - "$W/moeepnccl/ep16_m_dx.jsonl" \
        "$W/moeepnccl/ep16_m_f32.jsonl" "$W/moeepnccl/ep16_m_dy.jsonl" <<'PY'
import json, sys
a, b, c = ([json.loads(l) for l in open(f) if '"loss"' in l] for f in sys.argv[1:4])
la, lb, lc = ([(r["loss"], r["grad_norm"]) for r in x] for x in (a, b, c))
ba, bb = [r.get("alltoall_bytes") for r in a], [r.get("alltoall_bytes") for r in b]
d = max(abs(x[0] - y[0]) / abs(y[0]) for x, y in zip(la, lb))
print("# input gradients returned in bf16: losses, grad norms %s (largest relative loss difference to "
      "the fp32 exchanges' %.2e); rank 0's all-to-all bytes %s, fp32 %s" % (la, d, ba, bb))
sys.exit(0 if len(a) == 3 and la == lc and d < 1e-3 and all(x and y and 2 * x == y for x, y in zip(ba, bb))
         else 1)
PY
    r=$?
    [ $r = 0 ] || grep -E '^ztrain: error' "$W"/moeepnccl/ep16_*.out | sed 's/^/# /'
    ok $r "MoE EP 2 with the input gradients returned in bf16 over NCCL: device peak == predicted, rank 0's bytes 1/2 of the fp32 exchanges', losses within 1e-3, the output gradients regrouped in bf16 bitwise widened ones"
    # the experts' backward GEMMs grouped (the default, ZT_W16_EPGB: cuBLAS's grouped GEMMs, the down
    # projection's input gradients in bf16) against a GEMM an expert (ZT_TEST_NO_EPGB=1): not bitwise,
    # losses within 1e-3, the same device peak, the planner's
    ep16 dg ZT_TEST_NO_EPGB=1 &&
        grep -q "^device memory peak per rank (cuda.*: measured \([0-9]*\) bytes, predicted \1 bytes" \
            "$W/moeepnccl/ep16_dg.out" &&
        cmp -s <(grep "^device memory peak per rank" "$W/moeepnccl/ep16_dx.out") \
            <(grep "^device memory peak per rank" "$W/moeepnccl/ep16_dg.out") &&
        ! cmp -s "$W/moeepnccl/ep16_w_dx.safetensors" "$W/moeepnccl/ep16_w_dg.safetensors" &&
        python3 - "$W/moeepnccl/ep16_m_dx.jsonl" "$W/moeepnccl/ep16_m_dg.jsonl" <<'PY'
import json, sys
a, b = ([json.loads(l) for l in open(f) if '"loss"' in l] for f in sys.argv[1:3])
la, lb = ([(r["loss"], r["grad_norm"]) for r in x] for x in (a, b))
d = max(abs(x[0] - y[0]) / abs(y[0]) for x, y in zip(la, lb))
print("# grouped backward GEMMs: losses, grad norms %s, a GEMM an expert %s (largest relative loss "
      "difference %.2e)" % (la, lb, d))
sys.exit(0 if len(a) == 3 and len(b) == 3 and d < 1e-3 else 1)
PY
    r=$?
    [ $r = 0 ] || grep -E '^ztrain: error' "$W"/moeepnccl/ep16_dg.out | sed 's/^/# /'
    ok $r "MoE EP 2 over NCCL, the experts' backward GEMMs grouped (the default) against a GEMM an expert: losses within 1e-3, not bitwise, the same device peak == predicted"
else
    ok 1 "MoE bf16 exchanges: no $W/moeepnccl/c_train.bin (the moeepnccl group did not run)"
    ok 1 "MoE bf16 input gradients: no $W/moeepnccl/c_train.bin (the moeepnccl group did not run)"
    ok 1 "MoE EP grouped backward: no $W/moeepnccl/c_train.bin (the moeepnccl group did not run)"
fi
# ---- the deferred initialization (run.c: the initial values written after the activations
# exist) as the device peak: the Llama with a 32000-row embedding (an fp32 buffer of 8.2 MB, the
# largest unit), bf16, no validation data: the planner puts the peak there, with the cuBLAS
# workspace but not the scratch the first kernels grow (memplan.c plan_init), and the backend's
# measured peak equals it
G=$W/gpt1; [ -d "$G" ] || G=$W/gpt
if [ -f "$G/c_train.bin" ]; then
    (cd "$G" && timeout 300 "$sim" train --config "$SRC/configs/llama-tiny.json" --vocab 32000 --train c_train.bin \
        --val= --steps 2 --sample-tokens 0 --backend cuda --precision bf16 --resume never --ckpt-final false \
        --ckpt-dir ck_init --memory-report end > init.out 2>&1)
    r=$?
    grep -q "^memory: predicted peak .* (at initializing the parameters)" "$G/init.out" &&
        grep -q "^device memory peak per rank (cuda .*: measured \([0-9]*\) bytes, predicted \1 bytes" "$G/init.out" || r=1
    [ $r = 0 ] || grep -E "^ztrain: error|peak" "$G/init.out" | sed 's/^/# /'
    ok $r "the deferred initialization as the device peak (Llama, V 32000, bf16, no validation data): planned there, measured == predicted"
else
    ok 1 "deferred initialization: no $G/c_train.bin (the gpt group did not run)"
fi
# ---- the pre-flight device limit on a small simulated device (ZT_CUDASIM_MEM_MB):
# the limit is the free memory plus what the backend already holds (its
# 32 MiB cuBLAS workspace, which the plan counts), less the reserve (512
# MiB + 2% of the device); free memory below the reserve refuses the run
G=$W/gpt1; [ -d "$G" ] || G=$W/gpt
P=$(sed -n 's/^device memory peak per rank (cuda .*: measured [0-9]* bytes, predicted \([0-9]*\) bytes.*/\1/p' "$G/x_n1s0.out" 2> /dev/null | head -1)
if [ -n "$P" ] && [ -f "$G/c_train.bin" ]; then
    # pf TAG MiB: GPT-2 stage 0 as n1s0, 2 steps, on a device of MiB MiB
    pf() {
        (cd "$G" && ZT_CUDASIM_MEM_MB=$2 timeout 300 "$sim" train --config "$SRC/configs/tiny.json" \
            --train c_train.bin --val c_val.bin --batch-size 8 --micro-batch 8 --steps 2 --eval-every 2 \
            --eval-batches 2 --sample-tokens 0 --backend cuda --resume never --ckpt-dir "ck_$1" > "$1.out" 2>&1)
    }
    # just fits: 0.98 T - 512 MiB = P + 4 MiB (without the workspace added
    # back the limit would be 32 MiB lower: refused)
    T=$(( ( (P >> 20) + 516 ) * 100 / 98 + 1 ))
    pf pf_fit "$T"; rc=$?
    grep -q "^memory: predicted peak .*, limit .*plus the backend's own 32.00 MiB (in the plan) less a" "$G/pf_fit.out"
    r=$?; [ $rc = 0 ] && [ $r = 0 ]; r=$?
    [ $r = 0 ] || { echo "# exit $rc"; grep -E '^memory:|^ztrain: error' "$G/pf_fit.out" | sed 's/^/# /'; }
    ok $r "preflight: a device of $T MiB takes the $P-byte plan (the backend's workspace counted once)"
    pf pf_small 512; rc=$?
    grep -q "^ztrain: error: predicted peak device memory .* exceeds the limit .* less a .* reserve" "$G/pf_small.out" &&
        ! grep -q '^step ' "$G/pf_small.out"
    r=$?; [ $rc = 1 ] && [ $r = 0 ]; r=$?
    [ $r = 0 ] || { echo "# exit $rc"; grep -E '^memory:|^ztrain: error' "$G/pf_small.out" | sed 's/^/# /'; }
    ok $r "preflight: a device of 512 MiB, free memory below the reserve, is refused before training (exit $rc)"
else
    ok 1 "preflight: no predicted device peak from $G/x_n1s0.out"
fi
echo "1..$N"
[ "$FAILED" -eq 0 ]
