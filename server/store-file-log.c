/* SPDX-License-Identifier: BSD-3-Clause */
/* stabledif: the dirty-region log of the file store, PATH.log.
 * See store-file-log.h for the layout and the rules. */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store-file-io.h"
#include "store-file-log.h"

/* Marks written at once when clearing or setting a run of them. */
#define LOG_MARK_CHUNK 4096

/* The values of log->marked[R]. */
#define LOG_CLEAR 0             /* clear (its mark in the file may still
                                   be set after a failure: a rescan) */
#define LOG_MARKED 1            /* set in the file, durably */
#define LOG_MARKING 2           /* being set by the thread holding the
                                   mark lock: not yet durable */

/* Report an error about the log, naming the store, and keep errno. */
#define log_err(log, fmt, ...)                                          \
  do {                                                                  \
    int e_ = errno;                                                     \
    (log)->error ("file=%s: " fmt, (log)->owner, ##__VA_ARGS__);        \
    errno = e_;                                                         \
  } while (0)

/* Read LEN bytes at OFF of FD into BUF, zero-filling what lies past the
 * end of the file.  -1 with errno on error. */
static int
log_pread (int fd, void *buf, size_t len, off_t off)
{
  ssize_t r = store_file_io_pread_upto (fd, buf, len, off);

  if (r == -1)
    return -1;
  memset ((uint8_t *) buf + r, 0, len - r);
  return 0;
}

/* Regions of REGION_BLOCKS blocks covering NBLOCKS blocks. */
static uint64_t
log_nregions (uint64_t nblocks, uint64_t region_blocks)
{
  return (nblocks + region_blocks - 1) / region_blocks;
}

/* Size the in-memory state of LOG for REGION_BLOCKS blocks per region,
 * all clean.  Reports errors. */
static int
log_alloc (struct store_file_log *log, uint64_t region_blocks)
{
  uint64_t n = log_nregions (log->nblocks, region_blocks);

  free (log->marked);
  free (log->inflight);
  free (log->last_end);
  log->region_blocks = region_blocks;
  log->nregions = n;
  log->marked = calloc (n, 1);
  log->inflight = calloc (n, sizeof *log->inflight);
  log->last_end = calloc (n, sizeof *log->last_end);
  if (log->marked == NULL || log->inflight == NULL || log->last_end == NULL) {
    log_err (log, "the marks of %" PRIu64 " regions of %s: %m", n,
             log->path);
    return -1;
  }
  return 0;
}

/* The header text for LOG's current regions, NUL-padded, into HDR. */
static void
log_hdr_format (const struct store_file_log *log,
                char hdr[STORE_FILE_LOG_HDR_SIZE])
{
  memset (hdr, 0, STORE_FILE_LOG_HDR_SIZE);
  snprintf (hdr, STORE_FILE_LOG_HDR_SIZE,
            STORE_FILE_LOG_MAGIC "\n"
            "region-bytes=%" PRIu64 "\n"
            "regions=%" PRIu64 "\n"
            "marks-at=%d\n",
            log->region_blocks * log->interval, log->nregions,
            STORE_FILE_LOG_HDR_SIZE);
}

/* The value of KEY= in the header text HDR, or -1 if it is missing or
 * not a decimal number. */
static int
log_hdr_number (const char *hdr, const char *key, uint64_t *out)
{
  char pat[32];
  const char *p;
  char *end;

  snprintf (pat, sizeof pat, "\n%s=", key);
  p = strstr (hdr, pat);
  if (p == NULL)
    return -1;
  p += strlen (pat);
  if (*p < '0' || *p > '9')
    return -1;
  errno = 0;
  *out = strtoull (p, &end, 10);
  return errno != 0 || *end != '\n' ? -1 : 0;
}

/* Parse the header HDR of LOG's file and size its state for the regions
 * it records.  Reports what is wrong. */
static int
log_hdr_parse (struct store_file_log *log, char hdr[STORE_FILE_LOG_HDR_SIZE])
{
  uint64_t bytes, regions, at;
  size_t magic = strlen (STORE_FILE_LOG_MAGIC);

  hdr[STORE_FILE_LOG_HDR_SIZE - 1] = '\0';
  if (strncmp (hdr, STORE_FILE_LOG_MAGIC "\n", magic + 1) != 0
      || log_hdr_number (hdr, "region-bytes", &bytes) == -1
      || log_hdr_number (hdr, "regions", &regions) == -1
      || log_hdr_number (hdr, "marks-at", &at) == -1) {
    log->error ("file=%s: %s is not a dirty-region log (it does not start "
                "with \"" STORE_FILE_LOG_MAGIC "\" and the keys "
                "region-bytes, regions, marks-at); if no crash happened "
                "since the disk was last written, remove it",
                log->owner, log->path);
    errno = EINVAL;
    return -1;
  }
  if (bytes == 0 || bytes % log->interval != 0 || at != STORE_FILE_LOG_HDR_SIZE
      || regions != log_nregions (log->nblocks, bytes / log->interval)) {
    log->error ("file=%s: %s records regions (region-bytes=%" PRIu64
                " regions=%" PRIu64 " marks-at=%" PRIu64 ") that do not fit "
                "this disk; was it copied from another disk?", log->owner,
                log->path, bytes, regions, at);
    errno = EINVAL;
    return -1;
  }
  return log_alloc (log, bytes / log->interval);
}

/* Read the marks of LOG's file into log->marked.  Reports errors. */
static int
log_load_marks (struct store_file_log *log)
{
  if (log_pread (log->fd, log->marked, log->nregions,
                 STORE_FILE_LOG_HDR_SIZE) == -1) {
    log_err (log, "reading the marks of %s: %m", log->path);
    return -1;
  }
  for (uint64_t r = 0; r < log->nregions; r++)
    log->marked[r] = log->marked[r] != 0 ? LOG_MARKED : LOG_CLEAR;
  return 0;
}

/* Write LOG's header and every mark (from log->marked) to FD, sized
 * exactly, and fdatasync it.  Reports errors. */
static int
log_write_all (struct store_file_log *log, int fd, const char *name)
{
  char hdr[STORE_FILE_LOG_HDR_SIZE];

  log_hdr_format (log, hdr);
  if (store_file_io_pwrite (fd, hdr, sizeof hdr, 0, 0) == -1
      || store_file_io_pwrite (fd, log->marked, log->nregions,
                               STORE_FILE_LOG_HDR_SIZE, 0) == -1
      || ftruncate (fd, STORE_FILE_LOG_HDR_SIZE + log->nregions) == -1
      || fdatasync (fd) == -1) {
    log_err (log, "writing %s: %m", name);
    return -1;
  }
  return 0;
}

/* Create LOG's file clean: written to PATH.log.tmp, synced, renamed into
 * place and the directory synced, so a crash never leaves half a log.
 * Sets log->fd.  Reports errors. */
static int
log_create (struct store_file_log *log)
{
  char *tmp = NULL;
  int fd = -1;

  if (asprintf (&tmp, "%s.tmp", log->path) == -1) {
    log_err (log, "%m");
    return -1;
  }
  fd = open (tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd == -1) {
    log_err (log, "creating %s: %m", tmp);
    goto fail;
  }
  if (log_write_all (log, fd, tmp) == -1)
    goto fail;
  if (rename (tmp, log->path) == -1) {
    log_err (log, "renaming %s to %s: %m", tmp, log->path);
    goto fail;
  }
  if (store_file_io_sync_dir (log->path) == -1) {
    log_err (log, "syncing the directory of %s: %m", log->path);
    free (tmp);
    close (fd);
    return -1;
  }
  free (tmp);
  log->fd = fd;
  return 0;

 fail:
  if (fd >= 0) {
    close (fd);
    unlink (tmp);
  }
  free (tmp);
  return -1;
}

/* Open the existing file of LOG and load its regions and marks; or, if
 * there is none, create it clean with regions of REGION_BLOCKS blocks.
 * Reports errors. */
static int
log_open_file (struct store_file_log *log, uint64_t region_blocks)
{
  char hdr[STORE_FILE_LOG_HDR_SIZE];

  log->fd = open (log->path, O_RDWR | O_CLOEXEC);
  if (log->fd == -1 && errno == ENOENT)
    return log_alloc (log, region_blocks) == -1 ? -1 : log_create (log);
  if (log->fd == -1) {
    log_err (log, "opening %s: %m", log->path);
    return -1;
  }
  if (log_pread (log->fd, hdr, sizeof hdr, 0) == -1) {
    log_err (log, "reading the header of %s: %m", log->path);
    return -1;
  }
  if (log_hdr_parse (log, hdr) == -1)
    return -1;
  return log_load_marks (log);
}

struct store_file_log *
store_file_log_open (const char *log_path, const char *owner,
                     uint64_t nblocks, uint32_t interval,
                     uint64_t region_bytes, server_error_fn error)
{
  struct store_file_log *log = calloc (1, sizeof *log);

  if (log == NULL) {
    error ("file=%s: %s", owner, strerror (errno));
    return NULL;
  }
  log->owner = owner;
  log->error = error;
  log->fd = -1;
  log->nblocks = nblocks;
  log->interval = interval;
  pthread_mutex_init (&log->lock, NULL);
  pthread_mutex_init (&log->mark_lock, NULL);
  log->path = strdup (log_path);
  if (log->path == NULL) {
    log_err (log, "%m");
    store_file_log_close (log, false);
    return NULL;
  }
  if (region_bytes < interval || region_bytes % interval != 0) {
    log->error ("file=%s: dirty-log regions of %" PRIu64 " bytes are not "
                "a multiple of interval=%" PRIu32, owner, region_bytes,
                interval);
    errno = EINVAL;
    store_file_log_close (log, false);
    return NULL;
  }
  if (log_open_file (log, region_bytes / interval) == -1) {
    store_file_log_close (log, false);
    return NULL;
  }
  return log;
}

uint64_t
store_file_log_peek (const char *log_path)
{
  uint8_t buf[LOG_MARK_CHUNK];
  uint64_t n = 0;
  off_t off = STORE_FILE_LOG_HDR_SIZE;
  ssize_t r;
  int fd = open (log_path, O_RDONLY | O_CLOEXEC);

  if (fd == -1)
    return 0;
  while ((r = pread (fd, buf, sizeof buf, off)) > 0) {
    for (ssize_t i = 0; i < r; i++)
      n += buf[i] != 0;
    off += r;
  }
  close (fd);
  return n;
}

uint64_t
store_file_log_ndirty (struct store_file_log *log)
{
  uint64_t n = 0;

  pthread_mutex_lock (&log->lock);
  for (uint64_t r = 0; r < log->nregions; r++)
    n += log->marked[r] != LOG_CLEAR;
  pthread_mutex_unlock (&log->lock);
  return n;
}

bool
store_file_log_region (struct store_file_log *log, uint64_t r,
                       uint64_t *lba, uint64_t *nblocks)
{
  bool dirty;

  pthread_mutex_lock (&log->lock);
  *lba = r * log->region_blocks;
  *nblocks = log->nblocks - *lba < log->region_blocks
    ? log->nblocks - *lba : log->region_blocks;
  dirty = log->marked[r] != LOG_CLEAR;
  pthread_mutex_unlock (&log->lock);
  return dirty;
}

int
store_file_log_reset (struct store_file_log *log, uint64_t region_bytes)
{
  int r;

  pthread_mutex_lock (&log->lock);
  r = log_alloc (log, region_bytes / log->interval);
  if (r == 0)
    r = log_write_all (log, log->fd, log->path);
  pthread_mutex_unlock (&log->lock);
  return r;
}

/* The regions [*R0, *R1] holding NBLOCKS blocks at LBA. */
static void
log_span (const struct store_file_log *log, uint64_t lba, uint64_t nblocks,
          uint64_t *r0, uint64_t *r1)
{
  *r0 = lba / log->region_blocks;
  *r1 = (lba + nblocks - 1) / log->region_blocks;
}

/* Whether every region of [R0, R1] is marked durably; if so, counts a
 * write in flight in each.  Called with the lock held. */
static bool
log_enter (struct store_file_log *log, uint64_t r0, uint64_t r1)
{
  uint64_t r;

  for (r = r0; r <= r1; r++)
    if (log->marked[r] != LOG_MARKED)
      return false;
  for (r = r0; r <= r1; r++)
    log->inflight[r]++;
  return true;
}

/* Claim, as LOG_MARKING, the clear regions of [R0, R1] (at least one,
 * when log_enter just failed: only the holder of the mark lock claims),
 * and set [*C0, *C1] to the regions from the first claimed to the last.
 * Called with the lock and the mark lock held. */
static void
log_claim (struct store_file_log *log, uint64_t r0, uint64_t r1,
           uint64_t *c0, uint64_t *c1)
{
  *c0 = r1;
  *c1 = r0;
  for (uint64_t r = r0; r <= r1; r++)
    if (log->marked[r] == LOG_CLEAR) {
      log->marked[r] = LOG_MARKING;
      if (r < *c0)
        *c0 = r;
      if (r > *c1)
        *c1 = r;
    }
}

/* Write ones over the marks of regions [C0, C1] of LOG and fdatasync
 * them, without the lock (the mark lock held).  Regions in the range
 * that were marked already get their mark written again; one a flush
 * clears meanwhile may keep a set mark in the file, which costs a
 * rescan, no more.  -1 with errno. */
static int
log_write_marks (struct store_file_log *log, uint64_t c0, uint64_t c1)
{
  uint8_t ones[LOG_MARK_CHUNK];
  uint64_t r = c0;

  memset (ones, LOG_MARKED, sizeof ones);
  while (r <= c1) {
    size_t n = c1 - r + 1 < sizeof ones ? c1 - r + 1 : sizeof ones;

    if (store_file_io_pwrite (log->fd, ones, n, STORE_FILE_LOG_HDR_SIZE + r,
                              0) == -1)
      return -1;
    r += n;
  }
  return fdatasync (log->fd);
}

int
store_file_log_begin (struct store_file_log *log, uint64_t lba,
                      uint64_t nblocks)
{
  uint64_t r0, r1, c0, c1;
  bool entered;
  int e;

  /* The common case: every region is marked already. */
  log_span (log, lba, nblocks, &r0, &r1);
  pthread_mutex_lock (&log->lock);
  entered = log_enter (log, r0, r1);
  pthread_mutex_unlock (&log->lock);
  if (entered)
    return 0;

  /* Some region is not: mark it, one marker at a time, syncing without
   * the lock, so that writes into marked regions go on meanwhile.  A
   * region a flush clears while this one is marked is claimed again on
   * the next round. */
  pthread_mutex_lock (&log->mark_lock);
  for (;;) {
    pthread_mutex_lock (&log->lock);
    entered = log_enter (log, r0, r1);
    if (!entered)
      log_claim (log, r0, r1, &c0, &c1);
    pthread_mutex_unlock (&log->lock);
    if (entered)
      break;
    e = log_write_marks (log, c0, c1) == -1 ? errno : 0;
    pthread_mutex_lock (&log->lock);
    for (uint64_t r = c0; r <= c1; r++)
      if (log->marked[r] == LOG_MARKING)
        log->marked[r] = e == 0 ? LOG_MARKED : LOG_CLEAR;
    pthread_mutex_unlock (&log->lock);
    if (e != 0) {
      pthread_mutex_unlock (&log->mark_lock);
      errno = e;
      log_err (log, "marking LBA %" PRIu64 "..%" PRIu64 " dirty in %s: %m",
               lba, lba + nblocks - 1, log->path);
      return -1;
    }
  }
  pthread_mutex_unlock (&log->mark_lock);
  return 0;
}

void
store_file_log_end (struct store_file_log *log, uint64_t lba,
                    uint64_t nblocks)
{
  uint64_t r0, r1;

  log_span (log, lba, nblocks, &r0, &r1);
  pthread_mutex_lock (&log->lock);
  for (uint64_t r = r0; r <= r1; r++) {
    log->inflight[r]--;
    log->last_end[r] = log->gen;
  }
  pthread_mutex_unlock (&log->lock);
}

uint64_t
store_file_log_flush_begin (struct store_file_log *log)
{
  uint64_t g;

  pthread_mutex_lock (&log->lock);
  g = ++log->gen;
  pthread_mutex_unlock (&log->lock);
  return g;
}

/* Write zeros over the marks of regions [R0, R1) of LOG. */
static int
log_clear_run (struct store_file_log *log, uint64_t r0, uint64_t r1)
{
  static const uint8_t zeros[LOG_MARK_CHUNK];

  while (r0 < r1) {
    size_t n = r1 - r0 < LOG_MARK_CHUNK ? r1 - r0 : LOG_MARK_CHUNK;

    if (store_file_io_pwrite (log->fd, zeros, n, STORE_FILE_LOG_HDR_SIZE + r0,
                              0) == -1)
      return -1;
    r0 += n;
  }
  return 0;
}

/* Whether LOG's flush G (whose syncs succeeded) may clear region R: no
 * write in flight, and its last write ended before flush
 * G - STORE_FILE_LOG_IDLE_FLUSHES began (so flush G covered it, and the
 * region sat idle since).  G = 0 (close): any region without a write in
 * flight. */
static bool
log_clearable (const struct store_file_log *log, uint64_t r, uint64_t g)
{
  if (log->marked[r] != LOG_MARKED || log->inflight[r] > 0)
    return false;
  return g == 0 || log->last_end[r] + STORE_FILE_LOG_IDLE_FLUSHES < g;
}

/* Clear the marks flush G may clear (see log_clearable), in runs.
 * Called with the lock held.  Reports errors. */
static int
log_clear (struct store_file_log *log, uint64_t g)
{
  uint64_t r = 0, start;

  while (r < log->nregions) {
    if (!log_clearable (log, r, g)) {
      r++;
      continue;
    }
    for (start = r; r < log->nregions && log_clearable (log, r, g); r++)
      log->marked[r] = LOG_CLEAR;
    if (log_clear_run (log, start, r) == -1) {
      /* The file may still say dirty: that costs a rescan, no more. */
      log_err (log, "clearing the marks of regions %" PRIu64 "..%" PRIu64
               " in %s: %m", start, r - 1, log->path);
      return -1;
    }
  }
  return 0;
}

int
store_file_log_flush_end (struct store_file_log *log, uint64_t g)
{
  int r;

  pthread_mutex_lock (&log->lock);
  r = log_clear (log, g);
  pthread_mutex_unlock (&log->lock);
  return r;
}

void
store_file_log_close (struct store_file_log *log, bool clean)
{
  if (log == NULL)
    return;
  if (clean && log->fd >= 0 && log->marked != NULL
      && log_clear (log, 0) == 0 && fdatasync (log->fd) == -1)
    log_err (log, "syncing %s: %m", log->path);
  if (log->fd >= 0)
    close (log->fd);
  pthread_mutex_destroy (&log->lock);
  pthread_mutex_destroy (&log->mark_lock);
  free (log->marked);
  free (log->inflight);
  free (log->last_end);
  free (log->path);
  free (log);
}
