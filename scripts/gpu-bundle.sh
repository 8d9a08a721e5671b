#!/bin/bash
# gpu-bundle.sh -- a self-contained folder with ztrain's GPU checks, for a GPU
# machine that has the NVIDIA driver and the CUDA toolkit (and maybe PyTorch)
# but none of ztrain's other run-time dependencies (Open MPI, HDF5, OpenBLAS,
# jansson, ...).
#
#   scripts/gpu-bundle.sh [--with-cuda-libs] [--tar] [BUILDDIR [OUTDIR]]
#
# BUILDDIR is a tree configured with --with-cuda (default: the current
# directory); OUTDIR defaults to BUILDDIR/gpu-bundle.  The bundle holds:
#   bin/        test_cuda, test_kernels, test_comm_gpu, bench_gpu, costmodel, ztrain (the
#               real executables, not libtool's wrapper scripts)
#   lib/        libtrain.so.0 and every shared library they and the Open MPI
#               runtime load, except the C library and the CUDA driver, and
#               except the CUDA toolkit's (cudart, cuBLAS, NCCL), which come from
#               the GPU machine unless --with-cuda-libs (large: ~1 GB)
#   lib/sys/    the C library of this machine, used only when the GPU machine's
#               is older (run.sh decides)
#   ompi/, pmix/  Open MPI's and PMIx's plugins, help files and launcher
#   scripts/engine-check.sh, scripts/gpu-measure.sh, scripts/gpu-multi.sh, scripts/moe_paths.sh, configs/tiny.json, data/
#   (200 kB of the corpus), gpt2_torch.py, llama_gpu_torch.py, torch_common.py,
#   gpu_table.py, measure_json.py, costmodel_h100.txt, run.sh, README
# Then, on the GPU machine:  ./run.sh check [OUTDIR [SECTIONS]]  (all GPU checks)
#                            ./run.sh bench [STEPS]    (timings vs PyTorch)
#                            ./run.sh measure [OUTDIR] (issue 41 item 7: one JSON)
#                            ./run.sh moe-paths [ARGS] (the MoE experts' grouped GEMMs, timed)
#                            ./run.sh PROGRAM ARGS...  (one program)
# --tar also writes OUTDIR.tar.xz (about a third of the size: OpenBLAS alone
# is 36 MB), for copying to the GPU machine: tar xf gpu-bundle.tar.xz.
# Missing Debian packages of the runtime are fetched with apt-get download and
# unpacked with dpkg -x (nothing is installed).
set -euo pipefail

with_cuda_libs=0; tarball=0
while [ $# -gt 0 ]; do
    case "$1" in
        --with-cuda-libs) with_cuda_libs=1; shift ;;
        --tar) tarball=1; shift ;;
        *) break ;;
    esac
done
SRC=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(cd "${1:-.}" && pwd)
OUT=${2:-$BUILD/gpu-bundle}
die() { echo "gpu-bundle: $*" >&2; exit 1; }
[ -f "$BUILD/libtrain.la" ] || die "$BUILD is not a ztrain build directory (no libtrain.la)"
grep -q '^#define ZT_HAVE_CUDA 1' "$BUILD/ztconfig.h" || die "$BUILD was not configured --with-cuda"

progs="tests/test_cuda tests/test_kernels tests/test_comm_gpu bench/bench_gpu bench/costmodel ztrain"
echo "== building $progs"
make -s -C "$BUILD" $progs > /dev/null

MA=$(gcc -print-multiarch 2> /dev/null || echo x86_64-linux-gnu)
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT

# pkg_root PKG: the root under which PKG's files are (/ when installed, else
# a copy unpacked from `apt-get download`)
pkg_root() {
    if dpkg-query -W -f='${Status}' "$1" 2> /dev/null | grep -q 'install ok installed'; then
        echo /
    else
        mkdir -p "$TMP/root" "$TMP/deb"
        (cd "$TMP/deb" && apt-get download "$1" > /dev/null 2>&1 && dpkg -x "$(ls -t "$1"_*.deb | head -1)" "$TMP/root") ||
            die "package $1 is not installed and apt-get download $1 failed"
        echo "$TMP/root"
    fi
}

rm -rf "$OUT"
mkdir -p "$OUT/bin" "$OUT/lib/sys" "$OUT/ompi/bin" "$OUT/ompi/etc" "$OUT/ompi/share"
for p in $progs; do
    d=$(dirname "$p"); b=$(basename "$p")
    for f in "$BUILD/$d/.libs/$b" "$BUILD/$d/.libs/lt-$b" "$BUILD/$p"; do
        if [ -f "$f" ] && head -c 4 "$f" | grep -q ELF; then cp "$f" "$OUT/bin/$b"; break; fi
    done
    [ -f "$OUT/bin/$b" ] || die "no executable for $p"
done
# tests/gpu/initcheck_probe.cu (not built by make): cuBLAS's writes as
# compute-sanitizer initcheck sees them (docs/gpu.md)
nvcc=$(grep -o '^NVCC = .*' "$BUILD/Makefile" | sed 's/^NVCC = //')
[ -x "$nvcc" ] || nvcc=${CUDA_HOME:-/usr/local/cuda}/bin/nvcc
"$nvcc" -O2 -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 \
    -o "$OUT/bin/initcheck_probe" "$SRC/tests/gpu/initcheck_probe.cu" -lcublas ||
    die "nvcc could not build tests/gpu/initcheck_probe.cu"
cp -L "$BUILD/.libs/libtrain.so.0" "$OUT/lib/"
cp "$SRC/bench/gpt2_torch.py" "$SRC/bench/llama_gpu_torch.py" "$SRC/bench/torch_common.py" "$SRC/bench/gpu_table.py" \
    "$SRC/bench/measure_json.py" "$SRC/bench/costmodel_h100.txt" "$OUT/"
# the engine check and the training runs of run.sh: the script, the tiny
# config and 200 kB of the corpus (tokenized on the GPU machine by ztrain prep)
mkdir -p "$OUT/scripts" "$OUT/configs" "$OUT/data"
cp "$SRC/scripts/engine-check.sh" "$SRC/scripts/gpu-measure.sh" "$SRC/scripts/gpu-multi.sh" "$SRC/bench/moe_paths.sh" \
    "$OUT/scripts/"
cp "$SRC/configs/tiny.json" "$SRC/configs/llama-tiny.json" "$SRC/configs/gemma2-tiny.json" "$OUT/configs/"
head -c 200000 "$SRC/data/tinyshakespeare.txt" > "$OUT/data/tinyshakespeare.txt"

echo "== Open MPI and PMIx runtime"
ompi_root=$(pkg_root libopenmpi3)
bin_root=$(pkg_root openmpi-bin)
common_root=$(pkg_root openmpi-common)
pmix_root=$(pkg_root libpmix2)
plugins=$ompi_root/usr/lib/$MA/openmpi/lib/openmpi3
[ -d "$plugins" ] || die "Open MPI plugins not found at $plugins"
cp -a "$plugins" "$OUT/ompi/lib-openmpi3"
# one node, shared memory: drop the network / OpenSHMEM / Java plugins (and
# the libraries they would pull in); run.sh selects ob1 + vader
(cd "$OUT/ompi/lib-openmpi3" &&
 rm -f mca_*ucx* mca_*ofi* mca_*openib* mca_*usnic* mca_*uct* mca_mtl_* mca_*psm* mca_*verbs* \
       mca_*java* mca_fs_lustre* mca_fs_gpfs* mca_*portals* mca_spml_* mca_sshmem_* mca_atomic_* \
       mca_scoll_* mca_memheap_* mca_*udreg* mca_*ugni* mca_*cuda*)
cp -a "$common_root/usr/share/openmpi" "$OUT/ompi/share/openmpi"
[ -d "$common_root/etc/openmpi" ] && cp -a "$common_root/etc/openmpi/." "$OUT/ompi/etc/"
cp -L "$bin_root/usr/bin/orterun" "$OUT/ompi/bin/mpirun"
cp -L "$bin_root/usr/bin/orted" "$OUT/ompi/bin/orted"
if [ -d "$pmix_root/usr/lib/$MA/pmix2" ]; then cp -a "$pmix_root/usr/lib/$MA/pmix2" "$OUT/pmix"; fi

echo "== shared libraries"
# libraries never bundled: the C library (lib/sys/ has a copy), the driver
system_re='^(linux-vdso|ld-linux|libc\.so|libm\.so|libpthread\.so|libdl\.so|librt\.so|libresolv\.so|libutil\.so|libgcc_s\.so|libcuda\.so|libnvidia-)'
# cuDNN: libcudnn.so.9 is a small shim that loads its sub-libraries
# (libcudnn_graph, _engines_*, _heuristic, _ops, ...: ~490 MB) at run time,
# which ldd does not list; they must be of the shim's very version (else
# CUDNN_STATUS_SUBLIBRARY_VERSION_MISMATCH).  So the shim is never bundled
# alone: the GPU machine's cuDNN (its toolkit's, or PyTorch's nvidia-cudnn
# package, on run.sh's LD_LIBRARY_PATH) is used whole, or with
# --with-cuda-libs this machine's shim and every sub-library beside it.
cuda_re='^(libcudart|libcublas|libcublasLt|libnccl|libnvrtc|libnvJitLink|libcurand|libcufft|libcudnn)\.so'
extra_path="$ompi_root/usr/lib/$MA/openmpi/lib:$ompi_root/usr/lib/$MA:$pmix_root/usr/lib/$MA"
missing=""
elfs=$(find "$OUT/bin" "$OUT/lib" "$OUT/ompi" "$OUT/pmix" -type f \( -name '*.so*' -o -perm -u+x \) 2> /dev/null |
       while read -r f; do head -c 4 "$f" | grep -q ELF && echo "$f"; done)
for f in $elfs; do
    LD_LIBRARY_PATH="$OUT/lib:$extra_path:${LD_LIBRARY_PATH:-}" ldd "$f" 2> /dev/null || true
done | awk '/=>/ { print $1, $3 }' | sort -u > "$TMP/deps"
while read -r name path; do
    if [ "$path" = "not" ]; then missing="$missing $name"; continue; fi
    if echo "$name" | grep -Eq "$system_re"; then
        case "$name" in libcuda.so*|libnvidia-*) ;; *) cp -L "$path" "$OUT/lib/sys/$name" ;; esac
        continue
    fi
    if echo "$name" | grep -Eq "$cuda_re" && [ $with_cuda_libs = 0 ]; then continue; fi
    [ -f "$OUT/lib/$name" ] || cp -L "$path" "$OUT/lib/$name"
    case "$name" in   # (--with-cuda-libs) cuDNN's sub-libraries, of the shim's version, beside it
        libcudnn.so*)
            for sub in "$(dirname "$path")"/libcudnn_*.so.[0-9]*; do
                [ -f "$sub" ] && [ ! -f "$OUT/lib/$(basename "$sub")" ] && cp -L "$sub" "$OUT/lib/"
            done ;;
    esac
done < "$TMP/deps"
# the loader itself, for lib/sys/
ld=$(ldd "$OUT/bin/test_cuda" | awk '/ld-linux/ { print $1 }')
[ -n "$ld" ] && cp -L "$ld" "$OUT/lib/sys/$(basename "$ld")"
# missing libs that are CUDA's come from the GPU machine; others are errors
for m in $missing; do
    echo "$m" | grep -Eq "$cuda_re|^libcuda" || echo "gpu-bundle: warning: $m not found on this machine" >&2
done
getconf GNU_LIBC_VERSION | awk '{ print $2 }' > "$OUT/lib/sys/GLIBC_VERSION"

cat > "$OUT/run.sh" <<'RUN'
#!/bin/bash
# run.sh -- run ztrain's GPU checks from this bundle (see README).
#   ./run.sh check [OUTDIR [SECTIONS]]  GPU checks, logs in OUTDIR (default: $OUT or ./out)
#   ./run.sh bench [STEPS]      kernel timings and the GPT-2 step, next to PyTorch ($OUT/bench.txt)
#   ./run.sh PROGRAM ARGS...    one program of bin/ (or mpirun)
set -uo pipefail
B=$(cd "$(dirname "$0")" && pwd)

# CUDA libraries of this machine: the toolkit, then pip's nvidia-* packages
# (PyTorch's NCCL, say)
cuda_dirs=""
for d in "${CUDA_HOME:-/usr/local/cuda}/lib64" /usr/local/cuda/lib64 /usr/local/cuda-13*/lib64 \
         /usr/lib/x86_64-linux-gnu; do
    [ -d "$d" ] && cuda_dirs="$cuda_dirs:$d"
done
py_dirs=$(python3 - 2> /dev/null <<'PY'
import glob, os, site
roots = site.getsitepackages() + [site.getusersitepackages()]
for r in roots:
    for d in sorted(glob.glob(os.path.join(r, "nvidia", "*", "lib"))):
        print(d)
PY
)
for d in $py_dirs; do cuda_dirs="$cuda_dirs:$d"; done
export LD_LIBRARY_PATH="$B/lib${cuda_dirs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# cuDNN whole from one directory: the first on the path with the shim
# (libcudnn.so.9) and its sub-libraries beside it goes first, so that the shim
# loads sub-libraries of its own version (ZT_BUNDLE_CUDNN: that directory, or
# "none"; gpu-measure.sh prints it)
ZT_BUNDLE_CUDNN=none
IFS=: read -r -a ld_dirs <<< "$LD_LIBRARY_PATH"
for d in "${ld_dirs[@]}"; do
    if [ -n "$d" ] && [ -e "$d/libcudnn.so.9" ] && [ -e "$d/libcudnn_graph.so.9" ]; then
        ZT_BUNDLE_CUDNN=$d; break
    fi
done
[ "$ZT_BUNDLE_CUDNN" != none ] && LD_LIBRARY_PATH="$B/lib:$ZT_BUNDLE_CUDNN:$LD_LIBRARY_PATH"
export ZT_BUNDLE_CUDNN

# Open MPI and PMIx from the bundle
export OPAL_PREFIX="$B/ompi" OPAL_BINDIR="$B/ompi/bin" OPAL_LIBDIR="$B/lib"
export OPAL_PKGLIBDIR="$B/ompi/lib-openmpi3" OPAL_DATADIR="$B/ompi/share" OPAL_DATAROOTDIR="$B/ompi/share"
export OPAL_PKGDATADIR="$B/ompi/share/openmpi" OPAL_SYSCONFDIR="$B/ompi/etc"
export OMPI_MCA_mca_base_component_path="$B/ompi/lib-openmpi3"
export PMIX_MCA_mca_base_component_path="$B/pmix/lib/pmix" PMIX_INSTALL_PREFIX="$B/pmix"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader
export OMPI_MCA_osc=^ucx OMPI_MCA_mtl=^ofi,psm,psm2
export PATH="$B/ompi/bin:$PATH"

# an older C library here than where the bundle was made: use the bundle's
own_loader=0
mine=$(getconf GNU_LIBC_VERSION 2> /dev/null | awk '{ print $2 }')
need=$(cat "$B/lib/sys/GLIBC_VERSION" 2> /dev/null || echo 0)
if [ -n "$mine" ] && [ "$(printf '%s\n%s\n' "$need" "$mine" | sort -V | head -1)" != "$need" ]; then
    own_loader=1
    echo "run.sh: this machine's glibc $mine is older than the bundle's $need: using lib/sys/" >&2
fi
# bincmd PROGRAM: CMD=(how to run bin/PROGRAM here), through the bundle's
# loader when this machine's C library is older
bincmd() {
    local p=$1
    [ -x "$B/bin/$p" ] && p="$B/bin/$p"
    if [ $own_loader = 1 ] && [ "${p#"$B"/bin/}" != "$p" ]; then
        CMD=("$B"/lib/sys/ld-linux-x86-64.so.2 --library-path "$B/lib/sys:$LD_LIBRARY_PATH" "$p")
    else
        CMD=("$p")
    fi
}
run_bin() {  # run_bin PROGRAM ARGS...
    bincmd "$1"; shift
    "${CMD[@]}" "$@"
}
# ztrain as one command (a wrapper script when the loader is needed), for
# mpirun and compute-sanitizer
ZT=$B/bin/ztrain
if [ $own_loader = 1 ]; then
    mkdir -p "${TMPDIR:-/tmp}/ztrain-bundle-$$"
    ZT=${TMPDIR:-/tmp}/ztrain-bundle-$$/ztrain
    printf '#!/bin/sh\nexec "%s" --library-path "%s" "%s" "$@"\n' "$B/lib/sys/ld-linux-x86-64.so.2" \
        "$B/lib/sys:$LD_LIBRARY_PATH" "$B/bin/ztrain" > "$ZT"
    chmod +x "$ZT"
fi
MPIRUN=$B/ompi/bin/mpirun

# tap FILE LABEL TIMEOUT CMD...: run CMD (bounded), append its output to FILE
# under a header, print one summary line and its first failures
tap() {
    local file=$1 label=$2 lim=$3; shift 3
    local tmp t0=$SECONDS rc
    tmp=$(mktemp)
    timeout -k 10 "$lim" "$@" > "$tmp" 2>&1
    rc=$?
    { echo "==== $label: $* (exit $rc, $((SECONDS - t0)) s)"; cat "$tmp"; } >> "$file"
    printf '%-40s %4d ok, %3d not ok, %3d skipped  (exit %d%s, %d s)\n' "$label" \
        "$(grep -c '^ok ' "$tmp")" "$(grep -c '^not ok ' "$tmp")" "$(grep -ci '# SKIP' "$tmp")" "$rc" \
        "$([ $rc = 124 ] && echo ": timed out after ${lim}s")" "$((SECONDS - t0))"
    grep -E '^not ok|^Bail out|^1\.\.0' "$tmp" | head -5 | sed 's/^/    /'
    rm -f "$tmp"
}
# over_budget NAME: true (and says so) once the check has run longer than
# ZT_CHECK_BUDGET seconds (default 480), so the rest is skipped, not cut off
over_budget() {
    if [ "$SECONDS" -ge "${ZT_CHECK_BUDGET:-480}" ]; then
        echo "SKIP $1: past the time budget (${ZT_CHECK_BUDGET:-480} s; ZT_CHECK_BUDGET)"
        return 0
    fi
    return 1
}
# the tiny corpus, tokenized once (ztrain prep: byte tokens)
prep_corpus() {
    [ -f "$work/c_train.bin" ] && return 0
    head -c 200000 "$B/data/tinyshakespeare.txt" > "$work/corpus.txt"
    (cd "$work" && "$ZT" prep --input corpus.txt --output c > prep.out 2>&1) ||
        { echo "ztrain prep failed:"; cat "$work/prep.out"; return 1; }
}
# GPT-2 124M: 12 layers, 12 heads, 768 wide, vocab 50304 (padded GPT-2), context
# 1024, micro-batch 8 (bench_gpu's and gpt2_torch.py's default batch), trained
# on the byte-tokenized tiny corpus: tokens < 256 of a 50304 vocabulary, which
# the engine accepts (targets < vocab); the shape, not the text, sets the cost
read -r -a GPT2 <<< "${ZT_CHECK_MODEL:---n-layer 12 --n-head 12 --n-embd 768 --vocab 50304 --context 1024 --micro-batch 8 --batch-size 8}"
# peak GPU memory of this machine's compute processes while CMD runs, sampled
# by nvidia-smi every 100 ms (MiB; includes the CUDA context and allocator slack)
smi_peak() {  # smi_peak FILE CMD...
    local f=$1; shift
    local pid=""
    if command -v nvidia-smi > /dev/null; then
        nvidia-smi --query-compute-apps=used_memory --format=csv,noheader,nounits -lms 100 > "$f" 2> /dev/null &
        pid=$!
    fi
    "$@"; local rc=$?
    [ -n "$pid" ] && { kill "$pid" 2> /dev/null; wait "$pid" 2> /dev/null; }
    return $rc
}

case "${1:-}" in
check)
    # run.sh check [OUTDIR] [SECTIONS]: SECTIONS a comma list of tests, engine,
    # memory, sanitizer (default all).  ZT_CHECK_BACKEND (default cuda) is the
    # engine's backend under test: cpu-strict runs the same plumbing without
    # a GPU.  At most 7 files are written to OUTDIR.
    out=${2:-${OUT:-$PWD/out}}
    sections=,${3:-tests,engine,memory,sanitizer},
    X=${ZT_CHECK_BACKEND:-cuda}
    mkdir -p "$out" || exit 1
    out=$(cd "$out" && pwd)
    work=$(mktemp -d "${TMPDIR:-/tmp}/ztcheck.XXXXXX")
    trap 'rm -rf "$work" "${TMPDIR:-/tmp}/ztrain-bundle-$$"' EXIT
    exec > >(tee -a "$out/summary.txt") 2>&1
    echo "== GPU checks $(date -u +%FT%TZ) on $(uname -n), backend $X; sections ${sections//,/ }; logs in $out"
    cat "$B/README" | head -2
    gpu=1
    if ! nvidia-smi -L > "$work/smi" 2>&1 || ! grep -q '^GPU' "$work/smi"; then
        gpu=0; echo "no GPU visible: $(head -1 "$work/smi")"
    fi
    cat "$work/smi"
    nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,power.limit --format=csv 2> /dev/null
    needgpu() {  # needgpu WHAT: false (and SKIP) when backend cuda has no GPU
        [ "$X" != cuda ] || [ $gpu = 1 ] && return 0
        echo "SKIP $1: no GPU visible"; return 1
    }
    missing=$(ldd "$B/bin/test_cuda" 2> /dev/null | grep 'not found')
    [ -n "$missing" ] && { echo "run.sh: missing libraries:"; echo "$missing"; }

    # ---- 1. the test programs: tests.tap
    if [[ $sections == *,tests,* ]]; then
        echo "== tests (tests.tap)"
        bincmd test_kernels; tap "$out/tests.tap" test_kernels 120 "${CMD[@]}"
        bincmd test_cuda; tap "$out/tests.tap" test_cuda 240 "${CMD[@]}"
        # the same with a synchronization after every kernel (errors at the launch that made them);
        # ZT_CHECK_NOSYNC=1 leaves it out
        [ "${ZT_CHECK_NOSYNC:-0}" = 1 ] ||
            { bincmd test_cuda; tap "$out/tests.tap" "test_cuda ZT_CUDA_SYNC=1" 240 env ZT_CUDA_SYNC=1 "${CMD[@]}"; }
        for n in 1 2; do
            tap "$out/tests.tap" "test_comm_gpu -np $n" 120 "$MPIRUN" -np "$n" --bind-to none "$B/bin/test_comm_gpu"
        done
    fi

    # ---- 2. the engine on the device vs the cpu backend: engine.tap, engine.log
    if [[ $sections == *,engine,* ]] && needgpu "engine check"; then
        echo "== engine check: ztrain train --backend $X vs --backend cpu (engine.tap; runs in engine.log)"
        ec=(bash "$B/scripts/engine-check.sh" --backend "$X" --ztrain "$ZT" --mpirun "$MPIRUN"
            --config "$B/configs/tiny.json" --text "$B/data/tinyshakespeare.txt" --log "$out/engine.log")
        export ZT_ENGINE_THREADS=${ZT_ENGINE_THREADS:-4} ZT_ENGINE_TIMEOUT=${ZT_ENGINE_TIMEOUT:-120}
        over_budget "engine, 1 rank" ||
            tap "$out/engine.tap" "engine 1 rank (comm mpi)" 300 "${ec[@]}" --np 1 --comm-backend mpi
        over_budget "engine, 2 ranks" ||
            tap "$out/engine.tap" "engine 2 ranks (host-staged)" 300 "${ec[@]}" --np 2 --comm-backend mpi
        if [ "$X" = cuda ]; then
            over_budget "engine, nccl" ||
                tap "$out/engine.tap" "engine 1 rank (comm nccl)" 200 "${ec[@]}" --np 1 --comm-backend nccl \
                    --cases "s0 s3 bf16s3 resume"
        fi
        # sequence parallelism (--sp 2, Llama): 2 ranks on this GPU, host-staged (NCCL wants a GPU each)
        over_budget "engine, sequence parallel" ||
            tap "$out/engine.tap" "engine 2 ranks, llama --sp 2 (host-staged)" 300 bash "$B/scripts/engine-check.sh" \
                --backend "$X" --ztrain "$ZT" --mpirun "$MPIRUN" --config "$B/configs/llama-tiny.json" \
                --text "$B/data/tinyshakespeare.txt" --log "$out/engine-sp.log" --np 2 --comm-backend mpi \
                --cases none --case "sp2s3 fp32 --stage 3 --sp 2 --micro-batch 8 --act-ckpt blocks" \
                --case "sp2bf16 bf16 --stage 3 --sp 2 --micro-batch 8"
        # the other architectures at 1 rank: Llama (GQA, RoPE, SwiGLU) and Gemma 2 (soft-capping,
        # sliding-window layers, scaled embeddings); cases fp32 stage 0, bf16 stage 3, resume
        for a in llama gemma2; do
            over_budget "engine, $a" ||
                tap "$out/engine.tap" "engine 1 rank, $a (comm mpi)" 200 bash "$B/scripts/engine-check.sh" \
                    --backend "$X" --ztrain "$ZT" --mpirun "$MPIRUN" --config "$B/configs/$a-tiny.json" \
                    --text "$B/data/tinyshakespeare.txt" --log "$out/engine.log" --np 1 --comm-backend mpi \
                    --cases "s0 bf16s3 resume"
        done
    fi

    # ---- 3. memory: ztrain estimate vs the run's --memory-report (memory.txt)
    if [[ $sections == *,memory,* ]] && needgpu "memory" && prep_corpus; then
        echo "== memory: GPT-2 124M shape, bf16, 1 rank: ztrain estimate vs --memory-report (memory.txt)"
        mem="$out/memory.txt"
        for v in "s0:--stage 0" "s3:--stage 3" "s3off:--stage 3 --offload optimizer"; do
            tag=${v%%:*}; read -r -a extra <<< "${v#*:}"
            over_budget "memory $tag" && continue
            args=(--config "$B/configs/tiny.json" --train "$work/c_train.bin" --val= "${GPT2[@]}"
                  --precision bf16 "${extra[@]}")
            "$ZT" estimate --world-size 1 --device gpu --json "${args[@]}" > "$work/est_$tag.json" 2> "$work/est_$tag.err"
            "$ZT" estimate --world-size 1 --device gpu "${args[@]}" > "$work/est_$tag.txt" 2>&1
            t0=$SECONDS
            smi_peak "$work/smi_$tag" timeout -k 10 240 "$MPIRUN" -np 1 --bind-to none "$ZT" train "${args[@]}" \
                --backend "$X" --steps 3 --log-every 1 --resume never --sample-tokens 0 --memory-report \
                --ckpt-dir "$work/ck_$tag" --save "$work/ck_$tag/model.bin" --metrics "$work/m_$tag.jsonl" \
                > "$work/train_$tag.out" 2>&1
            rc=$?
            rm -rf "$work/ck_$tag"
            {
                echo "==== $tag: ${extra[*]} (train exit $rc, $((SECONDS - t0)) s)"
                echo "-- ztrain estimate --world-size 1 --device gpu ${args[*]}"
                cat "$work/est_$tag.txt" "$work/est_$tag.err"
                echo "-- ztrain train --backend $X ... --steps 3 --memory-report"
                grep -vE '^  [a-z_0-9.]+ += ' "$work/train_$tag.out"
            } >> "$mem"
            python3 - "$tag" "$rc" "$work/est_$tag.json" "$work/train_$tag.out" "$work/smi_$tag" <<'PY' | tee -a "$mem"
import json, re, sys
tag, rc, est, out, smi = sys.argv[1:6]
G = 2**30
try:
    e = json.load(open(est)); dev = e["device"]["peak_bytes"]; host = e["host"]["peak_bytes"]
    eor = e.get("end_of_run_peak_bytes", 0)
except Exception as x:
    print(f"  {tag}: no estimate ({x})"); sys.exit(0)
both = dev + host
print(f"  {tag}: ztrain estimate --device gpu: device peak {dev / G:.3f} GiB + host {host / G:.3f} GiB = "
      f"{both / G:.3f} GiB{f' (end of run: device {eor / G:.3f} GiB)' if eor else ''}; train exit {rc}")
def ratio(n, what):
    ref = dev if "device" in what.lower() else both
    return f"{n / G:.3f} GiB = {n / ref:.3f} x estimate {'device' if ref == dev else 'device+host'}"
# every "<what> <N> bytes" on the run's peak lines: the engine's accounted
# peak (device + host blocks), its own setup prediction, and whatever the
# memory report adds (e.g. a measured device peak)
seen = False
host_peak = 0.0
for line in open(out):
    m = re.match(r"\s+[a-z-]+\s+[\d.]+ [KMG]?i?B\s+([\d.]+) ([KMG]?i?B)\s.*\(in host memory: ([\d.]+) MiB\)", line)
    if m:
        host_peak += float(m.group(3)) * 2**20
    if "peak" not in line or "bytes" not in line:
        continue
    for what, n in re.findall(r"([A-Za-z][A-Za-z ()_-]*?)\s*[:=]?\s*(\d{4,}) bytes", line):
        seen = True
        print(f"  {tag}: run: {line.split(':')[0].strip()}, {what.strip()}: {ratio(int(n), line.split(':')[0] + what)}")
if not seen:
    print(f"  {tag}: the run printed no 'peak ... N bytes' line (see memory.txt)")
if host_peak:
    print(f"  {tag}: run: of the accounted peaks, in host memory (sum over categories): {host_peak / G:.3f} GiB")
try:
    mib = [float(v) for v in open(smi).read().split() if re.match(r"^[0-9.]+$", v)]
    if mib:
        n = max(mib) * 2**20
        proc = e.get("process_peak_bytes", 0)
        print(f"  {tag}: nvidia-smi process peak (CUDA context, cuBLAS workspace, allocator slack included): "
              f"{n / G:.3f} GiB = {n / dev:.3f} x estimate device"
              + (f", {n / proc:.3f} x estimate per process ({proc / G:.3f} GiB, with the CUDA context)"
                 if proc else ""))
except OSError:
    pass
PY
        done
    fi

    # ---- 4. compute-sanitizer: sanitizer.txt
    if [[ $sections == *,sanitizer,* ]] && needgpu "sanitizer"; then
        san=$(command -v compute-sanitizer || ls "${CUDA_HOME:-/usr/local/cuda}"/bin/compute-sanitizer 2> /dev/null)
        if [ -z "$san" ] || [ "$X" != cuda ]; then
            echo "SKIP compute-sanitizer: ${san:+backend $X is not cuda}${san:-not found}"
        elif prep_corpus; then
            echo "== compute-sanitizer (sanitizer.txt)"
            # sanitize NAME TIMEOUT TOOL CMD...
            sanitize() {
                local name=$1 lim=$2 tool=$3; shift 3
                over_budget "$tool $name" && return
                local t0=$SECONDS f="$work/san.txt"
                timeout -k 10 "$lim" "$@" > "$f" 2>&1
                local rc=$?
                { echo "==== $tool $name (exit $rc, $((SECONDS - t0)) s)"; head -c 4000000 "$f"; } >> "$out/sanitizer.txt"
                printf '%-40s exit %d%s  %s  (%d s)\n' "$tool $name" "$rc" \
                    "$([ $rc = 124 ] && echo " (timed out after ${lim}s)")" \
                    "$(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$f" | tail -1)" "$((SECONDS - t0))"
            }
            so=(--error-exitcode 3 --print-limit 20)
            tiny=(train --config "$B/configs/tiny.json" --train "$work/c_train.bin" --val "$work/c_val.bin"
                  --backend cuda --steps 3 --eval-every 3 --eval-batches 1 --log-every 1 --resume never
                  --sample-tokens 8 --ckpt-dir "$work/ck_san" --save "$work/ck_san/model.bin")
            # training steps first (the issue's check), then the kernels' test
            sanitize "ztrain train (tiny, 3 steps, stage 0)" 240 memcheck \
                "$MPIRUN" -np 1 --bind-to none "$san" --tool memcheck "${so[@]}" "$ZT" "${tiny[@]}" --stage 0
            sanitize "ztrain train (tiny, 3 steps, stage 3 bf16)" 240 memcheck \
                "$MPIRUN" -np 1 --bind-to none "$san" --tool memcheck "${so[@]}" "$ZT" "${tiny[@]}" --stage 3 \
                --precision bf16
            bincmd test_cuda
            for tool in memcheck synccheck initcheck; do
                sanitize "test_cuda (quick)" 150 "$tool" env ZT_CUDA_TEST_QUICK=1 "$san" --tool "$tool" "${so[@]}" \
                    "${CMD[@]}"
            done
            for tool in racecheck synccheck; do
                sanitize "ztrain train (tiny, 2 steps)" 150 "$tool" \
                    "$MPIRUN" -np 1 --bind-to none "$san" --tool "$tool" "${so[@]}" "$ZT" "${tiny[@]}" --steps 2
            done
            # Llama and Gemma 2 (their attention and RoPE kernels), bf16, stage 3
            arch=(train --train "$work/c_train.bin" --val "$work/c_val.bin" --backend cuda --eval-every 2
                  --eval-batches 1 --log-every 1 --resume never --sample-tokens 8 --ckpt-dir "$work/ck_san")
            for a in llama gemma2; do
                for tool in memcheck racecheck; do
                    sanitize "ztrain train ($a tiny, 2 steps, bf16 stage 3)" 150 "$tool" \
                        "$MPIRUN" -np 1 --bind-to none "$san" --tool "$tool" "${so[@]}" "$ZT" "${arch[@]}" \
                        --config "$B/configs/$a-tiny.json" --steps 2 --stage 3 --precision bf16
                done
            done
            # racecheck of every kernel test last: the slowest (about 150 s on an H200), given what
            # is left of the budget
            left=$(( ${ZT_CHECK_BUDGET:-480} - SECONDS ))
            [ $left -gt 150 ] && left=150
            if [ $left -ge 30 ]; then
                bincmd test_cuda
                sanitize "test_cuda (quick)" "$left" racecheck env ZT_CUDA_TEST_QUICK=1 "$san" --tool racecheck \
                    "${so[@]}" "${CMD[@]}"
            else
                echo "SKIP racecheck test_cuda (quick): past the time budget (${ZT_CHECK_BUDGET:-480} s; ZT_CHECK_BUDGET)"
            fi
        fi
    fi
    echo "== done in $SECONDS s; failures:"
    grep -h '^not ok' "$out"/*.tap 2> /dev/null | head -20
    ls -l "$out"
    ;;
bench)
    # run.sh bench [STEPS]: bench_gpu (kernels, table step), ztrain train on
    # GPT-2 124M (bf16, 1 rank; stages ZT_BENCH_STAGES, default "0 3"), and
    # bench/gpt2_torch.py at the same shape, then one table; all in
    # $OUT/bench.txt (or ./bench.txt).  ZT_BENCH_SHAPE=L,H,C,V,B,T changes
    # the shape of all three.
    steps=${2:-10}
    bout=${OUT:-$PWD}; mkdir -p "$bout"; bout=$(cd "$bout" && pwd)
    work=$(mktemp -d "${TMPDIR:-/tmp}/ztbench.XXXXXX")
    trap 'rm -rf "$work" "${TMPDIR:-/tmp}/ztrain-bundle-$$"' EXIT
    exec > >(tee -a "$bout/bench.txt") 2>&1
    shape=${ZT_BENCH_SHAPE:-12,12,768,50304,8,1024}
    IFS=, read -r L H C V Bt T <<< "$shape"
    echo "== bench $(date -u +%FT%TZ) on $(uname -n): shape L,H,C,V,B,T = $shape, $steps steps"
    head -1 "$B/README"
    nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,power.limit --format=csv 2> /dev/null
    echo "== bench_gpu (kernels on GPT-2 shapes, then the table step)"
    bincmd bench_gpu
    timeout -k 10 420 "${CMD[@]}" --steps "$steps" --shape "$shape" > "$work/bench_gpu.txt" 2>&1
    echo "bench_gpu: exit $?"; cat "$work/bench_gpu.txt"
    prep_corpus || exit 1
    zt=()
    for s in ${ZT_BENCH_STAGES:-0 3}; do
        echo "== ztrain train --backend cuda, GPT-2 shape, bf16, stage $s, 1 rank, $((steps + 2)) steps"
        timeout -k 10 300 "$MPIRUN" -np 1 --bind-to none "$ZT" train --config "$B/configs/tiny.json" \
            --train "$work/c_train.bin" --val= --n-layer "$L" --n-head "$H" --n-embd "$C" --vocab "$V" \
            --context "$T" --micro-batch "$Bt" --batch-size "$Bt" --precision bf16 --stage "$s" \
            --backend cuda --steps $((steps + 2)) --log-every 1 --resume never --sample-tokens 0 \
            --ckpt-dir "$work/ck" --save "$work/ck/model.bin" --metrics "$work/zt_s$s.jsonl" \
            > "$work/zt_s$s.out" 2>&1
        echo "ztrain: exit $?"
        grep -vE '^  [a-z_0-9.]+ += ' "$work/zt_s$s.out"
        rm -rf "$work/ck"
        zt+=(--ztrain "(engine, stage $s, 1 rank):$work/zt_s$s.jsonl:$work/zt_s$s.out")
    done
    echo "== PyTorch (gpt2_torch.py)"
    if python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2> /dev/null; then
        timeout -k 10 420 python3 "$B/gpt2_torch.py" --steps "$steps" --shape "$shape" > "$work/torch.txt" 2>&1
        echo "gpt2_torch.py: exit $?"; cat "$work/torch.txt"
    else
        echo "PyTorch with CUDA not importable: baseline skipped"
    fi
    echo "== GPT-2 step, one table (ztrain: median of steps 3..$((steps + 2)); MFU: bench/README.md)"
    python3 "$B/gpu_table.py" --bench-gpu "$work/bench_gpu.txt" --torch "$work/torch.txt" "${zt[@]}"
    ;;
llama)
    # run.sh llama [STEPS [SHAPE [STAGES]]]: ztrain train --arch llama (bf16,
    # 1 rank, at each of STAGES, default "0") and bench/llama_gpu_torch.py
    # (eager, bf16 autocast) at SHAPE = L,NH,NKV,C,H,V,B,T (default
    # SmolLM-135M: 30,9,3,576,1536,49152,8,2048), then one table; appended to
    # $OUT/bench.txt (or ./bench.txt)
    steps=${2:-10}
    shape=${3:-30,9,3,576,1536,49152,8,2048}
    bout=${OUT:-$PWD}; mkdir -p "$bout"; bout=$(cd "$bout" && pwd)
    work=$(mktemp -d "${TMPDIR:-/tmp}/ztbench.XXXXXX")
    trap 'rm -rf "$work" "${TMPDIR:-/tmp}/ztrain-bundle-$$"' EXIT
    exec > >(tee -a "$bout/bench.txt") 2>&1
    IFS=, read -r L NH NKV C H V Bt T <<< "$shape"
    echo "== llama $(date -u +%FT%TZ) on $(uname -n): shape L,NH,NKV,C,H,V,B,T = $shape, $steps steps"
    prep_corpus || exit 1
    zt=()
    for s in ${4:-0}; do
        echo "== ztrain train --backend cuda, Llama shape, bf16, stage $s, 1 rank, $((steps + 2)) steps"
        timeout -k 10 400 "$MPIRUN" -np 1 --bind-to none "$ZT" train --config "$B/configs/llama-tiny.json" \
            --train "$work/c_train.bin" --val= --n-layer "$L" --n-head "$NH" --n-kv-head "$NKV" \
            --n-embd "$C" --intermediate-size "$H" --vocab "$V" --context "$T" --seq-len "$T" \
            --micro-batch "$Bt" --batch-size "$Bt" --precision bf16 --stage "$s" --backend cuda \
            --steps $((steps + 2)) --log-every 1 --resume never --sample-tokens 0 --eval-every 0 \
            --ckpt-dir "$work/ck" --metrics "$work/zl_s$s.jsonl" > "$work/zl_s$s.out" 2>&1
        echo "ztrain: exit $?"
        grep -vE '^  [a-z_0-9.]+ += ' "$work/zl_s$s.out" | grep -v '^step ' | head -40
        grep '^step ' "$work/zl_s$s.out" | tail -3
        # checkpoint restore speed: one more step from the checkpoint just saved.
        # Its final save needs a second checkpoint's room beside the first:
        # on a 64 GiB disk the 3B shape's 36 GiB do not fit twice (the cause
        # of the resume's exit 1 on 2026-11-26; the run now warns at start)
        echo "checkpoint dir: $(du -sh "$work/ck" 2> /dev/null | cut -f1) used, $(df -h --output=avail "$work" | tail -n 1 | tr -d ' ') free"
        timeout -k 10 300 "$MPIRUN" -np 1 --bind-to none "$ZT" train --config "$B/configs/llama-tiny.json" \
            --train "$work/c_train.bin" --val= --n-layer "$L" --n-head "$NH" --n-kv-head "$NKV" \
            --n-embd "$C" --intermediate-size "$H" --vocab "$V" --context "$T" --seq-len "$T" \
            --micro-batch "$Bt" --batch-size "$Bt" --precision bf16 --stage "$s" --backend cuda \
            --steps $((steps + 3)) --log-every 1 --resume auto --sample-tokens 0 --eval-every 0 \
            --ckpt-dir "$work/ck" > "$work/zl_r$s.out" 2>&1
        echo "ztrain (resume): exit $?"
        grep -E '^(checkpoint: resumed|ztrain: error|warning: )' "$work/zl_r$s.out" | head -5
        rm -rf "$work/ck"
        zt+=(--ztrain "(engine, Llama, stage $s, 1 rank):$work/zl_s$s.jsonl:$work/zl_s$s.out")
    done
    echo "== PyTorch (llama_gpu_torch.py, eager)"
    timeout -k 10 400 python3 "$B/llama_gpu_torch.py" --steps "$steps" --shape "$shape" --only bf16 \
        > "$work/torch.txt" 2>&1
    echo "llama_gpu_torch.py: exit $?"; cat "$work/torch.txt"
    echo "== Llama step, one table (ztrain: median of steps 3..$((steps + 2)); MFU: bench/README.md)"
    python3 "$B/gpu_table.py" --torch "$work/torch.txt" "${zt[@]}"
    ;;
moe-paths)
    # run.sh moe-paths [ARGS]: bench/moe_paths.sh --backend cuda ARGS (the
    # MoE experts' grouped GEMMs against a GEMM an expert, with the cost
    # model's prediction of each; about a minute at its default shape)
    shift
    bincmd costmodel
    COSTMODEL="${CMD[*]}" ZTRAIN="$ZT" MPIRUN="$MPIRUN" bash "$B/scripts/moe_paths.sh" --backend cuda "$@"
    rc=$?
    rm -rf "${TMPDIR:-/tmp}/ztrain-bundle-$$"
    exit $rc ;;
measure)
    # run.sh measure [OUTDIR]: scripts/gpu-measure.sh (issue 41 item 7):
    # device and clocks, test_cuda quick, engine check s0, then per shape
    # ztrain train bf16 stage 0, ztrain estimate, the cost model, PyTorch eager
    # and torch.compile; compute-sanitizer memcheck last; within
    # ZT_MEASURE_BUDGET seconds (470).  OUTDIR (default $OUT or ./out) gets
    # measure.json, measure.txt (the table) and measure.log (every output)
    out=${2:-${OUT:-$PWD/out}}
    bincmd test_cuda; export ZT_MEASURE_TEST_CUDA="${CMD[*]}"
    bincmd costmodel; export ZT_MEASURE_COSTMODEL="${CMD[*]}"
    bash "$B/scripts/gpu-measure.sh" "$out" --backend "${ZT_CHECK_BACKEND:-cuda}" --ztrain "$ZT" \
        --mpirun "$MPIRUN" --calib "$B/costmodel_h100.txt" --src "$B" --py "$B" \
        --commit "$(sed -n '1s/.* from \([0-9a-f?]*\)$/\1/p' "$B/README")"
    rc=$?
    rm -rf "${TMPDIR:-/tmp}/ztrain-bundle-$$"
    exit $rc ;;
multi)
    # run.sh multi [OUTDIR]: scripts/gpu-multi.sh, for a machine with several
    # GPUs: test_comm_gpu and the engine check at a rank a GPU over NCCL,
    # then ZeRO's weak scaling from 1 GPU to all (GPT-2 124M and the
    # Llama-3.2-1B shape, bf16, stages 0 and 3); within ZT_MULTI_BUDGET
    # seconds (470).  OUTDIR (default $OUT or ./out) gets multi.json,
    # multi.txt (the table) and multi.log (every output); exit 3 with one GPU
    out=${2:-${OUT:-$PWD/out}}
    bincmd test_comm_gpu; export ZT_MULTI_TEST_COMM="${CMD[*]}"
    bash "$B/scripts/gpu-multi.sh" "$out" --backend "${ZT_CHECK_BACKEND:-cuda}" --ztrain "$ZT" \
        --mpirun "$MPIRUN" --src "$B" --commit "$(sed -n '1s/.* from \([0-9a-f?]*\)$/\1/p' "$B/README")"
    rc=$?
    rm -rf "${TMPDIR:-/tmp}/ztrain-bundle-$$"
    exit $rc ;;
probe)
    # run.sh probe: tests/gpu/initcheck_probe.cu plainly (does cuBLAS write
    # every output?), then under compute-sanitizer initcheck (does the tool
    # see those writes?)
    san=$(command -v compute-sanitizer || ls "${CUDA_HOME:-/usr/local/cuda}"/bin/compute-sanitizer 2> /dev/null)
    bincmd initcheck_probe
    echo "== initcheck_probe"; "${CMD[@]}"; prc=$?; echo "initcheck_probe: exit $prc"
    if [ -n "$san" ]; then
        echo "== compute-sanitizer --tool initcheck initcheck_probe (which kernels it reports, how often)"
        "$san" --tool initcheck --print-limit 100000 --show-backtrace no "${CMD[@]}" > "${TMPDIR:-/tmp}/probe.$$" 2>&1
        echo "compute-sanitizer: exit $?"
        # the reports of each shape come before its line (its k_count ran first)
        awk '/Uninitialized/ { u++ } /^T=/ { print $0 "  [initcheck: " u + 0 " reports]"; u = 0 }
             /every output|FAIL|ERROR SUMMARY/' "${TMPDIR:-/tmp}/probe.$$"
        grep -E '^=========     at ' "${TMPDIR:-/tmp}/probe.$$" | sed 's/+0x[0-9a-f]*//' | sort | uniq -c
        rm -f "${TMPDIR:-/tmp}/probe.$$"
    else
        echo "SKIP compute-sanitizer: not found"
    fi
    exit $prc ;;
"")
    sed -n '2,5p' "$0"; exit 2 ;;
mpirun)
    shift; "$B/ompi/bin/mpirun" "$@" ;;
*)
    run_bin "$@" ;;
esac
RUN
chmod +x "$OUT/run.sh"

cat > "$OUT/README" <<EOF
ztrain GPU bundle, made $(date -u +%Y-%m-%dT%H:%MZ) on $(uname -n) from $(git -C "$SRC" rev-parse --short HEAD 2> /dev/null || echo "?")
($(grep -o 'CUDA backend *: .*' "$BUILD/config.log" 2> /dev/null | head -1 || true)).
Needs: x86-64 Linux, the NVIDIA driver, CUDA 13 runtime libraries (cudart, cuBLAS,
cuBLASLt; NCCL 2.x for the NCCL test, e.g. from PyTorch's pip packages).

  ./run.sh check [OUTDIR [SECTIONS]]   SECTIONS: a comma list (default tests,engine,memory,sanitizer)
      tests      test_kernels, test_cuda (+ ZT_CUDA_SYNC=1), test_comm_gpu at 1 and 2 ranks  -> tests.tap
      engine     scripts/engine-check.sh: ztrain train --backend cuda vs --backend cpu on configs/tiny.json,
                 stages 0-3, bf16 + offload at stage 3, save + resume; 1 rank, 2 ranks host-staged,
                 1 rank NCCL; Llama --sp 2 on 2 ranks; Llama and Gemma 2 at 1 rank
                                                                  -> engine.tap, engine.log, engine-sp.log
      memory     GPT-2 124M shape, bf16, stages 0 / 3 / 3 + optimizer offload: ztrain estimate vs the
                 run's --memory-report and nvidia-smi's process peak           -> memory.txt
      sanitizer  compute-sanitizer memcheck on ztrain train (tiny, 3 steps), memcheck/racecheck/
                 synccheck/initcheck on the quick test_cuda, racecheck/synccheck on ztrain train
                                                                                -> sanitizer.txt
      everything printed also goes to summary.txt; past ZT_CHECK_BUDGET seconds (480) the rest is skipped;
      ZT_CHECK_NOSYNC=1 leaves out the second test_cuda run (ZT_CUDA_SYNC=1)
  ./run.sh bench [STEPS]    bench_gpu (kernels + GPT-2 step), ztrain train on GPT-2 124M bf16 (stages 0
                            and 3) and bench/gpt2_torch.py at the same shape, one table -> \$OUT/bench.txt
  ./run.sh llama [STEPS [SHAPE [STAGES]]]  the same for a Llama shape (default SmolLM-135M) against
                            bench/llama_gpu_torch.py, and one resume for the restore speed
  ./run.sh measure [OUTDIR] scripts/gpu-measure.sh: test_cuda quick, engine check s0, then GPT-2 124M,
                            SmolLM-135M, Llama-3.2-1B and 3B shapes (bf16, stage 0) and an 8B LoRA step:
                            ztrain train vs ztrain estimate, bench/costmodel, PyTorch eager and
                            torch.compile; compute-sanitizer memcheck; ZT_MEASURE_BUDGET s (470)
                            -> OUTDIR/measure.json, measure.txt, measure.log
  ./run.sh multi [OUTDIR]   scripts/gpu-multi.sh (several GPUs): test_comm_gpu and the engine check at a
                            rank a GPU over NCCL, then ZeRO stages 0 and 3 from 1 GPU to all (GPT-2 124M,
                            Llama-3.2-1B shape, bf16): tokens/s, scaling efficiency, bytes sent, peak vs
                            planner; ZT_MULTI_BUDGET s (470) -> OUTDIR/multi.json, multi.txt, multi.log
  ./run.sh probe            tests/gpu/initcheck_probe.cu: does cuBLAS write every output, and does
                            compute-sanitizer initcheck see those writes
  ./run.sh test_cuda        one program (bin/), with the bundle's libraries
See docs/gpu.md in the source tree.
EOF

du -sh "$OUT" | awk '{ print "== bundle: " $2 " (" $1 ")" }'
if [ $tarball = 1 ]; then
    tar -C "$(dirname "$OUT")" -cJf "$OUT.tar.xz" "$(basename "$OUT")"
    du -sh "$OUT.tar.xz" | awk '{ print "== tarball: " $2 " (" $1 ")" }'
fi

