#!/bin/bash
# fuzz_smoke.sh -- the fuzz harnesses of tests/fuzz (docs/fuzzing.md) over their seed corpora, through the
# standalone driver (tests/fuzz/replay.c): the tokenizer.json loader, the safetensors reader and the
# sharded index of a model directory, the HF config.json mapping, the SFT JSON Lines parser/packer and the
# chat-template engine.  Each seed is run once; a crash or a sanitizer report (the sanitizer pass) fails.
# The drivers run from a scratch directory without ZT_SRCDIR, so the harnesses that read fixtures (sft,
# hf_index) find them through the source path compiled in (fuzz.h aborts when it is not there).
# `make fuzz-run` runs the real fuzzers (minutes, not part of check).
. "${ZT_SRCDIR:-.}/tests/lib.sh"
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
replay() {  # replay HARNESS FILE-OR-DIR: from the scratch directory, without ZT_SRCDIR
    # hf_index starts MPI (zt_init), where LeakSanitizer's tracer cannot run (Makefile.am: LEAKCHECK_TESTS)
    local lsan=; [ "$1" = hf_index ] && lsan="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
    (cd "$T" && env -u ZT_SRCDIR ASAN_OPTIONS="${lsan:-$ASAN_OPTIONS}" "$ZT_BUILDDIR/tests/fuzz/replay_$1" "$2" 2>&1)
}
for h in tokenizer safetensors hf_index hf_config sft jinja; do
    corpus="$ZT_SRCDIR/tests/fuzz/corpus/$h"
    out=$(replay $h "$corpus")
    rc=$?
    runs=$(printf '%s\n' "$out" | sed -n 's/.*: \([0-9]*\) inputs replayed.*/\1/p' | tail -n 1)
    ok $([ $rc -eq 0 ] && [ "${runs:-0}" -gt 0 ]; echo $?) \
       "fuzz_$h: the seeds of tests/fuzz/corpus/$h replay without a crash (${runs:-none} replayed)"
    if [ $rc -ne 0 ]; then
        printf '%s\n' "$out" | tail -n 20 | sed 's/^/# /'
        for f in "$corpus"/*; do   # name the seeds that fail, one run each
            replay $h "$f" > "$T/one" 2>&1
            r=$?
            [ $r -eq 0 ] || { echo "# fails on $f (exit status $r):"; tail -n 5 "$T/one" | sed 's/^/#   /'; }
        done
    fi
done
done_testing
