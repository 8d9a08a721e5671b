/* test_tokens.c -- token shard writer/reader round trip and every bad input. */
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <sys/stat.h>
#include "tap.h"
#include "testutil.h"
#include "data.h"

static void write_raw(const char *path, const void *p, size_t n) {
    FILE *fp = fopen(path, "wb");
    if (n) fwrite(p, 1, n, fp);
    fclose(fp);
}

static int expect_fail(const char *path, int vocab, int code, const char *needle, const char *what) {
    zt_token_file *f = NULL;
    zt_status st;
    int rc = zt_tokens_open(path, vocab, &f, &st);
    int ok = rc == code && f == NULL && strstr(st.msg, needle) && strstr(st.msg, path);
    if (!ok) tap_diag("%s: rc=%d msg='%s'", what, rc, rc ? st.msg : "");
    if (f) zt_tokens_close(f);
    return tap_ok(ok, "%s", what);
}

int main(void) {
    char *dir = tu_tmpdir();
    char path[512], bad[512];
    zt_status st;

    /* round trip */
    uint16_t tok[1000];
    for (int i = 0; i < 1000; ++i) tok[i] = (uint16_t)((i * 37) % 300);
    snprintf(path, sizeof path, "%s/a.bin", dir);
    tap_ok(zt_tokens_write(path, tok, 1000, &st) == ZT_OK, "write a shard");
    struct stat sb;
    stat(path, &sb);
    tap_ok(sb.st_size == 1024 + 2000, "file size is 1024 + 2 x tokens");
    int32_t hdr[3];
    FILE *fp = fopen(path, "rb");
    tap_ok(fread(hdr, 4, 3, fp) == 3 && hdr[0] == 20240520 && hdr[1] == 1 && hdr[2] == 1000,
           "llm.c header: magic 20240520, version 1, count");
    fclose(fp);
    zt_token_file *f = NULL;
    tap_ok(zt_tokens_open(path, 300, &f, &st) == ZT_OK && f && f->ntok == 1000, "open with vocab 300");
    uint32_t back[1000];
    int same = f && zt_tokens_read(f, 0, 1000, 300, back, &st) == ZT_OK;
    for (int i = 0; same && i < 1000; ++i) same = back[i] == tok[i];
    tap_ok(same, "tokens read back identical (pread)");
    same = f && zt_tokens_read(f, 997, 3, 300, back, &st) == ZT_OK && back[0] == tok[997] && back[2] == tok[999];
    tap_ok(same, "a read at an offset returns those tokens");
    tap_ok(f && zt_tokens_read(f, 998, 3, 300, back, &st) == ZT_EINTERNAL, "a read past the end is refused");
    zt_tokens_close(f);

    /* bad inputs */
    expect_fail(path, 256, ZT_EDATA, "is >= vocab 256", "token >= vocab rejected with offset");
    snprintf(bad, sizeof bad, "%s/missing.bin", dir);
    expect_fail(bad, 256, ZT_EIO, "cannot open", "missing file");
    snprintf(bad, sizeof bad, "%s/empty.bin", dir);
    write_raw(bad, "", 0);
    expect_fail(bad, 256, ZT_EDATA, "empty file", "empty file");
    snprintf(bad, sizeof bad, "%s/short.bin", dir);
    write_raw(bad, "abc", 3);
    expect_fail(bad, 256, ZT_EDATA, "truncated", "shorter than the header");
    int32_t h[256];
    memset(h, 0, sizeof h);
    h[0] = 12345; h[1] = 1; h[2] = 4;
    unsigned char buf[1024 + 8];
    memcpy(buf, h, 1024);
    memset(buf + 1024, 0, 8);
    snprintf(bad, sizeof bad, "%s/magic.bin", dir);
    write_raw(bad, buf, sizeof buf);
    expect_fail(bad, 256, ZT_EDATA, "bad magic", "wrong magic");
    h[0] = 20240520; h[1] = 7;
    memcpy(buf, h, 1024);
    snprintf(bad, sizeof bad, "%s/version.bin", dir);
    write_raw(bad, buf, sizeof buf);
    expect_fail(bad, 256, ZT_EDATA, "unsupported version", "bad version");
    h[1] = 1; h[2] = 10;
    memcpy(buf, h, 1024);
    snprintf(bad, sizeof bad, "%s/trunc.bin", dir);
    write_raw(bad, buf, sizeof buf);
    expect_fail(bad, 256, ZT_EDATA, "truncated", "truncated token data");
    h[2] = 2;
    memcpy(buf, h, 1024);
    snprintf(bad, sizeof bad, "%s/long.bin", dir);
    write_raw(bad, buf, sizeof buf);
    expect_fail(bad, 256, ZT_EDATA, "size mismatch", "size not matching the header");

    /* data source: shorter than one sequence, determinism */
    zt_data_source ds;
    zt_data_opts o;
    memset(&o, 0, sizeof o);
    o.kind = ZT_DATA_TRAIN; o.vocab = 300; o.T = 8; o.seed = 1; o.micro_batch = 4; o.grad_accum = 1;
    o.world = 1; o.rank = 0;
    snprintf(bad, sizeof bad, "%s/tiny.bin", dir);
    zt_tokens_write(bad, tok, 8, &st);
    o.pattern = bad;
    int rc = zt_data_open(&o, &ds, &st);
    tap_ok(rc == ZT_EDATA && strstr(st.msg, "shorter than one sequence") && strstr(st.msg, "tiny.bin"),
           "shard shorter than one sequence");
    o.pattern = path; o.T = 16; o.seed = 42;
    rc = zt_data_open(&o, &ds, &st);
    tap_ok(rc == ZT_OK, "open a data source");
    int in1[4 * 16], tg1[4 * 16], in2[4 * 16], tg2[4 * 16];
    ds.get(ds.state, 3, 10, 4, 16, in1, tg1, &st);
    ds.get(ds.state, 3, 10, 4, 16, in2, tg2, &st);
    tap_ok(!memcmp(in1, in2, sizeof in1) && !memcmp(tg1, tg2, sizeof tg1), "windows are a pure function of (seed, step, index)");
    int ok = 1;
    for (int i = 0; i < 4; ++i)
        for (int t = 0; t < 15; ++t) ok &= tg1[i * 16 + t] == in1[i * 16 + t + 1];
    tap_ok(ok, "targets are inputs shifted by one");
    /* sample i of a batch starting at `first` equals sample first+i alone */
    int one_in[16], one_tg[16];
    ds.get(ds.state, 3, 12, 1, 16, one_in, one_tg, &st);
    tap_ok(!memcmp(one_in, in1 + 2 * 16, sizeof one_in), "sample identity independent of batching");
    ds.get(ds.state, 4, 10, 4, 16, in2, tg2, &st);
    tap_ok(memcmp(in1, in2, sizeof in1) != 0, "different steps draw different windows");
    ds.close(ds.state);

    /* prep: text -> train/val split */
    snprintf(bad, sizeof bad, "%s/text.txt", dir);
    write_raw(bad, "hello world, this is a tiny corpus!\n", 36);
    char prefix[512];
    snprintf(prefix, sizeof prefix, "%s/corpus", dir);
    size_t nt = 0, nv = 0;
    tap_ok(zt_prep_text(bad, prefix, 0.25, &nt, &nv, &st) == ZT_OK && nt == 27 && nv == 9, "prep splits 36 bytes into 27 + 9");
    snprintf(path, sizeof path, "%s_val.bin", prefix);
    uint32_t first_tok = 0;
    tap_ok(zt_tokens_open(path, 256, &f, &st) == ZT_OK && f->ntok == 9 &&
           zt_tokens_read(f, 0, 1, 256, &first_tok, &st) == ZT_OK && first_tok == ' ', "val shard holds the last bytes");
    if (f) zt_tokens_close(f);
    snprintf(bad, sizeof bad, "%s/nonexistent.txt", dir);
    tap_ok(zt_prep_text(bad, prefix, 0.1, NULL, NULL, &st) == ZT_EIO && strstr(st.msg, "nonexistent.txt"), "prep: missing input named");

    tu_rmdir(dir);
    return tap_done();
}
