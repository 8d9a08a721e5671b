/*
 * replay.c -- the standalone driver of a fuzz harness (tests/fuzz/fuzz.h):
 * feeds every file named on the command line (a directory: every file in
 * it, in name order) to LLVMFuzzerTestOneInput once, as libFuzzer does when
 * given a corpus to run, and prints one TAP line.  `make check` runs it over
 * the seed corpus of each harness (tests/fuzz_smoke.sh); a crash, a
 * sanitizer report or a leak (leak-check pass) fails the test.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
/* optional, as in libFuzzer: called once before the first input */
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

static int run_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) { printf("# cannot open %s\n", path); return -1; }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc((size_t)n + 1);
    if (!b || fread(b, 1, (size_t)n, f) != (size_t)n) { fclose(f); free(b); return -1; }
    fclose(f);
    LLVMFuzzerTestOneInput(b, (size_t)n);
    free(b);
    return 1;
}

static int cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int main(int argc, char **argv) {
    int runs = 0, bad = 0;
    if (LLVMFuzzerInitialize) {
        int ac = 1;
        char **av = argv;
        LLVMFuzzerInitialize(&ac, &av);
    }
    for (int i = 1; i < argc; ++i) {
        struct stat sb;
        if (stat(argv[i], &sb) != 0) { printf("# no such file %s\n", argv[i]); bad++; continue; }
        if (!S_ISDIR(sb.st_mode)) { int r = run_file(argv[i]); runs += r > 0; bad += r < 0; continue; }
        DIR *d = opendir(argv[i]);
        struct dirent *e;
        char **names = NULL;
        size_t nn = 0;
        while (d && (e = readdir(d))) {
            if (e->d_name[0] == '.') continue;
            names = realloc(names, (nn + 1) * sizeof *names);
            names[nn] = malloc(strlen(argv[i]) + strlen(e->d_name) + 2);
            sprintf(names[nn++], "%s/%s", argv[i], e->d_name);
        }
        if (d) closedir(d);
        qsort(names, nn, sizeof *names, cmp);
        for (size_t k = 0; k < nn; ++k) {
            int r = run_file(names[k]);
            runs += r > 0;
            bad += r < 0;
            free(names[k]);
        }
        free(names);
    }
    printf("%s 1 - %s: %d inputs replayed%s\n1..1\n", bad || !runs ? "not ok" : "ok", argv[0], runs,
           bad ? " (some unreadable)" : "");
    fflush(stdout);   /* before the exit handlers (and a sanitizer's exit report) */
    return bad || !runs ? 1 : 0;
}
