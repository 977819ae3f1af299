/* SPDX-License-Identifier: BSD-3-Clause */
/* stabledif fuzz target: the dif view's write path (server/disk.c).
 *
 * The first input byte picks a device configuration (fuzz-common.c); a
 * fresh 64-block memory disk is opened for it.  The rest is a sequence
 * of operations on the dif view: writes of 1-8 extended blocks built by
 * fuzz_build_ext (valid, escaped, corrupted or raw PI) at any LBA, some
 * misaligned or past the end, and zeroes.  After each:
 *  - a write is accepted exactly when the request is aligned, inside the
 *    view and every block passes the reference check (fuzz_ref_check);
 *  - a rejected write reports one error, sets errno (EINVAL or EIO) and
 *    leaves every stored byte, data and PI, as it was (read back through
 *    disk_pread on the dif view);
 *  - an accepted write reads back exactly as written, changes nothing
 *    else, and its blocks read back through the data view too.
 */
#include <config.h>

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz-disk.h"

/* Blocks of the fuzzed disk. */
#define NBLOCKS 64

/* Most operations per input, and most blocks per write. */
#define MAX_OPS 16
#define MAX_WRITE 8

/* Errors the disk reported since the last reset. */
static unsigned errors_reported;

/* server_error_fn: count the report (the text is not needed). */
static void __attribute__ ((format (printf, 1, 2)))
count_error (const char *fmt, ...)
{
  errors_reported++;
}

/* Read the whole dif view of D into BUF; must succeed. */
static void
read_all (struct disk *d, uint8_t *buf, uint64_t size)
{
  const struct disk_io io = { .conn = 1, .view = PROFILE_VIEW_DIF };

  FUZZ_ASSERT (disk_pread (d, &io, buf, size, 0) == 0,
               "reading the dif view back failed");
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  struct fuzz_input in = { data, size };
  const struct fuzz_config *c = fuzz_config_pick (fuzz_u8 (&in));
  const struct disk_io io = { .conn = 1, .view = PROFILE_VIEW_DIF };
  const struct disk_io dio = { .conn = 1, .view = PROFILE_VIEW_DATA };
  struct disk_config cfg = { 0 };
  struct pi_params pp;
  struct disk *d;
  uint8_t *before, *after, *buf, *plain;
  uint64_t ext, view, i;
  unsigned op;

  fuzz_config_params (c, &pp);
  fuzz_disk_config (c, &pp, NBLOCKS, &cfg);
  cfg.event_ring = 16;
  cfg.error = count_error;
  d = disk_open (&cfg);
  FUZZ_ASSERT (d != NULL, "disk_open failed for %s/%u", c->format,
               (unsigned) c->interval);

  ext = pi_ext_size (&pp);
  view = disk_view_size (d, PROFILE_VIEW_DIF);
  FUZZ_ASSERT (view == NBLOCKS * ext, "dif view size %llu",
               (unsigned long long) view);
  before = malloc (view);
  after = malloc (view);
  /* Room for a request running past the end, and one spare byte. */
  buf = malloc ((MAX_WRITE + 1) * ext + 1);
  plain = malloc (MAX_WRITE * (uint64_t) c->interval);
  FUZZ_ASSERT (before && after && buf && plain, "out of memory");

  for (op = 0; op < MAX_OPS && in.len > 0; op++) {
    uint8_t kind = fuzz_u8 (&in);
    uint64_t lba = fuzz_u8 (&in) % NBLOCKS;
    uint64_t n = fuzz_u8 (&in) % MAX_WRITE + 1;
    uint64_t offset, count, nfail = 0;
    bool in_range, aligned, expect_ok;
    int r, err;

    if (kind & 0x10) {          /* deliberately run past the end */
      if (n < 2)
        n = 2;
      lba = NBLOCKS - 1;
    }
    else if (lba + n > NBLOCKS)
      n = NBLOCKS - lba;
    offset = lba * ext;
    count = n * ext;
    if (kind & 0x20)            /* misaligned offset */
      offset += 1 + fuzz_u8 (&in) % (ext - 1);
    if (kind & 0x40)            /* misaligned count */
      count -= 1 + fuzz_u8 (&in) % (ext - 1);
    in_range = offset + count <= view;
    aligned = offset % ext == 0 && count % ext == 0;

    read_all (d, before, view);
    errors_reported = 0;
    errno = 0;

    if ((kind & 3) == 3) {      /* zero: all-ones PI, zero data */
      r = disk_zero (d, &io, count, offset, kind & 0x80);
      err = errno;
      if (!in_range || !aligned) {
        FUZZ_ASSERT (r == -1 && err == EINVAL && errors_reported == 1,
                     "bad zero request not refused once with EINVAL "
                     "(r=%d errno=%d reports=%u)", r, err, errors_reported);
        read_all (d, after, view);
        FUZZ_ASSERT (memcmp (before, after, view) == 0,
                     "refused zero changed the disk");
        continue;
      }
      FUZZ_ASSERT (r == 0 && errors_reported == 0, "zero failed");
      read_all (d, after, view);
      for (i = 0; i < n; i++) {
        const uint8_t *b = after + (lba + i) * ext;
        uint64_t k;
        for (k = 0; k < c->interval; k++)
          FUZZ_ASSERT (b[k] == 0, "zeroed block %llu has data",
                       (unsigned long long) (lba + i));
        for (; k < ext; k++)
          FUZZ_ASSERT (b[k] == 0xff, "zeroed block %llu has PI",
                       (unsigned long long) (lba + i));
      }
      FUZZ_ASSERT (memcmp (before, after, lba * ext) == 0 &&
                   memcmp (before + (lba + n) * ext, after + (lba + n) * ext,
                           view - (lba + n) * ext) == 0,
                   "zero changed blocks outside its range");
      continue;
    }

    fuzz_build_ext (&pp, &in, buf, n, lba);
    for (i = 0; i < n; i++) {
      bool esc;
      uint64_t want, got;
      if (fuzz_ref_check (&pp, buf + i * ext, buf + i * ext + c->interval,
                          lba + i, &esc, &want, &got) != PI_CHECK_OK)
        nfail++;
    }
    expect_ok = in_range && aligned && nfail == 0;

    r = disk_pwrite (d, &io, buf, count, offset, kind & 0x80);
    err = errno;
    read_all (d, after, view);

    if (!expect_ok) {
      FUZZ_ASSERT (r == -1, "write accepted: offset %llu count %llu, "
                   "%llu bad blocks (%s/%u)", (unsigned long long) offset,
                   (unsigned long long) count, (unsigned long long) nfail,
                   c->format, (unsigned) c->interval);
      FUZZ_ASSERT (err == ((in_range && aligned) ? EIO : EINVAL),
                   "rejected write: errno %d", err);
      FUZZ_ASSERT (errors_reported == 1,
                   "rejected write reported %u errors", errors_reported);
      FUZZ_ASSERT (memcmp (before, after, view) == 0,
                   "rejected write changed stored data or PI");
      continue;
    }

    FUZZ_ASSERT (r == 0, "valid write rejected (errno %d): offset %llu "
                 "count %llu (%s/%u)", err, (unsigned long long) offset,
                 (unsigned long long) count, c->format,
                 (unsigned) c->interval);
    FUZZ_ASSERT (errors_reported == 0, "accepted write reported an error");
    FUZZ_ASSERT (memcmp (after + offset, buf, count) == 0,
                 "written blocks do not read back as written");
    FUZZ_ASSERT (memcmp (before, after, offset) == 0 &&
                 memcmp (before + offset + count, after + offset + count,
                         view - offset - count) == 0,
                 "write changed blocks outside its range");

    /* The data view sees the same data, and the stored PI passes. */
    FUZZ_ASSERT (disk_pread (d, &dio, plain, n * c->interval,
                             lba * c->interval) == 0,
                 "data view read of written blocks failed");
    for (i = 0; i < n; i++)
      FUZZ_ASSERT (memcmp (plain + i * c->interval, buf + i * ext,
                           c->interval) == 0,
                   "data view differs from the dif view at block %llu",
                   (unsigned long long) (lba + i));
  }

  free (before);
  free (after);
  free (buf);
  free (plain);
  disk_close (d);
  return 0;
}
