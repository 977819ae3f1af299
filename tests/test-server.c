/* SPDX-License-Identifier: BSD-3-Clause */
/* stabledif: unit tests for server/disk.c (the two views), with the
 * memory store, range locks and counters underneath.
 *
 * Most tests run once per format case (T10 types 1/2/3 at 512 and 4096,
 * EXT-DIF CRC64 types 1/3 at 4096, and none).  Rejected requests are
 * checked by reading data and PI back through both views and comparing
 * them byte for byte with what was there before.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <check.h>
#include <isa-l/crc.h>
#include <jansson.h>

#include "disk.h"
#include "pi.h"
#include "ro-path.h"
#include "test-alloc-fail.h"
#include "test-sync-wrap.h"
#include "test-tmpdir.h"

/* ---- helpers ---- */

/* The format cases; the first NR_PI_CASES have PI. */
static const struct fmt_case {
  const char *format;
  uint32_t interval;
} cases[] = {
  { "T10-DIF-TYPE1-CRC", 512 },
  { "T10-DIF-TYPE1-CRC", 4096 },
  { "T10-DIF-TYPE2-CRC", 512 },
  { "T10-DIF-TYPE2-CRC", 4096 },
  { "T10-DIF-TYPE3-CRC", 512 },
  { "T10-DIF-TYPE3-CRC", 4096 },
  { "EXT-DIF-TYPE1-CRC64", 4096 },
  { "EXT-DIF-TYPE3-CRC64", 4096 },
  { "none", 512 },
  { "none", 4096 },
};
#define NR_CASES ((int) (sizeof cases / sizeof cases[0]))
#define NR_PI_CASES 8

/* Errors the disk reported: the last message and how many. */
static pthread_mutex_t error_lock = PTHREAD_MUTEX_INITIALIZER;
static char last_error[1024];
static int nr_errors;

static void __attribute__ ((format (printf, 1, 2)))
capture_error (const char *fmt, ...)
{
  va_list ap;

  pthread_mutex_lock (&error_lock);
  va_start (ap, fmt);
  vsnprintf (last_error, sizeof last_error, fmt, ap);
  va_end (ap);
  nr_errors++;
  pthread_mutex_unlock (&error_lock);
}

/* Forget earlier errors. */
static void
errors_reset (void)
{
  last_error[0] = '\0';
  nr_errors = 0;
}

/* Exactly one error was reported since the reset and it contains every
 * NULL-terminated string given. */
static void
expect_one_error (const char *first, ...)
{
  va_list ap;
  const char *s;

  ck_assert_msg (nr_errors == 1, "%d errors reported (last: %s)",
                 nr_errors, last_error);
  va_start (ap, first);
  for (s = first; s != NULL; s = va_arg (ap, const char *))
    ck_assert_msg (strstr (last_error, s) != NULL,
                   "error \"%s\" does not mention \"%s\"", last_error, s);
  va_end (ap);
  errors_reset ();
}

static const struct disk_io io_data = { .conn = 3, .view = PROFILE_VIEW_DATA };
static const struct disk_io io_dif = { .conn = 4, .view = PROFILE_VIEW_DIF };

static void
base_config (struct disk_config *cfg, const char *format, uint32_t interval,
             uint64_t nblocks)
{
  memset (cfg, 0, sizeof *cfg);
  cfg->size = nblocks * interval;
  cfg->format = pi_format_lookup (format);
  ck_assert_ptr_nonnull (cfg->format);
  cfg->interval = interval;
  cfg->error = capture_error;
}

static struct disk *
open_config (const struct disk_config *cfg)
{
  struct disk *d;

  errors_reset ();
  d = disk_open (cfg);
  ck_assert_msg (d != NULL, "disk_open: %s", last_error);
  ck_assert_int_eq (nr_errors, 0);
  return d;
}

static struct disk *
open_case (int i, uint64_t nblocks)
{
  struct disk_config cfg;

  base_config (&cfg, cases[i].format, cases[i].interval, nblocks);
  return open_config (&cfg);
}

/* An app-tag-checking disk of case I. */
static struct disk *
open_case_app (int i, uint64_t nblocks, uint16_t tag, uint16_t mask)
{
  struct disk_config cfg;

  base_config (&cfg, cases[i].format, cases[i].interval, nblocks);
  cfg.has_app = true;
  cfg.app_tag = tag;
  cfg.app_mask = mask;
  return open_config (&cfg);
}

static void *
xmalloc (size_t n)
{
  void *p = malloc (n ? n : 1);
  ck_assert_ptr_nonnull (p);
  return p;
}

/* Deterministic non-trivial bytes. */
static void
fill (uint8_t *buf, size_t len, uint32_t seed)
{
  size_t i;
  uint32_t x = seed * 2654435761u + 1;

  for (i = 0; i < len; i++) {
    x ^= x << 13; x ^= x >> 17; x ^= x << 5;
    buf[i] = (uint8_t) x;
  }
}

static uint32_t IV (const struct disk *d) { return d->pi.interval; }
static uint32_t TU (const struct disk *d) { return d->pi.format->tuple_size; }
static uint32_t EXT (const struct disk *d) { return IV (d) + TU (d); }
static bool HAS_PI (const struct disk *d) { return TU (d) > 0; }

/* N extended blocks for LBA with data from SEED and valid PI. */
static uint8_t *
make_ext (struct disk *d, uint64_t lba, uint64_t n, uint32_t seed)
{
  uint8_t *buf = xmalloc (n * EXT (d));
  uint64_t i;

  for (i = 0; i < n; i++)
    fill (buf + i * EXT (d), IV (d), seed + (uint32_t) (lba + i));
  pi_generate_ext (&d->pi, buf, n, lba);
  return buf;
}

/* The tuple of block I of an extended buffer. */
static uint8_t *
tuple_at (struct disk *d, uint8_t *ext, uint64_t i)
{
  return ext + i * EXT (d) + IV (d);
}

static void
get_tuple (struct disk *d, const uint8_t *p, struct pi_tuple *t)
{
  pi_tuple_decode (d->pi.format, p, t);
}

static void
put_tuple (struct disk *d, uint8_t *p, const struct pi_tuple *t)
{
  pi_tuple_encode (d->pi.format, t, p);
}

/* Read COUNT bytes at OFFSET through IO's view; the read must succeed. */
static uint8_t *
must_read (struct disk *d, const struct disk_io *io, uint64_t offset,
           uint64_t count)
{
  uint8_t *buf = xmalloc (count);

  ck_assert_msg (disk_pread (d, io, buf, count, offset) == 0,
                 "%s read %" PRIu64 "+%" PRIu64 " failed: %s",
                 profile_view_name (io->view), offset, count, last_error);
  return buf;
}

static void
must_write (struct disk *d, const struct disk_io *io, const void *buf,
            uint64_t offset, uint64_t count)
{
  ck_assert_msg (disk_pwrite (d, io, buf, count, offset, false) == 0,
                 "%s write %" PRIu64 "+%" PRIu64 " failed: %s",
                 profile_view_name (io->view), offset, count, last_error);
}

/* Both views of the whole disk, to prove a failed request changed
 * nothing. */
struct image {
  uint8_t *data, *dif;
};

static void
image_take (struct disk *d, struct image *im)
{
  /* Must not count as errors or trip over injected faults: the dif view
   * is read unchecked; the data view only where it verifies. */
  im->dif = must_read (d, &io_dif, 0, disk_view_size (d, PROFILE_VIEW_DIF));
  im->data = xmalloc (disk_view_size (d, PROFILE_VIEW_DATA));
  pi_split_ext (&d->pi, im->dif, im->data, NULL, d->nblocks);
}

static void
image_same (struct disk *d, const struct image *before)
{
  struct image now;
  uint8_t *plain;

  image_take (d, &now);
  ck_assert_msg (memcmp (now.dif, before->dif,
                         disk_view_size (d, PROFILE_VIEW_DIF)) == 0,
                 "stored data or PI changed");
  /* And the data view says the same, where it can be read. */
  errors_reset ();
  plain = xmalloc (disk_view_size (d, PROFILE_VIEW_DATA));
  if (disk_pread (d, &io_data, plain, disk_view_size (d, PROFILE_VIEW_DATA),
                  0) == 0)
    ck_assert (memcmp (plain, before->data,
                       disk_view_size (d, PROFILE_VIEW_DATA)) == 0);
  errors_reset ();
  free (plain);
  free (now.data);
  free (now.dif);
}

static void
image_free (struct image *im)
{
  free (im->data);
  free (im->dif);
}

static void
snap (struct disk *d, struct stats_snapshot *s)
{
  stats_snapshot (&d->stats, s);
}

/* Every stored tuple of [LBA, LBA+N) is valid PI for its data. */
static void
expect_valid_pi (struct disk *d, uint64_t lba, uint64_t n)
{
  uint8_t *ext;
  struct pi_verify_stats vs = { 0 };
  uint64_t i;

  if (!HAS_PI (d))
    return;
  ext = must_read (d, &io_dif, lba * EXT (d), n * EXT (d));
  ck_assert_uint_eq (pi_verify_ext (&d->pi, ext, n, lba, &vs, NULL, NULL),
                     0);
  ck_assert_uint_eq (vs.escaped, 0);
  for (i = 0; i < n; i++)
    ck_assert (!pi_tuple_escaped (d->pi.format, tuple_at (d, ext, i)));
  free (ext);
}

/* Every stored tuple of [LBA, LBA+N) is all ones and the data zero. */
static void
expect_zeroed (struct disk *d, uint64_t lba, uint64_t n)
{
  uint8_t *ext = must_read (d, &io_dif, lba * EXT (d), n * EXT (d));
  uint64_t i;
  uint32_t j;

  for (i = 0; i < n; i++) {
    for (j = 0; j < IV (d); j++)
      ck_assert_msg (ext[i * EXT (d) + j] == 0, "LBA %" PRIu64 " byte %u",
                     lba + i, j);
    for (j = 0; j < TU (d); j++)
      ck_assert_msg (ext[i * EXT (d) + IV (d) + j] == 0xff,
                     "LBA %" PRIu64 " tuple byte %u", lba + i, j);
  }
  free (ext);
}

/* ---- geometry and profile ---- */

START_TEST (geometry_and_profile)
{
  struct disk *d = open_case (_i, 64);
  struct profile p;
  const bool pi = _i < NR_PI_CASES;

  ck_assert_uint_eq (disk_view_size (d, PROFILE_VIEW_DATA),
                     64 * cases[_i].interval);
  ck_assert_uint_eq (disk_view_size (d, PROFILE_VIEW_DIF),
                     64 * (cases[_i].interval + TU (d)));
  disk_profile (d, PROFILE_VIEW_DIF, &p);
  ck_assert_int_eq (p.view, PROFILE_VIEW_DIF);
  ck_assert_ptr_eq (p.format, pi_format_lookup (cases[_i].format));
  ck_assert_uint_eq (p.interval, cases[_i].interval);
  ck_assert_uint_eq (p.tuple, TU (d));
  ck_assert_int_eq (p.stable_writes, pi);
  ck_assert (!p.has_app);
  disk_profile (d, PROFILE_VIEW_DATA, &p);
  ck_assert_int_eq (p.view, PROFILE_VIEW_DATA);
  ck_assert_int_eq (p.stable_writes, pi);
  if (!pi) {
    ck_assert_uint_eq (TU (d), 0);
    ck_assert_uint_eq (disk_view_size (d, PROFILE_VIEW_DIF),
                       disk_view_size (d, PROFILE_VIEW_DATA));
  }
  disk_close (d);
}
END_TEST

START_TEST (profile_with_app_tag)
{
  struct disk *d = open_case_app (0, 16, 0x1234, 0xff00);
  struct profile p;

  disk_profile (d, PROFILE_VIEW_DIF, &p);
  ck_assert (p.has_app);
  ck_assert_uint_eq (p.app_tag, 0x1234);
  ck_assert_uint_eq (p.app_mask, 0xff00);
  disk_close (d);
}
END_TEST

/* ---- the two views ---- */

/* Data written on the data view reads back on both views, with the PI
 * the device inserted; counters exact. */
START_TEST (data_write_inserts_pi)
{
  struct disk *d = open_case (_i, 64);
  const uint64_t n = 8, lba = 5;
  uint8_t *data = xmalloc (n * IV (d)), *back, *ext;
  struct stats_snapshot s;
  uint64_t i;

  fill (data, n * IV (d), 1);
  must_write (d, &io_data, data, lba * IV (d), n * IV (d));
  snap (d, &s);
  ck_assert_uint_eq (s.blocks_generated, HAS_PI (d) ? n : 0);
  ck_assert_uint_eq (s.requests[PROFILE_VIEW_DATA][STATS_OP_WRITE], 1);
  ck_assert_uint_eq (s.bytes[PROFILE_VIEW_DATA][STATS_OP_WRITE], n * IV (d));

  back = must_read (d, &io_data, lba * IV (d), n * IV (d));
  ck_assert (memcmp (back, data, n * IV (d)) == 0);
  snap (d, &s);
  ck_assert_uint_eq (s.blocks_verified, HAS_PI (d) ? n : 0);
  ck_assert_uint_eq (s.blocks_escaped, 0);
  ck_assert_uint_eq (s.requests[PROFILE_VIEW_DATA][STATS_OP_READ], 1);
  ck_assert_uint_eq (s.bytes[PROFILE_VIEW_DATA][STATS_OP_READ], n * IV (d));

  ext = must_read (d, &io_dif, lba * EXT (d), n * EXT (d));
  snap (d, &s);
  ck_assert_uint_eq (s.requests[PROFILE_VIEW_DIF][STATS_OP_READ], 1);
  ck_assert_uint_eq (s.bytes[PROFILE_VIEW_DIF][STATS_OP_READ], n * EXT (d));
  ck_assert_uint_eq (s.blocks_verified, HAS_PI (d) ? n : 0); /* unchecked */
  for (i = 0; i < n; i++) {
    ck_assert (memcmp (ext + i * EXT (d), data + i * IV (d), IV (d)) == 0);
    if (HAS_PI (d)) {
      struct pi_tuple t;
      get_tuple (d, tuple_at (d, ext, i), &t);
      ck_assert_uint_eq (t.guard, pi_guard_compute (d->pi.format,
                                                    data + i * IV (d),
                                                    IV (d)));
      ck_assert_uint_eq (t.app, 0);
      ck_assert_uint_eq (t.ref, pi_ref_for_lba (d->pi.format, lba + i));
    }
  }
  free (data); free (back); free (ext);
  disk_close (d);
}
END_TEST

/* The same, checked against a tuple built by hand from isa-l's CRC. */
START_TEST (data_write_hand_built_tuple)
{
  struct disk *d = open_case (0, 64);   /* T10-DIF-TYPE1-CRC, 512 */
  uint8_t data[512], *ext;
  uint16_t crc;
  uint8_t want[8];

  fill (data, sizeof data, 7);
  must_write (d, &io_data, data, 0x1234 % 64 * 512, 512);
  crc = crc16_t10dif (0, data, 512);
  want[0] = crc >> 8; want[1] = crc & 0xff;
  want[2] = 0; want[3] = 0;                     /* app 0 */
  want[4] = 0; want[5] = 0; want[6] = 0; want[7] = 0x1234 % 64;
  ext = must_read (d, &io_dif, 0x1234 % 64 * 520, 520);
  ck_assert (memcmp (ext, data, 512) == 0);
  ck_assert (memcmp (ext + 512, want, 8) == 0);
  free (ext);
  disk_close (d);
}
END_TEST

/* Extended blocks written on dif read back identically on dif and as
 * plain data on data. */
START_TEST (dif_write_roundtrip)
{
  struct disk *d = open_case (_i, 64);
  const uint64_t n = 4, lba = 20;
  uint8_t *ext = make_ext (d, lba, n, 2), *back, *data;
  struct stats_snapshot s;
  uint64_t i;

  must_write (d, &io_dif, ext, lba * EXT (d), n * EXT (d));
  snap (d, &s);
  ck_assert_uint_eq (s.blocks_verified, HAS_PI (d) ? n : 0);
  ck_assert_uint_eq (s.blocks_generated, 0);
  ck_assert_uint_eq (s.requests[PROFILE_VIEW_DIF][STATS_OP_WRITE], 1);
  ck_assert_uint_eq (s.bytes[PROFILE_VIEW_DIF][STATS_OP_WRITE], n * EXT (d));
  back = must_read (d, &io_dif, lba * EXT (d), n * EXT (d));
  ck_assert (memcmp (back, ext, n * EXT (d)) == 0);
  data = must_read (d, &io_data, lba * IV (d), n * IV (d));
  for (i = 0; i < n; i++)
    ck_assert (memcmp (data + i * IV (d), ext + i * EXT (d), IV (d)) == 0);
  /* Blocks around it were never written. */
  expect_zeroed (d, 0, lba);
  expect_zeroed (d, lba + n, 64 - lba - n);
  free (ext); free (back); free (data);
  disk_close (d);
}
END_TEST

/* A dif write with bad PI: EIO, nothing stored (even its good blocks),
 * counters and events exact. */
enum corruption { BAD_GUARD, BAD_REF, BAD_APP };

static void
rejected_write (struct disk *d, enum corruption what)
{
  const uint64_t n = 4, lba = 2;        /* blocks 2..5 */
  const uint64_t bad[2] = { 3, 5 };
  uint8_t *old = make_ext (d, 0, 8, 10), *ext = make_ext (d, lba, n, 20);
  struct image before;
  struct stats_snapshot s0, s;
  struct stats_event ev[8];
  enum pi_check check = what == BAD_GUARD ? PI_CHECK_GUARD
    : what == BAD_REF ? PI_CHECK_REF : PI_CHECK_APP;
  uint64_t want_expected[2], want_actual[2];
  char lbatext[32];
  size_t k, nev;

  must_write (d, &io_dif, old, 0, 8 * EXT (d));
  image_take (d, &before);

  for (k = 0; k < 2; k++) {
    struct pi_tuple t;
    uint8_t *tp = tuple_at (d, ext, bad[k] - lba);
    get_tuple (d, tp, &t);
    switch (what) {
    case BAD_GUARD:
      want_expected[k] = t.guard;
      t.guard ^= 0x10;
      want_actual[k] = t.guard;
      break;
    case BAD_REF:
      want_expected[k] = t.ref;
      t.ref ^= 0x100;
      want_actual[k] = t.ref;
      break;
    case BAD_APP:
      want_expected[k] = d->pi.app_tag;
      t.app = d->pi.app_tag ^ 0x0100;
      want_actual[k] = t.app;
      break;
    }
    put_tuple (d, tp, &t);
  }

  snap (d, &s0);
  nev = stats_events_since (&d->stats, 0, ev, 8);
  ck_assert_uint_eq (nev, 0);
  errors_reset ();
  errno = 0;
  ck_assert_int_eq (disk_pwrite (d, &io_dif, ext, n * EXT (d),
                                 lba * EXT (d), false), -1);
  ck_assert_int_eq (errno, EIO);
  snprintf (lbatext, sizeof lbatext, "LBA %" PRIu64, bad[0]);
  expect_one_error (lbatext, pi_check_name (check), "2 of 4", NULL);

  snap (d, &s);
  ck_assert_uint_eq (s.writes_rejected, 1);
  for (k = 1; k < 4; k++) {
    ck_assert_uint_eq (s.write_errors[k], k == check ? 2 : 0);
    ck_assert_uint_eq (s.read_errors[k], 0);
  }
  ck_assert_uint_eq (s.blocks_verified - s0.blocks_verified, n);
  ck_assert_uint_eq (s.reads_failed, 0);

  nev = stats_events_since (&d->stats, 0, ev, 8);
  ck_assert_uint_eq (nev, 2);
  for (k = 0; k < 2; k++) {
    ck_assert_uint_eq (ev[k].seq, k + 1);
    ck_assert_uint_eq (ev[k].conn, io_dif.conn);
    ck_assert_int_eq (ev[k].view, PROFILE_VIEW_DIF);
    ck_assert_int_eq (ev[k].op, STATS_OP_WRITE);
    ck_assert_uint_eq (ev[k].lba, bad[k]);
    ck_assert_int_eq (ev[k].check, check);
    ck_assert_uint_eq (ev[k].expected, want_expected[k]);
    ck_assert_uint_eq (ev[k].actual, want_actual[k]);
    ck_assert_uint_eq (ev[k].offset, lba * EXT (d));
    ck_assert_uint_eq (ev[k].length, n * EXT (d));
    ck_assert (ev[k].time.tv_sec > 0);
  }

  image_same (d, &before);
  image_free (&before);
  free (old);
  free (ext);
}

START_TEST (dif_rejects_bad_guard)
{
  struct disk *d = open_case (_i, 16);
  rejected_write (d, BAD_GUARD);
  disk_close (d);
}
END_TEST

/* The same on the file= store, which has no write_ext: the disk splits
 * data and tuples apart in the pass that verifies them, and must still
 * store nothing of a rejected write (read back from the files). */
/* Make a new directory under $TMPDIR or /tmp; its name in DIR (DIRLEN
 * bytes).  main has pointed $TMPDIR at the runner's own directory
 * (test-tmpdir.h), so what a failed test leaves goes with it. */
static void
make_dir (char *dir, size_t dirlen)
{
  const char *t = getenv ("TMPDIR");

  snprintf (dir, dirlen, "%s/test-server.XXXXXX", t && *t ? t : "/tmp");
  ck_assert_ptr_nonnull (mkdtemp (dir));
}

/* The configuration of case I with NBLOCKS blocks on a file store: the
 * file PATH (PATHLEN bytes) is DIR/disk in a new directory DIR (DIRLEN
 * bytes, see make_dir). */
static void
file_case_config (int i, uint64_t nblocks, char *dir, size_t dirlen,
                  char *path, size_t pathlen, struct disk_config *cfg)
{
  make_dir (dir, dirlen);
  snprintf (path, pathlen, "%s/disk", dir);
  base_config (cfg, cases[i].format, cases[i].interval, nblocks);
  cfg->file = path;
}

/* Open case I with NBLOCKS blocks on a file store, DIR/disk in a new
 * directory DIR (DIRLEN bytes). */
static struct disk *
open_file_case (int i, uint64_t nblocks, char *dir, size_t dirlen)
{
  char path[300];
  struct disk_config cfg;

  file_case_config (i, nblocks, dir, dirlen, path, sizeof path, &cfg);
  return open_config (&cfg);
}

/* Remove DIR and everything in it. */
static void
remove_dir (const char *dir)
{
  char cmd[300];

  snprintf (cmd, sizeof cmd, "rm -rf '%s'", dir);
  ck_assert_int_eq (system (cmd), 0);
}

START_TEST (dif_rejects_on_file_store)
{
  char dir[256];
  struct disk *d = open_file_case (_i, 16, dir, sizeof dir);

  rejected_write (d, BAD_GUARD);
  disk_close (d);
  remove_dir (dir);
}
END_TEST

START_TEST (dif_rejects_bad_ref)
{
  /* Types 1 and 2 only: cases 0-3 and 6. */
  static const int type12[] = { 0, 1, 2, 3, 6 };
  struct disk *d = open_case (type12[_i], 16);
  rejected_write (d, BAD_REF);
  disk_close (d);
}
END_TEST

START_TEST (dif_rejects_bad_app)
{
  struct disk *d = open_case_app (_i, 16, 0x00a5, 0xffff);
  rejected_write (d, BAD_APP);
  disk_close (d);
}
END_TEST

/* Without app-tag=, any app tag is accepted; with a mask, only the
 * masked bits count. */
START_TEST (app_tag_mask)
{
  struct disk *d = open_case (_i, 16);
  uint8_t *ext = make_ext (d, 0, 2, 30);
  struct pi_tuple t;

  get_tuple (d, tuple_at (d, ext, 0), &t);
  t.app = 0x4321;
  put_tuple (d, tuple_at (d, ext, 0), &t);
  must_write (d, &io_dif, ext, 0, 2 * EXT (d));
  free (must_read (d, &io_data, 0, 2 * IV (d)));
  disk_close (d);

  d = open_case_app (_i, 16, 0x12a5, 0xff00);
  /* Generated blocks carry the configured tag... */
  free (ext);
  ext = make_ext (d, 0, 2, 31);
  get_tuple (d, tuple_at (d, ext, 0), &t);
  ck_assert_uint_eq (t.app, 0x12a5);
  /* ...and one that differs only outside the mask is accepted. */
  t.app = 0x1200;
  put_tuple (d, tuple_at (d, ext, 0), &t);
  must_write (d, &io_dif, ext, 0, 2 * EXT (d));
  /* One that differs inside the mask is not. */
  get_tuple (d, tuple_at (d, ext, 1), &t);
  t.app = 0x1300;
  put_tuple (d, tuple_at (d, ext, 1), &t);
  errors_reset ();
  ck_assert_int_eq (disk_pwrite (d, &io_dif, ext, 2 * EXT (d), 0, false), -1);
  ck_assert_int_eq (errno, EIO);
  expect_one_error ("LBA 1", "app", NULL);
  /* The data view inserts the configured tag and verifies it. */
  {
    uint8_t data[4096], *back;
    fill (data, IV (d), 32);
    must_write (d, &io_data, data, 5 * IV (d), IV (d));
    back = must_read (d, &io_dif, 5 * EXT (d), EXT (d));
    get_tuple (d, back + IV (d), &t);
    ck_assert_uint_eq (t.app, 0x12a5);
    free (back);
    free (must_read (d, &io_data, 5 * IV (d), IV (d)));
  }
  free (ext);
  disk_close (d);
}
END_TEST

/* Escape tuples are accepted without checking and counted as escaped. */
START_TEST (escape_accepted)
{
  struct disk *d = open_case (_i, 16);
  const bool type3 = d->pi.format->type == PI_TYPE_3;
  uint8_t *ext = make_ext (d, 0, 3, 40), *back;
  struct stats_snapshot s0, s;
  struct pi_tuple t;
  uint64_t i;

  for (i = 0; i < 3; i++) {
    get_tuple (d, tuple_at (d, ext, i), &t);
    t.guard ^= 0x5555;          /* wrong, but not checked */
    t.app = 0xffff;
    t.ref = type3 ? UINT64_MAX : 77;
    put_tuple (d, tuple_at (d, ext, i), &t);
  }
  snap (d, &s0);
  must_write (d, &io_dif, ext, 0, 3 * EXT (d));
  snap (d, &s);
  ck_assert_uint_eq (s.blocks_escaped - s0.blocks_escaped, 3);
  ck_assert_uint_eq (s.blocks_verified - s0.blocks_verified, 0);
  back = must_read (d, &io_dif, 0, 3 * EXT (d));
  ck_assert (memcmp (back, ext, 3 * EXT (d)) == 0);   /* stored as given */
  free (back);
  back = must_read (d, &io_data, 0, 3 * IV (d));
  snap (d, &s0);
  ck_assert_uint_eq (s0.blocks_escaped - s.blocks_escaped, 3);
  ck_assert_uint_eq (s0.reads_failed, 0);
  free (back);

  if (type3) {
    /* Type 3 needs the ref tag all ones too: app alone does not escape. */
    get_tuple (d, tuple_at (d, ext, 1), &t);
    t.ref = 77;
    put_tuple (d, tuple_at (d, ext, 1), &t);
    errors_reset ();
    ck_assert_int_eq (disk_pwrite (d, &io_dif, ext, 3 * EXT (d), 0, false),
                      -1);
    ck_assert_int_eq (errno, EIO);
    expect_one_error ("LBA 1", "guard", "1 of 3", NULL);
  }
  free (ext);
  disk_close (d);
}
END_TEST

/* Type 3: the ref tag is not checked on either view. */
START_TEST (type3_ref_unchecked)
{
  static const int type3[] = { 4, 5, 7 };
  struct disk *d = open_case (type3[_i], 16);
  uint8_t *ext = make_ext (d, 4, 2, 50), *back;
  struct pi_tuple t;

  get_tuple (d, tuple_at (d, ext, 0), &t);
  t.ref = 0x12345;
  put_tuple (d, tuple_at (d, ext, 0), &t);
  must_write (d, &io_dif, ext, 4 * EXT (d), 2 * EXT (d));
  back = must_read (d, &io_data, 4 * IV (d), 2 * IV (d));
  ck_assert (memcmp (back, ext, IV (d)) == 0);
  free (back);
  free (ext);
  disk_close (d);
}
END_TEST

/* Misaligned and out-of-range requests: EINVAL, one message, nothing
 * changed; zero-length requests succeed. */
START_TEST (alignment_and_range)
{
  struct disk *d = open_case (_i, 16);
  const uint64_t dsize = disk_view_size (d, PROFILE_VIEW_DATA);
  const uint64_t xsize = disk_view_size (d, PROFILE_VIEW_DIF);
  uint8_t *ext = make_ext (d, 0, 4, 60), *buf = xmalloc (xsize + 1);
  struct image before;
  char text[64];

  must_write (d, &io_dif, ext, 0, 4 * EXT (d));
  image_take (d, &before);
  errors_reset ();

  if (HAS_PI (d)) {
    /* dif: offsets and counts in extended blocks. */
    ck_assert_int_eq (disk_pwrite (d, &io_dif, ext, EXT (d), 1, false), -1);
    ck_assert_int_eq (errno, EINVAL);
    snprintf (text, sizeof text, "%u", EXT (d));
    expect_one_error ("offset 1", "count", text, NULL);
    ck_assert_int_eq (disk_pwrite (d, &io_dif, ext, IV (d), 0, false), -1);
    ck_assert_int_eq (errno, EINVAL);
    snprintf (text, sizeof text, "count %u", IV (d));
    expect_one_error (text, NULL);
    ck_assert_int_eq (disk_pread (d, &io_dif, buf, EXT (d), IV (d)), -1);
    ck_assert_int_eq (errno, EINVAL);
    expect_one_error ("multiples", NULL);
    ck_assert_int_eq (disk_zero (d, &io_dif, EXT (d) - 1, 0, false), -1);
    ck_assert_int_eq (errno, EINVAL);
    expect_one_error ("multiples", NULL);
    ck_assert_int_eq (disk_trim (d, &io_dif, EXT (d), 3, false), -1);
    ck_assert_int_eq (errno, EINVAL);
    expect_one_error ("multiples", NULL);
  }

  /* Past the end, on both views, including offset + count overflow. */
  ck_assert_int_eq (disk_pread (d, &io_data, buf, 2, dsize - 1), -1);
  ck_assert_int_eq (errno, EINVAL);
  expect_one_error ("beyond the end", NULL);
  ck_assert_int_eq (disk_pwrite (d, &io_data, buf, 1, dsize, false), -1);
  ck_assert_int_eq (errno, EINVAL);
  expect_one_error ("beyond the end", NULL);
  ck_assert_int_eq (disk_zero (d, &io_data, UINT64_MAX, 1, false), -1);
  ck_assert_int_eq (errno, EINVAL);
  expect_one_error ("beyond the end", NULL);
  ck_assert_int_eq (disk_pwrite (d, &io_dif, ext, EXT (d), xsize, false), -1);
  ck_assert_int_eq (errno, EINVAL);
  expect_one_error ("beyond the end", NULL);
  ck_assert_int_eq (disk_pread (d, &io_dif, buf, xsize + EXT (d), 0), -1);
  ck_assert_int_eq (errno, EINVAL);
  expect_one_error ("beyond the end", NULL);

  /* Zero-length requests do nothing and succeed, even at the end. */
  ck_assert_int_eq (disk_pread (d, &io_data, buf, 0, dsize), 0);
  ck_assert_int_eq (disk_pwrite (d, &io_data, buf, 0, 7, false), 0);
  ck_assert_int_eq (disk_pwrite (d, &io_dif, buf, 0, xsize, false), 0);
  ck_assert_int_eq (disk_zero (d, &io_data, 0, 3, false), 0);
  ck_assert_int_eq (disk_trim (d, &io_dif, 0, 0, false), 0);
  ck_assert_int_eq (nr_errors, 0);

  /* The whole of each view is fine. */
  ck_assert_int_eq (disk_pread (d, &io_data, buf, dsize, 0), 0);
  ck_assert_int_eq (disk_pread (d, &io_dif, buf, xsize, 0), 0);

  image_same (d, &before);
  image_free (&before);
  free (ext);
  free (buf);
  disk_close (d);
}
END_TEST

/* Partial-interval writes on the data view are read-modify-write: the
 * result matches a byte model of the disk, and every touched block has
 * valid PI. */
START_TEST (rmw_partial_writes)
{
  struct disk *d = open_case (_i, 16);
  const uint64_t iv = IV (d), size = 16 * iv;
  uint8_t *model = xmalloc (size), *buf = xmalloc (size), *back;
  struct stats_snapshot s0, s;
  struct { uint64_t off, len, generated; } shapes[] = {
    { 3 * iv + 10, 100, 1 },            /* inside one block */
    { iv + 7, 3 * iv, 4 },              /* head + 2 whole + tail */
    { 0, iv + 1, 2 },                   /* whole + tail */
    { 6 * iv - 1, iv + 1, 2 },          /* head + whole */
    { 8 * iv + 1, iv - 2, 1 },          /* inside, both ends partial */
    { 9 * iv - 3, 6, 2 },               /* across one boundary */
    { 0, size, 16 },                    /* everything, aligned */
    { 1, size - 2, 16 },                /* everything but two bytes */
  };
  size_t k;

  /* A fresh disk: partial writes into never-written blocks merge with
   * zeros and give the block real PI. */
  memset (model, 0, size);
  fill (buf, 10, 70);
  must_write (d, &io_data, buf, 5, 10);
  memcpy (model + 5, buf, 10);
  back = must_read (d, &io_data, 0, size);
  ck_assert (memcmp (back, model, size) == 0);
  free (back);
  expect_valid_pi (d, 0, 1);
  expect_zeroed (d, 1, 15);

  for (k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
    fill (buf, shapes[k].len, 71 + k);
    snap (d, &s0);
    must_write (d, &io_data, buf, shapes[k].off, shapes[k].len);
    snap (d, &s);
    ck_assert_uint_eq (s.blocks_generated - s0.blocks_generated,
                       HAS_PI (d) ? shapes[k].generated : 0);
    memcpy (model + shapes[k].off, buf, shapes[k].len);
    back = must_read (d, &io_data, 0, size);
    ck_assert_msg (memcmp (back, model, size) == 0, "shape %zu", k);
    free (back);
    /* Unaligned reads see the same bytes. */
    back = must_read (d, &io_data, shapes[k].off, shapes[k].len);
    ck_assert (memcmp (back, model + shapes[k].off, shapes[k].len) == 0);
    free (back);
  }
  expect_valid_pi (d, 0, 16);
  ck_assert_int_eq (nr_errors, 0);
  free (model);
  free (buf);
  disk_close (d);
}
END_TEST

/* A partial write or zero into a block whose stored PI is bad fails with
 * EIO (counted on the read side) and stores nothing. */
START_TEST (rmw_corrupt_stored_block)
{
  struct disk *d = open_case (_i, 16);
  uint8_t *ext = make_ext (d, 0, 4, 80), buf[8192];
  struct image before;
  struct stats_snapshot s;
  struct stats_event ev[4];

  must_write (d, &io_dif, ext, 0, 4 * EXT (d));
  ck_assert_int_eq (disk_inject (d, DISK_INJECT_GUARD, 1), 0);
  image_take (d, &before);
  fill (buf, sizeof buf, 81);

  /* Head partial in block 0 (fine), tail partial in block 1 (bad). */
  errors_reset ();
  ck_assert_int_eq (disk_pwrite (d, &io_data, buf, 15, IV (d) - 5, false),
                    -1);
  ck_assert_int_eq (errno, EIO);
  expect_one_error ("LBA 1", "guard", "1 of 2", "nothing was stored", NULL);
  snap (d, &s);
  ck_assert_uint_eq (s.read_errors[PI_CHECK_GUARD], 1);
  ck_assert_uint_eq (s.write_errors[PI_CHECK_GUARD], 0);
  ck_assert_uint_eq (s.writes_rejected, 0);
  ck_assert_uint_eq (stats_events_since (&d->stats, 0, ev, 4), 1);
  ck_assert_uint_eq (ev[0].lba, 1);
  ck_assert_int_eq (ev[0].op, STATS_OP_WRITE);
  ck_assert_int_eq (ev[0].view, PROFILE_VIEW_DATA);
  ck_assert_int_eq (ev[0].check, PI_CHECK_GUARD);
  image_same (d, &before);

  /* A partial zero of it too. */
  ck_assert_int_eq (disk_zero (d, &io_data, 100, IV (d) + 1, false), -1);
  ck_assert_int_eq (errno, EIO);
  expect_one_error ("LBA 1", "guard", NULL);
  image_same (d, &before);

  /* Overwriting the whole block needs no merge and heals it. */
  must_write (d, &io_data, buf, IV (d), IV (d));
  free (must_read (d, &io_data, 0, 4 * IV (d)));
  image_free (&before);
  free (ext);
  disk_close (d);
}
END_TEST

/* ZERO gives zeros and all-ones PI; partial blocks of a zero are merged
 * with zeros; TRIM leaves partial blocks alone. */
START_TEST (zero_and_trim)
{
  struct disk *d = open_case (_i, 16);
  const uint64_t iv = IV (d), size = 16 * iv;
  uint8_t *model = xmalloc (size), *back;

  fill (model, size, 90);
  must_write (d, &io_data, model, 0, size);

  /* data view zero, whole blocks 2 and 3. */
  ck_assert_int_eq (disk_zero (d, &io_data, 2 * iv, 2 * iv, false), 0);
  memset (model + 2 * iv, 0, 2 * iv);
  expect_zeroed (d, 2, 2);
  /* Partial: bytes 10..29 of block 5. */
  ck_assert_int_eq (disk_zero (d, &io_data, 20, 5 * iv + 10, false), 0);
  memset (model + 5 * iv + 10, 0, 20);
  expect_valid_pi (d, 5, 1);
  /* Across blocks 6-8: tail of 6 and head of 8 merged, 7 zeroed. */
  ck_assert_int_eq (disk_zero (d, &io_data, iv + 2, 7 * iv - 1, false), 0);
  memset (model + 7 * iv - 1, 0, iv + 2);
  expect_valid_pi (d, 6, 1);
  expect_zeroed (d, 7, 1);
  expect_valid_pi (d, 8, 1);

  /* Trim: no whole block covered, nothing happens. */
  ck_assert_int_eq (disk_trim (d, &io_data, iv, 9 * iv + 1, false), 0);
  /* Trim of block 11 with ragged edges in 10 and 12. */
  ck_assert_int_eq (disk_trim (d, &io_data, iv + 2, 11 * iv - 1, false), 0);
  memset (model + 11 * iv, 0, iv);
  expect_zeroed (d, 11, 1);

  /* dif view zero and trim, whole extended blocks. */
  ck_assert_int_eq (disk_zero (d, &io_dif, EXT (d), 13 * EXT (d), false), 0);
  memset (model + 13 * iv, 0, iv);
  ck_assert_int_eq (disk_trim (d, &io_dif, 2 * EXT (d), 14 * EXT (d), true),
                    0);
  memset (model + 14 * iv, 0, 2 * iv);
  expect_zeroed (d, 13, 3);

  back = must_read (d, &io_data, 0, size);
  ck_assert (memcmp (back, model, size) == 0);
  free (back);
  expect_valid_pi (d, 0, 2);
  expect_valid_pi (d, 4, 3);
  expect_valid_pi (d, 8, 3);
  expect_valid_pi (d, 12, 1);
  {
    struct stats_snapshot s;
    snap (d, &s);
    ck_assert_uint_eq (s.requests[PROFILE_VIEW_DATA][STATS_OP_ZERO], 3);
    ck_assert_uint_eq (s.requests[PROFILE_VIEW_DATA][STATS_OP_TRIM], 2);
    ck_assert_uint_eq (s.requests[PROFILE_VIEW_DIF][STATS_OP_ZERO], 1);
    ck_assert_uint_eq (s.bytes[PROFILE_VIEW_DIF][STATS_OP_TRIM],
                       2 * EXT (d));
  }
  free (model);
  disk_close (d);
}
END_TEST

/* Open case I with NBLOCKS blocks on the memory store and on a file
 * store in a new directory (its path in DIR, to remove). */
static void
open_both_stores (int i, uint64_t nblocks, struct disk **mem,
                  struct disk **file, char *dir, size_t dirlen)
{
  *mem = open_case (i, nblocks);
  *file = open_file_case (i, nblocks, dir, dirlen);
}

/* A data view read from a partial block through whole blocks (written,
 * corrupt, unwritten in an allocated chunk, in a chunk never allocated)
 * to a partial block checks every block once, in LBA order: corrupt
 * blocks in the head, the middle (at a chunk boundary) and the tail each
 * give one event, in order, and fail the read once; unwritten blocks
 * escape.  The memory store and the file store give the same answer. */
static void
read_checks_in_order (struct disk *d)
{
  const uint64_t iv = IV (d), B = 65536 / iv, nb = 5 * B;
  const uint64_t bad[] = { 1, B, 2 * B + 2, nb - 1 };
  const uint64_t offset = iv + 7, count = (nb - 1) * iv + 5 - offset;
  uint8_t *w = xmalloc ((2 * B + 2) * iv), *buf = xmalloc (count);
  struct stats_snapshot s0, s;
  struct stats_event ev[8];
  char want[64];
  size_t nev, k;

  fill (w, (2 * B + 2) * iv, 11);
  must_write (d, &io_data, w, iv, (2 * B + 2) * iv);      /* 1 .. 2B+2 */
  must_write (d, &io_data, w, (nb - 1) * iv, iv);         /* nb-1 */
  for (k = 0; k < 4; k++)
    ck_assert_int_eq (disk_inject (d, DISK_INJECT_GUARD, bad[k]), 0);

  snap (d, &s0);
  nev = stats_events_since (&d->stats, 0, ev, 8);
  errors_reset ();
  ck_assert_int_eq (disk_pread (d, &io_data, buf, count, offset), -1);
  ck_assert_int_eq (errno, EIO);
  snprintf (want, sizeof want, "4 of %" PRIu64 " blocks failed", nb - 1);
  expect_one_error ("data view read", "LBA 1 fails the guard check", want,
                    NULL);
  snap (d, &s);
  ck_assert_uint_eq (s.reads_failed - s0.reads_failed, 1);
  ck_assert_uint_eq (s.read_errors[PI_CHECK_GUARD] -
                     s0.read_errors[PI_CHECK_GUARD], 4);
  ck_assert_uint_eq (s.blocks_verified - s0.blocks_verified, 2 * B + 3);
  ck_assert_uint_eq (s.blocks_escaped - s0.blocks_escaped, 3 * B - 4);
  ck_assert_uint_eq (stats_events_since (&d->stats, 0, ev, 8), nev + 4);
  for (k = 0; k < 4; k++) {
    ck_assert_uint_eq (ev[nev + k].lba, bad[k]);
    ck_assert_int_eq (ev[nev + k].check, PI_CHECK_GUARD);
    ck_assert_int_eq (ev[nev + k].op, STATS_OP_READ);
    ck_assert_uint_eq (ev[nev + k].offset, offset);
    ck_assert_uint_eq (ev[nev + k].length, count);
  }

  /* Without the corrupt blocks: the data written, zeros elsewhere. */
  must_write (d, &io_data, w, iv, (2 * B + 2) * iv);
  must_write (d, &io_data, w, (nb - 1) * iv, iv);
  snap (d, &s0);
  ck_assert_int_eq (disk_pread (d, &io_data, buf, count, offset), 0);
  ck_assert_mem_eq (buf, w + 7, (2 * B + 2) * iv - 7);
  for (k = (2 * B + 2) * iv - 7; k < count - 5; k++)
    ck_assert_msg (buf[k] == 0, "byte %zu of the read is not zero", k);
  ck_assert_mem_eq (buf + count - 5, w, 5);
  snap (d, &s);
  ck_assert_uint_eq (s.blocks_verified - s0.blocks_verified, 2 * B + 3);
  ck_assert_uint_eq (s.blocks_escaped - s0.blocks_escaped, 3 * B - 4);
  ck_assert_uint_eq (s.reads_failed, s0.reads_failed);
  free (w);
  free (buf);
}

START_TEST (data_read_checks_in_order)
{
  struct disk *mem, *file;
  char dir[256];

  open_both_stores (_i, 5 * 65536 / cases[_i].interval, &mem, &file, dir,
                    sizeof dir);
  read_checks_in_order (mem);
  read_checks_in_order (file);
  disk_close (mem);
  disk_close (file);
  remove_dir (dir);
}
END_TEST

/* Both disks hold the same data and PI (the whole dif view) and counted
 * the same blocks generated. */
static void
same_disks (struct disk *a, struct disk *b, const char *after)
{
  const uint64_t len = a->nblocks * EXT (a);
  uint8_t *x = must_read (a, &io_dif, 0, len), *y = must_read (b, &io_dif,
                                                                0, len);
  struct stats_snapshot sa, sb;

  ck_assert_msg (memcmp (x, y, len) == 0, "after %s: the stores differ",
                 after);
  snap (a, &sa);
  snap (b, &sb);
  ck_assert_msg (sa.blocks_generated == sb.blocks_generated,
                 "after %s: %" PRIu64 " blocks generated on memory, %" PRIu64
                 " on file", after, sa.blocks_generated, sb.blocks_generated);
  free (x);
  free (y);
}

/* Writes the memory store cannot have memory for: a data view write
 * that starts and ends inside blocks and crosses from an allocated chunk
 * into one never written, and a dif view write across the same boundary,
 * fail with ENOMEM and one error naming the chunk's first LBA; the disk
 * then reads exactly as before through both views (the merged partial
 * blocks included: a data view write is one store call, and the store
 * gets all its memory before it stores anything) and no PI counts as
 * generated.  With memory again the same writes work. */
/* A write of LEN bytes of BUF at OFF through IO while no memory can be
 * had: it fails with ENOMEM and one error naming WANT. */
static void
write_without_memory (struct disk *d, const struct disk_io *io,
                      const void *buf, uint64_t len, uint64_t off,
                      const char *want)
{
  int r;

  errors_reset ();
  alloc_left = 0;
  r = disk_pwrite (d, io, buf, len, off, false);
  alloc_left = -1;
  ck_assert_int_eq (r, -1);
  ck_assert_int_eq (errno, ENOMEM);
  expect_one_error ("cannot allocate memory", want, NULL);
}

START_TEST (write_without_memory_stores_nothing)
{
  struct disk *d = open_case (_i, 256);     /* 2 chunks or more */
  const uint64_t iv = IV (d), cb = 65536 / iv;  /* blocks per chunk */
  const uint64_t off = cb * iv - 2 * iv - 7, len = 4 * iv + 20;
  uint8_t *buf = xmalloc (len), *ext;
  struct stats_snapshot s0, s1;
  struct image before;
  char want[64];

  uint8_t *chunk0 = xmalloc (cb * iv);

  fill (chunk0, cb * iv, 5);                /* chunk 0 written */
  must_write (d, &io_data, chunk0, 0, cb * iv);
  free (chunk0);
  fill (buf, len, 6);
  ext = make_ext (d, cb - 2, 4, 7);
  image_take (d, &before);
  snap (d, &s0);
  snprintf (want, sizeof want, "LBA %" PRIu64 ":", cb);

  write_without_memory (d, &io_data, buf, len, off, want);
  write_without_memory (d, &io_dif, ext, 4 * EXT (d), (cb - 2) * EXT (d),
                        want);

  image_same (d, &before);
  snap (d, &s1);
  ck_assert_uint_eq (s1.blocks_generated, s0.blocks_generated);

  must_write (d, &io_data, buf, off, len);
  must_write (d, &io_dif, ext, (cb - 2) * EXT (d), 4 * EXT (d));
  ck_assert_int_eq (nr_errors, 0);
  image_free (&before);
  free (buf);
  free (ext);
  disk_close (d);
}
END_TEST

/* A data view write whose whole blocks need a chunk that cannot be had
 * stores nothing, its partial first and last blocks (in chunks that
 * exist) included; every format, none too.  Chunks 0 and 2 are
 * written, chunk 1 is not. */
START_TEST (write_middle_without_memory_stores_nothing)
{
  struct disk *d = open_case (_i, 3 * 65536 / cases[_i].interval);
  const uint64_t iv = IV (d), cb = 65536 / iv;  /* blocks per chunk */
  const uint64_t off = cb * iv - iv + 5;        /* in chunk 0's last block */
  const uint64_t len = 2 * cb * iv + 9 - off;   /* to chunk 2's first */
  uint8_t *buf = xmalloc (len), *chunk = xmalloc (cb * iv);
  struct stats_snapshot s0, s1;
  struct image before;
  char want[64];

  fill (chunk, cb * iv, 9);
  must_write (d, &io_data, chunk, 0, cb * iv);
  must_write (d, &io_data, chunk, 2 * cb * iv, cb * iv);
  fill (buf, len, 10);
  image_take (d, &before);
  snap (d, &s0);
  snprintf (want, sizeof want, "LBA %" PRIu64 ":", cb);

  write_without_memory (d, &io_data, buf, len, off, want);
  image_same (d, &before);
  snap (d, &s1);
  ck_assert_uint_eq (s1.blocks_generated, s0.blocks_generated);

  must_write (d, &io_data, buf, off, len);
  ck_assert_int_eq (nr_errors, 0);
  image_free (&before);
  free (buf);
  free (chunk);
  disk_close (d);
}
END_TEST

/* A data view zero whose partial blocks cannot have their memory
 * changes nothing: the partial tail block is stored before the head and
 * put back if the head cannot be, and the whole blocks come last.
 * Chunk 0 and chunk 2 are never written, chunk 1 is. */
START_TEST (zero_without_memory_stores_nothing)
{
  struct disk *d = open_case (_i, 3 * 65536 / cases[_i].interval);
  const uint64_t iv = IV (d), cb = 65536 / iv;  /* blocks per chunk */
  /* Head and two whole blocks in chunk 1, tail in chunk 2 (no memory
   * for it); then head in chunk 0 (no memory for it), two whole blocks
   * and tail in chunk 1. */
  const uint64_t off[2] = { (2 * cb - 3) * iv + 3, (cb - 1) * iv + 3 };
  const uint64_t end[2] = { 2 * cb * iv + 100, (cb + 2) * iv + 5 };
  const uint64_t chunk[2] = { 2 * cb, 0 };
  uint8_t *chunk1 = xmalloc (cb * iv), *got;
  struct stats_snapshot s0, s1;
  struct image before;
  char want[64];
  uint64_t i;
  int k, r;

  fill (chunk1, cb * iv, 8);
  must_write (d, &io_data, chunk1, cb * iv, cb * iv);
  for (k = 0; k < 2; k++) {
    image_take (d, &before);
    snap (d, &s0);
    snprintf (want, sizeof want, "LBA %" PRIu64 ":", chunk[k]);
    errors_reset ();
    alloc_left = 0;
    r = disk_zero (d, &io_data, end[k] - off[k], off[k], false);
    alloc_left = -1;
    ck_assert_msg (r == -1 && errno == ENOMEM, "zero %d: %d (%s)", k, r,
                   strerror (errno));
    expect_one_error ("cannot allocate memory", want, NULL);
    image_same (d, &before);
    snap (d, &s1);
    ck_assert_uint_eq (s1.blocks_generated, s0.blocks_generated);
    image_free (&before);
  }

  /* With memory, both zeros work: zeros in the range, chunk 1's data
   * around it, valid PI everywhere it was written. */
  for (k = 0; k < 2; k++)
    ck_assert_int_eq (disk_zero (d, &io_data, end[k] - off[k], off[k],
                                 false), 0);
  ck_assert_int_eq (nr_errors, 0);
  got = must_read (d, &io_data, 0, 3 * cb * iv);
  for (i = 0; i < 3 * cb * iv; i++) {
    bool zeroed = (i >= off[0] && i < end[0]) || (i >= off[1] && i < end[1]);
    uint8_t want_byte = zeroed || i < cb * iv || i >= 2 * cb * iv
      ? 0 : chunk1[i - cb * iv];
    ck_assert_msg (got[i] == want_byte, "byte %" PRIu64 ": 0x%02x, not "
                   "0x%02x", i, got[i], want_byte);
  }
  free (got);
  free (chunk1);
  disk_close (d);
}
END_TEST

/* Data view writes store the same data and PI, and count the same, on
 * the memory store (whole blocks copied in while their PI is generated,
 * write_in_place) and the file store (PI generated first): aligned and
 * unaligned, across chunks, and a write whose partial block fails its
 * check, which stores and counts nothing on either. */
START_TEST (data_write_same_on_both_stores)
{
  const uint32_t iv = cases[_i].interval;
  const uint64_t nb = 3 * 65536 / iv + 3, len = nb * iv;
  struct disk *mem, *file, *d[2];
  struct stats_snapshot s0, s;
  struct image before;
  uint8_t *buf = xmalloc (len);
  char dir[256];
  int k;

  open_both_stores (_i, nb, &mem, &file, dir, sizeof dir);
  d[0] = mem;
  d[1] = file;
  ck_assert_ptr_nonnull (mem->store->ops->write_in_place);
  ck_assert_ptr_null (file->store->ops->write_in_place);
  fill (buf, len, 21);
  for (k = 0; k < 2; k++)
    must_write (d[k], &io_data, buf, 0, len);
  same_disks (mem, file, "a write of the whole disk");
  fill (buf, len, 22);
  for (k = 0; k < 2; k++)
    must_write (d[k], &io_data, buf, 5 * iv + 3, 2 * 65536 + 100);
  same_disks (mem, file, "an unaligned write across chunks");
  for (k = 0; k < 2; k++)
    must_write (d[k], &io_data, buf + 7, 65536 - iv, 2 * iv);
  same_disks (mem, file, "a write of two blocks across a chunk boundary");

  /* A byte of block nb-4, block nb-3, ten bytes of block nb-2, which
   * fails its check: nothing stored, nothing counted. */
  for (k = 0; k < 2; k++) {
    ck_assert_int_eq (disk_inject (d[k], DISK_INJECT_GUARD, nb - 2), 0);
    image_take (d[k], &before);
    snap (d[k], &s0);
    errors_reset ();
    ck_assert_int_eq (disk_pwrite (d[k], &io_data, buf, (nb - 3) * iv - 1,
                                   1 + iv + 10, false), -1);
    ck_assert_int_eq (errno, EIO);
    if (HAS_PI (d[k]))
      expect_one_error ("nothing was stored", NULL);
    snap (d[k], &s);
    ck_assert_uint_eq (s.blocks_generated, s0.blocks_generated);
    image_same (d[k], &before);
    image_free (&before);
  }
  same_disks (mem, file, "a rejected write");

  disk_close (mem);
  disk_close (file);
  remove_dir (dir);
  free (buf);
}
END_TEST

/* ---- fault injection ---- */

static void
inject_case (struct disk *d, enum disk_inject_kind kind, enum pi_check want,
             uint64_t lba)
{
  struct stats_snapshot s0, s;
  struct stats_event ev[64];
  uint8_t *once, *twice, *orig, *buf;
  struct pi_tuple t0, t1;
  char lbatext[32];
  size_t nev;

  orig = must_read (d, &io_dif, lba * EXT (d), EXT (d));
  snap (d, &s0);
  ck_assert_int_eq (disk_inject (d, kind, lba), 0);
  once = must_read (d, &io_dif, lba * EXT (d), EXT (d));
  ck_assert_int_eq (disk_inject (d, kind, lba), 0);
  twice = must_read (d, &io_dif, lba * EXT (d), EXT (d));
  ck_assert_msg (memcmp (once, twice, EXT (d)) == 0,
                 "injecting twice differs from once");
  snap (d, &s);
  ck_assert_uint_eq (s.injections - s0.injections, 2);

  /* What exactly was corrupted, relative to valid PI for the original. */
  if (pi_tuple_escaped (d->pi.format, orig + IV (d)))
    pi_generate_block (&d->pi, orig, lba, orig + IV (d));
  get_tuple (d, orig + IV (d), &t0);
  get_tuple (d, once + IV (d), &t1);
  ck_assert_int_eq (memcmp (once + 1, orig + 1, IV (d) - 1), 0);
  ck_assert_uint_eq (once[0], orig[0] ^ (kind == DISK_INJECT_DATA));
  ck_assert_uint_eq (t1.guard, t0.guard ^ (kind == DISK_INJECT_GUARD));
  ck_assert_uint_eq (t1.ref, t0.ref ^ (kind == DISK_INJECT_REF));
  if (kind != DISK_INJECT_APP)
    ck_assert_uint_eq (t1.app, t0.app);

  /* The data view read fails, on that check, counted once. */
  buf = xmalloc (4 * IV (d));
  errors_reset ();
  snprintf (lbatext, sizeof lbatext, "LBA %" PRIu64, lba);
  nev = stats_events_since (&d->stats, 0, ev, 64);
  ck_assert_uint_lt (nev, 63);
  ck_assert_int_eq (disk_pread (d, &io_data, buf, IV (d), lba * IV (d)), -1);
  ck_assert_int_eq (errno, EIO);
  expect_one_error (lbatext, pi_check_name (want), NULL);
  snap (d, &s0);
  ck_assert_uint_eq (s0.read_errors[want] - s.read_errors[want], 1);
  ck_assert_uint_eq (s0.reads_failed - s.reads_failed, 1);
  ck_assert_uint_eq (stats_events_since (&d->stats, 0, ev, 64), nev + 1);
  ck_assert_uint_eq (ev[nev].lba, lba);
  ck_assert_int_eq (ev[nev].check, want);
  ck_assert_int_eq (ev[nev].op, STATS_OP_READ);
  ck_assert_int_eq (ev[nev].view, PROFILE_VIEW_DATA);
  ck_assert_uint_eq (ev[nev].conn, io_data.conn);
  /* A read of a range around it fails the same way. */
  ck_assert_int_eq (disk_pread (d, &io_data, buf, 2 * IV (d) + 2,
                                (lba - 1) * IV (d) + 5), -1);
  ck_assert_int_eq (errno, EIO);
  expect_one_error (lbatext, pi_check_name (want), "1 of 3", NULL);
  /* Its neighbours are still fine. */
  free (must_read (d, &io_data, (lba - 1) * IV (d), IV (d)));
  free (must_read (d, &io_data, (lba + 1) * IV (d), IV (d)));
  free (buf);
  free (orig);
  free (once);
  free (twice);
}

START_TEST (inject_faults)
{
  struct disk *d = open_case (_i, 16);
  uint8_t *ext = make_ext (d, 0, 8, 100);
  const bool type12 = d->pi.format->type != PI_TYPE_3;

  must_write (d, &io_dif, ext, 0, 8 * EXT (d));
  inject_case (d, DISK_INJECT_DATA, PI_CHECK_GUARD, 1);
  inject_case (d, DISK_INJECT_GUARD, PI_CHECK_GUARD, 3);
  if (type12)
    inject_case (d, DISK_INJECT_REF, PI_CHECK_REF, 5);
  /* Never-written blocks get valid PI first, then the fault. */
  inject_case (d, DISK_INJECT_DATA, PI_CHECK_GUARD, 10);
  inject_case (d, DISK_INJECT_GUARD, PI_CHECK_GUARD, 12);

  /* Refused: app without app-tag=, ref on type 3, past the end. */
  errors_reset ();
  ck_assert_int_eq (disk_inject (d, DISK_INJECT_APP, 2), -1);
  ck_assert_int_eq (errno, EINVAL);
  expect_one_error ("inject app: no app-tag= configured", NULL);
  if (!type12) {
    ck_assert_int_eq (disk_inject (d, DISK_INJECT_REF, 2), -1);
    ck_assert_int_eq (errno, EINVAL);
    expect_one_error ("inject ref", NULL);
  }
  ck_assert_int_eq (disk_inject (d, DISK_INJECT_GUARD, 16), -1);
  ck_assert_int_eq (errno, EINVAL);
  expect_one_error ("LBA 16", NULL);
  free (ext);
  disk_close (d);
}
END_TEST

START_TEST (inject_app)
{
  /* app_tag 0xfffe, mask 0x0001: the obvious bad tag would be 0xffff,
   * the escape value; it must still fail. */
  static const uint16_t tags[][2] = {
    { 0x00a5, 0xffff }, { 0x1234, 0xff00 }, { 0xfffe, 0x0001 },
    { 0xfffe, 0xffff },
  };
  size_t k;

  for (k = 0; k < sizeof tags / sizeof tags[0]; k++) {
    struct disk *d = open_case_app (_i, 16, tags[k][0], tags[k][1]);
    uint8_t *ext = make_ext (d, 0, 8, 110);
    must_write (d, &io_dif, ext, 0, 8 * EXT (d));
    inject_case (d, DISK_INJECT_APP, PI_CHECK_APP, 2);
    inject_case (d, DISK_INJECT_APP, PI_CHECK_APP, 9);  /* never written */
    free (ext);
    disk_close (d);
  }
}
END_TEST

START_TEST (inject_format_none)
{
  struct disk *d = open_case (8, 16);

  errors_reset ();
  ck_assert_int_eq (disk_inject (d, DISK_INJECT_DATA, 0), -1);
  ck_assert_int_eq (errno, EINVAL);
  expect_one_error ("format none", NULL);
  disk_close (d);
}
END_TEST

/* ---- a read-only file= store ---- */

/* A disk whose file= store cannot be opened for writing reads as it was
 * written; every request that would change it fails with EROFS and one
 * error naming the view, the operation and the file; flush works; the
 * stored data and PI are byte for byte what they were. */
START_TEST (read_only_file_store)
{
  char dir[256], file[300];
  struct disk_config cfg;
  struct image before;
  struct disk *d;
  uint8_t *ext, *buf;
  int err;

  /* Case 0: T10-DIF-TYPE1-CRC, 512-byte intervals. */
  file_case_config (0, 32, dir, sizeof dir, file, sizeof file, &cfg);
  d = open_config (&cfg);
  ck_assert (!disk_read_only (d));
  ext = make_ext (d, 4, 6, 77);
  must_write (d, &io_dif, ext, 4 * EXT (d), 6 * EXT (d));
  disk_close (d);

  err = ro_path_make (dir);
  if (err == 0) {
    fprintf (stderr, "read_only_file_store: SKIPPED: cannot make %s "
             "read-only (root without a private mount namespace)\n", dir);
    free (ext);
    remove_dir (dir);
    return;
  }
  d = open_config (&cfg);
  ck_assert (disk_read_only (d));
  image_take (d, &before);
  buf = must_read (d, &io_dif, 4 * EXT (d), 6 * EXT (d));
  ck_assert (memcmp (buf, ext, 6 * EXT (d)) == 0);
  free (buf);
  expect_valid_pi (d, 4, 6);

  errors_reset ();
  ck_assert_int_eq (disk_pwrite (d, &io_dif, ext, 6 * EXT (d), 10 * EXT (d),
                                 false), -1);
  ck_assert_int_eq (errno, EROFS);
  expect_one_error ("dif view write", "read-only", file, NULL);
  ck_assert_int_eq (disk_pwrite (d, &io_data, ext, 100, 7, true), -1);
  ck_assert_int_eq (errno, EROFS);
  expect_one_error ("data view write", "read-only", file, NULL);
  ck_assert_int_eq (disk_zero (d, &io_data, IV (d), 4 * IV (d), false), -1);
  ck_assert_int_eq (errno, EROFS);
  expect_one_error ("data view zero", "read-only", NULL);
  ck_assert_int_eq (disk_trim (d, &io_dif, EXT (d), 5 * EXT (d), false), -1);
  ck_assert_int_eq (errno, EROFS);
  expect_one_error ("dif view trim", "read-only", NULL);
  ck_assert_int_eq (disk_inject (d, DISK_INJECT_GUARD, 5), -1);
  ck_assert_int_eq (errno, EROFS);
  expect_one_error ("inject guard", "read-only", file, NULL);
  ck_assert_int_eq (disk_flush (d, &io_data), 0);
  ck_assert_int_eq (nr_errors, 0);
  image_same (d, &before);

  image_free (&before);
  free (ext);
  disk_close (d);
  ro_path_undo ();
  remove_dir (dir);
}
END_TEST

/* ---- format none ---- */

START_TEST (format_none_views)
{
  struct disk *d = open_case (8 + _i, 8);
  const uint64_t iv = IV (d);
  uint8_t buf[3 * 4096], *back;
  struct stats_snapshot s;

  /* The dif view is the data view, blocks of one interval. */
  fill (buf, 3 * iv, 120);
  must_write (d, &io_dif, buf, iv, 3 * iv);
  back = must_read (d, &io_data, iv, 3 * iv);
  ck_assert (memcmp (back, buf, 3 * iv) == 0);
  free (back);
  must_write (d, &io_data, buf, 7, 100);
  back = must_read (d, &io_dif, 0, iv);
  ck_assert (memcmp (back + 7, buf, 100) == 0);
  free (back);
  errors_reset ();
  ck_assert_int_eq (disk_pread (d, &io_dif, buf, iv, 7), -1);
  ck_assert_int_eq (errno, EINVAL);
  expect_one_error ("multiples", NULL);
  snap (d, &s);
  ck_assert_uint_eq (s.blocks_verified, 0);
  ck_assert_uint_eq (s.blocks_generated, 0);
  ck_assert_uint_eq (s.blocks_escaped, 0);
  disk_close (d);
}
END_TEST

/* ---- extents, flush ---- */

START_TEST (extents)
{
  struct disk *d = open_case (0, 1024);        /* 512: 128 blocks a chunk */
  uint8_t buf[512];
  bool alloc;
  uint64_t run;

  fill (buf, sizeof buf, 130);
  must_write (d, &io_data, buf, 200 * 512, 512);
  ck_assert_int_eq (disk_extent (d, &io_data, 1024 * 512, 0, &alloc, &run),
                    0);
  ck_assert (!alloc);
  ck_assert_uint_eq (run, 128 * 512);
  ck_assert_int_eq (disk_extent (d, &io_data, 1024 * 512 - 128 * 512 - 3,
                                 128 * 512 + 3, &alloc, &run), 0);
  ck_assert (alloc);
  ck_assert_uint_eq (run, 128 * 512 - 3);
  ck_assert_int_eq (disk_extent (d, &io_data, 10, 256 * 512, &alloc, &run),
                    0);
  ck_assert (!alloc);
  ck_assert_uint_eq (run, 10);
  ck_assert_int_eq (disk_extent (d, &io_dif, 520 * 4, 520, &alloc, &run), 0);
  ck_assert (alloc);
  ck_assert_uint_eq (run, 520 * 4);
  /* Zeroing the chunk gives the space back. */
  ck_assert_int_eq (disk_zero (d, &io_data, 128 * 512, 128 * 512, false), 0);
  ck_assert_int_eq (disk_extent (d, &io_data, 1024 * 512, 0, &alloc, &run),
                    0);
  ck_assert (!alloc);
  ck_assert_uint_eq (run, 1024 * 512);
  disk_close (d);
}
END_TEST

START_TEST (flush_counted)
{
  struct disk *d = open_case (0, 16);
  struct stats_snapshot s;

  ck_assert_int_eq (disk_flush (d, &io_data), 0);
  ck_assert_int_eq (disk_flush (d, &io_dif), 0);
  ck_assert_int_eq (disk_flush (d, &io_dif), 0);
  snap (d, &s);
  ck_assert_uint_eq (s.requests[PROFILE_VIEW_DATA][STATS_OP_FLUSH], 1);
  ck_assert_uint_eq (s.requests[PROFILE_VIEW_DIF][STATS_OP_FLUSH], 2);
  disk_close (d);
}
END_TEST

/* ---- durability: flush and FUA on the file store ---- */

/* Open case I with NBLOCKS blocks on a file store in a new directory DIR
 * (DIRLEN bytes) and start tracking its files (test-sync-wrap.h). */
static struct disk *
open_tracked (int i, uint64_t nblocks, char *dir, size_t dirlen)
{
  struct disk *d = open_file_case (i, nblocks, dir, dirlen);
  char path[300];

  snprintf (path, sizeof path, "%s/disk", dir);
  sync_track_start (path);
  return d;
}

/* Whether case I keeps PI in PATH.pi. */
static bool
has_pi_file (int i)
{
  return i < NR_PI_CASES;
}

/* Neither file of the store has a byte written and not yet durable. */
static void
expect_durable (const char *what)
{
  ck_assert_msg (!sync_dirty (SYNC_DATA), "%s: data file not synced", what);
  ck_assert_msg (!sync_dirty (SYNC_PI), "%s: PI file not synced", what);
}

/* flush syncs PATH and PATH.pi; a sync that fails fails the flush with
 * EIO and one error naming the file. */
START_TEST (flush_syncs_both_files)
{
  char dir[256], path[300];
  struct disk *d = open_tracked (_i, 64, dir, sizeof dir);
  uint8_t *buf = xmalloc (8 * IV (d));
  int f;

  fill (buf, 8 * IV (d), 5);
  must_write (d, &io_data, buf, 0, 8 * IV (d));
  ck_assert (sync_dirty (SYNC_DATA));
  ck_assert (sync_dirty (SYNC_PI) == has_pi_file (_i));
  ck_assert_int_eq (disk_flush (d, &io_data), 0);
  ck_assert_uint_ge (sync_track.syncs[SYNC_DATA], 1);
  ck_assert_uint_ge (sync_track.syncs[SYNC_PI], has_pi_file (_i));
  expect_durable ("flush");

  for (f = 0; f < (has_pi_file (_i) ? SYNC_NFILES : 1); f++) {
    must_write (d, &io_data, buf, 0, IV (d));
    sync_track.fail = f;
    errors_reset ();
    ck_assert_int_eq (disk_flush (d, &io_dif), -1);
    ck_assert_int_eq (errno, EIO);
    snprintf (path, sizeof path, "%s/disk%s: ", dir, f == SYNC_PI ? ".pi" : "");
    expect_one_error ("flushing", path, "Input/output error", NULL);
    sync_track.fail = -1;
    ck_assert_int_eq (disk_flush (d, &io_dif), 0);
  }
  sync_track_stop ();
  free (buf);
  disk_close (d);
  remove_dir (dir);
}
END_TEST

/* One request of the FUA tests: a write or a zero of COUNT bytes at
 * OFFSET on VIEW (data: in blocks of the data view; dif: extended). */
struct fua_req {
  const char *name;             /* for messages */
  bool zero;                    /* zero instead of write */
  bool dif;                     /* on the dif view */
  uint64_t head, blocks, tail;  /* bytes before the first whole block
                                   (0: none; taken from the end of the
                                   block before it), whole blocks, bytes
                                   of a partial last block */
};

static const struct fua_req fua_reqs[] = {
  { "whole blocks", false, false, 0, 4, 0 },
  { "head + whole", false, false, 100, 3, 0 },
  { "whole + tail", false, false, 0, 3, 100 },
  { "head + whole + tail", false, false, 100, 3, 100 },
  { "head + tail", false, false, 100, 0, 100 },
  { "zero whole blocks", true, false, 0, 4, 0 },
  { "zero head + whole", true, false, 100, 3, 0 },
  { "zero whole + tail", true, false, 0, 3, 100 },
  { "zero head + whole + tail", true, false, 100, 3, 100 },
  { "dif write", false, true, 0, 4, 0 },
  { "dif zero", true, true, 0, 4, 0 },
};
#define NR_FUA_REQS ((int) (sizeof fua_reqs / sizeof fua_reqs[0]))

/* Make request R on D (blocks from LBA 4 on), with FUA or without. */
static int
fua_do (struct disk *d, const struct fua_req *r, bool fua)
{
  const uint64_t bs = r->dif ? EXT (d) : IV (d);
  const struct disk_io *io = r->dif ? &io_dif : &io_data;
  const uint64_t offset = 4 * bs - r->head;
  const uint64_t count = r->head + r->blocks * bs + r->tail;
  uint8_t *buf;
  int ret;

  if (r->zero)
    return disk_zero (d, io, count, offset, fua);
  buf = r->dif ? make_ext (d, 4, r->blocks, 9) : xmalloc (count);
  if (!r->dif)
    fill (buf, count, 9);
  ret = disk_pwrite (d, io, buf, count, offset, fua);
  free (buf);
  return ret;
}

/* A write or zero with FUA, of one piece or of several (partial head,
 * whole blocks, partial tail: several store calls), is durable in both
 * files when it returns: every byte it wrote was synced after it was
 * written, with RWF_DSYNC writes and without (fdatasync).  Without FUA
 * the same request leaves bytes to sync, so the test sees the writes. */
START_TEST (fua_durable_when_done)
{
  const int c = _i % 2 == 0 ? 0 : 6;  /* CRC-16/512 and CRC-64/4096 */
  const struct fua_req *r = &fua_reqs[_i / 2];
  char dir[256], what[128];
  struct disk *d = open_tracked (c, 64, dir, sizeof dir);
  uint8_t *old = xmalloc (16 * IV (d));
  int rwf;

  for (rwf = 1; rwf >= 0; rwf--) {
    snprintf (what, sizeof what, "%s FUA, %s", r->name,
              rwf ? "RWF_DSYNC" : "fdatasync");
    /* Something stored to merge with and to zero. */
    fill (old, 16 * IV (d), 3);
    must_write (d, &io_data, old, 0, 16 * IV (d));
    ck_assert_int_eq (disk_flush (d, &io_data), 0);
    sync_track.no_rwf_dsync = !rwf;
    sync_track_zero ();
    errors_reset ();
    ck_assert_msg (fua_do (d, r, true) == 0, "%s: %s", what, last_error);
    ck_assert_msg (sync_track.writes[SYNC_DATA] > 0, "%s: no data written",
                   what);
    expect_durable (what);
    if (!rwf) {
      ck_assert_uint_ge (sync_track.syncs[SYNC_DATA], 1);
      ck_assert_uint_ge (sync_track.syncs[SYNC_PI], 1);
    }
    ck_assert_int_eq (disk_flush (d, &io_data), 0);
    sync_track_zero ();
    ck_assert_int_eq (fua_do (d, r, false), 0);
    ck_assert_msg (sync_dirty (SYNC_DATA) || sync_dirty (SYNC_PI),
                   "%s: without FUA nothing is left to sync", what);
  }
  sync_track_stop ();
  free (old);
  disk_close (d);
  remove_dir (dir);
}
END_TEST

/* A write with FUA whose sync fails fails with EIO and one error naming
 * the file, whether the store syncs with RWF_DSYNC or fdatasync, and
 * whether the request is one store call (whole blocks: the store's FUA)
 * or several (a partial head: written, then flushed).  What it leaves
 * reads back through the data view without a PI error, as the new data
 * or as the data before it. */
START_TEST (fua_sync_failure)
{
  char dir[256], path[300];
  struct disk *d = open_tracked (_i, 64, dir, sizeof dir);
  const struct {
    uint64_t offset, count;
  } shapes[] = {
    { IV (d), 4 * IV (d) },             /* whole blocks */
    { IV (d) + 9, 4 * IV (d) - 9 },     /* a partial head */
  };
  uint8_t *buf = xmalloc (4 * IV (d)), *before, *after;
  int f, rwf;
  size_t k;

  fill (buf, 4 * IV (d), 7);
  before = xmalloc (6 * IV (d));
  fill (before, 6 * IV (d), 8);
  must_write (d, &io_data, before, 0, 6 * IV (d));
  free (before);
  /* RWF_DSYNC first: once it has failed with EOPNOTSUPP the store uses
   * fdatasync for good. */
  for (rwf = 1; rwf >= 0; rwf--)
    for (k = 0; k < sizeof shapes / sizeof shapes[0]; k++)
      for (f = 0; f < SYNC_NFILES; f++) {
        const uint64_t offset = shapes[k].offset, count = shapes[k].count;

        before = must_read (d, &io_data, offset, count);
        sync_track.no_rwf_dsync = !rwf;
        sync_track.fail = f;
        sync_track_zero ();
        errors_reset ();
        ck_assert_int_eq (disk_pwrite (d, &io_data, buf, count, offset,
                                       true), -1);
        ck_assert_int_eq (errno, EIO);
        if (rwf && k == 0)
          ck_assert_msg (sync_track.syncs[SYNC_DATA] == 0
                         && sync_track.syncs[SYNC_PI] == 0,
                         "file %d: fdatasync, not RWF_DSYNC", f);
        snprintf (path, sizeof path, "%s/disk%s", dir,
                  f == SYNC_PI ? ".pi" : "");
        ck_assert_msg (strstr (last_error, path) != NULL,
                       "error \"%s\" does not name %s", last_error, path);
        ck_assert_msg (strstr (last_error, "Input/output error") != NULL,
                       "error \"%s\" does not say EIO", last_error);
        ck_assert_int_eq (nr_errors, 1);
        sync_track.fail = -1;
        after = must_read (d, &io_data, offset, count);
        ck_assert_msg (memcmp (after, buf, count) == 0
                       || memcmp (after, before, count) == 0,
                       "rwf %d, shape %zu, file %d: neither the new data "
                       "nor the old", rwf, k, f);
        free (before);
        free (after);
      }
  sync_track_stop ();
  free (buf);
  disk_close (d);
  remove_dir (dir);
}
END_TEST

/* ---- a corrupt last block ---- */

/* A data view read of N blocks from LBA 0 whose last block only is
 * corrupt (shape: whole blocks, a partial tail, a partial head) fails
 * with EIO, one error and one event naming exactly that LBA. */
static void
last_block_corrupt (struct disk *d, uint64_t n)
{
  const uint64_t iv = IV (d), last = n - 1;
  const struct {
    uint64_t offset, count;
  } shapes[] = {
    { 0, n * iv },              /* whole blocks */
    { 0, last * iv + 5 },       /* ... ending in a partial tail */
    { 7, n * iv - 7 },          /* a partial head, whole blocks */
    { 7, last * iv - 7 + 5 },   /* partial head and tail */
  };
  uint8_t *w = xmalloc (n * iv), *buf = xmalloc (n * iv);
  struct stats_event ev[4];
  char lbatext[64], of[64];
  uint64_t since;
  size_t k;

  fill (w, n * iv, 21);
  must_write (d, &io_data, w, 0, n * iv);
  ck_assert_int_eq (disk_inject (d, DISK_INJECT_GUARD, last), 0);
  snprintf (lbatext, sizeof lbatext, "LBA %" PRIu64 " fails the guard",
            last);
  snprintf (of, sizeof of, "1 of %" PRIu64 " blocks failed", n);
  for (k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
    if (shapes[k].count <= iv)
      continue;                 /* not several blocks */
    since = d->stats.next_seq - 1;
    errors_reset ();
    ck_assert_msg (disk_pread (d, &io_data, buf, shapes[k].count,
                               shapes[k].offset) == -1,
                   "%" PRIu64 " blocks, shape %zu: corrupt LBA %" PRIu64
                   " read", n, k, last);
    ck_assert_int_eq (errno, EIO);
    expect_one_error ("data view read", lbatext, of, NULL);
    ck_assert_uint_eq (stats_events_since (&d->stats, since, ev, 4), 1);
    ck_assert_uint_eq (ev[0].lba, last);
    ck_assert_int_eq (ev[0].check, PI_CHECK_GUARD);
    /* Without the last block it reads. */
    free (must_read (d, &io_data, shapes[k].offset,
                     last * iv - shapes[k].offset));
  }
  free (w);
  free (buf);
}

START_TEST (data_read_last_block_corrupt)
{
  static const uint64_t ns[] = { 2, 3, 16, 17, 33 };
  struct disk *mem, *file;
  char dir[256];
  size_t k;

  open_both_stores (_i, 40, &mem, &file, dir, sizeof dir);
  for (k = 0; k < sizeof ns / sizeof ns[0]; k++) {
    last_block_corrupt (mem, ns[k]);
    last_block_corrupt (file, ns[k]);
  }
  disk_close (mem);
  disk_close (file);
  remove_dir (dir);
}
END_TEST

/* ---- configuration ---- */

START_TEST (config_errors)
{
  static const struct {
    const char *format;
    uint32_t interval;
    uint64_t size;
    bool has_app;
    uint16_t tag, mask;
    const char *want;                   /* start of the message */
  } bad[] = {
    { "T10-DIF-TYPE1-CRC", 512, 0, false, 0, 0, "size: must not be 0" },
    { "T10-DIF-TYPE1-CRC", 512, 1000, false, 0, 0,
      "size: must be a multiple of the interval (512)" },
    { "T10-DIF-TYPE1-CRC", 4096, 512 * 9, false, 0, 0,
      "size: must be a multiple of the interval (4096)" },
    { "T10-DIF-TYPE1-CRC", 1000, 1000 * 8, false, 0, 0,
      "interval: must be 512 or 4096" },
    { "T10-DIF-TYPE1-CRC", 0, 4096, false, 0, 0,
      "interval: must be 512 or 4096" },
    { "EXT-DIF-TYPE1-CRC64", 512, 1 << 20, false, 0, 0,
      "format: EXT-DIF-TYPE1-CRC64 needs interval=4096" },
    { "EXT-DIF-TYPE3-CRC64", 512, 1 << 20, false, 0, 0,
      "format: EXT-DIF-TYPE3-CRC64 needs interval=4096" },
    { "T10-DIF-TYPE1-CRC", 512, UINT64_C (1) << 63, false, 0, 0,
      "size: " },
    { "none", 512, 1 << 20, true, 0x12, 0xffff, "app-tag: " },
    { "T10-DIF-TYPE1-CRC", 512, 1 << 20, true, 0xffff, 0xffff,
      "app-tag: " },
    { "T10-DIF-TYPE1-CRC", 512, 1 << 20, true, 0x12, 0, "app-tag: " },
  };
  size_t k;

  for (k = 0; k < sizeof bad / sizeof bad[0]; k++) {
    struct disk_config cfg;
    base_config (&cfg, bad[k].format, 512, 1);
    cfg.interval = bad[k].interval;
    cfg.size = bad[k].size;
    cfg.has_app = bad[k].has_app;
    cfg.app_tag = bad[k].tag;
    cfg.app_mask = bad[k].mask;
    errors_reset ();
    ck_assert_int_eq (disk_config_check (&cfg), -1);
    ck_assert_int_eq (nr_errors, 1);
    ck_assert_msg (strncmp (last_error, bad[k].want,
                            strlen (bad[k].want)) == 0,
                   "case %zu: \"%s\" does not start with \"%s\"",
                   k, last_error, bad[k].want);
    errors_reset ();
    ck_assert_ptr_null (disk_open (&cfg));
    ck_assert_int_eq (nr_errors, 1);
  }

  /* Every case of the table is a valid configuration. */
  for (k = 0; k < (size_t) NR_CASES; k++) {
    struct disk_config cfg;
    base_config (&cfg, cases[k].format, cases[k].interval, 8);
    errors_reset ();
    ck_assert_int_eq (disk_config_check (&cfg), 0);
    ck_assert_int_eq (nr_errors, 0);
  }
}
END_TEST

START_TEST (events_file_unwritable)
{
  struct disk_config cfg;

  base_config (&cfg, "T10-DIF-TYPE1-CRC", 512, 8);
  cfg.events_path = "/nonexistent-dir/events.jsonl";
  errors_reset ();
  ck_assert_ptr_null (disk_open (&cfg));
  expect_one_error ("events=/nonexistent-dir/events.jsonl", NULL);
}
END_TEST

/* Whatever allocation of disk_open fails, it says so once, naming
 * what it could not have: the event ring among them (not blamed on an
 * events file, none is set). */
START_TEST (open_without_memory)
{
  struct disk_config cfg;
  struct disk *d = NULL;
  bool ring = false;
  int k;

  base_config (&cfg, "T10-DIF-TYPE1-CRC", 512, 8);
  for (k = 0; k < 100 && d == NULL; k++) {
    errors_reset ();
    alloc_left = k;
    d = disk_open (&cfg);
    alloc_left = -1;
    if (d != NULL)
      break;
    ck_assert_msg (nr_errors == 1, "allocation %d: %d errors (last: %s)",
                   k, nr_errors, last_error);
    ck_assert_msg (strstr (last_error, "events=") == NULL,
                   "allocation %d blamed on an events file: %s", k,
                   last_error);
    ring = ring || strstr (last_error, "the ring of the last 1024 events: "
                           "Cannot allocate memory") != NULL;
  }
  ck_assert_ptr_nonnull (d);
  ck_assert_msg (ring, "no failure named the event ring");
  disk_close (d);
}
END_TEST

/* ---- events and JSON ---- */

/* A JSON string field of O. */
static const char *
jstr (json_t *o, const char *key)
{
  json_t *v = json_object_get (o, key);
  ck_assert_msg (json_is_string (v), "%s is not a string", key);
  return json_string_value (v);
}

static json_int_t
jint (json_t *o, const char *key)
{
  json_t *v = json_object_get (o, key);
  ck_assert_msg (json_is_integer (v), "%s is not an integer", key);
  return json_integer_value (v);
}

START_TEST (events_file_json_lines)
{
  char dir[256], path[300];
  struct disk_config cfg;
  struct disk *d;
  uint8_t *ext;
  struct pi_tuple t;
  struct stats_event ev[4];
  FILE *fp;
  char line[1024];
  int nlines = 0;

  make_dir (dir, sizeof dir);
  snprintf (path, sizeof path, "%s/events", dir);
  base_config (&cfg, "EXT-DIF-TYPE1-CRC64", 4096, 16);
  cfg.events_path = path;
  cfg.event_ring = 2;
  d = open_config (&cfg);

  /* Three failing blocks: the 64-bit guards must survive JSON. */
  ext = make_ext (d, 4, 3, 140);
  get_tuple (d, tuple_at (d, ext, 0), &t);
  t.guard = ~t.guard;
  put_tuple (d, tuple_at (d, ext, 0), &t);
  get_tuple (d, tuple_at (d, ext, 1), &t);
  t.ref = 0xabcdef;
  put_tuple (d, tuple_at (d, ext, 1), &t);
  get_tuple (d, tuple_at (d, ext, 2), &t);
  t.guard ^= UINT64_C (0x8000000000000000);
  put_tuple (d, tuple_at (d, ext, 2), &t);
  errors_reset ();
  ck_assert_int_eq (disk_pwrite (d, &io_dif, ext, 3 * EXT (d), 4 * EXT (d),
                                 false), -1);
  expect_one_error ("LBA 4", "3 of 3", NULL);

  /* The ring keeps the last two. */
  ck_assert_uint_eq (stats_events_since (&d->stats, 0, ev, 4), 2);
  ck_assert_uint_eq (ev[0].seq, 2);
  ck_assert_uint_eq (ev[1].seq, 3);
  ck_assert_uint_eq (stats_events_since (&d->stats, 2, ev + 2, 2), 1);
  ck_assert_uint_eq (ev[2].seq, 3);

  /* The file has all three, one JSON object a line. */
  fp = fopen (path, "r");
  ck_assert_ptr_nonnull (fp);
  while (fgets (line, sizeof line, fp)) {
    json_error_t jerr;
    json_t *o = json_loads (line, 0, &jerr);
    const char *when;
    uint64_t lba = 4 + nlines;
    struct pi_tuple want;

    ck_assert_msg (o != NULL, "line %d: %s", nlines + 1, jerr.text);
    ck_assert (line[strlen (line) - 1] == '\n');
    ck_assert_int_eq (jint (o, "seq"), nlines + 1);
    when = jstr (o, "time");
    /* 2024-05-01T12:34:56.123456Z */
    ck_assert_uint_eq (strlen (when), 27);
    ck_assert (when[4] == '-' && when[10] == 'T' && when[19] == '.' &&
               when[26] == 'Z');
    ck_assert_int_eq (jint (o, "conn"), io_dif.conn);
    ck_assert_str_eq (jstr (o, "view"), "dif");
    ck_assert_str_eq (jstr (o, "op"), "write");
    ck_assert_int_eq (jint (o, "lba"), lba);
    ck_assert_str_eq (jstr (o, "check"), nlines == 1 ? "ref" : "guard");
    ck_assert_int_eq (jint (o, "offset"), 4 * EXT (d));
    ck_assert_int_eq (jint (o, "length"), 3 * EXT (d));
    get_tuple (d, tuple_at (d, ext, nlines), &want);
    {
      char hex[32];
      if (nlines == 1) {
        snprintf (hex, sizeof hex, "0x%" PRIx64, lba);
        ck_assert_str_eq (jstr (o, "expected"), hex);
        ck_assert_str_eq (jstr (o, "actual"), "0xabcdef");
      }
      else {
        snprintf (hex, sizeof hex, "0x%" PRIx64, want.guard);
        ck_assert_str_eq (jstr (o, "actual"), hex);
        ck_assert_uint_eq (strtoull (jstr (o, "expected"), NULL, 16),
                           pi_guard_compute (d->pi.format,
                                             tuple_at (d, ext, nlines)
                                             - IV (d), IV (d)));
      }
    }
    json_decref (o);
    nlines++;
  }
  fclose (fp);
  ck_assert_int_eq (nlines, 3);

  /* Reset: counters zero, events forgotten, sequence numbers go on. */
  stats_reset (&d->stats);
  ck_assert_uint_eq (stats_events_since (&d->stats, 0, ev, 4), 0);
  {
    struct stats_snapshot s;
    snap (d, &s);
    ck_assert_uint_eq (s.writes_rejected, 0);
    ck_assert_uint_eq (s.write_errors[PI_CHECK_GUARD], 0);
    ck_assert_uint_eq (s.requests[PROFILE_VIEW_DIF][STATS_OP_WRITE], 0);
  }
  errors_reset ();
  ck_assert_int_eq (disk_pwrite (d, &io_dif, ext, EXT (d), 4 * EXT (d),
                                 false), -1);
  errors_reset ();
  ck_assert_uint_eq (stats_events_since (&d->stats, 0, ev, 4), 1);
  ck_assert_uint_eq (ev[0].seq, 4);

  disk_close (d);
  free (ext);
  unlink (path);
  rmdir (dir);
}
END_TEST

START_TEST (snapshot_json_shape)
{
  struct disk *d = open_case_app (0, 16, 0x10, 0xffff);
  uint8_t *ext = make_ext (d, 0, 2, 150), buf[1024];
  struct pi_tuple t;
  struct stats_snapshot s;
  json_t *j, *v;

  fill (buf, sizeof buf, 151);
  must_write (d, &io_dif, ext, 0, 2 * EXT (d));
  must_write (d, &io_data, buf, 3, 100);
  get_tuple (d, tuple_at (d, ext, 1), &t);
  t.app = 0x11;
  put_tuple (d, tuple_at (d, ext, 1), &t);
  ck_assert_int_eq (disk_pwrite (d, &io_dif, ext, 2 * EXT (d), 0, false), -1);
  ck_assert_int_eq (disk_inject (d, DISK_INJECT_REF, 0), 0);
  ck_assert_int_eq (disk_pread (d, &io_data, buf, 512, 0), -1);
  errors_reset ();

  snap (d, &s);
  j = stats_snapshot_json (&s);
  ck_assert_ptr_nonnull (j);
  v = json_object_get (json_object_get (j, "requests"), "dif");
  ck_assert_int_eq (json_integer_value (json_object_get (v, "write")), 2);
  v = json_object_get (json_object_get (j, "requests"), "data");
  ck_assert_int_eq (json_integer_value (json_object_get (v, "write")), 1);
  ck_assert_int_eq (json_integer_value (json_object_get (v, "read")), 1);
  ck_assert (json_is_integer (json_object_get (v, "trim")));
  ck_assert (json_is_integer (json_object_get (v, "zero")));
  ck_assert (json_is_integer (json_object_get (v, "flush")));
  v = json_object_get (json_object_get (j, "bytes"), "data");
  ck_assert_int_eq (json_integer_value (json_object_get (v, "write")), 100);
  v = json_object_get (j, "blocks");
  ck_assert_int_eq (json_integer_value (json_object_get (v, "verified")),
                    s.blocks_verified);
  ck_assert_int_eq (json_integer_value (json_object_get (v, "generated")), 1);
  ck_assert_int_eq (json_integer_value (json_object_get (v, "escaped")), 0);
  v = json_object_get (j, "write_errors");
  ck_assert_int_eq (json_integer_value (json_object_get (v, "app")), 1);
  ck_assert_int_eq (json_integer_value (json_object_get (v, "guard")), 0);
  v = json_object_get (j, "read_errors");
  ck_assert_int_eq (json_integer_value (json_object_get (v, "ref")), 1);
  ck_assert_int_eq (json_integer_value (json_object_get (j,
                                                         "writes_rejected")),
                    1);
  ck_assert_int_eq (json_integer_value (json_object_get (j, "reads_failed")),
                    1);
  ck_assert_int_eq (json_integer_value (json_object_get (j, "injections")),
                    1);
  json_decref (j);
  free (ext);
  disk_close (d);
}
END_TEST

/* ---- concurrency ---- */

/* Threads hammer an overlapping region through both views; reads in the
 * middle of it must never see data and PI disagree, and a full scan at
 * the end must verify. */
#define CONC_THREADS 4
#define CONC_ITERS 600
#define CONC_BLOCKS 24

struct conc {
  struct disk *d;
  unsigned seed;
  unsigned failures;            /* requests that failed */
  char why[256];                /* the first of them */
};

static void
conc_fail (struct conc *c, const char *what)
{
  if (c->failures++ == 0)
    snprintf (c->why, sizeof c->why, "%s (errno %d)", what, errno);
}

static void *
conc_run (void *arg)
{
  struct conc *c = arg;
  struct disk *d = c->d;
  const uint64_t iv = IV (d), region = CONC_BLOCKS * iv;
  uint8_t *buf = xmalloc (4 * EXT (d));
  int i;

  for (i = 0; i < CONC_ITERS; i++) {
    unsigned op = rand_r (&c->seed) % 6;
    uint64_t off = rand_r (&c->seed) % region;
    uint64_t len = 1 + rand_r (&c->seed) % (3 * iv);
    uint64_t lba = rand_r (&c->seed) % (CONC_BLOCKS - 4);
    uint64_t n = 1 + rand_r (&c->seed) % 4;
    struct pi_verify_stats vs = { 0 };

    if (off + len > region)
      len = region - off;
    switch (op) {
    case 0:                     /* unaligned data write */
      fill (buf, len, c->seed);
      if (disk_pwrite (d, &io_data, buf, len, off, false) == -1)
        conc_fail (c, "data write");
      break;
    case 1: {                   /* dif write with valid PI */
      uint8_t *ext = make_ext (d, lba, n, c->seed);
      if (disk_pwrite (d, &io_dif, ext, n * EXT (d), lba * EXT (d),
                       false) == -1)
        conc_fail (c, "dif write");
      free (ext);
      break;
    }
    case 2:                     /* data read, verified by the device */
      if (disk_pread (d, &io_data, buf, len, off) == -1)
        conc_fail (c, "data read");
      break;
    case 3:                     /* dif read, verified here */
      if (disk_pread (d, &io_dif, buf, n * EXT (d), lba * EXT (d)) == -1)
        conc_fail (c, "dif read");
      else if (HAS_PI (d) &&
               pi_verify_ext (&d->pi, buf, n, lba, &vs, NULL, NULL) != 0)
        conc_fail (c, "dif read: torn block");
      break;
    case 4:                     /* unaligned zero */
      if (disk_zero (d, &io_data, len, off, false) == -1)
        conc_fail (c, "data zero");
      break;
    case 5:                     /* trim through dif */
      if (disk_trim (d, &io_dif, n * EXT (d), lba * EXT (d), false) == -1)
        conc_fail (c, "dif trim");
      break;
    }
  }
  free (buf);
  return NULL;
}

START_TEST (concurrent_both_views)
{
  struct disk *d = open_case (_i, CONC_BLOCKS + 8);
  struct conc c[CONC_THREADS];
  pthread_t th[CONC_THREADS];
  struct stats_snapshot s;
  uint8_t *all;
  int i;

  for (i = 0; i < CONC_THREADS; i++) {
    c[i].d = d;
    c[i].seed = 1000 + i * 77 + _i;
    c[i].failures = 0;
    c[i].why[0] = '\0';
    ck_assert_int_eq (pthread_create (&th[i], NULL, conc_run, &c[i]), 0);
  }
  for (i = 0; i < CONC_THREADS; i++)
    pthread_join (th[i], NULL);
  for (i = 0; i < CONC_THREADS; i++)
    ck_assert_msg (c[i].failures == 0, "thread %d: %u failures, first: %s;"
                   " %s", i, c[i].failures, c[i].why, last_error);

  /* A full verify scan. */
  all = must_read (d, &io_data, 0, disk_view_size (d, PROFILE_VIEW_DATA));
  free (all);
  all = must_read (d, &io_dif, 0, disk_view_size (d, PROFILE_VIEW_DIF));
  if (HAS_PI (d))
    ck_assert_uint_eq (pi_verify_ext (&d->pi, all, d->nblocks, 0, NULL,
                                      NULL, NULL), 0);
  free (all);
  snap (d, &s);
  for (i = 1; i < 4; i++) {
    ck_assert_uint_eq (s.read_errors[i], 0);
    ck_assert_uint_eq (s.write_errors[i], 0);
  }
  ck_assert_uint_eq (s.reads_failed, 0);
  ck_assert_uint_eq (s.writes_rejected, 0);
  ck_assert_int_eq (nr_errors, 0);
  disk_close (d);
}
END_TEST

static Suite *
server_suite (void)
{
  Suite *s = suite_create ("server");
  TCase *tc;

  tc = tcase_create ("views");
  tcase_add_loop_test (tc, geometry_and_profile, 0, NR_CASES);
  tcase_add_test (tc, profile_with_app_tag);
  tcase_add_loop_test (tc, data_write_inserts_pi, 0, NR_CASES);
  tcase_add_test (tc, data_write_hand_built_tuple);
  tcase_add_loop_test (tc, dif_write_roundtrip, 0, NR_CASES);
  tcase_add_loop_test (tc, dif_rejects_bad_guard, 0, NR_PI_CASES);
  tcase_add_loop_test (tc, dif_rejects_on_file_store, 0, NR_PI_CASES);
  tcase_add_loop_test (tc, write_without_memory_stores_nothing, 0,
                       NR_PI_CASES);
  tcase_add_loop_test (tc, write_middle_without_memory_stores_nothing, 0,
                       NR_CASES);
  tcase_add_loop_test (tc, zero_without_memory_stores_nothing, 0, NR_CASES);
  tcase_add_loop_test (tc, dif_rejects_bad_ref, 0, 5);
  tcase_add_loop_test (tc, dif_rejects_bad_app, 0, NR_PI_CASES);
  tcase_add_loop_test (tc, app_tag_mask, 0, NR_PI_CASES);
  tcase_add_loop_test (tc, escape_accepted, 0, NR_PI_CASES);
  tcase_add_loop_test (tc, type3_ref_unchecked, 0, 3);
  tcase_add_loop_test (tc, alignment_and_range, 0, NR_CASES);
  tcase_add_loop_test (tc, rmw_partial_writes, 0, NR_CASES);
  tcase_add_loop_test (tc, rmw_corrupt_stored_block, 0, NR_PI_CASES);
  tcase_add_loop_test (tc, data_read_checks_in_order, 0, NR_PI_CASES);
  tcase_add_loop_test (tc, data_write_same_on_both_stores, 0, NR_PI_CASES);
  tcase_add_loop_test (tc, zero_and_trim, 0, NR_CASES);
  tcase_add_loop_test (tc, format_none_views, 0, 2);
  tcase_add_test (tc, extents);
  tcase_add_test (tc, flush_counted);
  suite_add_tcase (s, tc);

  tc = tcase_create ("durability");
  tcase_add_loop_test (tc, flush_syncs_both_files, 0, NR_CASES);
  tcase_add_loop_test (tc, fua_durable_when_done, 0, 2 * NR_FUA_REQS);
  tcase_add_loop_test (tc, fua_sync_failure, 0, NR_PI_CASES);
  tcase_add_loop_test (tc, data_read_last_block_corrupt, 0, NR_PI_CASES);
  suite_add_tcase (s, tc);

  tc = tcase_create ("inject");
  tcase_add_loop_test (tc, inject_faults, 0, NR_PI_CASES);
  tcase_add_loop_test (tc, inject_app, 0, NR_PI_CASES);
  tcase_add_test (tc, inject_format_none);
  suite_add_tcase (s, tc);

  tc = tcase_create ("config");
  tcase_add_test (tc, config_errors);
  tcase_add_test (tc, events_file_unwritable);
  tcase_add_test (tc, open_without_memory);
  tcase_add_test (tc, read_only_file_store);
  suite_add_tcase (s, tc);

  tc = tcase_create ("stats");
  tcase_add_test (tc, events_file_json_lines);
  tcase_add_test (tc, snapshot_json_shape);
  suite_add_tcase (s, tc);

  tc = tcase_create ("concurrency");
  tcase_add_loop_test (tc, concurrent_both_views, 0, NR_PI_CASES);
  suite_add_tcase (s, tc);
  return s;
}

int
main (void)
{
  SRunner *sr = srunner_create (server_suite ());
  int failed;

  test_tmpdir_enter ("test-server");
  srunner_run_all (sr, CK_NORMAL);
  failed = srunner_ntests_failed (sr);
  srunner_free (sr);
  test_tmpdir_leave ();
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
