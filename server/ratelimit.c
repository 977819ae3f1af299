/* SPDX-License-Identifier: BSD-3-Clause */
/* stabledif: a rate limit for log lines (see ratelimit.h). */
#include <config.h>

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "ratelimit.h"

/* The default clock: CLOCK_MONOTONIC in nanoseconds. */
static uint64_t
monotonic_ns (void *opaque)
{
  struct timespec ts;

  (void) opaque;
  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (uint64_t) ts.tv_sec * 1000000000 + (uint64_t) ts.tv_nsec;
}

void
ratelimit_init (struct ratelimit *rl, unsigned burst, uint64_t interval_ns,
                ratelimit_clock_fn clock, void *opaque)
{
  pthread_mutex_init (&rl->lock, NULL);
  rl->burst = burst;
  rl->interval_ns = interval_ns;
  rl->clock = clock ? clock : monotonic_ns;
  rl->clock_opaque = opaque;
  rl->started = false;
  rl->begin = 0;
  rl->passed = 0;
  rl->held = 0;
}

void
ratelimit_destroy (struct ratelimit *rl)
{
  pthread_mutex_destroy (&rl->lock);
}

bool
ratelimit_allow (struct ratelimit *rl, uint64_t *held)
{
  uint64_t now;
  bool allow;

  *held = 0;
  if (rl->interval_ns == 0)
    return true;

  pthread_mutex_lock (&rl->lock);
  now = rl->clock (rl->clock_opaque);
  if (!rl->started || now - rl->begin >= rl->interval_ns) {
    /* A new interval: hand over what the last one held back. */
    *held = rl->held;
    rl->held = 0;
    rl->started = true;
    rl->begin = now;
    rl->passed = 0;
  }
  allow = rl->passed < rl->burst;
  if (allow)
    rl->passed++;
  else
    rl->held++;
  pthread_mutex_unlock (&rl->lock);
  return allow;
}

uint64_t
ratelimit_flush (struct ratelimit *rl)
{
  uint64_t held;

  pthread_mutex_lock (&rl->lock);
  held = rl->held;
  rl->held = 0;
  pthread_mutex_unlock (&rl->lock);
  return held;
}
