/* SPDX-License-Identifier: BSD-3-Clause */
/* stabledif: the emulated disk and its two views (see disk.h).
 *
 * data view: plain bytes.  Whole intervals of a write get PI generated
 * from the caller's buffer and are stored as they are; partial intervals
 * at the head or tail are read-modify-write (the stored block is verified
 * first, then merged and given new PI).  Reads verify the stored PI of
 * every block they touch.
 *
 * dif view: extended blocks (interval + tuple).  A write is verified
 * block by block before the lock is even taken; if any block fails,
 * nothing is stored.  Reads return stored data and PI unchecked.
 *
 * Every request takes one range lock over the blocks it touches, rounded
 * out to the store's granule: shared for reads, exclusive for anything
 * that stores.  It covers data and PI together, so they never disagree.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "disk.h"

/* The largest interval; partial blocks are merged in stack buffers. */
#define DISK_INTERVAL_MAX 4096

/* Events kept in memory unless the configuration says otherwise. */
#define DISK_EVENT_RING_DEFAULT 1024

/* Report one error through the configured function.  The message is
 * formatted here so that every error goes out in a single call. */
static void disk_error (const struct disk_config *cfg, const char *fmt, ...)
  __attribute__ ((format (printf, 2, 3)));

static void
disk_error (const struct disk_config *cfg, const char *fmt, ...)
{
  char msg[512];
  va_list ap;

  va_start (ap, fmt);
  vsnprintf (msg, sizeof msg, fmt, ap);
  va_end (ap);
  cfg->error ("%s", msg);
}

/* Report that HELD lines of PI failures were held back by d->pi_log
 * (nothing if HELD is 0). */
static void
report_held (const struct disk *d, uint64_t held)
{
  if (held > 0)
    disk_error (&d->cfg, "%" PRIu64 " similar messages suppressed (PI "
                "failures; the counters and events record every one)",
                held);
}

/* Report the PI failure of one request, as disk_error does, unless
 * d->pi_log holds the line back; first the summary of the lines an
 * interval that has ended held back.  The caller counts and records the
 * failure whether or not its line is logged. */
static void disk_pi_error (struct disk *d, const char *fmt, ...)
  __attribute__ ((format (printf, 2, 3)));

static void
disk_pi_error (struct disk *d, const char *fmt, ...)
{
  char msg[512];
  uint64_t held;
  bool allow = ratelimit_allow (&d->pi_log, &held);
  va_list ap;

  report_held (d, held);
  if (!allow)
    return;
  va_start (ap, fmt);
  vsnprintf (msg, sizeof msg, fmt, ap);
  va_end (ap);
  d->cfg.error ("%s", msg);
}

int
disk_config_check (const struct disk_config *cfg)
{
  const struct pi_format *f = cfg->format;
  uint64_t nblocks, ext;

  if (f == NULL) {
    disk_error (cfg, "format: no format given");
    return -1;
  }
  if (cfg->interval != 512 && cfg->interval != 4096) {
    disk_error (cfg, "interval: must be 512 or 4096 (not %" PRIu32 ")",
                cfg->interval);
    return -1;
  }
  if (f->needs_4k && cfg->interval != 4096) {
    disk_error (cfg, "format: %s needs interval=4096", f->name);
    return -1;
  }
  if (cfg->size == 0) {
    disk_error (cfg, "size: must not be 0");
    return -1;
  }
  if (cfg->size % cfg->interval != 0) {
    disk_error (cfg, "size: must be a multiple of the interval (%" PRIu32
                "), %" PRIu64 " is not", cfg->interval, cfg->size);
    return -1;
  }
  /* Both views must fit in an NBD (signed 64-bit) export size. */
  nblocks = cfg->size / cfg->interval;
  ext = cfg->interval + f->tuple_size;
  if (cfg->size > INT64_MAX || nblocks > INT64_MAX / ext) {
    disk_error (cfg, "size: %" PRIu64 " is too large (the dif view would "
                "exceed 2^63-1 bytes)", cfg->size);
    return -1;
  }
  if (cfg->has_app) {
    if (f->type == PI_TYPE_NONE) {
      disk_error (cfg, "app-tag: format none has no app tag");
      return -1;
    }
    if (cfg->app_mask == 0) {
      disk_error (cfg, "app-tag: mask 0 would check no bits of the app tag");
      return -1;
    }
    if (cfg->app_tag == 0xffff) {
      disk_error (cfg, "app-tag: 0xffff is the escape value (blocks "
                  "carrying it are never checked)");
      return -1;
    }
  }
  return 0;
}

struct disk *
disk_open (const struct disk_config *cfg)
{
  struct disk *d;
  struct store_geometry g;
  struct store_file_opts fo = { 0 };
  struct stats_tally t;         /* the blocks the store recovered */

  if (disk_config_check (cfg) == -1) {
    errno = EINVAL;
    return NULL;
  }

  d = calloc (1, sizeof *d);
  if (d == NULL) {
    cfg->error ("disk: %m");
    return NULL;
  }
  d->cfg = *cfg;
  d->cfg.file = d->cfg.events_path = NULL;
  if ((cfg->file && (d->cfg.file = strdup (cfg->file)) == NULL) ||
      (cfg->events_path &&
       (d->cfg.events_path = strdup (cfg->events_path)) == NULL)) {
    cfg->error ("disk: %m");
    goto err_free;
  }
  if (d->cfg.event_ring == 0)
    d->cfg.event_ring = DISK_EVENT_RING_DEFAULT;

  d->nblocks = cfg->size / cfg->interval;
  d->pi.format = cfg->format;
  d->pi.interval = cfg->interval;
  d->pi.check_app = cfg->has_app;
  d->pi.app_tag = cfg->has_app ? cfg->app_tag : 0;
  d->pi.app_mask = cfg->has_app ? cfg->app_mask : 0;

  g.nblocks = d->nblocks;
  g.interval = cfg->interval;
  g.format = cfg->format;
  fo.no_dirty_log = cfg->no_dirty_log;
  d->store = cfg->file
    ? store_file_open_opts (&g, cfg->file, &fo, cfg->error)
    : store_memory_open (&g, cfg->error);
  if (d->store == NULL)
    goto err_free;

  if (stats_init (&d->stats, d->cfg.event_ring) == -1) {
    cfg->error ("the ring of the last %zu events: %m", d->cfg.event_ring);
    goto err_store;
  }
  stats_tally_none (&t);
  t.blocks_recovered = d->store->recovered_blocks;
  stats_commit (&d->stats, 0, &t);
  if (cfg->events_path &&
      stats_open_events (&d->stats, cfg->events_path) == -1) {
    cfg->error ("events=%s: %m", cfg->events_path);
    stats_destroy (&d->stats);
    goto err_store;
  }
  rangelock_init (&d->locks);
  ratelimit_init (&d->pi_log, cfg->log_burst,
                  cfg->log_interval * UINT64_C (1000000000), NULL, NULL);
  return d;

 err_store:
  d->store->ops->close (d->store);
 err_free:
  free ((char *) d->cfg.file);
  free ((char *) d->cfg.events_path);
  free (d);
  return NULL;
}

void
disk_close (struct disk *d)
{
  if (d == NULL)
    return;
  report_held (d, ratelimit_flush (&d->pi_log));
  ratelimit_destroy (&d->pi_log);
  d->store->ops->close (d->store);
  stats_destroy (&d->stats);
  rangelock_destroy (&d->locks);
  free ((char *) d->cfg.file);
  free ((char *) d->cfg.events_path);
  free (d);
}

/* Bytes of one block in VIEW: the interval, or interval + tuple. */
static uint64_t
view_block (const struct disk *d, enum profile_view view)
{
  return view == PROFILE_VIEW_DIF ? pi_ext_size (&d->pi) : d->pi.interval;
}

uint64_t
disk_view_size (const struct disk *d, enum profile_view view)
{
  return d->nblocks * view_block (d, view);
}

uint32_t
disk_preferred_request (const struct disk *d)
{
  return d->pi.interval;
}

uint32_t
disk_max_request (const struct disk *d, enum profile_view view,
                  uint32_t limit)
{
  const uint64_t unit = view == PROFILE_VIEW_DIF ? view_block (d, view) : 1;

  return (uint32_t) (limit / unit * unit);
}

bool
disk_multi_conn (const struct disk *d)
{
  return d->store->multi_conn;
}

void
disk_profile (const struct disk *d, enum profile_view view,
              struct profile *out)
{
  profile_init (out, view, d->cfg.format, d->cfg.interval);
  out->has_app = d->cfg.has_app;
  out->app_tag = d->cfg.has_app ? d->cfg.app_tag : 0;
  out->app_mask = d->cfg.has_app ? d->cfg.app_mask : 0;
}

/* Whether the disk has PI at all. */
static inline bool
has_pi (const struct disk *d)
{
  return d->pi.format->tuple_size > 0;
}

/* Lock the granules covering NBLOCKS blocks from LBA. */
static void
lock_blocks (struct disk *d, struct range_held *h, uint64_t lba,
             uint64_t nblocks, bool exclusive)
{
  uint64_t g = d->store->granule;

  rangelock_acquire (&d->locks, h, lba / g, (lba + nblocks - 1) / g + 1,
                     exclusive);
}

/* Release H, keeping errno (the store's reason for a failure). */
static void
unlock_blocks (struct disk *d, struct range_held *h)
{
  int e = errno;

  rangelock_release (&d->locks, h);
  errno = e;
}

/* Report that WHAT cannot be done on a read-only disk; -1 with errno
 * EROFS. */
static int
refuse_read_only (struct disk *d, const char *what)
{
  disk_error (&d->cfg, "%s: the disk is read-only (file=%s could not be "
              "opened for writing)", what, d->cfg.file ? d->cfg.file : "");
  errno = EROFS;
  return -1;
}

/* Check that [OFFSET, OFFSET+COUNT) lies inside the view and, on the dif
 * view (and for whole-block operations), that it is made of whole
 * blocks (-1 with errno EINVAL otherwise), and that a read-only disk is
 * only read or flushed (-1 with errno EROFS).  Reports the error. */
static int
check_request (struct disk *d, const struct disk_io *io, enum stats_op op,
               uint64_t count, uint64_t offset)
{
  uint64_t size = disk_view_size (d, io->view);
  uint64_t ext = view_block (d, io->view);

  if (count > size || offset > size - count) {
    disk_error (&d->cfg, "%s view %s: offset %" PRIu64 " + count %" PRIu64
                " is beyond the end of the view (%" PRIu64 " bytes)",
                profile_view_name (io->view), stats_op_name (op),
                offset, count, size);
    errno = EINVAL;
    return -1;
  }
  if (io->view == PROFILE_VIEW_DIF && (offset % ext || count % ext)) {
    disk_error (&d->cfg, "dif view %s: offset %" PRIu64 " and count %"
                PRIu64 " must be multiples of the extended block size %"
                PRIu64 " (interval %" PRIu32 " + tuple %u)",
                stats_op_name (op), offset, count, ext, d->pi.interval,
                d->pi.format->tuple_size);
    errno = EINVAL;
    return -1;
  }
  /* nbdkit refuses these itself when can_write is false; this keeps a
   * read-only store from being asked, whoever the caller is. */
  if (op != STATS_OP_READ && op != STATS_OP_FLUSH && d->store->read_only) {
    char what[64];

    snprintf (what, sizeof what, "%s view %s", profile_view_name (io->view),
              stats_op_name (op));
    return refuse_read_only (d, what);
  }
  return 0;
}

bool
disk_read_only (const struct disk *d)
{
  return d->store->read_only;
}

void
disk_recovered (const struct disk *d, uint64_t *blocks, uint64_t *regions)
{
  *blocks = d->store->recovered_blocks;
  *regions = d->store->recovered_regions;
}

/* Failed PI checks of one request: counted, recorded as events, and
 * summed up for the single error message. */
struct failures {
  struct disk *d;               /* the disk */
  const struct disk_io *io;     /* who asked */
  struct stats_tally *t;        /* the request's counts */
  enum stats_op op;             /* request operation */
  uint64_t offset, length;      /* request, bytes in its view */
  bool host_pi;                 /* the host's PI failed (write_errors);
                                   else stored PI (read_errors) */
  uint64_t count;               /* blocks failed so far */
  struct pi_error first;        /* the first (lowest LBA) failure */
};

/* pi_error_fn: count and record one failed block. */
static void
on_failure (void *opaque, const struct pi_error *err)
{
  struct failures *f = opaque;
  struct stats_event ev = {
    .conn = f->io->conn,
    .view = f->io->view,
    .op = f->op,
    .lba = err->lba,
    .check = err->check,
    .expected = err->expected,
    .actual = err->actual,
    .offset = f->offset,
    .length = f->length,
  };

  if (f->count++ == 0)
    f->first = *err;
  f->t->rare = true;
  if (f->host_pi)
    f->t->write_errors[err->check]++;
  else
    f->t->read_errors[err->check]++;
  stats_record (&f->d->stats, &ev);
}

/* Count what a verify saw into T. */
static void
count_verified (struct stats_tally *t, const struct pi_verify_stats *vs)
{
  t->blocks_verified += vs->verified;
  t->blocks_escaped += vs->escaped;
}

/* Verify one stored block (data BLK, tuple TUP) at LBA, counting it and
 * any failure into F. */
static void
verify_one (struct disk *d, struct failures *f, const uint8_t *blk,
            const uint8_t *tup, uint64_t lba)
{
  struct pi_error err;
  bool escaped = false;

  if (pi_verify_block (&d->pi, blk, tup, lba, &escaped, &err) != PI_CHECK_OK)
    on_failure (f, &err);
  if (escaped)
    f->t->blocks_escaped++;
  else
    f->t->blocks_verified++;
}

/* "LBA 12 fails the guard check: expected 0x1234, found 0x1235" */
static void
describe_failure (const struct failures *f, char *buf, size_t len)
{
  snprintf (buf, len, "LBA %" PRIu64 " fails the %s check: expected 0x%"
            PRIx64 ", found 0x%" PRIx64,
            f->first.lba, pi_check_name (f->first.check),
            f->first.expected, f->first.actual);
}

/* How the blocks of a data-view byte range split up: a partial block at
 * the head, whole blocks in the middle, a partial block at the tail. */
struct span {
  uint64_t head_lba;            /* block of the partial head */
  uint32_t head_off;            /* where the range starts inside it */
  uint32_t head_len;            /* bytes of it in the range; 0: no head */
  uint64_t mid_lba;             /* first whole block */
  uint64_t mid_n;               /* number of whole blocks */
  uint64_t mid_at;              /* where they start in the caller's buffer */
  uint64_t tail_lba;            /* block of the partial tail */
  uint32_t tail_len;            /* bytes of it in the range; 0: no tail */
  uint64_t first, nblocks;      /* every block touched */
};

/* Split [OFFSET, OFFSET+COUNT) (COUNT > 0) into a span. */
static void
span_of (const struct disk *d, uint64_t count, uint64_t offset,
         struct span *s)
{
  const uint64_t iv = d->pi.interval;
  const uint64_t end = offset + count;
  const uint64_t last = (end - 1) / iv;

  memset (s, 0, sizeof *s);
  s->first = offset / iv;
  s->nblocks = last - s->first + 1;
  s->head_off = offset % iv;
  if (s->head_off != 0 || end < (s->first + 1) * iv) {
    s->head_lba = s->first;
    s->head_len = iv - s->head_off < count ? iv - s->head_off : count;
  }
  if (last != s->first && end % iv != 0) {
    s->tail_lba = last;
    s->tail_len = end % iv;
  }
  s->mid_lba = s->first + (s->head_len > 0);
  s->mid_n = last + 1 - (s->tail_len > 0) - s->mid_lba;
  s->mid_at = s->head_len;
}

/* One partial block being merged: its stored data and tuple. */
struct partial {
  uint8_t data[DISK_INTERVAL_MAX];
  uint8_t tuple[PI_TUPLE_MAX];
};

/* data view read. */
static int
data_read (struct disk *d, const struct disk_io *io, struct stats_tally *t,
           uint8_t *buf, uint64_t count, uint64_t offset)
{
  struct span s;
  struct partial head, tail;
  struct range_held h;
  struct failures f = {
    .d = d, .io = io, .t = t, .op = STATS_OP_READ, .offset = offset,
    .length = count, .host_pi = false,
  };
  struct pi_verify_stats vs = { 0 };
  uint8_t *pi = NULL;
  const uint64_t tu = d->pi.format->tuple_size;
  int r = 0;
  char what[160];

  span_of (d, count, offset, &s);
  if (s.mid_n > 0 && tu > 0) {
    pi = malloc (s.mid_n * tu);
    if (pi == NULL) {
      disk_error (&d->cfg, "data view read: %m");
      return -1;
    }
  }

  /* Under the lock: copy everything out.  Verify after releasing it. */
  lock_blocks (d, &h, s.first, s.nblocks, false);
  if (s.head_len)
    r = d->store->ops->read (d->store, s.head_lba, 1, head.data, head.tuple);
  if (r == 0 && s.mid_n)
    r = d->store->ops->read (d->store, s.mid_lba, s.mid_n, buf + s.mid_at,
                             pi);
  if (r == 0 && s.tail_len)
    r = d->store->ops->read (d->store, s.tail_lba, 1, tail.data, tail.tuple);
  unlock_blocks (d, &h);
  if (r == -1)
    goto out;

  if (s.head_len)
    memcpy (buf, head.data + s.head_off, s.head_len);
  if (s.tail_len)
    memcpy (buf + count - s.tail_len, tail.data, s.tail_len);

  if (has_pi (d)) {
    /* In LBA order, so events come out in order. */
    if (s.head_len)
      verify_one (d, &f, head.data, head.tuple, s.head_lba);
    if (s.mid_n) {
      pi_verify_sep (&d->pi, buf + s.mid_at, pi, s.mid_n, s.mid_lba, &vs,
                     on_failure, &f);
      count_verified (t, &vs);
    }
    if (s.tail_len)
      verify_one (d, &f, tail.data, tail.tuple, s.tail_lba);
  }

  if (f.count > 0) {
    t->rare = true;
    t->reads_failed++;
    describe_failure (&f, what, sizeof what);
    disk_pi_error (d, "data view read: stored %s (%" PRIu64 " of %"
                   PRIu64 " blocks failed; offset %" PRIu64 " count %"
                   PRIu64 ")", what, f.count, s.nblocks, offset, count);
    errno = EIO;
    r = -1;
  }

 out:
  free (pi);
  return r;
}

/* Read partial block LBA into P, under the caller's lock, and verify its
 * stored PI into F.  Returns -1 only if the store failed. */
static int
read_partial (struct disk *d, struct failures *f, uint64_t lba,
              struct partial *p)
{
  if (d->store->ops->read (d->store, lba, 1, p->data, p->tuple) == -1)
    return -1;
  if (has_pi (d))
    verify_one (d, f, p->data, p->tuple, lba);
  return 0;
}

/* Store partial block LBA after merging: new PI, then write.  Counts
 * the block as generated into T once it is stored. */
static int
write_partial (struct disk *d, struct stats_tally *t, uint64_t lba,
               struct partial *p, bool fua)
{
  if (has_pi (d))
    pi_generate_block (&d->pi, p->data, lba, p->tuple);
  if (d->store->ops->write (d->store, lba, 1, p->data, p->tuple, fua) == -1)
    return -1;
  if (has_pi (d))
    t->blocks_generated++;
  return 0;
}

/* Put back partial block LBA as it was (OLD, read under the same lock)
 * after a later piece of the request failed, and uncount its PI in T.  The
 * block's memory is there already, so on the memory store this cannot
 * fail; if a store fails it anyway, say so: the block then holds the
 * merged data with its PI, not the old. */
static void
restore_partial (struct disk *d, struct stats_tally *t, uint64_t lba,
                 const struct partial *old)
{
  const int e = errno;          /* the request's error */

  if (d->store->ops->write (d->store, lba, 1, old->data, old->tuple,
                            false) == -1)
    disk_error (&d->cfg, "LBA %" PRIu64 ": could not put the block back "
                "after the request failed: it holds the new data", lba);
  else if (has_pi (d))
    t->blocks_generated--;
  errno = e;
}

/* The blocks of a data view write to a store that lends its memory
 * (write_run): a merged partial head block, the caller's whole blocks,
 * a merged partial tail block, in LBA order. */
struct write_in {
  const struct pi_params *pi;   /* the disk's PI parameters */
  const struct partial *head;   /* the merged head block, until the first
                                   run has taken it; NULL: none */
  const uint8_t *src;           /* the next whole block's data, in the
                                   caller's buffer */
  const struct partial *tail;   /* the merged tail block; NULL: none */
  uint64_t tail_lba;            /* its LBA */
};

/* Copy one block of merged data into the store at DATA and generate its
 * tuple at PI. */
static void
put_merged (const struct pi_params *p, const struct partial *m,
            uint64_t lba, uint8_t *data, uint8_t *pi)
{
  memcpy (data, m->data, p->interval);
  pi_generate_block (p, data, lba, pi);
}

/* store_fill_fn: copy one run of a data view write into the store and
 * generate its tuples in the same pass. */
static void
write_run (void *opaque, uint64_t lba, uint64_t nblocks, uint8_t *data,
           uint8_t *pi)
{
  struct write_in *w = opaque;
  const size_t iv = w->pi->interval, tu = w->pi->format->tuple_size;
  uint64_t n;

  if (w->head) {                /* the first run starts at the head */
    put_merged (w->pi, w->head, lba, data, pi);
    w->head = NULL;
    lba++;
    nblocks--;
    data += iv;
    pi += tu;
  }
  n = nblocks;
  if (w->tail && n > 0 && lba + n - 1 == w->tail_lba)
    n--;                        /* the last run ends with the tail */
  if (n > 0) {
    pi_generate_copy (w->pi, w->src, data, iv, pi, tu, n, lba);
    w->src += n * iv;
  }
  if (n < nblocks)
    put_merged (w->pi, w->tail, lba + n, data + n * iv, pi + n * tu);
}

/* Store the whole blocks of a data view write (span S of BUF) with PI
 * (S->mid_n tuples made from BUF; NULL for format none), under the
 * caller's lock, for a store that does not lend its memory.  Counts
 * them into T. */
static int
write_mid (struct disk *d, struct stats_tally *t, const struct span *s,
           const uint8_t *buf, const uint8_t *pi, bool fua)
{
  int r = d->store->ops->write (d->store, s->mid_lba, s->mid_n,
                                buf + s->mid_at, pi, fua);

  if (r == 0 && has_pi (d))
    t->blocks_generated += s->mid_n;
  return r;
}

/* One data view write, zero or trim between its steps: the request,
 * its span, and the partial blocks being merged. */
struct modify {
  struct disk *d;               /* the disk */
  const struct disk_io *io;     /* who asked */
  struct stats_tally *t;        /* the request's counts */
  enum stats_op op;             /* write, zero or trim */
  const uint8_t *buf;           /* the data of a write; NULL otherwise */
  uint64_t count, offset;       /* the request, bytes in the data view */
  bool fua;                     /* the request's FUA */
  bool piece_fua;               /* FUA on each store call: when there is
                                   one piece only (else one flush) */
  bool in_place;                /* a write to a store that lends its
                                   memory: every block in one call */
  struct span s;                /* the request's blocks (no partial
                                   blocks for a trim: it is advisory) */
  struct partial head, tail;    /* the partial blocks: read, then merged */
  struct partial tail_old;      /* the tail as stored, kept when the head
                                   is stored after it and may fail */
  uint8_t *pi;                  /* the whole blocks' tuples, generated
                                   before the lock (NULL: none needed) */
};

/* Generate the tuples of the whole blocks of a write to a store that
 * does not lend its memory into m->pi, from the caller's buffer, before
 * the lock is taken.  -1 after reporting if there is no memory. */
static int
generate_mid (struct modify *m)
{
  struct disk *d = m->d;
  const uint64_t tu = d->pi.format->tuple_size;

  if (m->op != STATS_OP_WRITE || m->s.mid_n == 0 || tu == 0 || m->in_place)
    return 0;
  m->pi = malloc (m->s.mid_n * tu);
  if (m->pi == NULL) {
    disk_error (&d->cfg, "data view write: %m");
    return -1;
  }
  pi_generate_sep (&d->pi, m->buf + m->s.mid_at, m->pi, m->s.mid_n,
                   m->s.mid_lba);
  return 0;
}

/* Read the partial blocks of M into m->head and m->tail, under the
 * caller's exclusive lock, and check their stored PI: a block that fails
 * cannot be merged.  -1 if the store failed, or after reporting (errno
 * EIO) if a check failed; nothing has been stored either way. */
static int
read_partials (struct modify *m)
{
  struct disk *d = m->d;
  const struct span *s = &m->s;
  struct failures f = {
    .d = d, .io = m->io, .t = m->t, .op = m->op, .offset = m->offset,
    .length = m->count, .host_pi = false, /* a partial block's stored PI */
  };
  char what[160];

  if (s->head_len && read_partial (d, &f, s->head_lba, &m->head) == -1)
    return -1;
  if (s->tail_len && read_partial (d, &f, s->tail_lba, &m->tail) == -1)
    return -1;
  if (f.count > 0) {
    describe_failure (&f, what, sizeof what);
    disk_pi_error (d, "data view %s: cannot merge a partial block: "
                   "stored %s (%" PRIu64 " of %" PRIu64 " blocks failed; "
                   "offset %" PRIu64 " count %" PRIu64 "); nothing was "
                   "stored", stats_op_name (m->op), what, f.count,
                   s->nblocks, m->offset, m->count);
    errno = EIO;
    return -1;
  }
  return 0;
}

/* Merge the request into the partial blocks read_partials read: the
 * caller's bytes (write) or zeros (zero).  The tail as stored is kept in
 * m->tail_old where store_pieces may have to put it back. */
static void
merge_partials (struct modify *m)
{
  const struct span *s = &m->s;
  const uint64_t tu = m->d->pi.format->tuple_size;

  if (s->head_len) {
    if (m->buf)
      memcpy (m->head.data + s->head_off, m->buf, s->head_len);
    else
      memset (m->head.data + s->head_off, 0, s->head_len);
  }
  if (s->tail_len) {
    if (s->head_len && !m->in_place) {
      memcpy (m->tail_old.data, m->tail.data, m->d->pi.interval);
      memcpy (m->tail_old.tuple, m->tail.tuple, tu);
    }
    if (m->buf)
      memcpy (m->tail.data, m->buf + m->count - s->tail_len, s->tail_len);
    else
      memset (m->tail.data, 0, s->tail_len);
  }
}

/* Store every block of a write M to a store that lends its memory in
 * one call, the data copied in and the PI generated in one pass (the
 * guards computed under the lock).  The store has all the memory before
 * it lends any, so a write it cannot take stores nothing. */
static int
store_in_place (struct modify *m)
{
  struct disk *d = m->d;
  const struct span *s = &m->s;
  struct write_in w = {
    .pi = &d->pi, .head = s->head_len ? &m->head : NULL,
    .src = m->buf + s->mid_at, .tail = s->tail_len ? &m->tail : NULL,
    .tail_lba = s->tail_lba,
  };
  int r;

  r = d->store->ops->write_in_place (d->store, s->first, s->nblocks,
                                     write_run, &w, m->fua);
  if (r == 0 && has_pi (d))
    m->t->blocks_generated += s->nblocks;
  return r;
}

/* Store the pieces of M one by one, under the caller's lock: the merged
 * partial blocks first, the tail before the head: if the head cannot be
 * stored, the tail goes back as it was, so a request whose partial
 * blocks cannot be stored changes nothing.  On the memory store (a
 * zero, here) they are the only pieces that can fail, with ENOMEM when
 * they need a chunk: zeroing whole blocks allocates nothing.  On a file
 * store the whole blocks can still fail after them. */
static int
store_pieces (struct modify *m)
{
  struct disk *d = m->d;
  const struct span *s = &m->s;
  int r = 0;

  if (s->tail_len)
    r = write_partial (d, m->t, s->tail_lba, &m->tail, m->piece_fua);
  if (r == 0 && s->head_len) {
    r = write_partial (d, m->t, s->head_lba, &m->head, m->piece_fua);
    if (r == -1 && s->tail_len)   /* then tail_old was kept */
      restore_partial (d, m->t, s->tail_lba, &m->tail_old);
  }
  if (r == 0 && s->mid_n) {
    if (m->op == STATS_OP_WRITE)
      r = write_mid (d, m->t, s, m->buf, m->pi, m->piece_fua);
    else
      r = d->store->ops->zero (d->store, s->mid_lba, s->mid_n,
                               m->piece_fua);
  }
  if (r == 0 && m->fua && !m->piece_fua)
    r = d->store->ops->flush (d->store);
  return r;
}

/* data view write, zero or trim (OP).  BUF is the data for a write and
 * NULL otherwise.  Whole blocks are written with generated PI (write) or
 * zeroed (zero, trim); partial blocks are merged (write), merged with
 * zeros (zero) or left alone (trim: it is advisory).  Counts into T. */
static int
data_modify (struct disk *d, const struct disk_io *io, struct stats_tally *t,
             enum stats_op op, const uint8_t *buf, uint64_t count,
             uint64_t offset, bool fua)
{
  struct modify m;              /* not zeroed: the partial blocks are
                                   filled in by read_partials */
  struct range_held h;
  unsigned pieces;
  int r;

  m.d = d;
  m.io = io;
  m.t = t;
  m.op = op;
  m.buf = buf;
  m.count = count;
  m.offset = offset;
  m.fua = fua;
  m.in_place = op == STATS_OP_WRITE && d->store->ops->write_in_place != NULL;
  m.pi = NULL;
  span_of (d, count, offset, &m.s);
  if (op == STATS_OP_TRIM)
    m.s.head_len = m.s.tail_len = 0;
  pieces = (m.s.head_len > 0) + (m.s.mid_n > 0) + (m.s.tail_len > 0);
  if (pieces == 0)
    return 0;                   /* a trim inside one block */
  /* FUA on a single store call is enough; several get one flush. */
  m.piece_fua = fua && pieces == 1;

  if (generate_mid (&m) == -1)
    return -1;

  lock_blocks (d, &h, m.s.first, m.s.nblocks, true);
  /* Read and check both partial blocks before anything is stored. */
  r = read_partials (&m);
  if (r == 0) {
    merge_partials (&m);
    r = m.in_place ? store_in_place (&m) : store_pieces (&m);
  }
  unlock_blocks (d, &h);
  free (m.pi);
  return r;
}

/* dif view read: stored data and tuples, interleaved, unchecked. */
static int
dif_read (struct disk *d, uint8_t *buf, uint64_t count, uint64_t offset)
{
  const uint64_t iv = d->pi.interval, tu = d->pi.format->tuple_size;
  const uint64_t ext = iv + tu;
  const uint64_t lba = offset / ext, n = count / ext;
  struct range_held h;
  uint8_t *pi = NULL;
  uint64_t i;
  int r;

  if (tu == 0) {
    /* Format none: the dif view is the data view. */
    lock_blocks (d, &h, lba, n, false);
    r = d->store->ops->read (d->store, lba, n, buf, NULL);
    unlock_blocks (d, &h);
    return r;
  }

  if (d->store->ops->read_ext) {
    /* The store lays out extended blocks itself. */
    lock_blocks (d, &h, lba, n, false);
    r = d->store->ops->read_ext (d->store, lba, n, buf);
    unlock_blocks (d, &h);
    return r;
  }

  pi = malloc (n * tu);
  if (pi == NULL) {
    disk_error (&d->cfg, "dif view read: %m");
    return -1;
  }
  /* Read the data into the end of BUF, then spread it out in place:
   * block i moves down from n*tu + i*iv to i*ext, and its tuple goes
   * after it, never past the start of block i+1's unmoved data. */
  lock_blocks (d, &h, lba, n, false);
  r = d->store->ops->read (d->store, lba, n, buf + n * tu, pi);
  unlock_blocks (d, &h);
  if (r == 0)
    for (i = 0; i < n; i++) {
      memmove (buf + i * ext, buf + n * tu + i * iv, iv);
      memcpy (buf + i * ext + iv, pi + i * tu, tu);
    }
  free (pi);
  return r;
}

/* dif view write: verify every block, then store all or nothing. */
static int
dif_write (struct disk *d, const struct disk_io *io, struct stats_tally *t,
           const uint8_t *buf, uint64_t count, uint64_t offset, bool fua)
{
  const uint64_t iv = d->pi.interval, tu = d->pi.format->tuple_size;
  const uint64_t ext = iv + tu;
  const uint64_t lba = offset / ext, n = count / ext;
  struct failures f = {
    .d = d, .io = io, .t = t, .op = STATS_OP_WRITE, .offset = offset,
    .length = count, .host_pi = true,
  };
  struct pi_verify_stats vs = { 0 };
  struct range_held h;
  uint8_t *data = NULL;
  int r;
  char what[160];

  if (tu == 0) {
    lock_blocks (d, &h, lba, n, true);
    r = d->store->ops->write (d->store, lba, n, buf, NULL, fua);
    unlock_blocks (d, &h);
    return r;
  }

  if (d->store->ops->write_ext)
    pi_verify_ext (&d->pi, buf, n, lba, &vs, on_failure, &f);
  else {
    /* The store takes data and tuples separately: split them apart in
     * the pass that verifies them (the copy is dropped if they fail). */
    data = malloc (n * (iv + tu));
    if (data == NULL) {
      disk_error (&d->cfg, "dif view write: %m");
      return -1;
    }
    pi_verify_split_ext (&d->pi, buf, data, data + n * iv, n, lba, &vs,
                         on_failure, &f);
  }
  count_verified (t, &vs);
  if (f.count > 0) {
    free (data);
    t->rare = true;
    t->writes_rejected++;
    describe_failure (&f, what, sizeof what);
    disk_pi_error (d, "dif view write rejected: %s (%" PRIu64 " of %"
                   PRIu64 " blocks failed; offset %" PRIu64 " count %"
                   PRIu64 "); nothing was stored", what, f.count, n, offset,
                   count);
    errno = EIO;
    return -1;
  }

  if (data == NULL) {
    /* Straight from the extended blocks into the store. */
    lock_blocks (d, &h, lba, n, true);
    r = d->store->ops->write_ext (d->store, lba, n, buf, fua);
    unlock_blocks (d, &h);
    return r;
  }

  lock_blocks (d, &h, lba, n, true);
  r = d->store->ops->write (d->store, lba, n, data, data + n * iv, fua);
  unlock_blocks (d, &h);
  free (data);
  return r;
}

/* dif view zero or trim: whole blocks only, both give zeros + all-ones PI. */
static int
dif_zero (struct disk *d, uint64_t count, uint64_t offset, bool fua)
{
  const uint64_t ext = view_block (d, PROFILE_VIEW_DIF);
  const uint64_t lba = offset / ext, n = count / ext;
  struct range_held h;
  int r;

  lock_blocks (d, &h, lba, n, true);
  r = d->store->ops->zero (d->store, lba, n, fua);
  unlock_blocks (d, &h);
  return r;
}

/* Add the counts T of a request of IO that returned R to the counters,
 * all at once, keeping the request's errno.  Returns R. */
static int
count_request (struct disk *d, const struct disk_io *io,
               const struct stats_tally *t, int r)
{
  const int e = errno;

  stats_commit (&d->stats, io->conn, t);
  errno = e;
  return r;
}

/* disk_pread, counting into T. */
static int
pread_view (struct disk *d, const struct disk_io *io, struct stats_tally *t,
            void *buf, uint64_t count, uint64_t offset)
{
  if (check_request (d, io, STATS_OP_READ, count, offset) == -1)
    return -1;
  if (count == 0)
    return 0;
  if (io->view == PROFILE_VIEW_DIF)
    return dif_read (d, buf, count, offset);
  return data_read (d, io, t, buf, count, offset);
}

int
disk_pread (struct disk *d, const struct disk_io *io, void *buf,
            uint64_t count, uint64_t offset)
{
  struct stats_tally t;

  stats_tally_request (&t, io->view, STATS_OP_READ, count);
  return count_request (d, io, &t,
                        pread_view (d, io, &t, buf, count, offset));
}

/* disk_pwrite, counting into T. */
static int
pwrite_view (struct disk *d, const struct disk_io *io, struct stats_tally *t,
             const void *buf, uint64_t count, uint64_t offset, bool fua)
{
  if (check_request (d, io, STATS_OP_WRITE, count, offset) == -1)
    return -1;
  if (count == 0)
    return 0;
  if (io->view == PROFILE_VIEW_DIF)
    return dif_write (d, io, t, buf, count, offset, fua);
  return data_modify (d, io, t, STATS_OP_WRITE, buf, count, offset, fua);
}

int
disk_pwrite (struct disk *d, const struct disk_io *io, const void *buf,
             uint64_t count, uint64_t offset, bool fua)
{
  struct stats_tally t;

  stats_tally_request (&t, io->view, STATS_OP_WRITE, count);
  return count_request (d, io, &t,
                        pwrite_view (d, io, &t, buf, count, offset, fua));
}

/* zero and trim (OP), counting into T. */
static int
zero_or_trim_view (struct disk *d, const struct disk_io *io,
                   struct stats_tally *t, enum stats_op op, uint64_t count,
                   uint64_t offset, bool fua)
{
  if (check_request (d, io, op, count, offset) == -1)
    return -1;
  if (count == 0)
    return 0;
  if (io->view == PROFILE_VIEW_DIF)
    return dif_zero (d, count, offset, fua);
  return data_modify (d, io, t, op, NULL, count, offset, fua);
}

/* zero and trim (OP). */
static int
zero_or_trim (struct disk *d, const struct disk_io *io, enum stats_op op,
              uint64_t count, uint64_t offset, bool fua)
{
  struct stats_tally t;

  stats_tally_request (&t, io->view, op, count);
  return count_request (d, io, &t,
                        zero_or_trim_view (d, io, &t, op, count, offset,
                                           fua));
}

int
disk_zero (struct disk *d, const struct disk_io *io, uint64_t count,
           uint64_t offset, bool fua)
{
  return zero_or_trim (d, io, STATS_OP_ZERO, count, offset, fua);
}

int
disk_trim (struct disk *d, const struct disk_io *io, uint64_t count,
           uint64_t offset, bool fua)
{
  return zero_or_trim (d, io, STATS_OP_TRIM, count, offset, fua);
}

int
disk_flush (struct disk *d, const struct disk_io *io)
{
  struct stats_tally t;

  stats_tally_request (&t, io->view, STATS_OP_FLUSH, 0);
  return count_request (d, io, &t, d->store->ops->flush (d->store));
}

int
disk_extent (struct disk *d, const struct disk_io *io, uint64_t count,
             uint64_t offset, bool *allocated, uint64_t *run)
{
  const uint64_t iv = d->pi.interval;
  struct span s;
  struct range_held h;
  uint64_t blocks;
  int r;

  if (check_request (d, io, STATS_OP_READ, count, offset) == -1)
    return -1;
  if (io->view == PROFILE_VIEW_DIF || count == 0) {
    *allocated = true;
    *run = count;
    return 0;
  }

  span_of (d, count, offset, &s);
  lock_blocks (d, &h, s.first, s.nblocks, false);
  r = d->store->ops->extent (d->store, s.first, s.nblocks, allocated,
                             &blocks);
  unlock_blocks (d, &h);
  if (r == -1)
    return -1;
  /* Bytes from OFFSET, which may sit inside the first block. */
  *run = blocks * iv - offset % iv;
  if (*run > count)
    *run = count;
  return 0;
}

/* An app tag that fails the masked compare against the configured tag
 * and does not escape checking: flip the lowest checked bit; should that
 * give 0xffff, flip one more bit as well (which keeps the checked bit
 * different). */
static uint16_t
bad_app_tag (const struct disk *d)
{
  uint16_t low = d->pi.app_mask & -d->pi.app_mask;
  uint16_t v = d->pi.app_tag ^ low;

  if (v == 0xffff)
    v ^= low == 1 ? 2 : 1;
  return v;
}

static const char *
inject_name (enum disk_inject_kind kind)
{
  switch (kind) {
  case DISK_INJECT_DATA: return "data";
  case DISK_INJECT_GUARD: return "guard";
  case DISK_INJECT_APP: return "app";
  case DISK_INJECT_REF: return "ref";
  }
  return "unknown";
}

int
disk_inject (struct disk *d, enum disk_inject_kind kind, uint64_t lba)
{
  const struct pi_format *fmt = d->pi.format;
  const char *name = inject_name (kind);
  struct partial b;
  struct pi_tuple t;
  struct stats_tally tally;     /* the injection, counted */
  struct range_held h;
  uint64_t g;
  int r;

  if (!has_pi (d)) {
    disk_error (&d->cfg, "inject %s: format none has no protection "
                "information to corrupt", name);
    errno = EINVAL;
    return -1;
  }
  if (lba >= d->nblocks) {
    disk_error (&d->cfg, "inject %s: LBA %" PRIu64 " is past the end of "
                "the disk (%" PRIu64 " blocks)", name, lba, d->nblocks);
    errno = EINVAL;
    return -1;
  }
  if (kind == DISK_INJECT_APP && !d->cfg.has_app) {
    disk_error (&d->cfg, "inject app: no app-tag= configured, app tags are "
                "not checked");
    errno = EINVAL;
    return -1;
  }
  if (kind == DISK_INJECT_REF &&
      fmt->type != PI_TYPE_1 && fmt->type != PI_TYPE_2) {
    disk_error (&d->cfg, "inject ref: %s does not check ref tags",
                fmt->name);
    errno = EINVAL;
    return -1;
  }
  if (d->store->read_only) {
    char what[64];

    snprintf (what, sizeof what, "inject %s", name);
    return refuse_read_only (d, what);
  }

  lock_blocks (d, &h, lba, 1, true);
  r = d->store->ops->read (d->store, lba, 1, b.data, b.tuple);
  if (r == -1)
    goto out;

  /* A block that escapes checking (never written, zeroed, or written
   * with an escape tuple) first gets valid PI, or the read would not
   * fail. */
  if (pi_tuple_escaped (fmt, b.tuple))
    pi_generate_block (&d->pi, b.data, lba, b.tuple);
  pi_tuple_decode (fmt, b.tuple, &t);

  switch (kind) {
  case DISK_INJECT_DATA:
    /* Flip bit 0 of byte 0 if the data is what the guard (correct, or
     * itself injected: ^1) was computed for.  Otherwise the data already
     * differs from it (injected before): leave it, so that injecting
     * twice stores the same as once; the read fails the guard check
     * either way. */
    g = pi_guard_compute (fmt, b.data, d->pi.interval);
    if (t.guard == g || t.guard == (g ^ 1))
      b.data[0] ^= 1;
    break;
  case DISK_INJECT_GUARD:
    t.guard = pi_guard_compute (fmt, b.data, d->pi.interval) ^ 1;
    break;
  case DISK_INJECT_APP:
    t.app = bad_app_tag (d);
    break;
  case DISK_INJECT_REF:
    t.ref = pi_ref_for_lba (fmt, lba) ^ 1;
    break;
  }
  pi_tuple_encode (fmt, &t, b.tuple);
  r = d->store->ops->write (d->store, lba, 1, b.data, b.tuple, false);
  if (r == 0) {
    stats_tally_none (&tally);
    tally.injections = 1;
    stats_commit (&d->stats, 0, &tally);
  }

 out:
  unlock_blocks (d, &h);
  return r;
}
