/* SPDX-License-Identifier: BSD-3-Clause */
/* stabledif: unit tests of the file store (server/store-file.c) and its
 * geometry header (server/store-file-hdr.c).
 *
 * Every test works in a fresh directory under $TMPDIR (default /tmp) and
 * looks at the files themselves as well as through the store: PATH must be
 * a raw image, PATH.pi must hold the header and the inverted tuples, holes
 * must stay holes.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <check.h>

#include "pi.h"
#include "ro-path.h"
#include "store.h"
#include "store-file-hdr.h"
#include "test-store-file-util.h"
#include "test-tmpdir.h"

/* The open must have failed with exactly one error containing every
 * string in the NULL-terminated list. */
static void
expect_refused (struct store *s, ...)
{
  va_list ap;
  const char *want;

  ck_assert_msg (s == NULL, "open succeeded, expected a refusal");
  ck_assert_int_eq (nerrors, 1);
  va_start (ap, s);
  while ((want = va_arg (ap, const char *)) != NULL)
    ck_assert_msg (strstr (last_error, want) != NULL,
                   "error \"%s\" does not mention \"%s\"", last_error, want);
  va_end (ap);
}

/* ---- fixtures: a private directory per test ---- */

static void
make_dir (void)
{
  store_dir_make ("test-store-file");
}

static void
remove_dir (void)
{
  ro_path_undo ();              /* if a test stopped half-way */
  store_dir_remove ();
}

static struct store_geometry
geom (const char *format, uint32_t interval, uint64_t nblocks)
{
  struct store_geometry g = {
    .nblocks = nblocks,
    .interval = interval,
    .format = strcmp (format, "none") == 0 ? pi_format_none ()
              : pi_format_lookup (format),
  };

  ck_assert_ptr_nonnull (g.format);
  return g;
}

static struct pi_params
params (const struct store_geometry *g)
{
  struct pi_params p = {
    .format = g->format, .interval = g->interval,
  };
  return p;
}

/* Deterministic data for block LBA, round SEED. */
static void
fill (uint8_t *buf, uint64_t nblocks, uint32_t interval, uint64_t lba,
      unsigned seed)
{
  for (uint64_t i = 0; i < nblocks * interval; i++)
    buf[i] = (uint8_t) ((lba * interval + i) * 2654435761u + seed * 97u);
}

/* Write NBLOCKS blocks at LBA with data from fill() and generated PI. */
static void
write_blocks (struct store *s, uint64_t lba, uint64_t nblocks,
              unsigned seed, bool fua)
{
  struct pi_params p = params (&s->geom);
  uint8_t *data = calloc (1, nblocks * s->geom.interval);
  uint8_t *pi = calloc (1, nblocks * s->tuple + 1);

  ck_assert_ptr_nonnull (data);
  ck_assert_ptr_nonnull (pi);
  fill (data, nblocks, s->geom.interval, lba, seed);
  pi_generate_sep (&p, data, pi, nblocks, lba);
  ck_assert_int_eq (s->ops->write (s, lba, nblocks, data, pi, fua), 0);
  free (data);
  free (pi);
}

/* The blocks must read back as written by write_blocks(SEED); read
 * both with and without PI. */
static void
check_blocks (struct store *s, uint64_t lba, uint64_t nblocks, unsigned seed)
{
  struct pi_params p = params (&s->geom);
  size_t dlen = nblocks * s->geom.interval, plen = nblocks * s->tuple;
  uint8_t *want = calloc (1, dlen), *wantpi = calloc (1, plen + 1);
  uint8_t *data = calloc (1, dlen), *pi = calloc (1, plen + 1);

  ck_assert (want && wantpi && data && pi);
  fill (want, nblocks, s->geom.interval, lba, seed);
  pi_generate_sep (&p, want, wantpi, nblocks, lba);
  ck_assert_int_eq (s->ops->read (s, lba, nblocks, data, pi), 0);
  ck_assert_msg (memcmp (data, want, dlen) == 0, "data of LBA %" PRIu64
                 "+%" PRIu64 " differs", lba, nblocks);
  ck_assert_msg (memcmp (pi, wantpi, plen) == 0, "PI of LBA %" PRIu64
                 "+%" PRIu64 " differs", lba, nblocks);
  memset (data, 0, dlen);
  ck_assert_int_eq (s->ops->read (s, lba, nblocks, data, NULL), 0);
  ck_assert (memcmp (data, want, dlen) == 0);
  free (want);
  free (wantpi);
  free (data);
  free (pi);
}

/* The blocks must read as never written: zeros, all-ones PI. */
static void
check_unwritten (struct store *s, uint64_t lba, uint64_t nblocks)
{
  size_t dlen = nblocks * s->geom.interval, plen = nblocks * s->tuple;
  uint8_t *data = malloc (dlen), *pi = malloc (plen + 1);

  ck_assert (data && pi);
  memset (data, 0xaa, dlen);
  memset (pi, 0x55, plen);
  ck_assert_int_eq (s->ops->read (s, lba, nblocks, data, pi), 0);
  for (size_t i = 0; i < dlen; i++)
    ck_assert_msg (data[i] == 0, "LBA %" PRIu64 " byte %zu is %#x, not 0",
                   lba + i / s->geom.interval, i % s->geom.interval, data[i]);
  for (uint64_t b = 0; b < nblocks; b++) {
    uint8_t esc[PI_TUPLE_MAX];

    pi_tuple_set_escape (s->geom.format, esc);
    ck_assert_msg (memcmp (pi + b * s->tuple, esc, s->tuple) == 0,
                   "PI of LBA %" PRIu64 " is not all-ones", lba + b);
    ck_assert (pi_tuple_escaped (s->geom.format, pi + b * s->tuple)
               || s->tuple == 0);
  }
  free (data);
  free (pi);
}

static struct stat
stat_of (const char *p)
{
  struct stat st;

  ck_assert_msg (stat (p, &st) == 0, "stat %s: %s", p, strerror (errno));
  return st;
}

static bool
exists (const char *p)
{
  return access (p, F_OK) == 0;
}

/* ---- reading files whole ---- */

/* The whole of file P (LEN bytes expected), for comparisons. */
static uint8_t *
slurp (const char *p, size_t len)
{
  uint8_t *buf = malloc (len);

  ck_assert_ptr_nonnull (buf);
  ck_assert_int_eq (stat_of (p).st_size, (off_t) len);
  raw_read (p, buf, len, 0);
  return buf;
}

/* ---- the header ---- */

START_TEST (test_hdr_roundtrip)
{
  struct store_geometry g = geom ("EXT-DIF-TYPE1-CRC64", 4096, 1000);
  struct store_file_hdr h, back;
  char buf[STORE_FILE_HDR_SIZE], err[200], what[64];

  store_file_hdr_from_geometry (&g, &h);
  ck_assert_str_eq (h.format, "EXT-DIF-TYPE1-CRC64");
  ck_assert_uint_eq (h.tuple, 16);
  ck_assert_uint_eq (h.size, 4096000);
  ck_assert_int_eq (store_file_hdr_format (&h, buf, sizeof buf), 0);
  ck_assert (strncmp (buf, STORE_FILE_HDR_MAGIC "\n", 15) == 0);
  ck_assert_ptr_nonnull (strstr (buf, "\nsize=4096000\n"));
  ck_assert_int_eq (buf[sizeof buf - 1], 0);
  ck_assert_int_eq (store_file_hdr_parse (buf, sizeof buf, &back,
                                          err, sizeof err), 0);
  ck_assert_int_eq (store_file_hdr_diff (&back, &h, what, sizeof what), 0);
  ck_assert_str_eq (what, "");
  /* Too small a buffer is refused, not truncated. */
  ck_assert_int_eq (store_file_hdr_format (&h, buf, 40), -1);
}
END_TEST

START_TEST (test_hdr_parse_errors)
{
  struct store_file_hdr h;
  char err[200];
  static const struct { const char *text, *want; } cases[] = {
    { "", "does not start with" },
    { "stabledif-pi/2\nformat=x\n", "does not start with" },
    { "stabledif-pi/1\nformat=T10-DIF-TYPE1-CRC\ninterval=512\n"
      "tuple=8\nsize=1024\ntuples-at=4096\n", "encoding= is missing" },
    { "stabledif-pi/1\nformat=T10-DIF-TYPE1-CRC\ninterval=5x2\n",
      "interval=5x2" },
    { "stabledif-pi/1\nformat=T10-DIF-TYPE1-CRC\ninterval=512\n"
      "tuple=8\nsize=1000\ntuples-at=4096\nencoding=inverted\n",
      "not a multiple" },
    { "stabledif-pi/1\nformat=T10-DIF-TYPE1-CRC\ninterval=512\n"
      "tuple=8\nsize=1024\ntuples-at=8192\nencoding=inverted\n",
      "tuples-at=8192" },
    { "stabledif-pi/1\nformat=T10-DIF-TYPE1-CRC\ninterval=512\n"
      "tuple=8\nsize=1024\ntuples-at=4096\nencoding=plain\n",
      "encoding=plain" },
    { "stabledif-pi/1\nformat=T10-DIF-TYPE1-CRC\ninterval=512",
      "not terminated" },
    { "stabledif-pi/1\njunk\n", "not key=value" },
  };

  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    err[0] = '\0';
    ck_assert_int_eq (store_file_hdr_parse (cases[i].text,
                                            strlen (cases[i].text),
                                            &h, err, sizeof err), -1);
    ck_assert_msg (strstr (err, cases[i].want) != NULL,
                   "case %zu: \"%s\" does not mention \"%s\"", i, err,
                   cases[i].want);
  }

  /* Unknown keys are ignored (a later version may add some). */
  const char *ok = "stabledif-pi/1\nformat=none\ninterval=4096\ntuple=0\n"
    "size=8192\ntuples-at=4096\nencoding=inverted\ncreated-by=future\n";
  ck_assert_int_eq (store_file_hdr_parse (ok, strlen (ok), &h, err,
                                          sizeof err), 0);
  ck_assert_str_eq (h.format, "none");
  ck_assert_uint_eq (h.size, 8192);
}
END_TEST

START_TEST (test_hdr_diff_and_sizes)
{
  struct store_file_hdr a = { "T10-DIF-TYPE1-CRC", 512, 8, 1 << 30 };
  struct store_file_hdr b = { "T10-DIF-TYPE3-CRC", 4096, 8, 2u << 30 };
  char what[64], desc[128], s[STORE_FILE_SIZE_STR_MAX];

  ck_assert_int_eq (store_file_hdr_diff (&a, &b, what, sizeof what), 1);
  ck_assert_str_eq (what, "size, format, interval");
  store_file_hdr_describe (&a, desc, sizeof desc);
  ck_assert_str_eq (desc, "size=1G format=T10-DIF-TYPE1-CRC interval=512");

  store_file_hdr_size_str (UINT64_C (16) << 40, s);
  ck_assert_str_eq (s, "16T");
  store_file_hdr_size_str (1536 * 1024, s);
  ck_assert_str_eq (s, "1536K");
  store_file_hdr_size_str (1000, s);
  ck_assert_str_eq (s, "1000");
  store_file_hdr_size_str (0, s);
  ck_assert_str_eq (s, "0");
  store_file_hdr_size_str (UINT64_C (3) << 60, s);
  ck_assert_str_eq (s, "3E");
}
END_TEST

/* ---- the store ---- */

START_TEST (test_create)
{
  struct store_geometry g = geom ("T10-DIF-TYPE1-CRC", 512, 2048);
  struct store *s = store_file_open (&g, path, capture_error);
  char hdr[STORE_FILE_HDR_SIZE];
  struct store_file_hdr h;
  char err[200];

  ck_assert_ptr_nonnull (s);
  ck_assert_int_eq (nerrors, 0);
  ck_assert_str_eq (s->ops->name, "file");
  ck_assert_uint_eq (s->tuple, 8);
  ck_assert_uint_ge (s->granule, 1);
  ck_assert (s->multi_conn);

  /* Both files, at full size, sparse. */
  ck_assert_int_eq (stat_of (path).st_size, 2048 * 512);
  ck_assert_int_eq (stat_of (path).st_blocks, 0);
  ck_assert_int_eq (stat_of (pi_path).st_size,
                    STORE_FILE_HDR_SIZE + 2048 * 8);
  ck_assert_int_le (stat_of (pi_path).st_blocks, 8 * 2);
  {
    char tmp[320];
    snprintf (tmp, sizeof tmp, "%s.tmp", pi_path);
    ck_assert (!exists (tmp));
  }

  /* The header on disk records the geometry. */
  raw_read (pi_path, hdr, sizeof hdr, 0);
  ck_assert_int_eq (store_file_hdr_parse (hdr, sizeof hdr, &h, err,
                                          sizeof err), 0);
  ck_assert_str_eq (h.format, "T10-DIF-TYPE1-CRC");
  ck_assert_uint_eq (h.interval, 512);
  ck_assert_uint_eq (h.size, 2048 * 512);

  check_unwritten (s, 0, 2048);
  s->ops->close (s);
  ck_assert_int_eq (nerrors, 0);
}
END_TEST

START_TEST (test_write_read)
{
  struct store_geometry g = geom ("T10-DIF-TYPE1-CRC", 512, 256);
  struct store *s = store_file_open (&g, path, capture_error);
  uint8_t raw[10 * 512], rawpi[10 * 8], data[10 * 512], pi[10 * 8];
  struct pi_params p = params (&g);

  ck_assert_ptr_nonnull (s);
  write_blocks (s, 100, 10, 1, false);
  check_blocks (s, 100, 10, 1);
  check_unwritten (s, 0, 100);
  check_unwritten (s, 110, 146);
  /* A read straddling written and unwritten blocks. */
  check_unwritten (s, 95, 5);
  check_blocks (s, 105, 5, 1);

  /* PATH is a raw image: block LBA at LBA * interval. */
  fill (data, 10, 512, 100, 1);
  pi_generate_sep (&p, data, pi, 10, 100);
  raw_read (path, raw, sizeof raw, 100 * 512);
  ck_assert (memcmp (raw, data, sizeof raw) == 0);
  /* PATH.pi holds the tuples inverted after the header. */
  raw_read (pi_path, rawpi, sizeof rawpi, STORE_FILE_HDR_SIZE + 100 * 8);
  for (size_t i = 0; i < sizeof rawpi; i++)
    ck_assert_uint_eq (rawpi[i], (uint8_t) ~pi[i]);

  /* Overwrite part of it; the rest stays. */
  write_blocks (s, 104, 2, 2, true);
  check_blocks (s, 100, 4, 1);
  check_blocks (s, 104, 2, 2);
  check_blocks (s, 106, 4, 1);

  /* The last block of the disk. */
  write_blocks (s, 255, 1, 3, false);
  check_blocks (s, 255, 1, 3);
  ck_assert_int_eq (s->ops->flush (s), 0);
  s->ops->close (s);
  ck_assert_int_eq (nerrors, 0);
}
END_TEST

START_TEST (test_zero)
{
  struct store_geometry g = geom ("EXT-DIF-TYPE1-CRC64", 4096, 256);
  struct store *s = store_file_open (&g, path, capture_error);
  blkcnt_t before, after;
  bool alloc;
  uint64_t run;

  ck_assert_ptr_nonnull (s);
  write_blocks (s, 0, 256, 7, false);
  ck_assert_int_eq (s->ops->flush (s), 0);
  before = stat_of (path).st_blocks;
  ck_assert_int_ge (before, 256 * 4096 / 512);

  ck_assert_int_eq (s->ops->zero (s, 64, 128, false), 0);
  check_blocks (s, 0, 64, 7);
  check_unwritten (s, 64, 128);
  check_blocks (s, 192, 64, 7);

  /* The data space was given back (a hole, not written zeros). */
  after = stat_of (path).st_blocks;
  ck_assert_msg (after <= before - 128 * 4096 / 512,
                 "st_blocks %jd -> %jd: zero did not punch a hole",
                 (intmax_t) before, (intmax_t) after);
  ck_assert_int_eq (s->ops->extent (s, 64, 192, &alloc, &run), 0);
  ck_assert (!alloc);
  ck_assert_uint_eq (run, 128);
  ck_assert_int_eq (s->ops->extent (s, 0, 256, &alloc, &run), 0);
  ck_assert (alloc);
  ck_assert_uint_eq (run, 64);

  /* Zero with FUA, a single block at the end, unaligned in PATH.pi. */
  ck_assert_int_eq (s->ops->zero (s, 255, 1, true), 0);
  check_unwritten (s, 255, 1);
  check_blocks (s, 192, 63, 7);

  /* Written again after a zero. */
  write_blocks (s, 100, 3, 8, false);
  check_blocks (s, 100, 3, 8);
  check_unwritten (s, 64, 36);
  check_unwritten (s, 103, 89);
  s->ops->close (s);
  ck_assert_int_eq (nerrors, 0);
}
END_TEST

START_TEST (test_extent)
{
  struct store_geometry g = geom ("T10-DIF-TYPE1-CRC", 4096, 1024);
  struct store *s = store_file_open (&g, path, capture_error);
  bool alloc;
  uint64_t run;
  int fd;

  ck_assert_ptr_nonnull (s);
  ck_assert_int_eq (s->ops->extent (s, 0, 1024, &alloc, &run), 0);
  ck_assert (!alloc);
  ck_assert_uint_eq (run, 1024);
  ck_assert_int_eq (s->ops->extent (s, 10, 5, &alloc, &run), 0);
  ck_assert (!alloc);
  ck_assert_uint_eq (run, 5);

  write_blocks (s, 100, 4, 1, false);
  ck_assert_int_eq (s->ops->extent (s, 0, 1024, &alloc, &run), 0);
  ck_assert (!alloc);
  ck_assert_uint_eq (run, 100);
  ck_assert_int_eq (s->ops->extent (s, 100, 924, &alloc, &run), 0);
  ck_assert (alloc);
  ck_assert_uint_eq (run, 4);
  ck_assert_int_eq (s->ops->extent (s, 101, 2, &alloc, &run), 0);
  ck_assert (alloc);
  ck_assert_uint_eq (run, 2);
  ck_assert_int_eq (s->ops->extent (s, 104, 920, &alloc, &run), 0);
  ck_assert (!alloc);
  ck_assert_uint_eq (run, 920);

  /* A block whose data is a hole but whose PI is not all-ones (here made
   * by punching PATH behind the store's back) is still allocated: it does
   * not read as zeros with all-ones PI.  Its neighbours, which share the
   * PI page, are not. */
  write_blocks (s, 500, 1, 2, false);
  fd = open (path, O_RDWR);
  ck_assert_int_ge (fd, 0);
  ck_assert_int_eq (fallocate (fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                               500 * 4096, 4096), 0);
  close (fd);
  ck_assert_int_eq (s->ops->extent (s, 499, 3, &alloc, &run), 0);
  ck_assert (!alloc);
  ck_assert_uint_eq (run, 1);
  ck_assert_int_eq (s->ops->extent (s, 500, 3, &alloc, &run), 0);
  ck_assert (alloc);
  ck_assert_uint_eq (run, 1);
  ck_assert_int_eq (s->ops->extent (s, 501, 523, &alloc, &run), 0);
  ck_assert (!alloc);
  ck_assert_uint_eq (run, 523);
  s->ops->close (s);
  ck_assert_int_eq (nerrors, 0);
}
END_TEST

START_TEST (test_extent_small_interval)
{
  /* With 512-byte blocks a filesystem block holds several: a block is
   * allocated when any byte of it is, never reported as a hole while it
   * holds data. */
  struct store_geometry g = geom ("T10-DIF-TYPE3-CRC", 512, 4096);
  struct store *s = store_file_open (&g, path, capture_error);
  bool alloc;
  uint64_t run;

  ck_assert_ptr_nonnull (s);
  write_blocks (s, 1001, 1, 1, false);
  ck_assert_int_eq (s->ops->extent (s, 1001, 1, &alloc, &run), 0);
  ck_assert (alloc);
  ck_assert_uint_eq (run, 1);
  ck_assert_int_eq (s->ops->extent (s, 0, 4096, &alloc, &run), 0);
  ck_assert (!alloc);
  ck_assert_uint_le (run, 1001);
  ck_assert_uint_ge (run, 1001 - 1001 % 64);
  ck_assert_int_eq (s->ops->extent (s, run, 4096 - run, &alloc, &run), 0);
  ck_assert (alloc);
  ck_assert_int_eq (s->ops->extent (s, 2048, 2048, &alloc, &run), 0);
  ck_assert (!alloc);
  ck_assert_uint_eq (run, 2048);
  s->ops->close (s);
}
END_TEST

START_TEST (test_reopen)
{
  struct store_geometry g = geom ("T10-DIF-TYPE2-CRC", 512, 512);
  struct store *s = store_file_open (&g, path, capture_error);

  ck_assert_ptr_nonnull (s);
  write_blocks (s, 3, 20, 4, false);
  ck_assert_int_eq (s->ops->zero (s, 10, 2, false), 0);
  s->ops->close (s);

  s = store_file_open (&g, path, capture_error);
  ck_assert_ptr_nonnull (s);
  check_unwritten (s, 0, 3);
  check_blocks (s, 3, 7, 4);
  check_unwritten (s, 10, 2);
  check_blocks (s, 12, 11, 4);
  check_unwritten (s, 23, 512 - 23);
  s->ops->close (s);
  ck_assert_int_eq (nerrors, 0);
}
END_TEST

START_TEST (test_reopen_mismatch)
{
  struct store_geometry g = geom ("T10-DIF-TYPE1-CRC", 512, 2048);
  struct store_geometry bad;
  struct store *s = store_file_open (&g, path, capture_error);
  struct stat st0, st1;

  ck_assert_ptr_nonnull (s);
  write_blocks (s, 7, 9, 5, false);
  s->ops->close (s);
  st0 = stat_of (pi_path);

  /* Size. */
  bad = geom ("T10-DIF-TYPE1-CRC", 512, 4096);
  reset_errors ();
  expect_refused (store_file_open (&bad, path, capture_error),
                  path, "existing geometry size=1M format=T10-DIF-TYPE1-CRC "
                  "interval=512", "does not match size=2M "
                  "format=T10-DIF-TYPE1-CRC interval=512", "(size differs)",
                  NULL);
  /* Format (same tuple size). */
  bad = geom ("T10-DIF-TYPE3-CRC", 512, 2048);
  reset_errors ();
  expect_refused (store_file_open (&bad, path, capture_error),
                  "format=T10-DIF-TYPE3-CRC", "(format differs)", NULL);
  /* Format with another tuple size and interval. */
  bad = geom ("EXT-DIF-TYPE1-CRC64", 4096, 256);
  reset_errors ();
  expect_refused (store_file_open (&bad, path, capture_error),
                  "(format, interval, tuple differ)", NULL);
  /* Interval, same size. */
  bad = geom ("T10-DIF-TYPE1-CRC", 4096, 256);
  reset_errors ();
  expect_refused (store_file_open (&bad, path, capture_error),
                  "interval=4096", "(interval differs)", NULL);
  /* Format none. */
  bad = geom ("none", 512, 2048);
  reset_errors ();
  expect_refused (store_file_open (&bad, path, capture_error),
                  "(format, tuple differ)", NULL);

  /* Nothing was touched: the right geometry still reads the data. */
  st1 = stat_of (pi_path);
  ck_assert_int_eq (st0.st_size, st1.st_size);
  ck_assert_int_eq (stat_of (path).st_size, 2048 * 512);
  reset_errors ();
  s = store_file_open (&g, path, capture_error);
  ck_assert_ptr_nonnull (s);
  check_blocks (s, 7, 9, 5);
  check_unwritten (s, 16, 100);
  s->ops->close (s);
}
END_TEST

START_TEST (test_damaged_files)
{
  struct store_geometry g = geom ("T10-DIF-TYPE1-CRC", 512, 64);
  struct store *s = store_file_open (&g, path, capture_error);
  char cmd[400];

  ck_assert_ptr_nonnull (s);
  s->ops->close (s);

  /* Data file truncated behind our back. */
  ck_assert_int_eq (truncate (path, 16 * 512), 0);
  expect_refused (store_file_open (&g, path, capture_error),
                  "the data file is 8192 bytes", "truncated or replaced",
                  NULL);
  ck_assert_int_eq (truncate (path, 64 * 512), 0);

  /* PI file truncated. */
  reset_errors ();
  ck_assert_int_eq (truncate (pi_path, STORE_FILE_HDR_SIZE), 0);
  expect_refused (store_file_open (&g, path, capture_error),
                  "disk.pi is 4096 bytes", NULL);
  ck_assert_int_eq (truncate (pi_path, STORE_FILE_HDR_SIZE + 64 * 8), 0);

  /* Header overwritten. */
  reset_errors ();
  raw_write (pi_path, "garbage\n", 8, 0);
  expect_refused (store_file_open (&g, path, capture_error),
                  "is not a usable PI file", "does not start with", NULL);

  /* PATH.pi without PATH: refused, and PATH is not created. */
  reset_errors ();
  ck_assert_int_eq (unlink (path), 0);
  expect_refused (store_file_open (&g, path, capture_error),
                  "exists but the data file", NULL);
  ck_assert (!exists (path));

  /* Not a regular file. */
  reset_errors ();
  snprintf (cmd, sizeof cmd, "%s/sub", dir);
  ck_assert_int_eq (mkdir (cmd, 0700), 0);
  expect_refused (store_file_open (&g, cmd, capture_error), cmd, NULL);
  reset_errors ();
  expect_refused (store_file_open (&g, "/dev/null", capture_error),
                  "file=/dev/null: not a regular file", NULL);

  /* A directory that does not exist. */
  reset_errors ();
  snprintf (cmd, sizeof cmd, "%s/nodir/disk", dir);
  expect_refused (store_file_open (&g, cmd, capture_error),
                  cmd, "No such file or directory", NULL);
}
END_TEST

START_TEST (test_adopt)
{
  struct store_geometry g = geom ("T10-DIF-TYPE1-CRC", 512, 128);
  uint8_t image[128 * 512], data[128 * 512];
  struct store *s;
  int fd;

  /* An existing raw image of the wrong size is refused, untouched. */
  for (size_t i = 0; i < sizeof image; i++)
    image[i] = (uint8_t) (i * 7 + 1);
  fd = open (path, O_WRONLY | O_CREAT | O_EXCL, 0644);
  ck_assert_int_ge (fd, 0);
  ck_assert_int_eq (write (fd, image, 100 * 512), 100 * 512);
  close (fd);
  expect_refused (store_file_open (&g, path, capture_error),
                  "exists (51200 bytes) without", "give size=50K", NULL);
  ck_assert (!exists (pi_path));
  ck_assert_int_eq (stat_of (path).st_size, 100 * 512);

  /* Of the right size it is adopted: the data reads back, every block
   * with all-ones PI (unchecked) until it is written. */
  fd = open (path, O_WRONLY);
  ck_assert_int_eq (pwrite (fd, image, sizeof image, 0),
                    (ssize_t) sizeof image);
  close (fd);
  reset_errors ();
  s = store_file_open (&g, path, capture_error);
  ck_assert_ptr_nonnull (s);
  ck_assert (exists (pi_path));
  uint8_t pi[128 * 8];
  ck_assert_int_eq (s->ops->read (s, 0, 128, data, pi), 0);
  ck_assert (memcmp (data, image, sizeof image) == 0);
  for (size_t i = 0; i < 128; i++)
    ck_assert (pi_tuple_escaped (g.format, pi + i * 8));
  write_blocks (s, 5, 1, 9, false);
  check_blocks (s, 5, 1, 9);
  s->ops->close (s);

  /* An empty PATH is simply a new disk. */
  ck_assert_int_eq (unlink (path), 0);
  ck_assert_int_eq (unlink (pi_path), 0);
  fd = open (path, O_WRONLY | O_CREAT | O_EXCL, 0644);
  close (fd);
  s = store_file_open (&g, path, capture_error);
  ck_assert_ptr_nonnull (s);
  check_unwritten (s, 0, 128);
  s->ops->close (s);
  ck_assert_int_eq (nerrors, 0);
}
END_TEST

START_TEST (test_lock)
{
  struct store_geometry g = geom ("T10-DIF-TYPE1-CRC", 512, 64);
  struct store *s = store_file_open (&g, path, capture_error);
  struct store *s2;

  ck_assert_ptr_nonnull (s);
  expect_refused (store_file_open (&g, path, capture_error),
                  "in use by another process", NULL);
  s->ops->close (s);
  reset_errors ();
  s2 = store_file_open (&g, path, capture_error);
  ck_assert_ptr_nonnull (s2);
  s2->ops->close (s2);
}
END_TEST

/* Files that cannot be opened for writing are served read-only, with
 * their data and PI, and stay exactly as they were; a read-only image
 * without PATH.pi and a new disk in a read-only directory are refused
 * with the reason. */
START_TEST (test_read_only)
{
  struct store_geometry g = geom ("T10-DIF-TYPE1-CRC", 512, 64);
  const size_t dlen = 64 * 512, plen = STORE_FILE_HDR_SIZE + 64 * 8;
  char raw[320], raw_pi[330], fresh[320];
  uint8_t *data0, *pi0, *data1, *pi1;
  struct store *s, *s2;
  bool allocated;
  uint64_t run;
  int fd, err;

  s = store_file_open (&g, path, capture_error);
  ck_assert_ptr_nonnull (s);
  ck_assert (!s->read_only);
  write_blocks (s, 3, 5, 11, false);
  s->ops->close (s);
  snprintf (raw, sizeof raw, "%s/raw", dir);
  snprintf (raw_pi, sizeof raw_pi, "%s.pi", raw);
  snprintf (fresh, sizeof fresh, "%s/fresh", dir);
  fd = open (raw, O_WRONLY | O_CREAT | O_EXCL, 0644);
  ck_assert_int_ge (fd, 0);
  ck_assert_int_eq (ftruncate (fd, dlen), 0);
  close (fd);
  data0 = slurp (path, dlen);
  pi0 = slurp (pi_path, plen);

  /* Only PATH.pi unwritable: the store is read-only as a whole (both
   * files are written, or neither). */
  err = ro_path_make (pi_path);
  if (err == 0) {
    fprintf (stderr, "test_read_only: SKIPPED: cannot make %s read-only "
             "(root without a private mount namespace)\n", pi_path);
    free (data0);
    free (pi0);
    return;
  }
  s = store_file_open (&g, path, capture_error);
  ck_assert_msg (s != NULL, "open with a read-only PATH.pi failed: %s",
                 last_error);
  ck_assert_int_eq (nerrors, 0);
  ck_assert (s->read_only);
  check_blocks (s, 3, 5, 11);
  ck_assert_int_eq (s->ops->flush (s), 0);
  s->ops->close (s);
  ro_path_undo ();

  /* The whole directory unwritable. */
  err = ro_path_make (dir);
  ck_assert_int_ne (err, 0);

  s = store_file_open (&g, path, capture_error);
  ck_assert_msg (s != NULL, "read-only open failed: %s", last_error);
  ck_assert_int_eq (nerrors, 0);
  ck_assert (s->read_only);
  check_unwritten (s, 0, 3);
  check_blocks (s, 3, 5, 11);
  check_unwritten (s, 8, 56);
  ck_assert_int_eq (s->ops->extent (s, 0, 64, &allocated, &run), 0);
  ck_assert_int_eq (s->ops->flush (s), 0);
  /* Read-only servers share the files. */
  s2 = store_file_open (&g, path, capture_error);
  ck_assert_ptr_nonnull (s2);
  ck_assert (s2->read_only);
  check_blocks (s2, 3, 5, 11);
  s2->ops->close (s2);
  s->ops->close (s);
  ck_assert_int_eq (nerrors, 0);

  /* An image without PATH.pi cannot be adopted read-only. */
  expect_refused (store_file_open (&g, raw, capture_error),
                  "cannot be opened for writing", "raw.pi", NULL);
  ck_assert (!exists (raw_pi));
  /* Nor can a new disk be made in a read-only directory. */
  reset_errors ();
  expect_refused (store_file_open (&g, fresh, capture_error),
                  "fresh", strerror (err), NULL);
  ck_assert (!exists (fresh));

  /* Nothing changed. */
  data1 = slurp (path, dlen);
  pi1 = slurp (pi_path, plen);
  ck_assert (memcmp (data0, data1, dlen) == 0);
  ck_assert (memcmp (pi0, pi1, plen) == 0);
  ro_path_undo ();
  free (data0);
  free (pi0);
  free (data1);
  free (pi1);
}
END_TEST

START_TEST (test_format_none)
{
  struct store_geometry g = geom ("none", 4096, 64);
  struct store *s = store_file_open (&g, path, capture_error);
  bool alloc;
  uint64_t run;

  ck_assert_ptr_nonnull (s);
  ck_assert_uint_eq (s->tuple, 0);
  ck_assert_int_eq (stat_of (pi_path).st_size, STORE_FILE_HDR_SIZE);
  write_blocks (s, 8, 4, 3, true);
  check_blocks (s, 8, 4, 3);
  check_unwritten (s, 0, 8);
  ck_assert_int_eq (s->ops->zero (s, 9, 2, false), 0);
  check_unwritten (s, 9, 2);
  check_blocks (s, 8, 1, 3);
  check_blocks (s, 11, 1, 3);
  ck_assert_int_eq (s->ops->extent (s, 12, 52, &alloc, &run), 0);
  ck_assert (!alloc);
  ck_assert_uint_eq (run, 52);
  ck_assert_int_eq (s->ops->flush (s), 0);
  s->ops->close (s);

  s = store_file_open (&g, path, capture_error);
  ck_assert_ptr_nonnull (s);
  check_blocks (s, 11, 1, 3);
  s->ops->close (s);
  ck_assert_int_eq (nerrors, 0);
}
END_TEST

/* Create a 16 TiB device in DIR_ (interval INTERVAL) and check it costs
 * almost nothing on disk, even after writing at both ends.  Returns false
 * if the filesystem cannot hold a 16 TiB file (after checking the error
 * says so and nothing was left behind). */
static bool
try_16t (const char *dir_, uint32_t interval)
{
  uint64_t nblocks = (UINT64_C (16) << 40) / interval;
  struct store_geometry g = geom ("T10-DIF-TYPE1-CRC", interval, nblocks);
  char p[300], ppi[310];
  struct store *s;
  struct stat st, stpi;

  snprintf (p, sizeof p, "%s/big%" PRIu32, dir_, interval);
  snprintf (ppi, sizeof ppi, "%s.pi", p);
  reset_errors ();
  s = store_file_open (&g, p, capture_error);
  if (s == NULL) {
    ck_assert_int_eq (nerrors, 1);
    ck_assert_msg (strstr (last_error, "largest file") != NULL,
                   "unexpected error: %s", last_error);
    ck_assert (!exists (p));
    ck_assert (!exists (ppi));
    return false;
  }
  write_blocks (s, 0, 1, 1, false);
  write_blocks (s, nblocks - 1, 1, 2, true);
  check_blocks (s, 0, 1, 1);
  check_blocks (s, nblocks - 1, 1, 2);
  check_unwritten (s, nblocks / 2, 8);
  s->ops->close (s);

  st = stat_of (p);
  stpi = stat_of (ppi);
  ck_assert_uint_eq (st.st_size, UINT64_C (16) << 40);
  ck_assert_uint_eq (stpi.st_size,
                     STORE_FILE_HDR_SIZE + nblocks * 8);
  /* A few filesystem blocks each (extent trees included): < 1 MiB. */
  ck_assert_msg ((st.st_blocks + stpi.st_blocks) * 512 < 1024 * 1024,
                 "16 TiB device uses %jd + %jd blocks of disk",
                 (intmax_t) st.st_blocks, (intmax_t) stpi.st_blocks);

  /* Reopening it is as cheap. */
  s = store_file_open (&g, p, capture_error);
  ck_assert_ptr_nonnull (s);
  check_blocks (s, nblocks - 1, 1, 2);
  s->ops->close (s);
  unlink (p);
  unlink (ppi);
  return true;
}

START_TEST (test_sparse_16t)
{
  /* ext4 holds files up to 16 TiB - 4 KiB only: then the open must fail
   * clearly, and the test goes on in /dev/shm (tmpfs) if there is one. */
  bool done = try_16t (dir, 4096);
  if (!done) {
    char shm[] = "/dev/shm/test-store-file.XXXXXX";

    if (mkdtemp (shm) == NULL) {
      fprintf (stderr, "test_sparse_16t: %s cannot hold 16 TiB and there "
               "is no /dev/shm: only the refusal was checked\n", dir);
      return;
    }
    ck_assert (try_16t (shm, 4096));
    ck_assert (try_16t (shm, 512));
    rmdir (shm);
  }
  else
    ck_assert (try_16t (dir, 512));
}
END_TEST

/* Threads writing disjoint ranges at once through one store. */
struct writer {
  struct store *s;              /* the store */
  unsigned id;                  /* which thread: its blocks are id mod N */
};

#define NTHREADS 8
#define ROUNDS 50

static void *
writer_thread (void *arg)
{
  struct writer *w = arg;

  for (unsigned r = 0; r < ROUNDS; r++) {
    uint64_t lba = (uint64_t) (r % 16) * NTHREADS * 4 + w->id * 4;

    write_blocks (w->s, lba, 4, w->id * 1000 + r, r % 7 == 0);
    if (r % 5 == 0)
      ck_assert_int_eq (w->s->ops->zero (w->s, lba + 1, 1, false), 0);
  }
  return NULL;
}

START_TEST (test_threads)
{
  struct store_geometry g = geom ("T10-DIF-TYPE1-CRC", 512, 16 * NTHREADS * 4);
  struct store *s = store_file_open (&g, path, capture_error);
  pthread_t t[NTHREADS];
  struct writer w[NTHREADS];

  ck_assert_ptr_nonnull (s);
  for (unsigned i = 0; i < NTHREADS; i++) {
    w[i].s = s;
    w[i].id = i;
    ck_assert_int_eq (pthread_create (&t[i], NULL, writer_thread, &w[i]), 0);
  }
  for (unsigned i = 0; i < NTHREADS; i++)
    ck_assert_int_eq (pthread_join (t[i], NULL), 0);
  ck_assert_int_eq (s->ops->flush (s), 0);

  /* Each slot holds the last round that wrote it. */
  for (unsigned i = 0; i < NTHREADS; i++)
    for (unsigned slot = 0; slot < 16; slot++) {
      unsigned last = 0;
      uint64_t lba = (uint64_t) slot * NTHREADS * 4 + i * 4;

      for (unsigned r = 0; r < ROUNDS; r++)
        if (r % 16 == slot)
          last = r;
      check_blocks (s, lba, 1, i * 1000 + last);
      check_blocks (s, lba + 2, 2, i * 1000 + last);
      if (last % 5 == 0)
        check_unwritten (s, lba + 1, 1);
      else
        check_blocks (s, lba + 1, 1, i * 1000 + last);
    }
  s->ops->close (s);
  ck_assert_int_eq (nerrors, 0);
}
END_TEST

static Suite *
store_file_suite (void)
{
  Suite *s = suite_create ("store-file");
  TCase *hdr = tcase_create ("header");
  TCase *tc = tcase_create ("store");

  tcase_add_test (hdr, test_hdr_roundtrip);
  tcase_add_test (hdr, test_hdr_parse_errors);
  tcase_add_test (hdr, test_hdr_diff_and_sizes);
  suite_add_tcase (s, hdr);

  tcase_add_checked_fixture (tc, make_dir, remove_dir);
  tcase_add_test (tc, test_create);
  tcase_add_test (tc, test_write_read);
  tcase_add_test (tc, test_zero);
  tcase_add_test (tc, test_extent);
  tcase_add_test (tc, test_extent_small_interval);
  tcase_add_test (tc, test_reopen);
  tcase_add_test (tc, test_reopen_mismatch);
  tcase_add_test (tc, test_damaged_files);
  tcase_add_test (tc, test_adopt);
  tcase_add_test (tc, test_lock);
  tcase_add_test (tc, test_read_only);
  tcase_add_test (tc, test_format_none);
  tcase_add_test (tc, test_sparse_16t);
  tcase_add_test (tc, test_threads);
  suite_add_tcase (s, tc);
  return s;
}

int
main (void)
{
  SRunner *sr = srunner_create (store_file_suite ());
  int failed;

  test_tmpdir_enter ("test-store-file");
  srunner_run_all (sr, CK_NORMAL);
  failed = srunner_ntests_failed (sr);
  srunner_free (sr);
  test_tmpdir_leave ();
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
