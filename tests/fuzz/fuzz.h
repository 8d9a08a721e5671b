/*
 * fuzz.h -- shared by the fuzz harnesses of tests/fuzz (docs/fuzzing.md).
 *
 * Each harness defines LLVMFuzzerTestOneInput: under `make fuzz` it is linked
 * with libFuzzer (clang -fsanitize=fuzzer) against a copy of the library built
 * with the fuzzer's instrumentation and ASan/UBSan; in `make check`
 * tests/fuzz/replay.c drives it over the seed corpus tests/fuzz/corpus/NAME.
 * The loaders under test take paths, so an input is written to a file in a
 * private temporary directory (made once per process) and opened from there.
 * A harness never asserts on the outcome -- any status is fine -- the
 * sanitizers and the fuzzer's crash/timeout/leak detection are the checks.
 */
#ifndef ZT_FUZZ_H
#define ZT_FUZZ_H
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The process's scratch directory (removed at exit). */
static char fz_dir[256];
#define FZ_UNUSED __attribute__((unused))
FZ_UNUSED static void fz_cleanup(void) {
    if (!fz_dir[0]) return;
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", fz_dir);
    if (system(cmd) != 0) fprintf(stderr, "fuzz: could not remove %s\n", fz_dir);
}
FZ_UNUSED static const char *fz_tmpdir(void) {
    if (!fz_dir[0]) {
        const char *t = getenv("TMPDIR");
        snprintf(fz_dir, sizeof fz_dir, "%s/ztfuzz.XXXXXX", t && *t ? t : "/tmp");
        if (!mkdtemp(fz_dir)) { perror("fuzz: mkdtemp"); abort(); }
        atexit(fz_cleanup);
    }
    return fz_dir;
}
/* Write data[size] to DIR/name; returns the path (static buffer per slot). */
FZ_UNUSED static const char *fz_write(const char *name, const uint8_t *data, size_t size) {
    static char path[4][512];
    static int slot;
    char *p = path[slot++ & 3];
    snprintf(p, 512, "%s/%s", fz_tmpdir(), name);
    FILE *f = fopen(p, "wb");
    if (!f) { perror(p); abort(); }
    if (size && fwrite(data, 1, size, f) != size) { perror(p); abort(); }
    if (fclose(f) != 0) { perror(p); abort(); }
    return p;
}
/* The source tree (fixtures): $ZT_SRCDIR, else the build's ZT_FUZZ_SRCDIR, else ".".  A tree without
 * tests/fuzz/fuzz.h is an error (abort): a harness whose fixtures are missing would test nothing. */
FZ_UNUSED static const char *fz_srcdir(void) {
    static const char *dir;
    if (dir) return dir;
    const char *s = getenv("ZT_SRCDIR");
#ifdef ZT_FUZZ_SRCDIR
    if (!s || !*s) s = ZT_FUZZ_SRCDIR;
#endif
    if (!s || !*s) s = ".";
    char probe[1024];
    snprintf(probe, sizeof probe, "%s/tests/fuzz/fuzz.h", s);
    if (access(probe, R_OK) != 0) {
        fprintf(stderr, "fuzz: no ztrain source tree at '%s' (the fixtures): set ZT_SRCDIR\n", s);
        abort();
    }
    return dir = s;
}
#endif
