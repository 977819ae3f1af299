/* SPDX-License-Identifier: BSD-3-Clause */
/* stabledif: the dirty-region log of the file store, PATH.log
 * (nbdkit-stabledif-plugin(1), FILE STORAGE, Crashes).
 *
 * PATH and PATH.pi reach the disk independently, so after an operating
 * system crash or power loss a block overwritten since the last flush
 * may hold new data under old PI.  As in md's write-intent bitmap and
 * dm-integrity's bitmap mode, the LBA space is divided into regions, and
 * a region is marked dirty durably (its mark written and fdatasync'ed)
 * before the first write into it; a flush that made every write into a
 * region durable clears its mark.  After a crash only the blocks of
 * dirty regions can hold PI of other data: opening the store rebuilds
 * their PI from the data (store-file-recover.h).
 *
 * PATH.log is a text header, NUL-padded to STORE_FILE_LOG_HDR_SIZE bytes:
 *
 *   stabledif-log/1
 *   region-bytes=67108864
 *   regions=16
 *   marks-at=4096
 *
 * then one byte per region at marks-at: 1 dirty, 0 clean.
 *
 * Clearing is lazy, as md clears its bits only after a delay: a flush
 * clears the mark of a region only if no write into it is in flight and
 * none went into it during the STORE_FILE_LOG_IDLE_FLUSHES flush
 * intervals before this flush, so regions written now and then under a
 * random load stay marked and cost no extra fdatasync; one left alone is
 * cleared by the 65th flush after its last write.  Cleared marks are
 * written without a sync of their own (the next mark's fdatasync or the
 * close carries them); a crash before they reach the disk only costs a
 * rescan.
 *
 * Thread-safe.  One mutex guards the state in memory and is held only
 * briefly: a write into regions already marked takes it once to count
 * itself in flight, and cleared marks are written under it (no sync).
 * Setting marks, a write and an fdatasync, is done without it, by one
 * thread at a time under a second mutex, so writes into marked regions
 * never wait for a sync.
 */
#ifndef STABLEDIF_STORE_FILE_LOG_H
#define STABLEDIF_STORE_FILE_LOG_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "store.h"

/* Bytes of the header; the mark of region R is at this offset plus R. */
#define STORE_FILE_LOG_HDR_SIZE 4096

/* The first line of the header. */
#define STORE_FILE_LOG_MAGIC "stabledif-log/1"

/* Bytes of data per region unless the store is told otherwise: a crash
 * costs rereading up to this much per region written since the flush
 * before it; smaller regions cost more marks (fdatasyncs) under random
 * writes. */
#define STORE_FILE_LOG_REGION_DEFAULT (UINT64_C (64) << 20)

/* Whole flush intervals a region must go unwritten before a flush
 * clears its mark. */
#define STORE_FILE_LOG_IDLE_FLUSHES 64

/* The log of one file store. */
struct store_file_log {
  char *path;                   /* PATH.log */
  const char *owner;            /* file= path, for messages */
  server_error_fn error;        /* where errors go */
  int fd;                       /* PATH.log, open read-write */
  uint64_t nblocks;             /* blocks of the disk */
  uint32_t interval;            /* bytes per block */
  uint64_t region_blocks;       /* blocks per region (the last may be
                                   shorter) */
  uint64_t nregions;            /* regions of the disk */
  pthread_mutex_t mark_lock;    /* held while marks are set in the file
                                   and synced, one thread at a time;
                                   taken before lock */
  pthread_mutex_t lock;         /* guards everything below, and the
                                   clearing of marks in the file */
  uint8_t *marked;              /* per region: 1 if its mark in the file
                                   is set (durably), 2 while the holder
                                   of mark_lock sets it, 0 if clear */
  uint32_t *inflight;           /* per region: writes begun, not ended */
  uint64_t *last_end;           /* per region: the value of gen when its
                                   last write ended */
  uint64_t gen;                 /* flushes begun so far */
};

/* Open PATH.log (LOG_PATH) of the disk of NBLOCKS blocks of INTERVAL
 * bytes, or create it clean with regions of REGION_BYTES bytes (a
 * multiple of INTERVAL) if it does not exist.  An existing log keeps
 * its recorded regions and marks, so the caller can recover the dirty
 * ones before store_file_log_reset.  Returns NULL after reporting the
 * error (naming OWNER, the file= path, which must outlive the log). */
struct store_file_log *store_file_log_open (const char *log_path,
                                            const char *owner,
                                            uint64_t nblocks,
                                            uint32_t interval,
                                            uint64_t region_bytes,
                                            server_error_fn error);

/* How many regions the log at LOG_PATH marks dirty, without opening it
 * for writing (for a read-only store); 0 if there is no such file or it
 * cannot be read. */
uint64_t store_file_log_peek (const char *log_path);

/* The number of regions marked dirty. */
uint64_t store_file_log_ndirty (struct store_file_log *log);

/* Whether region R is marked dirty; sets *LBA and *NBLOCKS to its
 * blocks. */
bool store_file_log_region (struct store_file_log *log, uint64_t r,
                            uint64_t *lba, uint64_t *nblocks);

/* Rewrite the log clean, with regions of REGION_BYTES bytes, durably
 * (after recovery made every block consistent).  Reports errors. */
int store_file_log_reset (struct store_file_log *log, uint64_t region_bytes);

/* Before writing or zeroing NBLOCKS blocks at LBA: mark their regions
 * dirty, durably, unless they are already marked, and count the write in
 * flight.  -1 after reporting the error: nothing is counted, the write
 * must not be done.  Every successful call is paired with
 * store_file_log_end (LOG, LBA, NBLOCKS) when the write is over, whether
 * or not it succeeded. */
int store_file_log_begin (struct store_file_log *log, uint64_t lba,
                          uint64_t nblocks);
void store_file_log_end (struct store_file_log *log, uint64_t lba,
                         uint64_t nblocks);

/* A flush: call store_file_log_flush_begin before syncing the data and
 * the PI, and, once both syncs succeeded, store_file_log_flush_end with
 * the value it returned, which clears the marks that flush made
 * unnecessary.  -1 after reporting the error. */
uint64_t store_file_log_flush_begin (struct store_file_log *log);
int store_file_log_flush_end (struct store_file_log *log, uint64_t g);

/* Close and free LOG.  CLEAN: everything was flushed and no write is in
 * flight, so every mark is cleared, durably. */
void store_file_log_close (struct store_file_log *log, bool clean);

#endif /* STABLEDIF_STORE_FILE_LOG_H */
