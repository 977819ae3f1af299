/* SPDX-License-Identifier: BSD-3-Clause */
/* libstabledif: which bytes of a read the server's reply covered.
 *
 * libnbd zeroes a read buffer before every read unless told not to
 * (nbd_set_pread_initialize), so that a reply that does not cover the
 * whole buffer leaves zeros rather than old heap contents.  The library
 * verifies every byte it reads anyway, so that pass over every buffer is
 * wasted -- but only if it can tell for certain that the reply covered
 * every byte, which libnbd does not check: a structured reply may come
 * in chunks, in any order, and libnbd does not validate that they do
 * not overlap and leave nothing out.  The chunk callback of each read
 * command adds its range here; when the request completes, it counts as
 * read only if the ranges tile it exactly.
 *
 * The ranges are kept sorted, disjoint and merged with their neighbours,
 * so a reply in order (every server we know) is one range that grows.
 * No locking: a request's commands all run on the I/O thread of its
 * connection.
 */
#include <config.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "libstabledif-internal.h"

int
cover_add (struct cover *c, uint64_t start, uint64_t len, uint64_t total)
{
  const uint64_t end = start + len;
  size_t i, j, k;

  if (len == 0)
    return 0;                   /* a non-compliant empty chunk: nothing */
  if (start > total || len > total - start) {
    c->bad = true;              /* libnbd checks this; be sure anyway */
    return -1;
  }
  /* I: the first range that ends at or after START (touches or follows
   * it); J: one past the last range that starts at or before END. */
  for (i = 0; i < c->n && c->r[i].end < start; i++)
    ;
  for (j = i; j < c->n && c->r[j].start <= end; j++)
    if (c->r[j].start < end && c->r[j].end > start) {
      c->bad = true;            /* bytes covered twice */
      return -1;
    }

  if (j > i) {
    /* Merge [START, END) with the ranges I..J-1 it touches. */
    uint64_t s = c->r[i].start < start ? c->r[i].start : start;
    uint64_t e = c->r[j - 1].end > end ? c->r[j - 1].end : end;

    c->r[i].start = s;
    c->r[i].end = e;
    memmove (&c->r[i + 1], &c->r[j], (c->n - j) * sizeof c->r[0]);
    c->n -= j - i - 1;
    return 0;
  }

  /* A new range before range I. */
  if (c->n == c->cap) {
    size_t cap = c->cap ? 2 * c->cap : COVER_INLINE;
    struct cover_range *r;

    if (c->r == c->inline_r) {
      r = malloc (cap * sizeof *r);
      if (r)
        memcpy (r, c->inline_r, c->n * sizeof *r);
    }
    else
      r = realloc (c->r, cap * sizeof *r);
    if (r == NULL) {
      c->bad = true;
      return -1;
    }
    c->r = r;
    c->cap = cap;
  }
  for (k = c->n; k > i; k--)
    c->r[k] = c->r[k - 1];
  c->r[i].start = start;
  c->r[i].end = end;
  c->n++;
  return 0;
}

bool
cover_full (const struct cover *c, uint64_t total)
{
  return !c->bad &&
    (total == 0 ||
     (c->n == 1 && c->r[0].start == 0 && c->r[0].end == total));
}

uint64_t
cover_bytes (const struct cover *c)
{
  uint64_t sum = 0;
  size_t i;

  for (i = 0; i < c->n; i++)
    sum += c->r[i].end - c->r[i].start;
  return sum;
}

void
cover_init (struct cover *c)
{
  c->r = c->inline_r;
  c->n = 0;
  c->cap = COVER_INLINE;
  c->bad = false;
}

void
cover_free (struct cover *c)
{
  if (c->r != c->inline_r)
    free (c->r);
  cover_init (c);
}
