/* SPDX-License-Identifier: BSD-3-Clause */
/* stabledif: bench-dif-view -- writes and reads of the dif view through
 * libstabledif, against plain libnbd writes and reads of the same data
 * bytes to nbdkit's memory plugin, in the same run.
 *
 *   bench-dif-view [OPTIONS] STABLEDIF_URI BASELINE_URI
 *
 * Both sides issue asynchronous requests of the same size, sequentially
 * over the same span, keeping the same number in flight.  libstabledif
 * generates PI at submit, joins data and PI into extended blocks at
 * copy-out and sends interval + tuple bytes per interval (8 more per 512
 * for T10 DIF, 1.6%), the device verifies every block before storing it;
 * a read verifies every block and splits data from PI.  The baseline
 * only moves the data.  With --connections N both sides use N
 * connections: libstabledif N per handle (each with its own I/O thread),
 * the baseline N libnbd handles, each driven from a thread of its own
 * with an equal share of the queue depth.  Each round times the two
 * sides back to back, libstabledif first, so that every timed run
 * follows one of the other side; a row gives each side's median rate
 * and the median of the rounds' ratios, and every round's figures
 * follow it.  A caller-thread table follows (unless --no-caller-table):
 * libstabledif driven the way applications usually write it, one thread
 * submitting with the buffers that completions hand back to it, waiting
 * for them in stabledif_poll (--caller-wait cond: on a condition
 * variable its callbacks signal), against libnbd driven from one thread,
 * one connection per side, in paired rounds.  A second table gives, for
 * information, the CPU time this process spent per MB moved on each
 * side over all its rounds
 * (getrusage: the library's or libnbd's threads and this program's),
 * steadier than the throughputs on a shared machine; with --server-pids
 * a third gives each server's CPU time per MB (all its threads, from
 * /proc/PID/stat).
 * With --interleaved the table is of interleaved buffers instead (the
 * _pi calls with STABLEDIF_PI_INTERLEAVED: PI generated in place and no
 * copy-out, reads verified in place, the caller's PI sent unchecked),
 * against libnbd moving the same extended bytes (il_table), and the
 * caller-thread table is of interleaved writes and reads
 * (il_caller_table).
 * bench/dif-view.sh starts both servers; see bench/README.md.  Not a
 * test: it prints ratios, and with --check exits 1 when one is below the
 * target.
 */
#include <config.h>

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include <libnbd.h>

#include "stabledif.h"

#define PROG "bench-dif-view"

/* Targets: libstabledif throughput / baseline throughput.  Writes of
 * LARGE_WRITE bytes or more keep their measured level as a guard: with
 * separate data and PI buffers the library must join them into extended
 * blocks before libnbd sends them, a copy the baseline does not make
 * (bench/README.md). */
#define TARGET 0.85
#define TARGET_LARGE_WRITE 0.75
#define LARGE_WRITE (64 * 1024)

/* Targets of the caller-thread tables (a thread of the caller submits,
 * completions hand buffers back to it): 128 KiB writes and reads, 4 KiB
 * writes, and a device without PI (format none), where the library does
 * no PI work and the hand-off between threads is all it adds.  Writes of
 * LARGE_WRITE bytes or more from separate data and PI buffers pay the
 * join here too: they keep the main table's guard, TARGET_LARGE_WRITE;
 * TARGET_CALLER for them applies to interleaved buffers
 * (il_caller_table). */
#define TARGET_CALLER 0.85
#define TARGET_CALLER_SMALL_WRITE 0.80
#define TARGET_CALLER_NONE 0.95

/* The target of the row for writes (WRITE) or reads of SIZE bytes. */
static double
target_of (bool write, size_t size)
{
  return write && size >= LARGE_WRITE ? TARGET_LARGE_WRITE : TARGET;
}

/* Settings from the command line. */
struct options {
  uint64_t span;                /* bytes written and read, per side */
  unsigned depth;               /* requests in flight, per side */
  unsigned connections;         /* connections per side (1 to
                                   STABLEDIF_MAX_CONNECTIONS, <= depth) */
  unsigned rounds;              /* timed rounds per figure */
  double round_secs;            /* length of one round */
  bool check;                   /* exit 1 when a target is missed */
  const char *policy;           /* libstabledif policy */
  size_t size;                  /* only this request size (0: 4K and 128K) */
  int only;                     /* 0 write, 1 read, -1 both */
  int side;                     /* 0 only libstabledif, 1 only the
                                   baseline, -1 both (for profiling) */
  bool from_thread;             /* libstabledif: submit from the main
                                   thread (a window like the baseline's)
                                   rather than from completion callbacks */
  bool from_caller;             /* libstabledif: the main table uses the
                                   caller-thread pattern (sd_run_caller) */
  bool no_caller_table;         /* leave out the caller-thread table */
  bool caller_cond;             /* the caller's thread waits on the
                                   condition variable, not in
                                   stabledif_poll */
  long server_pid[2];           /* process IDs of the stabledif server
                                   and the baseline's (0: not measured) */
  bool interleaved;             /* the interleaved table instead (il_table) */
};

/* ---- the two sides: a table of operations ---- */

struct side;

/* One request slot of a callback-driven run: its buffer is reused by
 * the request submitted when it completes. */
struct slot {
  struct side *s;               /* the side */
  unsigned index;               /* which DEPTH-th part of the buffers */
};

/* One libnbd connection of the baseline and the thread that drives it
 * during a round. */
struct nb_conn {
  struct side *s;               /* the side */
  struct nbd_handle *h;         /* its own handle */
  unsigned window;              /* requests it keeps in flight */
  unsigned first_slot;          /* its first buffer slot (of DEPTH) */
  pthread_t thread;             /* drives it during a round */
  uint64_t bytes;               /* bytes it submitted in the round */
  int failed;                   /* first errno of a failed request */
  bool error;                   /* the round failed on it (printed) */
};

/* One side of the comparison. */
struct side {
  const char *name;             /* printed */
  /* Time one run (see run below): SECS seconds, or one pass over the
   * span when SECS is 0.  Bytes per second, or -1 (message printed). */
  double (*run) (struct side *s, const struct options *o, bool write,
                 uint8_t *bufs, size_t count, double secs);
  struct stabledif_handle *h;   /* libstabledif: the handle */
  unsigned nconns;              /* connections in use */
  pthread_mutex_t lock;         /* stabledif: protects in_flight, failed */
  pthread_cond_t cond;          /* stabledif: a request completed */
  unsigned in_flight;           /* stabledif: requests not completed */
  int failed;                   /* first errno of a failed request */
  /* Callback-driven run (libstabledif): atomics, like the baseline's
   * counter, so that the I/O threads of several connections share no
   * lock here (LOCK only guards FAILED and the last wake-up): */
  struct slot *slots;           /* DEPTH slots */
  bool write;                   /* writes, else reads */
  uint8_t *bufs;                /* DEPTH * COUNT bytes */
  size_t count;                 /* bytes per request */
  bool once;                    /* stop after one pass over the span */
  atomic_bool stop;             /* submit no more */
  _Atomic unsigned chained;     /* requests in flight */
  _Atomic uint64_t submitted;   /* requests submitted in the round */
  /* Baseline (libnbd): */
  struct nb_conn *conns;        /* NCONNS connections */
  _Atomic uint64_t next;        /* index of the next request of a round */
  uint64_t per_pass;            /* requests in one pass over the span */
  double deadline;              /* now () at which a round ends; 0: one
                                   pass over the span */
  atomic_bool abort;            /* a connection failed: all stop */
  /* Caller-thread run (libstabledif; under LOCK): */
  unsigned *ready;              /* DEPTH entries: slots handed back */
  unsigned nready;              /* entries in READY */
  uint64_t last_bytes;          /* bytes moved by the last run */
  /* Interleaved rows (il_table): */
  int il;                       /* libstabledif: 0 the plain calls, else
                                   enum il_mode */
  uint16_t app_tag, app_mask;   /* libstabledif: the device's app tag */
  size_t il_stride;             /* libstabledif: bytes of a buffer slot
                                   (extended blocks of COUNT data bytes) */
  uint8_t *il_span;             /* both: extended blocks of the whole span
                                   that requests take at their offset
                                   (caller rows), or NULL */
  uint32_t il_interval;         /* libstabledif: the protection interval */
};

/* The requests of an interleaved row (stabledif_aio_pwrite_pi and
 * _pread_pi with STABLEDIF_PI_INTERLEAVED). */
enum il_mode {
  IL_GENERATED = 1,             /* writes: PI generated in place */
  IL_CALLER = 2,                /* writes: the caller's PI, unchecked */
};

/* libstabledif completion (its I/O thread). */
static void
sd_done (void *user_data, int error)
{
  struct side *s = user_data;

  pthread_mutex_lock (&s->lock);
  if (error && !s->failed)
    s->failed = error;
  s->in_flight--;
  pthread_cond_signal (&s->cond);
  pthread_mutex_unlock (&s->lock);
}

/* Submit one request from the main thread (the library picks the
 * connection); 0 or -1 (message printed). */
static int
sd_submit (struct side *s, bool write, void *buf, size_t count,
           uint64_t offset)
{
  int64_t c;

  pthread_mutex_lock (&s->lock);
  s->in_flight++;
  pthread_mutex_unlock (&s->lock);
  if (write)
    c = stabledif_aio_pwrite (s->h, buf, count, offset, 0, sd_done, s);
  else
    c = stabledif_aio_pread (s->h, buf, count, offset, NULL, 0, sd_done, s);
  if (c == -1) {
    fprintf (stderr, PROG ": %s\n", stabledif_get_error ());
    pthread_mutex_lock (&s->lock);
    s->in_flight--;
    pthread_mutex_unlock (&s->lock);
    return -1;
  }
  return 0;
}

/* Block until fewer than MAX requests are in flight; 0 or -1 (message
 * printed). */
static int
sd_wait_below (struct side *s, unsigned max)
{
  int failed;

  pthread_mutex_lock (&s->lock);
  while (s->in_flight >= max && s->in_flight > 0)
    pthread_cond_wait (&s->cond, &s->lock);
  failed = s->failed;
  pthread_mutex_unlock (&s->lock);
  if (failed) {
    fprintf (stderr, PROG ": %s: a request failed: %s\n", s->name,
             strerror (failed));
    return -1;
  }
  return 0;
}

/* ---- libstabledif, completion-driven: the way the library's manual
 * recommends for throughput (a callback submits the next request on the
 * I/O thread, which picks it up before it polls again) ---- */

/* Take the next request of the span (counted in flight): its offset;
 * false when the round is over (and then STOP is set). */
static bool
chain_next (struct side *s, uint64_t *off)
{
  uint64_t idx;

  if (atomic_load (&s->stop))
    return false;
  idx = atomic_fetch_add (&s->next, 1);
  if (s->once && idx >= s->per_pass) {
    atomic_store (&s->stop, true);
    return false;
  }
  *off = (idx % s->per_pass) * s->count;
  atomic_fetch_add (&s->chained, 1);
  atomic_fetch_add (&s->submitted, 1);
  return true;
}

/* A request of the chain is over: the last one wakes the main thread
 * (under LOCK, so that the wake-up cannot be lost). */
static void
chain_retire (struct side *s)
{
  if (atomic_fetch_sub (&s->chained, 1) == 1) {
    pthread_mutex_lock (&s->lock);
    pthread_cond_signal (&s->cond);
    pthread_mutex_unlock (&s->lock);
  }
}

/* A request of the chain failed with ERROR: stop the round. */
static void
chain_fail (struct side *s, int error)
{
  pthread_mutex_lock (&s->lock);
  if (!s->failed)
    s->failed = error;
  atomic_store (&s->stop, true);
  pthread_cond_signal (&s->cond);
  pthread_mutex_unlock (&s->lock);
}

static void chain_done (void *user_data, int error);

/* Submit the interleaved request of SLOT at data offset OFF (see enum
 * il_mode): from the slot's extended blocks, or from the span's at OFF;
 * DONE (with SLOT) is its completion.  The cookie or -1. */
static int64_t
il_submit (struct slot *slot, uint64_t off,
           stabledif_completion_callback done)
{
  struct side *s = slot->s;
  struct stabledif_pi pi = {
    .flags = STABLEDIF_PI_INTERLEAVED, .app_tag = s->app_tag,
    .app_mask = s->app_mask, .tuples = NULL,
  };
  uint8_t *buf = s->bufs + (size_t) slot->index * s->il_stride;

  if (s->il_span)
    buf = s->il_span + off / s->il_interval *
      (s->il_stride / (s->count / s->il_interval));
  if (!s->write) {
    pi.flags |= STABLEDIF_PI_CHECK_ALL;
    return stabledif_aio_pread_pi (s->h, buf, s->count, off, &pi, 0,
                                   done, slot);
  }
  if (s->il == IL_CALLER)
    pi.flags |= STABLEDIF_PI_CALLER;
  return stabledif_aio_pwrite_pi (s->h, buf, s->count, off, &pi, 0,
                                  done, slot);
}

/* Submit the request of SLOT at OFF; on failure undo its accounting. */
static void
chain_submit (struct slot *slot, uint64_t off)
{
  struct side *s = slot->s;
  void *buf = s->bufs + (size_t) slot->index * s->count;
  int64_t c;

  if (s->il)
    c = il_submit (slot, off, chain_done);
  else if (s->write)
    c = stabledif_aio_pwrite (s->h, buf, s->count, off, 0, chain_done, slot);
  else
    c = stabledif_aio_pread (s->h, buf, s->count, off, NULL, 0, chain_done,
                             slot);
  if (c == -1) {
    fprintf (stderr, PROG ": %s\n", stabledif_get_error ());
    atomic_fetch_sub (&s->submitted, 1);
    chain_fail (s, EIO);
    chain_retire (s);
  }
}

/* Completion (I/O thread): reuse the slot for the next request. */
static void
chain_done (void *user_data, int error)
{
  struct slot *slot = user_data;
  struct side *s = slot->s;
  uint64_t off;

  if (error)
    chain_fail (s, error);
  /* The next request is counted in flight before this one retires. */
  if (chain_next (s, &off))
    chain_submit (slot, off);
  chain_retire (s);
}

static double now (void);

/* Like run below, but the requests after the first DEPTH are submitted
 * by completion callbacks. */
static double
sd_run_chained (struct side *s, const struct options *o, bool write,
                uint8_t *bufs, size_t count, double secs)
{
  struct timespec deadline;
  double t0, t;
  unsigned i;
  int failed;

  pthread_mutex_lock (&s->lock);
  s->write = write;
  s->bufs = bufs;
  s->count = count;
  s->per_pass = o->span / count;
  s->once = secs == 0;
  s->failed = 0;
  atomic_store (&s->next, 0);
  atomic_store (&s->stop, false);
  atomic_store (&s->submitted, 0);
  /* The main thread holds one count until it has submitted the first
   * DEPTH, so that the round cannot look finished before. */
  atomic_store (&s->chained, 1);
  pthread_mutex_unlock (&s->lock);

  t0 = now ();
  for (i = 0; i < o->depth; i++) {
    uint64_t off;

    if (!chain_next (s, &off))
      break;
    chain_submit (&s->slots[i], off);
  }
  chain_retire (s);

  clock_gettime (CLOCK_REALTIME, &deadline);
  if (secs > 0) {
    double end = (double) deadline.tv_sec + (double) deadline.tv_nsec / 1e9
      + secs;
    deadline.tv_sec = (time_t) end;
    deadline.tv_nsec = (long) ((end - (double) deadline.tv_sec) * 1e9);
  }
  pthread_mutex_lock (&s->lock);
  /* A timed round: until the deadline (or a failure); then stop the chain
   * and let what is in flight finish.  One pass (SECS 0): the chain stops
   * by itself at the end of the span (chain_next), so only wait for it;
   * stopping it here would write only the first DEPTH requests. */
  if (secs > 0) {
    while (!atomic_load (&s->stop) &&
           pthread_cond_timedwait (&s->cond, &s->lock, &deadline) == 0)
      ;
    atomic_store (&s->stop, true);
  }
  while (atomic_load (&s->chained) > 0)
    pthread_cond_wait (&s->cond, &s->lock);
  failed = s->failed;
  pthread_mutex_unlock (&s->lock);
  t = now () - t0;
  if (failed) {
    fprintf (stderr, PROG ": %s: a request failed: %s\n", s->name,
             strerror (failed));
    return -1;
  }
  s->last_bytes = atomic_load (&s->submitted) * s->count;
  return (double) s->last_bytes / t;
}

/* ---- libstabledif from a caller's thread, the way an application
 * writes it: one thread keeps DEPTH requests in flight, each completion
 * hands its buffer back to that thread (a list under a lock), and the
 * thread submits the next request with it.  The thread waits for a
 * buffer in stabledif_poll, which reads replies on it and runs their
 * completions there, or (--caller-wait cond) on a condition variable the
 * completions signal from the I/O thread ---- */

/* Completion (the caller's thread in stabledif_poll, or an I/O thread):
 * hand the slot back. */
static void
caller_done (void *user_data, int error)
{
  struct slot *slot = user_data;
  struct side *s = slot->s;

  pthread_mutex_lock (&s->lock);
  if (error && !s->failed)
    s->failed = error;
  s->ready[s->nready++] = slot->index;
  pthread_cond_signal (&s->cond);
  pthread_mutex_unlock (&s->lock);
}

/* Wait (S->lock held) until a completion handed a buffer back: on the
 * condition variable, or in stabledif_poll (without the lock) with
 * --caller-wait poll.  -1 if stabledif_poll failed (message printed). */
static int
caller_wait (struct side *s, const struct options *o)
{
  if (o->caller_cond) {
    pthread_cond_wait (&s->cond, &s->lock);
    return 0;
  }
  pthread_mutex_unlock (&s->lock);
  if (stabledif_poll (s->h, -1) == -1) {
    fprintf (stderr, PROG ": %s\n", stabledif_get_error ());
    pthread_mutex_lock (&s->lock);
    return -1;
  }
  pthread_mutex_lock (&s->lock);
  return 0;
}

/* Like sd_run_window (the same requests in the same order), but each
 * request is submitted with the buffer a completion handed back. */
static double
sd_run_caller (struct side *s, const struct options *o, bool write,
               uint8_t *bufs, size_t count, double secs)
{
  uint64_t off = 0, bytes = 0, n = 0;
  double t0, t;
  unsigned i;
  int failed = 0;

  pthread_mutex_lock (&s->lock);
  s->write = write;             /* for il_submit */
  s->bufs = bufs;
  s->count = count;
  s->failed = 0;
  for (i = 0; i < o->depth; i++)
    s->ready[i] = o->depth - 1 - i;
  s->nready = o->depth;
  pthread_mutex_unlock (&s->lock);

  t0 = now ();
  for (;;) {
    struct slot *slot;
    int64_t c;

    pthread_mutex_lock (&s->lock);
    while (s->nready == 0)
      if (caller_wait (s, o) == -1) {
        pthread_mutex_unlock (&s->lock);
        return -1;
      }
    slot = &s->slots[s->ready[--s->nready]];
    failed = s->failed;
    if (failed)
      s->ready[s->nready++] = slot->index;
    pthread_mutex_unlock (&s->lock);
    if (failed)
      break;
    if (s->il)
      c = il_submit (slot, off, caller_done);
    else if (write)
      c = stabledif_aio_pwrite (s->h, bufs + (size_t) slot->index * count,
                                count, off, 0, caller_done, slot);
    else
      c = stabledif_aio_pread (s->h, bufs + (size_t) slot->index * count,
                               count, off, NULL, 0, caller_done, slot);
    if (c == -1) {
      fprintf (stderr, PROG ": %s\n", stabledif_get_error ());
      pthread_mutex_lock (&s->lock);
      s->ready[s->nready++] = slot->index;
      pthread_mutex_unlock (&s->lock);
      failed = EIO;
      break;
    }
    n++;
    bytes += count;
    off += count;
    if (off + count > o->span) {
      off = 0;
      if (secs == 0)
        break;
    }
    if (secs > 0 && (n & 15) == 0 && now () - t0 >= secs)
      break;
  }
  /* Every buffer back: nothing in flight. */
  pthread_mutex_lock (&s->lock);
  while (s->nready < o->depth)
    if (caller_wait (s, o) == -1) {
      pthread_mutex_unlock (&s->lock);
      return -1;
    }
  if (!failed)
    failed = s->failed;
  pthread_mutex_unlock (&s->lock);
  t = now () - t0;
  if (failed) {
    if (failed != EIO || s->failed)
      fprintf (stderr, PROG ": %s: a request failed: %s\n", s->name,
               strerror (failed));
    return -1;
  }
  s->last_bytes = bytes;
  return (double) bytes / t;
}

/* ---- timing ---- */

static double
now (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

/* libstabledif from the main thread: requests of COUNT bytes over the
 * span, DEPTH in flight (the library spreads them over its connections),
 * for at least SECS seconds (the whole span once when SECS is 0).
 * Buffer slot I of BUFS (DEPTH * COUNT bytes) is used by every DEPTH-th
 * request.  Returns bytes per second, or -1. */
static double
sd_run_window (struct side *s, const struct options *o, bool write,
               uint8_t *bufs, size_t count, double secs)
{
  uint64_t off = 0, bytes = 0, n = 0;
  double t0, t;

  t0 = now ();
  for (;;) {
    if (sd_wait_below (s, o->depth) == -1)
      return -1;
    if (sd_submit (s, write, bufs + (n % o->depth) * count, count, off)
        == -1)
      return -1;
    n++;
    bytes += count;
    off += count;
    if (off + count > o->span) {
      off = 0;
      if (secs == 0)
        break;
    }
    if (secs > 0 && (n & 15) == 0 && now () - t0 >= secs)
      break;
  }
  if (sd_wait_below (s, 1) == -1)
    return -1;
  t = now () - t0;
  s->last_bytes = bytes;
  return (double) bytes / t;
}

/* ---- the baseline: NCONNS libnbd handles, each driven from its own
 * thread that polls and submits (libnbd does not let a completion
 * callback submit on its own handle) ---- */

/* libnbd completion (the connection's thread, inside nbd_poll). */
static int
nbd_done (void *user_data, int *error)
{
  struct nb_conn *c = user_data;

  if (*error && !c->failed)
    c->failed = *error;
  return 1;
}

/* Poll C until fewer than MAX of its requests are in flight.  0, or -1
 * after printing why (and C->error set). */
static int
nb_wait_below (struct nb_conn *c, unsigned max)
{
  while (nbd_aio_in_flight (c->h) >= (int) max &&
         nbd_aio_in_flight (c->h) > 0)
    if (nbd_poll (c->h, -1) == -1) {
      fprintf (stderr, PROG ": libnbd: %s\n", nbd_get_error ());
      c->error = true;
      return -1;
    }
  if (c->failed) {
    fprintf (stderr, PROG ": libnbd: a request failed: %s\n",
             strerror (c->failed));
    c->error = true;
    return -1;
  }
  return 0;
}

/* Thread of connection ARG during a round: keep its window full with
 * the next requests of the span (shared by all connections, so together
 * they go over it in order, like one queue) until the deadline or the
 * end of the pass; then wait for what is in flight. */
static void *
nb_worker (void *arg)
{
  struct nb_conn *c = arg;
  struct side *s = c->s;
  nbd_completion_callback cb = { .callback = nbd_done, .user_data = c };
  uint64_t n = 0;

  for (;;) {
    uint64_t idx, off;
    void *buf;
    int64_t r;

    if (nb_wait_below (c, c->window) == -1)
      break;
    if (atomic_load (&s->abort))
      break;
    /* At least one request per round: on a busy machine the thread may
     * start after a short round's deadline. */
    if (s->deadline > 0 && n > 0 && (n & 15) == 0 && now () >= s->deadline)
      break;
    idx = atomic_fetch_add (&s->next, 1);
    if (s->deadline == 0 && idx >= s->per_pass)
      break;
    off = (idx % s->per_pass) * s->count;
    buf = s->bufs + (size_t) (c->first_slot + n % c->window) * s->count;
    if (s->il_span)
      buf = s->il_span + off;
    if (s->write)
      r = nbd_aio_pwrite (c->h, buf, s->count, off, cb, 0);
    else
      r = nbd_aio_pread (c->h, buf, s->count, off, cb, 0);
    if (r == -1) {
      fprintf (stderr, PROG ": libnbd: %s\n", nbd_get_error ());
      c->error = true;
      break;
    }
    n++;
    c->bytes += s->count;
  }
  if (!c->error)
    nb_wait_below (c, 1);
  if (c->error)
    atomic_store (&s->abort, true);
  return NULL;
}

/* The baseline's run (see struct side): one thread per connection, timed
 * together (total bytes / wall time from before the first thread starts
 * until the last one has ended). */
static double
nb_run (struct side *s, const struct options *o, bool write, uint8_t *bufs,
        size_t count, double secs)
{
  uint64_t bytes = 0;
  unsigned i, started;
  double t0, t;
  bool error = false;
  int e;

  s->write = write;
  s->bufs = bufs;
  s->count = count;
  s->per_pass = o->span / count;
  atomic_store (&s->next, 0);
  atomic_store (&s->abort, false);
  for (i = 0; i < s->nconns; i++) {
    s->conns[i].bytes = 0;
    s->conns[i].failed = 0;
    s->conns[i].error = false;
  }
  t0 = now ();
  s->deadline = secs > 0 ? t0 + secs : 0;
  for (started = 0; started < s->nconns; started++) {
    e = pthread_create (&s->conns[started].thread, NULL, nb_worker,
                        &s->conns[started]);
    if (e != 0) {
      fprintf (stderr, PROG ": pthread_create: %s\n", strerror (e));
      atomic_store (&s->abort, true);
      error = true;
      break;
    }
  }
  for (i = 0; i < started; i++) {
    pthread_join (s->conns[i].thread, NULL);
    bytes += s->conns[i].bytes;
    if (s->conns[i].error)
      error = true;
  }
  t = now () - t0;
  s->last_bytes = bytes;
  return error ? -1 : (double) bytes / t;
}

/* One timed run of side S (see struct side). */
static double
run (struct side *s, const struct options *o, bool write, uint8_t *bufs,
     size_t count, double secs)
{
  return s->run (s, o, write, bufs, count, secs);
}

/* CPU time (user + system) this process has used, in seconds: all its
 * threads, so during a run of one side that side's library, its I/O or
 * polling threads and this program's callbacks. */
static double
cpu_now (void)
{
  struct rusage ru;

  getrusage (RUSAGE_SELF, &ru);
  return (double) ru.ru_utime.tv_sec + (double) ru.ru_utime.tv_usec / 1e6 +
    (double) ru.ru_stime.tv_sec + (double) ru.ru_stime.tv_usec / 1e6;
}

/* CPU time (user + system, all threads) process PID has used, in
 * seconds, from /proc/PID/stat; -1 with a message if it cannot be read. */
static double
proc_cpu (long pid)
{
  char path[64], line[1024], *p;
  unsigned long ut, st;
  FILE *fp;
  size_t n;

  snprintf (path, sizeof path, "/proc/%ld/stat", pid);
  fp = fopen (path, "r");
  if (fp == NULL) {
    fprintf (stderr, PROG ": server process %ld: %s: %s\n", pid, path,
             strerror (errno));
    return -1;
  }
  n = fread (line, 1, sizeof line - 1, fp);
  fclose (fp);
  line[n] = '\0';
  /* "PID (COMM) STATE PPID ...": COMM may hold anything, so fields are
   * counted from its last ')'; utime and stime are fields 14 and 15. */
  p = strrchr (line, ')');
  if (p == NULL ||
      sscanf (p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu",
              &ut, &st) != 2) {
    fprintf (stderr, PROG ": server process %ld: %s: not a stat line\n",
             pid, path);
    return -1;
  }
  return (double) (ut + st) / (double) sysconf (_SC_CLK_TCK);
}

/* What a timed run cost: added up over the rounds of one figure. */
struct cost {
  double cpu;                   /* this process's CPU seconds */
  double server;                /* the server's CPU seconds */
  double bytes;                 /* bytes moved */
};

/* A timed run of side S (its server process PID, 0 if not measured)
 * that also adds what it cost to *C.  -1 if the run failed or the
 * server's CPU time could not be read (printed). */
static double
run_counted (struct side *s, const struct options *o, bool write,
             uint8_t *bufs, size_t count, double secs, long pid,
             struct cost *c)
{
  double c0 = cpu_now (), s0 = 0, s1 = 0, r;

  if (pid > 0 && (s0 = proc_cpu (pid)) < 0)
    return -1;
  r = run (s, o, write, bufs, count, secs);
  if (pid > 0 && (s1 = proc_cpu (pid)) < 0)
    return -1;
  c->cpu += cpu_now () - c0;
  c->server += s1 - s0;
  c->bytes += (double) s->last_bytes;
  return r;
}

/* ---- the figures of a row ---- */

/* What a row of the table says. */
struct figure {
  double sd;                    /* libstabledif: the median of its rounds'
                                   bytes per second */
  double base;                  /* the baseline's, likewise */
  double ratio;                 /* the median of the rounds' ratios
                                   (libstabledif over the baseline of
                                   the same round) */
};

static int
cmp_double (const void *a, const void *b)
{
  double x = *(const double *) a, y = *(const double *) b;

  return (x > y) - (x < y);
}

/* The median of the N (>= 1) values V, which it sorts; of an even
 * number, the mean of the middle two. */
static double
median_sort (double *v, unsigned n)
{
  qsort (v, n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* The median of the N (>= 1) values V, sorted in SCRATCH (room for N). */
static double
median_of (const double *v, unsigned n, double *scratch)
{
  memcpy (scratch, v, n * sizeof *v);
  return median_sort (scratch, n);
}

/* Fill *F from the N rounds' rates of both sides, SD[i] and BASE[i]
 * measured back to back in round i.  The two runs of a round share
 * whatever else the machine is doing then, so their ratio is steadier
 * than either rate; the median of the ratios ignores a disturbed round
 * where a best-of-each-side quotient would let one lucky round of
 * either side set the figure alone. */
static void
figure_of (const double *sd, const double *base, unsigned n,
           double *scratch, struct figure *f)
{
  unsigned i;

  f->sd = median_of (sd, n, scratch);
  f->base = median_of (base, n, scratch);
  for (i = 0; i < n; i++)
    scratch[i] = base[i] > 0 ? sd[i] / base[i] : 0;
  f->ratio = median_sort (scratch, n);
}

/* ---- setup ---- */

static void
usage (FILE *fp)
{
  fprintf (fp,
"Usage: " PROG " [OPTIONS] STABLEDIF_URI BASELINE_URI\n"
"Throughput of dif-view writes and reads through libstabledif against\n"
"libnbd writes and reads of the same data bytes to BASELINE_URI.\n"
"\n"
"  --span BYTES     bytes written and read per side (default 64M)\n"
"  --depth N        requests in flight per side (default 32)\n"
"  --connections N  connections per side, 1 to %d (default 1): N per\n"
"                   libstabledif handle, N libnbd handles each driven\n"
"                   from its own thread with DEPTH/N requests in flight\n"
"  --rounds N       timed rounds per figure, the median kept (default 5)\n"
"  --round-ms MS    length of one round (default 500)\n"
"  --policy NAME    libstabledif policy (default auto)\n"
"  --size BYTES     only this request size (default 4096 and 131072)\n"
"  --only write|read  only writes or only reads\n"
"  --side libstabledif|baseline  time one side only (for a profiler)\n"
"  --submit callback|thread|caller  libstabledif: submit from completion\n"
"                   callbacks (default), or from the main thread in a\n"
"                   window like the baseline's, or from the main thread\n"
"                   with buffers handed back by completions (the pattern\n"
"                   of the caller-thread table)\n"
"  --no-caller-table  leave out the caller-thread table (with\n"
"                   --interleaved: the caller-thread table of\n"
"                   interleaved buffers)\n"
"  --caller-wait poll|cond  how the caller's thread waits for its\n"
"                   buffers: in stabledif_poll, reading replies itself\n"
"                   (default), or on a condition variable its callbacks\n"
"                   signal\n"
"  --server-pids SD,BASE  the process IDs of the two servers: print\n"
"                   their CPU time per MB too (from /proc)\n"
"  --interleaved    instead: interleaved buffers (library PI, the\n"
"                   caller's PI unchecked, reads verified in place)\n"
"                   against the same extended bytes through libnbd,\n"
"                   then the same from a caller's thread\n"
"  --check          exit 1 if a ratio is below its target (%.2f; writes\n"
"                   of 64 KiB or more: %.2f; caller-thread tables: %.2f,\n"
"                   4 KiB writes %.2f, writes of 64 KiB or more from\n"
"                   separate buffers %.2f, every row on format none\n"
"                   %.2f; --interleaved: see bench/README.md)\n",
           STABLEDIF_MAX_CONNECTIONS, TARGET, TARGET_LARGE_WRITE,
           TARGET_CALLER, TARGET_CALLER_SMALL_WRITE, TARGET_LARGE_WRITE,
           TARGET_CALLER_NONE);
}

static int
parse_options (int argc, char **argv, struct options *o)
{
  static const struct option longopts[] = {
    { "span", required_argument, NULL, 's' },
    { "depth", required_argument, NULL, 'd' },
    { "connections", required_argument, NULL, 'n' },
    { "rounds", required_argument, NULL, 'r' },
    { "round-ms", required_argument, NULL, 'm' },
    { "policy", required_argument, NULL, 'p' },
    { "check", no_argument, NULL, 'c' },
    { "size", required_argument, NULL, 'z' },
    { "only", required_argument, NULL, 'o' },
    { "side", required_argument, NULL, 'S' },
    { "submit", required_argument, NULL, 'T' },
    { "server-pids", required_argument, NULL, 'P' },
    { "interleaved", no_argument, NULL, 'I' },
    { "no-caller-table", no_argument, NULL, 'C' },
    { "caller-wait", required_argument, NULL, 'W' },
    { "help", no_argument, NULL, 'h' },
    { NULL, 0, NULL, 0 },
  };
  int c;

  o->span = 64u << 20;
  o->depth = 32;
  o->connections = 1;
  o->rounds = 5;
  o->round_secs = 0.5;
  o->check = false;
  o->policy = "auto";
  o->size = 0;
  o->only = -1;
  o->side = -1;
  o->from_thread = false;
  o->from_caller = false;
  o->no_caller_table = false;
  o->caller_cond = false;
  o->server_pid[0] = o->server_pid[1] = 0;
  o->interleaved = false;
  while ((c = getopt_long (argc, argv, "h", longopts, NULL)) != -1) {
    char *end;
    unsigned long long v;

    switch (c) {
    case 'o':
      if (strcmp (optarg, "write") == 0) o->only = 0;
      else if (strcmp (optarg, "read") == 0) o->only = 1;
      else { fprintf (stderr, PROG ": --only write|read\n"); return -1; }
      break;
    case 'S':
      if (strcmp (optarg, "libstabledif") == 0) o->side = 0;
      else if (strcmp (optarg, "baseline") == 0) o->side = 1;
      else {
        fprintf (stderr, PROG ": --side libstabledif|baseline\n");
        return -1;
      }
      break;
    case 'T':
      if (strcmp (optarg, "callback") == 0) o->from_thread = false;
      else if (strcmp (optarg, "thread") == 0) o->from_thread = true;
      else if (strcmp (optarg, "caller") == 0)
        o->from_thread = o->from_caller = true;
      else {
        fprintf (stderr, PROG ": --submit callback|thread|caller\n");
        return -1;
      }
      break;
    case 'P': {
      long a, b;
      int used = 0;
      if (sscanf (optarg, "%ld,%ld%n", &a, &b, &used) != 2 ||
          optarg[used] != '\0' || a <= 0 || b <= 0) {
        fprintf (stderr, PROG ": --server-pids \"%s\": want two process "
                 "IDs, SD,BASE\n", optarg);
        return -1;
      }
      o->server_pid[0] = a;
      o->server_pid[1] = b;
      if (proc_cpu (a) < 0 || proc_cpu (b) < 0)
        return -1;
      break;
    }
    case 'n':
      errno = 0;
      v = strtoull (optarg, &end, 10);
      if (errno || *end || *optarg < '0' || *optarg > '9') {
        fprintf (stderr, PROG ": --connections \"%s\": not a number (1 to "
                 "%d)\n", optarg, STABLEDIF_MAX_CONNECTIONS);
        return -1;
      }
      if (v < 1 || v > STABLEDIF_MAX_CONNECTIONS) {
        fprintf (stderr, PROG ": --connections %s: out of range (1 to %d)\n",
                 optarg, STABLEDIF_MAX_CONNECTIONS);
        return -1;
      }
      o->connections = (unsigned) v;
      break;
    case 's': case 'd': case 'r': case 'm': case 'z':
      errno = 0;
      v = strtoull (optarg, &end, 10);
      if (c == 's' && (*end == 'M' || *end == 'm')) {
        v <<= 20;
        end++;
      }
      if (errno || *end || v == 0) {
        fprintf (stderr, PROG ": bad number \"%s\"\n", optarg);
        return -1;
      }
      if (c == 's') o->span = v;
      else if (c == 'z') o->size = v;
      else if (c == 'd') o->depth = (unsigned) v;
      else if (c == 'r') o->rounds = (unsigned) v;
      else o->round_secs = (double) v / 1000;
      break;
    case 'p': o->policy = optarg; break;
    case 'c': o->check = true; break;
    case 'I': o->interleaved = true; break;
    case 'C': o->no_caller_table = true; break;
    case 'W':
      if (strcmp (optarg, "poll") == 0) o->caller_cond = false;
      else if (strcmp (optarg, "cond") == 0) o->caller_cond = true;
      else {
        fprintf (stderr, PROG ": --caller-wait poll|cond\n");
        return -1;
      }
      break;
    case 'h': usage (stdout); exit (0);
    default: usage (stderr); return -1;
    }
  }
  if (argc - optind != 2) {
    usage (stderr);
    return -1;
  }
  if (o->size && (o->size % 4096 != 0 || o->size > 32u << 20)) {
    fprintf (stderr, PROG ": --size must be a multiple of 4096, at most "
             "32M\n");
    return -1;
  }
  if (o->depth < o->connections) {
    fprintf (stderr, PROG ": --depth %u is less than --connections %u (each "
             "connection needs a request in flight)\n", o->depth,
             o->connections);
    return -1;
  }
  if (o->span < (o->size ? o->size : 128 * 1024)) {
    fprintf (stderr, PROG ": --span %" PRIu64 " is smaller than a request "
             "(%zu bytes)\n", o->span, o->size ? o->size : 128 * 1024);
    return -1;
  }
  return 0;
}

static int
connect_sd (struct side *s, const char *uri, const struct options *o)
{
  struct stabledif_handle *h = stabledif_create ();
  int p = stabledif_policy_from_name (o->policy);
  unsigned i;
  int n = 0;

  s->name = "libstabledif";
  s->run = sd_run_window;
  pthread_mutex_init (&s->lock, NULL);
  pthread_cond_init (&s->cond, NULL);
  if (!o->from_thread)
    s->run = sd_run_chained;
  if (o->from_caller)
    s->run = sd_run_caller;
  /* Slots for the callback and the caller-thread runs. */
  s->ready = calloc (o->depth, sizeof *s->ready);
  {
    s->slots = calloc (o->depth, sizeof *s->slots);
    if (s->slots == NULL || s->ready == NULL) {
      perror (PROG ": calloc");
      stabledif_close (h);
      return -1;
    }
    for (i = 0; i < o->depth; i++) {
      s->slots[i].s = s;
      s->slots[i].index = i;
    }
  }
  if (h == NULL || p == -1 ||
      stabledif_set_policy (h, (enum stabledif_policy) p) == -1 ||
      stabledif_set_connections (h, o->connections) == -1 ||
      stabledif_connect_uri (h, uri) == -1 ||
      (n = stabledif_get_connections (h)) < 1) {
    fprintf (stderr, PROG ": %s: %s\n", uri, stabledif_get_error ());
    stabledif_close (h);
    return -1;
  }
  s->h = h;
  s->nconns = (unsigned) n;
  return 0;
}

/* Open the baseline's O->connections libnbd handles to URI and share
 * the queue depth out between them (the first DEPTH % N one more), each
 * its own run of buffer slots.  0, or -1 after printing why. */
static int
connect_nbd (struct side *s, const char *uri, const struct options *o)
{
  unsigned i, slot = 0;

  s->name = "libnbd";
  s->run = nb_run;
  s->conns = calloc (o->connections, sizeof *s->conns);
  if (s->conns == NULL) {
    perror (PROG ": calloc");
    return -1;
  }
  for (i = 0; i < o->connections; i++) {
    struct nb_conn *c = &s->conns[i];

    c->s = s;
    c->window = o->depth / o->connections + (i < o->depth % o->connections);
    c->first_slot = slot;
    slot += c->window;
    c->h = nbd_create ();
    s->nconns = i + 1;          /* main closes the handles */
    if (c->h == NULL || nbd_connect_uri (c->h, uri) == -1) {
      fprintf (stderr, PROG ": %s: %s\n", uri, nbd_get_error ());
      return -1;
    }
  }
  return 0;
}

/* Print a table of CPU time per MB moved for each row measured, both
 * sides and their quotient: this process's (client) or the servers'
 * (SERVER), headed WHAT. */
static void
print_costs (const struct options *o, const char *what,
             struct cost cost[2][2][2], const size_t *sizes, int nsizes,
             bool server)
{
  int k, w;

  printf ("\n%s per MB moved, all rounds, for information:\n"
          "%-16s %14s %14s %8s\n", what, "", "libstabledif", "baseline",
          "sd/base");
  for (k = 0; k < nsizes; k++)
    for (w = 0; w < 2; w++) {
      const struct cost *c = cost[k][w];
      double a, b;
      char label[32];

      if ((o->only != -1 && o->only != w) || c[0].bytes <= 0 ||
          c[1].bytes <= 0)
        continue;
      a = (server ? c[0].server : c[0].cpu) / c[0].bytes * 1e9;
      b = (server ? c[1].server : c[1].cpu) / c[1].bytes * 1e9;
      snprintf (label, sizeof label, "%s %zu KiB",
                w == 0 ? "write" : "read", sizes[k] / 1024);
      /* A server's CPU time comes in clock ticks: a run too short to
       * use one has no quotient. */
      if (a > 0 && b > 0)
        printf ("%-16s %8.3f ms/MB %8.3f ms/MB %7.2fx\n", label, a, b,
                a / b);
      else
        printf ("%-16s %8.3f ms/MB %8.3f ms/MB %8s\n", label, a, b, "n/a");
    }
}

/* ---- the caller-thread tables' sides ---- */

/* What caller_begin changed, for caller_end to put back. */
struct caller_setup {
  struct side *sd;              /* the main tables' libstabledif side */
  struct side *nb;              /* the baseline */
  double (*run) (struct side *, const struct options *, bool, uint8_t *,
                 size_t, double);       /* SD's run */
  unsigned nconns;              /* NB's connections in use */
  unsigned window;              /* the window of NB's first connection */
  struct side one;              /* SD with one connection, if opened */
};

/* Set up a caller-thread table: the side the caller's thread drives
 * (SD itself if it has one connection, else a handle of one connection
 * to SD_URI opened here), its run sd_run_caller; the baseline NB on its
 * first connection alone with the whole queue depth.  That side, or NULL
 * if the handle could not be opened (printed); caller_end undoes it
 * either way. */
static struct side *
caller_begin (struct caller_setup *cs, struct side *sd, const char *sd_uri,
              struct side *nb, const struct options *o)
{
  struct side *c = sd;

  memset (cs, 0, sizeof *cs);
  cs->sd = sd;
  cs->nb = nb;
  cs->run = sd->run;
  cs->nconns = nb->nconns;
  cs->window = nb->conns[0].window;
  if (sd->nconns > 1) {
    struct options one_conn = *o;

    one_conn.connections = 1;
    if (connect_sd (&cs->one, sd_uri, &one_conn) == -1)
      return NULL;
    c = &cs->one;
  }
  c->run = sd_run_caller;
  nb->nconns = 1;
  nb->conns[0].window = o->depth;
  return c;
}

/* Undo caller_begin (nothing if CS is all zeros: it did not run). */
static void
caller_end (struct caller_setup *cs)
{
  if (cs->sd == NULL)
    return;
  cs->sd->run = cs->run;
  cs->nb->nconns = cs->nconns;
  cs->nb->conns[0].window = cs->window;
  if (cs->one.name != NULL) {   /* connect_sd ran */
    if (cs->one.h)
      stabledif_close (cs->one.h);
    free (cs->one.slots);
    free (cs->one.ready);
    pthread_mutex_destroy (&cs->one.lock);
    pthread_cond_destroy (&cs->one.cond);
  }
}

/* ---- interleaved buffers ---- */

/* Targets of the interleaved rows (bench/README.md): writes with the
 * library's PI (fill the tuples in place, no copy-out), small and large;
 * reads verified in place; the caller's PI sent unchecked. */
#define IL_TARGET_WRITE 0.90
#define IL_TARGET_LARGE_WRITE 0.88
#define IL_TARGET_READ 0.92
#define IL_TARGET_CALLER 0.95

/* The rows of il_table, in order. */
static const struct il_row {
  const char *what;             /* label: direction, then mode */
  bool write;                   /* writes, else reads */
  int mode;                     /* enum il_mode */
} il_rows[] = {
  { "write", true, IL_GENERATED },
  { "read", false, IL_GENERATED },
  { "write", true, IL_CALLER },
};
#define IL_NROWS (sizeof il_rows / sizeof il_rows[0])

/* The target of row R for requests of SIZE bytes. */
static double
il_target_of (const struct il_row *r, size_t size)
{
  if (r->mode == IL_CALLER)
    return IL_TARGET_CALLER;
  if (!r->write)
    return IL_TARGET_READ;
  return size >= LARGE_WRITE ? IL_TARGET_LARGE_WRITE : IL_TARGET_WRITE;
}

/* The target of row R for requests of SIZE bytes in the caller-thread
 * table (the caller-thread targets: 4 KiB writes lower). */
static double
il_caller_target_of (const struct il_row *r, size_t size)
{
  return r->write && size < LARGE_WRITE ? TARGET_CALLER_SMALL_WRITE
    : TARGET_CALLER;
}

/* The third word of row R's label: its mode, in the caller-thread table
 * (CALLER) "caller-il". */
static const char *
il_word (const struct il_row *r, bool caller)
{
  return caller ? "caller-il"
    : r->mode == IL_CALLER ? "caller-pi" : "interleaved";
}

/* One pass of SD (PI generated in place) and NB over the span, from
 * BUFS, or from SPAN if not NULL (whose tuples it fills): reads then
 * verify real PI, and the span holds the right tuple for every LBA. */
static int
il_fill (struct side *sd, struct side *nb, const struct options *o,
         uint8_t *bufs, uint8_t *span, size_t count, size_t ext_count)
{
  sd->il = IL_GENERATED;
  sd->il_span = nb->il_span = span;
  if ((o->side != 1 && run (sd, o, true, bufs, count, 0) < 0) ||
      (o->side != 0 && run (nb, o, true, bufs, ext_count, 0) < 0))
    return -1;
  return 0;
}

/* The interleaved table (--interleaved): for each request size, writes
 * with the library's PI filled in place, reads verified in place, and
 * writes of the caller's PI (a span of extended blocks built once, sent
 * unchecked), each against libnbd moving the same extended bytes (the
 * baseline writes and reads COUNT / interval * (interval + tuple) bytes
 * per request to the memory plugin).  Rates are wire bytes per second
 * on both sides; paired rounds and medians as in the main table.  With
 * CALLER (il_caller_table: SD and NB set up by caller_begin) the
 * caller-thread table of interleaved buffers: the first two rows, with
 * the caller-thread targets.  Sets *MISSED if a ratio is below its
 * target.  0, or -1 (printed). */
static int
il_table (struct side *sd, struct side *nb, const struct options *o,
          const size_t *sizes, size_t nsizes, bool caller, bool *missed)
{
  const uint32_t iv = (uint32_t) stabledif_get_interval (sd->h);
  const uint32_t es = iv + (uint32_t) stabledif_get_tuple_size (sd->h);
  const double wire = (double) es / iv;    /* wire bytes per data byte */
  struct cost cost[2][IL_NROWS][2];        /* [size][row][sd/nb] */
  double *rates[2], *sorted;
  uint8_t *bufs, *span;
  size_t k, maxext = sizes[nsizes - 1] / iv * es;
  uint64_t span_ext = o->span / iv * es;
  int ret = -1, srv;
  unsigned i;

  if (stabledif_get_app_tag (sd->h, &sd->app_tag, &sd->app_mask) == -1) {
    fprintf (stderr, PROG ": %s\n", stabledif_get_error ());
    return -1;
  }
  memset (cost, 0, sizeof cost);
  rates[0] = calloc (o->rounds, sizeof (double));
  rates[1] = calloc (o->rounds, sizeof (double));
  sorted = calloc (o->rounds, sizeof (double));
  bufs = malloc (o->depth * maxext);
  span = malloc (span_ext);
  if (!rates[0] || !rates[1] || !sorted || !bufs || !span) {
    perror (PROG ": malloc");
    goto out;
  }
  {
    uint64_t x = 0x9E3779B97F4A7C15u, j;
    for (j = 0; j < span_ext; j++) {
      x ^= x << 13; x ^= x >> 7; x ^= x << 17;
      span[j] = (uint8_t) x;
      if (j < o->depth * maxext)
        bufs[j] = (uint8_t) (x >> 8);
    }
  }
  sd->il_interval = iv;

  if (caller)
    printf ("\ninterleaved buffers from one thread of the caller, each "
            "completion handing its\nbuffer back, the thread waiting %s; "
            "one connection per side,\nthe baseline one libnbd thread; "
            "paired rounds:\n", o->caller_cond ? "on a condition variable"
            : "in stabledif_poll");
  else
    printf ("interleaved buffers: libstabledif sends the caller's extended "
            "blocks (STABLEDIF_PI_INTERLEAVED);\nthe baseline moves the same "
            "extended bytes; MB/s of wire bytes on both sides\n\n");
  printf ("%-24s %14s %14s %8s %8s\n", "", "libstabledif", "baseline",
          "ratio", "target");
  for (k = 0; k < nsizes; k++) {
    const size_t count = sizes[k], ext_count = count / iv * es;

    sd->il_stride = ext_count;
    for (i = 0; i < IL_NROWS; i++) {
      const struct il_row *row = &il_rows[i];
      const double target = caller ? il_caller_target_of (row, count)
        : il_target_of (row, count);
      struct figure fig;
      char label[48];
      unsigned r;

      if (o->only != -1 && o->only != !row->write)
        continue;
      /* The caller-thread rows: those of caller_table. */
      if (caller && (row->mode == IL_CALLER ||
                     (!row->write && count < LARGE_WRITE)))
        continue;
      /* Before the first row, and before the caller's row (whose span
       * needs its tuples): one pass. */
      if ((i == 0 || row->mode == IL_CALLER || (o->only == 1 && i == 1)) &&
          il_fill (sd, nb, o, bufs, row->mode == IL_CALLER ? span : NULL,
                   count, ext_count) == -1)
        goto out;
      sd->il = row->mode;
      for (r = 0; r < o->rounds; r++) {
        struct cost c[2];
        double a = 0, b = 0;

        memset (c, 0, sizeof c);
        if (o->side != 1) {
          a = run_counted (sd, o, row->write, bufs, count, o->round_secs,
                           o->server_pid[0], &c[0]) * wire;
          c[0].bytes *= wire;
        }
        if (a >= 0 && o->side != 0)
          b = run_counted (nb, o, row->write, bufs, ext_count,
                           o->round_secs, o->server_pid[1], &c[1]);
        if (a < 0 || b < 0)
          goto out;
        rates[0][r] = a;
        rates[1][r] = b;
        cost[k][i][0].cpu += c[0].cpu;
        cost[k][i][0].server += c[0].server;
        cost[k][i][0].bytes += c[0].bytes;
        cost[k][i][1].cpu += c[1].cpu;
        cost[k][i][1].server += c[1].server;
        cost[k][i][1].bytes += c[1].bytes;
      }
      snprintf (label, sizeof label, "%s %zuK %s", row->what, count / 1024,
                il_word (row, caller));
      if (o->side != -1) {
        printf ("%s: %.1f MB/s\n", label,
                median_of (rates[o->side == 1], o->rounds, sorted) / 1e6);
        continue;
      }
      figure_of (rates[0], rates[1], o->rounds, sorted, &fig);
      printf ("%-24s %9.1f MB/s %9.1f MB/s %7.2fx %7.2fx%s\n", label,
              fig.sd / 1e6, fig.base / 1e6, fig.ratio, target,
              fig.ratio >= target ? "" : o->check ? "  MISSED" : "  (below)");
      if (fig.ratio < target)
        *missed = true;
      printf ("%-24s", "  rounds:");
      for (r = 0; r < o->rounds; r++)
        printf (" %.0f/%.0f=%.2f", rates[0][r] / 1e6, rates[1][r] / 1e6,
                rates[1][r] > 0 ? rates[0][r] / rates[1][r] : 0);
      printf ("\n");
    }
    sd->il_span = nb->il_span = NULL;
  }
  for (srv = 0; o->side == -1 && srv < (o->server_pid[0] > 0 ? 2 : 1);
       srv++) {
    printf ("\n%s per MB of wire bytes, all rounds, for information:\n"
            "%-24s %14s %14s %8s\n", srv ? "server CPU (user + system, all "
            "threads)" : "client CPU (user + system)", "", "libstabledif",
            "baseline", "sd/base");
    for (k = 0; k < nsizes; k++)
      for (i = 0; i < IL_NROWS; i++) {
        const struct cost *c = cost[k][i];
        char label[48];
        double a, b;

        if (c[0].bytes <= 0 || c[1].bytes <= 0)
          continue;
        a = (srv ? c[0].server : c[0].cpu) / c[0].bytes * 1e9;
        b = (srv ? c[1].server : c[1].cpu) / c[1].bytes * 1e9;
        snprintf (label, sizeof label, "%s %zuK %s", il_rows[i].what,
                  sizes[k] / 1024, il_word (&il_rows[i], caller));
        /* Server CPU time comes in clock ticks: none, no quotient. */
        if (a > 0 && b > 0)
          printf ("%-24s %8.3f ms/MB %8.3f ms/MB %7.2fx\n", label, a, b,
                  a / b);
        else
          printf ("%-24s %8.3f ms/MB %8.3f ms/MB %8s\n", label, a, b, "n/a");
      }
  }
  ret = 0;

 out:
  sd->il = 0;
  sd->il_span = nb->il_span = NULL;
  free (rates[0]);
  free (rates[1]);
  free (sorted);
  free (bufs);
  free (span);
  return ret;
}

/* The caller-thread table of interleaved buffers (il_table with CALLER)
 * on the side caller_begin gives (SD_URI to open one connection). */
static int
il_caller_table (struct side *sd, const char *sd_uri, struct side *nb,
                 const struct options *o, const size_t *sizes,
                 size_t nsizes, bool *missed)
{
  struct caller_setup cs;
  struct side *c = caller_begin (&cs, sd, sd_uri, nb, o);
  int ret = -1;

  if (c != NULL)
    ret = il_table (c, nb, o, sizes, nsizes, true, missed);
  caller_end (&cs);
  return ret;
}

/* The rows of the caller-thread table: writes or reads of a size. */
static const struct {
  bool write;                   /* writes, else reads */
  size_t size;                  /* bytes per request */
} caller_rows[] = {
  { true, 128 * 1024 }, { false, 128 * 1024 }, { true, 4096 },
};

/* The caller-thread table: libstabledif driven by sd_run_caller (one
 * thread of the caller submits; completions hand buffers back) against
 * the baseline on one thread too, one connection per side whatever
 * --connections says (a handle of one connection to SD_URI opened for
 * the table when SD has more; the baseline's first libnbd handle with
 * the whole queue depth): one thread against one thread, over one
 * socket each.  Paired rounds like the main table, for each of
 * CALLER_ROWS whose size is one of the NSIZES SIZES measured (the span
 * was written with each).  Sets *MISSED when a row is below its target.
 * 0, or -1 if a run failed (printed). */
static int
caller_table (struct side *sd, const char *sd_uri, struct side *nb,
              const struct options *o, uint8_t *wbufs, uint8_t *rbufs,
              const size_t *sizes, size_t nsizes, bool *missed)
{
  struct caller_setup cs = { 0 };      /* caller_end: nothing to undo yet */
  struct side *c;               /* the side the caller's thread drives */
  double *rate[2], *scratch;
  /* Client CPU per row and side (printed after the rows, for
   * information, like the main table's). */
  struct cost cost[sizeof caller_rows / sizeof caller_rows[0]][2];
  bool none = strstr (stabledif_get_profile (sd->h), " format=none ") != NULL;
  size_t k, j;
  int ret = -1;

  rate[0] = calloc (o->rounds, sizeof (double));
  rate[1] = calloc (o->rounds, sizeof (double));
  scratch = calloc (o->rounds, sizeof (double));
  if (rate[0] == NULL || rate[1] == NULL || scratch == NULL) {
    perror (PROG ": calloc");
    goto out;
  }
  memset (cost, 0, sizeof cost);
  if ((c = caller_begin (&cs, sd, sd_uri, nb, o)) == NULL)
    goto out;
  printf ("\nlibstabledif submitting from one thread of the caller, each "
          "completion handing\nits buffer back, the thread waiting %s; one "
          "connection per side,\nthe baseline one libnbd thread; paired "
          "rounds:\n"
          "%-18s %14s %14s %8s %8s\n",
          o->caller_cond ? "on a condition variable"
          : "in stabledif_poll", "", "libstabledif", "baseline",
          "ratio", "target");
  for (j = 0; j < sizeof caller_rows / sizeof caller_rows[0]; j++) {
    bool w = caller_rows[j].write;
    size_t size = caller_rows[j].size;
    struct figure fig;
    double target;
    char label[32];
    unsigned r;

    for (k = 0; k < nsizes && sizes[k] != size; k++)
      ;
    if (k == nsizes || (o->only != -1 && o->only != !w))
      continue;
    for (r = 0; r < o->rounds; r++) {
      uint8_t *b = w ? wbufs : rbufs;
      double a = run_counted (c, o, w, b, size, o->round_secs, 0,
                              &cost[j][0]), z = -1;

      if (a >= 0)
        z = run_counted (nb, o, w, b, size, o->round_secs, 0, &cost[j][1]);
      if (a < 0 || z < 0)
        goto out;
      rate[0][r] = a;
      rate[1][r] = z;
    }
    figure_of (rate[0], rate[1], o->rounds, scratch, &fig);
    target = none ? TARGET_CALLER_NONE
      : w && size < LARGE_WRITE ? TARGET_CALLER_SMALL_WRITE
      : w ? TARGET_LARGE_WRITE : TARGET_CALLER;
    /* Three words, so that dif-view.sh's summary takes it as a row. */
    snprintf (label, sizeof label, "%s %zuK caller", w ? "write" : "read",
              size / 1024);
    printf ("%-18s %9.1f MB/s %9.1f MB/s %7.2fx %7.2fx%s\n", label,
            fig.sd / 1e6, fig.base / 1e6, fig.ratio, target,
            fig.ratio >= target ? "" : o->check ? "  MISSED" : "  (below)");
    if (fig.ratio < target)
      *missed = true;
    printf ("%-18s", "  rounds:");
    for (r = 0; r < o->rounds; r++)
      printf (" %.0f/%.0f=%.2f", rate[0][r] / 1e6, rate[1][r] / 1e6,
              rate[1][r] > 0 ? rate[0][r] / rate[1][r] : 0);
    printf ("\n");
  }
  printf ("\nclient CPU per MB of the caller-thread rows, for information:\n"
          "%-18s %14s %14s %8s\n", "", "libstabledif", "baseline",
          "sd/base");
  for (j = 0; j < sizeof caller_rows / sizeof caller_rows[0]; j++) {
    double a, b;
    char label[32];

    if (cost[j][0].bytes <= 0 || cost[j][1].bytes <= 0)
      continue;
    a = cost[j][0].cpu / cost[j][0].bytes * 1e9;
    b = cost[j][1].cpu / cost[j][1].bytes * 1e9;
    snprintf (label, sizeof label, "%s %zuK caller",
              caller_rows[j].write ? "write" : "read",
              caller_rows[j].size / 1024);
    printf ("%-18s %8.3f ms/MB %8.3f ms/MB %7.2fx\n", label, a, b,
            b > 0 ? a / b : 0);
  }
  ret = 0;
 out:
  caller_end (&cs);
  free (rate[0]);
  free (rate[1]);
  free (scratch);
  return ret;
}

int
main (int argc, char **argv)
{
  size_t sizes[2] = { 4096, 128 * 1024 }, nsizes = 2, maxsize;
  /* Client CPU seconds and bytes moved in the timed rounds, per request
   * size, per direction (write, read), per side (libstabledif, baseline). */
  struct cost cost[2][2][2] = { { { { 0 } } } };  /* [size][w/r][sd/nb] */
  struct options o;
  struct side sd = { 0 }, nb = { 0 };
  uint8_t *wbufs = NULL, *rbufs = NULL;
  /* Each round's rate (bytes per second) of the current request size,
   * [write/read][sd/nb][round], and room to sort one row. */
  double *rates[2][2] = { { NULL, NULL }, { NULL, NULL } }, *sorted = NULL;
  bool missed = false;
  size_t i, k;
  int64_t sd_size, nb_size;
  char per_conn[32];
  int status = 1;

  if (parse_options (argc, argv, &o) == -1)
    return 2;
  if (connect_sd (&sd, argv[optind], &o) == -1 ||
      connect_nbd (&nb, argv[optind + 1], &o) == -1)
    goto out;
  sd_size = stabledif_get_size (sd.h);
  nb_size = nbd_get_size (nb.conns[0].h);
  if (sd_size < (int64_t) o.span || nb_size < (int64_t) o.span) {
    fprintf (stderr, PROG ": both devices need at least --span %" PRIu64
             " bytes (they have %" PRIi64 " and %" PRIi64 ")\n", o.span,
             sd_size, nb_size);
    goto out;
  }

  if (o.size) {
    sizes[0] = o.size;
    nsizes = 1;
  }
  maxsize = sizes[nsizes - 1];
  wbufs = malloc (o.depth * maxsize);
  rbufs = malloc (o.depth * maxsize);
  for (i = 0; i < 4; i++)
    rates[i / 2][i % 2] = calloc (o.rounds, sizeof (double));
  sorted = calloc (o.rounds, sizeof (double));
  if (wbufs == NULL || rbufs == NULL || rates[0][0] == NULL ||
      rates[0][1] == NULL || rates[1][0] == NULL || rates[1][1] == NULL ||
      sorted == NULL) {
    perror (PROG ": malloc");
    goto out;
  }
  /* Data that is not all ones or zeros: every guard is computed. */
  {
    uint64_t x = 0x9E3779B97F4A7C15u;
    for (i = 0; i < o.depth * maxsize; i++) {
      x ^= x << 13; x ^= x >> 7; x ^= x << 17;
      wbufs[i] = (uint8_t) x;
    }
  }

  printf (PROG ": %s (policy %s, profile: %s)\n  against %s\n",
          argv[optind], o.policy, stabledif_get_profile (sd.h),
          argv[optind + 1]);
  printf ("libstabledif submits from %s; libnbd from one thread per "
          "connection, polling\n",
          o.from_caller ? "the main thread (buffers handed back by "
                          "completions)"
          : o.from_thread ? "the main thread (a window)"
                        : "completion callbacks");
  if (sd.nconns == o.connections)
    printf ("connections: %u per side (libstabledif: %u in use; libnbd: %u "
            "handle%s)\n", o.connections, sd.nconns, nb.nconns,
            nb.nconns == 1 ? "" : "s");
  else
    printf ("connections: %u asked for, but libstabledif has %u in use (it "
            "opens more than one only if the server advertises multi-conn);"
            "\n  libnbd: %u handles: the sides are NOT alike\n",
            o.connections, sd.nconns, nb.nconns);
  if (o.depth % o.connections == 0)
    snprintf (per_conn, sizeof per_conn, "%u", o.depth / o.connections);
  else
    snprintf (per_conn, sizeof per_conn, "%u-%u", o.depth / o.connections,
              o.depth / o.connections + 1);
  printf ("queue depth %u per side (%s per connection), span %" PRIu64
          " MiB, %u rounds of %.0f ms;\n"
          "each round times both sides back to back (every run follows one of "
          "the other\nside), a row gives the medians of the rounds\n\n",
          o.depth, per_conn, o.span >> 20, o.rounds, o.round_secs * 1000);
  if (o.interleaved) {
    if (il_table (&sd, &nb, &o, sizes, nsizes, false, &missed) == -1)
      goto out;
    if (o.side == -1 && !o.no_caller_table &&
        il_caller_table (&sd, argv[optind], &nb, &o, sizes, nsizes,
                         &missed) == -1)
      goto out;
    status = o.check && missed ? 1 : 0;
    goto out;
  }
  printf ("%-16s %14s %14s %8s %8s\n", "", "libstabledif", "baseline",
          "ratio", "target");

  for (k = 0; k < nsizes; k++) {
    struct figure fig[2];       /* [write/read] */
    unsigned r;
    int w;

    /* Fill the span once on both sides, so that reads verify real PI
     * rather than skipping never-written (all-ones) blocks. */
    if ((o.side != 1 && run (&sd, &o, true, wbufs, sizes[k], 0) < 0) ||
        (o.side != 0 && run (&nb, &o, true, wbufs, sizes[k], 0) < 0))
      goto out;
    for (r = 0; r < o.rounds; r++)
      for (w = 0; w < 2; w++) {
        uint8_t *b = w == 0 ? wbufs : rbufs;
        double a = 0, c = 0;
        int turn;
        if (o.only != -1 && o.only != w)
          continue;
        /* libstabledif, then the baseline, in every round: each timed
         * run follows one of the other side, so both start from the same
         * state.  (Swapping which goes first every round makes each side
         * follow itself in every other round: on two shared CPUs a side
         * that follows itself was up to 0.25 faster, and the rounds'
         * ratios then swing with the order.) */
        for (turn = 0; turn < 2 && a >= 0 && c >= 0; turn++) {
          if (turn == 0) {
            if (o.side != 1)
              a = run_counted (&sd, &o, w == 0, b, sizes[k], o.round_secs,
                               o.server_pid[0], &cost[k][w][0]);
          }
          else if (o.side != 0)
            c = run_counted (&nb, &o, w == 0, b, sizes[k], o.round_secs,
                             o.server_pid[1], &cost[k][w][1]);
        }
        if (a < 0 || c < 0)
          goto out;
        rates[w][0][r] = a;
        rates[w][1][r] = c;
      }
    for (w = 0; w < 2; w++) {
      char label[32];
      double target;            /* this row's target */

      if (o.only != -1 && o.only != w)
        continue;
      snprintf (label, sizeof label, "%s %zu KiB", w == 0 ? "write" : "read",
                sizes[k] / 1024);
      if (o.side != -1) {
        printf ("%s: %.1f MB/s\n", label,
                median_of (rates[w][o.side == 1], o.rounds, sorted) / 1e6);
        continue;
      }
      figure_of (rates[w][0], rates[w][1], o.rounds, sorted, &fig[w]);
      target = target_of (w == 0, sizes[k]);
      /* MISSED only when checked; otherwise the table is for
       * information. */
      printf ("%-16s %9.1f MB/s %9.1f MB/s %7.2fx %7.2fx%s\n", label,
              fig[w].sd / 1e6, fig[w].base / 1e6, fig[w].ratio, target,
              fig[w].ratio >= target ? "" : o.check ? "  MISSED"
              : "  (below)");
      if (fig[w].ratio < target)
        missed = true;
      /* Every round, after the row, for whoever wants to see the
       * spread. */
      printf ("%-16s", "  rounds:");
      for (r = 0; r < o.rounds; r++)
        printf (" %.0f/%.0f=%.2f", rates[w][0][r] / 1e6,
                rates[w][1][r] / 1e6,
                rates[w][1][r] > 0 ? rates[w][0][r] / rates[w][1][r] : 0);
      printf ("\n");
    }
  }
  if (o.side == -1 && !o.no_caller_table &&
      caller_table (&sd, argv[optind], &nb, &o, wbufs, rbufs, sizes, nsizes,
                    &missed) == -1)
    goto out;
  /* For information: what each side's client costs per byte, over all
   * its timed rounds.  Steadier than the throughputs on a shared machine
   * (it does not depend on how long the other processes kept the CPUs),
   * and it shows how much of a throughput ratio the client explains. */
  if (o.side == -1) {
    print_costs (&o, "client CPU (user + system)", cost, sizes, nsizes,
                 false);
    /* And, given their processes, the servers': the device's share of
     * the libstabledif side's cost against the memory plugin's. */
    if (o.server_pid[0] > 0)
      print_costs (&o, "server CPU (user + system, all threads)", cost,
                   sizes, nsizes, true);
  }
  status = o.check && missed ? 1 : 0;

 out:
  free (wbufs);
  free (rbufs);
  for (i = 0; i < 4; i++)
    free (rates[i / 2][i % 2]);
  free (sorted);
  free (sd.slots);
  free (sd.ready);
  if (sd.h)
    stabledif_close (sd.h);
  for (i = 0; i < nb.nconns; i++)
    if (nb.conns[i].h) {
      nbd_shutdown (nb.conns[i].h, 0);
      nbd_close (nb.conns[i].h);
    }
  free (nb.conns);
  return status;
}
