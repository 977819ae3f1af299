/* SPDX-License-Identifier: BSD-3-Clause */
/* libstabledif: internal declarations shared by the library's files.
 *
 * Threads: any number of caller threads submit requests and wait.  A
 * connected handle has one or more connections (struct io_conn), each
 * with one I/O thread that drives its libnbd handle (polls it, reads the
 * replies), copies write data out to extended blocks, and runs the
 * completion and forensics callbacks of the requests on its connection.
 * While that thread sleeps in its poll with nothing to do, a caller's
 * thread that submits issues its request itself ("drives": copy-out and
 * send, io_drive), so that a request costs no wake-up of the I/O thread;
 * the I/O thread touches neither libnbd nor a request until the driver
 * is done, so at any time one thread alone issues on a connection.
 * A caller's thread in stabledif_poll drives the same way, and more:
 * it also polls the socket and reads the replies itself, so the
 * completions it reads (and their callbacks) run on its thread.  It
 * holds a connection for one poll of the socket at a time, and lets it
 * go at once when the I/O thread needs it (a race delay that ran out
 * rings the wake-up pipe, which the poller polls too).
 *
 * Locks: what one request touches from submit to completion belongs to
 * its connection, marked "clock" and protected by c->lock (the queue,
 * in-flight count, pins, wire buffers, counters); c->cond is broadcast
 * whenever one of its requests is copied out or completes.  So the I/O
 * threads of several connections share no lock on the I/O path, as the
 * hardware queues of a block device share none.  What is marked "lock"
 * is protected by h->lock (settings, the connect, the reason of a loss,
 * the waits of wait_stable); fields marked "atomic" are read without
 * it.  Lock order: h->lock before c->lock.
 */
#ifndef STABLEDIF_INTERNAL_H
#define STABLEDIF_INTERNAL_H

#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <libnbd.h>

#include "stabledif.h"
#include "pi.h"
#include "profile.h"

/* ---- errors (libstabledif-errors.c) ---------------------------------- */

/* Longest error message kept per thread, including the NUL. */
#define ERROR_MAX 2048

/* Set the calling thread's error: errno ERRNUM and a printf-style
 * message.  Messages start with the public function's name, libnbd
 * style ("stabledif_pwrite: ..."). */
void error_set (int errnum, const char *fmt, ...)
  __attribute__ ((format (printf, 2, 3)));

/* Set the calling thread's error to a message already formatted. */
void error_set_str (int errnum, const char *msg);

/* ---- stable-page policies and pins (libstabledif-policy.c) ---------- */

/* Whether P is one of the enum stabledif_policy values. */
bool policy_valid (int p);

/* Resolve REQUESTED for a device with STABLE_WRITES: auto becomes wait
 * or none; none on a stable device needs UNSAFE.  Returns 0 and sets
 * *EFFECTIVE, or -1 (errno EPERM or EINVAL) with a message in ERR. */
int policy_resolve (int requested, bool stable_writes, bool unsafe,
                    enum stabledif_policy *effective,
                    char *err, size_t errlen);

/* Whether a write submitted under policy P pins its source buffer, and
 * until when: wait pins until the device answers, wait-sent until the
 * data is copied out; snapshot and none never pin. */
bool policy_pins (enum stabledif_policy p);

/* Whether the half-open address ranges [A, A+ALEN) and [B, B+BLEN)
 * overlap.  Empty ranges overlap nothing; ranges that would run past the
 * end of the address space are clipped there. */
bool policy_ranges_overlap (uintptr_t a, size_t alen,
                            uintptr_t b, size_t blen);

/* The source region of one write that wait_stable must respect. */
struct pin {
  uintptr_t start;              /* first byte of the caller's buffer */
  size_t len;                   /* bytes */
  bool active;                  /* linked into a pinset */
  struct pin *prev, *next;      /* links while active */
};

/* The active pins of a connection (clock). */
struct pinset {
  struct pin *head;             /* most recently added first */
  atomic_size_t count;          /* number of active pins (changed under
                                   the lock; read without it to skip an
                                   empty set) */
};

void pinset_init (struct pinset *s);

/* Activate PIN for [ADDR, ADDR+LEN) (PIN must not be active). */
void pinset_add (struct pinset *s, struct pin *pin,
                 const void *addr, size_t len);

/* Deactivate PIN; does nothing if it is not active. */
void pinset_remove (struct pinset *s, struct pin *pin);

/* Whether any active pin overlaps [ADDR, ADDR+LEN). */
bool pinset_overlaps (const struct pinset *s, const void *addr, size_t len);

/* ---- extended-block layout (libstabledif-layout.c) ------------------ */

/* Largest NBD request the library sends (libnbd refuses more than
 * 64 MiB); smaller if the server advertises a smaller maximum. */
#define LAYOUT_MAX_REQUEST (32u * 1024 * 1024)

/* Bytes per NBD command for a device whose extended block is EXT_SIZE
 * bytes, given the largest request MAX_REQUEST (0: LAYOUT_MAX_REQUEST):
 * the largest multiple of EXT_SIZE not above it, at least one block. */
uint64_t layout_chunk_bytes (uint64_t max_request, uint32_t ext_size);

/* Submit side: generate the packed tuples of NBLOCKS intervals of data at
 * SRC (the first at LBA) into TUPLES, the guard computed over SRC.  If
 * COPY is not NULL the data is also copied there in the same pass (the
 * guard is then the guard of what was copied).  For format none only
 * the copy is done. */
void layout_generate (const struct pi_params *p, const uint8_t *src,
                      uint8_t *copy, uint8_t *tuples,
                      uint64_t nblocks, uint64_t lba);

/* Snapshot straight into the wire format: copy NBLOCKS intervals from
 * SRC into extended blocks at EXT, each followed by its tuple (the guard
 * of what was copied, computed in the same pass; the device's app tag;
 * the reference tag of LBA + i).  For format none only the copy. */
void layout_generate_ext (const struct pi_params *p, const uint8_t *src,
                          uint8_t *ext, uint64_t nblocks, uint64_t lba);

/* Called for each block whose guard at copy-out differs from the guard
 * in its tuple: INDEX from 0, the two guards. */
typedef void (*layout_mismatch_fn) (void *opaque, uint64_t index,
                                    uint64_t guard_submit,
                                    uint64_t guard_sent);

/* Copy-out ("the DMA"): build NBLOCKS extended blocks at EXT from data
 * at SRC and packed tuples at TUPLES.  With CHECK, recompute the guard of
 * each interval while copying it and compare it with the tuple's, call FN
 * (if not NULL) for each block that differs and return their number;
 * without, only copy (returns 0). */
uint64_t layout_join (const struct pi_params *p, const uint8_t *src,
                      const uint8_t *tuples, uint8_t *ext,
                      uint64_t nblocks, bool check, layout_mismatch_fn fn,
                      void *opaque);

/* After copy-out without CHECK: recompute the guard of the data of each
 * of the NBLOCKS extended blocks at EXT (what was sent), compare it with
 * the guard of the packed tuple at TUPLES (computed at submit), call FN
 * for each block that differs and return their number. */
uint64_t layout_recheck (const struct pi_params *p, const uint8_t *tuples,
                         const uint8_t *ext, uint64_t nblocks,
                         layout_mismatch_fn fn, void *opaque);

/* Read side: verify NBLOCKS extended blocks at EXT (the first at LBA),
 * calling FN for each failed block, and split them into DATA and (if
 * not NULL) packed tuples at PI, in one pass over EXT (every block's
 * data is copied, failed or not).  Returns the number of failed
 * blocks. */
uint64_t layout_split (const struct pi_params *p, const uint8_t *ext,
                       uint8_t *data, uint8_t *pi, uint64_t nblocks,
                       uint64_t lba, struct pi_verify_stats *stats,
                       pi_error_fn fn, void *opaque);

/* After copy-out of an interleaved buffer (the tuples travel with the
 * data): recompute the guard of the data of each of the NBLOCKS extended
 * blocks at EXT, compare it with the guard of the block's own tuple,
 * call FN for each block that differs and return their number. */
uint64_t layout_recheck_ext (const struct pi_params *p, const uint8_t *ext,
                             uint64_t nblocks, layout_mismatch_fn fn,
                             void *opaque);

/* Check NBLOCKS blocks (the first at LBA) as a request asks: CHECKS is a
 * set of STABLEDIF_PI_CHECK_*; the app tag is compared under P's
 * app_tag/app_mask when CHECKS has STABLEDIF_PI_CHECK_APP (P's
 * check_app is ignored); the ref tag only for types 1 and 2; escaped
 * tuples pass.  Block I's data is at DATA + I * DSTRIDE, its tuple at
 * TUPLES + I * TSTRIDE.  Calls FN (if not NULL) for each failed block
 * with the first of its checks that failed (guard, app, ref) and returns
 * their number.  Nothing is checked for format none or empty CHECKS. */
uint64_t layout_check (const struct pi_params *p, uint32_t checks,
                       const uint8_t *data, size_t dstride,
                       const uint8_t *tuples, size_t tstride,
                       uint64_t nblocks, uint64_t lba,
                       pi_error_fn fn, void *opaque);

/* The first failed block of a check and how many failed: a pi_error_fn
 * (layout_first_fn) fills it. */
struct layout_first {
  struct pi_error first;        /* the first failure */
  uint64_t failed;              /* failures seen */
};

/* pi_error_fn for a struct layout_first at OPAQUE (zeroed before). */
void layout_first_fn (void *opaque, const struct pi_error *err);

/* ---- read coverage (libstabledif-cover.c) ------------------------- */

/* One range of bytes a read's reply covered, relative to the start of
 * the request's wire range. */
struct cover_range {
  uint64_t start;               /* first byte */
  uint64_t end;                 /* one past the last byte */
};

/* Ranges held without an allocation (a reply in order needs one). */
#define COVER_INLINE 4

/* The bytes of one read request's wire range that reply chunks covered:
 * sorted, disjoint ranges, each merged with the ranges it touches. */
struct cover {
  struct cover_range *r;        /* the ranges: INLINE_R or allocated */
  size_t n;                     /* ranges in use */
  size_t cap;                   /* ranges R can hold */
  bool bad;                     /* a chunk overlapped covered bytes, lay
                                   outside the request, or memory ran
                                   out: the reply cannot be trusted */
  struct cover_range inline_r[COVER_INLINE]; /* the first ranges */
};

/* Set C to cover nothing (before the first cover_add). */
void cover_init (struct cover *c);

/* Release what C allocated; C covers nothing again. */
void cover_free (struct cover *c);

/* Add the LEN bytes at START (relative to the request) that one reply
 * chunk filled, of a request of TOTAL bytes.  Returns 0, or -1 and marks
 * C bad if they overlap bytes already covered or lie outside the request
 * (or memory ran out).  LEN 0 adds nothing. */
int cover_add (struct cover *c, uint64_t start, uint64_t len,
               uint64_t total);

/* Whether C covers exactly [0, TOTAL), each byte once. */
bool cover_full (const struct cover *c, uint64_t total);

/* How many bytes C covers (for messages). */
uint64_t cover_bytes (const struct cover *c);

/* ---- forensics (libstabledif-forensics.c) -------------------------- */

/* Compare LEN bytes at BEFORE (what was checksummed) and AFTER (what was
 * sent): store the runs of differing bytes, ascending and merged, in a
 * malloc'd array *RANGES (NULL if none) and the total of differing bytes
 * in *CHANGED.  Returns the number of ranges, or -1 if out of memory. */
long forensics_diff (const uint8_t *before, const uint8_t *after,
                     uint32_t len, struct stabledif_byte_range **ranges,
                     uint32_t *changed);

/* Describe NBLOCKS changed blocks in BUF (LEN bytes, always terminated),
 * at most a few blocks and ranges each, then "and N more".  Blocks
 * without ranges are described by their guards only, with a hint to
 * enable forensics when HAVE_BYTES is false.  Returns BUF. */
char *forensics_describe (const struct stabledif_block_report *blocks,
                          size_t nblocks, bool have_bytes,
                          char *buf, size_t len);

/* Free the ranges of NBLOCKS reports and the array BLOCKS. */
void forensics_free (struct stabledif_block_report *blocks, size_t nblocks);

/* ---- requests and the I/O thread (libstabledif-io.c) ---------------- */

/* What a request does. */
enum io_op {
  IO_WRITE,
  IO_READ,
  IO_FLUSH,
};

/* One request of a caller, from submit to completion. */
struct request {
  struct request *next;         /* link in its connection's queue */
  struct stabledif_handle *h;   /* owning handle */
  struct io_conn *conn;         /* the connection it is sent on (set at
                                   submit) */
  int64_t cookie;               /* returned to the caller, > 0 */
  enum io_op op;                /* what it does */
  const char *fn;               /* public function name, for messages */
  uint32_t nbd_flags;           /* LIBNBD_CMD_FLAG_* for each command */
  uint64_t offset;              /* data offset, bytes (interval multiple) */
  uint64_t count;               /* data length, bytes (0 for flush) */
  uint64_t lba;                 /* first block */
  uint64_t nblocks;             /* blocks */
  uint64_t ready_ns;            /* not handed to libnbd before this
                                   (io_now_ns clock) */

  /* Writes. */
  const uint8_t *buf;           /* the caller's buffer */
  const uint8_t *src;           /* what copy-out reads: BUF or BOUNCE */
  uint8_t *bounce;              /* snapshot copy (policy snapshot of a
                                   format without PI), or NULL */
  uint8_t *saved;               /* what was checksummed, kept for
                                   forensics (may be BOUNCE), or NULL */
  uint8_t *tuples;              /* packed tuples generated at submit */
  enum stabledif_policy policy; /* effective policy at submit */
  bool forensics;               /* forensics enabled at submit */
  struct pin pin;               /* the source region while pinned */
  struct stabledif_block_report *changed; /* blocks whose data changed */
  size_t nchanged;              /* entries in CHANGED */
  size_t changed_alloc;         /* allocated entries in CHANGED */
  uint64_t mismatched;          /* blocks whose guard changed (may exceed
                                   NCHANGED if memory ran out) */
  bool checked;                 /* the guards were recomputed at copy-out
                                   (else only if the device rejects) */
  bool built;                   /* EXT was built at submit (a snapshot in
                                   the wire format): no copy-out */

  /* The PI of the request (stabledif_pi of the _pi calls). */
  struct pi_params params;      /* the device's PI parameters, with the
                                   request's app tag and mask; check_app
                                   set if the request checks the app tag */
  uint32_t checks;              /* STABLEDIF_PI_CHECK_* the request asks
                                   (reads: verified on arrival; writes
                                   with CALLER_PI: checked at submit) */
  bool pi_call;                 /* submitted by a _pi call */
  bool interleaved;             /* the caller's buffer holds extended
                                   blocks (format with PI only) */
  bool caller_pi;               /* write: the tuples are the caller's,
                                   sent as they are */
  size_t buf_len;               /* bytes of the caller's buffer BUF (the
                                   pinned region) */
  const uint8_t *join_tuples;   /* packed tuples copy-out joins: TUPLES
                                   or the caller's, or NULL */

  /* Reads. */
  uint8_t *dst;                 /* the caller's data buffer */
  uint8_t *pi;                  /* the caller's tuple buffer, or NULL */
  struct cover cover;           /* what the reply chunks filled (libnbd
                                   does not zero the buffer first) */

  /* Writes and reads. */
  uint8_t *ext;                 /* extended blocks owned by the request,
                                   or NULL when the wire buffer is the
                                   caller's (format none) */
  size_t ext_cap;               /* bytes allocated at EXT (io_buf_get) */
  const uint8_t *wire;          /* the bytes on the wire: EXT or a caller
                                   or bounce buffer */
  uint64_t wire_count;          /* bytes on the wire */

  /* Completion. */
  unsigned refs;                /* NBD commands outstanding + 1 while
                                   being issued (the thread that issues
                                   or completes it: one at a time) */
  int error;                    /* 0 or errno of the first failure */
  char *msg;                    /* message of the failure, or NULL */
  stabledif_completion_callback cb; /* caller's callback, or NULL */
  void *user_data;              /* its argument */
  bool sync;                    /* a synchronous call waits for it */
  bool done;                    /* completed (clock; sync only) */
};

/* The size of a cache line (x86-64, arm64): the unit in which CPUs
 * share memory. */
#define IO_CACHE_LINE 64

/* One connection to the device and the I/O thread that owns it. */
struct io_conn {
  /* Each connection starts on a cache line of its own: its I/O thread
   * writes the fields marked (clock) on every request, and a line shared
   * with the next connection's would move between the CPUs each time. */
  _Alignas (IO_CACHE_LINE) struct stabledif_handle *h; /* owning handle */
  unsigned index;               /* 0 .. h->nconns - 1 */
  struct nbd_handle *nbd;       /* libnbd handle (its I/O thread's once
                                   connected), or NULL */
  pthread_t thread;             /* the I/O thread */
  bool running;                 /* the thread was started */
  int wake[2];                  /* pipe to wake it (read, write end), or
                                   -1 */
  pthread_mutex_t lock;         /* protects the fields marked (clock) */
  pthread_cond_t cond;          /* broadcast when one of its requests is
                                   copied out or completes, and when a
                                   poller waits for the connection to
                                   become idle and it does (its clock is
                                   CLOCK_MONOTONIC) */
  bool wake_pending;            /* a wake-up was sent that the I/O thread
                                   has not yet acted on: it will look at
                                   the queue again without another
                                   (clock) */
  bool idle;                    /* the I/O thread found nothing to issue
                                   and is in (or entering) a poll that
                                   waits: a submit must wake it or drive
                                   (clock) */
  bool driving;                 /* a caller's thread is issuing on this
                                   connection (io_drive; clock) */
  bool drove;                   /* a caller issued during the I/O
                                   thread's last poll, so what libnbd
                                   wanted then may have changed (clock) */
  bool poller;                  /* the driver is a stabledif_poll: it
                                   polls the socket too, and may hold the
                                   connection until its poll returns
                                   (clock) */
  bool polled;                  /* a poller drove during the I/O
                                   thread's last poll: the socket may have
                                   been read since (clock) */
  unsigned pollers_waiting;     /* stabledif_poll callers waiting on COND
                                   for a completion or for the I/O thread
                                   to become idle (clock) */
  uint64_t completed;           /* requests of this connection completed
                                   so far (clock) */
  _Atomic unsigned poll_dir;    /* LIBNBD_AIO_DIRECTION_* the I/O thread
                                   polls the socket for while IDLE, 0
                                   until it has asked libnbd, or while it
                                   leaves the socket to pollers (atomic) */
  bool leased;                  /* the I/O thread is in a poll that leaves
                                   the replies to pollers (the handle's
                                   poll lease), and polls again as long
                                   as they renew it: io_lease_end wakes
                                   it (clock) */
  pthread_cond_t drive_done;    /* broadcast when DRIVING becomes false */
  struct request *handoff;      /* requests whose last reference a
                                   driver dropped (a command libnbd
                                   refused): the I/O thread completes
                                   them, so that callbacks run there
                                   (clock) */
  struct request *queue_head;   /* submitted, not yet issued (clock) */
  struct request *queue_tail;   /* (clock) */
  uint64_t in_flight;           /* requests on this connection submitted,
                                   not completed (clock) */
  uint64_t cookies;             /* cookies given out on this connection
                                   (clock): the Nth is N * nconns + index
                                   + 1, unique in the handle without a
                                   counter the I/O threads share */
  struct pinset pins;           /* pinned source regions of its writes
                                   (clock) */
  struct io_buf *bufs;          /* wire buffers of completed requests,
                                   kept for reuse (clock) */
  uint64_t buf_bytes;           /* bytes held in BUFS (clock) */
  struct stabledif_stats stats; /* its share of the handle's counters
                                   (clock; the wait counters are the
                                   handle's) */
};

/* How the I/O threads wait for their sockets and wake-up pipes:
 * ppoll(2)'s contract. */
typedef int (*io_poll_fn) (struct pollfd *fds, nfds_t nfds,
                           const struct timespec *timeout,
                           const sigset_t *sigmask);

/* The handle. */
struct stabledif_handle {
  pthread_mutex_t lock;         /* protects the fields marked (lock) */
  io_poll_fn poll;              /* ppoll; a unit test may replace it
                                   before connect to make polls fail
                                   (read only by the I/O threads) */
  uint64_t poll_lease_len_ns;   /* how long each stabledif_poll call
                                   leaves the replies to pollers
                                   (IO_POLL_LEASE_NS; a unit test may
                                   change it; read by pollers only) */
  void (*poll_pretake) (struct stabledif_handle *h);
                                /* NULL; a unit test may set it: called by
                                   stabledif_poll between its look at the
                                   completions and taking connections */

  /* Settings (lock for writers; the atomic ones are read without it). */
  enum stabledif_policy policy; /* requested policy */
  _Atomic enum stabledif_policy effective; /* resolved policy (after
                                   connect; atomic) */
  bool unsafe;                  /* allow none on a stable device */
  _Atomic uint32_t race_delay_us; /* delay from submit to copy-out
                                   (atomic) */
  atomic_bool forensics;        /* keep copies and report changes
                                   (atomic) */
  stabledif_forensics_callback fcb; /* forensics callback, or NULL */
  void *fcb_data;               /* its argument */
  unsigned want_conns;          /* connections requested, 1..MAX */

  /* Connection: fixed once connected is true. */
  bool connecting;              /* connect in progress (lock) */
  atomic_bool connected;        /* connect succeeded (atomic) */
  bool attempted;               /* a connect was attempted (lock) */
  struct io_conn conns[STABLEDIF_MAX_CONNECTIONS]; /* the connections */
  unsigned nconns;              /* entries of CONNS in use (those with an
                                   nbd handle) */
  char *profile_line;           /* the export description */
  struct profile profile;       /* parsed profile */
  struct pi_params pi;          /* PI parameters from the profile */
  uint64_t size;                /* data bytes */
  uint64_t nblocks;             /* blocks */
  uint32_t ext_size;            /* interval + tuple */
  uint64_t chunk_bytes;         /* largest NBD command, wire bytes */
  bool read_only;               /* export is read-only */
  bool can_fua;                 /* server supports FUA */
  bool can_flush;               /* server supports flush */

  /* Requests. */
  _Atomic unsigned next_conn;   /* round-robin: where the next request
                                   from a caller's thread goes (atomic) */
  _Atomic uint64_t poll_lease_ns; /* until this monotonic time (io_now_ns)
                                   an idle I/O thread leaves its socket
                                   (replies, the rest of a send) to
                                   stabledif_poll, which renews it on
                                   every call; 0: none (atomic) */
  atomic_bool closing;          /* close requested (atomic; see
                                   io_submit) */
  atomic_bool dead;             /* a connection was lost (atomic; set
                                   after DEAD_MSG) */
  int dead_errno;               /* why (lock) */
  char *dead_msg;               /* why (lock) */
  int pending_errno;            /* first failure of a callback-less
                                   aio request not yet reported (lock) */
  char *pending_msg;            /* its message (lock) */
  struct stabledif_stats stats; /* the wait counters (lock); the others
                                   are the connections' */
};

/* Fail with ENOTCONN unless H is connected (message names FN).  Returns
 * 0 if connected. */
int handle_check_connected (struct stabledif_handle *h, const char *fn);

/* Whether the calling thread runs H's completion callbacks: it is one
 * of H's I/O threads, or it is inside stabledif_poll of H (where a call
 * that waits for a request of H would wait for itself). */
bool io_on_io_thread (struct stabledif_handle *h);

/* How long after a stabledif_poll call an idle I/O thread leaves the
 * replies of its connection to the next poller (poll_lease_ns): longer
 * than a caller spends between two polls, short enough that a caller
 * which stops polling with requests in flight sees them completed on the
 * I/O threads soon after. */
#define IO_POLL_LEASE_NS 1000000u

/* The calling thread is about to wait for H's requests other than in
 * stabledif_poll (a synchronous request, stabledif_wait_all,
 * stabledif_wait_stable): end the pollers' lease and wake the I/O
 * threads that left their sockets to pollers, so that the replies it
 * waits for are read without waiting for the lease to run out. */
void io_lease_end (struct stabledif_handle *h);

/* The preconditions of every call that submits a request of kind OP
 * (stabledif_[aio_]pwrite, _pread, _flush, named FN in messages), in
 * this order:
 *  - H is not NULL (EINVAL) and is connected (ENOTCONN);
 *  - for a read or write: BUF is not NULL, and COUNT bytes at OFFSET
 *    are a non-empty range aligned to the protection interval inside
 *    the device (EINVAL); BUF, COUNT and OFFSET are ignored for a flush;
 *  - FLAGS holds only flags OP knows: STABLEDIF_CMD_FLAG_FUA for a
 *    write, none otherwise (EINVAL);
 *  - the device supports what is asked: FUA (ENOTSUP), flush for a
 *    flush (ENOTSUP), writing for a write (EROFS);
 *  - a SYNC call (one that waits) is not made from a callback on one of
 *    H's I/O threads, where it would wait for itself (EDEADLK).
 * Returns 0 if the call may build its request; else reports the first
 * failure (error_set) and returns -1.  Whether the handle is closing or
 * its connection lost is decided later, by io_submit. */
int io_check_call (struct stabledif_handle *h, const char *fn, enum io_op op,
                   const void *buf, size_t count, uint64_t offset,
                   uint32_t flags, bool sync);

/* Allocate a request for H (zeroed, h and fn set).  NULL on ENOMEM
 * (error reported). */
struct request *io_request_new (struct stabledif_handle *h, const char *fn);

/* Free a request and everything it owns. */
void io_request_free (struct request *r);

/* Wire buffers are reused: allocating and freeing one of 128 KiB per
 * request makes malloc give the memory back to the kernel and fault it
 * in again, zeroed, on every request.  Each connection keeps its own.  A
 * cached buffer holds this header at its start. */
struct io_buf {
  struct io_buf *next;          /* next cached buffer */
  size_t cap;                   /* its size in bytes */
};

/* At most this many bytes of wire buffers are kept per connection. */
#define IO_BUF_CACHE_BYTES ((uint64_t) 16 << 20)

/* A wire buffer of at least SIZE bytes from C's cache (one of at most
 * twice SIZE, else a new one); *CAP is set to its size.  NULL on ENOMEM
 * (nothing reported: the caller names the call). */
uint8_t *io_buf_get (struct io_conn *c, size_t size, size_t *cap);

/* Take R's wire buffer (if any) into its connection's cache if it fits
 * there, else leave it to io_request_free.  Caller holds c->lock. */
void io_buf_keep_locked (struct io_conn *c, struct request *r);

/* Free every cached wire buffer of C (close). */
void io_buf_cache_free (struct io_conn *c);

/* The connection a new request of the calling thread goes to: a
 * callback's own, else the next in turn.  Fixed once connected. */
struct io_conn *io_pick_conn (struct stabledif_handle *h);

/* Queue R on its connection R->conn (io_pick_conn; it becomes ready
 * after DELAY_US) and give it a cookie; pins R's source if its policy
 * pins.  Returns the cookie, or -1 (request freed, error reported) if
 * the handle is closing or dead. */
int64_t io_submit (struct stabledif_handle *h, struct request *r,
                   uint32_t delay_us);

/* Wait for a sync request R to complete, copy its error to the calling
 * thread, free it.  Returns 0 or -1. */
int io_wait_sync (struct request *r);

/* Record a failure of R (the first one wins).  MSG may be NULL: a
 * generic message is made later from the errno. */
void io_request_fail (struct request *r, int errnum, const char *msg);

/* Start the I/O threads of the H->nconns connections (connect): -1 with
 * the error reported if one cannot start (those started are stopped).
 * Stop them (close): each stops when nothing of its connection is in
 * flight. */
int io_start (struct stabledif_handle *h);
void io_stop (struct stabledif_handle *h);

/* Monotonic clock in nanoseconds. */
uint64_t io_now_ns (void);

/* ---- per-request PI (libstabledif-pireq.c) ------------------------ */

/* Check the struct stabledif_pi PI (may be NULL) of a request of kind OP
 * (IO_WRITE or IO_READ) named FN: known flags; STABLEDIF_PI_CALLER only
 * for writes; on a format with PI, TUPLES NULL with
 * STABLEDIF_PI_INTERLEAVED, and for a separate write set exactly when
 * STABLEDIF_PI_CALLER is.  Reports the error (EINVAL, naming the member)
 * and returns -1; 0 if good. */
int pireq_check (struct stabledif_handle *h, const char *fn, enum io_op op,
                 const struct stabledif_pi *pi);

/* Set R's PARAMS, CHECKS, PI_CALL, INTERLEAVED, CALLER_PI and BUF_LEN
 * from PI (checked by pireq_check; NULL: the device's PI, every check,
 * the plain layout).  R's H, COUNT and NBLOCKS must be set. */
void pireq_apply (struct request *r, const struct stabledif_pi *pi);

/* ---- write path (libstabledif-write.c) ----------------------------- */

/* I/O thread or a driver (io_drive): copy R out to extended blocks and
 * issue its commands. */
void write_issue (struct request *r);

/* I/O thread: R's last command completed; build the error message and
 * forensics report, call the forensics callback, update counters
 * (lock taken inside). */
void write_complete (struct request *r);

/* ---- read path (libstabledif-read.c) ------------------------------- */

/* I/O thread or a driver (io_drive): issue R's commands. */
void read_issue (struct request *r);

/* nbd_chunk_callback of R's read commands (USER_DATA is R): add the
 * bytes a reply chunk filled to R's coverage (a chunk that overlaps
 * bytes already filled, or lies outside R, marks it bad: read_complete
 * then fails R with EIO).  Always returns 0. */
int read_chunk (void *user_data, const void *subbuf, size_t count,
                uint64_t offset, unsigned status, int *error);

/* I/O thread: R's last command completed: verify and split (lock taken
 * inside for counters). */
void read_complete (struct request *r);

/* ---- shared by the paths (libstabledif-io.c) ----------------------- */

/* Drop one reference of R (I/O thread, or a driver: then the I/O thread
 * completes it); at zero, complete it: call the
 * path's completion, then the caller's callback or wake the waiter. */
void io_request_put (struct request *r);

/* Issue the NBD commands of R over its wire buffer, in chunks of
 * h->chunk_bytes (I/O thread or a driver).  A command libnbd refuses
 * fails R. */
void io_issue_chunks (struct request *r);

#endif /* STABLEDIF_INTERNAL_H */
