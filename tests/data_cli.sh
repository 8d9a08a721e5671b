#!/bin/bash
# data_cli.sh -- `ztrain prep` formats and sharding, `ztrain train` on a glob
# of shards and on HDF5 files, dataloader threads (flag, environment, MPI),
# and bad data inputs: one clear error line naming the file, exit 1.
. "$(dirname "$0")/lib.sh"
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1

head -c 60000 "$ZT_SRCDIR/data/tinyshakespeare.txt" > corpus.txt
base=(--config "$ZT_SRCDIR/configs/tiny.json" --threads 1 --steps 3 --sample-tokens 0 --eval-every 0
      --eval-batches 1 --log-every 1)

# ---- prep
"$ZTRAIN" prep --input corpus.txt --output sh --shard-tokens 20000 > prep1.out 2>&1
ok $? "prep --shard-tokens 20000 succeeds"
check "prep reports the shards" grep -q 'wrote 54000 train tokens to 3 shards (sh_train_\*.bin) and 6000 val tokens to 1 shard' prep1.out
check "shards are named PREFIX_train_NNNNNN.bin" test -s sh_train_000000.bin -a -s sh_train_000002.bin -a -s sh_val_000000.bin
check "a full shard is 1024 + 2 x 20000 bytes" test "$(stat -c %s sh_train_000000.bin)" -eq 41024
"$ZTRAIN" prep --input corpus.txt --output h --format hdf5 > prep2.out 2>&1
ok $? "prep --format hdf5 succeeds"
check "HDF5 outputs PREFIX_train.h5 / PREFIX_val.h5" test -s h_train.h5 -a -s h_val.h5
check "prep reports the HDF5 files" grep -q 'wrote h_train.h5 (54000 tokens) and h_val.h5 (6000 tokens)' prep2.out
"$ZTRAIN" prep --tokens-in 'sh_train_*.bin' --output re --format hdf5 --dtype uint32 > prep3.out 2>&1
ok $? "prep --tokens-in GLOB re-shards existing shards into HDF5 uint32"
check "re-shard keeps every token" grep -q 'wrote re_train.h5 (54000 tokens)' prep3.out
"$ZTRAIN" prep --input corpus.txt --output x --format parquet > /dev/null 2> err.txt
check "prep --format parquet: usage error (exit 2)" test $? -eq 2
check "  ... naming the value" grep -q "parquet" err.txt

# ---- train
run_train() {  # run_train NAME ARGS...: ok when training succeeds
    local name="$1"; shift
    rm -rf ck m.jsonl
    "$ZTRAIN" train "${base[@]}" --ckpt-dir ck --metrics m.jsonl "$@" > out.txt 2> err.txt
    local rc=$?
    if [ $rc -eq 0 ] && [ "$(grep -c '"data_wait_ms"' m.jsonl)" -eq 3 ] && grep -q '"val_loss"' m.jsonl; then
        ok 0 "$name"
    else
        ok 1 "$name (exit $rc)"; diag err.txt; tail -3 out.txt | diag
    fi
}
run_train "train on a glob of shards (--train 'sh_train_*.bin')" --train 'sh_train_*.bin' --val 'sh_val_*.bin'
run_train "train on HDF5 files" --train h_train.h5 --val h_val.h5
run_train "train on an HDF5 uint32 dataset" --train re_train.h5 --val sh_val_000000.bin
run_train "--dataloaders 2" --train 'sh_train_*.bin' --val h_val.h5 --dataloaders 2
check "  ... shown in the effective configuration" grep -qE 'ztrain.data.dataloaders += 2 +\(flag\)' out.txt
ZTRAIN_DATALOADERS=3 run_train "ZTRAIN_DATALOADERS=3 (as set by the Slurm plugin)" --train 'sh_train_*.bin' --val h_val.h5
check "  ... shown in the effective configuration" grep -qE 'ztrain.data.dataloaders += 3 +\(env\)' out.txt

# the same global batch gives the same losses whatever the loader threads
"$ZTRAIN" train "${base[@]}" --ckpt-dir ck_w1 --metrics w1.jsonl --train 'sh_train_*.bin' --val h_val.h5 \
    --dataloaders 1 > /dev/null 2>&1
"$ZTRAIN" train "${base[@]}" --ckpt-dir ck_w4 --metrics w4.jsonl --train 'sh_train_*.bin' --val h_val.h5 \
    --dataloaders 4 > /dev/null 2>&1
strip() { sed -E 's/"(tokens_per_s|step_ms|data_wait_ms|tflops|mfu|eta_s|mem_peak_bytes)": [0-9.e+-]+,? ?//g' "$1"; }
check "losses identical with 1 and 4 loader threads" test -s w1.jsonl -a "$(strip w1.jsonl)" = "$(strip w4.jsonl)"

if command -v "$ZT_MPIRUN" > /dev/null; then
    mpirun_np 2 "$ZTRAIN" train "${base[@]}" --ckpt-dir ck_np2 --metrics m2.jsonl --micro-batch 2 --eval-batch-size 4 \
        --train 'sh_train_*.bin' --val h_val.h5 --dataloaders 2 > out2.txt 2> err2.txt
    ok $? "mpirun -np 2: glob of shards, 2 loader threads per rank"
    "$ZTRAIN" train "${base[@]}" --ckpt-dir ck_np1 --metrics m1.jsonl --micro-batch 4 --eval-batch-size 4 \
        --train 'sh_train_*.bin' --val h_val.h5 > /dev/null 2>&1
    python3 - m1.jsonl m2.jsonl <<'PY'
import json, sys
a = [json.loads(l) for l in open(sys.argv[1])]
b = [json.loads(l) for l in open(sys.argv[2])]
la = [x["loss"] for x in a if "loss" in x]; lb = [x["loss"] for x in b if "loss" in x]
va = [x["val_loss"] for x in a if "val_loss" in x]; vb = [x["val_loss"] for x in b if "val_loss" in x]
assert len(la) == len(lb) == 3 and len(va) == len(vb) == 1
worst = max(abs(x - y) / abs(x) for x, y in zip(la + va, lb + vb))
print("# max relative difference 1 rank x 4 vs 2 ranks x 2: %.2e" % worst)
sys.exit(0 if worst < 1e-5 else 1)
PY
    ok $? "2 ranks x 2 see the same train and val samples as 1 rank x 4 (losses match)"
else
    echo "ok $((TAP_N + 1)) - mpirun -np 2 # SKIP no MPI launcher"; TAP_N=$((TAP_N + 1))
    echo "ok $((TAP_N + 1)) - 2 ranks vs 1 rank # SKIP no MPI launcher"; TAP_N=$((TAP_N + 1))
fi

# ---- flat memory: peak RSS of `ztrain train` on a 2 GB (sparse) shard vs a 32 MB one
python3 - "$ZTRAIN" "$ZT_SRCDIR/configs/tiny.json" <<'PY'
import os, struct, subprocess, sys
ztrain, cfg = sys.argv[1], sys.argv[2]
def shard(path, n):
    with open(path, "wb") as f:
        f.write(struct.pack("<256i", 20240520, 1, n, *([0] * 253)))
        f.truncate(1024 + 2 * n)
# each run in a fresh interpreter, so that RUSAGE_CHILDREN's maximum is ztrain's alone
probe = ("import resource, subprocess, sys\n"
         "r = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)\n"
         "sys.stderr.write(r.stderr.decode())\n"
         "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss if r.returncode == 0 else -1)\n")
def peak(train, ck):
    r = subprocess.run([sys.executable, "-c", probe, ztrain, "train", "--config", cfg, "--threads", "1",
                        "--steps", "20", "--sample-tokens", "0", "--train", train, "--val", "h_val.h5",
                        "--eval-every", "0", "--eval-batches", "1", "--ckpt-dir", ck, "--metrics", ""],
                       capture_output=True, text=True)
    kb = int(r.stdout.strip() or -1)
    if kb < 0:
        print("# " + r.stderr.strip().replace("\n", "\n# ")); sys.exit(1)
    return kb
shard("small.bin", 16 * 1000 * 1000)
shard("large.bin", 1000 * 1000 * 1000)
small = peak("small.bin", "ck_small")
large = peak("large.bin", "ck_large")
os.remove("large.bin")
print("# peak RSS of ztrain train (20 steps): 32 MB dataset %.1f MB, 2 GB dataset %.1f MB" % (small / 1024, large / 1024))
sys.exit(0 if 0 < large and large - small < 64 * 1024 else 1)
PY
ok $? "ztrain train on a 2 GB dataset: peak RSS within 64 MB of a 32 MB dataset's"

# ---- bad inputs: one error line naming the file, exit 1, no outputs
expect_error() {  # expect_error NAME NEEDLE -- ARGS...
    local name="$1" needle="$2"; shift 3
    rm -rf ck m.jsonl
    "$ZTRAIN" train "${base[@]}" --ckpt-dir ck --metrics m.jsonl "$@" > out.txt 2> err.txt
    local rc=$?
    local lines; lines=$(wc -l < err.txt)
    if [ "$rc" -eq 1 ] && [ "$lines" -eq 1 ] && grep -q '^ztrain: error: ' err.txt &&
       grep -qF -- "$needle" err.txt && [ ! -e ck ] && [ ! -e m.jsonl ]; then
        ok 0 "$name"
    else
        ok 1 "$name (exit $rc, $lines stderr lines)"; diag err.txt
    fi
}
expect_error "empty glob names the pattern" "nothing_*.bin: no files match" -- --train 'nothing_*.bin' --val h_val.h5
"$ZTRAIN" prep --input corpus.txt --output tiny --shard-tokens 27000 --val-fraction 0.0005 > /dev/null 2>&1
expect_error "a shard shorter than one sequence is named" "tiny_val_000000.bin: 30 tokens, shorter than one sequence" \
    -- --train 'sh_train_*.bin' --val 'tiny_val_*.bin'
echo "not HDF5 at all" > fake.h5
expect_error "a .h5 file that is not HDF5" "fake.h5: not a readable HDF5 file" -- --train fake.h5 --val h_val.h5
head -c 5000 h_train.h5 > cut.h5
expect_error "a truncated HDF5 file" "cut.h5: not a readable HDF5 file (truncated file" -- --train cut.h5 --val h_val.h5
cp sh_train_000001.bin bad_001.bin
printf '\x2c\x01' | dd of=bad_001.bin bs=1 seek=2050 conv=notrunc 2> /dev/null
cp sh_train_000000.bin bad_000.bin
expect_error "token >= vocab in the second shard of a glob: file and byte offset" \
    "bad_001.bin: token 300 at byte offset 2050 (token 513) is >= vocab 256" -- --train 'bad_*.bin' --val h_val.h5
expect_error "a bad val file is named" "fake.h5" -- --train 'sh_train_*.bin' --val fake.h5

done_testing
