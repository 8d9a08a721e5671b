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
#   bin/        test_cuda, test_kernels, test_comm_gpu, bench_gpu, ztrain (the
#               real executables, not libtool's wrapper scripts)
#   lib/        libtrain.so.0 and every shared library they and the Open MPI
#               runtime load, except the C library and the CUDA driver, and
#               except the CUDA toolkit's (cudart, cuBLAS, NCCL), which come from
#               the GPU machine unless --with-cuda-libs (large: ~1 GB)
#   lib/sys/    the C library of this machine, used only when the GPU machine's
#               is older (run.sh decides)
#   ompi/, pmix/  Open MPI's and PMIx's plugins, help files and launcher
#   gpt2_torch.py, run.sh, README
# Then, on the GPU machine:  ./run.sh check [OUTDIR]   (all GPU checks)
#                            ./run.sh bench [STEPS]    (timings vs PyTorch)
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

progs="tests/test_cuda tests/test_kernels tests/test_comm_gpu bench/bench_gpu ztrain"
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
cp -L "$BUILD/.libs/libtrain.so.0" "$OUT/lib/"
cp "$SRC/bench/gpt2_torch.py" "$OUT/"

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
cuda_re='^(libcudart|libcublas|libcublasLt|libnccl|libnvrtc|libnvJitLink|libcurand|libcufft)\.so'
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
#   ./run.sh check [OUTDIR]     all GPU checks, logs in OUTDIR (default: $OUT or ./out)
#   ./run.sh bench [STEPS]      kernel timings and the GPT-2 step, next to PyTorch
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
run_bin() {  # run_bin PROGRAM ARGS...
    local p=$1; shift
    [ -x "$B/bin/$p" ] && p="$B/bin/$p"
    if [ $own_loader = 1 ] && [ "${p#$B/bin/}" != "$p" ]; then
        "$B"/lib/sys/ld-linux-x86-64.so.2 --library-path "$B/lib/sys:$LD_LIBRARY_PATH" "$p" "$@"
    else
        "$p" "$@"
    fi
}

summary() {  # summary FILE: "N ok, N not ok, N skipped"
    local ok bad skip
    ok=$(grep -c '^ok ' "$1"); bad=$(grep -c '^not ok ' "$1"); skip=$(grep -c '# SKIP' "$1")
    printf '%-28s %4d ok, %3d not ok, %3d skipped\n' "$(basename "$1")" "$ok" "$bad" "$skip"
}

case "${1:-}" in
check)
    out=${2:-${OUT:-$PWD/out}}
    mkdir -p "$out"
    echo "== GPU checks, logs in $out"
    (nvidia-smi; nvidia-smi -q -d CLOCK,POWER) > "$out/nvidia-smi.txt" 2>&1
    missing=$(ldd "$B/bin/test_cuda" 2> /dev/null | grep 'not found')
    [ -n "$missing" ] && { echo "run.sh: missing libraries:"; echo "$missing"; }
    run_bin test_kernels > "$out/test_kernels.tap" 2>&1; summary "$out/test_kernels.tap"
    run_bin test_cuda > "$out/test_cuda.tap" 2>&1; summary "$out/test_cuda.tap"
    ZT_CUDA_SYNC=1 run_bin test_cuda > "$out/test_cuda_sync.tap" 2>&1; summary "$out/test_cuda_sync.tap"
    for n in 1 2; do
        timeout 600 "$B/ompi/bin/mpirun" -np "$n" --bind-to none "$B/bin/test_comm_gpu" \
            > "$out/test_comm_gpu_np$n.tap" 2>&1
        summary "$out/test_comm_gpu_np$n.tap"
    done
    san=$(command -v compute-sanitizer || ls "${CUDA_HOME:-/usr/local/cuda}"/bin/compute-sanitizer 2> /dev/null)
    if [ -n "$san" ]; then
        for tool in memcheck racecheck synccheck initcheck; do
            ZT_CUDA_TEST_QUICK=1 timeout 1800 "$san" --tool "$tool" --error-exitcode 3 \
                "$B/bin/test_cuda" > "$out/sanitizer_$tool.txt" 2>&1
            echo "compute-sanitizer $tool: exit $? ($(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$out/sanitizer_$tool.txt" | tail -1))"
        done
    else
        echo "compute-sanitizer not found: skipped"
    fi
    grep -h '^not ok' "$out"/*.tap | head -20
    ;;
bench)
    steps=${2:-10}
    run_bin bench_gpu --steps "$steps" | tee "${OUT:-.}/bench_gpu.txt"
    if python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2> /dev/null; then
        python3 "$B/gpt2_torch.py" --steps "$steps" | tee "${OUT:-.}/gpt2_torch.txt"
    else
        echo "PyTorch with CUDA not importable: baseline skipped"
    fi
    ;;
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

  ./run.sh check [OUTDIR]   test_kernels, test_cuda (+ ZT_CUDA_SYNC=1), test_comm_gpu at 1 and 2
                            ranks, compute-sanitizer memcheck/racecheck/synccheck/initcheck
  ./run.sh bench [STEPS]    bench_gpu (kernels + GPT-2 step) and bench/gpt2_torch.py
  ./run.sh test_cuda        one program (bin/), with the bundle's libraries
See docs/gpu.md in the source tree.
EOF

du -sh "$OUT" | awk '{ print "== bundle: " $2 " (" $1 ")" }'
if [ $tarball = 1 ]; then
    tar -C "$(dirname "$OUT")" -cJf "$OUT.tar.xz" "$(basename "$OUT")"
    du -sh "$OUT.tar.xz" | awk '{ print "== tarball: " $2 " (" $1 ")" }'
fi
