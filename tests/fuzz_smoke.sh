#!/bin/bash
# fuzz_smoke.sh -- the fuzz harnesses of tests/fuzz (docs/fuzzing.md) over their seed corpora, through the
# standalone driver (tests/fuzz/replay.c): the tokenizer.json loader, the safetensors reader and the
# sharded index of a model directory, the HF
# config.json mapping and the SFT JSON Lines parser/packer.  Each seed is run once; a crash or a sanitizer
# report (the sanitizer pass) fails.  `make fuzz-run` runs the real fuzzers (minutes, not part of check).
. "${ZT_SRCDIR:-.}/tests/lib.sh"
for h in tokenizer safetensors hf_index hf_config sft; do
    # hf_index starts MPI (zt_init), where LeakSanitizer's tracer cannot run (Makefile.am: LEAKCHECK_TESTS)
    lsan=; [ $h = hf_index ] && lsan="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
    out=$(ASAN_OPTIONS=${lsan:-$ASAN_OPTIONS} "$ZT_BUILDDIR/tests/fuzz/replay_$h" "$ZT_SRCDIR/tests/fuzz/corpus/$h" 2>&1)
    rc=$?
    runs=$(printf '%s\n' "$out" | sed -n 's/.*: \([0-9]*\) inputs replayed.*/\1/p' | tail -n 1)
    ok $([ $rc -eq 0 ] && [ "${runs:-0}" -gt 0 ]; echo $?) \
       "fuzz_$h: the ${runs:-0} seeds of tests/fuzz/corpus/$h replay without a crash"
    [ $rc -eq 0 ] || printf '%s\n' "$out" | tail -n 20 | sed 's/^/# /'
done
done_testing
