#!/bin/sh
# build.sh SRCDIR OUTDIR 'NAMES' LIB_SOURCES... -- `make fuzz` (tests/fuzz/fuzz.am): compile the library's
# C sources with $ZT_FUZZ_CC and the fuzzer's coverage instrumentation (-fsanitize=fuzzer-no-link) plus
# $ZT_FUZZ_CFLAGS (ASan, UBSan), then link OUTDIR/fuzz_NAME for each harness tests/fuzz/fuzz_NAME.c with
# -fsanitize=fuzzer (libFuzzer's main).  An object is rebuilt when its source or a header it includes is
# newer (the compiler's dependency list beside it): a header that changed a struct's layout must not leave
# objects of the old layout in the link (that crashed fuzz_hf_config in zt_config_new).
# The harnesses get the absolute path of SRCDIR as ZT_FUZZ_SRCDIR (fuzz.h: their fixtures), passed here as
# one argument of its own: $ZT_FUZZ_CPPFLAGS is split on blanks but its quotes are not removed, so a
# define written there keeps its quote characters in the C string.
set -e
src=$1 out=$2 names=$3
shift 3
srcabs=$(cd "$src" && pwd)
cc=${ZT_FUZZ_CC:-clang}
if ! command -v "$cc" >/dev/null 2>&1; then
    echo "make fuzz: '$cc' not found (install clang: apt-get install clang; or make fuzz FUZZ_CC=...)" >&2
    exit 2
fi
if ! echo 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n) { (void)d; (void)n; return 0; }' |
     "$cc" -x c -fsanitize=fuzzer - -o /dev/null 2>/dev/null; then
    echo "make fuzz: '$cc' cannot link -fsanitize=fuzzer (libFuzzer missing); the seed corpus still runs in make check" >&2
    exit 2
fi
flags="$ZT_FUZZ_CFLAGS -fopenmp -std=gnu11 -Wno-unknown-pragmas"
mkdir -p "$out/obj"
objs=
# stale: no object, or the source or any header it included (the compiler's -MMD list, $o.d) is newer
stale() {
    [ -f "$1" ] && [ -f "$1.d" ] || return 0
    for d in $(sed -e 's/^[^:]*://' -e 's/\\$//' "$1.d"); do
        [ -e "$d" ] || return 0
        [ "$d" -nt "$1" ] && return 0
    done
    return 1
}
for f in "$@"; do
    o="$out/obj/$(echo "$f" | tr '/' '_' | sed 's/\.c$/.o/')"
    s="$src/$f"
    if stale "$o"; then
        echo "  FUZZCC   $f"
        # shellcheck disable=SC2086
        "$cc" $flags -fsanitize=fuzzer-no-link $ZT_FUZZ_CPPFLAGS -MMD -MF "$o.d" -c "$s" -o "$o"
    fi
    objs="$objs $o"
done
for n in $names; do
    echo "  FUZZLD   $out/fuzz_$n"
    # shellcheck disable=SC2086
    "$cc" $flags -fsanitize=fuzzer $ZT_FUZZ_CPPFLAGS "-DZT_FUZZ_SRCDIR=\"$srcabs\"" "$src/tests/fuzz/fuzz_$n.c" \
        $objs $ZT_FUZZ_LIBS -lm \
        -o "$out/fuzz_$n"
done
