/* SPDX-License-Identifier: BSD-3-Clause */
/* stabledif: unit test for server/stats.c: a snapshot of the counters
 * taken while requests run holds every request entirely or not at all.
 *
 * Writer threads run requests of fixed sizes through server/disk.c
 * (memory store, T10 type 1, 512-byte blocks): data view writes and
 * reads, dif view writes of good PI and of PI with two bad guards
 * (rejected).  Two of them are connections that share a counter block.
 * Meanwhile the main thread takes snapshots and checks on every one
 * the relations between counters that each request keeps.  The loops
 * are bounded by counts, not by time.
 */
#include <config.h>

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "disk.h"
#include "pi.h"

#define IV 512                  /* protection interval */
#define NBLOCKS 128             /* blocks of the disk */
#define RUN 4                   /* blocks of every request */
#define BAD 2                   /* bad guards in a rejected dif write */
#define ROUNDS 20000            /* requests of each writer */
#define MAX_SNAPS 2000000       /* snapshots at most */

/* LBAs of the requests: the data writer and reader share theirs. */
#define DATA_LBA 0
#define DIF_LBA 64

static struct disk *disk;
/* Writers still running; the main thread stops when none is. */
static atomic_int running;

/* Errors are expected (rejected writes): drop them. */
static void
quiet (const char *fmt, ...)
{
  (void) fmt;
}

/* A data view writer (connection 1): RUN whole blocks each time. */
static void *
data_writer (void *arg)
{
  static const struct disk_io io = { .conn = 1, .view = PROFILE_VIEW_DATA };
  uint8_t buf[RUN * IV];
  int i;

  for (i = 0; i < ROUNDS; i++) {
    memset (buf, i, sizeof buf);
    ck_assert_int_eq (disk_pwrite (disk, &io, buf, sizeof buf,
                                   DATA_LBA * IV, false), 0);
  }
  atomic_fetch_sub (&running, 1);
  return arg;
}

/* A data view reader (connection 2): RUN whole blocks each time. */
static void *
data_reader (void *arg)
{
  static const struct disk_io io = { .conn = 2, .view = PROFILE_VIEW_DATA };
  uint8_t buf[RUN * IV];
  int i;

  for (i = 0; i < ROUNDS; i++)
    ck_assert_int_eq (disk_pread (disk, &io, buf, sizeof buf,
                                  DATA_LBA * IV), 0);
  atomic_fetch_sub (&running, 1);
  return arg;
}

/* RUN extended blocks for DIF_LBA with valid PI into EXT; with BAD
 * of them failing the guard check if BROKEN. */
static void
make_ext (uint8_t *ext, size_t ext_size, bool broken)
{
  size_t i;

  for (i = 0; i < RUN; i++) {
    uint8_t *blk = ext + i * ext_size;
    memset (blk, 0x40 + (int) i, IV);
    pi_generate_block (&disk->pi, blk, DIF_LBA + i, blk + IV);
  }
  for (i = 0; broken && i < BAD; i++)
    ext[i * 2 * ext_size] ^= 1;  /* blocks 0 and 2 */
}

/* A dif view writer (connection 1 + STATS_BLOCKS: the data writer's
 * counter block): good and rejected writes in turn. */
static void *
dif_writer (void *arg)
{
  static const struct disk_io io = {
    .conn = 1 + STATS_BLOCKS, .view = PROFILE_VIEW_DIF,
  };
  const size_t ext_size = IV + disk->pi.format->tuple_size;
  uint8_t *good = malloc (RUN * ext_size), *bad = malloc (RUN * ext_size);
  int i;

  ck_assert_ptr_nonnull (good);
  ck_assert_ptr_nonnull (bad);
  make_ext (good, ext_size, false);
  make_ext (bad, ext_size, true);
  for (i = 0; i < ROUNDS; i++) {
    bool reject = i % 2;
    int r = disk_pwrite (disk, &io, reject ? bad : good, RUN * ext_size,
                         DIF_LBA * ext_size, false);
    ck_assert_int_eq (r, reject ? -1 : 0);
  }
  free (good);
  free (bad);
  atomic_fetch_sub (&running, 1);
  return arg;
}

/* The relations every request keeps, checked on snapshot S. */
static void
check_snapshot (const struct stats_snapshot *s, size_t ext_size)
{
  const uint64_t *dr = s->requests[PROFILE_VIEW_DATA];
  const uint64_t *db = s->bytes[PROFILE_VIEW_DATA];
  const uint64_t *fr = s->requests[PROFILE_VIEW_DIF];
  const uint64_t *fb = s->bytes[PROFILE_VIEW_DIF];

  /* Bytes are the sum of their requests' sizes. */
  ck_assert_uint_eq (db[STATS_OP_WRITE], dr[STATS_OP_WRITE] * RUN * IV);
  ck_assert_uint_eq (db[STATS_OP_READ], dr[STATS_OP_READ] * RUN * IV);
  ck_assert_uint_eq (fb[STATS_OP_WRITE],
                     fr[STATS_OP_WRITE] * RUN * ext_size);
  /* A rejected write is counted with the errors that rejected it. */
  ck_assert_uint_eq (s->write_errors[PI_CHECK_GUARD],
                     s->writes_rejected * BAD);
  ck_assert_uint_eq (s->write_errors[PI_CHECK_APP], 0);
  ck_assert_uint_eq (s->write_errors[PI_CHECK_REF], 0);
  ck_assert_uint_le (s->writes_rejected, fr[STATS_OP_WRITE]);
  /* Every block a request checked or generated is counted with it. */
  ck_assert_uint_eq (s->blocks_verified + s->blocks_escaped,
                     (dr[STATS_OP_READ] + fr[STATS_OP_WRITE]) * RUN);
  ck_assert_uint_eq (s->blocks_generated, dr[STATS_OP_WRITE] * RUN);
  ck_assert_uint_eq (s->reads_failed, 0);
}

START_TEST (test_snapshot_consistent)
{
  struct disk_config cfg = {
    .size = NBLOCKS * IV, .interval = IV,
    .format = pi_format_lookup ("T10-DIF-TYPE1-CRC"), .error = quiet,
  };
  void *(*const writers[]) (void *) = { data_writer, data_reader,
                                        dif_writer };
  const size_t nw = sizeof writers / sizeof writers[0];
  pthread_t th[3];
  struct stats_snapshot s;
  size_t ext_size, i, snaps = 0;

  disk = disk_open (&cfg);
  ck_assert_ptr_nonnull (disk);
  ext_size = IV + disk->pi.format->tuple_size;
  atomic_store (&running, (int) nw);
  for (i = 0; i < nw; i++)
    ck_assert_int_eq (pthread_create (&th[i], NULL, writers[i], NULL), 0);
  while (atomic_load (&running) > 0 && snaps < MAX_SNAPS) {
    stats_snapshot (&disk->stats, &s);
    check_snapshot (&s, ext_size);
    snaps++;
  }
  for (i = 0; i < nw; i++)
    ck_assert_int_eq (pthread_join (th[i], NULL), 0);

  /* And at the end, every request is there. */
  stats_snapshot (&disk->stats, &s);
  check_snapshot (&s, ext_size);
  ck_assert_uint_eq (s.requests[PROFILE_VIEW_DATA][STATS_OP_WRITE], ROUNDS);
  ck_assert_uint_eq (s.requests[PROFILE_VIEW_DATA][STATS_OP_READ], ROUNDS);
  ck_assert_uint_eq (s.requests[PROFILE_VIEW_DIF][STATS_OP_WRITE], ROUNDS);
  ck_assert_uint_eq (s.writes_rejected, ROUNDS / 2);
  disk_close (disk);
  disk = NULL;
}
END_TEST

/* A reset while requests run leaves each request counted entirely or
 * not at all, too. */
START_TEST (test_reset_consistent)
{
  struct disk_config cfg = {
    .size = NBLOCKS * IV, .interval = IV,
    .format = pi_format_lookup ("T10-DIF-TYPE1-CRC"), .error = quiet,
  };
  pthread_t th;
  struct stats_snapshot s;
  size_t ext_size, snaps = 0;

  disk = disk_open (&cfg);
  ck_assert_ptr_nonnull (disk);
  ext_size = IV + disk->pi.format->tuple_size;
  atomic_store (&running, 1);
  ck_assert_int_eq (pthread_create (&th, NULL, dif_writer, NULL), 0);
  while (atomic_load (&running) > 0 && snaps < MAX_SNAPS) {
    if (snaps % 64 == 0)
      stats_reset (&disk->stats);
    stats_snapshot (&disk->stats, &s);
    check_snapshot (&s, ext_size);
    snaps++;
  }
  ck_assert_int_eq (pthread_join (th, NULL), 0);
  disk_close (disk);
  disk = NULL;
}
END_TEST

static Suite *
stats_suite (void)
{
  Suite *s = suite_create ("stats");
  TCase *tc = tcase_create ("snapshot");

  /* The default 4 s is short under valgrind on a busy machine: the
   * loops are bounded by counts. */
  tcase_set_timeout (tc, 300);
  tcase_add_test (tc, test_snapshot_consistent);
  tcase_add_test (tc, test_reset_consistent);
  suite_add_tcase (s, tc);
  return s;
}

int
main (void)
{
  SRunner *sr = srunner_create (stats_suite ());
  int failed;

  srunner_run_all (sr, CK_NORMAL);
  failed = srunner_ntests_failed (sr);
  srunner_free (sr);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
