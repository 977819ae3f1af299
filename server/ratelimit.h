/* SPDX-License-Identifier: BSD-3-Clause */
/* stabledif: a rate limit for log lines, as the kernel's
 * printk_ratelimited (nbdkit-stabledif-plugin(1), LOGGING).
 *
 * Time is cut into intervals that start with the first line after the
 * previous one ended.  In each interval the first BURST lines pass and
 * the rest are held back (counted, not logged).  The first line after an
 * interval that held lines back learns how many, so that the caller can
 * log one summary line ("N similar messages suppressed") before it;
 * ratelimit_flush hands over the count when the logging stops for good.
 *
 * The clock is the caller's choice (CLOCK_MONOTONIC by default), so that
 * tests can drive it by hand.  Thread-safe: one mutex per limiter.
 */
#ifndef STABLEDIF_RATELIMIT_H
#define STABLEDIF_RATELIMIT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

/* A clock: nanoseconds since some fixed point, never going back.
 * OPAQUE is the pointer given to ratelimit_init. */
typedef uint64_t (*ratelimit_clock_fn) (void *opaque);

/* One limiter. */
struct ratelimit {
  pthread_mutex_t lock;         /* guards everything below */
  unsigned burst;               /* lines that pass per interval */
  uint64_t interval_ns;         /* length of an interval; 0: no limit */
  ratelimit_clock_fn clock;     /* the time source */
  void *clock_opaque;           /* its argument */
  bool started;                 /* an interval has begun */
  uint64_t begin;               /* when the current interval began */
  unsigned passed;              /* lines passed in the current interval */
  uint64_t held;                /* lines held back and not yet handed
                                   over for a summary */
};

/* Let BURST lines pass per INTERVAL_NS nanoseconds (INTERVAL_NS 0: let
 * every line pass), timed by CLOCK (called with OPAQUE; NULL: the
 * CLOCK_MONOTONIC clock). */
void ratelimit_init (struct ratelimit *rl, unsigned burst,
                     uint64_t interval_ns, ratelimit_clock_fn clock,
                     void *opaque);
void ratelimit_destroy (struct ratelimit *rl);

/* One line is about to be logged.  Returns whether it may be.  Sets
 * *HELD to the number of lines held back in an interval that has ended
 * (0 if none): the caller logs the summary of those first.  Each held
 * line is handed over once, here or by ratelimit_flush. */
bool ratelimit_allow (struct ratelimit *rl, uint64_t *held);

/* The lines held back and not yet handed over (then forgotten), for a
 * last summary line when logging stops. */
uint64_t ratelimit_flush (struct ratelimit *rl);

#endif /* STABLEDIF_RATELIMIT_H */
