#!/bin/bash
# strict_backend.sh -- the training engine on a device backend, proven on the
# CPU.  Every run below goes once on the cpu backend and once on cpu-strict,
# whose memory the host cannot touch (PROT_NONE outside the backend's own
# calls: any host dereference of engine memory by the engine -- a memcpy, a
# loop, HDF5, MPI, the data loader -- kills the run with SIGSEGV, and a host
# pointer handed to a kernel fails it with the backend's error).  The two
# runs must agree bitwise: per-step losses, gradient norms, loss scales,
# skipped steps, bytes communicated, validation losses, the llm.c weights
# file, the final checkpoint's tensors (params, m, v checksums) and the
# sampled text.  Covered: ZeRO stages 0-3 at 1-2 ranks, hybrid 4 = 2 x 2,
# gradient accumulation, bf16 and fp16 (with a forced overflow), optimizer
# offload (AdamW on the host), parameter offload at stage 3 (host shards,
# bitwise equal to no offload, pin_memory asked for), evaluation, checkpoint save + resume (one
# reader and parallel restore, and a cpu checkpoint resumed on cpu-strict),
# llm.c weights save and load (ztrain sample --weights).
. "$(dirname "$0")/lib.sh"
command -v "$ZT_MPIRUN" > /dev/null || skip_all "no MPI launcher ($ZT_MPIRUN)"
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1
export ZTRAIN_REQUEUE=false
unset ZTRAIN_RESUME ZTRAIN_CKPT_DIR ZTRAIN_CKPT_EVERY ZTRAIN_STAGE ZTRAIN_BACKEND
head -c 120000 "$ZT_SRCDIR/data/tinyshakespeare.txt" > corpus.txt
"$ZTRAIN" prep --input corpus.txt --output c > /dev/null || { echo "Bail out! ztrain prep failed"; exit 1; }
# 8 steps of a global batch of 12, the same schedule for every run
COMMON=(--config "$ZT_SRCDIR/configs/tiny.json" --train c_train.bin --val c_val.bin --threads 1
        --batch-size 12 --scheduler.params.total_num_steps 8 --eval-every 4 --eval-batches 2
        --log-every 100 --resume never)

# zrun TAG BACKEND NP ARGS...: one run; files TAG.{out,err,jsonl,bin}, ck_TAG/
zrun() {
    local tag=$1 be=$2 np=$3; shift 3
    mpirun_np "$np" "$ZTRAIN" train "${COMMON[@]}" --backend "$be" --metrics "$tag.jsonl" \
        --save "$tag.bin" --ckpt-dir "ck_$tag" "$@" > "$tag.out" 2> "$tag.err"
}
# the records that must agree: every metric except timings and memory peaks
records() {
    python3 - "$1" <<'PY'
import json, sys
drop = {"tokens_per_s", "step_ms", "data_wait_ms", "tflops", "mfu", "mem_peak_bytes", "eta_s"}
for line in open(sys.argv[1]):
    r = json.loads(line)
    if "memory" in r: continue
    print(json.dumps({k: v for k, v in r.items() if k not in drop}, sort_keys=True))
PY
}
tensor_sums() { "$ZTRAIN" ckpt inspect "$1" --tensors --no-config | grep ' checksum '; }
sample_of() { sed -n '/^---- sample/,/^---- end of sample/p' "$1"; }

# same TAG NP ARGS...: cpu vs cpu-strict on the same arguments
same() {
    local tag=$1 np=$2; shift 2
    zrun "c_$tag" cpu "$np" "$@"; local rc=$?
    zrun "s_$tag" cpu-strict "$np" "$@"; local rs=$?
    local why=""
    if [ $rc != 0 ] || [ $rs != 0 ]; then
        why="exit cpu $rc, cpu-strict $rs"
    elif ! grep -q "backend cpu-strict" "s_$tag.out"; then
        why="cpu-strict run did not use the cpu-strict backend"
    elif ! cmp -s <(records "c_$tag.jsonl") <(records "s_$tag.jsonl"); then
        why="metrics differ"; diff <(records "c_$tag.jsonl") <(records "s_$tag.jsonl") | head -4 | diag /dev/stdin
    elif [ "$(records "c_$tag.jsonl" | wc -l)" -lt 8 ]; then
        why="fewer than 8 records"
    elif ! cmp -s "c_$tag.bin" "s_$tag.bin"; then
        why="weights files differ"
    else
        local last; last=$(ls -d "ck_c_$tag"/step-* 2>/dev/null | sort -t- -k2 -n | tail -1)
        if [ -n "$last" ]; then
            tensor_sums "$last" > "c_$tag.sums" 2>&1
            tensor_sums "ck_s_$tag/${last##*/}" > "s_$tag.sums" 2>&1
            if [ ! -s "c_$tag.sums" ] || ! cmp -s "c_$tag.sums" "s_$tag.sums"; then
                why="final checkpoint tensors differ"
            fi
        fi
        if [ -z "$why" ] && ! cmp -s <(sample_of "c_$tag.out") <(sample_of "s_$tag.out"); then
            why="sampled text differs"
        fi
    fi
    [ -n "$why" ] && { diag <(echo "$tag: $why"); diag "s_$tag.err"; }
    ok $([ -z "$why" ]; echo $?) "$tag: cpu-strict bitwise equal to cpu ($np rank(s): $*)"
}

same n1s0 1 --stage 0 --micro-batch 12 --steps 8 --sample-tokens 24 --ckpt-every 8
for s in 0 1 2 3; do
    same "n2s$s" 2 --stage $s --micro-batch 6 --steps 8 --sample-tokens 0 --ckpt-every 8
done
same h4s3 4 --stage 3 --shard-group 2 --micro-batch 3 --steps 8 --sample-tokens 0
same h4s1 4 --stage 1 --shard-group 2 --micro-batch 3 --steps 8 --sample-tokens 0
same acc2s2 2 --stage 2 --micro-batch 3 --grad-accum 2 --steps 8 --sample-tokens 0
same acc1s0 1 --stage 0 --micro-batch 4 --grad-accum 3 --steps 8 --sample-tokens 0
same bf16s0 2 --stage 0 --micro-batch 6 --precision bf16 --steps 8 --sample-tokens 0 --ckpt-every 8
same bf16s2 2 --stage 2 --micro-batch 3 --grad-accum 2 --precision bf16 --steps 8 --sample-tokens 0
# bf16 matmuls: the norms' and the GELU's outputs kept in bf16 (the matmul_*_a16 entries), recomputed
same bf16mm3 2 --stage 3 --micro-batch 6 --precision bf16 --matmul-precision bf16 --act-ckpt blocks --steps 8 --sample-tokens 0
ZT_TEST_OVERFLOW_STEPS=3 same fp16s1 2 --stage 1 --micro-batch 6 --precision fp16 --steps 8 --sample-tokens 0 --ckpt-every 8
ZT_TEST_OVERFLOW_STEPS=3 same fp16s3 2 --stage 3 --micro-batch 6 --precision fp16 --steps 8 --sample-tokens 0 --ckpt-every 8
check "fp16 runs skipped the forced overflow" grep -q '"skipped": true' s_fp16s3.jsonl
same off1 2 --stage 1 --micro-batch 6 --offload optimizer --steps 8 --sample-tokens 0 --ckpt-every 8
same offbf3 2 --stage 3 --micro-batch 6 --offload optimizer --precision bf16 --steps 8 --sample-tokens 0 --ckpt-every 8
check "offloaded optimizer state is host memory on cpu-strict" \
      grep -qE '^ *optimizer .*\(in host memory: [0-9.]+ MiB\)' s_offbf3.out
# parameter offload (stage 3, with the optimizer state; pin_memory asked for:
# cpu-strict cannot pin, so 0 bytes and the run goes): the owned parameter
# shards in host memory, uploaded into each gather.  cpu vs cpu-strict as
# above, and both equal to the run WITHOUT offload (fp32: n2s3; bf16: a cpu
# reference of its own)
PIN=(--zero_optimization.offload_optimizer.pin_memory true --zero_optimization.offload_param.pin_memory true)
same offp3 2 --stage 3 --micro-batch 6 --offload params "${PIN[@]}" --steps 8 --sample-tokens 0 --ckpt-every 8
same offpbf3 2 --stage 3 --micro-batch 6 --offload params --precision bf16 --steps 8 --sample-tokens 0 --ckpt-every 8
zrun c_bf3 cpu 2 --stage 3 --micro-batch 6 --precision bf16 --steps 8 --sample-tokens 0 --ckpt-every 8
# as_ref TAG REF: cpu-strict run TAG == cpu run REF (metrics, weights, final tensors)
as_ref() {
    tensor_sums "ck_$2/step-8" > "$2.sums" 2>&1
    tensor_sums "ck_$1/step-8" > "$1.sums" 2>&1
    cmp -s <(records "$1.jsonl") <(records "$2.jsonl") && cmp -s "$1.bin" "$2.bin" &&
        [ -s "$2.sums" ] && cmp -s "$1.sums" "$2.sums"
}
ok $(as_ref s_offp3 c_n2s3; echo $?) "offp3: cpu-strict with offload_param bitwise equal to cpu stage 3 without offload (fp32)"
ok $(as_ref s_offpbf3 c_bf3; echo $?) "offpbf3: cpu-strict with offload_param bitwise equal to cpu stage 3 without offload (bf16)"
check "offloaded parameter shards are host memory on cpu-strict" \
      grep -qE '^ *params .*\(in host memory: [0-9.]+ MiB\)' s_offpbf3.out
check "pin_memory on cpu-strict (cannot pin): 0 bytes pinned, said so" \
      grep -qE '^ *pinned +0\.00 MiB  \(page-locked host memory; the cpu-strict backend cannot pin' s_offp3.out

# ---- checkpoint resume on cpu-strict: 4 steps + save, a new process resumes
# to 8; the same losses and final tensors as the uninterrupted cpu run
resume() {
    local tag=$1 ref=$2 np=$3; shift 3
    local d=ck_r_$tag
    rm -rf "$d"
    zrun "r1_$tag" cpu-strict "$np" --steps 4 --ckpt-every 4 --ckpt-dir "$d" --sample-tokens 0 "$@"
    local r1=$?
    zrun "r2_$tag" cpu-strict "$np" --steps 8 --ckpt-every 4 --ckpt-dir "$d" --resume auto --sample-tokens 0 "$@"
    local r2=$?
    local why=""
    if [ $r1$r2 != 00 ]; then why="exit $r1 / $r2"
    elif ! grep -q "resumed from $d/step-4 at step 4" "r2_$tag.out"; then why="did not resume at step 4"
    elif ! cmp -s <({ records "r1_$tag.jsonl"; records "r2_$tag.jsonl"; }) <(records "c_$ref.jsonl"); then
        why="losses differ from the uninterrupted cpu run"
    else
        tensor_sums "$d/step-8" > "r_$tag.sums" 2>&1
        cmp -s "r_$tag.sums" "c_$ref.sums" || why="final tensors differ from the uninterrupted cpu run"
    fi
    [ -n "$why" ] && { diag <(echo "$tag: $why"); diag "r2_$tag.err"; }
    ok $([ -z "$why" ]; echo $?) "$tag: cpu-strict save at 4 + resume to 8 == uninterrupted cpu ($np rank(s): $*)"
}
ZT_TEST_OVERFLOW_STEPS=3 resume s3fp16 fp16s3 2 --stage 3 --micro-batch 6 --precision fp16
resume s0 n2s0 2 --stage 0 --micro-batch 6
resume off1 off1 2 --stage 1 --micro-batch 6 --offload optimizer
resume offp3 n2s3 2 --stage 3 --micro-batch 6 --offload params
resume offpbf3 bf3 2 --stage 3 --micro-batch 6 --offload params --precision bf16
resume s1par n2s1 2 --stage 1 --micro-batch 6 --ckpt-restore parallel

# a checkpoint written on the cpu backend, resumed on cpu-strict
rm -rf ck_x; mkdir ck_x
zrun x1 cpu 2 --stage 2 --micro-batch 6 --steps 4 --ckpt-every 4 --ckpt-dir ck_x --sample-tokens 0
zrun x2 cpu-strict 2 --stage 2 --micro-batch 6 --steps 8 --ckpt-every 4 --ckpt-dir ck_x --resume auto --sample-tokens 0
tensor_sums ck_x/step-8 > x.sums 2>&1
ok $(grep -q "resumed from ck_x/step-4" x2.out && cmp -s x.sums c_n2s2.sums &&
     cmp -s <({ records x1.jsonl; records x2.jsonl; }) <(records c_n2s2.jsonl); echo $?) \
   "a cpu checkpoint resumes on cpu-strict: same losses and final tensors as the cpu run"

# ---- llm.c weights: loaded (and sampled) on cpu-strict as on cpu
"$ZTRAIN" sample --weights c_n2s3.bin --length 40 --seed 7 --backend cpu > sc.txt 2> sc.err
rc=$?
"$ZTRAIN" sample --weights c_n2s3.bin --length 40 --seed 7 --backend cpu-strict > ss.txt 2> ss.err
rs=$?
ok $([ $rc$rs = 00 ] && [ -s sc.txt ] && cmp -s sc.txt ss.txt; echo $?) \
   "llm.c weights load + 40 sampled tokens: cpu-strict == cpu"
[ $rs = 0 ] || diag ss.err
done_testing
