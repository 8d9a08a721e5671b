#!/bin/bash
# costmodel_cli.sh -- bench/costmodel as a user runs it (the model itself:
# tests/test_count.c): a step of a small shape by class and by kernel, a
# what-if marked as such, cuDNN attention (uncalibrated: the step without
# it; --assume: a labelled what-if), the rows of a recorded table against the model,
# a calibration written and read back, a LoRA / QLoRA step, and one clear
# line for a bad shape, bad LoRA options or a missing calibration file.
. "$(dirname "$0")/lib.sh"
CM="$ZT_BUILDDIR/bench/costmodel"
[ -x "$CM" ] || skip_all "no $CM (make bench/costmodel)"
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
TABLE="$ZT_SRCDIR/docs/gpu-runs/2026-11-26-h100-flash/ldmatrix/bench.txt"
CAL="$ZT_SRCDIR/bench/costmodel_h100.txt"

# (--attention ztrain: the step as every build counts it; with cuDNN, both models' bf16 GEMMs read
# bf16 operands only and nothing rounds)
"$CM" --calib "$CAL" --shape gpt2:2,2,32,64,2,16 --shape llama:2,4,2,32,48,64,2,16 --kernels 0 \
    --attention ztrain > "$W/out" 2> "$W/err"
ok $? "costmodel on a tiny GPT-2 and a tiny Llama: exit 0"
check "a predicted step for each shape" [ "$(grep -c '^  predicted step ' "$W/out")" = 2 ]
check "the class table and the kernel list" grep -q '^  gemm_bf16 ' "$W/out"
check "bf16 GEMMs and their operand rounding listed" \
    bash -c "grep -q '^  cublasLt gemm bf16 ' '$W/out' && grep -q '^  k_round_bf16 ' '$W/out'"
check "no recorded step for shapes the table did not run" bash -c "! grep -q '^  measured' '$W/out'"
# MFU's FLOPs a token, the library's count: GPT-2 L=2 C=32 V=64 T=16, 6 x its 28032 parameters (wte,
# wpe, 12 C^2 + 13 C a block, the final norm) + 6 L C T
check "MFU's FLOPs a token: GPT-2's 6 x 28032 parameters + 6 L C T = 174336" \
    grep -q "^  MFU's FLOPs a token: 174336 " "$W/out"
[ -s "$W/err" ] && diag "$W/err"

# --launches: the counting backend's launch signatures, each a kernel at one per-launch FLOPs / bytes;
# all of them (-1) add up to the kernel list's time and to the step's launches
"$CM" --calib "$CAL" --shape llama:2,4,2,32,48,64,2,16 --kernels 0 --launches -1 --attention ztrain \
    > "$W/la" 2>&1
ok $? "--launches -1: exit 0"
kern=$(awk '/^  kernel /{k=1;next} /^  launch /{k=0} k && $NF ~ /s$/ && $0 !~ /\(bus\)/ {
    for (i = 2; i <= NF; i++) if ($i ~ /^[0-9]+\.[0-9][0-9][0-9]$/) { s += $i; break } } END {printf "%.2f", s}' "$W/la")
laun=$(awk '/^  launch /{k=1;next} k && /^  \(/{k=0} k && $0 !~ /\(bus\)/ {
    for (i = 2; i <= NF; i++) if ($i ~ /^[0-9]+\.[0-9][0-9][0-9]$/) { s += $i; n += $(i+2); break } }
    END {printf "%.2f %d", s, n}' "$W/la")
steplaunches=$(sed -n 's/^  predicted step .*); \([0-9]*\) launches,.*/\1/p' "$W/la")
check "--launches -1: the signatures' ms ($laun) sum to the kernel list's ($kern) and to the step's $steplaunches launches" \
    bash -c "[ '${laun% *}' = '$kern' ] && [ '${laun#* }' = '$steplaunches' ]"
check "--launches -1: more signatures than kernel names (one GEMM name, several shapes)" \
    [ "$(awk '/^  launch /{k=1;next} k && /^  cublasLt gemm bf16 /{n++} END{print n+0}' "$W/la")" -gt 1 ]
"$CM" --calib "$CAL" --shape llama:2,4,2,32,48,64,2,16 --launches 3 --attention ztrain > "$W/l3" 2>&1
check "--launches 3: three rows and the count of the rest" \
    bash -c "[ \$(awk '/^  launch /{k=1;next} k && /^  \\(/{k=0} k{n++} END{print n+0}' '$W/l3') = 3 ] && grep -q 'launch signatures in all; --launches -1 lists all' '$W/l3'"

"$CM" --calib "$CAL" --shape gpt2:2,2,32,64,2,16 --what-if bf16-operands,fused-xent > "$W/wi" 2>&1
ok $? "--what-if bf16-operands,fused-xent: exit 0"
check "a what-if says it is a model of planned changes" grep -q 'WHAT-IF bf16-operands fused-xent: a model' "$W/wi"
check "what-if bf16-operands: no k_round_bf16" bash -c "! grep -q 'k_round_bf16' '$W/wi'"

"$CM" --calib "$CAL" --rows "$TABLE" > "$W/rows" 2>&1
ok $? "--rows: exit 0"
check "--rows: each of the table's 49 rows with the model's time" \
    [ "$(grep -cE '^  .* [0-9]+\.[0-9]{3} +[0-9]+\.[0-9]{3} +[0-9]+\.[0-9]{3}  ' "$W/rows")" = 49 ]

"$CM" --calibrate "$TABLE" > "$W/cal.txt" 2> "$W/err"
ok $? "--calibrate: exit 0"
check "--calibrate: a line for each class but the bus" [ "$(grep -c '^class ' "$W/cal.txt")" = 18 ]
check "--calibrate: no cuDNN row in the table: cudnn_fwd and cudnn_bwd uncalibrated" \
    [ "$(grep -c '^class cudnn_[fb][wd][dw] *uncalibrated' "$W/cal.txt")" = 2 ]
check "--calibrate: the table's engine steps kept for comparison" \
    grep -q '^measured llama 30,9,3,576,1536,49152,8,2048 175.2$' "$W/cal.txt"
"$CM" --calib "$W/cal.txt" --shape gpt2:2,2,32,64,2,16 > /dev/null 2>&1
ok $? "the written calibration reads back"

"$CM" --calib "$CAL" --shape gpt2:2,2,32,64,2,16 --attention cudnn --kernels 0 > "$W/cu" 2>&1
ok $? "--attention cudnn: exit 0"
check "--attention cudnn: the step without attention, not a predicted step" \
    bash -c "grep -q '^  predicted step without attention ' '$W/cu' && ! grep -q '^  predicted step [0-9]' '$W/cu'"
check "--attention cudnn: the uncalibrated classes named, with their launches" \
    grep -q '^  UNCALIBRATED: cudnn_fwd x2, cudnn_bwd x2 ' "$W/cu"
check "--attention cudnn: the graph executions listed as uncalibrated" \
    grep -qE '^  cudnnBackendExecute \(SDPA forward\) +cudnn_fwd +- +- +2 .* uncalibrated$' "$W/cu"
"$CM" --calib "$CAL" --shape gpt2:2,2,32,64,2,16 --attention cudnn --assume cudnn=0.35 > "$W/as" 2>&1
ok $? "--assume cudnn=0.35: exit 0"
check "--assume: a WHAT-IF step, the efficiency stated, never a predicted step" \
    bash -c "grep -q '^  WHAT-IF cuDNN attention at an assumed efficiency (--assume): cudnn_fwd 0.35, cudnn_bwd 0.35' '$W/as' &&
             grep -q '^  WHAT-IF step (cuDNN attention at the assumed efficiency) ' '$W/as' && ! grep -q '^  predicted step' '$W/as'"
"$CM" --calib "$CAL" --shape gpt2:2,2,32,64,2,16 --attention ztrain > "$W/zt" 2>&1
check "--attention ztrain: a predicted step on ztrain's kernels" \
    bash -c "grep -q '^  predicted step [0-9]' '$W/zt' && grep -q '^  attention: ztrain' '$W/zt'"
"$CM" --attention flash > /dev/null 2> "$W/bad"
rc=$?
check "a bad --attention: exit 2, one line naming it" \
    bash -c "[ $rc = 2 ] && [ \$(wc -l < '$W/bad') = 1 ] && grep -q \"'flash' is not cudnn or ztrain\" '$W/bad'"

"$CM" --shape bogus > /dev/null 2> "$W/bad"
rc=$?
check "a bad --shape: exit 2 and the shape named" bash -c "[ $rc = 2 ] && grep -q \"bad --shape 'bogus'\" '$W/bad'"
# Qwen3's q/k norms (,qk_norm): the fused k_qknorm_rope_fwd16, one a block
# forward, in place of k_headnorm_fwd (two) and k_rope_fwd16; a flag
# after it, or an unknown one, refused
"$CM" --calib "$CAL" --shape llama:2,4,2,32,48,64,2,16,untied,qk_norm --kernels 40 > "$W/qk" 2> "$W/err"
ok $? "costmodel on a tiny Llama with q/k norms: exit 0"
check ",qk_norm: k_qknorm_rope_fwd16 launched once a block, no k_headnorm_fwd, no k_rope_fwd16" \
    bash -c "grep -Eq '^  k_qknorm_rope_fwd16 +rownorm +[0-9.]+ +[0-9.]+% +2 ' '$W/qk' &&
             ! grep -Eq '^  (k_headnorm_fwd|k_rope_fwd16) ' '$W/qk' && grep -q 'untied' '$W/qk'"
for bad in llama:2,4,2,32,48,64,2,16,qk_norm,untied llama:2,4,2,32,48,64,2,16,qk \
    llama:2,4,2,32,48,64,2,16,moe=4:2:24,untied llama:2,4,2,32,48,64,2,16,moe=4:5:24 \
    llama:2,4,2,32,48,64,2,16,moe=4:2 llama:2,4,2,32,48,64,2,16,moe=4:2:24:8:1 \
    llama:2,4,2,32,48,64,2,16,moe=4:2:24x llama:2,4,2,32,48,64,2,16,hd=0 \
    llama:2,4,2,32,48,64,2,16,untied,untied llama:2,4,2,32,48,64,2,16,; do
    "$CM" --shape $bad > /dev/null 2> "$W/bad"
    rc=$?
    check "a bad --shape $bad: exit 2 and the shape named" bash -c "[ $rc = 2 ] && grep -q \"bad --shape '$bad'\" '$W/bad'"
done
# A Mixture of Experts (,moe=E:K:Im[:S], after ,hd=D): the routing, permutation and row kernels once a
# block forward (the permutation's 3: k_moe_count, k_moe_offsets, k_moe_fill), the routing counts read
# back twice a block (forward, backward), MFU over the active parameters (k_rows_dot16h: the
# routing weights' gradient over the bf16 dh of the grouped input gradients, config.h ZT_W16_MOEGB)
"$CM" --calib "$CAL" --shape llama:2,4,2,32,48,64,2,16,untied,qk_norm,hd=16,moe=4:2:24:16 --kernels -1 \
    --attention ztrain > "$W/moe" 2> "$W/err"
ok $? "costmodel on a tiny Llama MoE (shared expert, head size 16): exit 0"
check "moe: the shape line and the active parameters' MFU" \
    bash -c "grep -q 'llama MoE L=2 NH=4 NKV=2 C=32 qk_norm E=4 K=2 Im=24 S=16' '$W/moe' &&
             grep -q 'MFU counts the ACTIVE parameters' '$W/moe' && grep -q '^  predicted step ' '$W/moe'"
# the MFU of a MoE counts the active parameters only: Qwen3-like, 2 blocks of 16 experts of 768, top 4
# (192915968 parameters, 79669760 active: 6 x those + 6 L n_head head_dim T = 503184384 FLOPs a token),
# and the printed MFU is those FLOPs x tokens/s over the peak
"$CM" --calib "$CAL" --shape llama:2,32,4,2048,6144,1000,1,512,untied,qk_norm,hd=128,moe=16:4:768 \
    --kernels 0 --attention ztrain > "$W/moe2" 2> "$W/err"
ok $? "costmodel on a 2-block MoE of 16 experts: exit 0"
check "moe: MFU's FLOPs a token 503184384 (6 x the 79669760 active parameters + the attention's)" \
    grep -q "^  MFU's FLOPs a token: 503184384 " "$W/moe2"
check "moe: the step's MFU = 503184384 FLOPs a token x tokens/s over the bf16 peak" \
    python3 -c "
import re, sys
m = re.search(r'predicted step [0-9.]+ ms \(([0-9]+) tokens/s, MFU ([0-9.]+)% of ([0-9.]+) TFLOP/s\)', open('$W/moe2').read())
tok, mfu, peak = float(m[1]), float(m[2]), float(m[3])
sys.exit(0 if abs(mfu - 100 * 503184384 * tok / (peak * 1e12)) <= 0.05 + 1e-9 and mfu > 1 else 1)"
check "moe: k_moe_route_fwd, k_moe_count, k_moe_offsets, k_moe_fill 2 launches each (one a block)" \
    bash -c "for k in k_moe_route_fwd k_moe_route_bwd k_moe_count k_moe_offsets k_moe_fill k_rows_dot k_rows_dot16h; do
                 grep -Eq \"^  \$k +scatter +[0-9.]+ +[0-9.]+% +[24] \" '$W/moe' || exit 1; done"
check "moe: k_rows_gather (stream) and k_sigmoid_fwd listed" \
    bash -c "grep -Eq '^  k_rows_gather +stream ' '$W/moe' && grep -Eq '^  k_sigmoid_fwd +stream ' '$W/moe'"
check "moe: 2 routing-count reads a block, the load-balancing sums' read and the step's: 6 host syncs" \
    grep -q ' 6 host syncs' "$W/moe"
[ -s "$W/err" ] && diag "$W/err"
"$CM" --calib "$CAL" --shape llama:32,32,8,4096,14336,32000,1,4096,untied,moe=8:2:14336 --kernels 0 \
    --attention ztrain > "$W/mx" 2>&1 && "$CM" --calib "$CAL" --shape mixtral-8x7b --kernels 0 --attention ztrain \
    > "$W/mx2" 2>&1
ok $? "mixtral-8x7b and its llama: spelling: exit 0"
check "mixtral-8x7b: the built-in is its llama: spelling (the same step), 12879.9M of 46702.8M active" \
    bash -c "[ \"\$(grep 'predicted step' '$W/mx')\" = \"\$(grep 'predicted step' '$W/mx2')\" ] &&
             grep -q 'ACTIVE parameters, 12879.9M of 46702.8M' '$W/mx2'"

# LoRA (--lora R[:TARGETS], --lora-base): the frozen base's step.  Rank 4
# on all-linear of the tiny Llama trains 4 (in + out) a projection: q and o
# 4 (32 + 32), k and v 4 (32 + 16), gate and up 4 (32 + 48), down 4 (48 +
# 32): 1856 a block, 3712 in all
"$CM" --calib "$CAL" --shape llama:2,4,2,32,48,64,2,16 --lora 4:all-linear --kernels 0 --attention ztrain \
    > "$W/lo" 2> "$W/err"
ok $? "--lora 4:all-linear on a tiny Llama: exit 0"
check "--lora: the adapters' 3712 parameters trained, the base frozen in bf16, MFU's count of FLOPs said" \
    grep -q '^  LoRA r=4 on all-linear, the base frozen in bf16: 3712 trained parameters; MFU counts 6 FLOPs a trained parameter and 4 a frozen one' "$W/lo"
check "--lora: a predicted step, no recorded run compared" \
    bash -c "grep -q '^  predicted step [0-9]' '$W/lo' && ! grep -q '^  measured' '$W/lo'"
"$CM" --calib "$CAL" --shape llama:2,4,2,32,48,64,2,16 --lora 4:all-linear --lora-base nf4 --kernels 0 > "$W/nf" 2>&1
ok $? "--lora-base nf4: exit 0"
check "--lora-base nf4: QLoRA's base, dequantized per unit (k_nf4_dequant listed)" \
    bash -c "grep -q 'the base frozen in nf4: 3712 trained' '$W/nf' && grep -Eq '^  k_nf4_dequant +stream ' '$W/nf'"
for bad in "--lora x" "--lora 0" "--lora-base nf4" "--lora 4 --lora-base int8"; do
    "$CM" --shape llama:2,4,2,32,48,64,2,16 $bad > /dev/null 2> "$W/bad"
    rc=$?
    check "costmodel $bad: exit 2, one line" bash -c "[ $rc = 2 ] && [ \$(wc -l < '$W/bad') = 1 ]"
done

# --offload (ZeRO-Offload, parameter offload): the step's host<->device copies counted by direction,
# and of them what offloading adds, the planner's figure: with offload the counted bytes are exactly
# those of the same step without it (--offload none: the token batches, the step's scalars) plus the
# planned ones, each way; the tiny Llama's 17568 parameters (embedding 2048, two blocks of 7744, the
# final norm 32) are what the host AdamW updates
TL=llama:2,4,2,32,48,64,2,16
declare -A CNT
xfer() {   # FILE: "UP DOWN" counted; with offload also "PUP PDOWN" planned
    sed -n 's/^  offload none: host<->device a step: \([0-9]*\) bytes up .*, \([0-9]*\) bytes down .*/\1 \2/p;
            s/^  host<->device a step: \([0-9]*\) bytes up .*, \([0-9]*\) bytes down .* counted; of them offloading \([0-9]*\) up, \([0-9]*\) down .*/\1 \2 \3 \4/p' "$1"
}
for c in "1 optimizer" "2 optimizer" "3 optimizer" "3 params" "3 params --lora 4:all-linear --lora-base nf4"; do
    set -- $c
    st=$1; off=$2; shift 2
    "$CM" --calib "$CAL" --shape $TL --stage $st --offload none "$@" --attention ztrain > "$W/o0" 2>&1
    "$CM" --calib "$CAL" --shape $TL --stage $st --offload $off "$@" --attention ztrain > "$W/o1" 2>&1
    ok $? "--stage $st --offload $off${*:+ $*}: exit 0"
    read -r u0 d0 < <(xfer "$W/o0")
    read -r u1 d1 pu pd < <(xfer "$W/o1")
    check "--stage $st --offload $off${*:+ $*}: counted $u1 up, $d1 down = without offload ($u0, $d0) + the planned offloading ($pu, $pd), both > 0" \
        bash -c "[ -n '$pd' ] && [ '$pu' -gt 0 ] && [ '$pd' -gt 0 ] && [ \$(( $u1 - $u0 )) = '$pu' ] && [ \$(( $d1 - $d0 )) = '$pd' ]"
    [ $# = 0 ] && CNT[$st$off]="$(( u1 - u0 )) $(( d1 - d0 ))"
done
# ztrain estimate of the same run (the tiny Llama, bf16, one GPU): its offload traffic, in --json and
# in its text line, is the counted difference above
ZTRAIN="$ZT_BUILDDIR/ztrain"
for c in "1 optimizer" "3 params"; do
    set -- $c
    EST=(estimate --world-size 1 --device gpu --arch llama --n-layer 2 --n-head 4 --n-kv-head 2 --n-embd 32
         --intermediate-size 48 --vocab 64 --context 16 --seq-len 16 --micro-batch 2 --bf16.enabled true
         --stage $1 --offload $2)
    got=$("$ZTRAIN" "${EST[@]}" --json 2> "$W/err" | python3 -c 'import json, sys
r = json.load(sys.stdin)["run"]
print(r["offload_h2d_bytes_per_step"], r["offload_d2h_bytes_per_step"])')
    check "ztrain estimate --stage $1 --offload $2 --json: offload bytes a step ($got) = costmodel's counted difference (${CNT[$1$2]})" \
        bash -c "[ -n '$got' ] && [ '$got' = '${CNT[$1$2]}' ]"
    "$ZTRAIN" "${EST[@]}" > "$W/est" 2>&1
    check "ztrain estimate --stage $1 --offload $2: one 'offload traffic:' line, up and down a step per rank" \
        bash -c "[ \$(grep -c '^offload traffic: .* host->device, .* device->host a step per rank' '$W/est') = 1 ]"
done
check "--offload: the bus rate said to be assumed, the host AdamW left out without --assume host_adam" \
    bash -c "grep -q 'at the ASSUMED bus rate of .* (20 GB/s + 10 us a transfer; not measured)' '$W/o1' &&
             grep -q '^  host AdamW: .* LEFT OUT of the step above' '$W/o1'"
"$CM" --calib "$CAL" --shape $TL --stage 3 --offload params --assume host_adam=50 --attention ztrain > "$W/ha" 2>&1
ok $? "--assume host_adam=50: exit 0"
# (bf16: the 12 bytes an element of master weights and moments read and written, the fp32 gradient read,
# the bf16 parameter written: 30 x 17568 = 527040 bytes; fp32 with the parameters offloaded: the 8 of the
# moments and the fp32 shard's 4, read and written, the gradient read: 28 x 17568 = 491904)
check "--assume host_adam: the host AdamW's 527040 bytes (17568 elements) at an ASSUMED 50 GB/s, a WHAT-IF step with it" \
    bash -c "grep -q '^  host AdamW: [0-9.]* GB a step (527040 bytes, 17568 elements: the host optimizer state, 210816 bytes of master weights and moments, .* at an ASSUMED 50 GB/s (--assume host_adam; not measured)' '$W/ha' &&
             grep -q '^  WHAT-IF step with the host AdamW: ' '$W/ha'"
"$CM" --calib "$CAL" --shape $TL --stage 3 --offload params --fp32 --attention ztrain > "$W/ha32" 2>&1
check "--fp32 --offload params: the host AdamW's 491904 bytes, left out without --assume host_adam" \
    grep -q '^  host AdamW: [0-9.]* GB a step (491904 bytes, 17568 elements) LEFT OUT' "$W/ha32"
for bad in "--stage 0 --offload optimizer" "--stage 2 --offload params" "--stage 3 --offload gpu" \
           "--stage 3 --assume host_adam=50" "--stage 3 --offload params --assume host_adam=0"; do
    "$CM" --calib "$CAL" --shape $TL $bad > /dev/null 2> "$W/bad"
    rc=$?
    check "costmodel $bad: exit 2, one line" bash -c "[ $rc = 2 ] && [ \$(wc -l < '$W/bad') = 1 ]"
done
"$CM" --calib "$CAL" --shape $TL --stage 2 --offload params > "$W/out2" 2> "$W/bad"
check "--offload params at stage 2: refused with the rule named, no step (the stage not changed)" \
    bash -c "grep -q '^costmodel: --offload params needs --stage 3' '$W/bad' && ! [ -s '$W/out2' ]"

"$CM" --calib "$W/none.txt" > /dev/null 2> "$W/bad"
rc=$?
check "a missing calibration file: exit 1, one line naming it" \
    bash -c "[ $rc = 1 ] && [ \$(wc -l < '$W/bad') = 1 ] && grep -q 'cannot open calibration file $W/none.txt' '$W/bad'"
done_testing
