/* SPDX-License-Identifier: BSD-3-Clause */
/* libstabledif: a DIX host library for stabledif protection-information
 * disks, on libnbd.  See libstabledif(3).
 *
 * A handle talks to the "dif" view of one stabledif disk.  Writes take
 * plain data: the library generates protection information (PI) from the
 * caller's buffer when the write is submitted, and later, on its own I/O
 * thread, copies data + PI into extended blocks and sends them ("the
 * DMA").  Reads receive extended blocks, verify the PI and return the data
 * (and the PI if asked).  Between submit and copy-out the caller's buffer
 * must not change; the stable-page policy of the handle says how that is
 * ensured (wait, wait-sent, snapshot) or not (none).  The _pi calls
 * take the PI from the caller instead, or interleaved with the data in
 * one buffer that is sent and verified in place (no copy).
 *
 * Errors follow libnbd: functions return -1 (or NULL), and
 * stabledif_get_error() / stabledif_get_errno() say why, per thread.
 */
#ifndef STABLEDIF_H
#define STABLEDIF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A connection to one stabledif disk (opaque). */
struct stabledif_handle;

/* Stable-page policies (libstabledif(3), "STABLE-PAGE POLICIES"). */
enum stabledif_policy {
  STABLEDIF_POLICY_AUTO = 0,      /* wait if stable_writes=1, else none */
  STABLEDIF_POLICY_WAIT = 1,      /* wait_stable waits for the device */
  STABLEDIF_POLICY_WAIT_SENT = 2, /* wait_stable waits until copied out */
  STABLEDIF_POLICY_SNAPSHOT = 3,  /* copy at submit; never wait */
  STABLEDIF_POLICY_NONE = 4,      /* never wait, never copy (unsafe) */
};

/* Flags of the I/O calls. */
#define STABLEDIF_CMD_FLAG_FUA 0x01 /* write: force unit access */

/* Per-handle counters (stabledif_get_stats).
 *
 * The library fills this struct in the caller's memory, so its layout is
 * part of the ABI: every member is a uint64_t, members are only ever
 * appended, never removed, reordered or resized.  The caller passes
 * sizeof the struct as it was compiled, and the library writes exactly
 * that many bytes: the counters it knows that fit whole, zeros for the
 * rest (counters newer than the library, or a partial trailing member).
 * A program built against an older, smaller struct therefore gets its own
 * counters and nothing past its struct; one built against a newer, larger
 * struct gets zero for the counters this library does not have.  The
 * smallest size accepted is STABLEDIF_STATS_MIN_SIZE (the first counter).
 */
struct stabledif_stats {
  uint64_t writes;              /* write requests completed (ok or not) */
  uint64_t write_bytes;         /* data bytes of those writes */
  uint64_t write_errors;        /* writes that failed, for any reason */
  uint64_t rejected_writes;     /* writes the device failed with EIO */
  uint64_t reads;               /* read requests completed (ok or not) */
  uint64_t read_bytes;          /* data bytes of those reads */
  uint64_t read_errors;         /* reads that failed, for any reason */
  uint64_t read_pi_errors;      /* blocks that failed PI verify on read */
  uint64_t flushes;             /* flush requests completed */
  uint64_t wait_calls;          /* stabledif_wait_stable calls */
  uint64_t waits;               /* ... of them that blocked */
  uint64_t wait_ns;             /* total time blocked in them, ns */
  uint64_t snapshots;           /* writes copied to a bounce buffer */
  uint64_t snapshot_bytes;      /* bytes copied to bounce buffers */
  uint64_t forensics_bytes;     /* bytes saved for forensics */
  uint64_t dma_bytes;           /* bytes copied into extended blocks */
  uint64_t mismatches;          /* writes whose data changed between
                                   checksum and copy-out (client check) */
  uint64_t mismatched_blocks;   /* blocks of those writes that changed */
  /* New counters go here, each a uint64_t. */
};

/* The smallest SIZE stabledif_get_stats accepts: the end of "writes". */
#define STABLEDIF_STATS_MIN_SIZE \
  (offsetof (struct stabledif_stats, writes) + sizeof (uint64_t))

/* One run of changed bytes within a block's data. */
struct stabledif_byte_range {
  uint32_t offset;              /* first changed byte, from block start */
  uint32_t length;              /* number of bytes, >= 1 */
};

/* One block whose data changed between checksum and transfer. */
struct stabledif_block_report {
  uint64_t lba;                 /* the block, counted in intervals */
  uint64_t guard_submit;        /* guard computed at submit (in the tuple) */
  uint64_t guard_sent;          /* guard of the data actually sent */
  uint32_t bytes_changed;       /* total changed bytes in the block */
  size_t nranges;               /* number of entries in RANGES */
  const struct stabledif_byte_range *ranges; /* ascending, merged */
};

/* What forensics found for one write (valid during the callback only). */
struct stabledif_forensics_report {
  int64_t cookie;               /* the request (as returned at submit) */
  uint64_t offset;              /* data offset of the write, bytes */
  uint64_t count;               /* data length of the write, bytes */
  const void *buf;              /* the caller's buffer of the write */
  int error;                    /* errno of the write (0: accepted) */
  bool rejected;                /* the device failed the write with EIO */
  size_t nblocks;               /* number of entries in BLOCKS */
  const struct stabledif_block_report *blocks; /* in LBA order */
};

/* Called (on the library's I/O thread) for every write where forensics
 * found changed data or the device rejected the write. */
typedef void (*stabledif_forensics_callback) (
  void *user_data, const struct stabledif_forensics_report *report);

/* Called (on the library's I/O thread) when an asynchronous request
 * completes; ERROR is 0 or an errno.  stabledif_get_error() in the
 * callback describes the failure. */
typedef void (*stabledif_completion_callback) (void *user_data, int error);

/* Errors of the calling thread. */
const char *stabledif_get_error (void);
int stabledif_get_errno (void);

/* Handles. */
struct stabledif_handle *stabledif_create (void);
void stabledif_close (struct stabledif_handle *h);

/* Settings. */
int stabledif_set_policy (struct stabledif_handle *h,
                          enum stabledif_policy policy);
int stabledif_get_policy (struct stabledif_handle *h);
int stabledif_get_effective_policy (struct stabledif_handle *h);
const char *stabledif_policy_name (enum stabledif_policy policy);
int stabledif_policy_from_name (const char *name);
int stabledif_set_unsafe (struct stabledif_handle *h, bool unsafe);
int stabledif_get_unsafe (struct stabledif_handle *h);
int stabledif_set_race_delay_us (struct stabledif_handle *h, uint32_t usec);
int64_t stabledif_get_race_delay_us (struct stabledif_handle *h);
int stabledif_set_forensics (struct stabledif_handle *h, bool enable);
int stabledif_get_forensics (struct stabledif_handle *h);
int stabledif_set_forensics_callback (struct stabledif_handle *h,
                                      stabledif_forensics_callback cb,
                                      void *user_data);

/* Connections: the most a handle opens. */
#define STABLEDIF_MAX_CONNECTIONS 16

/* Before connect: open N (1..STABLEDIF_MAX_CONNECTIONS, default 1)
 * connections to the device, each with its own I/O thread (like the
 * hardware queues of a block device).  More than one is used only if
 * the server advertises multi-conn (a flush on one connection covers the
 * writes completed on all); otherwise connect opens one.  Get: the
 * number requested before connect, the number in use after. */
int stabledif_set_connections (struct stabledif_handle *h, unsigned n);
int stabledif_get_connections (struct stabledif_handle *h);

/* Connecting and the device profile. */
int stabledif_connect_uri (struct stabledif_handle *h, const char *uri);
const char *stabledif_get_profile (struct stabledif_handle *h);
const char *stabledif_get_format (struct stabledif_handle *h);
int stabledif_get_type (struct stabledif_handle *h);
int stabledif_get_guard_bits (struct stabledif_handle *h);
int64_t stabledif_get_interval (struct stabledif_handle *h);
int stabledif_get_tuple_size (struct stabledif_handle *h);
int stabledif_get_stable_writes (struct stabledif_handle *h);
int64_t stabledif_get_size (struct stabledif_handle *h);
/* The app tag and mask the device checks (its app-tag= setting): returns
 * 1 and sets *TAG and *MASK (either may be NULL), 0 if the device checks
 * no app tag (then both are set to 0), -1 if not connected. */
int stabledif_get_app_tag (struct stabledif_handle *h, uint16_t *tag,
                           uint16_t *mask);

/* Synchronous I/O. */
int stabledif_pwrite (struct stabledif_handle *h, const void *buf,
                      size_t count, uint64_t offset, uint32_t flags);
int stabledif_pread (struct stabledif_handle *h, void *buf, size_t count,
                     uint64_t offset, void *pi, uint32_t flags);
int stabledif_flush (struct stabledif_handle *h, uint32_t flags);

/* Asynchronous I/O: returns a cookie (> 0) or -1. */
int64_t stabledif_aio_pwrite (struct stabledif_handle *h, const void *buf,
                              size_t count, uint64_t offset, uint32_t flags,
                              stabledif_completion_callback cb,
                              void *user_data);
int64_t stabledif_aio_pread (struct stabledif_handle *h, void *buf,
                             size_t count, uint64_t offset, void *pi,
                             uint32_t flags,
                             stabledif_completion_callback cb,
                             void *user_data);
int64_t stabledif_aio_flush (struct stabledif_handle *h, uint32_t flags,
                             stabledif_completion_callback cb,
                             void *user_data);
int stabledif_wait_all (struct stabledif_handle *h);
int64_t stabledif_get_in_flight (struct stabledif_handle *h);

/* Wait until at least one request of H completes, or TIMEOUT_MS
 * milliseconds pass (-1: no limit; 0: only what is ready now); return at
 * once once nothing of H is in flight.  Where a
 * connection's I/O thread is idle, the calling thread polls its socket
 * and reads the replies itself, and the completion callbacks of the
 * requests it reads run on the calling thread, before this returns;
 * requests the I/O threads complete meanwhile run their callbacks
 * there, as without this call.  Any number of threads may poll.  For
 * 1 ms after each call an idle I/O thread leaves its socket to the next
 * poll (libstabledif(3)); stabledif_wait_all, the synchronous calls and
 * stabledif_wait_stable end that lease at once.
 * Returns the number of requests of H completed while it waited (on
 * any thread), 0 if the time ran out first or nothing was in flight,
 * or -1: EDEADLK when called
 * from a completion callback of H, ENOTCONN when not connected or the
 * connection was lost and nothing is left in flight, EINVAL for a
 * TIMEOUT_MS below -1. */
int stabledif_poll (struct stabledif_handle *h, int timeout_ms);

/* PI from the caller and interleaved buffers (libstabledif(3), "CALLER
 * PI AND INTERLEAVED BUFFERS").  The _pi calls take, per request, a
 * struct stabledif_pi saying where the tuples are and what the library
 * does with them; it is read during the call only.  OFFSET and COUNT are
 * data bytes, as in the calls above.  On a device without PI (format
 * none) there are no tuples: both layouts are the plain data, TUPLES and
 * the checks are ignored. */

/* BUF holds extended blocks ("interleaved", DIF, NVMe extended LBA):
 * each interval of data followed by its tuple, COUNT / interval *
 * (interval + tuple_size) bytes in all.  Without it BUF holds the data
 * only and TUPLES (if used) the tuples packed ("separate", DIX). */
#define STABLEDIF_PI_INTERLEAVED 0x01u
/* Write: the tuples are the caller's (in TUPLES, or in the interleaved
 * BUF) and are sent exactly as they are, checked at submit only as the
 * CHECK flags ask.  Without it the library generates them: the guard
 * over BUF, APP_TAG, the reference tag from the LBA; for an interleaved
 * BUF they are written into BUF's tuple slots, in place.  Read: not
 * allowed (EINVAL). */
#define STABLEDIF_PI_CALLER 0x02u
/* Checks: for a write with STABLEDIF_PI_CALLER, which fields of the
 * caller's tuples are checked at submit (none: sent unchecked, and the
 * device alone judges them); for a read, which fields are verified when
 * the blocks arrive (none: returned unverified).  Ignored for a write
 * whose PI the library generates.  Blocks whose tuple escapes (all-ones
 * app tag; for type 3 app and ref tag) pass every check, as on the
 * device. */
#define STABLEDIF_PI_CHECK_GUARD 0x04u /* guard against the data */
#define STABLEDIF_PI_CHECK_APP 0x08u   /* app tag & APP_MASK ==
                                          APP_TAG & APP_MASK */
#define STABLEDIF_PI_CHECK_REF 0x10u   /* ref tag against the LBA (types
                                          1, 2; type 3 has none) */
#define STABLEDIF_PI_CHECK_ALL \
  (STABLEDIF_PI_CHECK_GUARD | STABLEDIF_PI_CHECK_APP | STABLEDIF_PI_CHECK_REF)

/* The PI of one request.  The layout is part of the ABI (fixed; a later
 * member would come with new calls). */
struct stabledif_pi {
  uint32_t flags;               /* STABLEDIF_PI_* (others: EINVAL) */
  uint16_t app_tag;             /* the request's app tag: put into the
                                   tuples the library generates, compared
                                   by STABLEDIF_PI_CHECK_APP */
  uint16_t app_mask;            /* the bits of APP_TAG that
                                   STABLEDIF_PI_CHECK_APP compares */
  void *tuples;                 /* separate layout: the packed tuples,
                                   COUNT / interval * tuple_size bytes,
                                   big-endian as on the wire; the caller's
                                   for a write (STABLEDIF_PI_CALLER, else
                                   must be NULL), filled by a read (may be
                                   NULL: not returned).  Must be NULL with
                                   STABLEDIF_PI_INTERLEAVED. */
};

/* Write COUNT data bytes at OFFSET from BUF with the PI that PI
 * describes (PI NULL: as stabledif_pwrite).  BUF is not const: an
 * interleaved BUF whose PI the library generates gets the tuples written
 * into it.  The stable-page policy covers all of BUF as for
 * stabledif_pwrite, forensics too; the caller's TUPLES must not change
 * until the write completes (except under snapshot).  A caller's tuple failing a check
 * asked for fails the call with EILSEQ naming the LBA and check, and
 * nothing is sent.  A write the device rejects fails with EIO; for the
 * caller's PI the message names the first block and check that fail
 * against the device's rules. */
int stabledif_pwrite_pi (struct stabledif_handle *h, void *buf, size_t count,
                         uint64_t offset, const struct stabledif_pi *pi,
                         uint32_t flags);
int64_t stabledif_aio_pwrite_pi (struct stabledif_handle *h, void *buf,
                                 size_t count, uint64_t offset,
                                 const struct stabledif_pi *pi,
                                 uint32_t flags,
                                 stabledif_completion_callback cb,
                                 void *user_data);

/* Fill the tuples of COUNT data bytes at OFFSET (aligned as for a
 * write) as the device's format makes them: the guard over BUF's data,
 * PI->app_tag, the reference tag of each block's LBA.  The layout is
 * PI's: an interleaved BUF gets them in its tuple slots, in place; a
 * separate one in PI->tuples (COUNT / interval * tuple_size bytes).
 * PI's other flags are ignored.  Nothing is sent: a caller that is to be
 * the origin of its own checksums makes them here, when its data is
 * made, and writes them later with STABLEDIF_PI_CALLER.  On a device
 * without PI it does nothing.  Returns 0, or -1 (EINVAL: bad range,
 * layout or flags; ENOTCONN). */
int stabledif_generate_pi (struct stabledif_handle *h, void *buf,
                           size_t count, uint64_t offset,
                           const struct stabledif_pi *pi);

/* Read COUNT data bytes at OFFSET into BUF as PI describes (PI NULL: as
 * stabledif_pread with pi NULL).  An interleaved BUF receives the
 * extended blocks themselves and is verified in place; a separate one
 * the data, and TUPLES (if not NULL) the tuples.  The checks are those
 * of PI's flags, APP against APP_TAG/APP_MASK; a block failing one fails
 * the read with EIO naming the LBA and check.  FLAGS must be 0. */
int stabledif_pread_pi (struct stabledif_handle *h, void *buf, size_t count,
                        uint64_t offset, const struct stabledif_pi *pi,
                        uint32_t flags);
int64_t stabledif_aio_pread_pi (struct stabledif_handle *h, void *buf,
                                size_t count, uint64_t offset,
                                const struct stabledif_pi *pi,
                                uint32_t flags,
                                stabledif_completion_callback cb,
                                void *user_data);

/* Stable pages. */
int stabledif_wait_stable (struct stabledif_handle *h, const void *addr,
                           size_t len);

/* Counters.  SIZE is sizeof *STATS as the caller was compiled; see
 * struct stabledif_stats for what is written.  Fails with EINVAL if SIZE
 * is below STABLEDIF_STATS_MIN_SIZE (and then writes nothing).
 */
int stabledif_get_stats (struct stabledif_handle *h,
                         struct stabledif_stats *stats, size_t size);
int stabledif_reset_stats (struct stabledif_handle *h);

#ifdef __cplusplus
}
#endif

#endif /* STABLEDIF_H */
