/* SPDX-License-Identifier: BSD-3-Clause */
/* stabledif: storage backends (nbdkit-stabledif-plugin(1)).
 *
 * A store keeps the data and the PI tuples of every block of one disk.  It
 * is a function table with one implementation per backend (memory, file),
 * like nbdkit's common/allocators.  Stores speak in whole blocks
 * (protection intervals) and in the separate (DIX) layout: data of NBLOCKS
 * intervals in one buffer, their tuples packed in another.  They do not
 * check PI and do not lock: the caller (disk.c) holds a range lock that
 * covers every granule the request touches (see store->granule).
 *
 * A block that was never written, or was zeroed, reads back as zeros with
 * all-ones PI.
 */
#ifndef STABLEDIF_STORE_H
#define STABLEDIF_STORE_H

#include <stdbool.h>
#include <stdint.h>

#include "pi.h"

/* How backends report errors: printf-like, called once per failure with
 * the context (which file, which LBA).  nbdkit_error fits. */
typedef void (*server_error_fn) (const char *fmt, ...)
  __attribute__ ((format (printf, 1, 2)));

/* The shape of the disk a store holds. */
struct store_geometry {
  uint64_t nblocks;             /* number of blocks (intervals) */
  uint32_t interval;            /* bytes of data per block */
  const struct pi_format *format; /* PI format; tuple size 0 for none */
};

struct store;

/* What store_ops.write_in_place calls for each run of blocks: NBLOCKS
 * blocks from LBA, their data at DATA (nblocks * interval bytes) and
 * their tuples packed at PI (nblocks * tuple bytes), both in the store's
 * own memory, for FN to fill in completely. */
typedef void (*store_fill_fn) (void *opaque, uint64_t lba, uint64_t nblocks,
                               uint8_t *data, uint8_t *pi);

/* The function table of one backend.  Every function returns 0 on success
 * or -1 with errno set after reporting the error through store->error.
 * Ranges are always inside the disk (the caller checks). */
struct store_ops {
  const char *name;             /* "memory", "file" */

  /* Read NBLOCKS blocks from LBA: data into DATA (nblocks * interval
   * bytes); tuples into PI (nblocks * tuple bytes) unless PI is NULL. */
  int (*read) (struct store *s, uint64_t lba, uint64_t nblocks,
               uint8_t *data, uint8_t *pi);

  /* Store NBLOCKS blocks at LBA.  DATA as in read; PI holds the tuples
   * (ignored when the tuple size is 0).  FUA: durable before returning. */
  int (*write) (struct store *s, uint64_t lba, uint64_t nblocks,
                const uint8_t *data, const uint8_t *pi, bool fua);

  /* Optional (NULL: the caller splits and joins with read and write).
   * Only called when the tuple size is not 0.  As read and write, but
   * with each block's data and tuple together in the extended layout
   * (interval + tuple bytes per block, NBLOCKS of them at EXT), so the
   * dif view moves every byte once. */
  int (*read_ext) (struct store *s, uint64_t lba, uint64_t nblocks,
                   uint8_t *ext);
  int (*write_ext) (struct store *s, uint64_t lba, uint64_t nblocks,
                    const uint8_t *ext, bool fua);

  /* Optional (NULL: the caller builds the blocks and calls write).
   * Only called when the tuple size is not 0.  Store NBLOCKS blocks at
   * LBA by lending their storage: call FN for
   * consecutive runs that cover them, in LBA order; FN writes every byte
   * of each run's data and tuples.  The caller's range lock keeps
   * everyone else off these blocks meanwhile.  So a disk can copy the
   * data in and compute its PI in one pass.  FUA as in write.  -1 (after
   * reporting, e.g. ENOMEM) before FN is called at all: nothing is
   * stored. */
  int (*write_in_place) (struct store *s, uint64_t lba, uint64_t nblocks,
                         store_fill_fn fn, void *opaque, bool fua);
  /* Make NBLOCKS blocks at LBA read as zeros with all-ones PI, releasing
   * their space where possible.  FUA as in write. */
  int (*zero) (struct store *s, uint64_t lba, uint64_t nblocks, bool fua);

  /* Make every completed write durable (data and PI). */
  int (*flush) (struct store *s);

  /* Whether LBA is backed by stored data: sets *ALLOCATED and *RUN, the
   * number of blocks from LBA (at most NBLOCKS, at least 1) with the same
   * answer.  Unallocated blocks read as zeros with all-ones PI. */
  int (*extent) (struct store *s, uint64_t lba, uint64_t nblocks,
                 bool *allocated, uint64_t *run);

  /* Release everything; S is freed. */
  void (*close) (struct store *s);
};

/* The part every backend shares; backends embed it first. */
struct store {
  const struct store_ops *ops;  /* the backend */
  struct store_geometry geom;   /* shape of the disk */
  uint32_t tuple;               /* geom.format->tuple_size */
  uint64_t granule;             /* blocks per lock granule: two requests
                                   touching the same granule must not run
                                   concurrently (the caller rounds its
                                   range locks out to granules) */
  bool multi_conn;              /* a flush on one connection makes every
                                   connection's completed writes durable */
  bool read_only;               /* the backend can only read (files that
                                   cannot be opened for writing): write,
                                   write_ext and zero must not be called,
                                   flush has nothing to do */
  server_error_fn error;        /* where errors go */
  uint64_t recovered_blocks;    /* blocks whose PI opening rebuilt from
                                   their data after a crash (file store,
                                   store-file-recover.h) */
  uint64_t recovered_regions;   /* dirty regions opening scanned for them */
};

/* Sparse memory: costs memory only for what is written. */
struct store *store_memory_open (const struct store_geometry *g,
                                 server_error_fn error);

/* File: raw data in PATH, tuples in PATH.pi (store-file.c).  Creates the
 * files, or reopens them if their recorded geometry matches G; anything
 * else is an error that says what differs.  Existing files that cannot
 * be opened for writing (permissions, a read-only filesystem) give a
 * read-only store, like nbdkit's file plugin; a read-only PATH without
 * PATH.pi cannot be adopted (PATH.pi cannot be created) and is an
 * error. */
struct store *store_file_open (const struct store_geometry *g,
                               const char *path, server_error_fn error);

/* Options of a file store (zero-initialised: the defaults). */
struct store_file_opts {
  bool no_dirty_log;            /* keep no PATH.log: an operating-system
                                   crash may then leave blocks written
                                   since the last flush failing their
                                   guard check */
  uint64_t region_bytes;        /* bytes of data per dirty-log region, a
                                   multiple of the interval; 0: 64 MiB
                                   (STORE_FILE_LOG_REGION_DEFAULT) */
};

/* store_file_open with options O.  With the dirty log (the default),
 * PATH.log records which regions may hold blocks written since the
 * last flush; opening after a crash rebuilds their PI from the data on
 * disk, and sets recovered_blocks and recovered_regions. */
struct store *store_file_open_opts (const struct store_geometry *g,
                                    const char *path,
                                    const struct store_file_opts *o,
                                    server_error_fn error);

#endif /* STABLEDIF_STORE_H */
