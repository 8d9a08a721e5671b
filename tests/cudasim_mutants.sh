#!/bin/sh
# tests/cudasim_mutants.sh [BUILDDIR] -- proof that make check-cudasim
# catches bugs (issue 25; make check-cudasim-mutants, outside make check).
#
# BUILDDIR (default .) is a tree configured with --with-cuda-sim.  Its
# distribution (make distdir) is copied to a temporary tree and configured
# the same way there; the unmutated copy must pass test_cuda on the
# simulator; then for every mutant below one known bug is planted
# into that copy of kernels/cuda (never the real files), the simulated
# backend is rebuilt and tests/test_cuda runs on the simulator as in
# check-cudasim: threads and blocks in order first and, only when that
# passes, shuffled with the race check on.  A run stops at its first
# failing test.  Every mutant must make it fail.  Each mutant is an exact
# perl pattern that must match exactly once, so a mutant whose code has
# changed fails the script instead of silently testing nothing.  A mutant
# may name another check instead: `comm` plants its bug (in kernels/cuda or
# libtrain/comm_nccl.c) and runs tests/test_comm_gpu on the simulator at 2
# ranks as check-cudasim does (the unmutated copy passing it first).
#
# Prints a table: mutant, file:line, the check that caught it (the first
# failing test, and the simulator's first report), and PASS (killed) or
# FAIL (survived).  Exits 0 when every mutant was killed.  Takes a few
# minutes a mutant on 2 cores.  ZT_MUTANTS="name ..." runs only those mutants;
# ZT_MUTANTS_KEEP=1 keeps the temporary tree.
set -u
builddir=$(cd "${1:-.}" && pwd) || exit 2
[ -x "$builddir/config.status" ] || { echo "cudasim_mutants: $builddir is not a configured build tree" >&2; exit 2; }
grep -q 'with-cuda-sim' "$builddir/config.status" ||
    { echo "cudasim_mutants: $builddir was not configured --with-cuda-sim" >&2; exit 2; }
MAKE=${MAKE:-make}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/zt-mutants.XXXXXX") || exit 2
[ "${ZT_MUTANTS_KEEP:-0}" = 1 ] || trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM
src=$tmp/src
bld=$tmp/build

ranks_comm=2
say() { printf '%s\n' "cudasim_mutants: $*"; }
die() { say "$*" >&2; exit 2; }

# ------------------------------------------------------------ the copy
say "copying the sources (make distdir) and configuring a simulated build in $tmp"
(cd "$builddir" && $MAKE distdir distdir="$src") > "$tmp/distdir.log" 2>&1 ||
    die "make distdir failed (see $tmp/distdir.log)"
eval "set -- $(cd "$builddir" && ./config.status --config)"
mkdir -p "$bld"
(cd "$bld" && "$src/configure" "$@") > "$tmp/configure.log" 2>&1 || die "configure failed (see $tmp/configure.log)"
cp -R "$src/kernels/cuda" "$tmp/pristine"
jobs=${ZT_MUTANTS_JOBS:-2}
(cd "$bld" && $MAKE -j"$jobs" tests/cudasim/test_cuda_sim) > "$tmp/build.log" 2>&1 ||
    die "the unmutated simulated build failed (see $tmp/build.log)"

# ------------------------------------------------------------ one run
# run_tests LOG [ENV...]: test_cuda on the simulator until its first
# failure; 0 when it passed (plan run, exit 0, no failure)
run_tests() {
    log=$1
    shift
    (cd "$bld" && env ZT_CUDA_TEST_QUICK=1 "$@" sh -c './tests/cudasim/test_cuda_sim 2>&1; echo "# exit status $?"') |
        awk -v f="$log" '{ print > f } /^not ok / { exit }'
    grep -q '^not ok ' "$log" && return 1
    grep -q '^# exit status 0$' "$log" || return 1
    grep -q '^1\.\.[1-9]' "$log" || return 1
    return 0
}

# run_comm LOG: test_comm_gpu on the simulator at $ranks_comm ranks (each
# its own simulated device), as check-cudasim runs it; 0 when it passed
run_comm() {
    log=$1
    (cd "$bld" && env ZT_CUDASIM_DEVICES=3 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
        sh -c '"${ZT_MPIRUN:-mpirun}" --oversubscribe -np '"$ranks_comm"' --bind-to none \
            ./tests/cudasim/test_comm_gpu_sim 2>&1; echo "# exit status $?"') |
        awk -v f="$log" '{ print > f } /^not ok / { exit }'
    grep -q '^not ok ' "$log" && return 1
    grep -q '^# exit status 0$' "$log" || return 1
    grep -q '^1\.\.[1-9]' "$log" || return 1
    return 0
}
comm_checked=0

# what caught it: the first failing test and the simulator's first report
# (caught_by LOG 0: the test alone; test_comm_gpu's own failure cases make
# the simulator report, mutant or not)
caught_by() {
    t=$(grep -m1 '^not ok ' "$1" | sed 's/^not ok [0-9]* - //')
    r=$(grep '^cudasim' "$1" | grep -v 'race check: [0-9]* shared-memory accesses' | head -n 1 | sed 's/^cudasim[^:]*: //')
    [ -n "$t" ] || t="(no failing test: $(grep -m1 '^# exit status' "$1" | sed 's/^# //'))"
    printf '%s' "$t"
    [ "${2:-1}" = 1 ] && [ -n "$r" ] && printf ' | simulator: %s' "$(printf '%s' "$r" | cut -c1-160)"
    return 0
}

# the unmutated copy must pass, or a failure would prove nothing
say "the unmutated copy (forward order)"
run_tests "$tmp/run-unmutated.log" ZT_CUDASIM_ORDER=forward ZT_CUDASIM_RACECHECK=0 ||
    die "the unmutated copy fails: $(caught_by "$tmp/run-unmutated.log")"

# ------------------------------------------------------------ mutants
# mutant NAME FILE PATTERN REPLACEMENT [CHECK]: PATTERN (a perl regex; \K
# marks where the replaced text starts) must match FILE exactly once; the
# match after \K becomes REPLACEMENT (literal text).  CHECK: cuda (the
# default: test_cuda, forward then shuffled with the race check) or comm
# (test_comm_gpu at 2 ranks).  A FILE outside kernels/cuda is restored
# from its first copy before the next mutant.
mkdir -p "$tmp/orig"
n_killed=0
n_total=0
table=$tmp/table
: > "$table"
mutant() {
    name=$1 file=$2 pat=$3 rep=$4 check=${5:-cuda}
    case " ${ZT_MUTANTS:-$name} " in *" $name "*) ;; *) return 0;; esac
    n_total=$((n_total + 1))
    # the files the last mutant changed back (fresh copies: make rebuilds
    # them and only them)
    (cd "$tmp/pristine" && find . -type f) | while read -r f; do
        cmp -s "$tmp/pristine/$f" "$src/kernels/cuda/$f" || cp "$tmp/pristine/$f" "$src/kernels/cuda/$f"
    done
    (cd "$tmp/orig" && find . -type f) | while read -r f; do
        cmp -s "$tmp/orig/$f" "$src/$f" || cp "$tmp/orig/$f" "$src/$f"
    done
    if [ "$check" = comm ] && [ "$comm_checked" = 0 ]; then
        say "the unmutated copy: test_comm_gpu at $ranks_comm ranks"
        (cd "$bld" && $MAKE -j"$jobs" tests/cudasim/test_comm_gpu_sim) > "$tmp/build-comm.log" 2>&1 ||
            die "the unmutated test_comm_gpu_sim build failed (see $tmp/build-comm.log)"
        run_comm "$tmp/run-unmutated-comm.log" ||
            die "the unmutated copy fails test_comm_gpu: $(caught_by "$tmp/run-unmutated-comm.log" 0)"
        comm_checked=1
    fi
    case $file in
        kernels/cuda/*) ;;
        *) [ -f "$tmp/orig/$file" ] || { mkdir -p "$(dirname "$tmp/orig/$file")" && cp "$src/$file" "$tmp/orig/$file"; } ;;
    esac
    line=$(PAT=$pat REP=$rep perl -0777 -e '
        my $f = $ARGV[0];
        open(my $h, "<", $f) or die "$f: $!\n";
        local $/;
        my $s = <$h>;
        close $h;
        my $n = () = $s =~ /$ENV{PAT}/g;
        if ($n != 1) { print STDERR "pattern matched $n times in $f\n"; exit 3; }
        $s =~ /$ENV{PAT}/ or exit 3;
        my ($a, $b) = ($-[0], $+[0]);
        my $line = 1 + (substr($s, 0, $a) =~ tr/\n//);
        substr($s, $a, $b - $a) = $ENV{REP};
        open($h, ">", $f) or die "$f: $!\n";
        print $h $s;
        close $h;
        print "$line\n";' "$src/$file") || die "mutant $name: its pattern does not apply to $file (the code changed?)"
    rel=${file#kernels/cuda/}
    orig=$tmp/pristine/$rel
    [ "$rel" = "$file" ] && orig=$tmp/orig/$file
    say "mutant $name: $rel:$line"
    (diff -u "$orig" "$src/$file" | sed -n '3,$p' | grep '^[-+]' | sed 's/^/    /') || true
    prog=tests/cudasim/test_cuda_sim
    [ "$check" = comm ] && prog=tests/cudasim/test_comm_gpu_sim
    if ! (cd "$bld" && $MAKE -j"$jobs" $prog) > "$tmp/build-$name.log" 2>&1; then
        die "mutant $name does not compile (see $tmp/build-$name.log): fix the mutant"
    fi
    how=
    if [ "$check" = comm ]; then
        run_comm "$tmp/run-$name.log" || how="test_comm_gpu at $ranks_comm ranks: $(caught_by "$tmp/run-$name.log" 0)"
    elif ! run_tests "$tmp/run-$name.log" ZT_CUDASIM_ORDER=forward ZT_CUDASIM_RACECHECK=0; then
        how="forward: $(caught_by "$tmp/run-$name.log")"
    elif ! run_tests "$tmp/run-$name-race.log" ZT_CUDASIM_ORDER=shuffle ZT_CUDASIM_SEED=1 ZT_CUDASIM_RACECHECK=1 \
            ZT_CUDASIM_RACECHECK_ACCESSES=50000; then
        how="shuffle+race: $(caught_by "$tmp/run-$name-race.log")"
    fi
    if [ -n "$how" ]; then
        res="PASS (killed)"
        n_killed=$((n_killed + 1))
    else
        res="FAIL (survived)"
        how="nothing failed"
    fi
    say "  $res: $how"
    printf '| %s | %s:%s | %s | %s |\n' "$name" "$rel" "$line" "$(printf '%s' "$how" | sed 's/|/\\|/g')" "$res" >> "$table"
}

# a removed __syncthreads(): the attention forward's Q/K/V tiles are read
# before the other warps finished loading them
mutant no-syncthreads kernels/cuda/cuda_attention.cu \
    'load_tile\(Vs, vbase, k0, T, R, hs, ld\);\n\K        __syncthreads\(\);\n(?=        /\* scores of the warp)' ''

# a removed __syncthreads() that only the race check (or an unlucky order)
# sees: the next key tile overwrites Ks/Vs while other warps still read them
mutant no-syncthreads-war kernels/cuda/cuda_attention.cu \
    '\K        __syncthreads\(\);   /\* Ks/Vs of the previous tile are no longer read \*/\n' ''

# a removed __syncthreads() that only a shuffled order or the race check
# sees: softmax's block sum writes the shared partials while other warps may
# still read the block max's from the same array
mutant no-syncthreads-race kernels/cuda/cuda_internal.cuh \
    'v = zt_warp_sum\(v\);\n\K    __syncthreads\(\);\n(?=    if \(lane == 0\) sh\[wid\] = v;)' ''

# an off-by-one loop bound: layernorm forward leaves its last channel unwritten
mutant off-by-one kernels/cuda/cuda_nn.cu \
    's \+= x\[c\];\n(?:[^\n]*\n)*?    for \(int c = lane; c < \KC(?=; c \+= 32\) zt_st_out\(&o\[c\], \(x\[c\] - m\))' 'C - 1'

# multi-tensor AdamW (adamw_multi): the segment search puts each segment's
# first element in the segment before it (its weight decay, its offset)
mutant adamw-multi-seg kernels/cuda/cuda_backend.cu \
    'if \(t\.start\[mid\] \K<=(?= k\) a = mid;)' '<'

# multi-tensor AdamW: a step whose gradients are not finite is applied anyway
mutant adamw-multi-gate kernels/cuda/cuda_backend.cu \
    'if \(gate->nonfinite \|\| !isfinite\(ls\) \|\| !isfinite\(sq\)\) \Kreturn;' '{ }'

# a wrong shuffle offset: the warp sum every block reduction uses
mutant shfl-offset kernels/cuda/cuda_internal.cuh \
    'float zt_warp_sum\(float v\) \{\n#pragma unroll\n    for \(int o = 16; o > 0; o >>= 1\) v \+= __shfl_xor_sync\(0xffffffffu, v, \Ko(?=\);)' 'o >> 1'

# a wrong cuBLASLt layout: B's rows and columns swapped
mutant lt-layout kernels/cuda/cuda_matmul.cu \
    'LT\(cublasLtMatrixLayoutCreate\(&lb, ab_t, \Ktb \? n : k, tb \? k : n(?=, ldb\)\);)' 'tb ? k : n, tb ? n : k'

# a wrong cuBLASLt leading dimension: C's one too large
mutant lt-ld kernels/cuda/cuda_matmul.cu \
    'LT\(cublasLtMatrixLayoutCreate\(&lc, d16 \? CUDA_R_16BF : CUDA_R_32F, m, n, \Kldc(?=\)\);)' 'ldc + 1'

# the GELU epilogues (matmul_gelu_fwd, matmul_dgelu_bwd): the epilogue's
# bias gradient overwrites the table's instead of adding to it
mutant bgrad-acc kernels/cuda/cuda_matmul.cu \
    'if \(i < n\) dst\[i\] \K\+=(?= src\[i\];)' '='

# GELU_AUX_BIAS: the aux (pre-activation) matrix's leading dimension wrong
mutant gelu-aux-ld kernels/cuda/cuda_matmul.cu \
    'lt_epi e = \{EPI_GELU_AUX_BIAS, pre, \KOC(?=, NULL\};)' 'OC + 8'

# DGELU_BGRAD: the GELU's derivative taken at the wrong matrix (dpre, not pre)
mutant dgelu-aux kernels/cuda/cuda_matmul.cu \
    'lt_epi e = \{EPI_DGELU_BGRAD, \K\(void \*\)pre(?=, C, bg\};)' 'dpre'

# the matmul backward in bf16 mode: dout rounded once for both GEMMs, but
# only its first half (the GEMMs then read whatever scratch held)
mutant dout16-half kernels/cuda/cuda_matmul.cu \
    'k_round_bf16<<<zt_ew_blocks\(nd\), ZT_EW_THREADS, 0, zt_cu.stream>>>\(\(bf16_t \*\)s, dout, \Knd(?=\);)' 'nd / 2'

# a bf16 weight that is not 256-byte aligned, copied to scratch before the
# GEMM (matmul_*_w16): only half of it copied
mutant w16-copy-half kernels/cuda/cuda_matmul.cu \
    'cudaMemcpyAsync\(s, a16, \Kna \* 2(?=, cudaMemcpyDeviceToDevice)' 'na'

# set_dw_fresh: the dW GEMM of a dw in the fresh range still adds (beta 1:
# it reads the stale gradient the step no longer zeroes)
mutant dw-fresh-beta1 kernels/cuda/cuda_matmul.cu \
    'return g_fresh && dw >= g_fresh && dw < g_fresh \+ g_fresh_n \? \K0\.0f(?= : 1\.0f;)' '1.0f'

# set_dw_fresh: the range ignored, every dW GEMM overwrites while one is set
# (a gradient outside it loses what it held)
mutant dw-fresh-range kernels/cuda/cuda_matmul.cu \
    'return \Kg_fresh && dw >= g_fresh && dw < g_fresh \+ g_fresh_n(?= \? 0\.0f : 1\.0f;)' 'g_fresh'

# from_bf16_runs: a block takes the run before its own where it is a run's
# first block (its elements widened into the wrong place, its own left out)
mutant widen-runs-block kernels/cuda/cuda_backend.cu \
    'while \(r \+ 1 < t\.nr && t\.b0\[r \+ 1\] \K<=(?= blockIdx\.x\) \+\+r;)' '<'

# from_bf16_runs: the output not advanced past a run (the runs all written
# over the start of out)
mutant widen-runs-out kernels/cuda/cuda_backend.cu \
    't\.nr\+\+;\n        \Kout \+= n\[r\];' '(void)0;'

# the residual add fused with LayerNorm: the sum is not stored, so the row
# is normalized from whatever res held
mutant add-ln-store kernels/cuda/cuda_nn.cu \
    'const float xv = xa\[c\] \+ xb\[c\];\n        \Kx\[c\] = xv;' '(void)x;'

# the residual add fused with RMSNorm: the statistic taken over a, not a + b
mutant add-rms-stat kernels/cuda/cuda_llama.cu \
    'ss \+= \(double\)\Kxv \* xv(?=;)' 'xa[c] * xa[c]'

# a missing stream synchronization before the host reads a device-to-host copy
mutant no-sync kernels/cuda/cuda_backend.cu \
    'cudaMemcpyAsync\(host_dst, dev_src, bytes, cudaMemcpyDeviceToHost, zt_cu.stream\)\)\K \|\|\n        !ZT_CU\(cudaStreamSynchronize\(zt_cu.stream\)\)(?=\))' ''

# a missing cudaFuncSetAttribute for more than 48 KiB of dynamic shared memory
mutant no-smem-attr kernels/cuda/cuda_internal.cuh \
    'if \(bytes > 48 \* 1024\)\n        return \KZT_CU\(cudaFuncSetAttribute\(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, \(int\)bytes\)\)(?=;)' 'true'

# the flash kernels on tensor cores (bf16 attention, cuda_attention_tc.cu):
# a removed __syncthreads() before the next key tile overwrites Ks/Vs
# (only the race check or an unlucky order sees it)
mutant flash-no-syncthreads-war kernels/cuda/cuda_attention_tc.cu \
    '\K            __syncthreads\(\);   /\* the previous tile is read \*/\n' ''

# the forward's "no mask needed" test against the warp's last query instead
# of its first: the diagonal tile's last warp sees keys after its queries
mutant flash-mask-edge kernels/cuda/cuda_attention_tc.cu \
    'const bool all = k0 \+ FT_ROWS - 1 <= \Kqw(?= && k0 \+ FT_ROWS <= T)' 'qw + 15'

# dq's __syncthreads() before a key tile is loaded, removed: the tile is
# overwritten while other warps still multiply with the previous one
mutant flash-dq-no-sync kernels/cuda/cuda_attention_tc.cu \
    'for \(int k0 = kstart; k0 < kend; k0 \+= BK\) \{\n\K        __syncthreads\(\);\n' ''

# cuDNN attention (cuda_sdpa.cu): the causal mask off by one (row > col:
# a query no longer sees itself)
mutant sdpa-causal-edge kernels/cuda/cuda_sdpa.cu \
    'pw\(CUDNN_POINTWISE_\KCMP_GE(?=, row, col)' 'CMP_GT'

# cuDNN attention: the sliding window one key wider (col + window >= row)
mutant sdpa-window-edge kernels/cuda/cuda_sdpa.cu \
    'pw\(CUDNN_POINTWISE_\KCMP_GT(?=, cw, row)' 'CMP_GE'

# cuDNN attention forward: P in fp32 into P V (cudnn-frontend sets it to the
# I/O type, bf16: the simulator's engine declines the graph, like cuDNN's)
mutant sdpa-p-fp32 kernels/cuda/cuda_sdpa.cu \
    'g\.pw\(CUDNN_POINTWISE_DIV, e, sum, NULL, g\.virt\(CUDNN_DATA_\KBFLOAT16(?=, d\.sd\)\))' 'FLOAT'

# cuDNN attention: the causal comparison in INT32 math (cudnn-frontend's is
# BOOLEAN: the simulator's engine declines the graph)
mutant sdpa-cmp-int32 kernels/cuda/cuda_sdpa.cu \
    'pw\(CUDNN_POINTWISE_CMP_GE, row, col, NULL, virt\(CUDNN_DATA_BOOLEAN, sd\),\s+CUDNN_DATA_\KBOOLEAN(?=\))' 'INT32'

# cuDNN attention backward: the version rule for T not a multiple of 128 up
# to cuDNN 9.15 dropped (the backend bug cudnn-frontend works around: the
# simulator's backward at version 9.0, T = 37, writes NaN)
mutant sdpa-t128-rule kernels/cuda/cuda_sdpa.cu \
    ': bwd && T \K% 128 != 0(?= && v <= 91500)' '< 0'

# cuDNN attention backward, GQA: dK summed over the wrong q heads (the
# full-head dK reduced into dV's place and dV's into dK's)
mutant sdpa-gqa-swap kernels/cuda/cuda_sdpa.cu \
    'g\.reduce\(CUDNN_REDUCE_TENSOR_ADD, g\.matmul\(dSt, Q, dKf\), \KdK(?=\);)' 'dV'

# cuDNN attention backward: dQ_accum not zeroed before the execution
# (cuDNN adds dQ into it: the simulator's cudnn.cc too), so a backward
# adds to what the scratch held (the previous call's dQ)
mutant sdpa-no-dq-zero kernels/cuda/cuda_sdpa.cu \
    '\K    if \(!ZT_CU\(cudaMemsetAsync\(dqacc, 0, nout \* sizeof\(float\), zt_cu\.stream\)\)\) return true;\n' ''

# cuDNN attention backward into the caller's bf16 gradient (gqa_ext_bwd16d):
# the call says the gradient is in dqkv16 (1) no more, while it is not in
# dqkv either (its fp32 q|k|v GEMM would read what dqkv held)
mutant sdpa-d16-flag kernels/cuda/cuda_sdpa.cu \
    'if \(dd\) \*d16 = \Ktrue(?=;)' 'false'

# the attention output's gradient in bf16 (gqa_ext_bwd16do): cuDNN's bf16
# dO copied to 16-byte alignment only in part (half its bytes: the rest
# whatever the scratch held)
mutant sdpa-do16-copy-half kernels/cuda/cuda_sdpa.cu \
    'cudaMemcpyAsync\(do16, dout16, nout \* \K2(?=, cudaMemcpyDeviceToDevice)' '1'

# gqa_ext_bwd16do: the call says the gradient is in dqkv16 no more (0),
# while it is not in dqkv either
mutant bwd16do-d16-flag kernels/cuda/cuda_attention.cu \
    'dqkv16, &d16, dout16\)\)\n        return d16 \? \K1(?= : 0;)' '0'

# the input gradient written in bf16 (matmul_bwd_o16): the bias gradient
# from dout16 even where the fp32 dout is given (the sums of the rounded
# values, not matmul_bwd_d16's)
mutant mm-o16-dbias16 kernels/cuda/cuda_matmul.cu \
    'if \(dbias && \Kdout(?=\) zt_cuda_colsum_acc\(dbias, dout, N, OC, \(size_t\)OC\);\n    else if \(dbias\) zt_cuda_colsum16_acc\(dbias, dout16, N, OC, \(size_t\)OC\);\n    if \(!lt\))' '!dout'

# matmul_bwd_o16 where Lt has no bf16-D algorithm (cublasGemmEx into tmp):
# the last element of the gradient not rounded into dinp16
mutant mm-o16-round-short kernels/cuda/cuda_matmul.cu \
    'if \(!lt\) zt_cuda_to_bf16\(dinp16, tmp, \(size_t\)N \* C\K(?=\);)' ' - 1'

# the column sums of a bf16 gradient (k_colsum16_part, matmul_bwd_d16 with
# dout NULL): each chunk's last row left out (k_colsum_part<uint16_t> only)
mutant colsum16-last-row kernels/cuda/cuda_nn.cu \
    'for \(int n = n0; n < n1\K(?=; n\+\+\) acc \+= \(double\)col_ld\(&src)' ' - (sizeof(S) == 2)'

# Mixture of Experts routing: top-k ties broken towards the higher expert
# (the CPU takes the lower one)
mutant moe-topk-tie kernels/cuda/cuda_moe.cu \
    'if \(!taken && \(best < 0 \|\| p\[e\] \K>(?= p\[best\]\)\))' '>='

# MoE routing backward: the renormalisation's correction dropped
# (dl = dw / S instead of (dw - sum_j dw_j w_j) / S)
mutant moe-route-bwd-norm kernels/cuda/cuda_moe.cu \
    'dl\[ix\[k\]\] = norm \? \(dw\[k\] - \Kdot / S(?=\) / S)' '0.0f'

# MoE combine (rows_scatter, the fp32 one: rows_scatter16 has the same line): the routing weight ignored
mutant rows-scatter-weight kernels/cuda/cuda_moe.cu \
    '/\* in order: rows repeat \*/\n        const float a = \Kw \? w\[i\] : 1\.0f(?=;\n        y\[\(size_t\)\(rows \? rows\[i\] : i\) \* C \+ c\] \+= a \* x\[)' '1.0f'

# MoE dispatch (rows_gather): the token's row index ignored
mutant rows-gather-row kernels/cuda/cuda_moe.cu \
    'out\[t\] = a \* x\[\(size_t\)\K\(rows \? rows\[i\] : \(int\)i\)(?= \* C \+ c\])' 'i'

# rows_gather_o16 (the backward's rows gathered into bf16): a positive
# routing weight ignored
mutant rows-gather-o16-weight kernels/cuda/cuda_moe.cu \
    'out16\[t\] = zt_cvt_f32_to_bf16\(\Ka(?= \* x\[)' '(a > 0.0f ? 1.0f : a)'

# rows_dot (the routing weights' gradient): the first column skipped
mutant rows-dot-start kernels/cuda/cuda_moe.cu \
    'for \(int c = \K0(?=; c < C; \+\+c\) s \+= p\[c\] \* q\[c\];)' '1'

# shared expert's gate: sigmoid backward without the (1 - y) factor
mutant sigmoid-bwd kernels/cuda/cuda_moe.cu \
    'dx\[i\] = dy\[i\] \* y\[i\]\K \* \(1\.0f - y\[i\]\)' ''

# rows_dot16h (the grouped backward's routing-weight dot): the rows
# rounded back unweighted
mutant rows-dot16h-scale kernels/cuda/cuda_moe.cu \
    'if \(w\) p\[c\] = zt_cvt_f32_to_bf16\(\Kw\[i\] \* v(?=\);)' 'v'

# rows_sum16 (the per-token sum): the inverse permutation misses the last row
mutant moe-inverse-last kernels/cuda/cuda_moe.cu \
    'if \(i < \Kn(?=\) pos\[perm\[i\]\] = i;)' 'n - 1'

# rows_sum16: the routing weight ignored
mutant rows-sum16-weight kernels/cuda/cuda_moe.cu \
    'const float a = \Kw \? w\[nx\] : 1\.0f(?=;)' '1.0f'

# the grouped GEMMs' pointer arrays: the B operand stepped by the output's
# row stride (the input gradients' dout rows, and the forward's x rows)
mutant grouped-ptrs-stride kernels/cuda/cuda_matmul.cu \
    'pb\[q\] = a\.x \+ o \* a\.\Kxs(?=;)' 'os'

# the grouped weight gradients (matmul_grouped_dw16): a fresh gradient added into (read) instead of
# written
mutant dw-add16-fresh kernels/cuda/cuda_matmul.cu \
    'd\[i\] = \(fresh \? \K0\.0f(?= : d\[i\]\) \+ zt_cvt_bf16_to_f32)' 'd[i]'

# matmul_grouped_dw16's pointer arrays: every block's product into the chunk's first slot
mutant grouped-dw-slot kernels/cuda/cuda_matmul.cu \
    'pc\[q\] = tmp \+ \K\(size_t\)q(?= \* OC \* C;)' '(size_t)0'

# the MoE groups on the device (moe_permute's k_moe_fill): the running
# offset advanced by the chunk's count one thread short (sc[ZT_MOE_SCAN - 2])
mutant moe-fill-carry kernels/cuda/cuda_moe.cu \
    'at \+= sc\[ZT_MOE_SCAN - \K1(?=\];)' '2'

# moe_regroup: a piece's place by expert counts the piece itself (ii <= i)
mutant moe-regroup-dst kernels/cuda/cuda_moe.cu \
    'if \(ll < l \|\| \(ll == l && ii \K<(?= i\)\) dst)' '<='

# matmul_fwd_o16 (the cuBLASLt GEMM with a bf16 D): the bias left out
mutant o16-bias kernels/cuda/cuda_matmul.cu \
    'gemm_lt\(ta, tb, m, n, k, a, lda, b, ldb, d16, ldc, beta, \Kbias(?=, bf16, epi, &err, true\))' 'NULL'

# matmul_bwd_head16 with the final norm's bf16 output: dw's GEMM not given it (reads no input:
# its fp32 A is NULL too, so k_round_bf16 reads address 0, a fault on the simulator, exit 139,
# as on a GPU; no value to compare: head16-x16-inp below is the variant a value check sees)
mutant head16-x16 kernels/cuda/cuda_matmul.cu \
    'gemm\(false, true, C, OC, N, x16 \? NULL : inp, C, NULL, OC, dw, C, dw_beta\(dw\), NULL, NULL, \Kx16(?=, d16,)' 'NULL'

# gelu_fwd16: the result truncated to bf16 instead of rounded to nearest even
mutant gelu16-trunc kernels/cuda/cuda_nn.cu \
    'out\[i\] = \Kzt_cvt_f32_to_bf16\(gelu_val\(zt_cvt_bf16_to_f32\(inp\[i\]\)\)\)(?=;)' '(uint16_t)(zt_f2u(gelu_val(zt_cvt_bf16_to_f32(inp[i]))) >> 16)'

# swiglu_fwd16 (k_glu_fwd16, the four GLU forwards' kernel): the gate|up row's stride H instead of 2 H
mutant swiglu16-stride kernels/cuda/cuda_llama.cu \
    'const size_t o = n \* \K2 \* (?=\(size_t\)H \+ k;\n        uint16_t g, u;)' ''

# geglu_fwd16 (and _fwd16r: glu_geglu): gate and up swapped
mutant geglu16-swap kernels/cuda/cuda_llama.cu \
    'return geglu_val\(\Kg, u(?=\); \})' 'u, g'

# gelu_fwd16r: the GELU of the fp32 input, not of its bf16 rounding
mutant gelu16r-unrounded kernels/cuda/cuda_nn.cu \
    'out\[i\] = zt_cvt_f32_to_bf16\(gelu_val\(\Kzt_cvt_bf16_to_f32\(r\)(?=\)\);)' 'inp[i]'

# swiglu_fwd16r (k_glu_fwd16's r forms): the up half's rounding not written (gu16 keeps the gate's only)
mutant swiglu16r-up kernels/cuda/cuda_llama.cu \
    '\K            gu16\[o \+ H\] = u;\n(?=        \} else \{)' ''

# geglu_fwd16r (k_glu_fwd16's r forms): the gate rounded from the fp32 up's place
mutant geglu16r-swap kernels/cuda/cuda_llama.cu \
    'g = zt_cvt_f32_to_bf16\(gu\[\Ko(?=\]\);\n            u = zt_cvt_f32_to_bf16\(gu\[o \+ H\]\);)' 'o + H'

# swiglu_bwd16 (k_glu_bwd16, the GLUs' bf16 backward): the up value read at out's index i + H, not the row's o + H
mutant swiglu16-bwd-up kernels/cuda/cuda_llama.cu \
    'Act\(\)\.grad\(&dg, &du, zt_cvt_bf16_to_f32\(gu\[o\]\), zt_cvt_bf16_to_f32\(gu\[\Ko(?= \+ H\]\),\s+rms_dout)' 'i'

# geglu_bwd16 (glu_geglu's grad, also geglu_bwd's): the gate's and the up's gradients written to each other's place
mutant geglu16-bwd-swap kernels/cuda/cuda_llama.cu \
    'geglu_grad\(\Kdg, du(?=, g, u, d\);)' 'du, dg'

# swiglu_bwd_d16 with dgu NULL (k_glu_bwd16): the fp32 values' write guarded by dgu16
# instead of dgu (writes through the NULL dgu)
mutant swiglu-d16-null kernels/cuda/cuda_llama.cu \
    'if \(\Kdgu(?=\) \{   /\* \(the _d16 forms with dgu NULL)' 'dgu16'

# matmul_dgelu_bwd_o16's unfused path: the GELU's derivative taken at the
# wrong element of the bf16 pre-activation
mutant gelu-bwd-o16 kernels/cuda/cuda_nn.cu \
    'const float v = gelu_grad\(zt_cvt_bf16_to_f32\(inp16\[\Ki(?=\]\)\) \* dout\[i\];)' 'i / 2'

# matmul_dgelu_bwd_o16's epilogue: the GELU's derivative taken at its own
# output (dpre16), not at pre16
mutant dgelu-o16-aux kernels/cuda/cuda_matmul.cu \
    'lt_epi e = \{EPI_DGELU_BGRAD, \(void \*\)\Kpre16(?=, C, bg\};)' 'dpre16'

# gqa_ext_fwd16 where the attention takes the fp32 kernels: only q and k
# widened (k_att_widen), v read from whatever tmp held
mutant gqa16-widen kernels/cuda/cuda_attention.cu \
    'if \(att_widen\(tmp, qkv16, \(size_t\)B \* T \* \(NH \+ \K2 \* NKV(?=\) \* hs\)\)\n        zt_cuda_gqa_ext_fwd\()' 'NKV'

# gqa_ext_bwd16 on tensor cores: q|k|v read from the scratch an fp32 input
# is rounded into (qkv16 ignored)
mutant gqa16-bwd-q16 kernels/cuda/cuda_attention.cu \
    'const uint16_t \*q16 = \Kqkv16 \? qkv16 : \(const uint16_t \*\)s(?=;   /\* \(qkv16: as it is\) \*/)' '(const uint16_t *)s'

# layernorm_fwd16: the grid rounded down (N / rows): the last rows unwritten
mutant ln16-grid kernels/cuda/cuda_nn.cu \
    'k_layernorm_fwd<uint16_t><<<\K\(N \+ rows - 1\) / rows(?=, ZT_LN_THREADS)' 'N / rows'

# rmsnorm_fwd16: blocks of half the threads (4 warps, 4 rows) on the grid
# of 8 rows a block
mutant rms16-block kernels/cuda/cuda_llama.cu \
    'k_rmsnorm_fwd<uint16_t><<<\(N \+ rows - 1\) / rows, \KZT_RMS_THREADS(?=, 0, zt_cu\.stream>>>)' 'ZT_RMS_THREADS / 2'

# add_layernorm_fwd16: mean and rstd passed to each other's place
mutant add-ln16-stats kernels/cuda/cuda_nn.cu \
    'res, out16, \Kmean, rstd(?=, a, bb, w, b, N, C\);)' 'rstd, mean'

# add_rmsnorm_fwd16: the grid sized for 64 rows a block (ZT_RMS_THREADS / 4)
# where a block holds 8 (a warp a row): rows past each block's 8 unwritten
mutant add-rms16-rows kernels/cuda/cuda_llama.cu \
    'const int rows = ZT_RMS_THREADS / \K32(?=;\n    k_add_rmsnorm_fwd<uint16_t>)' '4'

# add_rmsnorm_fwd16b: the bf16 branch's bits read as an integer, not
# widened (bf16 -> fp32 is the 16 bits shifted up)
mutant add-rms16b-widen kernels/cuda/cuda_llama.cu \
    'zt_ld_branch\(const uint16_t \*p\) \{ return \Kzt_cvt_bf16_to_f32\(\*p\)(?=; \})' '(float)*p'

# rope_fwd16: the unrotated rest copied from column np of the row instead
# of 2 np (each rotated pair spans two columns)
mutant rope16-rest kernels/cuda/cuda_llama.cu \
    'const size_t o = n \* \(size_t\)stride \+ \K2 \* np(?= \+ \(c - np\);)' 'np'

# rope_bwd16 (k_rope_bwd16): the bf16 gradient rotated forward (angle +a)
# instead of back
mutant rope-bwd16-dir kernels/cuda/cuda_llama.cu \
    'const float dir = \K-1\.0f(?=;\n    for \(size_t i)' '1.0f'

# rope_bwd16's bias gradient (k_rope_colsum16_part): a pair's second column
# summing the first one's rotated value
mutant rope-bwd16-colsum kernels/cuda/cuda_llama.cu \
    'acc2 \+= \(double\)\Kx2(?=;)' 'x1'

# encoder_fwd_w16: the position t = n % (T - 1), off by one (the rows of a
# sequence past its first T - 1 tokens take the wrong wpe row)
mutant enc16-pos kernels/cuda/cuda_nn.cu \
    'k_encoder_fwd_w16\(float \*out[^{]*\{[^}]*?const int t = \(int\)\(n % \(size_t\)\KT(?=\);)' '(T - 1)'

# layernorm_bwd in one pass: each group of rows starts the chunk's partial
# dw from 0 (the chunk's earlier groups of rows lost)
mutant ln-bwd-group kernels/cuda/cuda_nn.cu \
    'double aw = \Kg0 == n0 \? 0\.0 : qw\[c\](?=, ab = )' '0.0'

# rmsnorm_bwd in one pass: the column pass leaves each group's last row out
mutant rms-bwd-lastrow kernels/cuda/cuda_llama.cu \
    'for \(int n = g0; n < \Kg1(?=; n\+\+\)\n                aw \+= \(double\)\(inp)' 'g1 - 1'

# headnorm_bwd in one pass: no barrier between the partial dw (reading the
# output gradient) and the input gradient written over it
mutant head-bwd-sync kernels/cuda/cuda_llama.cu \
    '            qw\[c\] = aw;\n        \}\n        \K__syncthreads\(\);\n(?=        const int r = g0)' ''

# headnorm_bwd in one pass: each group of (row, head) pairs starts the
# chunk's partial dw from 0 (the chunk's earlier groups lost; chunks of
# more than ZT_HNB_THREADS pairs only: over 65536 pairs)
mutant head-bwd-group kernels/cuda/cuda_llama.cu \
    'double aw = \Kg0 == r0 \? 0\.0 : qw\[c\](?=;)' '0.0'

# matmul_bwd_head16 with the final norm's bf16 output: dw's GEMM reads the
# fp32 inp (rounded) in its place (with inp NULL, as the engine passes it,
# a fault; with an fp32 inp of other values beside inp16, wrong values;
# x16 ? nullptr : nullptr keeps x16 read, so the copy compiles without warnings)
mutant head16-x16-inp kernels/cuda/cuda_matmul.cu \
    'gemm\(false, true, C, OC, N, \Kx16 \? NULL : inp, C, NULL, OC, dw, C, dw_beta\(dw\), NULL, NULL, x16(?=, d16,)' 'inp, C, NULL, OC, dw, C, dw_beta(dw), NULL, NULL, x16 ? nullptr : nullptr'

# the NCCL groups' pool of completion events (libtrain/comm_nccl.c): its
# last free event never handed out again (ev_nfree > 1), so the pool grows
# one event more than the requests in flight need
mutant evpool-last libtrain/comm_nccl.c \
    'if \(n->ev_nfree > \K0(?=\) return n->ev_free\[--n->ev_nfree\];)' '1' comm

# gqa_ext_fwd16o on the flash kernel (k_ft_fwd): the bf16 O store of the
# thread's second row (query i0 + 8) takes the first row's accumulators
mutant ft-o16-row kernels/cuda/cuda_attention_tc.cu \
    'if \(out16\) ft_store_row<HSP, uint16_t>\(out16 \+ at, o, \Kr(?=, hs\);)' '0'

# gqa_ext_bwd16o: k_att_rowdot<uint16_t> reads the bf16 O's bits as an
# integer instead of widening them (D = rowsum(dout . O) wrong)
mutant rowdot-o16 kernels/cuda/cuda_attention.cu \
    'float att_ld\(const uint16_t \*p\) \{ return \Kzt_cvt_bf16_to_f32\(\*p\)(?=; \})' '(float)*p'

# xent16_fwd / xent16_fused (xent16_stats): the running sum not rescaled
# when a thread's max grows (s + 1, not s exp(m - v) + 1)
mutant xent16-rescale kernels/cuda/cuda_nn.cu \
    's = \K__fmaf_rn\(s, expf\(m - v\), 1\.0f\)(?=;)' 's + 1.0f'

# xent16_fused: the target's gradient without its - 1 (p, not p - 1)
mutant xent16-fused-tgt kernels/cuda/cuda_nn.cu \
    'x\[j\] = zt_cvt_f32_to_bf16\(valid \? \(j == tgt \? \Kp - 1\.0f(?= : p\) \* dloss : 0\.0f\);)' 'p'

# matmul_bwd_head16: dw overwritten (beta 0) instead of accumulated
mutant head16-dw-beta kernels/cuda/cuda_matmul.cu \
    'gemm\(false, true, C, OC, N, (?:x16 \? NULL : )?inp, C, NULL, OC, dw, C, \Kdw_beta\(dw\)(?=, NULL, NULL, )' '0.0f'

# matmul_dinp_acc: the input gradient overwritten (beta 0) instead of
# accumulated, fp32 mode; and in bf16 mode
mutant dinp-acc-beta kernels/cuda/cuda_matmul.cu \
    'gemm\(false, false, C, N, OC, w, C, dout, OC, dinp, C, \K1\.0f(?=, NULL\);\n\}\n\n/\* fc \+ GELU)' '0.0f'
mutant dinp-acc16-beta kernels/cuda/cuda_matmul.cu \
    'gemm\(false, false, C, N, OC, w, C, dout, OC, dinp, C, \K1\.0f(?=, NULL, NULL, NULL, \(const bf16_t \*\)s,)' '0.0f'

# matmul_fwd_acc: the output overwritten (beta 0) instead of accumulated
mutant fwd-acc-beta kernels/cuda/cuda_matmul.cu \
    'gemm\(true, false, OC, N, C, wb \? NULL : w, C, x16 \? NULL : inp, C, out, OC, \K1\.0f(?=, NULL, NULL, wb,)' '0.0f'

# matmul_fwd_acc16: the bf16 output overwritten (beta 0) instead of
# accumulated, the cuBLASLt GEMM with a bf16 C = D; and cublasGemmEx's
mutant fwd-acc16-beta kernels/cuda/cuda_matmul.cu \
    'gemm\(true, false, OC, N, C, w, C, inp, C, NULL, OC, \K1\.0f(?=, NULL, NULL, ww16, x16,)' '0.0f'
mutant fwd-acc16-gemmex-beta kernels/cuda/cuda_matmul.cu \
    'gemmex_o16\(out16, inp, x16, w, ww16, N, C, OC, \K1\.0f(?=\);)' '0.0f'

# matmul_bwd_acc16: the bf16 input gradient overwritten (beta 0) instead
# of accumulated, the cuBLASLt GEMM with a bf16 C = D; and cublasGemmEx's
mutant bwd-acc16-beta kernels/cuda/cuda_matmul.cu \
    'gemm\(false, false, C, N, OC, NULL, C, NULL, OC, NULL, C, \K1\.0f(?=, NULL, NULL, a, d16,)' '0.0f'
mutant bwd-acc16-gemmex-beta kernels/cuda/cuda_matmul.cu \
    'gemmex16\(false, C, N, OC, a, C, d16, OC, \K1\.0f(?=, dinp16, C\);)' '0.0f'

# matmul_bwd_acc: the input gradient overwritten (beta 0) instead of
# accumulated (every operand variant: fp32, w16, dout16)
mutant bwd-acc-beta kernels/cuda/cuda_matmul.cu \
    '\(const bf16_t \*\)w16, N, C, OC, NULL,\n\s+\(const bf16_t \*\)dout16, \K1\.0f(?=\);)' '0.0f'

# matmul_bwd_d16: dout16 not passed on, so the GEMMs read dout rounded
# (the same bits only where dout16 is dout's rounding)
mutant d16-dout-rounded kernels/cuda/cuda_matmul.cu \
    'OC, \(const bf16_t \*\)inp16, \K\(const bf16_t \*\)dout16(?=\);\n\}\nvoid zt_cuda_matmul_dgelu_bwd_d16)' 'NULL'

# matmul_dgelu_bwd_d16: likewise, dout rounded instead of dout16
mutant dgelu-d16-dout-rounded kernels/cuda/cuda_matmul.cu \
    '\(const bf16_t \*\)w16, N, C, OC, \(const bf16_t \*\)inp16, \K\(const bf16_t \*\)dout16(?=\);\n\}\n)' 'NULL'

# layernorm_bwd16: dinp16 the rounding of this call's increment, not of
# the accumulated dinp (+=)
mutant ln16-bwd-inc kernels/cuda/cuda_nn.cu \
    'if \(dinp16\) dinp16\[\(size_t\)row \* C \+ c\] = zt_cvt_f32_to_bf16\(\Kdi\[c\](?=\);)' '(dn - mean_dn - norm * mean_dnn) * r'

# layernorm_bwd16d's dsum: the column pass adds the input's values, not the
# accumulated dinp's
mutant lnsum-inp kernels/cuda/cuda_nn.cu \
    'for \(int n = g0; n < g1; n\+\+\) as \+= \(double\)\Kdinp(?=\[\(size_t\)n \* C \+ c\];)' 'inp'

# layernorm_bwd16d's dsum: the chunk's partial restarted at each group of rows
mutant lnsum-restart kernels/cuda/cuda_nn.cu \
    'double as = \Kg0 == n0 \? 0\.0 : qs\[c\](?=;)' '0.0'

# layernorm_bwd16d's dsum: its final sums added to dw, not dsum
mutant lnsum-final kernels/cuda/cuda_nn.cu \
    'dw, pw, db, pb, \Kdsum(?=, ps, P, C\);)' 'dw'

# k_colsum_final's third array (layernorm_bwd16d's dsum, in the launch of
# dw's and db's final sums): the second array's partials summed into it
mutant final3-part kernels/cuda/cuda_nn.cu \
    'if \(part3\) e \+= \Kpart3(?=\[\(size_t\)p \* C \+ c\];)' 'part2'

# k_layernorm_bwd: no barrier between the row pass and the column pass (the
# column pass of dsum reads the dinp rows other warps are writing)
mutant lnsum-no-barrier kernels/cuda/cuda_nn.cu \
    'if \(row < g1\) layernorm_bwd_row\(dinp, dout, inp, w, mean, rstd, row, lane, C, dinp16\);\n\K        __syncthreads\(\);\n' ''

# layernorm_bwd16d: dout16 widened with its low 4 mantissa bits dropped
# (col_ld is k_colsum16_part's widening too)
mutant ln16d-widen kernels/cuda/cuda_nn.cu \
    'float col_ld\(const uint16_t \*p\) \{ return zt_cvt_bf16_to_f32\(\K\*p(?=\); \})' '(uint16_t)(*p & 0xfff0)'

# matmul_gelu_fwd_o16's fallback (k_gelu_fwd16p): the GELU of the rounded
# pre, not of the fp32 value (gelu_fwd16's values)
mutant gelue-fallback-rounded kernels/cuda/cuda_nn.cu \
    'out\[i\] = zt_cvt_f32_to_bf16\(gelu_val\(\Kx(?=\)\);\n)' 'zt_cvt_bf16_to_f32(zt_cvt_f32_to_bf16(x))'

# matmul_gelu_fwd_o16: the epilogue's aux pointed at the output (pre16 never
# written, the GELU overwritten by the pre)
mutant gelue-aux-out kernels/cuda/cuda_matmul.cu \
    'lt_epi e = \{EPI_GELU_AUX_BIAS, \Kpre16(?=, OC, NULL\};)' 'out16'

# add_layernorm_fwd16b: launched over whole groups of rows only (the last
# N % 8 rows left as they were)
mutant ln16b-rows kernels/cuda/cuda_nn.cu \
    'k_add_layernorm_fwd16b<<<\K\(N \+ rows - 1\) / rows(?=, ZT_LN_THREADS)' 'N / rows'

# rmsnorm_bwd16: the bf16 row at row, not row * C (every row but 0 misplaced)
mutant rms16-bwd-row kernels/cuda/cuda_llama.cu \
    'uint16_t \*d16 = dinp16 \+ \K\(size_t\)row \* C(?=;)' '(size_t)row'

# rmsnorm_bwd16d: the bf16 output gradient widened with its low 4 mantissa
# bits dropped (not the exact widening: dinp and dw off)
mutant rms16d-widen kernels/cuda/cuda_llama.cu \
    'float rms_dout\(const uint16_t \*p\) \{ return zt_cvt_bf16_to_f32\(\K\*p(?=\); \})' '(uint16_t)(*p & 0xfff0)'

# swiglu_bwd_d16 (k_glu_bwd16): the up's bf16 gradient the gate's value (dg)
mutant swiglu-d16-up kernels/cuda/cuda_llama.cu \
    'the _d16 forms: the values rounded beside them \*/\n            dgu16\[o\] = zt_cvt_f32_to_bf16\(dg\);\n            dgu16\[o \+ H\] = zt_cvt_f32_to_bf16\(\Kdu(?=\);)' 'dg'

# geglu_bwd_d16 (k_glu_bwd16): the gate's bf16 gradient not stored (dgu16[o] keeps what
# it held: in place, the gate's value)
mutant geglu-d16-gate kernels/cuda/cuda_llama.cu \
    'the _d16 forms: the values rounded beside them \*/\n\K            dgu16\[o\] = zt_cvt_f32_to_bf16\(dg\);\n' ''

# swiglu_bwd_dd16 (k_glu_bwd16, glu_swiglu with uint16_t dout): launched over the first half
# of the N rows only (the second half's dgu / dgu16 left as they were)
mutant swiglu-dd16-half kernels/cuda/cuda_llama.cu \
    'glu_bwd16<glu_swiglu>\(dgu, dgu16, dout16, gu16, \KN(?=, H, "k_swiglu_bwd16"\);)' 'N / 2'

# geglu_bwd_dd16 (k_glu_bwd16, glu_geglu with uint16_t dout): dout16 read as the gate|up's
# bf16 (the gradient's values never read)
mutant geglu-dd16-dout kernels/cuda/cuda_llama.cu \
    'glu_bwd16<glu_geglu>\(dgu, dgu16, \Kdout16(?=, gu16, N, H,)' 'gu16'

# qknorm_rope_fwd16 (k_qknorm_rope): the pair's second value normalized
# with the first one's weight (w[o], not w[o + h2])
mutant qkrope16-weight kernels/cuda/cuda_llama.cu \
    'x2 = zt_rms_out\(v\[o \+ h2\], q, w\[\Ko \+ h2(?=\]\);)' 'o'

# qknorm_rope_bwd16 (k_qknorm_rope_bwd16, HnRope16::ld): a column's value
# read as its rope pair's other rotated value (x2 for x1), so the partial
# dw and the rows' sums see the wrong gradient
mutant qkb16-pair kernels/cuda/cuda_llama.cu \
    'return j < h2 \? \Kx1 : x2(?=;)' 'x2 : x1'

# nf4_dequant to bf16: the first weight of a byte truncated, not rounded
mutant nf4-bf16-trunc kernels/cuda/cuda_nf4.cu \
    'oh\[i\] = \Kzt_cvt_f32_to_bf16\(v0\)(?=;)' '(uint16_t)(zt_f2u(v0) >> 16)'

# copy_done (the event query zt_mesh_copy_wait polls): "not ready" answered
# as done, so the copy's wait no longer watches the collectives before it
mutant copy-done-early kernels/cuda/cuda_backend.cu \
    'if \(cudaPeekAtLastError\(\) == cudaErrorNotReady\) \(void\)cudaGetLastError\(\);\n        return \K0(?=;)' '1' comm

echo
echo "| mutant | file:line | caught by | result |"
echo "|---|---|---|---|"
cat "$table"
echo
say "$n_killed of $n_total mutants killed"
[ "$n_total" -gt 0 ] && [ "$n_killed" -eq "$n_total" ]
