#!/bin/bash
# fuzz_build.sh -- `make fuzz` compiles the source tree's path into the harnesses as the C string the
# fixtures are read from (ZT_FUZZ_SRCDIR, tests/fuzz/fuzz.h), so that fuzz-build/fuzz_NAME CRASHFILE
# reproduces a crash as docs/fuzzing.md says.  make fuzz runs here with a stand-in compiler (FUZZ_CC) that
# records the -DZT_FUZZ_SRCDIR=... argument each harness gets, into a scratch FUZZ_DIR; each recorded
# define is then compiled for real into a program that prints the string: it must be $ZT_SRCDIR, not
# "$ZT_SRCDIR" with its quotes (the define written inside ZT_FUZZ_CPPFLAGS, before the fix). In a
# --with-cuda tree no libtool object (the CUDA backend, compiled by nvcc) may reach a link line.
. "${ZT_SRCDIR:-.}/tests/lib.sh"
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
cat > "$T/cc" <<'CC'
#!/bin/sh
# stand-in compiler: record the ZT_FUZZ_SRCDIR define, create the -o output (an empty file)
prev=
for a in "$@"; do
    case $a in -DZT_FUZZ_SRCDIR=*) printf '%s\n' "$a" >> "$ZT_FUZZ_DEFS" ;; esac
    case $a in *.lo) printf '%s\n' "$a" >> "$ZT_FUZZ_DEFS.lo" ;; esac
    # a dependency list naming a scratch header, as the compiler's -MMD -MF would
    [ "$prev" = -MF ] && printf 'x.o: %s \\\n %s\n' "$ZT_FUZZ_HDR" "$ZT_FUZZ_HDR" > "$a"
    [ "$prev" = -o ] && [ "$a" != /dev/null ] && : > "$a"
    prev=$a
done
exit 0
CC
chmod +x "$T/cc"
export ZT_FUZZ_DEFS="$T/defs" ZT_FUZZ_HDR="$T/scratch.h"
: > "$ZT_FUZZ_HDR"
: > "$ZT_FUZZ_DEFS"
: > "$ZT_FUZZ_DEFS.lo"
(cd "$ZT_BUILDDIR" && env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL ${MAKE:-make} -s fuzz FUZZ_CC="$T/cc" \
    FUZZ_DIR="$T/fb") > "$T/log" 2>&1
ok $? "make fuzz FUZZ_CC=(a stand-in) FUZZ_DIR=(scratch) runs"
diag "$T/log" | tail -n 5
names=$(cd "$ZT_SRCDIR/tests/fuzz" && ls fuzz_*.c | sed 's/^fuzz_//; s/\.c$//' | sort | tr '\n' ' ' | sed 's/ $//')
built=$(cd "$T/fb" 2>/dev/null && ls fuzz_* 2>/dev/null | sed 's/^fuzz_//' | sort | tr '\n' ' ' | sed 's/ $//')
ok $([ "$names" = "$built" ]; echo $?) "every harness of tests/fuzz is linked (${built:-none})"
ndefs=$(wc -l < "$ZT_FUZZ_DEFS")
ok $([ "$ndefs" -ge 1 ]; echo $?) "$ndefs harness link lines pass ZT_FUZZ_SRCDIR"
want=$(cd "$ZT_SRCDIR" && pwd)
bad=0
while IFS= read -r def; do
    printf '#include <stdio.h>\nint main(void) { puts(ZT_FUZZ_SRCDIR); return 0; }\n' |
        ${CC:-cc} -x c - "$def" -o "$T/probe" 2> "$T/err" || { bad=$((bad + 1)); diag "$T/err"; continue; }
    got=$("$T/probe")
    [ "$got" = "$want" ] || { bad=$((bad + 1)); echo "# $def -> [$got], want [$want]"; }
done < <(sort -u "$ZT_FUZZ_DEFS")
ok $([ "$ndefs" -ge 1 ] && [ $bad -eq 0 ]; echo $?) "the harnesses' ZT_FUZZ_SRCDIR is the string $want"
# objects are rebuilt when a header they include changed, and only then
cnt() { grep -c 'FUZZCC' "$1"; }
(cd "$ZT_BUILDDIR" && env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL ${MAKE:-make} -s fuzz FUZZ_CC="$T/cc" \
    FUZZ_DIR="$T/fb") > "$T/log2" 2>&1
sleep 1; touch "$ZT_FUZZ_HDR"
(cd "$ZT_BUILDDIR" && env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL ${MAKE:-make} -s fuzz FUZZ_CC="$T/cc" \
    FUZZ_DIR="$T/fb") > "$T/log3" 2>&1
n1=$(cnt "$T/log") n2=$(cnt "$T/log2") n3=$(cnt "$T/log3")
ok $([ "$n1" -gt 0 ] && [ "$n2" -eq 0 ] && [ "$n3" -eq "$n1" ]; echo $?) \
   "make fuzz again compiles nothing ($n2 of $n1), and everything after a header they include changed ($n3)"
# a --with-cuda tree: libtrain's nvcc objects (.lo) are not clang's to link; the stub backend stands in
nlo=$(sort -u "$ZT_FUZZ_DEFS.lo" | wc -l)
ok $([ "$nlo" -eq 0 ]; echo $?) "no libtool object (nvcc's CUDA objects) on a fuzz link line ($nlo)"
sort -u "$ZT_FUZZ_DEFS.lo" | sed 's/^/# /'
done_testing
