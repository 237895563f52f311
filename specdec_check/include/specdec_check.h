/* specdec-check's C ABI (notes/PROTOCOL.md, "The C ABI"): one function per sampler kind, loaded with
 * `specdec-check verify lib:./libverify.so:specdec_verify`. Arrays are C order; the inputs are the checker's own
 * (do not write into them); the call returns 0 on success, anything else on failure with a message in `error`
 * (at most `error_size` bytes, NUL-terminated). Every random number of a call is drawn from a generator seeded
 * with `seed`: the same seed and inputs give the same output, different seeds independent ones. */
#ifndef SPECDEC_CHECK_H
#define SPECDEC_CHECK_H

#include <stddef.h>
#include <stdint.h>

#define SPECDEC_CHECK_ABI_VERSION 1

/* The chain verifier: per row, the accepted drafts, then the recovered or bonus token, then -1 padding. */
typedef int (*specdec_verify_fn)(int64_t batch, int64_t gamma, int64_t vocab,
                                 const int64_t *draft_token_ids, /* [batch, gamma]             */
                                 const double *draft_probs,      /* [batch, gamma, vocab]      */
                                 const double *target_probs,     /* [batch, gamma + 1, vocab]  */
                                 uint64_t seed,
                                 int64_t *output,                /* [batch, gamma + 1]: written */
                                 char *error, size_t error_size);

int specdec_verify(int64_t batch, int64_t gamma, int64_t vocab, const int64_t *draft_token_ids,
                   const double *draft_probs, const double *target_probs, uint64_t seed, int64_t *output,
                   char *error, size_t error_size);

#endif
