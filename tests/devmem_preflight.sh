#!/bin/bash
# devmem_preflight.sh -- the GPU pre-flight path, on the CPU: cpu-strict
# emulating a small device (ztrain.strict_device_memory).  The planner's
# device limit is the emulated device's free memory, so
#   (a) a run that does not fit is refused before anything is allocated, with
#       the device-memory message naming the device and the changes that fit,
#       and the first suggestion runs;
#   (b) --micro-batch auto under the capacity picks a micro batch that runs;
#   (c) --force with a capacity too small fails cleanly with an out-of-memory
#       error (exit 1, no crash);
#   (d) the memory report's measured device peak (the backend's own count)
#       equals the planner's predicted device peak byte for byte (cpu-strict
#       has no kernel workspace), at 1-2 ranks, stages 0-3, bf16 with offload;
#   (e) a run without validation data whose deferred initialization (the CLI's
#       runs write the initial values after the activations exist: an fp32
#       buffer of the largest unit, here a Llama's 8192-row embedding) is its
#       peak: `ztrain estimate` names that phase, the run's device peak equals
#       the prediction, and one byte less of emulated device fails there; the
#       same for LoRA (the base and the adapters initialized then too).
. "$(dirname "$0")/lib.sh"
need_mpi
need_python3
in_tmpdir
clean_ztrain_env
byte_corpus 120000
COMMON=(--config "$ZT_SRCDIR/configs/tiny.json" --train c_train.bin --val c_val.bin --threads 1
        --backend cpu-strict --steps 3 --eval-every 3 --eval-batches 2 --sample-tokens 0
        --resume never --log-every 100)
# zrun TAG NP ARGS...: files TAG.out, TAG.err; returns the exit status
zrun() {
    local tag=$1 np=$2; shift 2
    mpirun_np "$np" "$ZTRAIN" train "${COMMON[@]}" --ckpt-dir "ck_$tag" "$@" > "$tag.out" 2> "$tag.err"
}

# ---- (d) measured device peak == predicted, no capacity and with a roomy one
i=0
for spec in "1 --stage 0 --batch-size 12 --micro-batch 6 --grad-accum 2" \
            "2 --stage 1 --batch-size 12 --micro-batch 3 --grad-accum 2 --act-ckpt blocks" \
            "2 --stage 2 --batch-size 12 --micro-batch 6 --grad-accum 1 --strict-device-memory 64M" \
            "2 --stage 3 --batch-size 12 --micro-batch 6 --grad-accum 1" \
            "2 --stage 3 --batch-size 12 --micro-batch 3 --grad-accum 2 --precision bf16 --offload optimizer --comm-dtype bf16" \
            "2 --stage 1 --batch-size 12 --micro-batch 6 --grad-accum 1 --precision fp16 --offload optimizer"; do
    i=$((i + 1))
    set -- $spec
    np=$1; shift
    zrun "d$i" "$np" --memory-report "$@"; rc=$?
    read -r meas pred <<< "$(dev_peaks "d$i.out")"
    [ $rc = 0 ] && [ -n "$meas" ] && [ "$meas" = "$pred" ]; r=$?
    [ $r = 0 ] || { diag <(echo "exit $rc; measured '$meas' predicted '$pred'"); diag "d$i.err"; grep -i "memory" "d$i.out" | diag /dev/stdin; }
    ok $r "(d) memory report: cpu-strict measured device peak == predicted ($meas bytes; $np rank(s): $*)"
done

# the predicted device peak of the config used below (one rank, stage 0,
# micro batch 6 x 2), from d1: a capacity 12% under it cannot hold it
read -r _ need <<< "$(dev_peaks d1.out)"
small=$(( need * 88 / 100 ))
ARGS=(--stage 0 --batch-size 12 --micro-batch 6 --grad-accum 2)

# ---- (a) refused before anything is allocated, with the device message
zrun a1 1 "${ARGS[@]}" --strict-device-memory "$small"; rc=$?
msg=$(grep 'ztrain: error:' a1.err)
r=1
if [ $rc = 1 ] && grep -q "predicted peak device memory" <<< "$msg" &&
   grep -q "cpu-strict emulated device of $small bytes" <<< "$msg" &&
   grep -q "changes that fit: " <<< "$msg" && grep -q -- "--force" <<< "$msg" &&
   ! grep -q "^step\|backend cpu-strict;" a1.out && [ ! -d ck_a1 ]; then r=0; fi
[ $r = 0 ] || { diag <(echo "exit $rc"); diag a1.err; }
ok $r "(a) a run over the emulated capacity is refused before allocating (exit $rc; device memory, the device, suggestions)"
first=$(sed -n 's/.*changes that fit: [^;]*(\(--[^)]*\)).*/\1/p' <<< "$msg")
# shellcheck disable=SC2086
zrun a2 1 "${ARGS[@]}" --strict-device-memory "$small" $first; rc=$?
[ $rc = 0 ] && [ -n "$first" ] && grep -q "limit .*cpu-strict emulated device" a2.out; r=$?
[ $r = 0 ] || { diag <(echo "first suggestion '$first': exit $rc"); diag a2.err; }
ok $r "(a) applying the first suggestion ($first) runs under the same capacity"

# ---- (b) micro batch auto picks one that runs under the capacity
zrun b1 1 --stage 0 --batch-size 12 --micro-batch auto --grad-accum auto --strict-device-memory "$small"; rc=$?
mb=$(sed -n 's/.*train_micro_batch_size_per_gpu=auto: micro batch \([0-9]*\) .*/\1/p' b1.out b1.err | head -1)
[ $rc = 0 ] && [ -n "$mb" ] && [ "$mb" -ge 1 ] && [ "$mb" -lt 6 ]; r=$?
[ $r = 0 ] || { diag <(echo "exit $rc, micro batch '$mb'"); diag b1.err; }
ok $r "(b) --micro-batch auto under an emulated capacity of $small bytes picks micro batch $mb, and it runs"

# ---- (c) --force with a capacity too small: a clean out-of-memory error
for cap in $(( need / 2 )) 64K; do
    zrun "c$cap" 1 "${ARGS[@]}" --strict-device-memory "$cap" --force; rc=$?
    [ $rc = 1 ] && grep -q "starting anyway" "c$cap.out" "c$cap.err" &&
        grep -q "ztrain: error: .*out of cpu-strict device memory.*out of memory on the emulated device" "c$cap.err"; r=$?
    [ $r = 0 ] || { diag <(echo "exit $rc"); diag "c$cap.err"; }
    ok $r "(c) --force with a capacity of $cap bytes fails cleanly with out of memory (exit $rc)"
done

# ---- the speed hint: a checkpointed run that fits hears that `none` fits too
# where it does (at a capacity of none's predicted peak), else (one byte
# less) that blocks-attn does, with blocks-attn's predicted peak, which its
# own run predicts and measures
ARGS2=(--stage 0 --batch-size 12 --micro-batch 6 --grad-accum 2)
hintpk() { sed -n "s/.*memory: --act-ckpt $1 fits too: predicted peak \([^ ]* [^ ]*\) per rank.*/\1/p" "$2.out" "$2.err" | head -1; }
zrun s0 1 "${ARGS2[@]}" --act-ckpt none --memory-report; rc0=$?
read -r _ pn <<< "$(dev_peaks s0.out)"
zrun s3 1 "${ARGS2[@]}" --act-ckpt blocks --strict-device-memory "${pn:-0}"; rc3=$?
zrun s1 1 "${ARGS2[@]}" --act-ckpt blocks --strict-device-memory "$(( ${pn:-1} - 1 ))"; rc1=$?
zrun s2 1 "${ARGS2[@]}" --act-ckpt blocks-attn --memory-report --strict-device-memory "$(( ${pn:-1} - 1 ))"; rc2=$?
pk0=$(sed -n 's/.*memory: predicted peak \([^ ]* [^ ]*\) per rank.*/\1/p' s0.out s0.err | head -1)
pk2=$(sed -n 's/.*memory: predicted peak \([^ ]* [^ ]*\) per rank.*/\1/p' s2.out s2.err | head -1)
h3=$(hintpk none s3); h1=$(hintpk blocks-attn s1)
read -r meas pred <<< "$(dev_peaks s2.out)"
[ $rc0 = 0 ] && [ $rc3 = 0 ] && [ -n "$h3" ] && [ "$h3" = "$pk0" ] && [ -z "$(hintpk blocks-attn s3)" ]; r=$?
[ $r = 0 ] || { diag <(echo "exit $rc0 $rc3; none's peak '$pn' ($pk0), hinted '$h3'"); diag s3.err; grep "memory" s3.out | diag /dev/stdin; }
ok $r "a blocks run at a capacity of none's predicted peak ($pn bytes) is told none fits too, at $h3 (none's run: $pk0)"
[ $rc1 = 0 ] && [ $rc2 = 0 ] && [ -n "$h1" ] && [ "$h1" = "$pk2" ] && [ -n "$meas" ] && [ "$meas" = "$pred" ] &&
    [ -z "$(hintpk none s1)" ] && ! grep -q "fits too" s2.out s2.err; r=$?
[ $r = 0 ] || { diag <(echo "exit $rc1 $rc2; hint '$h1', blocks-attn predicted '$pk2', measured '$meas' '$pred'"); diag s1.err; grep "memory" s1.out | diag /dev/stdin; }
ok $r "one byte less: told blocks-attn fits too at $h1, the peak its run predicts ($pk2) and measures ($meas bytes)"

# ---- the host place is checked too (ztrain.memory_limit binds the device only)
zrun h1 1 "${ARGS[@]}" --memory-limit 64M; rc=$?
[ $rc = 0 ] && grep -q "limit 64.00 MiB (ztrain.memory_limit, device memory of cpu-strict" h1.out; r=$?
[ $r = 0 ] || diag h1.err
ok $r "ztrain.memory_limit overrides the device limit on cpu-strict"

# ---- (e) the deferred initialization's transient, planned where it happens
k=0
for extra in "" "--lora-r 4"; do
    k=$((k + 1))
    E=(--config "$ZT_SRCDIR/configs/llama-tiny.json" --vocab 8192 --train c_train.bin --val= --threads 1
       --backend cpu-strict --precision bf16 --steps 2 --resume never --ckpt-final false $extra)
    "$ZTRAIN" estimate "${E[@]}" --world-size 1 --device gpu --json > "e$k.json" 2> "e$k.err"
    P=$(python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); print(d["peak_bytes"] if d["peak_phase"] == "initializing the parameters" else "")' "e$k.json")
    mpirun_np 1 "$ZTRAIN" train "${E[@]}" --sample-tokens 0 --ckpt-dir "ck_e$k" --memory-report end > "e$k.out" 2>&1; rc=$?
    mpirun_np 1 "$ZTRAIN" train "${E[@]}" --sample-tokens 0 --ckpt-dir "ck_f$k" --memory-limit 1G \
        --strict-device-memory $((${P:-1} - 1)) > "f$k.out" 2>&1; rc1=$?
    [ -n "$P" ] && [ $rc = 0 ] &&
        grep -q "^device memory peak per rank (cpu-strict.*: measured $P bytes, predicted $P bytes (+0.00%)" "e$k.out" &&
        grep -q "^memory: predicted peak .* (at initializing the parameters)" "e$k.out" &&
        [ $rc1 = 1 ] && grep -q "^ztrain: error: out of memory initializing the parameters" "f$k.out"; r=$?
    [ $r = 0 ] || { diag "e$k.json"; diag <(grep -E "peak|error" "e$k.out" "f$k.out"); }
    ok $r "(e) no validation data${extra:+, LoRA}: the deferred initialization is the peak (${P:-?} bytes, estimate's phase), measured == predicted, one byte less fails there"
done
done_testing
