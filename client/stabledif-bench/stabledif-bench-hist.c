/* SPDX-License-Identifier: BSD-3-Clause */
/* stabledif-bench: latency histograms.
 *
 * Log-linear buckets: every value below HIST_SUB has its own bucket;
 * above, each power of two is split into HIST_SUB equal buckets, so a
 * bucket is at most 1/HIST_SUB (about 3%) of its values wide.  Counts,
 * sum, min and max are exact; quantiles are bucket tops.  One histogram
 * per thread, merged at the end: recording takes no lock.
 */
#include <config.h>

#include <string.h>

#include "stabledif-bench.h"

void
hist_init (struct hist *h)
{
  memset (h, 0, sizeof *h);
  h->min = UINT64_MAX;
}

unsigned
hist_bucket_of (uint64_t ns)
{
  unsigned e;

  if (ns < HIST_SUB)
    return (unsigned) ns;
  e = 63 - (unsigned) __builtin_clzll (ns);      /* >= HIST_SUB_BITS */
  return (e - HIST_SUB_BITS + 1) * HIST_SUB +
    (unsigned) ((ns >> (e - HIST_SUB_BITS)) & (HIST_SUB - 1));
}

uint64_t
hist_bucket_low (unsigned i)
{
  unsigned e, sub;

  if (i < HIST_SUB)
    return i;
  e = i / HIST_SUB + HIST_SUB_BITS - 1;
  sub = i % HIST_SUB;
  return (uint64_t) (HIST_SUB + sub) << (e - HIST_SUB_BITS);
}

uint64_t
hist_bucket_high (unsigned i)
{
  unsigned e;

  if (i < HIST_SUB)
    return i;
  e = i / HIST_SUB + HIST_SUB_BITS - 1;
  return hist_bucket_low (i) + ((UINT64_C (1) << (e - HIST_SUB_BITS)) - 1);
}

void
hist_add (struct hist *h, uint64_t ns)
{
  h->count++;
  h->sum += ns;
  if (ns < h->min)
    h->min = ns;
  if (ns > h->max)
    h->max = ns;
  h->bucket[hist_bucket_of (ns)]++;
}

void
hist_merge (struct hist *dst, const struct hist *src)
{
  unsigned i;

  if (src->count == 0)
    return;
  dst->count += src->count;
  dst->sum += src->sum;
  if (src->min < dst->min)
    dst->min = src->min;
  if (src->max > dst->max)
    dst->max = src->max;
  for (i = 0; i < HIST_BUCKETS; i++)
    dst->bucket[i] += src->bucket[i];
}

uint64_t
hist_quantile (const struct hist *h, double q)
{
  uint64_t rank, seen = 0;
  unsigned i;

  if (h->count == 0)
    return 0;
  if (q <= 0)
    return h->min;
  if (q >= 1)
    return h->max;
  /* The operation of rank ceil(q * count), counted from 1. */
  rank = (uint64_t) (q * (double) h->count);
  if ((double) rank < q * (double) h->count)
    rank++;
  if (rank == 0)
    rank = 1;
  for (i = 0; i < HIST_BUCKETS; i++) {
    seen += h->bucket[i];
    if (seen >= rank) {
      uint64_t top = hist_bucket_high (i);
      return top < h->max ? top : h->max;
    }
  }
  return h->max;
}

double
hist_mean (const struct hist *h)
{
  return h->count ? (double) h->sum / (double) h->count : 0.0;
}
