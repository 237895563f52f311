/* A chain verifier in C, checked by specdec-check through its process protocol (notes/PROTOCOL.md) and its
 * C ABI (specdec_check/include/specdec_check.h).
 *
 *   cc -O2 -o verify verify.c -lm                       # the program: ./verify --serve [--bug]
 *   cc -O2 -shared -fPIC -DSPECDEC_LIB -o libverify.so verify.c -lm
 *                                                       # the library: specdec_verify, specdec_verify_bug
 *
 * The exact rule (Leviathan et al. 2023, Algorithm 1): accept draft x at position k with probability
 * min(1, p_k(x) / q_k(x)) (u * q < p, u uniform in [0, 1)); at the first rejection emit a token of the residual
 * max(0, p_k - q_k), normalised; when every draft is accepted, a bonus token of p_gamma. The bug
 * (resample_from_target, a classic) draws the token after a rejection from p_k instead of the residual.
 * Every random number comes from splitmix64 seeded with the call's seed. A row holding NaN gets -1 everywhere. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t next_u64(uint64_t *state) { /* splitmix64 (Steele, Lea & Flood 2014) */
    uint64_t z = (*state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static double uniform(uint64_t *state) { return (double)(next_u64(state) >> 11) * 0x1.0p-53; } /* [0, 1) */

/* A token of the unnormalised law w[0..vocab) by inverse CDF (u * total: no normalisation needed). */
static int64_t draw(const double *w, int64_t vocab, double u) {
    double total = 0.0;
    for (int64_t v = 0; v < vocab; v++) total += w[v];
    double target = u * total, cum = 0.0;
    int64_t last = -1;
    for (int64_t v = 0; v < vocab; v++) {
        if (w[v] <= 0.0) continue;
        cum += w[v];
        last = v;
        if (target < cum) return v;
    }
    return last; /* rounding at the very end of the row */
}

static int verify_rows(int64_t batch, int64_t gamma, int64_t vocab, const int64_t *ids, const double *q,
                       const double *p, uint64_t seed, int64_t *out, char *error, size_t error_size, int bug) {
    uint64_t state = seed;
    double *residual = malloc(sizeof(double) * (size_t)(vocab > 0 ? vocab : 1));
    if (!residual) { snprintf(error, error_size, "out of memory (V = %lld)", (long long)vocab); return 1; }
    for (int64_t b = 0; b < batch; b++) {
        int64_t *row = out + b * (gamma + 1);
        const double *qb = q + b * gamma * vocab, *pb = p + b * (gamma + 1) * vocab;
        for (int64_t k = 0; k <= gamma; k++) row[k] = -1;
        int bad = 0;
        for (int64_t i = 0; i < (gamma + 1) * vocab; i++) if (isnan(pb[i])) bad = 1;
        for (int64_t i = 0; i < gamma * vocab; i++) if (isnan(qb[i])) bad = 1;
        if (bad) continue;
        int64_t k = 0;
        for (; k < gamma; k++) {
            int64_t x = ids[b * gamma + k];
            if (x < 0 || x >= vocab) {
                snprintf(error, error_size, "draft token %lld at row %lld is not in [0, %lld)", (long long)x,
                         (long long)b, (long long)vocab);
                free(residual);
                return 2;
            }
            double u = uniform(&state);
            if (u * qb[k * vocab + x] < pb[k * vocab + x]) { row[k] = x; continue; }
            for (int64_t v = 0; v < vocab; v++) {
                double r = pb[k * vocab + v] - (bug ? 0.0 : qb[k * vocab + v]);
                residual[v] = r > 0.0 ? r : 0.0;
            }
            row[k] = draw(residual, vocab, uniform(&state));
            break;
        }
        if (k == gamma) row[gamma] = draw(pb + gamma * vocab, vocab, uniform(&state));
    }
    free(residual);
    return 0;
}

int specdec_verify(int64_t batch, int64_t gamma, int64_t vocab, const int64_t *draft_token_ids,
                   const double *draft_probs, const double *target_probs, uint64_t seed, int64_t *output,
                   char *error, size_t error_size) {
    return verify_rows(batch, gamma, vocab, draft_token_ids, draft_probs, target_probs, seed, output, error,
                       error_size, 0);
}

int specdec_verify_bug(int64_t batch, int64_t gamma, int64_t vocab, const int64_t *draft_token_ids,
                       const double *draft_probs, const double *target_probs, uint64_t seed, int64_t *output,
                       char *error, size_t error_size) {
    return verify_rows(batch, gamma, vocab, draft_token_ids, draft_probs, target_probs, seed, output, error,
                       error_size, 1);
}

#ifndef SPECDEC_LIB
/* ---------------------------------------------------------------------------- the process protocol */

static int read_line(char *line, size_t size) {
    if (!fgets(line, (int)size, stdin)) return 0;
    line[strcspn(line, "\n")] = 0;
    return 1;
}

/* The array line of `want`: its dims in dims[0..ndim) and its element count in dims[7]; returns a buffer for its
 * bytes, or `previous` (dims unchanged) when the line says "same": the previous call's array. */
static void *read_array(const char *want, int64_t *dims, int *ndim, void *previous) {
    char line[4096], name[256], dtype[8];
    if (!read_line(line, sizeof line)) return NULL;
    int used = 0;
    if (sscanf(line, "%255s %7s", name, dtype) == 2 && !strcmp(name, want) && !strcmp(dtype, "same") && previous) {
        dims[6] = 1; /* no bytes follow for it */
        return previous;
    }
    dims[6] = 0;
    if (sscanf(line, "%255s %7s %d%n", name, dtype, ndim, &used) != 3 || strcmp(name, want) != 0) return NULL;
    size_t count = 1;
    char *cursor = line + used;
    for (int d = 0; d < *ndim; d++) {
        long long value;
        int more = 0;
        if (sscanf(cursor, "%lld%n", &value, &more) != 1) return NULL;
        cursor += more;
        dims[d] = value;
        count *= (size_t)value;
    }
    /* the dtype is i64 or f64 here: 8 bytes; the bytes come after every array line, read by the caller */
    void *data = malloc(count * 8 + 8);
    dims[7] = (int64_t)count;
    return data;
}

int main(int argc, char **argv) {
    int bug = 0, serve = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--bug")) bug = 1;
        if (!strcmp(argv[i], "--serve")) serve = 1;
    }
    if (!serve) { fprintf(stderr, "usage: %s --serve [--bug]\n", argv[0]); return 2; }
    char line[4096], kind[64];
    if (!read_line(line, sizeof line) || sscanf(line, "SDC 1 hello %63s", kind) != 1) return 3;
    if (strcmp(kind, "verifier") != 0) { printf("SDC 1 error 0 only the verifier kind\n"); fflush(stdout); return 0; }
    printf("SDC 1 hello %s\n", bug ? "c-resample-from-target" : "c-reference");
    fflush(stdout);
    int64_t dims[3][8] = {{0}};
    int ndim[3] = {0};
    void *data[3] = {NULL, NULL, NULL}; /* the previous call's arrays, kept for "same" */
    while (read_line(line, sizeof line)) {
        long long id;
        unsigned long long seed;
        int n;
        if (!strcmp(line, "SDC 1 bye")) return 0;
        if (sscanf(line, "SDC 1 call %lld %llu %d", &id, &seed, &n) != 3 || n != 3) {
            fprintf(stderr, "not a call: %s\n", line);
            return 4;
        }
        const char *names[3] = {"draft_token_ids", "draft_probs", "target_probs"};
        void *fresh[3];
        for (int a = 0; a < 3; a++) {
            fresh[a] = read_array(names[a], dims[a], &ndim[a], data[a]);
            if (!fresh[a]) { printf("SDC 1 error %lld bad array line for %s\n", id, names[a]); fflush(stdout); return 5; }
            if (fresh[a] != data[a]) free(data[a]); /* a new array replaces the previous call's */
            data[a] = fresh[a];
        }
        for (int a = 0; a < 3; a++)
            if (!dims[a][6] && fread(data[a], 8, (size_t)dims[a][7], stdin) != (size_t)dims[a][7]) return 6;
        int64_t batch = dims[0][0], gamma = dims[0][1], vocab = dims[2][2];
        int64_t *out = malloc(sizeof(int64_t) * (size_t)(batch * (gamma + 1) + 1));
        char error[512] = "";
        int status = verify_rows(batch, gamma, vocab, data[0], data[1], data[2], (uint64_t)seed, out, error,
                                 sizeof error, bug);
        if (status != 0) {
            printf("SDC 1 error %lld %s\n", id, error);
        } else {
            printf("SDC 1 result %lld 1\noutput i64 2 %lld %lld\n", id, (long long)batch, (long long)(gamma + 1));
            fflush(stdout);
            fwrite(out, sizeof(int64_t), (size_t)(batch * (gamma + 1)), stdout);
        }
        fflush(stdout);
        free(out);
    }
    return 0;
}
#endif
