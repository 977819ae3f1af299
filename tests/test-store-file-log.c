/* SPDX-License-Identifier: BSD-3-Clause */
/* stabledif: unit tests of the file store's dirty-region log
 * (server/store-file-log.c) and of the recovery it drives at open
 * (server/store-file-recover.c, server/store-file.c).
 *
 * pwrite and fdatasync are wrapped (-Wl,--wrap) to record which file each
 * call touched, so the order "mark written, mark synced, then data" is
 * seen, not assumed.  A crash is simulated by copying PATH.log while the
 * store is open (the marks a power cut would leave), closing, and then
 * writing into PATH or PATH.pi what a power cut can leave: new data under
 * old PI, old data under new PI.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <check.h>

#include "pi.h"
#include "store.h"
#include "store-file-hdr.h"
#include "store-file-log.h"
#include "test-tmpdir.h"

/* Small regions, so a small disk has several: 64 blocks of 512 bytes. */
#define REGION_BYTES (64 * 512)
#define NBLOCKS 512             /* 8 regions */

/* ---- the I/O trace ---- */

/* Which file a call touched. */
enum trace_file { T_DATA, T_PI, T_LOG, T_OTHER };

/* One recorded call. */
struct trace_ent {
  enum trace_file file;         /* the file */
  bool sync;                    /* fdatasync (else pwrite) */
};

static struct trace_ent trace[4096]; /* calls since trace_reset */
static size_t ntrace;           /* entries used */

ssize_t __real_pwrite (int fd, const void *buf, size_t n, off_t off);
int __real_fdatasync (int fd);

/* The test's own writes into the files stay out of the trace. */
#define STORE_FILE_RAW_PWRITE __real_pwrite
#include "test-store-file-util.h"

/* The file FD is open on, by its name's ending. */
static enum trace_file
trace_classify (int fd)
{
  char link[64], target[512];
  ssize_t n;

  snprintf (link, sizeof link, "/proc/self/fd/%d", fd);
  n = readlink (link, target, sizeof target - 1);
  if (n <= 0)
    return T_OTHER;
  target[n] = '\0';
  if (n > 4 && strcmp (target + n - 4, ".log") == 0)
    return T_LOG;
  if (n > 3 && strcmp (target + n - 3, ".pi") == 0)
    return T_PI;
  if (n > 5 && strcmp (target + n - 5, "/disk") == 0)
    return T_DATA;
  return T_OTHER;
}

/* Guards trace and ntrace against the threads of
 * test_marked_writes_do_not_wait. */
static pthread_mutex_t trace_lock = PTHREAD_MUTEX_INITIALIZER;

static void
trace_add (int fd, bool sync)
{
  enum trace_file file = trace_classify (fd);

  pthread_mutex_lock (&trace_lock);
  if (ntrace < sizeof trace / sizeof trace[0])
    trace[ntrace++] = (struct trace_ent) { file, sync };
  pthread_mutex_unlock (&trace_lock);
}

/* Called by __wrap_fdatasync before an fdatasync of PATH.log, if set:
 * a nonzero return is the errno that fdatasync then fails with. */
static int (*log_sync_hook) (void);

ssize_t __wrap_pwrite (int fd, const void *buf, size_t n, off_t off);
ssize_t
__wrap_pwrite (int fd, const void *buf, size_t n, off_t off)
{
  trace_add (fd, false);
  return __real_pwrite (fd, buf, n, off);
}

int __wrap_fdatasync (int fd);
int
__wrap_fdatasync (int fd)
{
  trace_add (fd, true);
  if (log_sync_hook != NULL && trace_classify (fd) == T_LOG) {
    int e = log_sync_hook ();

    if (e != 0) {
      errno = e;
      return -1;
    }
  }
  return __real_fdatasync (fd);
}

/* The index of the first entry from FROM touching FILE (SYNC or not),
 * or ntrace. */
static size_t
trace_find (size_t from, enum trace_file file, bool sync)
{
  for (size_t i = from; i < ntrace; i++)
    if (trace[i].file == file && trace[i].sync == sync)
      return i;
  return ntrace;
}

/* ---- files ---- */

static void
make_dir (void)
{
  store_dir_make ("test-store-file-log");
}

/* The mark of region R in PATH.log as the file holds it. */
static int
mark_of (uint64_t r)
{
  uint8_t b;

  raw_read (log_path, &b, 1, STORE_FILE_LOG_HDR_SIZE + r);
  return b;
}

/* The number of set marks in PATH.log. */
static int
marks_set (void)
{
  int n = 0;

  for (uint64_t r = 0; r < NBLOCKS * 512 / REGION_BYTES; r++)
    n += mark_of (r) != 0;
  return n;
}

/* ---- the store ---- */

static const struct store_file_opts opts = { .region_bytes = REGION_BYTES };

static struct store *
open_store (void)
{
  struct store_geometry g = {
    .nblocks = NBLOCKS, .interval = 512,
    .format = pi_format_lookup ("T10-DIF-TYPE1-CRC"),
  };
  struct store *s = store_file_open_opts (&g, path, &opts, capture_error);

  ck_assert_msg (s != NULL, "open: %s", last_error);
  return s;
}

/* Deterministic data for block LBA, round SEED. */
static void
fill (uint8_t *buf, uint64_t nblocks, uint64_t lba, unsigned seed)
{
  for (uint64_t i = 0; i < nblocks * 512; i++)
    buf[i] = (uint8_t) ((lba * 512 + i) * 2654435761u + seed * 97u);
}

/* Write NBLOCKS blocks at LBA of round SEED, with app tag APP. */
static void
write_blocks (struct store *s, uint64_t lba, uint64_t nblocks,
              unsigned seed, uint16_t app)
{
  struct pi_params p = {
    .format = s->geom.format, .interval = 512, .check_app = true,
    .app_tag = app, .app_mask = 0xffff,
  };
  uint8_t *data = malloc (nblocks * 512), *pi = malloc (nblocks * 8);

  ck_assert (data && pi);
  fill (data, nblocks, lba, seed);
  pi_generate_sep (&p, data, pi, nblocks, lba);
  ck_assert_int_eq (s->ops->write (s, lba, nblocks, data, pi, false), 0);
  free (data);
  free (pi);
}

/* The blocks must read as round SEED with valid PI carrying app tag APP;
 * returns how many blocks fail their PI check instead (then the data is
 * not compared). */
static uint64_t
check_blocks (struct store *s, uint64_t lba, uint64_t nblocks,
              unsigned seed, uint16_t app)
{
  struct pi_params p = {
    .format = s->geom.format, .interval = 512, .check_app = true,
    .app_tag = app, .app_mask = 0xffff,
  };
  uint8_t *want = malloc (nblocks * 512), *data = malloc (nblocks * 512);
  uint8_t *pi = malloc (nblocks * 8);
  uint64_t bad;

  ck_assert (want && data && pi);
  fill (want, nblocks, lba, seed);
  ck_assert_int_eq (s->ops->read (s, lba, nblocks, data, pi), 0);
  bad = pi_verify_sep (&p, data, pi, nblocks, lba, NULL, NULL, NULL);
  if (bad == 0)
    ck_assert_msg (memcmp (data, want, nblocks * 512) == 0,
                   "LBA %" PRIu64 "+%" PRIu64 " is not round %u", lba,
                   nblocks, seed);
  free (want);
  free (data);
  free (pi);
  return bad;
}

/* ---- tests ---- */

START_TEST (test_created_clean)
{
  struct store *s = open_store ();
  char hdr[STORE_FILE_LOG_HDR_SIZE];
  struct stat st;

  ck_assert_int_eq (stat (log_path, &st), 0);
  ck_assert_int_eq (st.st_size, STORE_FILE_LOG_HDR_SIZE + 8);
  raw_read (log_path, hdr, sizeof hdr, 0);
  ck_assert (strncmp (hdr, "stabledif-log/1\nregion-bytes=32768\n"
                      "regions=8\nmarks-at=4096\n", 200) == 0);
  ck_assert_int_eq (marks_set (), 0);
  ck_assert_uint_eq (s->recovered_regions, 0);
  s->ops->close (s);
  ck_assert_int_eq (nerrors, 0);
}
END_TEST

/* A region's mark is written and synced before the first write into
 * it, and only then; the marks of other regions stay clear. */
START_TEST (test_marked_before_write)
{
  struct store *s = open_store ();
  size_t mark, sync, data;

  ntrace = 0;
  write_blocks (s, 130, 4, 1, 0);         /* region 2 */
  mark = trace_find (0, T_LOG, false);
  sync = trace_find (0, T_LOG, true);
  data = trace_find (0, T_DATA, false);
  ck_assert_msg (mark < sync && sync < data && data < ntrace,
                 "mark %zu, sync %zu, data %zu of %zu calls", mark, sync,
                 data, ntrace);
  ck_assert_uint_gt (trace_find (0, T_PI, false), sync);
  ck_assert_uint_lt (trace_find (0, T_PI, false), data);
  ck_assert_int_eq (mark_of (2), 1);
  ck_assert_int_eq (marks_set (), 1);

  /* Further writes into a marked region cost no log I/O. */
  ntrace = 0;
  write_blocks (s, 140, 4, 1, 0);
  ck_assert_uint_eq (trace_find (0, T_LOG, false), ntrace);
  ck_assert_uint_eq (trace_find (0, T_LOG, true), ntrace);

  /* A write across a boundary marks both regions; a zero marks too. */
  write_blocks (s, 190, 4, 1, 0);         /* regions 2 and 3 */
  ck_assert_int_eq (mark_of (3), 1);
  ck_assert_int_eq (s->ops->zero (s, 448, 8, false), 0); /* region 7 */
  ck_assert_int_eq (mark_of (7), 1);
  ck_assert_int_eq (marks_set (), 3);
  s->ops->close (s);
  ck_assert_int_eq (nerrors, 0);
}
END_TEST

/* A flush clears the marks of regions idle for the
 * STORE_FILE_LOG_IDLE_FLUSHES intervals before it (the 65th flush after
 * their last write); a clean close clears all. */
START_TEST (test_flush_clears)
{
  struct store *s = open_store ();

  write_blocks (s, 10, 2, 1, 0);          /* region 0 */
  for (int i = 0; i < STORE_FILE_LOG_IDLE_FLUSHES; i++) {
    ck_assert_int_eq (s->ops->flush (s), 0);
    ck_assert_int_eq (mark_of (0), 1);
  }
  write_blocks (s, 300, 2, 1, 0);         /* region 4 */
  ck_assert_int_eq (s->ops->flush (s), 0);
  ck_assert_int_eq (mark_of (0), 0);
  ck_assert_int_eq (mark_of (4), 1);
  for (int i = 0; i < STORE_FILE_LOG_IDLE_FLUSHES; i++)
    ck_assert_int_eq (s->ops->flush (s), 0);
  ck_assert_int_eq (marks_set (), 0);

  /* Marked again by the next write; close leaves the log clean. */
  write_blocks (s, 12, 2, 2, 0);
  ck_assert_int_eq (mark_of (0), 1);
  s->ops->close (s);
  ck_assert_int_eq (marks_set (), 0);

  /* Reopening a clean log recovers nothing. */
  s = open_store ();
  ck_assert_uint_eq (s->recovered_regions, 0);
  ck_assert_uint_eq (check_blocks (s, 12, 2, 2, 0), 0);
  s->ops->close (s);
  ck_assert_int_eq (nerrors, 0);
}
END_TEST

/* What a power cut leaves: in region 2 (dirty), blocks 128..131 have
 * new data under old PI, 132..133 old data under new PI; region 5
 * (clean) gets the same damage, which is real corruption at rest. */
START_TEST (test_crash_recovered)
{
  struct store *s = open_store ();
  uint8_t old_pi[8 * 8], old_data[2 * 512], marks[8];
  uint8_t old_pi5[8 * 8], new_data5[4 * 512];

  write_blocks (s, 128, 8, 1, 0x1234);
  write_blocks (s, 320, 8, 1, 0x1234);
  for (int i = 0; i <= STORE_FILE_LOG_IDLE_FLUSHES; i++)
    ck_assert_int_eq (s->ops->flush (s), 0);
  ck_assert_int_eq (marks_set (), 0);
  raw_read (pi_path, old_pi, sizeof old_pi,
            STORE_FILE_HDR_SIZE + 128 * 8);
  raw_read (pi_path, old_pi5, sizeof old_pi5,
            STORE_FILE_HDR_SIZE + 320 * 8);
  raw_read (path, old_data, sizeof old_data, 132 * 512);

  write_blocks (s, 128, 8, 2, 0x1234);    /* region 2 dirty */
  raw_read (log_path, marks, sizeof marks, STORE_FILE_LOG_HDR_SIZE);
  ck_assert_int_eq (marks[2], 1);
  ck_assert_int_eq (marks[5], 0);
  s->ops->close (s);

  /* The power cut. */
  raw_write (log_path, marks, sizeof marks, STORE_FILE_LOG_HDR_SIZE);
  raw_write (pi_path, old_pi, 4 * 8, STORE_FILE_HDR_SIZE + 128 * 8);
  raw_write (path, old_data, sizeof old_data, 132 * 512);
  fill (new_data5, 4, 320, 2);
  raw_write (path, new_data5, sizeof new_data5, 320 * 512);

  s = open_store ();
  ck_assert_uint_eq (s->recovered_regions, 1);
  ck_assert_uint_eq (s->recovered_blocks, 6);
  ck_assert_int_eq (marks_set (), 0);
  ck_assert_uint_eq (check_blocks (s, 128, 4, 2, 0x1234), 0);
  ck_assert_uint_eq (check_blocks (s, 132, 2, 1, 0x1234), 0);
  ck_assert_uint_eq (check_blocks (s, 134, 2, 2, 0x1234), 0);
  /* Outside any dirty region the damage is still seen. */
  ck_assert_uint_eq (check_blocks (s, 320, 4, 2, 0x1234), 4);
  ck_assert_uint_eq (check_blocks (s, 324, 4, 1, 0x1234), 0);
  s->ops->close (s);

  /* Recovery is durable and done once. */
  s = open_store ();
  ck_assert_uint_eq (s->recovered_regions, 0);
  ck_assert_uint_eq (check_blocks (s, 128, 4, 2, 0x1234), 0);
  s->ops->close (s);
  ck_assert_int_eq (nerrors, 0);
}
END_TEST

/* Files of the previous layout (no PATH.log) get a clean log; a log that
 * is not one is refused, naming it; dirty-log off keeps none; a new disk
 * drops a stale log. */
START_TEST (test_log_files)
{
  static const struct store_file_opts off = { .no_dirty_log = true };
  struct store_geometry g = {
    .nblocks = NBLOCKS, .interval = 512,
    .format = pi_format_lookup ("T10-DIF-TYPE1-CRC"),
  };
  struct store *s = open_store ();

  write_blocks (s, 0, 1, 1, 0);
  s->ops->close (s);
  ck_assert_int_eq (unlink (log_path), 0);
  s = open_store ();
  ck_assert_int_eq (access (log_path, F_OK), 0);
  ck_assert_uint_eq (check_blocks (s, 0, 1, 1, 0), 0);
  s->ops->close (s);

  raw_write (log_path, "garbage\n", 8, 0);
  ck_assert_ptr_null (store_file_open_opts (&g, path, &opts, capture_error));
  ck_assert_int_eq (nerrors, 1);
  ck_assert_ptr_nonnull (strstr (last_error, "disk.log is not a "
                                 "dirty-region log"));
  nerrors = 0;

  ck_assert_int_eq (unlink (log_path), 0);
  s = store_file_open_opts (&g, path, &off, capture_error);
  ck_assert_ptr_nonnull (s);
  write_blocks (s, 1, 1, 1, 0);
  s->ops->close (s);
  ck_assert_int_ne (access (log_path, F_OK), 0);

  /* A stale, dirty log of another disk does not stop a new one. */
  ck_assert_int_eq (unlink (pi_path), 0);
  ck_assert_int_eq (unlink (path), 0);
  {
    int fd = open (log_path, O_WRONLY | O_CREAT, 0666);
    ck_assert_int_ge (fd, 0);
    ck_assert_int_eq (__real_pwrite (fd, "stabledif-log/1\nregion-bytes=512"
                                     "\nregions=1\nmarks-at=4096\n", 56, 0),
                      56);
    close (fd);
  }
  s = open_store ();
  ck_assert_uint_eq (s->recovered_regions, 0);
  ck_assert_int_eq (marks_set (), 0);
  s->ops->close (s);
  ck_assert_int_eq (nerrors, 0);
}
END_TEST

/* A log_sync_hook: the sync of a mark fails. */
static int
sync_fails (void)
{
  return EIO;
}

/* A mark that cannot be made durable refuses the write or the zero
 * before PATH or PATH.pi is touched: the blocks read back as they were,
 * and the next write into the region marks it again first. */
START_TEST (test_mark_fails)
{
  struct store *s = open_store ();
  struct pi_params p = {
    .format = s->geom.format, .interval = 512, .check_app = true,
    .app_tag = 0, .app_mask = 0xffff,
  };
  uint8_t data[4 * 512], pi[4 * 8];

  write_blocks (s, 200, 4, 1, 0);         /* region 3 */
  for (int i = 0; i <= STORE_FILE_LOG_IDLE_FLUSHES; i++)
    ck_assert_int_eq (s->ops->flush (s), 0);
  ck_assert_int_eq (mark_of (3), 0);

  fill (data, 4, 200, 2);
  pi_generate_sep (&p, data, pi, 4, 200);
  log_sync_hook = sync_fails;
  ntrace = 0;
  errno = 0;
  ck_assert_int_eq (s->ops->write (s, 200, 4, data, pi, false), -1);
  ck_assert_int_eq (errno, EIO);
  ck_assert_int_eq (nerrors, 1);
  ck_assert_ptr_nonnull (strstr (last_error, "marking LBA 200..203 dirty "
                                 "in "));
  ck_assert_int_eq (s->ops->zero (s, 200, 4, false), -1);
  ck_assert_int_eq (nerrors, 2);
  log_sync_hook = NULL;
  ck_assert_uint_eq (trace_find (0, T_DATA, false), ntrace);
  ck_assert_uint_eq (trace_find (0, T_PI, false), ntrace);
  ck_assert_uint_eq (check_blocks (s, 200, 4, 1, 0), 0);

  ntrace = 0;
  write_blocks (s, 200, 4, 2, 0);
  ck_assert_uint_lt (trace_find (0, T_LOG, true),
                     trace_find (0, T_DATA, false));
  ck_assert_int_eq (mark_of (3), 1);
  ck_assert_uint_eq (check_blocks (s, 200, 4, 2, 0), 0);
  s->ops->close (s);
  ck_assert_int_eq (nerrors, 2);
}
END_TEST

static sem_t sync_entered;      /* posted by hold_sync when it holds */
static sem_t sync_release;      /* posted to let hold_sync return */
static sem_t marked_written;    /* posted by write_marked when done */

/* A log_sync_hook: the sync of a mark waits for sync_release. */
static int
hold_sync (void)
{
  sem_post (&sync_entered);
  sem_wait (&sync_release);
  return 0;
}

/* A thread writing into region 5, not yet marked. */
static void *
write_unmarked (void *s)
{
  write_blocks (s, 320, 4, 1, 0);
  return NULL;
}

/* A thread writing into region 2, marked. */
static void *
write_marked (void *s)
{
  write_blocks (s, 130, 4, 2, 0);
  sem_post (&marked_written);
  return NULL;
}

/* While the mark of one write is being synced, a write into a region
 * marked already goes ahead: it does not wait for that sync. */
START_TEST (test_marked_writes_do_not_wait)
{
  struct store *s = open_store ();
  pthread_t unmarked, marked;
  struct timespec deadline;
  int waited;

  ck_assert_int_eq (sem_init (&sync_entered, 0, 0), 0);
  ck_assert_int_eq (sem_init (&sync_release, 0, 0), 0);
  ck_assert_int_eq (sem_init (&marked_written, 0, 0), 0);
  write_blocks (s, 130, 4, 1, 0);         /* region 2 */
  log_sync_hook = hold_sync;
  ck_assert_int_eq (pthread_create (&unmarked, NULL, write_unmarked, s), 0);
  sem_wait (&sync_entered);
  ck_assert_int_eq (pthread_create (&marked, NULL, write_marked, s), 0);
  clock_gettime (CLOCK_REALTIME, &deadline);
  deadline.tv_sec += 10;
  while ((waited = sem_timedwait (&marked_written, &deadline)) == -1
         && errno == EINTR)
    ;
  sem_post (&sync_release);
  pthread_join (unmarked, NULL);
  pthread_join (marked, NULL);
  log_sync_hook = NULL;
  ck_assert_msg (waited == 0, "a write into a marked region waited for "
                 "the sync of another region's mark");
  ck_assert_uint_eq (check_blocks (s, 130, 4, 2, 0), 0);
  ck_assert_uint_eq (check_blocks (s, 320, 4, 1, 0), 0);
  ck_assert_int_eq (mark_of (5), 1);
  s->ops->close (s);
  sem_destroy (&sync_entered);
  sem_destroy (&sync_release);
  sem_destroy (&marked_written);
  ck_assert_int_eq (nerrors, 0);
}
END_TEST

static Suite *
store_file_log_suite (void)
{
  Suite *s = suite_create ("store-file-log");
  TCase *tc = tcase_create ("log");

  tcase_add_checked_fixture (tc, make_dir, store_dir_remove);
  tcase_add_test (tc, test_created_clean);
  tcase_add_test (tc, test_marked_before_write);
  tcase_add_test (tc, test_flush_clears);
  tcase_add_test (tc, test_crash_recovered);
  tcase_add_test (tc, test_log_files);
  tcase_add_test (tc, test_mark_fails);
  tcase_add_test (tc, test_marked_writes_do_not_wait);
  suite_add_tcase (s, tc);
  return s;
}

int
main (void)
{
  SRunner *sr = srunner_create (store_file_log_suite ());
  int failed;

  test_tmpdir_enter ("test-store-file-log");
  srunner_run_all (sr, CK_NORMAL);
  failed = srunner_ntests_failed (sr);
  srunner_free (sr);
  test_tmpdir_leave ();
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
