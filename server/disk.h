/* SPDX-License-Identifier: BSD-3-Clause */
/* stabledif: the emulated disk and its two views (stabledif(7), VIEWS;
 * nbdkit-stabledif-plugin(1)).
 *
 * One disk holds data + PI in a store; the "data" view reads and writes
 * plain data (the device inserts PI on write, verifies it on read), the
 * "dif" view reads and writes extended blocks (interval + tuple) and
 * verifies every block of a write before anything is stored.  Every
 * request takes a range lock covering data and PI together.
 *
 * No nbdkit here: errors go to config->error (nbdkit_error fits) and
 * functions return -1 with errno set (EINVAL: bad alignment or range;
 * EIO: a PI check failed; others from the store).  The lines of PI
 * failures may be rate-limited (disk_config.log_burst per log_interval
 * seconds, then one "N similar messages suppressed"); the counters and
 * events still record every failure.
 */
#ifndef STABLEDIF_DISK_H
#define STABLEDIF_DISK_H

#include <stdbool.h>
#include <stdint.h>

#include "pi.h"
#include "profile.h"
#include "rangelock.h"
#include "ratelimit.h"
#include "stats.h"
#include "store.h"

/* The usual rate limit of PI failure lines (nbdkit-stabledif-plugin(1),
 * LOGGING): at most DISK_PI_LOG_BURST lines per DISK_PI_LOG_INTERVAL_S
 * seconds; the rest are summed up in one. */
#define DISK_PI_LOG_BURST 10
#define DISK_PI_LOG_INTERVAL_S 5

/* Everything the device is created from (the plugin's parameters). */
struct disk_config {
  uint64_t size;                /* data bytes: a multiple of interval */
  const struct pi_format *format; /* PI format (pi_format_none() allowed) */
  uint32_t interval;            /* protection interval: 512 or 4096 */
  bool has_app;                 /* app-tag= given */
  uint16_t app_tag;             /* app tag inserted and checked */
  uint16_t app_mask;            /* bits of the app tag that are checked */
  const char *file;             /* file= path, or NULL for memory */
  const char *events_path;      /* events= path, or NULL */
  size_t event_ring;            /* events kept in memory (0: default 1024) */
  bool no_dirty_log;            /* file=: keep no dirty-region log
                                   (dirty-log=off; store.h) */
  unsigned log_burst;           /* PI failure lines logged per */
  unsigned log_interval;        /*   log_interval seconds (0: all of them;
                                   the plugin's default is
                                   DISK_PI_LOG_BURST per
                                   DISK_PI_LOG_INTERVAL_S) */
  server_error_fn error;        /* error reporter (required) */
};

/* Check a configuration before creating a disk: size 0 or not a multiple
 * of the interval, an interval other than 512/4096, CRC-64 with 512 and
 * so on.  Reports the problem naming the parameter ("size", "interval",
 * "format", "app-tag") and returns -1. */
int disk_config_check (const struct disk_config *cfg);

/* The disk. */
struct disk {
  struct disk_config cfg;       /* copy of the configuration */
  struct pi_params pi;          /* PI parameters derived from cfg */
  uint64_t nblocks;             /* size / interval */
  struct store *store;          /* the backend */
  struct rangelock locks;       /* per-range locks over data + PI */
  struct stats stats;           /* counters and events */
  struct ratelimit pi_log;      /* limits the error lines of PI failures
                                   (nbdkit-stabledif-plugin(1), LOGGING) */
};

/* Per-request context: who is asking, through which view. */
struct disk_io {
  uint64_t conn;                /* connection number (for events) */
  enum profile_view view;       /* view of the export */
};

/* Create the disk (opens the store and the events file).  Returns NULL
 * after reporting the error. */
struct disk *disk_open (const struct disk_config *cfg);
void disk_close (struct disk *d);

/* Size in bytes of a view: size for data, nblocks * (interval + tuple)
 * for dif. */
uint64_t disk_view_size (const struct disk *d, enum profile_view view);

/* Whether the disk can only be read: its file= store could not be
 * opened for writing.  Writes, zeroes, trims and injections then fail
 * with EROFS. */
bool disk_read_only (const struct disk *d);

/* What opening the file= store rebuilt after a crash: the blocks whose
 * PI it rebuilt from their data into *BLOCKS, the dirty regions it
 * scanned for them into *REGIONS (both 0 when nothing was to recover,
 * and for memory storage). */
void disk_recovered (const struct disk *d, uint64_t *blocks,
                     uint64_t *regions);

/* The request size, in bytes, that either view serves without a
 * read-modify-write penalty: the protection interval. */
uint32_t disk_preferred_request (const struct disk *d);

/* The largest request on VIEW of at most LIMIT bytes that a client
 * splitting a transfer at it keeps aligned: LIMIT on the data view (any
 * alignment is served), the largest whole number of extended blocks on
 * the dif view.  LIMIT must hold at least one extended block. */
uint32_t disk_max_request (const struct disk *d, enum profile_view view,
                           uint32_t limit);

/* Whether a flush on one connection makes every connection's completed
 * writes durable, so that clients may open several connections to the
 * disk (NBD multi-conn).  The store decides. */
bool disk_multi_conn (const struct disk *d);

/* The profile of a view. */
void disk_profile (const struct disk *d, enum profile_view view,
                   struct profile *out);

/* NBD operations on a view.  Offsets and counts are bytes in that view.
 * data view: any alignment (partial intervals are read-modify-write).
 * dif view: offset and count must be multiples of interval + tuple. */
int disk_pread (struct disk *d, const struct disk_io *io, void *buf,
                uint64_t count, uint64_t offset);
int disk_pwrite (struct disk *d, const struct disk_io *io, const void *buf,
                 uint64_t count, uint64_t offset, bool fua);
int disk_zero (struct disk *d, const struct disk_io *io,
               uint64_t count, uint64_t offset, bool fua);
int disk_trim (struct disk *d, const struct disk_io *io,
               uint64_t count, uint64_t offset, bool fua);
int disk_flush (struct disk *d, const struct disk_io *io);

/* Extents of the data view: whether [offset, offset+count) starting at
 * OFFSET is stored (false: a hole that reads as zeros).  Sets *RUN to the
 * bytes from OFFSET with the same answer.  dif view: always allocated. */
int disk_extent (struct disk *d, const struct disk_io *io, uint64_t count,
                 uint64_t offset, bool *allocated, uint64_t *run);

/* Fault injection (control socket): corrupt the stored block LBA so that
 * the next read fails the named check, the same way every time. */
enum disk_inject_kind {
  DISK_INJECT_DATA,             /* flip bits of the data: guard fails */
  DISK_INJECT_GUARD,            /* flip bits of the guard tag */
  DISK_INJECT_APP,              /* change the app tag (needs app-tag=) */
  DISK_INJECT_REF,              /* change the ref tag (types 1, 2) */
};
int disk_inject (struct disk *d, enum disk_inject_kind kind, uint64_t lba);

#endif /* STABLEDIF_DISK_H */
