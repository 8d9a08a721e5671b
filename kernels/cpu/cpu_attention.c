/*
 * cpu_attention.c -- causal multi-head self-attention on the CPU,
 * memory-efficient: no [T,T] matrix is ever stored.
 *
 * Forward: one query row at a time, online softmax over blocks of keys;
 * keeps only out and the row's log-sum-exp (lse).
 * Backward: parallel over (b, kv head) -- each thread owns the whole dk/dv
 * slice of its (b, kv head) and the dq of its q heads, so there are no
 * write races -- and recomputes p = exp(q.k * scale - lse) row by row.
 * (Parallelism is B * NKV work items: multi-query attention with B = 1
 * runs the backward on one thread.)
 *
 * One implementation serves both table entries: grouped-query attention
 * (gqa_fwd/bwd) with NH q heads and NKV kv heads of hs floats per position,
 * qkv row R = (NH + 2 NKV) hs: q head h at [.., h*hs], its kv head
 * kh = h / (NH/NKV) at k [.., (NH + kh)*hs] and v [.., (NH + NKV + kh)*hs].
 * GPT-2's attention_fwd/bwd is the case NKV = NH, hs = C/NH (R = 3C, k at
 * C + h*hs, v at 2C + h*hs): the same operations on the same values.
 * Every result is bitwise independent of the thread count (each output
 * element is written by one work item, in a fixed order).
 *
 * gqa_ext_fwd/bwd (Gemma 2/3) run the same code with their options: the
 * score scale, the attention soft-cap x <- cap tanh(x / cap) and the
 * sliding window (keys u > t - window).  gqa_fwd/bwd are the case scale =
 * 1/sqrt(hs), cap 0, window 0, which takes the same operations as before
 * the options existed (the capped and windowed forms are separate
 * branches, so no expression of the plain path changes).
 */
#ifdef HAVE_CONFIG_H
#include "ztconfig.h"
#endif

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_internal.h"

#define ZT_ATT_KB 128   /* keys per online-softmax block (a multiple of ZT_ATT_TQ) */
#define ZT_ATT_TQ 4     /* query rows processed together (each key is loaded once per tile) */

/* score of a key after the scale: the soft-cap (cap > 0) */
static inline float cap_score(float x, float cap) { return cap * tanhf(x / cap); }

/* first key of query row t: t - window + 1 (window > 0), else 0 */
static inline int first_key(int t, int window) {
    return window > 0 && t - window + 1 > 0 ? t - window + 1 : 0;
}

static inline float dotf(const float *a, const float *b, int n) {
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

/*
 * Forward.  Work item = (b, h, tile of ZT_ATT_TQ query rows).  For each
 * block of keys: scores of the 4 rows (4 independent dot products per key,
 * masked to -inf beyond the diagonal), then per row the online-softmax
 * rescale, then acc_r += p_r * v_j with v_j loaded once for the 4 rows.
 * A tile shorter than 4 rows (T % 4) repeats its last row's pointers; the
 * extra rows are computed and dropped.
 */
/* one (b, h, tile of <= ZT_ATT_TQ query rows) */
ZT_TARGET_CLONES
static void att_fwd_tile(float *out, float *lse, const float *qkv, int b, int h, int t0,
                         int T, int NH, int NKV, int hs, float scale, float cap, int win) {
    const size_t R = (size_t)(NH + 2 * NKV) * hs;   /* qkv row */
    const size_t C = (size_t)NH * hs;               /* out row */
    const int kh = h / (NH / NKV);
    float acc[ZT_ATT_TQ * hs];
    float s[ZT_ATT_TQ][ZT_ATT_KB];
    const int nq = T - t0 < ZT_ATT_TQ ? T - t0 : ZT_ATT_TQ;
    const int tend = t0 + nq;               /* keys 0 .. tend-1 */
    const float *base = qkv + (size_t)b * T * R + (size_t)h * hs;
    const float *kbase = qkv + (size_t)b * T * R + (size_t)(NH + kh) * hs;
    const float *vbase = kbase + (size_t)NKV * hs;
    const float *q[ZT_ATT_TQ];
    float m[ZT_ATT_TQ];
    double l[ZT_ATT_TQ];
    int lo[ZT_ATT_TQ];   /* first key of each row (a padding row: the last row's) */
    for (int r = 0; r < ZT_ATT_TQ; r++) {
        q[r] = base + (size_t)(t0 + (r < nq ? r : nq - 1)) * R;
        lo[r] = first_key(t0 + (r < nq ? r : nq - 1), win);
        m[r] = -INFINITY;
        l[r] = 0.0;
    }
    const int lo0 = lo[0], lo1 = lo[1], lo2 = lo[2], lo3 = lo[3];
    const float *q0 = q[0], *q1 = q[1], *q2 = q[2], *q3 = q[3];
    for (int i = 0; i < ZT_ATT_TQ * hs; i++) acc[i] = 0.0f;
    float *a0 = acc, *a1 = acc + hs, *a2 = acc + 2 * hs, *a3 = acc + 3 * hs;

    /* the first block starts at row 0's first key: it holds every row's
     * first key (rows are < ZT_ATT_KB apart), so no row's first block is
     * all masked */
    for (int j0 = lo0; j0 < tend; j0 += ZT_ATT_KB) {
        const int nj = tend - j0 < ZT_ATT_KB ? tend - j0 : ZT_ATT_KB;
        for (int j = 0; j < nj; j++) {
            const int jj = j0 + j;
            const float *k = kbase + (size_t)jj * R;
            float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
#pragma omp simd reduction(+ : s0, s1, s2, s3)
            for (int i = 0; i < hs; i++) {
                const float kv = k[i];
                s0 += q0[i] * kv;
                s1 += q1[i] * kv;
                s2 += q2[i] * kv;
                s3 += q3[i] * kv;
            }
            if (cap > 0.0f) {
                s0 = cap_score(s0 * scale, cap);
                s1 = cap_score(s1 * scale, cap);
                s2 = cap_score(s2 * scale, cap);
                s3 = cap_score(s3 * scale, cap);
                s[0][j] = jj <= t0 && jj >= lo0 ? s0 : -INFINITY;
                s[1][j] = jj <= t0 + 1 && jj >= lo1 ? s1 : -INFINITY;
                s[2][j] = jj <= t0 + 2 && jj >= lo2 ? s2 : -INFINITY;
                s[3][j] = jj <= t0 + 3 && jj >= lo3 ? s3 : -INFINITY;
            } else {
                s[0][j] = jj <= t0 && jj >= lo0 ? s0 * scale : -INFINITY;
                s[1][j] = jj <= t0 + 1 && jj >= lo1 ? s1 * scale : -INFINITY;
                s[2][j] = jj <= t0 + 2 && jj >= lo2 ? s2 * scale : -INFINITY;
                s[3][j] = jj <= t0 + 3 && jj >= lo3 ? s3 * scale : -INFINITY;
            }
        }
        for (int r = 0; r < ZT_ATT_TQ; r++) {
            float *sr = s[r];
            float bm = -INFINITY;
            for (int j = 0; j < nj; j++) bm = sr[j] > bm ? sr[j] : bm;
            if (bm > m[r]) {
                /* 0 on the first block (m = -inf) */
                const float corr = zt_expf(m[r] - bm);
                float *ar = acc + (size_t)r * hs;
                l[r] *= corr;
#pragma omp simd
                for (int i = 0; i < hs; i++) ar[i] *= corr;
                m[r] = bm;
            }
            const float mr = m[r];
            float bs = 0.0f;
#pragma omp simd reduction(+ : bs)
            for (int j = 0; j < nj; j++) {
                const float p = zt_expf(sr[j] - mr);   /* masked: exp(-inf) = 0 */
                sr[j] = p;
                bs += p;
            }
            l[r] += bs;
        }
        for (int j = 0; j < nj; j++) {
            const float *v = vbase + (size_t)(j0 + j) * R;
            const float p0 = s[0][j], p1 = s[1][j], p2 = s[2][j], p3 = s[3][j];
#pragma omp simd
            for (int i = 0; i < hs; i++) {
                const float vv = v[i];
                a0[i] += p0 * vv;
                a1[i] += p1 * vv;
                a2[i] += p2 * vv;
                a3[i] += p3 * vv;
            }
        }
    }
    for (int r = 0; r < nq; r++) {
        const float inv = (float)(1.0 / l[r]);
        const float *ar = acc + (size_t)r * hs;
        float *o = out + ((size_t)b * T + t0 + r) * C + (size_t)h * hs;
#pragma omp simd
        for (int i = 0; i < hs; i++) o[i] = ar[i] * inv;
        lse[((size_t)b * NH + h) * T + t0 + r] = m[r] + (float)log(l[r]);
    }
}


/*
 * bf16 matmul mode (set_matmul_precision(ZT_MATMUL_BF16)): attention as the
 * CUDA backend's tensor-core path computes it (kernels/cuda/cuda_attention.cu),
 * so the two backends agree up to the order of fp32 sums: q, k, v and dout
 * rounded to bf16; scores x = (q.k) scale in fp32; lse = m + log(sum exp(x -
 * m)) over the row (no online rescaling; libm's expf, not zt_expf, like the
 * GPU's expf); p = bf16(exp(x - lse)); out = sum
 * p v; backward D = dout . out (fp32), dP = dout.v, dS = bf16(p (dP - D)
 * scale), dq = sum dS k, dk += dS q, dv += p dout.  Work items as above:
 * (b, h) rows in the forward, (b, kv head) in the backward.
 */

/* a copy of src[n] rounded to bf16, NULL when out of memory (the caller
 * then computes in fp32) */
static float *bf16_copy(const float *src, size_t n) {
    float *d = malloc(n * sizeof(float));
    if (!d) return NULL;
#pragma omp parallel for simd schedule(static) if (n >= 131072)
    for (size_t i = 0; i < n; i++) d[i] = zt_cpu_round_bf16(src[i]);
    return d;
}

/* scores x[lo..i] of query row i of head h (rounded operands), before the
 * soft-cap */
static void bf16_scores(float *x, const float *q16, size_t R, int b, int h, int kh, int i, int lo,
                        int T, int NH, int hs, float scale) {
    const float *q = q16 + ((size_t)b * T + i) * R + (size_t)h * hs;
    const float *kb = q16 + (size_t)b * T * R + (size_t)(NH + kh) * hs;
    for (int j = lo; j <= i; j++) x[j] = dotf(q, kb + (size_t)j * R, hs) * scale;
}

static int att_fwd_bf16(float *out, float *lse, const float *qkv, int B, int T, int NH, int NKV,
                        int hs, float scale, float cap, int win) {
    const size_t R = (size_t)(NH + 2 * NKV) * hs, C = (size_t)NH * hs;
    const size_t per = (size_t)T + (size_t)hs;   /* a work item's scores and accumulator */
    float *q16 = bf16_copy(qkv, (size_t)B * T * R), *buf = malloc((size_t)B * NH * per * sizeof(float));
    if (!q16 || !buf) { free(q16); free(buf); return 0; }
    const int G = NH / NKV;
    const int par = (long)B * NH * T * (long)T * hs >= 131072;
#pragma omp parallel for schedule(static) if (par)
    for (int bh = 0; bh < B * NH; bh++) {
        const int b = bh / NH, h = bh % NH, kh = h / G;
        float *x = buf + (size_t)bh * per, *acc = x + T;
        const float *vb = q16 + (size_t)b * T * R + (size_t)(NH + NKV + kh) * hs;
        for (int i = 0; i < T; i++) {
            const int lo = first_key(i, win);
            bf16_scores(x, q16, R, b, h, kh, i, lo, T, NH, hs, scale);
            if (cap > 0.0f)
                for (int j = lo; j <= i; j++) x[j] = cap_score(x[j], cap);
            float m = -INFINITY;
            for (int j = lo; j <= i; j++) m = x[j] > m ? x[j] : m;
            float sum = 0.0f;
            for (int j = lo; j <= i; j++) sum += expf(x[j] - m);
            const float l = m + logf(sum);
            lse[((size_t)b * NH + h) * T + i] = l;
            for (int d = 0; d < hs; d++) acc[d] = 0.0f;
            for (int j = lo; j <= i; j++) {
                const float p = zt_cpu_round_bf16(expf(x[j] - l));
                const float *v = vb + (size_t)j * R;
#pragma omp simd
                for (int d = 0; d < hs; d++) acc[d] += p * v[d];
            }
            memcpy(out + ((size_t)b * T + i) * C + (size_t)h * hs, acc, (size_t)hs * sizeof(float));
        }
    }
    free(q16);
    free(buf);
    return 1;
}

static int att_bwd_bf16(float *dqkv, const float *dout, const float *qkv, const float *out,
                        const float *lse, int B, int T, int NH, int NKV, int hs, float scale,
                        float cap, int win) {
    const size_t R = (size_t)(NH + 2 * NKV) * hs, C = (size_t)NH * hs;
    const int G = NH / NKV, BK = B * NKV;
    const size_t per = (size_t)T + (size_t)hs;   /* a work item's scores and dq */
    float *q16 = bf16_copy(qkv, (size_t)B * T * R), *do16 = bf16_copy(dout, (size_t)B * T * C);
    float *buf = malloc((size_t)BK * per * sizeof(float));
    if (!q16 || !do16 || !buf) { free(q16); free(do16); free(buf); return 0; }
    const int par = BK > 1 && (long)B * NH * T * (long)T * hs >= 131072;
#pragma omp parallel for schedule(static) if (par)
    for (int bk = 0; bk < BK; bk++) {
        const int b = bk / NKV, kh = bk % NKV;
        float *x = buf + (size_t)bk * per, *dq = x + T;
        const size_t bo = (size_t)b * T * R;
        const float *kb = q16 + bo + (size_t)(NH + kh) * hs, *vb = kb + (size_t)NKV * hs;
        float *dkb = dqkv + bo + (size_t)(NH + kh) * hs, *dvb = dkb + (size_t)NKV * hs;
        for (int t = 0; t < T; t++) {
            memset(dkb + (size_t)t * R, 0, (size_t)hs * sizeof(float));
            memset(dvb + (size_t)t * R, 0, (size_t)hs * sizeof(float));
        }
        for (int h = kh * G; h < (kh + 1) * G; h++)
            for (int i = 0; i < T; i++) {
                const size_t orow = ((size_t)b * T + i) * C + (size_t)h * hs;
                const float *q = q16 + bo + (size_t)i * R + (size_t)h * hs;
                const float *g = do16 + orow;
                const float D = dotf(dout + orow, out + orow, hs);
                const float L = lse[((size_t)b * NH + h) * T + i];
                const int lo = first_key(i, win);
                bf16_scores(x, q16, R, b, h, kh, i, lo, T, NH, hs, scale);
                for (int d = 0; d < hs; d++) dq[d] = 0.0f;
                for (int j = lo; j <= i; j++) {
                    const float *k = kb + (size_t)j * R, *v = vb + (size_t)j * R;
                    float p, ds;
                    if (cap > 0.0f) {
                        const float th = tanhf(x[j] / cap);
                        p = zt_cpu_round_bf16(expf(cap * th - L));
                        ds = zt_cpu_round_bf16(p * (dotf(g, v, hs) - D) * (1.0f - th * th) * scale);
                    } else {
                        p = zt_cpu_round_bf16(expf(x[j] - L));
                        ds = zt_cpu_round_bf16(p * (dotf(g, v, hs) - D) * scale);
                    }
                    float *dk = dkb + (size_t)j * R, *dv = dvb + (size_t)j * R;
#pragma omp simd
                    for (int d = 0; d < hs; d++) {
                        dq[d] += ds * k[d];
                        dk[d] += ds * q[d];
                        dv[d] += p * g[d];
                    }
                }
                memcpy(dqkv + bo + (size_t)i * R + (size_t)h * hs, dq, (size_t)hs * sizeof(float));
            }
    }
    free(q16);
    free(do16);
    free(buf);
    return 1;
}

void zt_cpu_gqa_ext_fwd(float *out, float *lse, const float *qkv,
                        int B, int T, int NH, int NKV, int hs, const zt_attn_opts *o) {
    if (B <= 0 || T <= 0 || NH <= 0 || NKV <= 0 || hs <= 0 || NH % NKV || !o) return;
    const float scale = o->scale, cap = o->softcap;
    const int win = o->window > 0 && o->window < T ? o->window : 0;
    if (zt_cpu_matmul_mode() == ZT_MATMUL_BF16 &&
        att_fwd_bf16(out, lse, qkv, B, T, NH, NKV, hs, scale, cap, win))
        return;
    const long ntile = (T + ZT_ATT_TQ - 1) / ZT_ATT_TQ;
    const long total = (long)B * NH * ntile;
    const int par = (long)B * NH * T * (long)T * hs >= 131072;
    /* tiles of one (b, h) are consecutive; chunks of 2 tiles alternate
     * between threads so the causal triangle is shared out evenly */
#pragma omp parallel for schedule(static, 2) if (par)
    for (long idx = 0; idx < total; idx++) {
        const int t0 = (int)(idx % ntile) * ZT_ATT_TQ;
        const int h = (int)((idx / ntile) % NH);
        const int b = (int)(idx / (ntile * NH));
        att_fwd_tile(out, lse, qkv, b, h, t0, T, NH, NKV, hs, scale, cap, win);
    }
}

void zt_cpu_gqa_fwd(float *out, float *lse, const float *qkv,
                    int B, int T, int NH, int NKV, int hs) {
    if (hs <= 0) return;
    const zt_attn_opts o = {1.0f / sqrtf((float)hs), 0.0f, 0};
    zt_cpu_gqa_ext_fwd(out, lse, qkv, B, T, NH, NKV, hs, &o);
}

void zt_cpu_attention_fwd(float *out, float *lse, const float *qkv,
                          int B, int T, int C, int NH) {
    if (C <= 0 || NH <= 0) return;
    zt_cpu_gqa_fwd(out, lse, qkv, B, T, NH, NH, C / NH);
}

/*
 * Backward.  Work item = one (b, kv head): it owns dk, dv of that kv head
 * and dq of its NH/NKV q heads for every position, so there are no write
 * races; its q heads are added into dk, dv in increasing order.  Query
 * rows go in tiles of ZT_ATT_TQ: for each key j, the 4 scores and the 4
 * dout.v_j come from one pass over k_j / v_j, and dk_j, dv_j are read and
 * written once per tile.
 *   p = exp(q.k * scale - lse),  D_t = dout_t . out_t,
 *   dS = p (dout_t . v_j - D_t),  dq_t += scale dS k_j,
 *   dk_j += scale dS q_t,  dv_j += p dout_t.
 */
/* q head h's contribution: its dq (written), and dk, dv of its kv head
 * kh (+=) */
ZT_TARGET_CLONES
static void att_bwd_head(float *dqkv, const float *dout, const float *qkv,
                         const float *out, const float *lse, int b, int h, int kh,
                         int T, int NH, int NKV, int hs, float scale, float cap, int win) {
    const size_t R = (size_t)(NH + 2 * NKV) * hs;   /* qkv row */
    const size_t C = (size_t)NH * hs;               /* out row */
    float dqa[ZT_ATT_TQ * hs];
    const size_t hoff = (size_t)h * hs, koff = (size_t)(NH + kh) * hs;
    const size_t voff = koff + (size_t)NKV * hs;
    const float *base = qkv + (size_t)b * T * R + hoff;
    const float *kbase = qkv + (size_t)b * T * R + koff;
    const float *vbase = qkv + (size_t)b * T * R + voff;
    float *dbase = dqkv + (size_t)b * T * R + hoff;
    float *dkbase = dqkv + (size_t)b * T * R + koff;
    float *dvbase = dqkv + (size_t)b * T * R + voff;
    const float *obase = out + (size_t)b * T * C + hoff;
    const float *dobase = dout + (size_t)b * T * C + hoff;
    const float *lrow = lse + ((size_t)b * NH + h) * T;

    for (int t0 = 0; t0 < T; t0 += ZT_ATT_TQ) {
        const int nq = T - t0 < ZT_ATT_TQ ? T - t0 : ZT_ATT_TQ;
        const float *q[ZT_ATT_TQ], *g[ZT_ATT_TQ];
        float L[ZT_ATT_TQ], D[ZT_ATT_TQ];
        int lo[ZT_ATT_TQ];
        for (int r = 0; r < ZT_ATT_TQ; r++) {
            const int t = t0 + (r < nq ? r : nq - 1);
            lo[r] = first_key(t, win);
            q[r] = base + (size_t)t * R;
            g[r] = dobase + (size_t)t * C;
            L[r] = lrow[t];
            D[r] = dotf(g[r], obase + (size_t)t * C, hs);
        }
        const float *q0 = q[0], *q1 = q[1], *q2 = q[2], *q3 = q[3];
        const float *g0 = g[0], *g1 = g[1], *g2 = g[2], *g3 = g[3];
        for (int i = 0; i < ZT_ATT_TQ * hs; i++) dqa[i] = 0.0f;
        float *dq0 = dqa, *dq1 = dqa + hs, *dq2 = dqa + 2 * hs, *dq3 = dqa + 3 * hs;

        const int tend = t0 + nq;
        for (int j = lo[0]; j < tend; j++) {
            const float *k = kbase + (size_t)j * R;
            const float *v = vbase + (size_t)j * R;
            float *dk = dkbase + (size_t)j * R;
            float *dv = dvbase + (size_t)j * R;
            float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
            float e0 = 0.0f, e1 = 0.0f, e2 = 0.0f, e3 = 0.0f;
#pragma omp simd reduction(+ : s0, s1, s2, s3, e0, e1, e2, e3)
            for (int i = 0; i < hs; i++) {
                const float kv = k[i], vv = v[i];
                s0 += q0[i] * kv;
                s1 += q1[i] * kv;
                s2 += q2[i] * kv;
                s3 += q3[i] * kv;
                e0 += g0[i] * vv;
                e1 += g1[i] * vv;
                e2 += g2[i] * vv;
                e3 += g3[i] * vv;
            }
            const float sv[ZT_ATT_TQ] = {s0, s1, s2, s3};
            const float ev[ZT_ATT_TQ] = {e0, e1, e2, e3};
            float p[ZT_ATT_TQ], ds[ZT_ATT_TQ];
            if (cap > 0.0f)
                for (int r = 0; r < ZT_ATT_TQ; r++) {
                    /* dS through the cap: times 1 - tanh^2 */
                    const float th = tanhf(sv[r] * scale / cap);
                    p[r] = (r < nq && j <= t0 + r && j >= lo[r]) ? zt_expf(cap * th - L[r]) : 0.0f;
                    ds[r] = p[r] * (ev[r] - D[r]) * (1.0f - th * th) * scale;
                }
            else
                for (int r = 0; r < ZT_ATT_TQ; r++) {
                    /* causal mask (and window), and padding rows of a short tile */
                    p[r] = (r < nq && j <= t0 + r && j >= lo[r]) ? zt_expf(sv[r] * scale - L[r])
                                                                 : 0.0f;
                    ds[r] = p[r] * (ev[r] - D[r]) * scale;
                }
            const float p0 = p[0], p1 = p[1], p2 = p[2], p3 = p[3];
            const float d0 = ds[0], d1 = ds[1], d2 = ds[2], d3 = ds[3];
#pragma omp simd
            for (int i = 0; i < hs; i++) {
                const float kv = k[i];
                dk[i] += d0 * q0[i] + d1 * q1[i] + d2 * q2[i] + d3 * q3[i];
                dv[i] += p0 * g0[i] + p1 * g1[i] + p2 * g2[i] + p3 * g3[i];
                dq0[i] += d0 * kv;
                dq1[i] += d1 * kv;
                dq2[i] += d2 * kv;
                dq3[i] += d3 * kv;
            }
        }
        for (int r = 0; r < nq; r++) {
            float *dqt = dbase + (size_t)(t0 + r) * R;
            const float *src = dqa + (size_t)r * hs;
#pragma omp simd
            for (int i = 0; i < hs; i++) dqt[i] = src[i];
        }
    }
}

/* one (b, kv head): zero its dk, dv, then add its q heads in order */
static void att_bwd_kv(float *dqkv, const float *dout, const float *qkv,
                       const float *out, const float *lse, int b, int kh,
                       int T, int NH, int NKV, int hs, float scale, float cap, int win) {
    const size_t R = (size_t)(NH + 2 * NKV) * hs;
    float *dk = dqkv + (size_t)b * T * R + (size_t)(NH + kh) * hs;
    float *dv = dk + (size_t)NKV * hs;
    for (int t = 0; t < T; t++) {
        memset(dk + (size_t)t * R, 0, (size_t)hs * sizeof(float));
        memset(dv + (size_t)t * R, 0, (size_t)hs * sizeof(float));
    }
    const int G = NH / NKV;
    for (int h = kh * G; h < (kh + 1) * G; h++)
        att_bwd_head(dqkv, dout, qkv, out, lse, b, h, kh, T, NH, NKV, hs, scale, cap, win);
}

void zt_cpu_gqa_ext_bwd(float *dqkv, const float *dout, const float *qkv,
                        const float *out, const float *lse,
                        int B, int T, int NH, int NKV, int hs, const zt_attn_opts *o) {
    if (B <= 0 || T <= 0 || NH <= 0 || NKV <= 0 || hs <= 0 || NH % NKV || !o) return;
    const float scale = o->scale, cap = o->softcap;
    const int win = o->window > 0 && o->window < T ? o->window : 0;
    if (zt_cpu_matmul_mode() == ZT_MATMUL_BF16 &&
        att_bwd_bf16(dqkv, dout, qkv, out, lse, B, T, NH, NKV, hs, scale, cap, win))
        return;
    const int BK = B * NKV;
    const int par = BK > 1 && (long)B * NH * T * (long)T * hs >= 131072;
#pragma omp parallel for schedule(static) if (par)
    for (int bk = 0; bk < BK; bk++)
        att_bwd_kv(dqkv, dout, qkv, out, lse, bk / NKV, bk % NKV, T, NH, NKV, hs, scale, cap,
                   win);
}

void zt_cpu_gqa_bwd(float *dqkv, const float *dout, const float *qkv,
                    const float *out, const float *lse,
                    int B, int T, int NH, int NKV, int hs) {
    if (hs <= 0) return;
    const zt_attn_opts o = {1.0f / sqrtf((float)hs), 0.0f, 0};
    zt_cpu_gqa_ext_bwd(dqkv, dout, qkv, out, lse, B, T, NH, NKV, hs, &o);
}

void zt_cpu_attention_bwd(float *dqkv, const float *dout, const float *qkv,
                          const float *out, const float *lse,
                          int B, int T, int C, int NH) {
    if (C <= 0 || NH <= 0) return;
    zt_cpu_gqa_bwd(dqkv, dout, qkv, out, lse, B, T, NH, NH, C / NH);
}
