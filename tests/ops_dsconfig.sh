#!/bin/bash
# ops_dsconfig.sh -- real DeepSpeed configs (issue 16, item 7): the ZeRO-2
# and ZeRO-3 examples of the Hugging Face DeepSpeed integration docs, written
# out unchanged with their "auto" values, train a few steps; the effective
# configuration lists once which keys had no effect and which "auto" keys
# kept ztrain's value.  DeepSpeed's Adam (adam_w_mode) and WarmupLR /
# WarmupDecayLR schedules are checked against DeepSpeed's formulas.
. "$(dirname "$0")/ckpt_lib.sh"

# hf_example < ZERO_OPTIMIZATION: the example around its "zero_optimization"
# section (the two examples differ only there)
hf_example() {
    cat <<'JSON'
{
    "fp16": {
        "enabled": "auto",
        "loss_scale": 0,
        "loss_scale_window": 1000,
        "initial_scale_power": 16,
        "hysteresis": 2,
        "min_loss_scale": 1
    },

    "optimizer": {
        "type": "AdamW",
        "params": {
            "lr": "auto",
            "betas": "auto",
            "eps": "auto",
            "weight_decay": "auto"
        }
    },

    "scheduler": {
        "type": "WarmupLR",
        "params": {
            "warmup_min_lr": "auto",
            "warmup_max_lr": "auto",
            "warmup_num_steps": "auto"
        }
    },

JSON
    cat
    cat <<'JSON'

    "gradient_accumulation_steps": "auto",
    "gradient_clipping": "auto",
    "steps_per_print": 2000,
    "train_batch_size": "auto",
    "train_micro_batch_size_per_gpu": "auto",
    "wall_clock_breakdown": false
}
JSON
}
hf_example > zero2.json <<'JSON'
    "zero_optimization": {
        "stage": 2,
        "offload_optimizer": {
            "device": "cpu",
            "pin_memory": true
        },
        "allgather_partitions": true,
        "allgather_bucket_size": 2e8,
        "overlap_comm": true,
        "reduce_scatter": true,
        "reduce_bucket_size": 2e8,
        "contiguous_gradients": true
    },
JSON
hf_example > zero3.json <<'JSON'
    "zero_optimization": {
        "stage": 3,
        "offload_optimizer": {
            "device": "cpu",
            "pin_memory": true
        },
        "offload_param": {
            "device": "cpu",
            "pin_memory": true
        },
        "overlap_comm": true,
        "contiguous_gradients": true,
        "sub_group_size": 1e9,
        "reduce_bucket_size": "auto",
        "stage3_prefetch_bucket_size": "auto",
        "stage3_param_persistence_threshold": "auto",
        "stage3_max_live_parameters": 1e9,
        "stage3_max_reuse_distance": 1e9,
        "stage3_gather_16bit_weights_on_model_save": true
    },
JSON
# the model and data from flags (flags win over the file); everything else
# from the file
M0=(--n-layer 2 --n-head 2 --n-embd 32 --context 32 --vocab 256 --train c_train.bin --val c_val.bin
    --threads 1 --sample-tokens 0 --steps 3 --eval-every 0 --eval-batches 1 --resume never)
M=("${M0[@]}" --micro-batch 3)
for z in zero2 zero3; do
    mpirun_np 2 "$ZTRAIN" train --config $z.json "${M[@]}" --ckpt-dir D$z --metrics $z.jsonl > $z.out 2> $z.err
    rc=$?
    ok $([ $rc = 0 ] && [ "$(grep -c '"loss"' $z.jsonl)" = 3 ]; echo $?) \
       "the HF docs' ZeRO-${z#zero} example, unchanged: 3 steps on 2 ranks (exit $rc)"
    [ $rc = 0 ] || diag $z.err
    ok $([ "$(grep -c '^  no effect in ztrain' $z.out)" = 1 ] &&
         grep '^  no effect in ztrain' $z.out | grep -q 'wall_clock_breakdown' &&
         grep '^  no effect in ztrain' $z.out | grep -q 'zero_optimization.contiguous_gradients'; echo $?) \
       "ZeRO-${z#zero}: keys without effect listed once: $(grep '^  no effect' $z.out | cut -d: -f2- | cut -c1-200)"
    ok $(grep '^  "auto"' $z.out | grep -q 'optimizer.params.lr, optimizer.params.betas' &&
         grep -q 'zero_optimization.stage *= 2\?3\? *(file)' $z.out; echo $?) \
       "ZeRO-${z#zero}: \"auto\" keys keep ztrain's value, listed: $(grep '^  "auto"' $z.out | cut -d: -f2- | cut -c1-160)"
done
grep -q 'zero_optimization.stage *= 3 *(file)' zero3.out && grep -q 'offload_param.device *= "cpu" *(file)' zero3.out
ok $? "ZeRO-3 example: stage 3 with parameter offload taken from the file"
# its batch triple, all "auto", needs no --micro-batch: ztrain's defaults, the
# same effective configuration as with the three keys left out (issue 31;
# the memory line before it depends on the host's free memory)
grep -v '"train_batch_size"\|"train_micro_batch_size_per_gpu"\|"gradient_accumulation_steps"' \
    zero3.json > nobatch.json
for z in zero3 nobatch; do
    mpirun_np 2 "$ZTRAIN" train --config $z.json "${M0[@]}" --ckpt-dir Dpc --print-config \
        > $z.pc.out 2> $z.pc.err
    echo $? > $z.rc
    sed -n '/^effective configuration/,$p' $z.pc.out > $z.pc
done
ok $([ "$(cat zero3.rc)" = 0 ] && [ "$(cat nobatch.rc)" = 0 ] && [ -s zero3.pc ] && cmp -s zero3.pc nobatch.pc &&
     grep -q '^  train_micro_batch_size_per_gpu *= 16 *(derived)' zero3.pc &&
     grep -q '^  train_batch_size *= 32 *(derived)' zero3.pc; echo $?) \
   "ZeRO-3 example without --micro-batch on 2 ranks (exit $(cat zero3.rc)): micro batch 16 x 2 ranks, as with the batch keys absent"
[ "$(cat zero3.rc)" = 0 ] || diag zero3.pc.err

# DeepSpeed's WarmupLR (log warmup by default) and WarmupDecayLR; Adam
cat > ds.json <<'JSON'
{"optimizer": {"type": "Adam", "params": {"lr": 0.001, "adam_w_mode": true}},
 "scheduler": {"type": "WarmupDecayLR", "params": {"warmup_min_lr": 0.0001, "warmup_max_lr": 0.002,
               "warmup_num_steps": 4, "total_num_steps": 10}},
 "zero_optimization": {"stage": 1, "zero_hpz_partition_size": 1}}
JSON
"$ZTRAIN" train --config ds.json "${M[@]}" --steps 10 --ckpt-dir Dds --metrics ds.jsonl > ds.out 2> ds.err
ok $? "Adam (adam_w_mode) + WarmupDecayLR config trains"
python3 - ds.jsonl <<'PY'
import json, math, sys
lr = [json.loads(l)["lr"] for l in open(sys.argv[1]) if '"loss"' in l]
lo, hi, w, T = 1e-4, 2e-3, 4, 10
want = []
for s in range(10):
    g = math.log(s + 1) / math.log(w) if s < w else max(0.0, (T - s) / max(1.0, T - w))
    want.append(lo + (hi - lo) * g)
bad = [(s, a, b) for s, (a, b) in enumerate(zip(lr, want)) if abs(a - b) > 1e-6 * b]
print("# lr", " ".join("%.6g" % x for x in lr))
sys.exit(1 if bad or len(lr) != 10 else 0)
PY
ok $? "WarmupDecayLR: lr = min + (max - min) * gamma with DeepSpeed's log warmup and linear decay"
sed 's/"adam_w_mode": true/"adam_w_mode": false/' ds.json > l2.json
"$ZTRAIN" train --config l2.json "${M[@]}" --print-config > l2.out 2> l2.err; rc=$?
ok $([ $rc = 2 ] && grep -q "adam_w_mode=false (L2 regularization) is not implemented" l2.err; echo $?) \
   "Adam with adam_w_mode=false is refused by name (exit $rc)"
sed 's/"zero_hpz_partition_size": 1/"zero_hpz_partition_size": 2/' ds.json > hpz.json
mpirun_np 4 "$ZTRAIN" train --config hpz.json "${M[@]}" --print-config > hpz.out 2> hpz.err; rc=$?
ok $([ $rc = 0 ] && grep -q 'zero_optimization.shard_group_size *= 2 *(file)' hpz.out &&
     grep -q '^  mapped onto ztrain.s knob: zero_hpz_partition_size -> zero_optimization.shard_group_size' hpz.out; echo $?) \
   "zero_hpz_partition_size 2 on 4 ranks is ztrain's hybrid sharding over groups of 2 (exit $rc)"
sed 's/"stage": 1,/"stage": 1, "offload_optimizer": {"device": "nvme"},/' ds.json > nvme.json
"$ZTRAIN" train --config nvme.json "${M[@]}" --print-config > nvme.out 2> nvme.err; rc=$?
ok $([ $rc = 2 ] && grep -q "offload_optimizer.device" nvme.err; echo $?) "NVMe offload stays refused by name (exit $rc)"
done_testing
