/* SPDX-License-Identifier: BSD-3-Clause */
/* stabledif: file storage (nbdkit-stabledif-plugin(1), FILE STORAGE).
 *
 * PATH holds the raw data, block LBA at byte LBA * interval, so PATH is a
 * plain disk image any tool can read.  PATH.pi starts with a text header
 * recording the geometry (store-file-hdr.h); the tuples follow at offset
 * STORE_FILE_HDR_SIZE, LBA * tuple bytes further on, stored bit-inverted:
 * a hole in PATH.pi reads back as all-ones PI, the PI of a block never
 * written.  Both files are created sparse (ftruncate), zero punches holes
 * in both, so a device costs disk space only for what was written.
 *
 * Crash ordering.  A write first stores all-ones PI (zero bytes, stored)
 * over the blocks it covers, then the data, then the real PI; a zero
 * punches the PI before the data.  Whatever prefix of that sequence
 * reaches the files, each block holds either its old data with its old
 * PI, or escaped (all-ones) PI with some data, or the new data with the
 * new PI: never data with PI computed for other data.  The page cache
 * keeps that order across a crash of the process (SIGKILL); an operating
 * system crash or power loss keeps only what was flushed (flush and FUA
 * use fdatasync and RWF_DSYNC), in any order, so a block overwritten
 * since the last flush may then hold data with the PI of other data.
 * The dirty-region log PATH.log (store-file-log.h) marks, durably, every
 * region written since the last flush before the write goes ahead;
 * opening the files rebuilds the PI of the blocks of marked regions from
 * their data (store-file-recover.h), so after a power cut every block
 * reads as its old or its new contents.  Flushed writes always survive
 * intact.
 *
 * Concurrency.  One pair of file descriptors serves every connection;
 * pread/pwrite/fallocate on disjoint byte ranges are independent, so no
 * lock is taken here and the caller's range locks need no rounding
 * (granule 1).  fdatasync covers every connection's writes (multi_conn).
 * An exclusive flock on PATH keeps a second server from opening the same
 * files.
 *
 * Read-only.  Existing files that cannot be opened for writing (EACCES,
 * EPERM, EROFS: permissions, a read-only filesystem or snapshot) are
 * opened read-only and the store says so (store->read_only): the plugin
 * then serves a read-only disk, as nbdkit's file plugin does.  A shared
 * flock lets several read-only servers share the files while keeping a
 * writer out.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#include "store.h"
#include "store-file-hdr.h"
#include "store-file-io.h"
#include "store-file-log.h"
#include "store-file-recover.h"

/* Largest buffer of zeros written at once when holes cannot be punched. */
#define ZERO_CHUNK (1024 * 1024)

/* Largest run of tuples extent reads at once to look inside a PI page. */
#define EXTENT_SCAN_TUPLES 4096

/* Bytes of data recovery reads at once. */
#define RECOVER_CHUNK (1024 * 1024)

/* The file store. */
struct file_store {
  struct store s;               /* shared part; must be first */
  char *path;                   /* data file, as given by file= */
  char *pi_path;                /* PATH.pi */
  int data_fd;                  /* PATH, open read-write (read-only when
                                   s.read_only), flock'ed */
  int pi_fd;                    /* PATH.pi, or -1 when the tuple size is 0 */
  atomic_bool punch_ok;         /* fallocate(PUNCH_HOLE) works on these
                                   files (cleared on EOPNOTSUPP) */
  atomic_bool dsync_ok;         /* pwritev2(RWF_DSYNC) works (cleared on
                                   EOPNOTSUPP/ENOSYS: fdatasync instead) */
  struct store_file_log *log;   /* PATH.log, or NULL (no PI, read-only,
                                   or no_dirty_log) */
};

/* Byte offset of the tuple of LBA in PATH.pi. */
static inline off_t
pi_offset (const struct file_store *fs, uint64_t lba)
{
  return STORE_FILE_HDR_SIZE + (off_t) (lba * fs->s.tuple);
}

/* Invert LEN bytes from SRC into DST (which may be SRC): the stored form
 * of tuples, and back. */
static void
invert (uint8_t *dst, const uint8_t *src, size_t len)
{
  for (size_t i = 0; i < len; i++)
    dst[i] = ~src[i];
}

/* Write exactly LEN bytes at OFF; with DSYNC they are durable on return
 * (RWF_DSYNC where the kernel has it, else pwrite + fdatasync).  -1 with
 * errno on error. */
static int
full_pwrite (struct file_store *fs, int fd, const void *buf, size_t len,
             off_t off, bool dsync)
{
  if (dsync && atomic_load (&fs->dsync_ok)) {
    if (store_file_io_pwrite (fd, buf, len, off, RWF_DSYNC) == 0)
      return 0;
    if (errno != EOPNOTSUPP && errno != ENOSYS)
      return -1;
    atomic_store (&fs->dsync_ok, false);
  }
  if (store_file_io_pwrite (fd, buf, len, off, 0) == -1)
    return -1;
  return dsync ? fdatasync (fd) : 0;
}

/* Make LEN bytes at OFF read as zeros, releasing their space where the
 * filesystem can.  -1 with errno on error. */
static int
punch (struct file_store *fs, int fd, off_t off, uint64_t len)
{
  uint8_t *zeros;
  size_t chunk;

  if (len == 0)
    return 0;
  if (atomic_load (&fs->punch_ok)) {
    if (fallocate (fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                   off, len) == 0)
      return 0;
    if (errno != EOPNOTSUPP && errno != ENOSYS)
      return -1;
    atomic_store (&fs->punch_ok, false);
  }

  /* No holes on this filesystem: write zeros instead. */
  chunk = len < ZERO_CHUNK ? len : ZERO_CHUNK;
  zeros = calloc (1, chunk);
  if (zeros == NULL)
    return -1;
  while (len > 0) {
    size_t n = len < chunk ? len : chunk;

    if (full_pwrite (fs, fd, zeros, n, off, false) == -1) {
      int e = errno;

      free (zeros);
      errno = e;
      return -1;
    }
    off += n;
    len -= n;
  }
  free (zeros);
  return 0;
}

/* Report an I/O failure once, with the operation, the blocks and the
 * file, and return -1 with errno preserved. */
static int
io_error (struct file_store *fs, const char *what, const char *file,
          uint64_t lba, uint64_t nblocks)
{
  int e = errno;

  fs->s.error ("file=%s: %s of LBA %" PRIu64 "..%" PRIu64 " in %s: %s",
               fs->path, what, lba, lba + nblocks - 1, file, strerror (e));
  errno = e;
  return -1;
}

static int
file_read (struct store *s, uint64_t lba, uint64_t nblocks,
           uint8_t *data, uint8_t *pi)
{
  struct file_store *fs = (struct file_store *) s;

  if (store_file_io_pread (fs->data_fd, data, nblocks * s->geom.interval,
                           (off_t) (lba * s->geom.interval)) == -1)
    return io_error (fs, "reading data", fs->path, lba, nblocks);
  if (pi != NULL && s->tuple > 0) {
    if (store_file_io_pread (fs->pi_fd, pi, nblocks * s->tuple,
                             pi_offset (fs, lba)) == -1)
      return io_error (fs, "reading PI", fs->pi_path, lba, nblocks);
    invert (pi, pi, nblocks * s->tuple);
  }
  return 0;
}

static int
file_write_blocks (struct store *s, uint64_t lba, uint64_t nblocks,
                   const uint8_t *data, const uint8_t *pi, bool fua)
{
  struct file_store *fs = (struct file_store *) s;
  size_t pilen = nblocks * s->tuple;
  uint8_t *stored = NULL;

  if (pilen == 0) {
    if (full_pwrite (fs, fs->data_fd, data, nblocks * s->geom.interval,
                     (off_t) (lba * s->geom.interval), fua) == -1)
      return io_error (fs, "writing data", fs->path, lba, nblocks);
    return 0;
  }

  stored = calloc (1, pilen);
  if (stored == NULL)
    return io_error (fs, "allocating the PI buffer for writing", fs->pi_path,
                     lba, nblocks);

  /* 1. Escape the blocks (stored zeros = all-ones PI), so that no prefix
   *    of this write can leave new data under old PI. */
  if (full_pwrite (fs, fs->pi_fd, stored, pilen, pi_offset (fs, lba),
                   false) == -1) {
    io_error (fs, "writing PI", fs->pi_path, lba, nblocks);
    goto fail;
  }
  /* 2. The data.  On failure the blocks stay escaped: unchecked rather
   *    than checked against PI of other data. */
  if (full_pwrite (fs, fs->data_fd, data, nblocks * s->geom.interval,
                   (off_t) (lba * s->geom.interval), fua) == -1) {
    io_error (fs, "writing data", fs->path, lba, nblocks);
    goto fail;
  }
  /* 3. The PI that goes with it. */
  invert (stored, pi, pilen);
  if (full_pwrite (fs, fs->pi_fd, stored, pilen, pi_offset (fs, lba),
                   fua) == -1) {
    io_error (fs, "writing PI", fs->pi_path, lba, nblocks);
    goto fail;
  }
  free (stored);
  return 0;

 fail:;
  int e = errno;
  free (stored);
  errno = e;
  return -1;
}

static int
file_flush (struct store *s)
{
  struct file_store *fs = (struct file_store *) s;
  uint64_t g;

  if (s->read_only)
    return 0;                   /* nothing was or can be written */
  g = fs->log ? store_file_log_flush_begin (fs->log) : 0;
  if (fdatasync (fs->data_fd) == -1) {
    int e = errno;
    s->error ("file=%s: flushing %s: %s", fs->path, fs->path, strerror (e));
    errno = e;
    return -1;
  }
  if (fs->pi_fd >= 0 && fdatasync (fs->pi_fd) == -1) {
    int e = errno;
    s->error ("file=%s: flushing %s: %s", fs->path, fs->pi_path,
              strerror (e));
    errno = e;
    return -1;
  }
  if (fs->log && store_file_log_flush_end (fs->log, g) == -1)
    return -1;
  return 0;
}

static int
file_zero_blocks (struct store *s, uint64_t lba, uint64_t nblocks, bool fua)
{
  struct file_store *fs = (struct file_store *) s;

  /* PI first: a crash in between leaves old data unchecked, never zeros
   * checked against the old PI. */
  if (s->tuple > 0
      && punch (fs, fs->pi_fd, pi_offset (fs, lba), nblocks * s->tuple) == -1)
    return io_error (fs, "zeroing PI", fs->pi_path, lba, nblocks);
  if (punch (fs, fs->data_fd, (off_t) (lba * s->geom.interval),
             nblocks * s->geom.interval) == -1)
    return io_error (fs, "zeroing data", fs->path, lba, nblocks);
  if (fua)
    return file_flush (s);
  return 0;
}

/* Writes and zeroes go ahead once the log marks their regions dirty. */
static int
file_write (struct store *s, uint64_t lba, uint64_t nblocks,
            const uint8_t *data, const uint8_t *pi, bool fua)
{
  struct file_store *fs = (struct file_store *) s;
  int r;

  if (fs->log && store_file_log_begin (fs->log, lba, nblocks) == -1)
    return -1;
  r = file_write_blocks (s, lba, nblocks, data, pi, fua);
  if (fs->log)
    store_file_log_end (fs->log, lba, nblocks);
  return r;
}

static int
file_zero (struct store *s, uint64_t lba, uint64_t nblocks, bool fua)
{
  struct file_store *fs = (struct file_store *) s;
  int r;

  if (fs->log && store_file_log_begin (fs->log, lba, nblocks) == -1)
    return -1;
  r = file_zero_blocks (s, lba, nblocks, fua);
  if (fs->log)
    store_file_log_end (fs->log, lba, nblocks);
  return r;
}

/* Whether the stored tuple at P (TUPLE bytes) is all zeros, i.e. the
 * block has all-ones PI. */
static bool
stored_escape (const uint8_t *p, uint32_t tuple)
{
  for (uint32_t i = 0; i < tuple; i++)
    if (p[i] != 0)
      return false;
  return true;
}

/* NBLOCKS blocks from LBA whose data lies in a hole of PATH: a block is
 * unallocated only if its PI is all-ones too.  A hole in PATH.pi settles
 * that for whole tuples; allocated PI pages (one is shared by hundreds of
 * blocks) are read and the stored tuples looked at, at most
 * EXTENT_SCAN_TUPLES of them per call.  Sets *ALLOCATED and *RUN (at
 * least 1, at most NBLOCKS). */
static int
hole_extent (struct file_store *fs, uint64_t lba, uint64_t nblocks,
             bool *allocated, uint64_t *run)
{
  uint32_t t = fs->s.tuple;
  uint64_t pos = 0, scanned = 0;
  uint8_t *buf = NULL;

  *allocated = false;
  if (t == 0)
    pos = nblocks;              /* no PI: a data hole is all there is */
  while (pos < nblocks && scanned < EXTENT_SCAN_TUPLES) {
    off_t start = pi_offset (fs, lba + pos);
    off_t end = pi_offset (fs, lba + nblocks);
    off_t d, h;
    uint64_t m, k;

    d = lseek (fs->pi_fd, start, SEEK_DATA);
    if ((d == -1 && errno == ENXIO) || (d != -1 && d >= end)) {
      pos = nblocks;            /* all-ones PI to the end of the range */
      break;
    }
    if (d == -1)
      goto io_fail;
    if (d - start >= (off_t) t) {
      pos += (d - start) / t;   /* whole tuples in a hole */
      continue;
    }

    /* The tuple of LBA + POS lies in allocated space: read up to the
     * next hole. */
    h = lseek (fs->pi_fd, d, SEEK_HOLE);
    if (h == -1)
      goto io_fail;
    m = ((uint64_t) (h - start) + t - 1) / t;
    if (m > nblocks - pos)
      m = nblocks - pos;
    if (m > EXTENT_SCAN_TUPLES - scanned)
      m = EXTENT_SCAN_TUPLES - scanned;
    if (buf == NULL) {
      buf = malloc ((size_t) EXTENT_SCAN_TUPLES * t);
      if (buf == NULL)
        goto io_fail;
    }
    if (store_file_io_pread (fs->pi_fd, buf, m * t, start) == -1)
      goto io_fail;
    for (k = 0; k < m && stored_escape (buf + k * t, t); k++)
      ;
    if (k < m && pos + k == 0) {
      /* LBA itself carries PI: allocated, with its non-escaped run. */
      for (k = 1; k < m && !stored_escape (buf + k * t, t); k++)
        ;
      *allocated = true;
      pos = k;
      break;
    }
    pos += k;
    scanned += m;
    if (k < m)
      break;
  }
  free (buf);
  *run = pos;
  return 0;

 io_fail:;
  int e = errno;
  free (buf);
  errno = e;
  return io_error (fs, "looking for stored PI", fs->pi_path, lba, nblocks);
}

static int
file_extent (struct store *s, uint64_t lba, uint64_t nblocks,
             bool *allocated, uint64_t *run)
{
  struct file_store *fs = (struct file_store *) s;
  uint32_t iv = s->geom.interval;
  off_t off = (off_t) (lba * iv);
  off_t end = (off_t) ((lba + nblocks) * iv);
  off_t d, h;
  uint64_t n;

  d = lseek (fs->data_fd, off, SEEK_DATA);
  if (d == -1 && errno != ENXIO)
    return io_error (fs, "looking for data (SEEK_DATA)", fs->path,
                     lba, nblocks);
  if (d == -1 || d >= off + iv) {
    /* LBA lies wholly in a hole, and so do the blocks up to the one
     * holding the next data (or to the end of the request). */
    n = (d == -1 || d >= end) ? nblocks : (uint64_t) (d - off) / iv;
    return hole_extent (fs, lba, n, allocated, run);
  }

  /* Data within LBA: allocated up to the next hole, counting a block
   * allocated if any byte of it is. */
  h = lseek (fs->data_fd, d, SEEK_HOLE);
  if (h == -1)
    return io_error (fs, "looking for a hole (SEEK_HOLE)", fs->path,
                     lba, nblocks);
  n = ((uint64_t) h + iv - 1) / iv - lba;
  *allocated = true;
  *run = n < 1 ? 1 : n > nblocks ? nblocks : n;
  return 0;
}

static void
file_close (struct store *s)
{
  struct file_store *fs = (struct file_store *) s;

  /* A clean shutdown leaves everything durable, flushed or not, and the
   * log clean. */
  store_file_log_close (fs->log, file_flush (s) == 0);
  close (fs->data_fd);
  if (fs->pi_fd >= 0)
    close (fs->pi_fd);
  free (fs->path);
  free (fs->pi_path);
  free (fs);
}

static const struct store_ops file_ops = {
  .name = "file",
  .read = file_read,
  .write = file_write,
  .zero = file_zero,
  .flush = file_flush,
  .extent = file_extent,
  .close = file_close,
};

/* Create PATH.pi for FS with header H: written to PATH.pi.tmp, made
 * durable, then renamed into place, so a crash never leaves a PATH.pi
 * with a partial header.  Sets fs->pi_fd.  Reports errors. */
static int
create_pi (struct file_store *fs, const struct store_file_hdr *h)
{
  char hdr[STORE_FILE_HDR_SIZE];
  char *tmp = NULL;
  off_t pisize = pi_offset (fs, fs->s.geom.nblocks);
  int fd = -1;

  if (store_file_hdr_format (h, hdr, sizeof hdr) == -1) {
    fs->s.error ("file=%s: the geometry does not fit in the header of %s",
                 fs->path, fs->pi_path);
    errno = EINVAL;
    return -1;
  }
  if (asprintf (&tmp, "%s.tmp", fs->pi_path) == -1) {
    fs->s.error ("file=%s: %s", fs->path, strerror (errno));
    return -1;
  }
  fd = open (tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd == -1) {
    fs->s.error ("file=%s: creating %s: %s", fs->path, tmp, strerror (errno));
    goto fail;
  }
  if (full_pwrite (fs, fd, hdr, sizeof hdr, 0, false) == -1) {
    fs->s.error ("file=%s: writing the header of %s: %s", fs->path, tmp,
                 strerror (errno));
    goto fail;
  }
  if (ftruncate (fd, pisize) == -1) {
    fs->s.error ("file=%s: making %s %" PRIu64 " bytes: %s", fs->path, tmp,
                 (uint64_t) pisize, strerror (errno));
    goto fail;
  }
  if (fsync (fd) == -1 || fsync (fs->data_fd) == -1) {
    fs->s.error ("file=%s: syncing new files: %s", fs->path,
                 strerror (errno));
    goto fail;
  }
  if (rename (tmp, fs->pi_path) == -1) {
    fs->s.error ("file=%s: renaming %s to %s: %s", fs->path, tmp,
                 fs->pi_path, strerror (errno));
    goto fail;
  }
  if (store_file_io_sync_dir (fs->pi_path) == -1) {
    fs->s.error ("file=%s: syncing the directory of %s: %s", fs->path,
                 fs->pi_path, strerror (errno));
    fs->pi_fd = fd;             /* renamed: the caller removes it */
    free (tmp);
    return -1;
  }
  free (tmp);
  fs->pi_fd = fd;
  return 0;

 fail:;
  int e = errno;
  if (fd >= 0) {
    close (fd);
    unlink (tmp);
  }
  free (tmp);
  errno = e;
  return -1;
}

/* Whether an open for writing that failed with ERR should be retried
 * read-only: the file is there but not writable. */
static bool
open_read_only_instead (int err)
{
  return err == EACCES || err == EPERM || err == EROFS;
}

/* Open the existing PATH.pi of FS (read-only if fs->s.read_only; a
 * PATH.pi that cannot be written makes the store read-only) and check
 * that its header records the geometry WANT and that both files have the
 * sizes it implies.  Sets fs->pi_fd.  Reports errors. */
static int
open_pi (struct file_store *fs, const struct store_file_hdr *want,
         uint64_t data_size)
{
  char hdr[STORE_FILE_HDR_SIZE];
  char err[160], what[64], have_s[128], want_s[128];
  struct store_file_hdr have;
  struct stat st;
  off_t pisize = pi_offset (fs, fs->s.geom.nblocks);
  ssize_t r;

  fs->pi_fd = open (fs->pi_path,
                    (fs->s.read_only ? O_RDONLY : O_RDWR) | O_CLOEXEC);
  if (fs->pi_fd == -1 && open_read_only_instead (errno)) {
    /* Both files, or neither, are written. */
    fs->pi_fd = open (fs->pi_path, O_RDONLY | O_CLOEXEC);
    fs->s.read_only = fs->pi_fd >= 0;
  }
  if (fs->pi_fd == -1) {
    fs->s.error ("file=%s: opening %s: %s", fs->path, fs->pi_path,
                 strerror (errno));
    return -1;
  }
  memset (hdr, 0, sizeof hdr);
  r = store_file_io_pread_upto (fs->pi_fd, hdr, sizeof hdr, 0);
  if (r == -1) {
    fs->s.error ("file=%s: reading the header of %s: %s", fs->path,
                 fs->pi_path, strerror (errno));
    return -1;
  }
  if (store_file_hdr_parse (hdr, r, &have, err, sizeof err) == -1) {
    fs->s.error ("file=%s: %s is not a usable PI file: %s", fs->path,
                 fs->pi_path, err);
    errno = EINVAL;
    return -1;
  }
  if (store_file_hdr_diff (&have, want, what, sizeof what)) {
    store_file_hdr_describe (&have, have_s, sizeof have_s);
    store_file_hdr_describe (want, want_s, sizeof want_s);
    fs->s.error ("file=%s: existing geometry %s (recorded in %s) does not "
                 "match %s (%s %s); give the recorded parameters, or "
                 "remove %s and %s to start a new disk",
                 fs->path, have_s, fs->pi_path, want_s, what,
                 strchr (what, ',') != NULL ? "differ" : "differs",
                 fs->path, fs->pi_path);
    errno = EINVAL;
    return -1;
  }
  if (data_size != want->size) {
    store_file_hdr_describe (&have, have_s, sizeof have_s);
    fs->s.error ("file=%s: the data file is %" PRIu64 " bytes but %s "
                 "records %s (%" PRIu64 " bytes); was it truncated or "
                 "replaced?", fs->path, data_size, fs->pi_path, have_s,
                 want->size);
    errno = EINVAL;
    return -1;
  }
  if (fstat (fs->pi_fd, &st) == -1) {
    fs->s.error ("file=%s: %s: %s", fs->path, fs->pi_path, strerror (errno));
    return -1;
  }
  if (st.st_size != pisize) {
    fs->s.error ("file=%s: %s is %" PRIu64 " bytes, the recorded geometry "
                 "needs %" PRIu64 "; was it truncated or replaced?",
                 fs->path, fs->pi_path, (uint64_t) st.st_size,
                 (uint64_t) pisize);
    errno = EINVAL;
    return -1;
  }
  return 0;
}

/* Whether geometry G can be kept in files: both files' sizes fit in an
 * off_t and the format's name in the header of PATH.pi.  Sets *SIZE to
 * the data file's size.  Reports the problem, naming PATH, through
 * ERROR, and sets errno to EINVAL. */
static bool
geometry_fits (const struct store_geometry *g, const char *path,
               server_error_fn error, uint64_t *size)
{
  uint64_t pisize;

  if (g->format == NULL || g->interval == 0 || g->nblocks == 0
      || __builtin_mul_overflow (g->nblocks, (uint64_t) g->interval, size)
      || *size > INT64_MAX
      || __builtin_mul_overflow (g->nblocks,
                                 (uint64_t) g->format->tuple_size, &pisize)
      || pisize > INT64_MAX - STORE_FILE_HDR_SIZE
      || strlen (g->format->name) >= STORE_FILE_HDR_FORMAT_MAX) {
    error ("file=%s: the disk geometry cannot be stored in a file", path);
    errno = EINVAL;
    return false;
  }
  return true;
}

/* A file store of geometry G at PATH with no file open yet, or NULL
 * after reporting the error through ERROR. */
static struct file_store *
file_store_new (const struct store_geometry *g, const char *path,
                server_error_fn error)
{
  struct file_store *fs = calloc (1, sizeof *fs);

  if (fs == NULL) {
    error ("file=%s: %s", path, strerror (errno));
    return NULL;
  }
  fs->s.ops = &file_ops;
  fs->s.geom = *g;
  fs->s.tuple = g->format->tuple_size;
  fs->s.granule = 1;
  fs->s.multi_conn = true;
  fs->s.error = error;
  fs->data_fd = -1;
  fs->pi_fd = -1;
  atomic_init (&fs->punch_ok, true);
  atomic_init (&fs->dsync_ok, true);
  fs->path = strdup (path);
  if (fs->path == NULL || asprintf (&fs->pi_path, "%s.pi", path) == -1) {
    int e = errno;

    error ("file=%s: %s", path, strerror (e));
    free (fs->path);
    free (fs);
    errno = e;
    return NULL;
  }
  return fs;
}

/* Open the data file of FS read-write into fs->data_fd.  If neither it
 * nor PATH.pi (PI_EXISTS) exists, create it and set *CREATED; if it
 * exists but cannot be written, open it read-only and set
 * fs->s.read_only.  Reports errors. */
static int
open_data (struct file_store *fs, bool pi_exists, bool *created)
{
  const char *path = fs->path;

  fs->data_fd = open (path, O_RDWR | O_CLOEXEC);
  if (fs->data_fd == -1 && errno == ENOENT && !pi_exists) {
    fs->data_fd = open (path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    *created = fs->data_fd >= 0;
  }
  if (fs->data_fd == -1 && open_read_only_instead (errno)) {
    int rw_errno = errno;

    fs->data_fd = open (path, O_RDONLY | O_CLOEXEC);
    fs->s.read_only = fs->data_fd >= 0;
    if (fs->data_fd == -1 && errno == ENOENT)
      errno = rw_errno;         /* say why it could not be created */
  }
  if (fs->data_fd == -1) {
    if (errno == ENOENT && pi_exists)
      fs->s.error ("file=%s: %s exists but the data file %s does not; "
                   "restore it, or remove %s to start a new disk",
                   path, fs->pi_path, path, fs->pi_path);
    else
      fs->s.error ("file=%s: opening %s: %s", path, path, strerror (errno));
    return -1;
  }
  return 0;
}

/* Lock the data file of FS: one server per pair of files, since a
 * second one would tear blocks (exclusive flock); read-only servers may
 * share them (shared flock).  Reports errors. */
static int
lock_data (struct file_store *fs)
{
  const char *path = fs->path;

  if (flock (fs->data_fd, (fs->s.read_only ? LOCK_SH : LOCK_EX) | LOCK_NB)
      == -1) {
    if (errno == EWOULDBLOCK)
      fs->s.error ("file=%s: in use by another process (it holds a lock "
                   "on %s)", path, path);
    else
      fs->s.error ("file=%s: locking %s: %s", path, path, strerror (errno));
    return -1;
  }
  return 0;
}

/* The status of the data file of FS into *ST; -1 after reporting it if
 * it is not a regular file (errno EINVAL) or fstat fails. */
static int
stat_data (struct file_store *fs, struct stat *st)
{
  if (fstat (fs->data_fd, st) == -1) {
    fs->s.error ("file=%s: %s", fs->path, strerror (errno));
    return -1;
  }
  if (!S_ISREG (st->st_mode)) {
    fs->s.error ("file=%s: not a regular file", fs->path);
    errno = EINVAL;
    return -1;
  }
  return 0;
}

/* The data file of FS (DATA_SIZE bytes) has no PATH.pi: make the pair
 * a disk of geometry WANT (SIZE bytes of data).  An empty data file is
 * a new disk and grows to SIZE; a data file of exactly SIZE bytes is an
 * existing raw image, adopted with all-ones PI (every block reads as
 * escaped until written).  Anything else is probably a mistake, and no
 * PATH.pi can be made beside a read-only data file.  Then PATH.pi is
 * created; *PI_CREATED is set if a failure left it behind.  Reports
 * errors. */
static int
adopt_or_create (struct file_store *fs, const struct store_file_hdr *want,
                 uint64_t data_size, uint64_t size, bool *pi_created)
{
  const char *path = fs->path;
  char size_s[STORE_FILE_SIZE_STR_MAX];
  int e;

  if (fs->s.read_only) {
    fs->s.error ("file=%s: %s cannot be opened for writing, and there is "
                 "no %s to serve it read-only with: a new disk, or an "
                 "image adopted as one, needs %s created once with write "
                 "access", path, path, fs->pi_path, fs->pi_path);
    errno = EROFS;
    return -1;
  }
  store_file_hdr_size_str (size, size_s);
  if (data_size != 0 && data_size != size) {
    char have_s[STORE_FILE_SIZE_STR_MAX];

    store_file_hdr_size_str (data_size, have_s);
    fs->s.error ("file=%s: %s exists (%" PRIu64 " bytes) without %s, and "
                 "size=%s does not match it; give size=%s to use it as a "
                 "disk (its blocks read unchecked until written), or "
                 "choose another file", path, path, data_size, fs->pi_path,
                 size_s, have_s);
    errno = EINVAL;
    return -1;
  }
  if (data_size == 0 && ftruncate (fs->data_fd, size) == -1) {
    e = errno;
    fs->s.error ("file=%s: making the data file size=%s (%" PRIu64
                 " bytes): %s%s", path, size_s, size, strerror (e),
                 e == EFBIG ? " (larger than this filesystem's largest "
                 "file)" : "");
    errno = e;
    return -1;
  }
  if (create_pi (fs, want) == -1) {
    *pi_created = fs->pi_fd >= 0;
    return -1;
  }
  return 0;
}

/* Free FS after a failed open, closing its files and removing those the
 * open created (CREATED: the data file; PI_CREATED: PATH.pi).  Keeps
 * errno. */
static void
file_store_discard (struct file_store *fs, bool created, bool pi_created)
{
  const int e = errno;

  store_file_log_close (fs->log, false);
  if (pi_created)
    unlink (fs->pi_path);
  if (created)
    unlink (fs->path);
  if (fs->data_fd >= 0)
    close (fs->data_fd);
  if (fs->pi_fd >= 0)
    close (fs->pi_fd);
  free (fs->path);
  free (fs->pi_path);
  free (fs);
  errno = e;
}

/* Rebuild the PI of the NBLOCKS blocks at LBA (a dirty region of FS)
 * where it does not verify against the data, adding the count to
 * fs->s.recovered_blocks.  Reports errors. */
static int
recover_region (struct file_store *fs, uint64_t lba, uint64_t nblocks,
                uint8_t *data, uint8_t *pi)
{
  const uint32_t iv = fs->s.geom.interval, t = fs->s.tuple;
  const uint64_t chunk = RECOVER_CHUNK / iv > 0 ? RECOVER_CHUNK / iv : 1;

  while (nblocks > 0) {
    uint64_t n = nblocks < chunk ? nblocks : chunk, fixed;

    if (store_file_io_pread (fs->data_fd, data, n * iv,
                             (off_t) (lba * iv)) == -1)
      return io_error (fs, "recovering: reading data", fs->path, lba, n);
    if (store_file_io_pread (fs->pi_fd, pi, n * t, pi_offset (fs, lba)) == -1)
      return io_error (fs, "recovering: reading PI", fs->pi_path, lba, n);
    invert (pi, pi, n * t);
    fixed = store_file_recover_blocks (fs->s.geom.format, iv, lba, n,
                                       data, pi);
    if (fixed > 0) {
      invert (pi, pi, n * t);
      if (full_pwrite (fs, fs->pi_fd, pi, n * t, pi_offset (fs, lba),
                       false) == -1)
        return io_error (fs, "recovering: writing PI", fs->pi_path, lba, n);
    }
    fs->s.recovered_blocks += fixed;
    lba += n;
    nblocks -= n;
  }
  return 0;
}

/* Rebuild the PI of every dirty region of fs->log (after a crash), make
 * it durable, then write the log clean with regions of REGION_BYTES.
 * Reports errors. */
static int
recover_dirty (struct file_store *fs, uint64_t region_bytes)
{
  const uint32_t iv = fs->s.geom.interval;
  uint64_t chunk = RECOVER_CHUNK / iv > 0 ? RECOVER_CHUNK / iv : 1;
  uint64_t lba, n;
  uint8_t *data = NULL, *pi = NULL;
  int r = 0;

  if (store_file_log_ndirty (fs->log) > 0) {
    data = malloc (chunk * iv);
    pi = malloc (chunk * fs->s.tuple);
    if (data == NULL || pi == NULL) {
      r = io_error (fs, "allocating buffers to recover", fs->path, 0,
                    fs->s.geom.nblocks);
      goto out;
    }
  }
  for (uint64_t i = 0; i < fs->log->nregions && r == 0; i++)
    if (store_file_log_region (fs->log, i, &lba, &n)) {
      fs->s.recovered_regions++;
      r = recover_region (fs, lba, n, data, pi);
    }
  if (r == 0 && fs->s.recovered_regions > 0 && fdatasync (fs->pi_fd) == -1)
    r = io_error (fs, "recovering: syncing PI", fs->pi_path, 0,
                  fs->s.geom.nblocks);
  if (r == 0)
    r = store_file_log_reset (fs->log, region_bytes);
 out:
  free (data);
  free (pi);
  return r;
}

/* Open (or create) PATH.log for FS and recover what it marks dirty; a
 * read-only store only warns about dirty regions it cannot rebuild.
 * FRESH: PATH.pi was just made, so a PATH.log left over from an earlier
 * disk is removed first.  Does nothing for format none or with
 * O->no_dirty_log.  Reports errors. */
static int
open_log (struct file_store *fs, const struct store_file_opts *o,
          bool fresh)
{
  uint64_t region = o->region_bytes ? o->region_bytes
    : STORE_FILE_LOG_REGION_DEFAULT;
  char *log_path;
  uint64_t dirty;

  if (fs->s.tuple == 0 || o->no_dirty_log)
    return 0;
  if (region % fs->s.geom.interval != 0)
    region -= region % fs->s.geom.interval;
  if (region == 0)
    region = fs->s.geom.interval;
  if (asprintf (&log_path, "%s.log", fs->path) == -1) {
    fs->s.error ("file=%s: %s", fs->path, strerror (errno));
    return -1;
  }
  if (fs->s.read_only) {
    /* Look only: a log that marks regions cannot be acted on. */
    if (store_file_log_peek (log_path) > 0)
      fs->s.error ("file=%s: served read-only, the dirty regions that %s "
                   "may record (a crash) are not recovered: blocks written "
                   "just before it may fail their guard check",
                   fs->path, log_path);
    free (log_path);
    return 0;
  }
  if (fresh && unlink (log_path) == -1 && errno != ENOENT) {
    fs->s.error ("file=%s: removing the stale %s: %s", fs->path, log_path,
                 strerror (errno));
    free (log_path);
    return -1;
  }
  fs->log = store_file_log_open (log_path, fs->path, fs->s.geom.nblocks,
                                 fs->s.geom.interval, region, fs->s.error);
  free (log_path);
  if (fs->log == NULL)
    return -1;
  dirty = store_file_log_ndirty (fs->log);
  if (dirty == 0 && fs->log->region_blocks * fs->s.geom.interval == region)
    return 0;
  return recover_dirty (fs, region);
}

struct store *
store_file_open (const struct store_geometry *g, const char *path,
                 server_error_fn error)
{
  static const struct store_file_opts defaults;

  return store_file_open_opts (g, path, &defaults, error);
}

struct store *
store_file_open_opts (const struct store_geometry *g, const char *path,
                      const struct store_file_opts *o,
                      server_error_fn error)
{
  struct file_store *fs;
  struct store_file_hdr want;
  struct stat st;
  uint64_t size;
  bool pi_exists, created = false, pi_created = false;
  int r;

  if (!geometry_fits (g, path, error, &size))
    return NULL;
  fs = file_store_new (g, path, error);
  if (fs == NULL)
    return NULL;
  store_file_hdr_from_geometry (g, &want);

  /* Which of the two files exist decides between create, adopt, reopen. */
  pi_exists = access (fs->pi_path, F_OK) == 0;
  if (open_data (fs, pi_exists, &created) == -1 || lock_data (fs) == -1 ||
      stat_data (fs, &st) == -1) {
    file_store_discard (fs, created, false);
    return NULL;
  }
  if (pi_exists)
    r = open_pi (fs, &want, st.st_size);
  else
    r = adopt_or_create (fs, &want, st.st_size, size, &pi_created);
  if (r == 0)
    r = open_log (fs, o, !pi_exists);
  if (r == -1) {
    file_store_discard (fs, created, pi_created);
    return NULL;
  }
  return &fs->s;
}
