/* SPDX-License-Identifier: BSD-3-Clause */
/* stabledif: range locks.
 *
 * Requests that touch overlapping block ranges are serialised so that the
 * data and the PI of one block never disagree: writers take a range
 * exclusively, readers shared.  Non-overlapping requests never wait for
 * each other; there is no global lock held across I/O (the mutex inside
 * only guards the list of held ranges).
 */
#ifndef STABLEDIF_RANGELOCK_H
#define STABLEDIF_RANGELOCK_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

/* One held (or wanted) range.  The caller owns the memory (usually on its
 * stack) from acquire to release. */
struct range_held {
  uint64_t start;               /* first unit covered */
  uint64_t end;                 /* one past the last unit covered */
  bool exclusive;               /* writer (true) or reader (false) */
  struct range_held *next;      /* list of held ranges */
  struct range_held *prev;
};

/* The lock of one disk. */
struct rangelock {
  pthread_mutex_t mutex;        /* guards held */
  pthread_cond_t released;      /* broadcast when a range is released */
  struct range_held *held;      /* ranges currently held */
};

void rangelock_init (struct rangelock *rl);
void rangelock_destroy (struct rangelock *rl);

/* Block until [START, END) can be held (exclusive conflicts with any
 * overlapping range, shared only with exclusive ones), then hold it in H. */
void rangelock_acquire (struct rangelock *rl, struct range_held *h,
                        uint64_t start, uint64_t end, bool exclusive);

/* Release H, waking waiters. */
void rangelock_release (struct rangelock *rl, struct range_held *h);

#endif /* STABLEDIF_RANGELOCK_H */
