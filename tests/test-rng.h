/* SPDX-License-Identifier: BSD-3-Clause */
/* stabledif: deterministic pseudo-random bytes for the unit tests
 * (xorshift64*), so that a failure repeats with the same input.
 * Header-only: each test program has its own state, and threads can
 * keep theirs (rng_next_r). */
#ifndef STABLEDIF_TEST_RNG_H
#define STABLEDIF_TEST_RNG_H

#include <stddef.h>
#include <stdint.h>

/* The generator's state; never 0.  Starts at 1 unless rng_seed sets it. */
static uint64_t rng_state = 1;

/* Restart the sequence from S (0 is taken as 1). */
static inline void
rng_seed (uint64_t s)
{
  rng_state = s ? s : 1;
}

/* The next 64 pseudo-random bits of the sequence whose state is *S
 * (never 0): for threads that each keep their own. */
static inline uint64_t
rng_next_r (uint64_t *s)
{
  uint64_t x = *s;

  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  *s = x;
  return x * UINT64_C (0x2545f4914f6cdd1d);
}

/* The next 64 pseudo-random bits of the program's sequence. */
static inline uint64_t
rng_next (void)
{
  return rng_next_r (&rng_state);
}

/* Fill LEN bytes at P from the sequence (the top byte of each number). */
static inline void
rng_fill (void *p, size_t len)
{
  unsigned char *b = p;
  size_t i;

  for (i = 0; i < len; i++)
    b[i] = (unsigned char) (rng_next () >> 56);
}

#endif /* STABLEDIF_TEST_RNG_H */
