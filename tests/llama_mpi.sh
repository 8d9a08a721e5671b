#!/bin/bash
# llama_mpi.sh -- the Llama model (configs/llama-tiny.json: grouped-query
# attention 4 / 2 heads, SwiGLU, RMSNorm, RoPE, tied head) trained with
# `ztrain train` on the bundled byte corpus:
#  - stages 0-3 at 1-4 ranks, hybrid 2 x 2, gradient accumulation, offload: per-step
#    losses within 1e-5 relative and final parameters within 1e-5 of the
#    1-rank stage-0 run (as zero_mpi.sh for the GPT);
#  - the untied head with q/k/v biases and llama3 rope scaling: the same at
#    2-4 ranks, stages 1-3;
#  - activation checkpointing blocks / every-2 (3 layers) at stages 0 and 3,
#    and overlap_comm off, bf16 at stage 3: losses and every checkpoint
#    tensor (parameters, AdamW moments, master weights) bitwise equal to the
#    run without (as test_memplan_run / zero_mpi.sh for the GPT);
#  - save at step 6 on 1 rank / stage 0 and restore on 3 ranks / stage 3 (and
#    untied: 2 ranks stage 2 -> 4 ranks hybrid stage 3): the resumed losses
#    equal the uninterrupted run's; a changed model setting is refused
#    naming the key;
#  - ztrain sample --checkpoint (cpu, cpu-strict, resharded; token ids for a
#    vocabulary other than bytes);
#  - scripts/engine-check.sh with the llama config on cpu-strict (bitwise).
. "$(dirname "$0")/lib.sh"
command -v "$ZT_MPIRUN" > /dev/null || skip_all "no MPI launcher ($ZT_MPIRUN)"
command -v python3 > /dev/null || skip_all "no python3"
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1
head -c 60000 "$ZT_SRCDIR/data/tinyshakespeare.txt" > corpus.txt
"$ZTRAIN" prep --input corpus.txt --output c > /dev/null
CFG=$ZT_SRCDIR/configs/llama-tiny.json
STEPS=12
UNTIED=(--tie-embeddings false --attention-bias true --rope-scaling llama3
        --ztrain.model.rope_original_max_positions 16)

# finished TAG RC: the run trained to the end.  `ztrain train` ends by
# writing an llm.c weights file, which holds GPT-2s only: until it writes
# llama weights another way, that one refusal after the final checkpoint
# is accepted (any other failure is not).
finished() {
    [ "$2" -eq 0 ] && return 0
    grep -q "^checkpoint: saving step [0-9]* (end of training)" "o_$1.txt" &&
        grep -q "^checkpoint: saved step" "o_$1.txt" &&
        [ "$(grep -c '^ztrain: error: ' "o_$1.txt")" = 1 ] &&
        grep -q "^ztrain: error: .*llm.c model files hold the built-in GPT-2 only" "o_$1.txt"
}
# run TAG NRANKS ARGS...: STEPS steps at a global batch of 12
run() {
    local tag=$1 n=$2; shift 2
    mpirun_np "$n" "$ZTRAIN" train --config "$CFG" --train c_train.bin --val c_val.bin \
        --threads 1 --steps "$STEPS" --eval-every 0 --sample-tokens 0 --batch-size 12 \
        --scheduler.params.total_num_steps 12 --metrics "m_$tag.jsonl" --ckpt-dir "ck_$tag" \
        --resume never "$@" > "o_$tag.txt" 2>&1
    finished "$tag" $? || { diag "o_$tag.txt" | tail -5; return 1; }
    "$ZTRAIN" ckpt export "ck_$tag" --output "w_$tag.safetensors" > /dev/null 2>&1 || true
}
# compare REF TAG: per-step losses within 1e-5 relative, final parameters
# (the checkpoint exported as safetensors) within 1e-5
compare() {
    python3 "$ZT_SRCDIR/tests/run_compare.py" "m_$1.jsonl" "m_$2.jsonl" "w_$1.safetensors" "w_$2.safetensors" 1e-5 "$STEPS"
}
# same A B: per-step losses equal and every tensor of the final checkpoints
# (parameters, moments, master weights) bitwise equal (stored checksums)
same() {
    python3 - "m_$1.jsonl" "m_$2.jsonl" "$STEPS" <<'PY' || return 1
import json, sys
def losses(p): return [json.loads(l)["loss"] for l in open(p) if '"loss"' in l]
a, b = losses(sys.argv[1]), losses(sys.argv[2])
sys.exit(0 if len(a) == int(sys.argv[3]) and a == b else 1)
PY
    "$ZTRAIN" ckpt inspect "ck_$1" --tensors --no-config | sed -n '/^tensors:/,$p' > t_$1.txt &&
    "$ZTRAIN" ckpt inspect "ck_$2" --tensors --no-config | sed -n '/^tensors:/,$p' > t_$2.txt &&
    [ "$(grep -c checksum "t_$1.txt")" -gt 20 ] && cmp -s "t_$1.txt" "t_$2.txt"
}

run ref 1 --stage 0 --micro-batch 12 && grep -q "^model: 90432 parameters (2 layers, 4 heads, 64 wide, context 64, vocab 256), architecture llama: 2 kv heads, head dim 16, intermediate 128, tied head$" o_ref.txt
ok $? "reference: 1 rank, stage 0, micro-batch 12 (the llama model)"
python3 - m_ref.jsonl <<'PY'
import json, sys
l = [json.loads(x)["loss"] for x in open(sys.argv[1]) if '"loss"' in x]
print("# losses %.4f -> %.4f" % (l[0], l[-1]))
sys.exit(0 if l[-1] < l[0] - 0.3 else 1)
PY
ok $? "the loss falls"
for n in 1 2 3 4; do
    for s in 0 1 2 3; do
        [ "$n" = 1 ] && [ "$s" = 0 ] && continue
        run "n${n}s$s" "$n" --stage "$s" --micro-batch $((12 / n)) && compare ref "n${n}s$s"
        ok $? "$n ranks, stage $s: losses and parameters match the reference"
    done
done
for s in 1 3; do
    run "h$s" 4 --stage "$s" --shard-group 2 --micro-batch 3 && compare ref "h$s"
    ok $? "hybrid 4 = 2 x 2, stage $s: losses and parameters match the reference"
done
for s in 0 3; do
    run "a$s" 2 --stage "$s" --micro-batch 3 --grad-accum 2 && compare ref "a$s"
    ok $? "2 ranks, stage $s, accumulation 2 x micro 3 matches 1 x 12"
done
run off 2 --stage 3 --micro-batch 6 --offload params && compare ref off
ok $? "2 ranks, stage 3, optimizer and parameter offload: losses and parameters match the reference"

# untied head, q/k/v biases, llama3 rope scaling
run uref 1 --stage 0 --micro-batch 12 "${UNTIED[@]}" && grep -q "untied head, q/k/v biases, llama3" o_uref.txt
ok $? "untied + biases + llama3 rope: reference run"
for v in "2 1 6" "3 2 4" "4 3 3"; do
    set -- $v
    run "u$1s$2" "$1" --stage "$2" --micro-batch "$3" "${UNTIED[@]}" && compare uref "u$1s$2"
    ok $? "untied + biases + llama3 rope, $1 ranks, stage $2: losses and parameters match"
done
run uh3 4 --stage 3 --shard-group 2 --micro-batch 3 "${UNTIED[@]}" && compare uref uh3
ok $? "untied + biases + llama3 rope, hybrid 2 x 2 stage 3: losses and parameters match"

# activation checkpointing (3 layers: every-2 is a group of 2 and one of 1),
# overlap_comm off, bf16: bitwise
for v in "1 0 12" "2 3 6"; do
    set -- $v
    run "k$1$2none" "$1" --stage "$2" --micro-batch "$3" --n-layer 3 || { ok 1 "ckpt reference $*"; continue; }
    for k in blocks every-2; do
        run "k$1$2$k" "$1" --stage "$2" --micro-batch "$3" --n-layer 3 --act-ckpt "$k" &&
            same "k$1$2none" "k$1$2$k"
        ok $? "$1 rank(s), stage $2, activation checkpointing $k: losses and checkpoint bitwise equal to none"
    done
done
run uk0 2 --stage 3 --micro-batch 6 "${UNTIED[@]}" &&
    run uk 2 --stage 3 --micro-batch 6 --act-ckpt blocks "${UNTIED[@]}" && same uk0 uk
ok $? "untied, 2 ranks, stage 3, activation checkpointing blocks: bitwise equal to none"
run ov 3 --stage 3 --micro-batch 4 --overlap-comm false && same n3s3 ov
ok $? "overlap_comm off vs on, 3 ranks, stage 3: bitwise equal"
run b3 3 --stage 3 --micro-batch 4 --bf16.enabled true --comm-dtype bf16 &&
    run b3k 3 --stage 3 --micro-batch 4 --bf16.enabled true --comm-dtype bf16 --act-ckpt blocks &&
    same b3 b3k
ok $? "bf16 + bf16 reductions, 3 ranks, stage 3: runs; checkpointing blocks bitwise equal to none"

# save + restore at another world size and stage
resume() {  # resume TAG NA ARGS_A -- NB ARGS_B -- COMMON: steps 1-6 on A, 7-12 on B
    local tag=$1 na=$2; shift 2
    local a=() b=() nb
    while [ "$1" != -- ]; do a+=("$1"); shift; done; shift
    nb=$1; shift
    while [ "$1" != -- ]; do b+=("$1"); shift; done; shift
    STEPS=6 run "${tag}_a" "$na" "${a[@]}" "$@" --ckpt-every 6 --ckpt-dir "ck_$tag" || return 1
    mpirun_np "$nb" "$ZTRAIN" train --config "$CFG" --train c_train.bin --val c_val.bin \
        --threads 1 --steps "$STEPS" --eval-every 0 --sample-tokens 0 --batch-size 12 \
        --scheduler.params.total_num_steps 12 --metrics "m_${tag}_b.jsonl" --ckpt-dir "ck_$tag" --resume auto "${b[@]}" "$@" \
        > "o_${tag}_b.txt" 2>&1
    finished "${tag}_b" $? || { diag "o_${tag}_b.txt" | tail -5; return 1; }
    grep -q "resumed from ck_$tag/step-6 at step 6" "o_${tag}_b.txt" || return 1
    cat "m_${tag}_a.jsonl" "m_${tag}_b.jsonl" > "m_$tag.jsonl"
    "$ZTRAIN" ckpt export "ck_$tag" --output "w_$tag.safetensors" > /dev/null 2>&1
}
resume r 1 --stage 0 --micro-batch 12 -- 3 --stage 3 --micro-batch 4 -- && compare ref r
ok $? "save at step 6 (1 rank, stage 0), restore on 3 ranks at stage 3: losses and parameters match"
resume ur 2 --stage 2 --micro-batch 6 -- 4 --stage 3 --shard-group 2 --micro-batch 3 -- "${UNTIED[@]}" &&
    compare uref ur
ok $? "untied: save on 2 ranks stage 2, restore on 4 ranks hybrid stage 3: losses and parameters match"
mpirun_np 1 "$ZTRAIN" train --config "$CFG" --train c_train.bin --val c_val.bin --threads 1 --steps "$STEPS" \
    --sample-tokens 0 --ckpt-dir ck_r --resume auto --n-kv-head 4 > o_bad.txt 2>&1
rc=$?
[ $rc != 0 ] && grep -q "ztrain.model.n_kv_head is 2 in the checkpoint, 4 configured" o_bad.txt
ok $? "a checkpoint of another n_kv_head is refused, naming the key"
mpirun_np 1 "$ZTRAIN" train --config "$CFG" --train c_train.bin --val c_val.bin --threads 1 --steps "$STEPS" \
    --sample-tokens 0 --ckpt-dir ck_ur --resume auto --tie-embeddings false --attention-bias true \
    > o_bad2.txt 2>&1
rc=$?
[ $rc != 0 ] && grep -q "ztrain.model.rope_scaling is llama3 in the checkpoint, none configured" o_bad2.txt
ok $? "a checkpoint with another rope scaling is refused, naming the key"
"$ZTRAIN" ckpt inspect ck_ur --no-config | grep -q "model        llama: 2 layers, 4 heads (2 kv, head dim 16), 64 wide, intermediate 128, .*llama3 scaling (factor 8, low 1, high 4, original 16).*untied head, q/k/v biases"
ok $? "ckpt inspect names the architecture and its settings"

# sampling from a checkpoint (any model): the same text on cpu and cpu-strict
# and from the 3-rank stage-3 checkpoint of the same run; a vocabulary other
# than bytes prints token ids
"$ZTRAIN" sample --checkpoint ck_ref --length 24 --prompt "ROMEO:" --seed 3 > s_cpu.txt 2>&1 &&
    "$ZTRAIN" sample --checkpoint ck_ref/step-12 --length 24 --prompt "ROMEO:" --seed 3 \
        --backend cpu-strict > s_strict.txt 2>&1 &&
    "$ZTRAIN" sample --checkpoint ck_n3s3 --length 24 --prompt "ROMEO:" --seed 3 > s_n3s3.txt 2>&1 &&
    [ "$(head -c 6 s_cpu.txt)" = "ROMEO:" ] && [ "$(wc -c < s_cpu.txt)" = 31 ] &&
    cmp -s s_cpu.txt s_strict.txt && cmp -s s_cpu.txt s_n3s3.txt
ok $? "ztrain sample --checkpoint: 24 tokens after the prompt, the same on cpu-strict and from the 3-rank stage-3 checkpoint"
STEPS=2 run v300 1 --stage 0 --micro-batch 12 --vocab 300 &&
    "$ZTRAIN" sample --checkpoint ck_v300 --length 16 --prompt "ab" > s_v300.txt 2>&1 &&
    python3 -c '
import sys
t = open(sys.argv[1]).read().split()
sys.exit(0 if len(t) == 16 and all(0 <= int(x) < 300 for x in t) else 1)' s_v300.txt
ok $? "vocab 300: ztrain sample prints 16 token ids below 300"

# the planner on a device target: cpu-strict's measured device peak equals
# the prediction (tied, stage 0; untied + biases, stage 3, bf16, checkpointing)
for v in "d0 1 --stage 0 --micro-batch 12" \
         "d3 2 --stage 3 --micro-batch 6 --bf16.enabled true --act-ckpt blocks ${UNTIED[*]}"; do
    set -- $v; tag=$1 n=$2; shift 2
    STEPS=3 run "$tag" "$n" --backend cpu-strict --memory-report --eval-every 2 "$@" &&
        python3 - "o_$tag.txt" <<'PY'
import re, sys
m = re.findall(r"device memory peak per rank \(.*\): measured (\d+) bytes, predicted (\d+) bytes", open(sys.argv[1]).read())
print("# measured, predicted: %s" % m)
sys.exit(0 if m and all(a == b for a, b in m) else 1)
PY
    ok $? "cpu-strict, $n rank(s) $*: measured device peak == predicted"
done

# the CLI with real loaders: micro batch "auto" under a 5 MiB limit keeps the
# batch (micro 6 x accumulation 4), and the end-of-training report's accounted
# peak equals the prediction
STEPS=3 run auto 1 --micro-batch auto --grad-accum auto --batch-size 24 --memory-limit 5M \
    --memory-report --eval-every 2 &&
    grep -q "micro batch 6 x accumulation 4 x 1 ranks = batch 24" o_auto.txt &&
    python3 - o_auto.txt <<'PY'
import re, sys
m = re.search(r"memory peak per rank: accounted (\d+) bytes, predicted (\d+) bytes", open(sys.argv[1]).read())
print("# accounted %s, predicted %s" % m.groups())
sys.exit(0 if m.group(1) == m.group(2) else 1)
PY
ok $? "micro batch auto under 5 MiB: 6 x 4 = 24; accounted peak == predicted (data loaders, eval)"

# the engine check on cpu-strict with the llama config: bitwise the cpu runs
bash "$ZT_SRCDIR/scripts/engine-check.sh" --backend cpu-strict --np "1 2" --cases "s3 bf16s3 resume" \
    --config "$CFG" --ztrain "$ZTRAIN" --mpirun "$ZT_MPIRUN" > ec.txt 2>&1
rc=$?
grep -E "^(not )?ok " ec.txt | sed 's/^/# engine-check: /'
[ $rc = 0 ] && [ "$(grep -c "^ok " ec.txt)" = 6 ]
ok $? "scripts/engine-check.sh --config llama-tiny.json on cpu-strict (stage 3 fp32 and bf16, save + resume; 1 and 2 ranks): bitwise"
done_testing
