#!/bin/bash
# config_ranks.sh -- 2 ranks that read different configurations (a ZTRAIN_*
# variable set per rank, a per-rank config file, a malformed or missing file
# on rank 1 only, another or a malformed --init-from config.json on rank 1,
# other data files behind the same path): every rank fails at start-up with
# one error naming the rank and the first differing key with both values
# (or rank 1's own error), exit 2 (a malformed config.json: 1, as on one rank), no
# hang (each run is guarded by `timeout`; ztrain.comm_timeout_s stays at its
# default, 300 s).  Keys that may differ per rank (ztrain.threads) do not
# stop the run.
. "$(dirname "$0")/lib.sh"
command -v "$ZT_MPIRUN" > /dev/null || skip_all "no MPI launcher ($ZT_MPIRUN)"
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1
unset ZTRAIN_CONFIG ZTRAIN_STEPS ZTRAIN_THREADS ZTRAIN_COMM_TIMEOUT_S
head -c 20000 "$ZT_SRCDIR/data/tinyshakespeare.txt" > corpus.txt
"$ZTRAIN" prep --input corpus.txt --output c > /dev/null || { echo "Bail out! ztrain prep failed"; exit 1; }

# per-rank.sh CMD...: runs CMD with this rank's settings: ZTRAIN_STEPS=10+rank
# (PER_RANK_STEPS=1), ZTRAIN_THREADS=1+rank (PER_RANK_THREADS=1), --config
# ${PER_RANK_CONFIG}<rank>.json (PER_RANK_CONFIG set), in directory r<rank>
# (PER_RANK_DIR=1)
cat > per-rank.sh << 'EOF'
#!/bin/bash
r=${OMPI_COMM_WORLD_RANK:-${PMIX_RANK:-0}}
[ -n "$PER_RANK_STEPS" ] && export ZTRAIN_STEPS=$((10 + r))
[ -n "$PER_RANK_THREADS" ] && export ZTRAIN_THREADS=$((1 + r))
[ -n "$PER_RANK_DIR" ] && { cd "r$r" || exit 1; }
exec "$@" ${PER_RANK_CONFIG:+--config "$PER_RANK_CONFIG$r.json"}
EOF
chmod +x per-rank.sh
ARGS=(--train c_train.bin --val c_val.bin --sample-tokens 0 --micro-batch 6 --batch-size 12 --eval-every 0
      --ckpt-dir ck --resume never)

# run2 ENV...: ztrain train on 2 ranks through per-rank.sh; RC, NERR
run2() {
    env "$@" timeout -s KILL 120 "$ZT_MPIRUN" --oversubscribe -np 2 --bind-to none ./per-rank.sh \
        "$ZTRAIN" train "${ARGS[@]}" > run.out 2> run.err
    RC=$?
    NERR=$(grep -c '^ztrain: error:' run.err)
    diag <(grep '^ztrain: error:' run.err)
}

run2 PER_RANK_STEPS=1 ZTRAIN_CONFIG="$ZT_SRCDIR/configs/tiny.json"
ok $([ $RC = 2 ] && [ "$NERR" = 1 ] &&
     grep -qF 'ztrain: error: the ranks read different configurations: ztrain.steps = 11 on rank 1, 10 on rank 0' run.err; echo $?) \
   "ZTRAIN_STEPS set per rank: exit $RC, one error naming rank 1, ztrain.steps and both values"

cp "$ZT_SRCDIR/configs/tiny.json" cfg0.json
sed 's/"n_layer": 2/"n_layer": 3/' "$ZT_SRCDIR/configs/tiny.json" > cfg1.json
run2 PER_RANK_CONFIG=cfg
ok $([ $RC = 2 ] && [ "$NERR" = 1 ] &&
     grep -qF 'ztrain: error: the ranks read different configurations: ztrain.model.n_layer = 3 on rank 1, 2 on rank 0' run.err; echo $?) \
   "a per-rank config file with another model on rank 1: exit $RC, one error naming rank 1, ztrain.model.n_layer and both values"

head -c 200 "$ZT_SRCDIR/configs/tiny.json" > cfg1.json
run2 PER_RANK_CONFIG=cfg
ok $([ $RC = 2 ] && [ "$NERR" = 1 ] && grep -q '^ztrain: error: rank 1: cfg1.json:[0-9]*:[0-9]*: ' run.err; echo $?) \
   "a malformed config file on rank 1 only: exit $RC, one error: rank 1's own parse error"

rm -f cfg1.json
run2 PER_RANK_CONFIG=cfg
ok $([ $RC = 2 ] && [ "$NERR" = 1 ] && grep -q '^ztrain: error: rank 1: .*cfg1.json' run.err; echo $?) \
   "a config file missing on rank 1 only: exit $RC, one error: rank 1's, naming the file"

# the same data path, different files: the data agreement (zt_ctx_open_data)
mkdir -p r0 r1
cp c_train.bin c_val.bin r0/
head -c 20000 "$ZT_SRCDIR/data/tinyshakespeare.txt" | tail -c 12000 > r1/corpus.txt
(cd r1 && "$ZTRAIN" prep --input corpus.txt --output c > /dev/null)
run2 PER_RANK_DIR=1 ZTRAIN_CONFIG="$ZT_SRCDIR/configs/tiny.json"
ok $([ $RC = 2 ] && [ "$NERR" = 1 ] &&
     grep -Eq '^ztrain: error: the ranks see different data: train.file\[0\] = c_train.bin \([0-9]+ tokens\) on rank 1, c_train.bin \([0-9]+ tokens\) on rank 0' run.err; echo $?) \
   "different data files behind the same path on rank 1: exit $RC, one error naming rank 1, the file and both token counts"

# --init-from: the config.json each rank reads (the same path, other files)
rm -rf r0/hf r1/hf
cp -r "$ZT_SRCDIR/tests/fixtures/hf/gpt2" r0/hf
cp -r "$ZT_SRCDIR/tests/fixtures/hf/gpt2" r1/hf
sed -i 's/"n_layer": 2/"n_layer": 3/' r1/hf/config.json
run2 PER_RANK_DIR=1 ZTRAIN_INIT_FROM=hf
ok $([ $RC = 2 ] && [ "$NERR" = 1 ] &&
     grep -qF 'ztrain: error: the ranks read different configurations: ztrain.model.n_layer = 3 on rank 1, 2 on rank 0' run.err; echo $?) \
   "--init-from: another config.json on rank 1: exit $RC, one error naming rank 1, ztrain.model.n_layer and both values"
head -c 300 "$ZT_SRCDIR/tests/fixtures/hf/gpt2/config.json" > r1/hf/config.json
(cd r1 && "$ZTRAIN" train --init-from hf --print-config > /dev/null 2> one.err)
RC1=$?
run2 PER_RANK_DIR=1 ZTRAIN_INIT_FROM=hf
ok $([ $RC = $RC1 ] && [ "$NERR" = 1 ] && grep -q "^ztrain: error: rank 1: $(sed 's/^ztrain: error: //' r1/one.err)\$" run.err; echo $?) \
   "--init-from: a malformed config.json on rank 1 only: exit $RC (as on one rank), one error: rank 1's own"

# threads may differ per rank: the run starts (and stops after printing
# the configuration)
ARGS+=(--print-config)
run2 PER_RANK_THREADS=1 ZTRAIN_CONFIG="$ZT_SRCDIR/configs/tiny.json"
ok $([ $RC = 0 ] && [ "$NERR" = 0 ] && grep -q 'effective configuration (2 ranks)' run.out; echo $?) \
   "ztrain.threads set per rank: no error (exit $RC)"
done_testing
