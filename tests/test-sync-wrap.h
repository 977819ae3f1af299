/* SPDX-License-Identifier: BSD-3-Clause */
/* stabledif: what reaches a file store's two files, and when it is made
 * durable, for the unit tests of flush and FUA.
 *
 * A test program that includes this header is linked with
 * -Wl,--wrap for pwrite, pwritev2, fallocate, fdatasync and fsync
 * (tests/Makefile.am), so those calls of its own objects and of the
 * server's static libraries go through the wrappers below.  Once
 * sync_track_start has named a file store's PATH, every call on a file
 * descriptor of PATH or PATH.pi (found with readlink /proc/self/fd/N) is
 * counted per file:
 *
 *   - a write (pwrite, pwritev2 without RWF_DSYNC, fallocate) leaves its
 *     byte range of the file dirty;
 *   - fdatasync or fsync makes the whole file clean;
 *   - a pwritev2 with RWF_DSYNC is durable itself and, as the kernel
 *     syncs the byte range it wrote, cleans the dirty ranges inside it;
 *     other dirty ranges stay dirty.
 *
 * A file that is not dirty when a request returns has nothing of it
 * waiting in the page cache.  sync_fail makes every fdatasync and fsync
 * of one of the files (and its RWF_DSYNC writes) fail with EIO;
 * sync_track.no_rwf_dsync makes RWF_DSYNC writes fail with EOPNOTSUPP,
 * as on a kernel without it.  Other descriptors, and everything before
 * sync_track_start or after sync_track_stop, pass straight through.
 * Single-threaded use only. */
#ifndef STABLEDIF_TEST_SYNC_WRAP_H
#define STABLEDIF_TEST_SYNC_WRAP_H

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

/* Dirty byte ranges remembered per file; more count as dirty until the
 * next fdatasync or fsync. */
#define SYNC_MAX_RANGES 64

/* The two files of a file store. */
enum sync_file { SYNC_DATA, SYNC_PI, SYNC_NFILES };

/* What happened to the tracked files since sync_track_start. */
struct sync_track {
  bool on;                      /* tracking the two files */
  char path[SYNC_NFILES][PATH_MAX]; /* PATH and PATH.pi, resolved */
  unsigned writes[SYNC_NFILES]; /* writes of any kind */
  unsigned dsync_writes[SYNC_NFILES]; /* of them, RWF_DSYNC writes that
                                         succeeded */
  unsigned syncs[SYNC_NFILES];  /* fdatasync and fsync calls that
                                   succeeded */
  struct {
    off_t start, end;           /* bytes [start, end) */
  } range[SYNC_NFILES][SYNC_MAX_RANGES]; /* dirty: written, not synced */
  unsigned ndirty[SYNC_NFILES]; /* ranges in range[] */
  unsigned overflow[SYNC_NFILES]; /* dirty ranges that did not fit */
  int fail;                     /* the file whose syncs fail with EIO;
                                   -1: none */
  unsigned failed;              /* syncs (and RWF_DSYNC writes) failed so */
  bool no_rwf_dsync;            /* RWF_DSYNC writes fail with EOPNOTSUPP */
};

static struct sync_track sync_track = { .fail = -1 };

ssize_t __real_pwrite (int fd, const void *buf, size_t len, off_t off);
ssize_t __real_pwritev2 (int fd, const struct iovec *iov, int n, off_t off,
                         int flags);
int __real_fallocate (int fd, int mode, off_t off, off_t len);
int __real_fdatasync (int fd);
int __real_fsync (int fd);
ssize_t __wrap_pwrite (int fd, const void *buf, size_t len, off_t off);
ssize_t __wrap_pwritev2 (int fd, const struct iovec *iov, int n, off_t off,
                         int flags);
int __wrap_fallocate (int fd, int mode, off_t off, off_t len);
int __wrap_fdatasync (int fd);
int __wrap_fsync (int fd);

/* Start counting the calls on DATA_PATH, which exists, and on
 * DATA_PATH.pi if it exists (format none has none), from zero, with no
 * failures armed. */
static void
sync_track_start (const char *data_path)
{
  char pi[PATH_MAX];

  memset (&sync_track, 0, sizeof sync_track);
  sync_track.fail = -1;
  snprintf (pi, sizeof pi, "%s.pi", data_path);
  if (realpath (data_path, sync_track.path[SYNC_DATA]) == NULL) {
    perror (data_path);
    abort ();
  }
  if (realpath (pi, sync_track.path[SYNC_PI]) == NULL)
    sync_track.path[SYNC_PI][0] = '\0';  /* matches no descriptor */
  sync_track.on = true;
}

/* Stop counting and failing. */
static void
sync_track_stop (void)
{
  sync_track.on = false;
  sync_track.fail = -1;
  sync_track.no_rwf_dsync = false;
}

/* Start counting again from zero, on the same files and with the same
 * failures armed. */
static void
sync_track_zero (void)
{
  memset (sync_track.writes, 0, sizeof sync_track.writes);
  memset (sync_track.dsync_writes, 0, sizeof sync_track.dsync_writes);
  memset (sync_track.syncs, 0, sizeof sync_track.syncs);
  memset (sync_track.ndirty, 0, sizeof sync_track.ndirty);
  memset (sync_track.overflow, 0, sizeof sync_track.overflow);
  sync_track.failed = 0;
}

/* Which tracked file FD is open on; -1: none, or not tracking. */
static int
sync_file_of (int fd)
{
  char link[64], target[PATH_MAX];
  ssize_t n;
  int i;

  if (!sync_track.on)
    return -1;
  snprintf (link, sizeof link, "/proc/self/fd/%d", fd);
  n = readlink (link, target, sizeof target - 1);
  if (n <= 0)
    return -1;
  target[n] = '\0';
  for (i = 0; i < SYNC_NFILES; i++)
    if (strcmp (target, sync_track.path[i]) == 0)
      return i;
  return -1;
}

/* Whether file F has written bytes no sync has covered yet. */
static bool
sync_dirty (enum sync_file f)
{
  return sync_track.ndirty[f] > 0 || sync_track.overflow[f] > 0;
}

/* Count a write of LEN bytes at OFF of file F (-1: untracked) that
 * succeeded; DSYNC: it was durable on return. */
static void
sync_count_write (int f, off_t off, off_t len, bool dsync)
{
  unsigned i, kept = 0;

  if (f < 0)
    return;
  sync_track.writes[f]++;
  if (!dsync) {
    if (sync_track.ndirty[f] == SYNC_MAX_RANGES) {
      sync_track.overflow[f]++;
      return;
    }
    sync_track.range[f][sync_track.ndirty[f]].start = off;
    sync_track.range[f][sync_track.ndirty[f]].end = off + len;
    sync_track.ndirty[f]++;
    return;
  }
  sync_track.dsync_writes[f]++;
  for (i = 0; i < sync_track.ndirty[f]; i++)
    if (sync_track.range[f][i].start < off
        || sync_track.range[f][i].end > off + len)
      sync_track.range[f][kept++] = sync_track.range[f][i];
  sync_track.ndirty[f] = kept;
}

/* A sync of file F (-1: untracked) about to be made: false (errno EIO)
 * if it must fail. */
static bool
sync_allowed (int f)
{
  if (f >= 0 && f == sync_track.fail) {
    sync_track.failed++;
    errno = EIO;
    return false;
  }
  return true;
}

ssize_t
__wrap_pwrite (int fd, const void *buf, size_t len, off_t off)
{
  ssize_t r = __real_pwrite (fd, buf, len, off);

  if (r >= 0)
    sync_count_write (sync_file_of (fd), off, r, false);
  return r;
}

ssize_t
__wrap_pwritev2 (int fd, const struct iovec *iov, int n, off_t off,
                 int flags)
{
  const int f = sync_file_of (fd);
  const bool dsync = (flags & RWF_DSYNC) != 0;
  ssize_t r;

  if (f >= 0 && dsync && sync_track.no_rwf_dsync) {
    errno = EOPNOTSUPP;
    return -1;
  }
  if (dsync && !sync_allowed (f))
    return -1;
  r = __real_pwritev2 (fd, iov, n, off, flags);
  if (r >= 0)
    sync_count_write (f, off, r, dsync);
  return r;
}

int
__wrap_fallocate (int fd, int mode, off_t off, off_t len)
{
  int r = __real_fallocate (fd, mode, off, len);

  if (r == 0)
    sync_count_write (sync_file_of (fd), off, len, false);
  return r;
}

/* fdatasync and fsync alike. */
static int
sync_wrapped (int fd, int (*real) (int))
{
  const int f = sync_file_of (fd);

  if (!sync_allowed (f))
    return -1;
  if (real (fd) == -1)
    return -1;
  if (f >= 0) {
    sync_track.syncs[f]++;
    sync_track.ndirty[f] = 0;
    sync_track.overflow[f] = 0;
  }
  return 0;
}

int
__wrap_fdatasync (int fd)
{
  return sync_wrapped (fd, __real_fdatasync);
}

int
__wrap_fsync (int fd)
{
  return sync_wrapped (fd, __real_fsync);
}

#endif /* STABLEDIF_TEST_SYNC_WRAP_H */
