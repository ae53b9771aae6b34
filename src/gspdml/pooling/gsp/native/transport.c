/* The elementwise and iterative parts of the GSP transport in C, for float32 on the CPU.

   The torch code in gspdml/pooling/gsp/transport.py and fused.py computes the same
   quantities with about 60 small tensor operations per training step; each costs a few
   microseconds of dispatch on [B, m, n] = [64, 16, 64] tensors, which made the transport a
   tenth of a small network's step. Here every batch element is one pass of vectorised loops.

   gsp_solve:     the fixed point of Proposition 4.1 (GSP paper §4.2, Prop. 4.1) in the log domain, as
                  _solve_log: log s_j = log sum_i exp(-eps c_ij) (shifted by the column minimum),
                  then from t = 1: a_j = log t + log s_j, log t <- log t + log(mu n)
                  - log sum_j sigmoid(a_j); stationarity checked every CHECK_EVERY iterations.
                  Returns the last a (from which log rho = log sigmoid(-a) - log n) and log t.
   gsp_backward:  from the costs, the solution and (G_rho, G_pi), the gradient of Proposition 4.2
                  (corrected, stable form of closed_form_cost_gradient) pushed through the costs
                  c = sqrt(max(s + S, S)) of gsp_function.cost_parts: g = G_c / (2 c) where the
                  square was positive, the sums of g and g t over prototypes and over features
                  (t = c^2 - S - min(1,|w|^2) - min(1,|f|^2)), and G_cross = -2 a_i b_j g.

   exp is 2^x by a Cephes-style polynomial on [-1/2, 1/2] (about 2 ulp), log by the Cephes logf
   polynomial; both are branch-free so that gcc vectorises the loops (-O3 -march=native). */

#include <stdint.h>
#include <string.h>

#define LOG2E 1.44269504088896341f
#define LN2 0.693147180559945309f
#define CHECK_EVERY 5
#define FLOAT_EPS 1.1920929e-07f
#define FLOAT_TINY 1.17549435e-38f

static inline float exp2_poly(float x) {
    /* 2^x; 0 below 2^-126 (where float32 leaves the normal range) */
    float clipped = x < -126.0f ? -126.0f : (x > 126.0f ? 126.0f : x);
    float whole = (clipped + 12582912.0f) - 12582912.0f; /* round to nearest (1.5 * 2^23 trick) */
    float f = clipped - whole;                            /* in [-1/2, 1/2] */
    float p = 1.535336188319500e-4f;
    p = p * f + 1.339887440266574e-3f;
    p = p * f + 9.618437357674640e-3f;
    p = p * f + 5.550332471162809e-2f;
    p = p * f + 2.402264791363012e-1f;
    p = p * f + 6.931472028550421e-1f;
    p = p * f + 1.0f;
    int32_t bits = ((int32_t)whole + 127) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return x < -126.0f ? 0.0f : p * scale;
}

static inline float log_poly(float x) {
    /* natural log of a positive normal float (Cephes logf) */
    int32_t bits;
    memcpy(&bits, &x, sizeof bits);
    float e = (float)(((bits >> 23) & 0xff) - 127);
    bits = (bits & 0x007fffff) | 0x3f800000;
    float m;
    memcpy(&m, &bits, sizeof m);               /* x = m 2^e, m in [1, 2) */
    int high = m > 1.41421356f;
    m = high ? 0.5f * m : m;                   /* m in [sqrt(1/2), sqrt(2)) */
    e = high ? e + 1.0f : e;
    float z = m - 1.0f, zz = z * z;
    float p = 7.0376836292e-2f;
    p = p * z - 1.1514610310e-1f;
    p = p * z + 1.1676998740e-1f;
    p = p * z - 1.2420140846e-1f;
    p = p * z + 1.4249322787e-1f;
    p = p * z - 1.6668057665e-1f;
    p = p * z + 2.0000714765e-1f;
    p = p * z - 2.4999993993e-1f;
    p = p * z + 3.3333331174e-1f;
    float y = z * zz * p - 2.12194440e-4f * e - 0.5f * zz;
    return z + y + 0.693359375f * e;
}

/* cost [B, m, n] (n contiguous). Writes a [B, n], log_t [B]; scratch holds 2 n + 2 B floats.
   Returns 1 (and writes nothing useful) when some column's log s is at or below floor: there
   sum_j sigmoid(a_j) may underflow and the caller takes the log-domain torch path. */
int gsp_solve(const float *cost, int64_t batch, int64_t m, int64_t n, float mu, float eps, int64_t iters,
              int stop_when_stationary, float floor, float *a, float *log_t, float *scratch) {
    float *low = scratch, *acc = scratch + n, *u = scratch + 2 * n, *previous = u + batch;
    float kappa = eps * LOG2E;
    float *log_s = a; /* a holds log s until the end */
    for (int64_t b = 0; b < batch; ++b) {
        const float *c = cost + b * m * n;
        float *ls = log_s + b * n;
        for (int64_t j = 0; j < n; ++j) low[j] = c[j];
        for (int64_t i = 1; i < m; ++i)
            for (int64_t j = 0; j < n; ++j) low[j] = c[i * n + j] < low[j] ? c[i * n + j] : low[j];
        for (int64_t j = 0; j < n; ++j) acc[j] = 0.0f;
        for (int64_t i = 0; i < m; ++i)
            for (int64_t j = 0; j < n; ++j) acc[j] += exp2_poly(kappa * (low[j] - c[i * n + j]));
        for (int64_t j = 0; j < n; ++j) ls[j] = log_poly(acc[j]) - eps * low[j];
        float top = ls[0];
#pragma omp simd reduction(max : top)
        for (int64_t j = 1; j < n; ++j) top = ls[j] > top ? ls[j] : top;
        if (!(top > floor)) return 1;
    }
    float log_mu_n = log_poly(mu * (float)n), rounding = 4.0f * FLOAT_EPS;
    for (int64_t b = 0; b < batch; ++b) u[b] = 0.0f;
    for (int64_t k = 0; k <= iters; ++k) {
        int stationary = 1;
        for (int64_t b = 0; b < batch; ++b) {
            const float *ls = log_s + b * n;
            float ub = u[b], total = 0.0f;
#pragma omp simd reduction(+ : total)
            for (int64_t j = 0; j < n; ++j) total += 1.0f / (1.0f + exp2_poly(-LOG2E * (ub + ls[j])));
            previous[b] = ub;
            u[b] = ub + (log_mu_n - log_poly(total));
            float change = u[b] - ub, size = 1.0f + (u[b] < 0.0f ? -u[b] : u[b]);
            stationary &= (change < 0.0f ? -change : change) <= rounding * size;
        }
        if (stop_when_stationary && k % CHECK_EVERY == CHECK_EVERY - 1 && stationary) break;
    }
    for (int64_t b = 0; b < batch; ++b) {
        log_t[b] = u[b];
        for (int64_t j = 0; j < n; ++j) a[b * n + j] += previous[b]; /* rho from the t before the last update */
    }
    return 0;
}

/* Inputs: cost [B, m, n], log_rho [B, n], log_t [B], grad_rho [B, n], grad_pi [B, m] or NULL,
   w_clip, w_scale [m], f_clip, f_scale [B, n]; clamped_cost = sqrt(smoothing), the cost of a
   square clamped at 0 (no gradient flows there). Outputs: grad_cross [B, m, n], sum_g_col,
   sum_gt_col [B, n] (over prototypes), sum_g_row, sum_gt_row [m] (over batch and features).
   scratch holds m n + 4 n floats. */
void gsp_backward(const float *cost, const float *log_rho, const float *log_t, const float *grad_rho,
                  const float *grad_pi, const float *w_clip, const float *w_scale, const float *f_clip,
                  const float *f_scale, int64_t batch, int64_t m, int64_t n, float eps, float smoothing,
                  float clamped_cost, float *grad_cross, float *sum_g_col, float *sum_gt_col, float *sum_g_row, float *sum_gt_row,
                  float *scratch) {
    float *pi = scratch, *rho = scratch + m * n, *shift = rho + n, *sigma = shift + n, *column = sigma + n;
    float kappa = eps * LOG2E;
    for (int64_t i = 0; i < m; ++i) sum_g_row[i] = sum_gt_row[i] = 0.0f;
    for (int64_t b = 0; b < batch; ++b) {
        const float *c = cost + b * m * n, *lr = log_rho + b * n, *gr = grad_rho + b * n;
        const float *gp = grad_pi ? grad_pi + b * m : 0;
        for (int64_t j = 0; j < n; ++j) {
            rho[j] = exp2_poly(LOG2E * lr[j]);
            shift[j] = LOG2E * (log_t[b] + lr[j]);
            sigma[j] = column[j] = 0.0f;
        }
        for (int64_t i = 0; i < m; ++i) {
            float gpi = gp ? gp[i] : 0.0f;
            for (int64_t j = 0; j < n; ++j) {
                float p = exp2_poly(shift[j] - kappa * c[i * n + j]);
                pi[i * n + j] = p;
                sigma[j] += p;
                column[j] += p * gpi;
            }
        }
        float weight = 0.0f, mixed = 0.0f;
#pragma omp simd reduction(+ : weight, mixed)
        for (int64_t j = 0; j < n; ++j) { /* kappa = sum rho sigma, eta = sum rho (sigma G_rho - column) */
            weight += rho[j] * sigma[j];
            mixed += rho[j] * (sigma[j] * gr[j] - column[j]);
        }
        float ratio = mixed / (weight > FLOAT_TINY ? weight : FLOAT_TINY);
        for (int64_t j = 0; j < n; ++j) /* phi_j = eps n (q_j - ratio rho_j), q = rho G_rho + column */
            shift[j] = eps * (float)n * (rho[j] * gr[j] + column[j] - ratio * rho[j]);
        float *col_g = sum_g_col + b * n, *col_gt = sum_gt_col + b * n;
        const float *fc = f_clip + b * n, *fs = f_scale + b * n;
        for (int64_t j = 0; j < n; ++j) col_g[j] = col_gt[j] = 0.0f;
        for (int64_t i = 0; i < m; ++i) {
            float gpi = gp ? eps * gp[i] : 0.0f, offset = smoothing + w_clip[i], scale = -2.0f * w_scale[i];
            float row_g = 0.0f, row_gt = 0.0f;
            float *out = grad_cross + (b * m + i) * n;
            const float *ci = c + i * n, *pii = pi + i * n;
#pragma omp simd reduction(+ : row_g, row_gt)
            for (int64_t j = 0; j < n; ++j) {
                float grad_c = pii[j] * (shift[j] - gpi);
                float g = ci[j] > clamped_cost ? 0.5f * grad_c / ci[j] : 0.0f;
                float gt = g * (ci[j] * ci[j] - offset - fc[j]);
                col_g[j] += g;
                col_gt[j] += gt;
                row_g += g;
                row_gt += gt;
                out[j] = scale * fs[j] * g;
            }
            sum_g_row[i] += row_g;
            sum_gt_row[i] += row_gt;
        }
    }
}
