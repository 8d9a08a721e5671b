/*
 * test_strict.c -- the cpu-strict debugging backend catches what it is for
 * (no MPI; leak-checked):
 *   - its kernels compute bitwise what the cpu backend computes;
 *   - a host read of its memory faults (a forked child dies of SIGSEGV,
 *     while a child reading through to_host exits cleanly);
 *   - a host pointer handed to a kernel, a copy in the wrong direction, a
 *     copy past the end of a block and a foreign free are refused and
 *     reported by error() (once, then cleared), the kernel not run;
 *   - accounted device blocks (zt_mem with a device backend) live in the
 *     host-side table: counted per category, host blocks in the host
 *     columns, everything back to zero after freeing.
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <stdint.h>
#include "backend.h"
#include "internal.h"
#include "dw_fresh.h"
#include "widen_runs.h"
#include "step_entries.h"
#include "tap.h"

static const zt_backend *S, *C;

static void *dput(const void *h, size_t bytes) {
    void *d = S->alloc(bytes);
    S->to_device(d, h, bytes);
    return d;
}

static void fill(float *x, size_t n, unsigned seed) {
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        x[i] = (float)((int)(seed >> 9) % 2001 - 1000) / 1000.0f;
    }
}

static void on_segv(int sig) {
    (void)sig;
    _exit(77);
}

/* Run fn in a child; 1 when it died of SIGSEGV (or our handler saw one, or a
 * sanitizer's SEGV handler ended it with a non-zero status), 0 when it
 * finished normally. */
static int child_faults(void (*fn)(void *), void *arg) {
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_segv;
        sigaction(SIGSEGV, &sa, NULL);
        fn(arg);
        _exit(0);
    }
    int status = 0;
    if (waitpid(pid, &status, 0) != pid) return -1;
    return (WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV) ||
           (WIFEXITED(status) && WEXITSTATUS(status) != 0);
}

static volatile float sink;
static void read_direct(void *p) { sink = *(volatile float *)p; }
static void write_direct(void *p) { *(volatile float *)p = 1.0f; }
static void read_staged(void *p) {
    float v;
    S->to_host(&v, p, sizeof v);
    sink = v;
}

/* a test host_register: records calls; fails when g_reg_fail */
static int g_reg_calls, g_reg_live, g_unreg_calls, g_reg_fail;
static void *g_reg_p;
static size_t g_reg_bytes;
static const char *rec_register(void *p, size_t bytes) {
    if (g_reg_fail) return "test: refused";
    g_reg_calls++;
    g_reg_live++;
    g_reg_p = p;
    g_reg_bytes = bytes;
    return NULL;
}
static void rec_unregister(void *p) {
    g_unreg_calls++;
    if (p == g_reg_p) g_reg_live--;
}

int main(void) {
    S = zt_backend_cpu_strict();
    C = zt_backend_cpu();
    tap_ok(S && !strcmp(S->name, "cpu-strict") && S->host_memory == 0 && C->host_memory == 1,
           "cpu-strict table: device memory (host_memory 0); cpu: host memory");
    if (!S) return tap_done();
    /* every entry present */
    tap_ok(S->alloc && S->free && S->copy && S->to_host && S->to_device && S->zero &&
           S->encoder_fwd && S->encoder_bwd && S->layernorm_fwd && S->layernorm_bwd &&
           S->matmul_fwd && S->matmul_bwd && S->set_matmul_precision && S->attention_fwd &&
           S->attention_bwd && S->gelu_fwd && S->gelu_bwd && S->add && S->xent_fwd &&
           S->xent_bwd && S->adamw && S->sumsq && S->scale && S->to_bf16 && S->from_bf16 &&
           S->to_f16 && S->from_f16 && S->nonfinite && S->sum && S->error && S->synchronize &&
           S->nf4_dequant && C->nf4_dequant && S->gqa_ext_fwd && S->gqa_ext_bwd && S->geglu_fwd &&
           S->geglu_bwd && S->softcap_fwd && S->softcap_bwd && S->xent_fused && C->xent_fused &&
           C->sum, "every table entry is set (and the cpu backend has sum)");
    while (S->error()) {}

    /* ---- zero-filled, round trip */
    enum { N = 8, Cc = 16, OC = 24, V = 40 };
    float hz[64];
    float *dz = S->alloc(sizeof hz);
    memset(hz, 0xff, sizeof hz);
    S->to_host(hz, dz, sizeof hz);
    int zeros = 1;
    for (int i = 0; i < 64; i++) zeros &= hz[i] == 0.0f;
    tap_ok(dz && zeros && !S->error(), "alloc: zero-filled, read back with to_host");
    /* ---- alloc_nz: no zero fill; cpu-strict fills the block with 0xff
     * (NaN) so a read before the caller's write shows; a copy overwrites it
     * and free takes it as alloc's */
    uint32_t hn[67];
    unsigned char *dn = S->alloc_nz && C->alloc_nz ? S->alloc_nz(sizeof hn) : NULL;
    memset(hn, 0, sizeof hn);
    if (dn) S->to_host(hn, dn, sizeof hn);
    int poisoned = 1;
    for (int i = 0; i < 67; i++) poisoned &= hn[i] == 0xffffffffu;
    if (dn) {
        S->copy(dn, dz, sizeof hz);   /* the first 64 words written: zeros; the rest as they were */
        S->to_host(hn, dn, sizeof hn);
        for (int i = 0; i < 67; i++) poisoned &= hn[i] == (i < 64 ? 0u : 0xffffffffu);
        S->free(dn);
    }
    void *cn = C->alloc_nz ? C->alloc_nz(100) : NULL;
    tap_ok(dn && poisoned && cn && ((uintptr_t)cn & 63) == 0 && !S->error(),
           "alloc_nz: cpu-strict's block all 0xff bytes until written, freed as alloc's; cpu's "
           "64-byte aligned");
    C->free(cn);

    /* ---- kernels: bitwise the cpu backend's */
    float inp[N * Cc], w[OC * Cc], b[OC], out_c[N * OC], out_s[N * OC];
    fill(inp, N * Cc, 1);
    fill(w, OC * Cc, 2);
    fill(b, OC, 3);
    C->matmul_fwd(out_c, inp, w, b, N, Cc, OC);
    float *d_inp = dput(inp, sizeof inp), *d_w = dput(w, sizeof w), *d_b = dput(b, sizeof b);
    float *d_out = S->alloc(sizeof out_s);
    S->matmul_fwd(d_out, d_inp, d_w, d_b, N, Cc, OC);
    S->to_host(out_s, d_out, sizeof out_s);
    tap_ok(!memcmp(out_c, out_s, sizeof out_c) && !S->error(), "matmul_fwd: bitwise the cpu result");
    /* matmul_fwd_acc16 (out16 read and written in place): bitwise the cpu
     * result; out16 one row short of N OC: refused, out16 unchanged */
    {
        uint16_t o16_c[N * OC], o16_s[N * OC], o16_b[N * OC];
        C->to_bf16(o16_c, out_c, N * OC);
        uint16_t *d_o16 = dput(o16_c, sizeof o16_c);
        C->matmul_fwd_acc16(o16_c, inp, NULL, w, NULL, N, Cc, OC);
        S->matmul_fwd_acc16(d_o16, d_inp, NULL, d_w, NULL, N, Cc, OC);
        S->to_host(o16_s, d_o16, sizeof o16_s);
        tap_ok(!memcmp(o16_c, o16_s, sizeof o16_c) && !S->error(),
               "matmul_fwd_acc16: bitwise the cpu result");
        uint16_t *d_short = S->alloc(sizeof o16_c - OC * 2);
        S->to_device(d_short, o16_c, sizeof o16_c - OC * 2);
        S->matmul_fwd_acc16(d_short, d_inp, NULL, d_w, NULL, N, Cc, OC);
        const char *e16 = S->error();
        S->to_host(o16_b, d_short, sizeof o16_c - OC * 2);
        tap_ok(e16 && strstr(e16, "matmul_fwd_acc16") && strstr(e16, "out16") &&
                   !memcmp(o16_b, o16_c, sizeof o16_c - OC * 2),
               "matmul_fwd_acc16 with out16 a row short: refused, not run, error(): %s",
               e16 ? e16 : "(none)");
        S->free(d_o16);
        S->free(d_short);
    }
    /* matmul_grouped_o16 (the MoE experts' forward GEMMs; n host ints):
     * blocks of 1, 0 and N - 1 rows, bitwise the cpu result (fp32 and bf16
     * input); out16 one row short: refused, out16 unchanged */
    {
        const int ng[3] = {1, 0, N - 1};
        float wg[3 * OC * Cc];
        fill(wg, 3 * OC * Cc, 4);
        uint16_t w16g[3 * OC * Cc], x16[N * Cc], g_c[N * OC], g_s[N * OC], g_b[N * OC];
        C->to_bf16(w16g, wg, 3 * OC * Cc);
        C->to_bf16(x16, inp, N * Cc);
        uint16_t *d_w16g = dput(w16g, sizeof w16g), *d_x16 = dput(x16, sizeof x16), *d_g = S->alloc(sizeof g_s);
        int same = 1;
        for (int k = 0; k < 2; k++) {
            C->matmul_grouped_o16(g_c, k ? NULL : inp, k ? x16 : NULL, w16g, ng, 3, Cc, OC);
            S->matmul_grouped_o16(d_g, k ? NULL : d_inp, k ? d_x16 : NULL, d_w16g, ng, 3, Cc, OC);
            S->to_host(g_s, d_g, sizeof g_s);
            same &= !memcmp(g_c, g_s, sizeof g_c) && !S->error();
        }
        tap_ok(same, "matmul_grouped_o16 (fp32 and bf16 input, blocks of 1, 0, N - 1 rows): bitwise the cpu result");
        uint16_t *d_short = S->alloc(sizeof g_c - OC * 2);
        S->to_device(d_short, g_c, sizeof g_c - OC * 2);
        S->matmul_grouped_o16(d_short, d_inp, NULL, d_w16g, ng, 3, Cc, OC);
        const char *e16 = S->error();
        S->to_host(g_b, d_short, sizeof g_c - OC * 2);
        tap_ok(e16 && strstr(e16, "matmul_grouped_o16") && strstr(e16, "out16") &&
                   !memcmp(g_b, g_c, sizeof g_c - OC * 2),
               "matmul_grouped_o16 with out16 a row short: refused, not run, error(): %s", e16 ? e16 : "(none)");
        S->free(d_w16g);
        S->free(d_x16);
        S->free(d_g);
        S->free(d_short);
    }
    /* matmul_bwd_acc16 (dinp16 read and written in place; dout = out):
     * bitwise the cpu result; dinp16 one row short of N C: refused, dinp16
     * unchanged */
    {
        uint16_t i16_c[N * Cc], i16_s[N * Cc], i16_b[N * Cc];
        C->to_bf16(i16_c, inp, N * Cc);
        uint16_t *d_i16 = dput(i16_c, sizeof i16_c);
        C->matmul_bwd_acc16(i16_c, out_c, NULL, w, NULL, N, Cc, OC);
        float *d_dout = dput(out_c, sizeof out_c);
        S->matmul_bwd_acc16(d_i16, d_dout, NULL, d_w, NULL, N, Cc, OC);
        S->to_host(i16_s, d_i16, sizeof i16_s);
        tap_ok(!memcmp(i16_c, i16_s, sizeof i16_c) && !S->error(),
               "matmul_bwd_acc16: bitwise the cpu result");
        uint16_t *d_short = S->alloc(sizeof i16_c - Cc * 2);
        S->to_device(d_short, i16_c, sizeof i16_c - Cc * 2);
        S->matmul_bwd_acc16(d_short, d_dout, NULL, d_w, NULL, N, Cc, OC);
        const char *e16 = S->error();
        S->to_host(i16_b, d_short, sizeof i16_c - Cc * 2);
        tap_ok(e16 && strstr(e16, "matmul_bwd_acc16") && strstr(e16, "dinp16") &&
                   !memcmp(i16_b, i16_c, sizeof i16_c - Cc * 2),
               "matmul_bwd_acc16 with dinp16 a row short: refused, not run, error(): %s",
               e16 ? e16 : "(none)");
        S->free(d_i16);
        S->free(d_dout);
        S->free(d_short);
    }

    float logits[N * V], probs_c[N * V], loss_c[N], loss_s[N];
    int tg[N];
    fill(logits, N * V, 4);
    for (int i = 0; i < N; i++) tg[i] = (i * 7) % V;
    C->xent_fwd(loss_c, probs_c, logits, tg, N, V);
    float *d_logits = dput(logits, sizeof logits), *d_loss = S->alloc(sizeof loss_s);
    int *d_tg = dput(tg, sizeof tg);
    S->xent_fwd(d_loss, d_logits, d_logits, d_tg, N, V);
    S->to_host(loss_s, d_loss, sizeof loss_s);
    const double sum_c = C->sum(loss_c, N), sum_s = S->sum(d_loss, N);
    double seq = 0.0;
    for (int i = 0; i < N; i++) seq += (double)loss_c[i];
    tap_ok(!memcmp(loss_c, loss_s, sizeof loss_c) && sum_c == sum_s && sum_c == seq && !S->error(),
           "xent_fwd and sum: bitwise; sum is the sequential double sum");

    {   /* xent_fused in place: bitwise the cpu backend's */
        float fc[N * V], fs[N * V], lc[N], ls[N];
        memcpy(fc, logits, sizeof fc);
        C->xent_fused(lc, fc, tg, 0.25f, N, V);
        float *d_f = dput(logits, sizeof logits), *d_l = S->alloc(sizeof ls);
        S->xent_fused(d_l, d_f, d_tg, 0.25f, N, V);
        S->to_host(fs, d_f, sizeof fs);
        S->to_host(ls, d_l, sizeof ls);
        tap_ok(!memcmp(fc, fs, sizeof fc) && !memcmp(lc, ls, sizeof lc) && !S->error(),
               "xent_fused: bitwise the cpu result");
        S->free(d_f);
        S->free(d_l);
    }
    {   /* the GELU layers: bitwise the unfused cpu calls, and cpu-strict's the cpu's */
        float pre_c[N * OC], o_c[N * OC], pre_u[N * OC], o_u[N * OC], pre_s[N * OC], o_s[N * OC];
        C->matmul_gelu_fwd(o_c, pre_c, inp, w, b, N, Cc, OC);
        C->matmul_fwd(pre_u, inp, w, b, N, Cc, OC);
        C->gelu_fwd(o_u, pre_u, N * OC);
        float *d_pre = S->alloc(sizeof pre_s), *d_o = S->alloc(sizeof o_s);
        S->matmul_gelu_fwd(d_o, d_pre, d_inp, d_w, d_b, N, Cc, OC);
        S->to_host(pre_s, d_pre, sizeof pre_s);
        S->to_host(o_s, d_o, sizeof o_s);
        tap_ok(!memcmp(pre_c, pre_u, sizeof pre_c) && !memcmp(o_c, o_u, sizeof o_c) &&
                   !memcmp(pre_c, pre_s, sizeof pre_c) && !memcmp(o_c, o_s, sizeof o_c) && !S->error(),
               "matmul_gelu_fwd: bitwise matmul_fwd + gelu_fwd (cpu), cpu-strict the same");
        /* the layer after the GELU: input gelu(x), x [N, Cc]; dout [N, OC] */
        float x[N * Cc], gx[N * Cc], dy[N * OC], dx_c[N * Cc], dx_u[N * Cc], dx_s[N * Cc], t[N * Cc];
        float dw_c[OC * Cc], dw_u[OC * Cc], dw_s[OC * Cc], db_c[OC], db_u[OC], db_s[OC];
        float dxb_c[Cc], dxb_u[Cc], dxb_s[Cc];
        fill(x, N * Cc, 9); fill(dy, N * OC, 10);
        C->gelu_fwd(gx, x, N * Cc);
        fill(dw_c, OC * Cc, 11); fill(db_c, OC, 12); fill(dxb_c, Cc, 13);
        memcpy(dw_u, dw_c, sizeof dw_c); memcpy(db_u, db_c, sizeof db_c); memcpy(dxb_u, dxb_c, sizeof dxb_c);
        float *d_x = dput(x, sizeof x), *d_gx = dput(gx, sizeof gx), *d_dy = dput(dy, sizeof dy);
        float *d_dw = dput(dw_c, sizeof dw_c), *d_db = dput(db_c, sizeof db_c), *d_dxb = dput(dxb_c, sizeof dxb_c);
        float *d_dx = S->alloc(sizeof dx_s);
        C->matmul_dgelu_bwd(dx_c, dxb_c, dw_c, db_c, dy, gx, x, w, N, Cc, OC);
        C->matmul_bwd(t, dw_u, db_u, dy, gx, w, N, Cc, OC);
        C->gelu_bwd(dx_u, x, t, N * Cc);
        C->matmul_bwd(NULL, NULL, dxb_u, dx_u, gx, w, N, Cc, Cc);   /* the column sums of dx */
        S->matmul_dgelu_bwd(d_dx, d_dxb, d_dw, d_db, d_dy, d_gx, d_x, d_w, N, Cc, OC);
        S->to_host(dx_s, d_dx, sizeof dx_s);
        S->to_host(dw_s, d_dw, sizeof dw_s);
        S->to_host(db_s, d_db, sizeof db_s);
        S->to_host(dxb_s, d_dxb, sizeof dxb_s);
        tap_ok(!memcmp(dx_c, dx_u, sizeof dx_c) && !memcmp(dw_c, dw_u, sizeof dw_c) &&
                   !memcmp(db_c, db_u, sizeof db_c) && !memcmp(dxb_c, dxb_u, sizeof dxb_c),
               "matmul_dgelu_bwd: bitwise matmul_bwd + gelu_bwd + the column sum (cpu)");
        tap_ok(!memcmp(dx_c, dx_s, sizeof dx_c) && !memcmp(dw_c, dw_s, sizeof dw_c) &&
                   !memcmp(db_c, db_s, sizeof db_c) && !memcmp(dxb_c, dxb_s, sizeof dxb_c) && !S->error(),
               "matmul_dgelu_bwd: cpu-strict bitwise the cpu result");
        S->free(d_pre); S->free(d_o); S->free(d_x); S->free(d_gx); S->free(d_dy); S->free(d_dw);
        S->free(d_db); S->free(d_dxb); S->free(d_dx);
    }
    {   /* the residual add and the next norm: bitwise add + the norm (cpu), cpu-strict the same */
        enum { NC = N * Cc };
        float ra[NC], rb[NC], lw[Cc], lb[Cc], res_c[NC], y_c[NC], mu_c[N], rs_c[N];
        float res_u[NC], y_u[NC], mu_u[N], rs_u[N], res_s[NC], y_s[NC], mu_s[N], rs_s[N];
        fill(ra, NC, 14); fill(rb, NC, 15); fill(lw, Cc, 16); fill(lb, Cc, 17);
        float *d_a = dput(ra, sizeof ra), *d_rb = dput(rb, sizeof rb), *d_lw = dput(lw, sizeof lw);
        float *d_lb = dput(lb, sizeof lb), *d_res = S->alloc(sizeof res_s), *d_y = S->alloc(sizeof y_s);
        float *d_mu = S->alloc(sizeof mu_s), *d_rs = S->alloc(sizeof rs_s);
        C->add_layernorm_fwd(res_c, y_c, mu_c, rs_c, ra, rb, lw, lb, N, Cc);
        C->add(res_u, ra, rb, NC);
        C->layernorm_fwd(y_u, mu_u, rs_u, res_u, lw, lb, N, Cc);
        S->add_layernorm_fwd(d_res, d_y, d_mu, d_rs, d_a, d_rb, d_lw, d_lb, N, Cc);
        S->to_host(res_s, d_res, sizeof res_s);
        S->to_host(y_s, d_y, sizeof y_s);
        S->to_host(mu_s, d_mu, sizeof mu_s);
        S->to_host(rs_s, d_rs, sizeof rs_s);
        tap_ok(!memcmp(res_c, res_u, sizeof res_c) && !memcmp(y_c, y_u, sizeof y_c) &&
                   !memcmp(mu_c, mu_u, sizeof mu_c) && !memcmp(rs_c, rs_u, sizeof rs_c) &&
                   !memcmp(res_c, res_s, sizeof res_c) && !memcmp(y_c, y_s, sizeof y_c) &&
                   !memcmp(mu_c, mu_s, sizeof mu_c) && !memcmp(rs_c, rs_s, sizeof rs_c) && !S->error(),
               "add_layernorm_fwd: bitwise add + layernorm_fwd (cpu), cpu-strict the same");
        C->add_rmsnorm_fwd(res_c, y_c, rs_c, ra, rb, lw, 1e-6f, N, Cc);
        C->add(res_u, ra, rb, NC);
        C->rmsnorm_fwd(y_u, rs_u, res_u, lw, 1e-6f, N, Cc);
        S->add_rmsnorm_fwd(d_a, d_y, d_rs, d_a, d_rb, d_lw, 1e-6f, N, Cc);   /* in place: res = a */
        S->to_host(res_s, d_a, sizeof res_s);
        S->to_host(y_s, d_y, sizeof y_s);
        S->to_host(rs_s, d_rs, sizeof rs_s);
        tap_ok(!memcmp(res_c, res_u, sizeof res_c) && !memcmp(y_c, y_u, sizeof y_c) &&
                   !memcmp(rs_c, rs_u, sizeof rs_c) && !memcmp(res_c, res_s, sizeof res_c) &&
                   !memcmp(y_c, y_s, sizeof y_c) && !memcmp(rs_c, rs_s, sizeof rs_c) && !S->error(),
               "add_rmsnorm_fwd: bitwise add + rmsnorm_fwd (cpu), cpu-strict the same in place");
        S->free(d_a); S->free(d_rb); S->free(d_lw); S->free(d_lb); S->free(d_res); S->free(d_y);
        S->free(d_mu); S->free(d_rs);
    }
    {   /* Qwen3's q/k norms and RoPE writing bf16: cpu-strict bitwise the cpu's on blocks of
         * exactly the documented sizes; a k weight shorter than its group refused */
        enum { B = 2, T = 3, NH = 2, NKV = 1, HD = 4, ST = (NH + 2 * NKV) * HD, NR = B * T };
        enum { NX = NR * ST, NRAW = NR * (NH + NKV) * HD, NS = NR * NH + NR * NKV };
        float x[NX], qw[HD], kw[HD], fq[HD / 2], xc[NX], raw_c[NRAW], rs_c[NS], raw_s[NRAW],
            rs_s[NS];
        uint16_t o_c[NX], o_s[NX];
        fill(x, NX, 21); fill(qw, HD, 22); fill(kw, HD, 23);
        for (int j = 0; j < HD / 2; j++) fq[j] = 1.0f / (float)(1 << (2 * j));
        memcpy(xc, x, sizeof x);
        float *d_x = dput(x, sizeof x), *d_qw = dput(qw, sizeof qw), *d_kw = dput(kw, sizeof kw);
        float *d_f = dput(fq, sizeof fq), *d_raw = S->alloc(sizeof raw_s), *d_rs = S->alloc(sizeof rs_s);
        float *d_kw3 = dput(kw, 3 * sizeof(float));
        uint16_t *d_o = S->alloc(sizeof o_s);
        C->qknorm_rope_fwd16(o_c, xc, raw_c, rs_c, qw, kw, 1e-6f, fq, B, T, NH, NKV, NH, NKV, ST, HD,
                             1.0f);
        S->qknorm_rope_fwd16(d_o, d_x, d_raw, d_rs, d_qw, d_kw, 1e-6f, d_f, B, T, NH, NKV, NH, NKV,
                             ST, HD, 1.0f);
        const char *qe = S->error();
        S->to_host(o_s, d_o, sizeof o_s);
        S->to_host(raw_s, d_raw, sizeof raw_s);
        S->to_host(rs_s, d_rs, sizeof rs_s);
        tap_ok(!qe && !memcmp(o_c, o_s, sizeof o_c) && !memcmp(raw_c, raw_s, sizeof raw_c) &&
                   !memcmp(rs_c, rs_s, sizeof rs_c),
               "qknorm_rope_fwd16: cpu-strict bitwise the cpu's (q|k|v, raw, rstd) (%s)",
               qe ? qe : "no error");
        S->qknorm_rope_fwd16(d_o, d_x, d_raw, d_rs, d_qw, d_kw3, 1e-6f, d_f, B, T, NH, NKV, NH, NKV,
                             ST, HD, 1.0f);
        qe = S->error();
        tap_ok(qe && strstr(qe, "qknorm_rope_fwd16") && strstr(qe, "k weight"),
               "qknorm_rope_fwd16 with a k weight past its block: refused (%s)", qe ? qe : "(none)");
        S->free(d_x); S->free(d_qw); S->free(d_kw); S->free(d_f); S->free(d_raw); S->free(d_rs);
        S->free(d_kw3); S->free(d_o);
    }
    float p[32], g[32], m[32], v[32];
    fill(p, 32, 5); fill(g, 32, 6); fill(m, 32, 7); fill(v, 32, 8);
    for (int i = 0; i < 32; i++) v[i] = v[i] * v[i];
    float *dp = dput(p, sizeof p), *dg = dput(g, sizeof g), *dm = dput(m, sizeof m),
          *dv = dput(v, sizeof v);
    C->adamw(p, g, m, v, 32, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.1f, 0.05f, 0.5f);
    S->adamw(dp, dg, dm, dv, 32, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.1f, 0.05f, 0.5f);
    float p2[32], m2[32], v2[32];
    S->to_host(p2, dp, sizeof p2);
    S->to_host(m2, dm, sizeof m2);
    S->to_host(v2, dv, sizeof v2);
    tap_ok(!memcmp(p, p2, sizeof p) && !memcmp(m, m2, sizeof m) && !memcmp(v, v2, sizeof v) &&
           !S->error(), "adamw: bitwise the cpu update");

    /* ---- a host read of device memory faults */
    tap_ok(child_faults(read_direct, d_out) == 1, "host read of a device block: SIGSEGV");
    tap_ok(child_faults(write_direct, d_out) == 1, "host write to a device block: SIGSEGV");
    tap_ok(child_faults(read_staged, d_out) == 0, "the same read through to_host: no fault");

    /* ---- misuse is refused and reported */
    float before[N * OC];
    S->to_host(before, d_out, sizeof before);
    S->matmul_fwd(d_out, inp /* host! */, d_w, d_b, N, Cc, OC);
    const char *e = S->error();
    float after[N * OC];
    S->to_host(after, d_out, sizeof after);
    tap_ok(e && strstr(e, "matmul_fwd") && strstr(e, "inp") && strstr(e, "not device memory") &&
           !memcmp(before, after, sizeof before),
           "host pointer to a kernel: refused, not run, error(): %s", e ? e : "(none)");
    tap_ok(S->error() == NULL, "error() is cleared once read");
    float tmp[4];
    S->to_host(d_out, d_inp, sizeof tmp);
    e = S->error();
    tap_ok(e && strstr(e, "to_host"), "to_host into device memory: refused (%s)", e ? e : "(none)");
    S->to_device(d_out, d_inp, sizeof tmp);
    e = S->error();
    tap_ok(e && strstr(e, "to_device"), "to_device from device memory: refused (%s)", e ? e : "(none)");
    S->copy(d_out, d_inp, sizeof inp + 4);
    e = S->error();
    tap_ok(e && strstr(e, "copy"), "copy past the end of a block: refused (%s)", e ? e : "(none)");
    S->copy2d(d_out, 2 * sizeof(float), d_inp, 2 * sizeof(float), sizeof(float), sizeof inp / 4);
    e = S->error();
    tap_ok(e && strstr(e, "copy2d"), "copy2d whose last row runs past a block: refused (%s)", e ? e : "(none)");
    S->copy2d(d_out, 2 * sizeof(float), d_inp, 2 * sizeof(float), 2 * sizeof(float), 2);
    e = S->error();
    tap_ok(e == NULL, "copy2d inside the blocks: accepted");
    S->free(tmp);
    e = S->error();
    tap_ok(e && strstr(e, "not allocated"), "free of a foreign pointer: reported (%s)", e ? e : "(none)");

    /* ---- asynchronous copies: emulated as late as a device may do them */
    {
        float src[8], dst[8], back[8];
        for (int i = 0; i < 8; ++i) { src[i] = (float)(i + 1); dst[i] = -1.0f; }
        float *d = S->alloc(sizeof src);
        S->to_device(d, src, sizeof src);
        void *h = S->to_host_async(dst, d, sizeof dst);
        const int stale = h && dst[0] == -1.0f;          /* not written before the wait */
        S->zero(d, sizeof src);                           /* queued after the copy */
        S->copy_wait(h);
        tap_ok(stale && dst[0] == 1.0f && dst[7] == 8.0f && !S->error(),
               "to_host_async: the host buffer is written at copy_wait, with the data as of "
               "the call");
        h = S->to_device_async(d, src, sizeof src);
        src[0] = 42.0f;                                   /* breaks the rule: changed before the wait */
        S->copy_wait(h);
        S->to_host(back, d, sizeof back);
        tap_ok(back[0] == 42.0f && back[1] == 2.0f && !S->error(),
               "to_device_async: the host source is read late (a change before the wait is "
               "uploaded, as a device could)");
        h = S->to_device_async(d, src, sizeof src);
        S->zero(d, 4);                                    /* the next entry runs the upload first */
        src[1] = 99.0f;
        S->copy_wait(h);
        S->to_host(back, d, sizeof back);
        tap_ok(back[0] == 0.0f && back[1] == 2.0f && !S->error(),
               "to_device_async: uploaded before the next entry of the table, in queue order");
        S->copy_wait(back);
        const char *ew = S->error();
        tap_ok(ew && strstr(ew, "not a pending copy"), "copy_wait of a foreign handle: reported (%s)",
               ew ? ew : "(none)");
        S->free(d);
        tap_ok(C->to_host_async == NULL && C->copy_wait == NULL,
               "cpu: no async entries (callers use to_host / to_device)");
    }

    S->free(dz); S->free(d_inp); S->free(d_w); S->free(d_b); S->free(d_out);
    S->free(d_logits); S->free(d_loss); S->free(d_tg);
    S->free(dp); S->free(dg); S->free(dm); S->free(dv);
    tap_ok(!S->error(), "frees of live blocks: no error");

    /* ---- accounted device blocks */
    zt_mem_stats m0, m1, mz;
    zt_mem_get(&m0);
    zt_mem_set_backend(S);
    zt_status st;
    float *dev = zt_mem_alloc(1000, ZT_MEM_PARAMS, &st);
    float *host = zt_mem_alloc(500, ZT_MEM_ACTIVATIONS | ZT_MEM_HOST, &st);
    float *off = zt_mem_alloc(300, ZT_MEM_OPTIMIZER | ZT_MEM_ON_HOST, &st);
    zt_mem_get(&m1);
    tap_ok(dev && host && off && zt_mem_is_device(dev) && !zt_mem_is_device(host) &&
           !zt_mem_is_device(off), "device backend: a plain block is device memory, HOST / "
           "ON_HOST blocks are host memory");
    tap_ok(child_faults(read_direct, dev) == 1 && child_faults(read_direct, host) == 0,
           "the accounted device block faults on a host read, the host block does not");
    tap_ok(m1.cur[ZT_MEM_PARAMS] - m0.cur[ZT_MEM_PARAMS] == 1000 &&
           m1.host_cur[ZT_MEM_PARAMS] == m0.host_cur[ZT_MEM_PARAMS] &&
           m1.cur[ZT_MEM_ACTIVATIONS] - m0.cur[ZT_MEM_ACTIVATIONS] == 500 &&
           m1.host_cur[ZT_MEM_ACTIVATIONS] - m0.host_cur[ZT_MEM_ACTIVATIONS] == 500 &&
           m1.host_cur[ZT_MEM_OPTIMIZER] - m0.host_cur[ZT_MEM_OPTIMIZER] == 300 &&
           m1.cur_total - m0.cur_total == 1800,
           "accounting: categories as before; host blocks in the host columns");
    /* many blocks: the table grows and shrinks */
    void *many[600];
    int all = 1;
    for (int i = 0; i < 600; i++) all &= (many[i] = zt_mem_alloc(8 + (size_t)i, ZT_MEM_COMM, &st)) != NULL;
    for (int i = 0; i < 600; i += 2) zt_mem_free(many[i]);
    for (int i = 1; i < 600; i += 2) all &= zt_mem_is_device(many[i]);
    for (int i = 1; i < 600; i += 2) zt_mem_free(many[i]);
    zt_mem_free(dev);
    zt_mem_free(host);
    zt_mem_free(off);
    zt_mem_get(&mz);
    tap_ok(all && mz.cur_total == m0.cur_total && mz.cur[ZT_MEM_COMM] == m0.cur[ZT_MEM_COMM] &&
           mz.host_cur[ZT_MEM_ACTIVATIONS] == m0.host_cur[ZT_MEM_ACTIVATIONS] && !S->error(),
           "600 device blocks in and out of the table; every counter back where it was");

    /* ---- pin_memory (ZT_MEM_PIN): cpu-strict has no host_register, so an
     * offloaded block asked to be pinned stays pageable and counts 0 pinned
     * bytes, with no warning (nothing failed) */
    tap_ok(!S->host_register && !S->host_unregister && !C->host_register,
           "cpu and cpu-strict cannot pin (no host_register)");
    float *np_ = zt_mem_alloc(300, ZT_MEM_OPTIMIZER | ZT_MEM_ON_HOST | ZT_MEM_PIN, &st);
    zt_mem_get(&m1);
    char why[400];
    tap_ok(np_ && !zt_mem_is_device(np_) && m1.pinned_cur == mz.pinned_cur &&
           m1.host_cur[ZT_MEM_OPTIMIZER] - mz.host_cur[ZT_MEM_OPTIMIZER] == 300 &&
           !zt_mem_pin_warning(why, sizeof why),
           "pin_memory without host_register: host block, 0 bytes pinned, no warning");
    if (np_) np_[0] = 1.0f;
    zt_mem_free(np_);
    /* the bookkeeping of a backend that can pin, with a test table (cpu-strict
     * plus a host_register that records its calls; the product's backends
     * never pretend): registered blocks are whole pages, pinned bytes count
     * while they live, unregistered before free; a failure warns once */
    zt_backend P = *S;
    P.host_register = rec_register;
    P.host_unregister = rec_unregister;
    zt_mem_set_backend(&P);
    zt_mem_get(&m0);
    float *pa = zt_mem_alloc(1000, ZT_MEM_PARAMS | ZT_MEM_ON_HOST | ZT_MEM_PIN, &st);
    float *pb = zt_mem_alloc(700, ZT_MEM_OPTIMIZER | ZT_MEM_ON_HOST, &st);   /* not asked */
    zt_mem_get(&m1);
    const long pg = sysconf(_SC_PAGESIZE);
    tap_ok(pa && pb && g_reg_calls == 1 && g_reg_live == 1 && g_reg_p && (uintptr_t)g_reg_p % (uintptr_t)pg == 0 &&
           g_reg_bytes % (size_t)pg == 0 && (char *)pa >= (char *)g_reg_p &&
           (char *)pa + 1000 <= (char *)g_reg_p + g_reg_bytes &&
           m1.pinned_cur - m0.pinned_cur == 1000 && m1.pinned_peak >= m1.pinned_cur,
           "pinned block: one registration of whole pages around it, 1000 bytes pinned");
    if (pa) pa[249] = 2.0f;   /* host memory */
    zt_mem_free(pa);
    zt_mem_free(pb);
    zt_mem_get(&m1);
    tap_ok(g_reg_live == 0 && g_unreg_calls == 1 && m1.pinned_cur == m0.pinned_cur,
           "freed: unregistered once, pinned bytes back");
    g_reg_fail = 1;
    pa = zt_mem_alloc(100, ZT_MEM_OPTIMIZER | ZT_MEM_ON_HOST | ZT_MEM_PIN, &st);
    pb = zt_mem_alloc(100, ZT_MEM_PARAMS | ZT_MEM_ON_HOST | ZT_MEM_PIN, &st);
    zt_mem_get(&m1);
    int w1 = zt_mem_pin_warning(why, sizeof why);
    int w2 = zt_mem_pin_warning(why + 200, 200);
    tap_ok(pa && pb && m1.pinned_cur == m0.pinned_cur && w1 && !w2 &&
           strstr(why, "could not page-lock 100 bytes of optimizer") &&
           strstr(why, "continuing with pageable memory"),
           "failed registration: blocks usable and unpinned; warned once: %s", why);
    if (pa && pb) pa[0] = pb[0] = 3.0f;
    zt_mem_free(pa);
    zt_mem_free(pb);
    tap_ok(g_unreg_calls == 1, "an unpinned block is not unregistered");
    /* the staging of asynchronous copies (ZT_MEM_HOST | ZT_MEM_PIN: the
     * step's scalars, the token arrays, MoE counts): pinned like an
     * offloaded block, counted in the host column and the pinned bytes;
     * without ZT_MEM_PIN pageable; a refused registration leaves it
     * pageable, said as the staging it is */
    g_reg_fail = 0;
    zt_mem_get(&m0);
    const int rc0 = g_reg_calls, uc0 = g_unreg_calls;
    float *sa = zt_mem_alloc(32, ZT_MEM_WORKSPACE | ZT_MEM_HOST | ZT_MEM_PIN, &st);
    float *sb = zt_mem_alloc(48, ZT_MEM_WORKSPACE | ZT_MEM_HOST, &st);
    zt_mem_get(&m1);
    tap_ok(sa && sb && !zt_mem_is_device(sa) && g_reg_calls == rc0 + 1 && (char *)sa >= (char *)g_reg_p &&
           (char *)sa + 32 <= (char *)g_reg_p + g_reg_bytes && m1.pinned_cur - m0.pinned_cur == 32 &&
           m1.host_cur[ZT_MEM_WORKSPACE] - m0.host_cur[ZT_MEM_WORKSPACE] == 32 + 48 &&
           zt_mem_pinned(sa) && !zt_mem_pinned(sb) && !zt_mem_pinned(NULL),
           "staging block (host, ZT_MEM_PIN): registered, 32 bytes pinned; without the flag pageable");
    if (sa && sb) sa[7] = sb[11] = 4.0f;   /* host memory */
    zt_mem_free(sa);
    zt_mem_free(sb);
    zt_mem_get(&m1);
    tap_ok(g_unreg_calls == uc0 + 1 && m1.pinned_cur == m0.pinned_cur, "staging block freed: unregistered, pinned bytes back");
    g_reg_fail = 1;
    sa = zt_mem_alloc(32, ZT_MEM_WORKSPACE | ZT_MEM_HOST | ZT_MEM_PIN, &st);
    zt_mem_get(&m1);
    why[0] = 0;
    w1 = zt_mem_pin_warning(why, sizeof why);   /* (the warning above was reported: none) */
    tap_ok(sa && !zt_mem_pinned(sa) && m1.pinned_cur == m0.pinned_cur && !w1,
           "staging block refused: usable, pageable (zt_mem_pinned 0)");
    if (sa) sa[0] = 5.0f;
    zt_mem_free(sa);
    g_reg_fail = 0;
    zt_mem_set_backend(C);
    float *h2 = zt_mem_alloc(64, ZT_MEM_PARAMS, &st);
    tap_ok(h2 && !zt_mem_is_device(h2), "cpu backend: blocks are host memory again");
    h2[0] = 1.0f;
    zt_mem_free(h2);
    zt_mem_set_backend(NULL);
    /* the step's entries on device memory: bitwise the entries they replace */
    check_step_entries(S, "cpu-strict");
    dw_fresh_checks(S, "cpu-strict", 37, 29, 48);
    widen_runs_checks(S, "cpu-strict");
    tap_ok(S->error() == NULL, "the step's entries: no misuse reported");
    return tap_done();
}
