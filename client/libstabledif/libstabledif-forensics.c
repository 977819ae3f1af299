/* SPDX-License-Identifier: BSD-3-Clause */
/* libstabledif: forensics -- which bytes of which blocks changed between
 * the checksum at submit and the copy-out to the wire.
 *
 * The write path keeps a copy of what was checksummed (when forensics
 * is on) and calls forensics_diff for each block whose guard changed;
 * forensics_describe turns the result into the error message.  The
 * settings live here too.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "libstabledif-internal.h"

/* How many blocks, and ranges per block, a message spells out. */
#define DESCRIBE_BLOCKS 4
#define DESCRIBE_RANGES 4

long
forensics_diff (const uint8_t *before, const uint8_t *after, uint32_t len,
                struct stabledif_byte_range **ranges, uint32_t *changed)
{
  struct stabledif_byte_range *r = NULL;
  size_t n = 0, alloc = 0;
  uint32_t i = 0, total = 0;

  *ranges = NULL;
  *changed = 0;
  while (i < len) {
    uint32_t start;

    /* Skip equal bytes, 8 at a time where possible. */
    while (i + 8 <= len && memcmp (before + i, after + i, 8) == 0)
      i += 8;
    while (i < len && before[i] == after[i])
      i++;
    if (i == len)
      break;

    start = i;
    while (i < len && before[i] != after[i])
      i++;

    if (n == alloc) {
      size_t nalloc = alloc ? alloc * 2 : 4;
      struct stabledif_byte_range *nr = realloc (r, nalloc * sizeof *r);
      if (nr == NULL) {
        free (r);
        return -1;
      }
      r = nr;
      alloc = nalloc;
    }
    r[n].offset = start;
    r[n].length = i - start;
    total += i - start;
    n++;
  }
  *ranges = r;
  *changed = total;
  return (long) n;
}

/* Append to BUF (LEN bytes, *POS used so far), truncating. */
static void __attribute__ ((format (printf, 4, 5)))
append (char *buf, size_t len, size_t *pos, const char *fmt, ...)
{
  va_list ap;
  int r;

  if (*pos + 1 >= len)
    return;
  va_start (ap, fmt);
  r = vsnprintf (buf + *pos, len - *pos, fmt, ap);
  va_end (ap);
  if (r < 0)
    return;
  *pos += (size_t) r;
  if (*pos >= len)
    *pos = len - 1;
}

char *
forensics_describe (const struct stabledif_block_report *blocks,
                    size_t nblocks, bool have_bytes, char *buf, size_t len)
{
  size_t pos = 0, i, j;

  if (len == 0)
    return buf;
  buf[0] = '\0';
  for (i = 0; i < nblocks && i < DESCRIBE_BLOCKS; ++i) {
    const struct stabledif_block_report *b = &blocks[i];

    append (buf, len, &pos, "%sLBA %" PRIu64 ": guard check: ", i ? "; " : "",
            b->lba);
    if (b->nranges > 0) {
      append (buf, len, &pos, "%s ", b->nranges == 1 &&
              b->ranges[0].length == 1 ? "byte" : "bytes");
      for (j = 0; j < b->nranges && j < DESCRIBE_RANGES; ++j) {
        const struct stabledif_byte_range *r = &b->ranges[j];
        if (r->length == 1)
          append (buf, len, &pos, "%s%" PRIu32, j ? ", " : "", r->offset);
        else
          append (buf, len, &pos, "%s%" PRIu32 "-%" PRIu32, j ? ", " : "",
                  r->offset, r->offset + r->length - 1);
      }
      if (b->nranges > DESCRIBE_RANGES)
        append (buf, len, &pos, " and %zu more ranges",
                b->nranges - DESCRIBE_RANGES);
      append (buf, len, &pos, " (%" PRIu32 " byte%s) changed between "
              "checksum and transfer", b->bytes_changed,
              b->bytes_changed == 1 ? "" : "s");
    }
    else
      append (buf, len, &pos, "data changed between checksum and transfer");
    append (buf, len, &pos, " (guard 0x%" PRIx64 " at submit, 0x%" PRIx64
            " sent)", b->guard_submit, b->guard_sent);
  }
  if (nblocks > DESCRIBE_BLOCKS)
    append (buf, len, &pos, "; and %zu more blocks",
            nblocks - DESCRIBE_BLOCKS);
  if (nblocks > 0 && !have_bytes)
    append (buf, len, &pos, "; enable forensics to see which bytes");
  return buf;
}

void
forensics_free (struct stabledif_block_report *blocks, size_t nblocks)
{
  size_t i;

  for (i = 0; i < nblocks; ++i)
    free ((void *) blocks[i].ranges);
  free (blocks);
}

/* Keep a copy of what is checksummed at submit, and report changes. */
int
stabledif_set_forensics (struct stabledif_handle *h, bool enable)
{
  if (h == NULL) {
    error_set (EINVAL, "stabledif_set_forensics: handle is NULL");
    return -1;
  }
  pthread_mutex_lock (&h->lock);
  h->forensics = enable;
  pthread_mutex_unlock (&h->lock);
  return 0;
}

int
stabledif_get_forensics (struct stabledif_handle *h)
{
  int f;

  if (h == NULL) {
    error_set (EINVAL, "stabledif_get_forensics: handle is NULL");
    return -1;
  }
  pthread_mutex_lock (&h->lock);
  f = h->forensics;
  pthread_mutex_unlock (&h->lock);
  return f;
}

/* Called for every write with a report (CB NULL: none). */
int
stabledif_set_forensics_callback (struct stabledif_handle *h,
                                  stabledif_forensics_callback cb,
                                  void *user_data)
{
  if (h == NULL) {
    error_set (EINVAL, "stabledif_set_forensics_callback: handle is NULL");
    return -1;
  }
  pthread_mutex_lock (&h->lock);
  h->fcb = cb;
  h->fcb_data = user_data;
  pthread_mutex_unlock (&h->lock);
  return 0;
}
