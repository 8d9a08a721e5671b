#!/bin/bash
# The script the two H200 calls of 2026-11-26 ran (as .gpu/run32.sh in the source tree, with the
# bundle at .gpu/gpu-bundle.tar.xz, carried to the device with carry [".gpu"]): the tests section of
# the bundle's GPU checks (SECS), then bench/ckpt_async.sh with --backend cuda for each of BENCHES
# (";"-separated argument lists), mpirun and ztrain pointed at the bundle's through two shims.
set -u
T0=$SECONDS
cd "$(dirname "$0")/.."
R=$PWD
mkdir -p /tmp/gb && tar xf .gpu/gpu-bundle.tar.xz -C /tmp/gb
B=/tmp/gb/gpu-bundle
head -3 $B/README
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
df -h /tmp | tail -1
mkdir -p /tmp/shim
printf '#!/bin/sh\nexec %s/run.sh mpirun "$@"\n' $B > /tmp/shim/mpirun
printf '#!/bin/sh\nexec %s/run.sh ztrain "$@"\n' $B > /tmp/shim/ztrain
chmod +x /tmp/shim/*
SECS=${SECS:-tests}
[ "$SECS" = none ] || ZT_CHECK_NOSYNC=1 $B/run.sh check $OUT "$SECS" 2>&1 | tail -20
echo "== checks done at $((SECONDS - T0)) s"
# sequential write speed of this disk (dd with fsync), as in the CPU figures
dd if=/dev/zero of=/tmp/ddtest bs=16M count=96 conv=fsync 2>&1 | tail -1; rm -f /tmp/ddtest
mkdir -p $OUT/cblogs
IFS=';' read -r -a LIST <<< "${BENCHES:-601 200 3 1024 1}"
for b in "${LIST[@]}"; do
    echo "== bench/ckpt_async.sh $b (--backend cuda) at $((SECONDS - T0)) s"
    mkdir -p "$OUT/cblogs/${b// /_}"
    PATH=/tmp/shim:$PATH ZTRAIN=/tmp/shim/ztrain BENCH_ARGS="--backend ${BK:-cuda} ${XARGS:-}" \
        CKPT_BENCH_LOGS="$OUT/cblogs/${b// /_}" bash bench/ckpt_async.sh $b 2>&1 | tail -12
done
echo "== all done at $((SECONDS - T0)) s"
