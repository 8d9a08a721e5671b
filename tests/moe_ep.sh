#!/bin/bash
# moe_ep.sh -- expert parallelism (`--ep N`, docs/moe.md) with `ztrain train` on
# configs/moe-tiny.json at 4 experts (2 a token, a shared expert, the
# load-balancing loss) on the bundled byte corpus, against 1 rank with the
# same global batch of 4 in the same forwards (the load-balancing loss is a
# per-forward quantity): per-step losses and final parameters within 1e-6
# (1e-5 where noted: each local expert's weight gradient is one GEMM over
# its rows from every rank, a sum grouped unlike the reference's micro
# steps or ranks, whose last-bit differences AdamW's normalised steps carry
# into the parameters at lr 1e-3):
#  - EP 2 (2 ranks, stage 0), EP 4 (4 ranks, stage 1), EP 2 x data parallel 2
#    at stage 3 (the planner's peak equal to the accounted one), and hybrid
#    (stage 3, shard groups of 2);
#  - stage 2 with accumulation 2 and activation checkpointing; bf16 at stage 3,
#    also with the optimizer state and parameters offloaded (against 1 rank in
#    bf16; 1e-5); with bf16 matmuls (the bf16 activations, the experts' bf16
#    gate|up, SwiGLU output and outputs) at stage 3 and checkpointed at stage 1
#    against 1 rank keeping its outputs (ZT_TEST_MOE_KEEP_YP=1; the input
#    gradients returned in fp32, ZT_TEST_NO_EPDX16=1), and 1 rank without
#    them against with them (1e-2, not bitwise); the received output
#    gradients regrouped in bf16 bitwise widened (ZT_TEST_NO_EPDY16=1), the
#    input gradients returned in bf16 (the default) within 1e-2, not bitwise; the
#    experts' backward GEMMs grouped (the default) within 1e-2 of a GEMM an
#    expert (ZT_TEST_NO_EPGB=1), not bitwise, the same peak;
#  - a forced imbalance (ZT_TEST_MOE_ROUTE_ALL=0: every token on experts 0 and
#    1, both on rank 0, whose buffer then fills to its worst case) == 1 rank
#    with the same routing, and rank 0's all-to-all bytes per step equal the
#    formula (every row of rank 1 back to it, forward and backward); with the
#    bf16 activations the rows exchanged in bf16 (all but the input
#    gradients, ZT_TEST_NO_EPDX16=1) bitwise the fp32 exchanges, the bytes
#    the formula again; the input gradients in bf16 too (the default): every
#    exchange's bytes halved, within 1e-2, not bitwise;
#  - a checkpoint saved at EP 2 restores at EP 1 (2 ranks: the uninterrupted
#    run) and at EP 4 (4 ranks, stage 3: == the same checkpoint
#    restored on 1 rank with forwards of 1 sample);
#  - with sequence parallelism 2 (4 ranks): EP 2 and EP 4 (across its groups)
#    equal to sequence parallelism alone (1e-5);
#  - cpu-strict (host-staged all-to-alls) bitwise == cpu at EP 2, stage 3; at
#    EP 2 on 2 ranks (one-rank expert shard groups) the planner's peak ==
#    the accounted one (cpu) and the device peak == the measured one
#    (cpu-strict; stage 3, and stage 2 with activation checkpointing);
#  - the dispatch alone (tests/test_moe_ep.c, 2 ranks): equal to every expert
#    on one rank, the expert gradients bitwise one rank's over both ranks'
#    tokens; one GEMM a local expert; the routing's transfers (the counts
#    only); a routing beyond a rank's buffer (micro batches of different
#    sizes) refused on both ranks, canaries after every buffer;
#  - per-rank storage (tests/test_moe_store.c, 2 and 4 ranks): each rank's
#    accounted parameter, gradient and optimizer bytes at EP 1, 2, 4, stages
#    0-3, fp32 and bf16 == the formula with expert windows of n / N == planned;
#    `ztrain estimate --ep 2`'s storage row and JSON; a checkpoint saved at EP 1
#    restores at EP 2, and across stages 0 and 3, the restored run storing its
#    experts' window (the memory report's params row); the Hugging Face export
#    of an EP 2 run (each rank storing half the experts) == EP 1's; the
#    pre-flight refusal of a run that fits at EP 2 suggests --ep 2;
#  - refusals: the test hook out of range, EP not dividing the ranks, the experts, the shard group; a
#    dense model; sampling skipped.
. "$(dirname "$0")/lib.sh"
need_mpi
need_python3
in_tmpdir
byte_corpus 30000
STEPS=4
MOE=(--config "$ZT_SRCDIR/configs/moe-tiny.json" --ztrain.model.n_experts 4)

# run TAG NRANKS ARGS...: STEPS steps at a global batch of 4
run() {
    local tag=$1 n=$2; shift 2
    mpirun_np "$n" "$ZTRAIN" train "${MOE[@]}" --train c_train.bin --val c_val.bin --threads 1 \
        --steps "$STEPS" --eval-every 0 --sample-tokens 0 --batch-size 4 \
        --scheduler.params.total_num_steps 4 --metrics "m_$tag.jsonl" --ckpt-dir "ck_$tag" \
        --resume never "$@" > "o_$tag.txt" 2>&1 || { diag "o_$tag.txt" | tail -5; return 1; }
    "$ZTRAIN" ckpt export "ck_$tag" --output "w_$tag.safetensors" > /dev/null 2>&1
}

# the dispatch alone (tests/test_moe_ep.c): EP 2 == every expert on one rank; a
# routing beyond a rank's buffer refused on both ranks, nothing written past it
tap_mpi 2 "$ZT_BUILDDIR/tests/test_moe_ep" "dispatch: "
# per-rank storage: accounted bytes == the formula with expert windows == planned
tap_mpi 2 "$ZT_BUILDDIR/tests/test_moe_store" "storage: "
tap_mpi 4 "$ZT_BUILDDIR/tests/test_moe_store" "storage: "

# the parameters a rank stores at EP N (configs/moe-tiny.json at 4 experts: 2
# sparse layers of 4 experts, gate|up [2I, C] and down [C, I] each), and
# KIB P: the memory report's "%.2f KiB" of P parameters in fp32
stored() {  # stored N -> PSI_E PSI_R (expert parameters; a rank's parameters)
    python3 - "$ZT_SRCDIR/configs/moe-tiny.json" "$1" "$2" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))["ztrain"]["model"]
N, psi = int(sys.argv[2]), int(sys.argv[3])
E, C, I, L = 4, m["n_embd"], m["moe_intermediate_size"], m["n_layer"]
pe = L * E * (2 * I * C + C * I)
print(pe, psi - pe + pe // N)
PY
}
kib() { python3 -c "import sys; print('%.2f KiB' % (4 * int(sys.argv[1]) / 1024.0))" "$1"; }

# references: 1 rank, the global batch in forwards of 2 and of 1 sample
run r2 1 --micro-batch 2 --grad-accum 2
ok $? "reference: 1 rank, 2 forwards of 2 samples"
run r4 1 --micro-batch 1 --grad-accum 4
ok $? "reference: 1 rank, 4 forwards of 1 sample"

run e2 2 --ep 2 --micro-batch 2 && compare r2 e2 &&
    grep -q "^communication (rank 0): all-to-all" o_e2.txt
ok $? "EP 2 (2 ranks, stage 0) == 1 rank"
run e4 4 --ep 4 --stage 1 --micro-batch 1 && compare r4 e4
ok $? "EP 4 (4 ranks, stage 1) == 1 rank"
run e22 4 --ep 2 --stage 3 --micro-batch 1 --memory-report end && compare r4 e22
ok $? "EP 2 x data parallel 2 (4 ranks, stage 3) == 1 rank"
# the planner counts the received-row buffers (zt_moe_recv_rows): exact
grep -q "memory peak per rank: accounted \([0-9]*\) bytes, predicted \1 bytes (+0.00%)" o_e22.txt &&
    "$ZTRAIN" estimate --world-size 4 "${MOE[@]}" --ep 2 --stage 3 --micro-batch 1 --batch-size 4 \
        --train c_train.bin --val c_val.bin > e_e22.txt 2>&1 &&
    grep -q "^    with sample .*(no text sample: a sequence- or expert-parallel run skips it)$" e_e22.txt &&
    "$ZTRAIN" estimate --world-size 4 "${MOE[@]}" --ep 2 --stage 3 --micro-batch 1 --batch-size 4 \
        --train c_train.bin --val c_val.bin --json > e_e22.json 2>&1 && python3 - e_e22.json <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["run"]
P, N, K, E = 2, 1 * 32, 2, 4   # micro batch 1 x seq_len 32 tokens per rank, top-2 of 4
want = (P, P * N * min(K, E // P), N * K)
got = (r["expert_parallel_size"], r["ep_recv_rows_worst"], r["ep_recv_rows_balanced"])
print("# estimate: expert parallel, received rows worst / balanced %s, formula %s" % (got, want))
sys.exit(0 if got == want else 1)
PY
ok $? "EP 2 x dp 2: predicted peak == accounted peak; ztrain estimate --ep 2: received rows (worst, balanced) == formula, no closing sample"
# ztrain estimate --ep 2 (stage 0): the storage row, and JSON expert_params, rank_params and the
# model states (4 / 4 / 8 bytes a stored parameter) == the formula
"$ZTRAIN" estimate --world-size 2 "${MOE[@]}" --ep 2 --micro-batch 2 --batch-size 4 > e_st.txt 2>&1 &&
    "$ZTRAIN" estimate --world-size 2 "${MOE[@]}" --ep 2 --micro-batch 2 --batch-size 4 --json \
        > e_st.json 2>&1 && PSI=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['model']['num_params'])" e_st.json) &&
    read -r PE PR <<< "$(stored 2 "$PSI")" &&
    grep -qx "expert parallel storage: $PE of the $PSI parameters are experts'; a rank stores its 2 experts' $((PE / 2)) and the other $((PSI - PE)): $PR parameters, its experts replicated on the 1 rank with the same experts" e_st.txt &&
    python3 - e_st.json "$PE" "$PR" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
pe, pr = int(sys.argv[2]), int(sys.argv[3])
s = r["model_states"]
got = (r["run"]["expert_params"], r["run"]["rank_params"], s["params_bytes"], s["grads_bytes"], s["optimizer_bytes"])
want = (pe, pr, 4 * pr, 4 * pr, 8 * pr)
print("# estimate --ep 2: expert / rank parameters, params / grads / optimizer bytes %s, formula %s" % (got, want))
sys.exit(0 if got == want else 1)
PY
ok $? "ztrain estimate --ep 2 (stage 0): the storage row and JSON (expert and rank parameters, model states) == the formula"
run eh 4 --ep 2 --stage 3 --shard-group 2 --micro-batch 1 && compare r4 eh
ok $? "EP 2, stage 3 with shard groups of 2 (hybrid, 4 ranks) == 1 rank"
run ea 2 --ep 2 --stage 2 --micro-batch 1 --grad-accum 2 --act-ckpt blocks && compare r4 ea
ok $? "EP 2, stage 2, accumulation 2, activation checkpointing == 1 rank"
run br 1 --micro-batch 2 --grad-accum 2 --bf16.enabled true &&
    run eb 2 --ep 2 --stage 3 --micro-batch 2 --bf16.enabled true && compare br eb 1e-5
ok $? "bf16: EP 2 (2 ranks, stage 3) == 1 rank in bf16"
run eo 2 --ep 2 --stage 3 --micro-batch 2 --bf16.enabled true --offload params && compare br eo 1e-5
ok $? "bf16 with the optimizer state and parameters offloaded: EP 2 (2 ranks, stage 3) == 1 rank in bf16"
# bf16 with bf16 matmuls: the bf16 activations (the experts' gate|up and SwiGLU output in bf16, the
# received rows' GEMMs, the experts' outputs rounded to bf16 in both layouts; docs/moe.md),
# checkpointed too, against 1 rank keeping its expert outputs as expert parallelism does
# (ZT_TEST_MOE_KEEP_YP=1: the same roundings; measured: losses the same, parameters within 1.3e-07)
# (the experts' input gradients sent back in fp32, ZT_TEST_NO_EPDX16=1: the roundings of 1 rank)
ZT_TEST_MOE_KEEP_YP=1 run bm 1 --micro-batch 2 --grad-accum 2 --bf16.enabled true --matmul-precision bf16 &&
    ZT_TEST_NO_EPDX16=1 run ebmd 2 --ep 2 --stage 3 --micro-batch 2 --bf16.enabled true --matmul-precision bf16 &&
    compare bm ebmd 1e-5 &&
    ZT_TEST_NO_EPDX16=1 run ebmc 2 --ep 2 --stage 1 --micro-batch 2 --bf16.enabled true --matmul-precision bf16 \
        --act-ckpt blocks && compare bm ebmc 1e-5
ok $? "bf16 activations (bf16 matmuls), the input gradients returned in fp32: EP 2 (2 ranks, stage 3; stage 1 checkpointed) == 1 rank keeping its outputs"
# the default: the output gradients the backward receives regrouped in bf16 as they came
# (ZT_W16_EPDY16; ZT_TEST_NO_EPDY16=1 widens, regroups in fp32 and rounds again: bitwise the same
# run), and the experts' input gradients written, regrouped and sent back in bf16, summed per token
# in fp32 (ZT_W16_EPDX16): each routed row's input gradient rounded once, as without expert
# parallelism's grouped path, so not bitwise ZT_TEST_NO_EPDX16=1's (measured: losses within
# 1.9e-05 of 1 rank's, parameters within 3.2e-03 after 4 AdamW steps, as 1 rank's own bf16 paths)
run ebm 2 --ep 2 --stage 3 --micro-batch 2 --bf16.enabled true --matmul-precision bf16 --memory-report end &&
    ZT_TEST_NO_EPDY16=1 run ebmdy 2 --ep 2 --stage 3 --micro-batch 2 --bf16.enabled true --matmul-precision bf16 &&
    compare ebm ebmdy 0 && compare bm ebm 1e-2 && ! compare ebmd ebm 0 > /dev/null 2>&1
ok $? "bf16 activations, EP 2: the received output gradients regrouped in bf16 == widened (bitwise); the input gradients returned in bf16 within 1e-2 of 1 rank's, not bitwise the fp32 return"
# the experts' outputs received in bf16 and kept so (ZT_W16_EPYP16), and the rows the experts receive
# kept in bf16, their outputs sent back from the GEMMs' bf16, the rows sent staged in free scratch
# (ZT_W16_EPX16), against ZT_TEST_NO_EPX16=1 (the received rows and the outputs at the experts widened
# into fp32, the rows sent in the blocks' shared fp32 xs) and both off (the kept outputs too, as
# before): bitwise the same run; a MoE block's activations N K C x 2 bytes less for the kept outputs
# and R C x (2 + 4) for the received rows and the fp32 outputs, and R C x 4 once for xs (2 blocks, N
# = 2 samples of 32 tokens, 2 experts a token, C 64, R = 2 N min(K, E/2) = 256 worst-case rows: 32768
# and 2 x 98304 + 65536 bytes less at the peak of a stage-3 rank), each peak the planner's;
# cpu-strict's device peak the measured one
# (the experts' backward GEMMs a GEMM an expert, ZT_TEST_NO_EPGB=1, in all three: the grouped weight
# gradients need the rows in bf16)
ZT_TEST_NO_EPGB=1 run ebmg 2 --ep 2 --stage 3 --micro-batch 2 --bf16.enabled true --matmul-precision bf16 \
        --memory-report end &&
    ZT_TEST_NO_EPGB=1 ZT_TEST_NO_EPX16=1 run ebmx 2 --ep 2 --stage 3 --micro-batch 2 --bf16.enabled true \
        --matmul-precision bf16 --memory-report end &&
    ZT_TEST_NO_EPGB=1 ZT_TEST_NO_EPX16=1 ZT_TEST_NO_EPYP16=1 run ebmy 2 --ep 2 --stage 3 --micro-batch 2 \
        --bf16.enabled true --matmul-precision bf16 --memory-report end &&
    run ebms 2 --ep 2 --stage 3 --micro-batch 2 --bf16.enabled true --matmul-precision bf16 --memory-report end \
        --backend cpu-strict &&
    compare ebmg ebmx 0 && compare ebmg ebmy 0 && compare ebm ebms 0 &&
    python3 - o_ebm.txt o_ebmx.txt o_ebmy.txt o_ebms.txt <<'PY'
import re, sys
def peak(f, dev=""):
    m = re.search(r"^%smemory peak per rank[^:]*: (?:accounted|measured) (\d+) bytes, predicted (\d+) bytes" % dev,
                  open(f).read(), re.M)
    return (int(m[1]), int(m[2])) if m else (None, None)
(a, p), (ax, px), (ay, py), (d, dp) = peak(sys.argv[1]), peak(sys.argv[2]), peak(sys.argv[3]), peak(sys.argv[4], "device ")
print("# peaks: bf16 rows and outputs %s (predicted %s), fp32 rows %s (%s), fp32 rows and outputs %s (%s), "
      "cpu-strict device %s (%s)" % (a, p, ax, px, ay, py, d, dp))
sys.exit(0 if None not in (a, ax, ay, d) and a == p and ax == px and ay == py and d == dp and ay - ax == 32768
         and ax - a == 2 * 98304 + 65536 else 1)
PY
ok $? "bf16 activations, EP 2: the received rows and the outputs kept in bf16 == fp32 (ZT_TEST_NO_EPX16=1, ZT_TEST_NO_EPYP16=1) bitwise, 262144 + 32768 bytes less at the peak, planned exactly (cpu, cpu-strict)"
# the default: the experts' backward GEMMs grouped (ZT_W16_EPGB): one call for the down projection's
# input gradients, written in bf16 (SwiGLU's backward reads them so), one for gate|up's, one a
# projection for the weight gradients (each expert's product rounded to bf16, then added), as without
# expert parallelism; so not bitwise ZT_TEST_NO_EPGB=1's GEMM an expert (the same peak: no buffer of
# their own), within 1e-2 of 1 rank keeping its outputs; cpu-strict bitwise cpu (above)
compare bm ebm 1e-2 && compare bm ebmg 1e-2 && ! compare ebm ebmg 0 > /dev/null 2>&1 &&
    compare ebmg ebm 1e-2 && cmp -s <(grep "^memory peak per rank" o_ebm.txt) <(grep "^memory peak per rank" o_ebmg.txt)
ok $? "bf16 activations, EP 2: the experts' backward GEMMs grouped (the default) within 1e-2 of 1 rank's and of a GEMM an expert (ZT_TEST_NO_EPGB=1), not bitwise; the same peak"
# 1 rank without the kept outputs (the default: moe.c down_bwd16, the down GEMMs' input gradient
# rounds dy, not wsel dy, to bf16) against with them: within bf16 roundings, not the same (measured:
# losses within 1.6e-05, parameters within 3.2e-03 after 4 AdamW steps)
run bmn 1 --micro-batch 2 --grad-accum 2 --bf16.enabled true --matmul-precision bf16 &&
    compare bm bmn 1e-2 && ! compare bm bmn 0 > /dev/null 2>&1
ok $? "bf16 activations (bf16 matmuls), 1 rank: the expert outputs not kept == kept (ZT_TEST_MOE_KEEP_YP=1) within 1e-2, not bitwise"

# forced imbalance: every token's experts are 0 and 1 (rank 0's); rank 1's
# K N rows a layer go to rank 0 and come back.  Rank 0 sends, per layer and
# forward, K N rows of C = 64 floats back (the counts go by all-gather); the
# backward the same; N = 32 tokens, 2 layers, the forward of each, the
# recomputed forward of the first (the last block runs on the forward's
# activations: docs/memory.md, activation checkpointing) and the backward of each
ZT_TEST_MOE_ROUTE_ALL=0 run fr 1 --micro-batch 2 --grad-accum 2 &&
    ZT_TEST_MOE_ROUTE_ALL=0 run fe 2 --ep 2 --micro-batch 1 --grad-accum 2 --act-ckpt blocks &&
    compare fr fe && python3 - m_fe.jsonl <<'PY'
import json, sys
N, K, C, L, A = 32, 2, 64, 2, 2
want = A * (3 * L - 1) * N * K * C * 4   # forward, recomputed forward (L - 1 blocks), backward
got = [json.loads(l).get("alltoall_bytes") for l in open(sys.argv[1]) if '"loss"' in l]
print("# all-to-all bytes per step (rank 0): %s, formula %d" % (got, want))
sys.exit(0 if got and all(g == want for g in got) else 1)
PY
ok $? "forced imbalance (every token on rank 0's experts), EP 2 with checkpointing == 1 rank; bytes == formula"
# the same with the bf16 activations (bf16 matmuls): the routed inputs, the experts' outputs and their
# gradients exchanged in bf16 (ZT_W16_EP16), bitwise the fp32 exchanges (ZT_TEST_NO_EP16=1); rank 0's
# bytes: the forward's and the recompute's outputs in bf16, the backward's input gradients in fp32
# (it sends no inputs or output gradients: its tokens' experts are its own).  Against 1 rank keeping
# its outputs (ZT_TEST_MOE_KEEP_YP=1) 1e-4: the forced routing's expert GEMMs over every token, micro
# steps grouped otherwise, reach the bf16 roundings (measured 7.1e-06 in the losses, 4.8e-05 in the
# parameters)
B16=(--bf16.enabled true --matmul-precision bf16)
ZT_TEST_MOE_KEEP_YP=1 ZT_TEST_MOE_ROUTE_ALL=0 run fr16 1 --micro-batch 2 --grad-accum 2 "${B16[@]}" &&
    ZT_TEST_NO_EPDX16=1 ZT_TEST_MOE_ROUTE_ALL=0 run fe16 2 --ep 2 --micro-batch 1 --grad-accum 2 \
        --act-ckpt blocks "${B16[@]}" &&
    ZT_TEST_MOE_ROUTE_ALL=0 ZT_TEST_NO_EP16=1 run fe32 2 --ep 2 --micro-batch 1 --grad-accum 2 \
        --act-ckpt blocks "${B16[@]}" &&
    compare fe32 fe16 0 && compare fr16 fe16 1e-4 && python3 - m_fe16.jsonl m_fe32.jsonl <<'PY'
import json, sys
N, K, C, L, A = 32, 2, 64, 2, 2
want16 = A * ((2 * L - 1) * N * K * C * 2 + L * N * K * C * 4)
want32 = A * (3 * L - 1) * N * K * C * 4
got16, got32 = ([json.loads(l).get("alltoall_bytes") for l in open(f) if '"loss"' in l] for f in sys.argv[1:3])
print("# all-to-all bytes per step (rank 0): bf16 exchanges %s, formula %d; fp32 %s, formula %d"
      % (got16, want16, got32, want32))
sys.exit(0 if got16 and got32 and all(g == want16 for g in got16) and all(g == want32 for g in got32) else 1)
PY
ok $? "bf16 exchanges (bf16 activations, the input gradients in fp32: ZT_TEST_NO_EPDX16=1): bitwise the fp32 exchanges, == 1 rank keeping its outputs (1e-4); rank 0's bytes == formula (outputs halved)"
# the default, the input gradients sent back in bf16 too (ZT_W16_EPDX16): rank 0's bytes are every
# exchange's in bf16, half the fp32 exchanges'; within 1e-2 of the fp32 return, not bitwise
# (measured: losses within 2.1e-05, parameters within 1.0e-03 of 1 rank's)
ZT_TEST_MOE_ROUTE_ALL=0 run fe16x 2 --ep 2 --micro-batch 1 --grad-accum 2 --act-ckpt blocks "${B16[@]}" &&
    compare fe16 fe16x 1e-2 && ! compare fe16 fe16x 0 > /dev/null 2>&1 &&
    python3 - m_fe16x.jsonl <<'PY'
import json, sys
N, K, C, L, A = 32, 2, 64, 2, 2
want = A * (3 * L - 1) * N * K * C * 2
got = [json.loads(l).get("alltoall_bytes") for l in open(sys.argv[1]) if '"loss"' in l]
print("# all-to-all bytes per step (rank 0), every exchange in bf16: %s, formula %d" % (got, want))
sys.exit(0 if got and all(g == want for g in got) else 1)
PY
ok $? "bf16 exchanges with the input gradients returned in bf16: rank 0's bytes == formula (every exchange halved), within 1e-2 of the fp32 return, not bitwise"

# with sequence parallelism (each rank routes its slice of the samples): EP changes
# nothing of the math -- equal to sequence parallel 2 x data parallel 2 alone
run sp 4 --sp 2 --stage 3 --micro-batch 2 && run spe2 4 --sp 2 --ep 2 --stage 3 --micro-batch 2 &&
    compare sp spe2 1e-5
ok $? "EP 2 with sequence parallel 2 (4 ranks, stage 3) == sequence parallel 2 alone"
run spe4 4 --sp 2 --ep 4 --stage 1 --micro-batch 2 --act-ckpt blocks && compare sp spe4 1e-5
ok $? "EP 4 across sequence parallel groups of 2 (stage 1, checkpointing) == sequence parallel 2 alone"

# checkpoints: steps 1-2 at EP 2 on 2 ranks, steps 3-4 elsewhere
resume() {  # resume TAG NB ARGS_B... (FROM=tag of the saving run, es by default)
    local tag=$1 nb=$2 from=${FROM:-es}; shift 2
    mkdir -p "ck_$tag" && cp -r "ck_$from/step-2" "ck_$tag/" || return 1
    mpirun_np "$nb" "$ZTRAIN" train "${MOE[@]}" --train c_train.bin --val c_val.bin --threads 1 \
        --steps 4 --eval-every 0 --sample-tokens 0 --batch-size 4 --scheduler.params.total_num_steps 4 \
        --metrics "m_${tag}_b.jsonl" --ckpt-dir "ck_$tag" --resume auto "$@" > "o_$tag.txt" 2>&1 ||
        { diag "o_$tag.txt" | tail -5; return 1; }
    grep -q "resumed from ck_$tag/step-2 at step 2" "o_$tag.txt" || return 1
    cat "m_$from.jsonl" "m_${tag}_b.jsonl" > "m_$tag.jsonl"
    "$ZTRAIN" ckpt export "ck_$tag" --output "w_$tag.safetensors" > /dev/null 2>&1
}
STEPS=2 run es 2 --ep 2 --micro-batch 2 --sample-tokens 4 &&
    grep -q "^sample: skipped (expert_parallel_size=2; sample from the checkpoint" o_es.txt &&
    resume x1 2 --ep 1 --micro-batch 2 && compare e2 x1
ok $? "save at EP 2 (2 ranks), restore at EP 1 on 2 ranks == the uninterrupted run"
resume x4 4 --ep 4 --stage 3 --micro-batch 1 && resume y4 1 --micro-batch 1 --grad-accum 4 &&
    compare y4 x4
ok $? "save at EP 2 (2 ranks), restore at EP 4 on 4 ranks, stage 3: == restored on 1 rank"
# the other ways: EP 1's checkpoint at EP 2 (stage 0, the restored run storing
# its window: the memory report's params row, 4 bytes a stored parameter), and
# across stages 0 and 3
PSI=${PSI:-0}
read -r PE PR <<< "$(stored 2 "$PSI")"
STEPS=2 run ps 2 --micro-batch 2 && FROM=ps resume z2 2 --ep 2 --micro-batch 2 --memory-report end &&
    compare e2 z2 1e-6 && grep -qE "^  params +$(kib "$PR") +$(kib "$PR") +$(kib "$PR")\$" o_z2.txt
ok $? "save at EP 1 (2 ranks), restore at EP 2 (stage 0, each rank storing $PR of $PSI parameters) == EP 2 uninterrupted"
STEPS=2 run s3 2 --ep 2 --stage 3 --micro-batch 2 && FROM=s3 resume z0 2 --ep 1 --micro-batch 2 &&
    compare e2 z0 1e-6 && FROM=s3 resume z1 2 --ep 2 --stage 1 --micro-batch 2 --memory-report end &&
    compare e2 z1 1e-6 && grep -qE "^  params +$(kib "$PR") +$(kib "$PR") +$(kib "$PR")\$" o_z1.txt &&
    FROM=ps resume z3 2 --ep 2 --stage 3 --micro-batch 2 && compare e2 z3 1e-6
ok $? "save at EP 2 stage 3, restore at EP 1 stage 0 and at EP 2 stage 1 (storing $PR parameters); save at EP 1 stage 0, restore at EP 2 stage 3 (2 ranks) == uninterrupted"

# the Hugging Face export of an EP 2 run (stage 0: each rank stores 2 experts,
# its random init of its own parameters only) == EP 1's
run p2 2 --micro-batch 2 && grep -q "random init: $PR of $PSI parameters" o_e2.txt &&
    "$ZTRAIN" ckpt export ck_e2 --hf hf_e2 > /dev/null 2>&1 &&
    "$ZTRAIN" ckpt export ck_p2 --hf hf_p2 > /dev/null 2>&1 &&
    python3 "$ZT_SRCDIR/tests/run_compare.py" m_e2.jsonl m_p2.jsonl hf_e2/model.safetensors \
        hf_p2/model.safetensors 1e-6 "$STEPS"
ok $? "Hugging Face export of an EP 2 run (each rank initialising its $PR parameters) == EP 1's (2 ranks)"


# device-memory discipline: cpu-strict (host-staged all-to-alls) bitwise == cpu
run sc 2 --ep 2 --stage 3 --micro-batch 2 --memory-report end && run ss 2 --ep 2 --stage 3 \
    --micro-batch 2 --backend cpu-strict --memory-report end && compare sc ss 0
ok $? "cpu-strict at EP 2, stage 3: bitwise equal to cpu"
# EP 2 on 2 ranks: the expert shard group is one rank, so an expert window's
# gradient bucket is its reduced slice (no reduce-scatter, no receive buffer,
# nothing in flight): the planner's peak == the accounted one (cpu) and the
# device peak == the measured one (cpu-strict), stage 3 and stage 2 checkpointed
PEAKEQ="peak per rank.*: \(accounted\|measured\) \([0-9]*\) bytes, predicted \2 bytes (+0.00%)"
grep -q "^memory $PEAKEQ" o_sc.txt && grep -q "^device memory $PEAKEQ" o_ss.txt &&
    run sk 2 --ep 2 --stage 2 --act-ckpt blocks --micro-batch 2 --backend cpu-strict --memory-report end &&
    grep -q "^device memory $PEAKEQ" o_sk.txt
r=$?; [ $r = 0 ] || grep -h "peak per rank" o_sc.txt o_ss.txt o_sk.txt | sed 's/^/# /'
ok $r "EP 2 on 2 ranks (one-rank expert shard groups), stage 3 and stage 2 checkpointed: predicted peak == accounted (cpu), device peak == measured (cpu-strict)"

# refusals
refused() {  # refused TAG NRANKS MESSAGE ARGS...
    local tag=$1 n=$2 msg=$3; shift 3
    STEPS=1 run "$tag" "$n" "$@" > /dev/null 2>&1
    grep -qF "$msg" "o_$tag.txt" || { diag "o_$tag.txt" | tail -3; return 1; }
}
ZT_TEST_MOE_ROUTE_ALL=4 refused nh 1 "ZT_TEST_MOE_ROUTE_ALL='4': expected an integer from 0 to 3 (an expert)"
ok $? "the test hook's value is checked"
refused n3 2 "expert_parallel_size=3 must divide the number of ranks (2)" --ep 3
ok $? "refused: EP 3 on 2 ranks"
refused n5 2 "expert_parallel_size=2 must divide the 5 experts (ztrain.model.n_experts)" --ep 2 \
    --ztrain.model.n_experts 5
ok $? "refused: EP 2 with 5 experts"
refused nd 2 "expert_parallel_size=2 needs a Mixture of Experts model" --ep 2 --ztrain.model.n_experts 0
ok $? "refused: EP 2 on a dense model"
refused ng 4 "expert_parallel_size=4 must divide zero_optimization.shard_group_size=2" --ep 4 \
    --stage 3 --shard-group 2 --micro-batch 1
ok $? "refused: EP 4 with ZeRO-3 shard groups of 2"
# the pre-flight refusal suggests --ep when a larger expert parallel size fits:
# experts 512 wide, 8-token windows (model states dominate), a limit between
# the predicted peaks at EP 1 and EP 2
BIG=(--ztrain.model.moe_intermediate_size 512 --seq-len 8 --batch-size 2 --micro-batch 1)
LIM=$(for e in 1 2; do "$ZTRAIN" estimate --world-size 2 "${MOE[@]}" "${BIG[@]}" --ep "$e" --json |
    python3 -c "import json,sys; print(json.load(sys.stdin)['peak_bytes'])"; done |
    python3 -c "import sys; a, b = map(int, sys.stdin.read().split()); print((a + b) // 2 if b < a else 0)")
[ "${LIM:-0}" -gt 0 ] && STEPS=2 refused rf 2 "; changes that fit: expert parallel 2 (each rank stores 2 of the 4 experts) (--ep 2): " \
    "${BIG[@]}" --memory-limit "$LIM" && STEPS=2 run rg 2 "${BIG[@]}" --memory-limit "$LIM" --ep 2
ok $? "a run that fits at EP 2 only: the pre-flight refusal suggests --ep 2, which runs"
done_testing
