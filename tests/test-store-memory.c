/* SPDX-License-Identifier: BSD-3-Clause */
/* stabledif: unit tests for server/store-memory.c (the sparse store). */
#include <config.h>

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "pi.h"
#include "store.h"
#include "test-alloc-fail.h"

/* Errors reported by the store: the last message and how many. */
static char last_error[512];
static int nr_errors;

static void __attribute__ ((format (printf, 1, 2)))
capture_error (const char *fmt, ...)
{
  va_list ap;

  va_start (ap, fmt);
  vsnprintf (last_error, sizeof last_error, fmt, ap);
  va_end (ap);
  nr_errors++;
}

static struct store *
open_store (uint64_t nblocks, uint32_t interval, const char *format)
{
  struct store_geometry g = {
    .nblocks = nblocks,
    .interval = interval,
    .format = pi_format_lookup (format),
  };
  struct store *s;

  ck_assert_ptr_nonnull (g.format);
  s = store_memory_open (&g, capture_error);
  ck_assert_msg (s != NULL, "open failed: %s", last_error);
  return s;
}

/* Whether all LEN bytes at P are V. */
static bool
all_bytes (const uint8_t *p, size_t len, uint8_t v)
{
  size_t i;

  for (i = 0; i < len; i++)
    if (p[i] != v)
      return false;
  return true;
}

/* A recognisable pattern for block LBA: every byte depends on the LBA
 * and the position. */
static void
pattern (uint8_t *data, uint8_t *pi, uint64_t lba, uint64_t n,
         uint32_t interval, uint32_t tuple, uint8_t salt)
{
  uint64_t b;
  uint32_t i;

  for (b = 0; b < n; b++) {
    for (i = 0; i < interval; i++)
      data[b * interval + i] = (uint8_t) ((lba + b) * 7 + i + salt);
    for (i = 0; pi && i < tuple; i++)
      pi[b * tuple + i] = (uint8_t) ((lba + b) * 13 + i + salt);
  }
}

/* Read N blocks at LBA and compare with the pattern. */
static void
expect_pattern (struct store *s, uint64_t lba, uint64_t n, uint8_t salt)
{
  const uint32_t iv = s->geom.interval, tu = s->tuple;
  uint8_t *data = malloc (n * iv), *pi = malloc (n * tu + 1);
  uint8_t *want = malloc (n * iv), *wantpi = malloc (n * tu + 1);

  pattern (want, wantpi, lba, n, iv, tu, salt);
  ck_assert_int_eq (s->ops->read (s, lba, n, data, pi), 0);
  ck_assert_msg (memcmp (data, want, n * iv) == 0,
                 "data of LBA %lu..+%lu differs", (unsigned long) lba,
                 (unsigned long) n);
  ck_assert_msg (memcmp (pi, wantpi, n * tu) == 0,
                 "PI of LBA %lu..+%lu differs", (unsigned long) lba,
                 (unsigned long) n);
  free (data); free (pi); free (want); free (wantpi);
}

static void
write_pattern (struct store *s, uint64_t lba, uint64_t n, uint8_t salt)
{
  const uint32_t iv = s->geom.interval, tu = s->tuple;
  uint8_t *data = malloc (n * iv), *pi = malloc (n * tu + 1);

  pattern (data, pi, lba, n, iv, tu, salt);
  ck_assert_int_eq (s->ops->write (s, lba, n, data, pi, false), 0);
  free (data);
  free (pi);
}

/* Read N blocks at LBA: they must be zeros with all-ones PI. */
static void
expect_unwritten (struct store *s, uint64_t lba, uint64_t n)
{
  const uint32_t iv = s->geom.interval, tu = s->tuple;
  uint8_t *data = malloc (n * iv), *pi = malloc (n * tu + 1);

  memset (data, 0x5a, n * iv);
  memset (pi, 0x5a, n * tu);
  ck_assert_int_eq (s->ops->read (s, lba, n, data, pi), 0);
  ck_assert_msg (all_bytes (data, n * iv, 0),
                 "LBA %lu..+%lu: data not zero", (unsigned long) lba,
                 (unsigned long) n);
  ck_assert_msg (all_bytes (pi, n * tu, 0xff),
                 "LBA %lu..+%lu: PI not all ones", (unsigned long) lba,
                 (unsigned long) n);
  free (data);
  free (pi);
}

static void
expect_extent (struct store *s, uint64_t lba, uint64_t n, bool allocated,
               uint64_t run)
{
  bool a;
  uint64_t r;

  ck_assert_int_eq (s->ops->extent (s, lba, n, &a, &r), 0);
  ck_assert_msg (a == allocated && r == run,
                 "extent(%lu, %lu): got %s run %lu, want %s run %lu",
                 (unsigned long) lba, (unsigned long) n,
                 a ? "allocated" : "hole", (unsigned long) r,
                 allocated ? "allocated" : "hole", (unsigned long) run);
}

START_TEST (fields)
{
  struct store *s = open_store (2048, 512, "T10-DIF-TYPE1-CRC");

  ck_assert_str_eq (s->ops->name, "memory");
  ck_assert_uint_eq (s->tuple, 8);
  ck_assert_uint_eq (s->granule, 65536 / 512);
  ck_assert (s->multi_conn);
  ck_assert_int_eq (s->ops->flush (s), 0);
  s->ops->close (s);

  s = open_store (256, 4096, "EXT-DIF-TYPE1-CRC64");
  ck_assert_uint_eq (s->tuple, 16);
  ck_assert_uint_eq (s->granule, 65536 / 4096);
  s->ops->close (s);
}
END_TEST

START_TEST (unwritten_reads_zero_and_escape)
{
  struct store *s = open_store (4096, 512, "T10-DIF-TYPE3-CRC");

  expect_unwritten (s, 0, 4096);
  expect_extent (s, 0, 4096, false, 4096);
  s->ops->close (s);
}
END_TEST

START_TEST (write_read_across_chunks)
{
  /* 512-byte blocks: 128 per chunk; 100..300 spans three chunks. */
  struct store *s = open_store (4096, 512, "T10-DIF-TYPE1-CRC");

  write_pattern (s, 100, 200, 1);
  expect_pattern (s, 100, 200, 1);
  expect_unwritten (s, 0, 100);
  expect_unwritten (s, 300, 4096 - 300);
  /* Allocation is per chunk: 0..384 are allocated. */
  expect_extent (s, 0, 4096, true, 384);
  expect_extent (s, 100, 10, true, 10);
  expect_extent (s, 384, 4096 - 384, false, 4096 - 384);
  /* Overwrite part of it. */
  write_pattern (s, 150, 10, 2);
  expect_pattern (s, 150, 10, 2);
  expect_pattern (s, 100, 50, 1);
  expect_pattern (s, 160, 140, 1);
  s->ops->close (s);
}
END_TEST

START_TEST (zero_frees_and_clears)
{
  struct store *s = open_store (1024, 512, "T10-DIF-TYPE1-CRC");

  write_pattern (s, 0, 384, 3);         /* chunks 0, 1, 2 */
  /* Whole chunk 1 plus part of chunk 2. */
  ck_assert_int_eq (s->ops->zero (s, 128, 138, false), 0);
  expect_pattern (s, 0, 128, 3);
  expect_unwritten (s, 128, 138);
  {
    /* The rest of chunk 2 is intact. */
    uint8_t data[512 * 118], pi[8 * 118];
    uint8_t want[512 * 118], wantpi[8 * 118];
    pattern (want, wantpi, 266, 118, 512, 8, 3);
    ck_assert_int_eq (s->ops->read (s, 266, 118, data, pi), 0);
    ck_assert (memcmp (data, want, sizeof data) == 0);
    ck_assert (memcmp (pi, wantpi, sizeof pi) == 0);
  }
  /* Chunk 1 was given back; chunk 2 is still allocated. */
  expect_extent (s, 0, 1024, true, 128);
  expect_extent (s, 128, 1024 - 128, false, 128);
  expect_extent (s, 256, 1024 - 256, true, 128);
  expect_extent (s, 384, 1024 - 384, false, 1024 - 384);
  /* Zeroing unwritten space allocates nothing. */
  ck_assert_int_eq (s->ops->zero (s, 512, 256, false), 0);
  expect_extent (s, 384, 1024 - 384, false, 1024 - 384);
  /* A freed chunk can be written again. */
  write_pattern (s, 130, 2, 4);
  expect_pattern (s, 130, 2, 4);
  expect_unwritten (s, 128, 2);
  expect_unwritten (s, 132, 124);
  s->ops->close (s);
}
END_TEST

/* A 16 TiB disk opens at once, and its last block works. */
static void
huge (uint32_t interval, const char *format)
{
  const uint64_t nblocks = (UINT64_C (16) << 40) / interval;
  struct store *s = open_store (nblocks, interval, format);
  const uint64_t g = s->granule;

  write_pattern (s, nblocks - 1, 1, 5);
  expect_pattern (s, nblocks - 1, 1, 5);
  expect_unwritten (s, nblocks - 2, 1);
  expect_unwritten (s, 0, 4);
  write_pattern (s, 0, 1, 6);
  expect_pattern (s, 0, 1, 6);
  /* Extents skip the empty middle without walking it. */
  expect_extent (s, 0, nblocks, true, g);
  expect_extent (s, g, nblocks - g, false, nblocks - 2 * g);
  expect_extent (s, nblocks - g, g, true, g);
  /* Blocks in the middle, in pages nobody touched yet. */
  write_pattern (s, nblocks / 2 + 3, 2, 7);
  expect_pattern (s, nblocks / 2 + 3, 2, 7);
  ck_assert_int_eq (s->ops->zero (s, nblocks - g, g, false), 0);
  expect_unwritten (s, nblocks - 1, 1);
  expect_extent (s, nblocks / 2, nblocks / 2, true, g);
  expect_extent (s, nblocks / 2 + g, nblocks / 2 - g, false,
                 nblocks / 2 - g);
  s->ops->close (s);
}

START_TEST (sparse_16tib)
{
  huge (4096, "EXT-DIF-TYPE1-CRC64");
  huge (512, "T10-DIF-TYPE1-CRC");
}
END_TEST

START_TEST (last_partial_chunk)
{
  /* 130 blocks: the second chunk holds only two of them. */
  struct store *s = open_store (130, 512, "T10-DIF-TYPE2-CRC");

  write_pattern (s, 127, 3, 8);
  expect_pattern (s, 127, 3, 8);
  expect_extent (s, 0, 130, true, 130);
  ck_assert_int_eq (s->ops->zero (s, 128, 2, false), 0);
  expect_unwritten (s, 128, 2);
  expect_pattern (s, 127, 1, 8);
  /* Zeroing all of the short chunk gave its memory back, as for a
   * whole one; only chunk 0 is left. */
  expect_extent (s, 0, 130, true, 128);
  expect_extent (s, 128, 2, false, 2);
  s->ops->close (s);
}
END_TEST

START_TEST (format_none)
{
  struct store *s = open_store (256, 4096, "none");
  uint8_t data[4096 * 3];

  ck_assert_uint_eq (s->tuple, 0);
  pattern (data, NULL, 10, 3, 4096, 0, 9);
  ck_assert_int_eq (s->ops->write (s, 10, 3, data, NULL, true), 0);
  memset (data, 0, sizeof data);
  ck_assert_int_eq (s->ops->read (s, 10, 3, data, NULL), 0);
  {
    uint8_t want[4096 * 3];
    pattern (want, NULL, 10, 3, 4096, 0, 9);
    ck_assert (memcmp (data, want, sizeof data) == 0);
  }
  s->ops->close (s);
}
END_TEST

/* Threads writing different chunks that share tree pages (created
 * lazily, concurrently): every write must land. */
#define RACE_THREADS 4
#define RACE_CHUNKS 256

struct race_arg {
  struct store *s;
  int id;
};

/* The LBA thread work item C writes: chunk (C * 1021) mod 2^14, so the
 * chunks are distinct and spread over many tree pages. */
static uint64_t
race_lba (const struct store *s, uint64_t c)
{
  return c * 1021 % 16384 * s->granule;
}

static void *
race_run (void *arg)
{
  struct race_arg *a = arg;
  uint64_t c;

  for (c = a->id; c < RACE_CHUNKS; c += RACE_THREADS)
    write_pattern (a->s, race_lba (a->s, c), 1, (uint8_t) c);
  return NULL;
}

START_TEST (concurrent_allocation)
{
  /* 2^17 chunks: a root and one level of pages below it. */
  struct store *s = open_store (UINT64_C (1) << 24, 512, "T10-DIF-TYPE1-CRC");
  struct race_arg args[RACE_THREADS];
  pthread_t th[RACE_THREADS];
  uint64_t c;
  int i;

  for (i = 0; i < RACE_THREADS; i++) {
    args[i].s = s;
    args[i].id = i;
    ck_assert_int_eq (pthread_create (&th[i], NULL, race_run, &args[i]), 0);
  }
  for (i = 0; i < RACE_THREADS; i++)
    pthread_join (th[i], NULL);
  for (c = 0; c < RACE_CHUNKS; c++)
    expect_pattern (s, race_lba (s, c), 1, (uint8_t) c);
  s->ops->close (s);
}
END_TEST

/* The extended-layout calls (the dif view's): write_ext stores what
 * write would from the same blocks joined, read_ext gives the joined
 * blocks back, across chunk boundaries, with never-written blocks as
 * zeros and all-ones PI; nothing outside the range changes. */
START_TEST (extended_layout)
{
  /* 512-byte blocks: 128 per chunk; 100..300 spans three chunks. */
  struct store *s = open_store (4096, 512, "T10-DIF-TYPE1-CRC");
  const uint32_t iv = 512, tu = 8, es = iv + tu;
  const uint64_t n = 200, lba = 100;
  uint8_t *data = malloc (n * iv), *pi = malloc (n * tu);
  uint8_t *ext = malloc (n * es), *back = malloc ((n + 2) * es);
  uint64_t i;

  ck_assert_ptr_nonnull (s->ops->read_ext);
  ck_assert_ptr_nonnull (s->ops->write_ext);
  pattern (data, pi, lba, n, iv, tu, 7);
  for (i = 0; i < n; i++) {
    memcpy (ext + i * es, data + i * iv, iv);
    memcpy (ext + i * es + iv, pi + i * tu, tu);
  }
  ck_assert_int_eq (s->ops->write_ext (s, lba, n, ext, false), 0);
  /* The separate layout sees exactly the pattern. */
  expect_pattern (s, lba, n, 7);
  expect_unwritten (s, 0, lba);
  expect_unwritten (s, lba + n, 4096 - lba - n);

  /* One block either side: the first is in an allocated chunk, the last
   * one's chunk (2) is allocated too; both never written. */
  memset (back, 0x5a, (n + 2) * es);
  ck_assert_int_eq (s->ops->read_ext (s, lba - 1, n + 2, back), 0);
  ck_assert (all_bytes (back, iv, 0));
  ck_assert (all_bytes (back + iv, tu, 0xff));
  ck_assert_mem_eq (back + es, ext, n * es);
  ck_assert (all_bytes (back + (n + 1) * es, iv, 0));
  ck_assert (all_bytes (back + (n + 1) * es + iv, tu, 0xff));

  /* A chunk never allocated reads as zeros with all-ones PI. */
  memset (back, 0x5a, 3 * es);
  ck_assert_int_eq (s->ops->read_ext (s, 1000, 3, back), 0);
  for (i = 0; i < 3; i++) {
    ck_assert (all_bytes (back + i * es, iv, 0));
    ck_assert (all_bytes (back + i * es + iv, tu, 0xff));
  }
  expect_extent (s, 512, 4096 - 512, false, 4096 - 512);

  free (data); free (pi); free (ext); free (back);
  s->ops->close (s);
}
END_TEST

/* What write_in_place lent so far. */
struct filled {
  uint64_t next;                /* LBA the next run must start at */
  uint64_t nruns;               /* runs seen */
  uint32_t iv, tu;              /* geometry */
  uint64_t chunk_blocks;        /* blocks per chunk */
  uint8_t salt;                 /* pattern to write */
};

/* store_fill_fn: check the run follows the last one inside one chunk and
 * fill it with the pattern. */
static void
fill_run (void *opaque, uint64_t lba, uint64_t n, uint8_t *data, uint8_t *pi)
{
  struct filled *f = opaque;

  ck_assert_uint_eq (lba, f->next);
  ck_assert_uint_gt (n, 0);
  ck_assert_uint_eq (lba / f->chunk_blocks, (lba + n - 1) / f->chunk_blocks);
  pattern (data, pi, lba, n, f->iv, f->tu, f->salt);
  f->next = lba + n;
  f->nruns++;
}

/* write_in_place lends every block asked for, a chunk at a time in LBA
 * order, allocating chunks as needed; what the callback writes is what
 * read gives back, and nothing around it changes. */
START_TEST (write_in_place_runs)
{
  /* 512-byte blocks: 128 per chunk; 100..400 spans four chunks. */
  struct store *s = open_store (4096, 512, "T10-DIF-TYPE1-CRC");
  struct filled f = { .next = 100, .iv = 512, .tu = 8, .chunk_blocks = 128,
                      .salt = 9 };

  ck_assert_ptr_nonnull (s->ops->write_in_place);
  write_pattern (s, 0, 128, 1);
  ck_assert_int_eq (s->ops->write_in_place (s, 100, 300, fill_run, &f,
                                            false), 0);
  ck_assert_uint_eq (f.next, 400);
  ck_assert_uint_eq (f.nruns, 4);
  expect_pattern (s, 0, 100, 1);
  expect_pattern (s, 100, 300, 9);
  expect_unwritten (s, 400, 512 - 400);
  expect_extent (s, 0, 4096, true, 512);
  expect_extent (s, 512, 4096 - 512, false, 4096 - 512);

  /* Inside one chunk: one run. */
  f = (struct filled) { .next = 1000, .iv = 512, .tu = 8,
                        .chunk_blocks = 128, .salt = 5 };
  ck_assert_int_eq (s->ops->write_in_place (s, 1000, 3, fill_run, &f, true),
                    0);
  ck_assert_uint_eq (f.nruns, 1);
  expect_pattern (s, 1000, 3, 5);
  expect_unwritten (s, 1003, 1024 - 1003);
  s->ops->close (s);
}
END_TEST

/* store_fill_fn of a write that must never be lent anything. */
static void
fill_never (void *opaque, uint64_t lba, uint64_t n, uint8_t *data,
            uint8_t *pi)
{
  (void) opaque; (void) data; (void) pi;
  ck_abort_msg ("lent LBA %lu..+%lu of a write without memory",
                (unsigned long) lba, (unsigned long) n);
}

/* The store could not allocate: the write fails with ENOMEM, one error
 * names the first LBA of the chunk it could not have, and nothing the
 * write would have stored is stored (earlier chunks were not filled
 * first), on all three writing paths. */
static void
expect_enomem (struct store *s, const char *lba_text)
{
  ck_assert_int_eq (errno, ENOMEM);
  ck_assert_int_eq (nr_errors, 1);
  ck_assert_msg (strstr (last_error, "cannot allocate memory") &&
                 strstr (last_error, lba_text),
                 "error \"%s\" does not name %s", last_error, lba_text);
  nr_errors = 0;
  (void) s;
}

START_TEST (write_without_memory_stores_nothing)
{
  /* 512-byte blocks: 128 per chunk. */
  struct store *s = open_store (4096, 512, "T10-DIF-TYPE1-CRC");
  const uint32_t iv = 512, tu = 8, es = iv + tu;
  uint8_t *data = malloc (300 * iv), *pi = malloc (300 * tu);
  uint8_t *ext = malloc (300 * es);
  int r;

  write_pattern (s, 0, 128, 1);             /* chunk 0 allocated */
  pattern (data, pi, 100, 100, iv, tu, 2);
  nr_errors = 0;

  /* write: 100..199, chunk 0 there, chunk 1 not to be had. */
  alloc_left = 0;
  r = s->ops->write (s, 100, 100, data, pi, false);
  alloc_left = -1;
  ck_assert_int_eq (r, -1);
  expect_enomem (s, "LBA 128:");
  expect_pattern (s, 0, 128, 1);
  expect_extent (s, 128, 4096 - 128, false, 4096 - 128);

  /* write_ext, the same request in the extended layout. */
  memset (ext, 0x77, 100 * es);
  alloc_left = 0;
  r = s->ops->write_ext (s, 100, 100, ext, false);
  alloc_left = -1;
  ck_assert_int_eq (r, -1);
  expect_enomem (s, "LBA 128:");
  expect_pattern (s, 0, 128, 1);

  /* write_in_place over 300..599 (chunks 2, 3, 4): chunk 2 is had,
   * chunk 3 is not; nothing is lent.  Chunk 2 stays allocated and reads
   * as never written. */
  alloc_left = 1;
  r = s->ops->write_in_place (s, 300, 300, fill_never, NULL, false);
  alloc_left = -1;
  ck_assert_int_eq (r, -1);
  expect_enomem (s, "LBA 384:");
  expect_unwritten (s, 128, 4096 - 128);
  expect_extent (s, 128, 4096 - 128, false, 128);
  expect_extent (s, 256, 4096 - 256, true, 128);
  expect_extent (s, 384, 4096 - 384, false, 4096 - 384);

  /* With memory again, the same writes work. */
  ck_assert_int_eq (s->ops->write (s, 100, 100, data, pi, false), 0);
  expect_pattern (s, 100, 100, 2);
  expect_pattern (s, 0, 100, 1);
  ck_assert_int_eq (nr_errors, 0);

  free (data); free (pi); free (ext);
  s->ops->close (s);
}
END_TEST

/* On a disk with a tree of pages, a write whose page cannot be had
 * fails the same way. */
START_TEST (page_without_memory_stores_nothing)
{
  /* 16 TiB of 4096-byte blocks: 2^28 chunks below two levels of pages. */
  struct store *s = open_store ((uint64_t) 1 << 32, 4096,
                                "EXT-DIF-TYPE1-CRC64");
  const uint64_t lba = ((uint64_t) 1 << 31) + 5;
  uint8_t *data = malloc (4096), *pi = malloc (16);
  char want[64];
  int r;

  pattern (data, pi, lba, 1, 4096, 16, 3);
  nr_errors = 0;
  alloc_left = 0;
  r = s->ops->write (s, lba, 1, data, pi, false);
  alloc_left = -1;
  ck_assert_int_eq (r, -1);
  /* The error names the first LBA of the chunk (16 blocks each). */
  snprintf (want, sizeof want, "LBA %lu:", (unsigned long) (lba - 5));
  expect_enomem (s, want);
  expect_unwritten (s, lba, 1);
  expect_extent (s, lba, 1, false, 1);

  ck_assert_int_eq (s->ops->write (s, lba, 1, data, pi, false), 0);
  expect_pattern (s, lba, 1, 3);

  free (data); free (pi);
  s->ops->close (s);
}
END_TEST

static Suite *
store_memory_suite (void)
{
  Suite *s = suite_create ("store-memory");
  TCase *tc = tcase_create ("core");

  tcase_add_test (tc, fields);
  tcase_add_test (tc, unwritten_reads_zero_and_escape);
  tcase_add_test (tc, write_read_across_chunks);
  tcase_add_test (tc, zero_frees_and_clears);
  tcase_add_test (tc, sparse_16tib);
  tcase_add_test (tc, last_partial_chunk);
  tcase_add_test (tc, format_none);
  tcase_add_test (tc, concurrent_allocation);
  tcase_add_test (tc, extended_layout);
  tcase_add_test (tc, write_in_place_runs);
  tcase_add_test (tc, write_without_memory_stores_nothing);
  tcase_add_test (tc, page_without_memory_stores_nothing);
  suite_add_tcase (s, tc);
  return s;
}

int
main (void)
{
  SRunner *sr = srunner_create (store_memory_suite ());
  int failed;

  srunner_run_all (sr, CK_NORMAL);
  failed = srunner_ntests_failed (sr);
  srunner_free (sr);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
