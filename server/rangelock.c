/* SPDX-License-Identifier: BSD-3-Clause */
/* stabledif: range locks (see rangelock.h for the contract).
 *
 * A mutex guards a doubly linked list of the ranges currently held.  An
 * acquirer scans the list for a conflicting range; if there is one it
 * waits on the condition variable and rescans when any range is released.
 * The mutex is held only while the list is scanned or changed, never
 * across the caller's I/O, so requests on ranges that do not overlap
 * proceed in parallel.
 *
 * There is no queueing: a waiting writer can be overtaken by readers that
 * arrive later and do not conflict with the readers already inside.  The
 * requests of an NBD disk are short, so this cannot starve anyone for
 * long, and it keeps the lock simple.
 */
#include <config.h>

#include <assert.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rangelock.h"

void
rangelock_init (struct rangelock *rl)
{
  pthread_mutex_init (&rl->mutex, NULL);
  pthread_cond_init (&rl->released, NULL);
  rl->held = NULL;
}

void
rangelock_destroy (struct rangelock *rl)
{
  assert (rl->held == NULL);
  pthread_cond_destroy (&rl->released);
  pthread_mutex_destroy (&rl->mutex);
}

/* Whether some held range conflicts with [START, END) taken EXCLUSIVE.
 * Called with the mutex held. */
static bool
conflicts (const struct rangelock *rl, uint64_t start, uint64_t end,
           bool exclusive)
{
  const struct range_held *h;

  for (h = rl->held; h != NULL; h = h->next) {
    if (h->start >= end || start >= h->end)
      continue;                 /* no overlap */
    if (exclusive || h->exclusive)
      return true;
  }
  return false;
}

void
rangelock_acquire (struct rangelock *rl, struct range_held *h,
                   uint64_t start, uint64_t end, bool exclusive)
{
  assert (start < end);

  h->start = start;
  h->end = end;
  h->exclusive = exclusive;

  pthread_mutex_lock (&rl->mutex);
  while (conflicts (rl, start, end, exclusive))
    pthread_cond_wait (&rl->released, &rl->mutex);

  h->prev = NULL;
  h->next = rl->held;
  if (rl->held)
    rl->held->prev = h;
  rl->held = h;
  pthread_mutex_unlock (&rl->mutex);
}

void
rangelock_release (struct rangelock *rl, struct range_held *h)
{
  pthread_mutex_lock (&rl->mutex);
  if (h->prev)
    h->prev->next = h->next;
  else
    rl->held = h->next;
  if (h->next)
    h->next->prev = h->prev;
  h->next = h->prev = NULL;
  /* Every waiter rescans: the ranges they wait for differ, so a signal
   * to one of them could wake the wrong one. */
  pthread_cond_broadcast (&rl->released);
  pthread_mutex_unlock (&rl->mutex);
}
