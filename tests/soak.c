/* SPDX-License-Identifier: BSD-3-Clause */
/* stabledif: the soak driver (tests/test-soak.sh, "make soak").
 *
 * Many connections at once, for a bounded time:
 *
 *   - data workers: one libnbd connection each to the data view (export
 *     "" or "data", alternately), a seeded random mix of reads, writes
 *     (some FUA), zeroes, trims and flushes of any size and alignment,
 *     and batches of requests in flight at once;
 *   - dif workers: one libstabledif handle each on the dif view (policies
 *     wait, wait-sent and snapshot in turn) for reads, writes and
 *     flushes, sync and in asynchronous batches, plus a raw libnbd
 *     connection to the dif view for zeroes, trims and more flushes (the
 *     library has no zero or trim);
 *   - control clients: plain Unix socket clients of the control socket
 *     polling counters, events and profile (and sending a bad request
 *     now and then, which must get an error and leave the connection
 *     usable).
 *
 * Every worker owns a stripe of the disk (whole blocks, disjoint) and
 * keeps a shadow copy of it, so every read is checked byte for byte
 * against what the worker wrote; dif workers also check which blocks
 * carry the all-ones (escape) tuple of zeroed/trimmed blocks.  Workers
 * reconnect now and then.  Control clients check that the device's
 * counters never go backwards and that no PI failure (counter or event)
 * ever appears.  Each client counts its own requests and bytes by op
 * and view exactly as the device counts them (bytes in the view's
 * units: data bytes on the data view, extended blocks on the dif view);
 * --totals writes the sums as JSON for the test to compare with the
 * device's counters.
 *
 * --scan instead reads the whole disk through the dif view with
 * libstabledif (which verifies every block's PI) and counts the blocks
 * that fail, and the escaped blocks whose data is not all zeros (the
 * soak never writes escape tuples itself, so the only escaped blocks are
 * zeroed or trimmed ones, which read as zeros).
 *
 * Bounded: the load stops after --seconds; a thread that does not finish
 * its request within --grace seconds after that is reported (with what
 * it was doing) and the driver exits 2 -- a hang fails, it does not hang.
 * Exit status: 0 clean, 1 a check failed, 2 usage/connect error or hang.
 */
#include <config.h>

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <libnbd.h>

#include "stabledif.h"
#include "test-rng.h"

#define PROG "soak"

/* Largest request the soak sends, data bytes (libstabledif splits
 * nothing below its 32 MiB chunk, so one call is one NBD command). */
#define SOAK_MAX_REQUEST (1024 * 1024)

/* Exit statuses. */
#define SOAK_EXIT_OK 0          /* every check passed */
#define SOAK_EXIT_FAIL 1        /* a check failed */
#define SOAK_EXIT_ERROR 2       /* usage, connect error or a hang */

/* The views and ops the device counts (stats.h), with its JSON names. */
enum soak_view { SOAK_DATA, SOAK_DIF, SOAK_NVIEWS };
enum soak_op { SOAK_READ, SOAK_WRITE, SOAK_TRIM, SOAK_ZERO, SOAK_FLUSH,
               SOAK_NOPS };
static const char *const soak_view_names[SOAK_NVIEWS] = { "data", "dif" };
static const char *const soak_op_names[SOAK_NOPS] = {
  "read", "write", "trim", "zero", "flush"
};

/* Requests and bytes a client sent, as the device counts them. */
struct soak_totals {
  uint64_t requests[SOAK_NVIEWS][SOAK_NOPS]; /* NBD commands */
  uint64_t bytes[SOAK_NVIEWS][SOAK_NOPS];    /* their lengths, view units */
  uint64_t connections[SOAK_NVIEWS];         /* connections opened */
};

/* What control clients send. */
enum soak_verb { SOAK_V_COUNTERS, SOAK_V_EVENTS, SOAK_V_PROFILE, SOAK_V_BAD,
                 SOAK_NVERBS };
static const char *const soak_verb_names[SOAK_NVERBS] = {
  "counters", "events", "profile", "bad"
};

/* The command line. */
struct soak_options {
  const char *socket;           /* --socket: the NBD Unix socket */
  const char *ctl;              /* --ctl: the control socket, or NULL */
  const char *totals;           /* --totals: write JSON totals here */
  double seconds;               /* --seconds: length of the load */
  double grace;                 /* --grace: time to finish after that */
  uint64_t seed;                /* --seed */
  unsigned data_workers;        /* --data-workers */
  unsigned dif_workers;         /* --dif-workers */
  unsigned ctl_clients;         /* --ctl-clients */
  uint64_t max_stripe;          /* --max-stripe: bytes per worker, at most */
  unsigned ctl_pause_us;        /* --ctl-pause-us: between ctl requests */
  bool scan;                    /* --scan: scan instead of the load */
  bool quiet;                   /* --quiet: no summary table */
};

/* The device, as the dif view describes it. */
struct soak_geometry {
  uint64_t interval;            /* protection interval, bytes */
  uint64_t tuple;               /* tuple size, bytes */
  uint64_t ext;                 /* interval + tuple */
  uint64_t nblocks;             /* blocks of the disk */
  bool stable_writes;           /* the device checks host PI */
};

/* One worker thread and the stripe it owns. */
struct soak_worker {
  pthread_t thread;             /* the thread */
  unsigned index;               /* 0.. across both kinds, for messages */
  enum soak_view view;          /* which view it loads */
  const char *export;           /* data workers: "" or "data" */
  enum stabledif_policy policy; /* dif workers: the handle's policy */
  uint64_t rng;                 /* its random state (xorshift64*) */
  uint64_t lba;                 /* first block of the stripe */
  uint64_t nblocks;             /* blocks of the stripe */
  uint8_t *shadow;              /* what the stripe holds (data bytes) */
  uint8_t *escaped;             /* dif workers: per block, 1 if it must
                                   carry the all-ones tuple */
  struct nbd_handle *nbd;       /* data view, or dif view for zero/trim */
  struct stabledif_handle *sd;  /* dif workers: the library handle */
  struct soak_totals t;         /* what it sent */
  uint64_t reads_checked;       /* reads compared with the shadow */
  _Atomic (const char *) doing; /* the request under way, for hang
                                   reports (a string literal) */
  _Atomic uint64_t doing_off;   /* its offset in its view */
  _Atomic uint64_t doing_len;   /* its length */
  _Atomic bool done;            /* the thread has finished */
};

/* One control-socket client thread. */
struct soak_ctl_client {
  pthread_t thread;             /* the thread */
  unsigned index;               /* 0.., for messages */
  uint64_t rng;                 /* its random state */
  int fd;                       /* the connection, or -1 */
  char *buf;                    /* bytes received, not yet consumed */
  size_t len, cap;              /* used and allocated bytes of BUF */
  uint64_t since;               /* events: the next SINCE to ask for */
  bool have_last;               /* LAST_* hold a previous reading */
  uint64_t last_requests[SOAK_NVIEWS][SOAK_NOPS]; /* previous counters */
  uint64_t last_bytes[SOAK_NVIEWS][SOAK_NOPS];    /* previous counters */
  uint64_t requests[SOAK_NVERBS]; /* requests sent, by verb */
  uint64_t connections;         /* connections opened */
  _Atomic (const char *) doing; /* the request under way */
  _Atomic bool done;            /* the thread has finished */
};

/* Shared by every thread. */
static struct soak_options opt = {
  .seconds = 10,
  .grace = 60,
  .seed = 1,
  .data_workers = 8,
  .dif_workers = 8,
  .ctl_clients = 4,
  .max_stripe = 8 * 1024 * 1024,
  .ctl_pause_us = 2000,
};
static struct soak_geometry geo;   /* from the probe in main */
static atomic_bool stop_flag;      /* the load should stop */
static atomic_bool failed_flag;    /* a check failed */
static pthread_mutex_t print_lock = PTHREAD_MUTEX_INITIALIZER;
                                   /* one message at a time on stderr */
static const uint8_t soak_zeros[4096]; /* an interval of zeros (the
                                          largest interval) */

/* ---- small helpers ---------------------------------------------------- */

/* Report a failed check of WHO (a thread name), in one piece, and stop
 * the load. */
static void soak_fail (const char *who, const char *fmt, ...)
  __attribute__ ((format (printf, 2, 3)));

static void
soak_fail (const char *who, const char *fmt, ...)
{
  va_list ap;

  pthread_mutex_lock (&print_lock);
  fprintf (stderr, "%s: FAIL: %s: ", PROG, who);
  va_start (ap, fmt);
  vfprintf (stderr, fmt, ap);
  va_end (ap);
  fputc ('\n', stderr);
  pthread_mutex_unlock (&print_lock);
  atomic_store (&failed_flag, true);
  atomic_store (&stop_flag, true);
}

/* Whether the load should stop. */
static bool
soak_stopping (void)
{
  return atomic_load (&stop_flag);
}

/* A random number in [LO, HI] (LO <= HI). */
static uint64_t
soak_range (uint64_t *s, uint64_t lo, uint64_t hi)
{
  return lo + rng_next_r (s) % (hi - lo + 1);
}

/* A starting state for stream N of SEED (never 0). */
static uint64_t
soak_seed_state (uint64_t seed, uint64_t n)
{
  uint64_t x = (seed + 1) * UINT64_C (0x9e3779b97f4a7c15) ^ (n + 1) *
    UINT64_C (0xbf58476d1ce4e5b9);

  x ^= x >> 31;
  return x ? x : 1;
}

/* Fill LEN bytes at BUF with random bytes of state *S. */
static void
soak_fill (uint64_t *s, uint8_t *buf, size_t len)
{
  size_t i = 0;

  for (; i + 8 <= len; i += 8) {
    uint64_t v = rng_next_r (s);
    memcpy (buf + i, &v, 8);
  }
  if (i < len) {
    uint64_t v = rng_next_r (s);
    memcpy (buf + i, &v, len - i);
  }
}

/* malloc, or exit with a message (the driver cannot go on without). */
static void *
soak_malloc (size_t n)
{
  void *p = malloc (n ? n : 1);

  if (p == NULL) {
    fprintf (stderr, "%s: out of memory (%zu bytes)\n", PROG, n);
    exit (SOAK_EXIT_ERROR);
  }
  return p;
}

/* Seconds on the monotonic clock. */
static double
soak_now (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Sleep for USEC microseconds. */
static void
soak_sleep_us (unsigned usec)
{
  struct timespec ts = { .tv_sec = usec / 1000000,
                         .tv_nsec = (long) (usec % 1000000) * 1000 };

  while (nanosleep (&ts, &ts) == -1 && errno == EINTR)
    ;
}

/* Count one request of OP on VIEW of BYTES bytes into T. */
static void
soak_count (struct soak_totals *t, enum soak_view view, enum soak_op op,
            uint64_t bytes)
{
  t->requests[view][op]++;
  t->bytes[view][op] += bytes;
}

/* Add A into SUM. */
static void
soak_totals_add (struct soak_totals *sum, const struct soak_totals *a)
{
  size_t v, o;

  for (v = 0; v < SOAK_NVIEWS; v++) {
    for (o = 0; o < SOAK_NOPS; o++) {
      sum->requests[v][o] += a->requests[v][o];
      sum->bytes[v][o] += a->bytes[v][o];
    }
    sum->connections[v] += a->connections[v];
  }
}

/* Record what worker W is doing (for hang reports). */
static void
soak_doing (struct soak_worker *w, const char *what, uint64_t off,
            uint64_t len)
{
  atomic_store (&w->doing_off, off);
  atomic_store (&w->doing_len, len);
  atomic_store (&w->doing, what);
}

/* "data worker 3" / "dif worker 9" into BUF. */
static const char *
soak_worker_name (const struct soak_worker *w, char *buf, size_t len)
{
  snprintf (buf, len, "%s worker %u", soak_view_names[w->view], w->index);
  return buf;
}

/* The first differing byte of A and B (LEN bytes), or -1 if none. */
static long long
soak_first_diff (const uint8_t *a, const uint8_t *b, size_t len)
{
  size_t i;

  if (memcmp (a, b, len) == 0)
    return -1;
  for (i = 0; i < len; i++)
    if (a[i] != b[i])
      return (long long) i;
  return -1;
}

/* ---- data workers (libnbd, data view) --------------------------------- */

/* Open W's libnbd connection to EXPORT (counted).  Returns -1 on
 * failure (reported). */
static int
soak_data_connect (struct soak_worker *w, const char *export)
{
  char who[64];

  soak_worker_name (w, who, sizeof who);
  w->nbd = nbd_create ();
  if (w->nbd == NULL ||
      nbd_set_export_name (w->nbd, export) == -1 ||
      nbd_connect_unix (w->nbd, opt.socket) == -1) {
    soak_fail (who, "connecting to export \"%s\" of %s: %s", export,
               opt.socket, nbd_get_error ());
    if (w->nbd)
      nbd_close (w->nbd);
    w->nbd = NULL;
    return -1;
  }
  w->t.connections[w->view]++;
  return 0;
}

/* Close W's libnbd connection politely. */
static void
soak_data_disconnect (struct soak_worker *w)
{
  if (w->nbd) {
    nbd_shutdown (w->nbd, 0);
    nbd_close (w->nbd);
    w->nbd = NULL;
  }
}

/* A random request length for a data worker: mostly small, sometimes
 * up to SOAK_MAX_REQUEST, never more than MAX. */
static uint64_t
soak_data_pick_len (struct soak_worker *w, uint64_t max)
{
  uint64_t r = rng_next_r (&w->rng) % 100, len;

  if (r < 60)
    len = soak_range (&w->rng, 1, 4 * geo.interval);
  else if (r < 90)
    len = soak_range (&w->rng, 1, 64 * 1024);
  else
    len = soak_range (&w->rng, 1, SOAK_MAX_REQUEST);
  return len < max ? len : max;
}

/* A random byte range [*OFF, *OFF + *LEN) of W's stripe (offsets
 * relative to the stripe): a third aligned to the interval, a third to
 * 512 bytes, a third to nothing. */
static void
soak_data_pick_range (struct soak_worker *w, uint64_t *off, uint64_t *len)
{
  const uint64_t size = w->nblocks * geo.interval;
  static const uint64_t units[3] = { 0, 512, 1 };
  uint64_t unit = units[rng_next_r (&w->rng) % 3];
  uint64_t l;

  if (unit == 0)
    unit = geo.interval;
  l = soak_data_pick_len (w, size);
  l = (l + unit - 1) / unit * unit;
  if (l > size)
    l = size / unit * unit;
  *len = l;
  *off = soak_range (&w->rng, 0, (size - l) / unit) * unit;
}

/* Read [OFF, OFF+LEN) of W's stripe and compare it with the shadow. */
static int
soak_data_read_check (struct soak_worker *w, uint8_t *buf, uint64_t off,
                      uint64_t len)
{
  const uint64_t base = w->lba * geo.interval;
  char who[64];
  long long diff;

  soak_worker_name (w, who, sizeof who);
  soak_doing (w, "nbd_pread", base + off, len);
  soak_count (&w->t, SOAK_DATA, SOAK_READ, len);
  if (nbd_pread (w->nbd, buf, len, base + off, 0) == -1) {
    soak_fail (who, "read offset %" PRIu64 " length %" PRIu64 ": %s",
               base + off, len, nbd_get_error ());
    return -1;
  }
  w->reads_checked++;
  diff = soak_first_diff (buf, w->shadow + off, len);
  if (diff >= 0) {
    soak_fail (who, "read offset %" PRIu64 " length %" PRIu64 ": byte at "
               "offset %" PRIu64 " is 0x%02x, this worker wrote 0x%02x",
               base + off, len, base + off + (uint64_t) diff, buf[diff],
               w->shadow[off + diff]);
    return -1;
  }
  return 0;
}

/* Wait for every command in flight on W's connection, then collect the
 * K commands COOKIES.  Returns -1 (reported, naming WHAT) if one
 * failed. */
static int
soak_data_await (struct soak_worker *w, const int64_t *cookies, size_t k,
                 const char *what)
{
  char who[64];
  size_t i;

  soak_worker_name (w, who, sizeof who);
  while (nbd_aio_in_flight (w->nbd) > 0)
    if (nbd_poll (w->nbd, -1) == -1) {
      soak_fail (who, "%s: nbd_poll: %s", what, nbd_get_error ());
      return -1;
    }
  for (i = 0; i < k; i++)
    if (nbd_aio_command_completed (w->nbd, cookies[i]) != 1) {
      soak_fail (who, "%s: command %zu of %zu: %s", what, i + 1, k,
                 nbd_get_error ());
      return -1;
    }
  return 0;
}

/* A batch of K asynchronous writes to disjoint ranges of W's stripe in
 * flight at once on its one connection, then asynchronous reads of the
 * same ranges, compared with the shadow. */
static int
soak_data_batch (struct soak_worker *w)
{
  enum { BATCH_MAX = 6 };
  const uint64_t base = w->lba * geo.interval;
  const uint64_t k = soak_range (&w->rng, 2, BATCH_MAX);
  const uint64_t seg = w->nblocks * geo.interval / k;
  uint64_t off[BATCH_MAX] = { 0 }, len[BATCH_MAX] = { 0 }, i;
  uint8_t *wbuf[BATCH_MAX] = { NULL }, *rbuf[BATCH_MAX] = { NULL };
  int64_t cookies[BATCH_MAX];
  char who[64];
  int r = -1;

  soak_worker_name (w, who, sizeof who);
  for (i = 0; i < k; i++) {
    len[i] = soak_range (&w->rng, 1, seg < 65536 ? seg : 65536);
    off[i] = i * seg + soak_range (&w->rng, 0, seg - len[i]);
    wbuf[i] = soak_malloc (len[i]);
    rbuf[i] = soak_malloc (len[i]);
    soak_fill (&w->rng, wbuf[i], len[i]);
  }

  soak_doing (w, "nbd_aio_pwrite batch", base + off[0], k);
  for (i = 0; i < k; i++) {
    soak_count (&w->t, SOAK_DATA, SOAK_WRITE, len[i]);
    cookies[i] = nbd_aio_pwrite (w->nbd, wbuf[i], len[i], base + off[i],
                                 NBD_NULL_COMPLETION, 0);
    if (cookies[i] == -1) {
      soak_fail (who, "nbd_aio_pwrite offset %" PRIu64 " length %" PRIu64
                 ": %s", base + off[i], len[i], nbd_get_error ());
      goto out;
    }
  }
  if (soak_data_await (w, cookies, k, "a batch of writes") == -1)
    goto out;
  for (i = 0; i < k; i++)
    memcpy (w->shadow + off[i], wbuf[i], len[i]);

  soak_doing (w, "nbd_aio_pread batch", base + off[0], k);
  for (i = 0; i < k; i++) {
    soak_count (&w->t, SOAK_DATA, SOAK_READ, len[i]);
    cookies[i] = nbd_aio_pread (w->nbd, rbuf[i], len[i], base + off[i],
                                NBD_NULL_COMPLETION, 0);
    if (cookies[i] == -1) {
      soak_fail (who, "nbd_aio_pread offset %" PRIu64 " length %" PRIu64
                 ": %s", base + off[i], len[i], nbd_get_error ());
      goto out;
    }
  }
  if (soak_data_await (w, cookies, k, "a batch of reads") == -1)
    goto out;
  for (i = 0; i < k; i++) {
    long long diff = soak_first_diff (rbuf[i], w->shadow + off[i], len[i]);

    w->reads_checked++;
    if (diff >= 0) {
      soak_fail (who, "batch read offset %" PRIu64 " length %" PRIu64
                 ": byte at offset %" PRIu64 " is 0x%02x, this worker "
                 "wrote 0x%02x", base + off[i], len[i],
                 base + off[i] + (uint64_t) diff, rbuf[i][diff],
                 w->shadow[off[i] + diff]);
      goto out;
    }
  }
  r = 0;

 out:
  /* Nothing may still point into the buffers when they are freed. */
  if (r == -1)
    while (nbd_aio_in_flight (w->nbd) > 0 && nbd_poll (w->nbd, -1) != -1)
      ;
  for (i = 0; i < k; i++) {
    free (wbuf[i]);
    free (rbuf[i]);
  }
  return r;
}

/* One random request of data worker W.  Returns -1 on failure. */
static int
soak_data_step (struct soak_worker *w, uint8_t *buf)
{
  const uint64_t base = w->lba * geo.interval;
  uint64_t r = rng_next_r (&w->rng) % 1000;
  uint64_t off, len;
  uint32_t flags = 0;
  char who[64];

  soak_worker_name (w, who, sizeof who);
  if (r < 5) {                  /* reconnect, on the other export name */
    soak_data_disconnect (w);
    w->export = w->export[0] ? "" : "data";
    return soak_data_connect (w, w->export);
  }
  if (r < 60) {                 /* flush */
    soak_doing (w, "nbd_flush", 0, 0);
    soak_count (&w->t, SOAK_DATA, SOAK_FLUSH, 0);
    if (nbd_flush (w->nbd, 0) == -1) {
      soak_fail (who, "flush: %s", nbd_get_error ());
      return -1;
    }
    return 0;
  }
  if (r < 110)                  /* several requests in flight at once */
    return soak_data_batch (w);

  soak_data_pick_range (w, &off, &len);
  if (r < 440) {                /* write, some FUA */
    if (r < 150)
      flags = LIBNBD_CMD_FLAG_FUA;
    soak_fill (&w->rng, buf, len);
    soak_doing (w, "nbd_pwrite", base + off, len);
    soak_count (&w->t, SOAK_DATA, SOAK_WRITE, len);
    if (nbd_pwrite (w->nbd, buf, len, base + off, flags) == -1) {
      soak_fail (who, "write offset %" PRIu64 " length %" PRIu64 ": %s",
                 base + off, len, nbd_get_error ());
      return -1;
    }
    memcpy (w->shadow + off, buf, len);
    return 0;
  }
  if (r < 850)                  /* read */
    return soak_data_read_check (w, buf, off, len);
  if (r < 925) {                /* zero: every byte of the range */
    if (r < 880)
      flags |= LIBNBD_CMD_FLAG_NO_HOLE;
    if (r % 5 == 0)
      flags |= LIBNBD_CMD_FLAG_FUA;
    soak_doing (w, "nbd_zero", base + off, len);
    soak_count (&w->t, SOAK_DATA, SOAK_ZERO, len);
    if (nbd_zero (w->nbd, len, base + off, flags) == -1) {
      soak_fail (who, "zero offset %" PRIu64 " length %" PRIu64 ": %s",
                 base + off, len, nbd_get_error ());
      return -1;
    }
    memset (w->shadow + off, 0, len);
    return 0;
  }
  /* trim: the device zeroes the whole blocks inside the range and leaves
   * partial blocks alone (trim is advisory). */
  {
    uint64_t first = (off + geo.interval - 1) / geo.interval;
    uint64_t end = (off + len) / geo.interval;

    if (r % 5 == 0)
      flags |= LIBNBD_CMD_FLAG_FUA;
    soak_doing (w, "nbd_trim", base + off, len);
    soak_count (&w->t, SOAK_DATA, SOAK_TRIM, len);
    if (nbd_trim (w->nbd, len, base + off, flags) == -1) {
      soak_fail (who, "trim offset %" PRIu64 " length %" PRIu64 ": %s",
                 base + off, len, nbd_get_error ());
      return -1;
    }
    if (first < end)
      memset (w->shadow + first * geo.interval, 0,
              (end - first) * geo.interval);
    return 0;
  }
}

/* Read the whole stripe of data worker W and compare it. */
static int
soak_data_final_check (struct soak_worker *w, uint8_t *buf)
{
  const uint64_t size = w->nblocks * geo.interval;
  uint64_t off, len;

  for (off = 0; off < size; off += len) {
    len = size - off < SOAK_MAX_REQUEST ? size - off : SOAK_MAX_REQUEST;
    if (soak_data_read_check (w, buf, off, len) == -1)
      return -1;
  }
  return 0;
}

/* Data worker thread: zero the stripe (a known start), then random
 * requests until told to stop, then read the whole stripe back. */
static void *
soak_data_worker (void *arg)
{
  struct soak_worker *w = arg;
  const uint64_t size = w->nblocks * geo.interval;
  uint8_t *buf = soak_malloc (SOAK_MAX_REQUEST);
  char who[64];

  soak_worker_name (w, who, sizeof who);
  if (soak_data_connect (w, w->export) == -1)
    goto out;
  soak_doing (w, "nbd_zero (whole stripe)", w->lba * geo.interval, size);
  soak_count (&w->t, SOAK_DATA, SOAK_ZERO, size);
  if (nbd_zero (w->nbd, size, w->lba * geo.interval, 0) == -1) {
    soak_fail (who, "zeroing the stripe: %s", nbd_get_error ());
    goto out;
  }
  memset (w->shadow, 0, size);

  while (!soak_stopping ())
    if (soak_data_step (w, buf) == -1)
      goto out;
  if (!atomic_load (&failed_flag))
    soak_data_final_check (w, buf);

 out:
  soak_doing (w, "closing", 0, 0);
  soak_data_disconnect (w);
  free (buf);
  atomic_store (&w->done, true);
  return NULL;
}

/* ---- dif workers (libstabledif + libnbd, dif view) ------------------- */

/* Open W's library handle and its raw libnbd connection, both on the
 * dif view (counted).  Returns -1 on failure (reported). */
static int
soak_dif_connect (struct soak_worker *w)
{
  char uri[PATH_MAX + 64], who[64];

  soak_worker_name (w, who, sizeof who);
  snprintf (uri, sizeof uri, "nbd+unix:///dif?socket=%s", opt.socket);
  w->sd = stabledif_create ();
  if (w->sd == NULL ||
      stabledif_set_policy (w->sd, w->policy) == -1 ||
      stabledif_connect_uri (w->sd, uri) == -1) {
    soak_fail (who, "libstabledif connect %s: %s", uri,
               stabledif_get_error ());
    stabledif_close (w->sd);
    w->sd = NULL;
    return -1;
  }
  w->t.connections[SOAK_DIF]++;
  if (soak_data_connect (w, "dif") == -1) {
    stabledif_close (w->sd);
    w->sd = NULL;
    return -1;
  }
  return 0;
}

/* Close both of W's connections. */
static void
soak_dif_disconnect (struct soak_worker *w)
{
  stabledif_close (w->sd);
  w->sd = NULL;
  soak_data_disconnect (w);
}

/* A random block range [*LBA, *LBA + *N) of W's stripe (relative to the
 * stripe), within [LO, LO + SPAN). */
static void
soak_dif_pick_range (struct soak_worker *w, uint64_t lo, uint64_t span,
                     uint64_t *lba, uint64_t *n)
{
  const uint64_t maxn = SOAK_MAX_REQUEST / geo.interval;
  uint64_t r = rng_next_r (&w->rng) % 100, k;

  if (r < 60)
    k = soak_range (&w->rng, 1, 8);
  else if (r < 90)
    k = soak_range (&w->rng, 1, 128);
  else
    k = soak_range (&w->rng, 1, maxn);
  if (k > span)
    k = span;
  *n = k;
  *lba = lo + soak_range (&w->rng, 0, span - k);
}

/* Whether TUPLE (geo.tuple bytes) is all ones. */
static bool
soak_dif_all_ones (const uint8_t *tuple)
{
  uint64_t i;

  for (i = 0; i < geo.tuple; i++)
    if (tuple[i] != 0xff)
      return false;
  return true;
}

/* Compare blocks [LBA, LBA+N) of W's stripe, read into DATA and PI,
 * with the shadow: the data, and the all-ones tuple exactly on the
 * blocks zeroed or trimmed since they were last written. */
static int
soak_dif_compare (struct soak_worker *w, const uint8_t *data,
                  const uint8_t *pi, uint64_t lba, uint64_t n,
                  const char *how)
{
  const uint64_t iv = geo.interval;
  char who[64];
  long long diff;
  uint64_t i;

  soak_worker_name (w, who, sizeof who);
  w->reads_checked++;
  diff = soak_first_diff (data, w->shadow + lba * iv, n * iv);
  if (diff >= 0) {
    soak_fail (who, "%s of LBA %" PRIu64 "+%" PRIu64 ": LBA %" PRIu64
               " byte %" PRIu64 " is 0x%02x, this worker wrote 0x%02x",
               how, w->lba + lba, n, w->lba + lba + (uint64_t) diff / iv,
               (uint64_t) diff % iv, data[diff], w->shadow[lba * iv + diff]);
    return -1;
  }
  for (i = 0; i < n && geo.tuple > 0; i++)
    if (soak_dif_all_ones (pi + i * geo.tuple) != (w->escaped[lba + i] != 0)) {
      soak_fail (who, "%s of LBA %" PRIu64 "+%" PRIu64 ": LBA %" PRIu64
                 " %s the all-ones tuple, but it was last %s", how,
                 w->lba + lba, n, w->lba + lba + i,
                 w->escaped[lba + i] ? "lacks" : "has",
                 w->escaped[lba + i] ? "zeroed or trimmed" : "written");
      return -1;
    }
  return 0;
}

/* Write BUF to blocks [LBA, LBA+N) of W's stripe with libstabledif
 * (which generates the PI), synchronously. */
static int
soak_dif_write (struct soak_worker *w, const uint8_t *buf, uint64_t lba,
                uint64_t n, uint32_t flags)
{
  const uint64_t iv = geo.interval;
  char who[64];

  soak_worker_name (w, who, sizeof who);
  soak_doing (w, "stabledif_pwrite", (w->lba + lba) * geo.ext, n * geo.ext);
  soak_count (&w->t, SOAK_DIF, SOAK_WRITE, n * geo.ext);
  if (stabledif_pwrite (w->sd, buf, n * iv, (w->lba + lba) * iv,
                        flags) == -1) {
    soak_fail (who, "stabledif_pwrite LBA %" PRIu64 "+%" PRIu64 ": %s",
               w->lba + lba, n, stabledif_get_error ());
    return -1;
  }
  memcpy (w->shadow + lba * iv, buf, n * iv);
  memset (w->escaped + lba, 0, n);
  return 0;
}

/* Read blocks [LBA, LBA+N) with libstabledif (which verifies the PI)
 * and compare them with the shadow. */
static int
soak_dif_read_check (struct soak_worker *w, uint8_t *buf, uint8_t *pi,
                     uint64_t lba, uint64_t n)
{
  const uint64_t iv = geo.interval;
  char who[64];

  soak_worker_name (w, who, sizeof who);
  soak_doing (w, "stabledif_pread", (w->lba + lba) * geo.ext, n * geo.ext);
  soak_count (&w->t, SOAK_DIF, SOAK_READ, n * geo.ext);
  if (stabledif_pread (w->sd, buf, n * iv, (w->lba + lba) * iv, pi,
                       0) == -1) {
    soak_fail (who, "stabledif_pread LBA %" PRIu64 "+%" PRIu64 ": %s",
               w->lba + lba, n, stabledif_get_error ());
    return -1;
  }
  return soak_dif_compare (w, buf, pi, lba, n, "read");
}

/* Zero or trim (OP) blocks [LBA, LBA+N) through the raw dif
 * connection: both leave zeros and the all-ones tuple. */
static int
soak_dif_zero_trim (struct soak_worker *w, enum soak_op op, uint64_t lba,
                    uint64_t n, uint32_t flags)
{
  const uint64_t off = (w->lba + lba) * geo.ext, len = n * geo.ext;
  char who[64];
  int r;

  soak_worker_name (w, who, sizeof who);
  soak_doing (w, op == SOAK_ZERO ? "nbd_zero (dif)" : "nbd_trim (dif)",
              off, len);
  soak_count (&w->t, SOAK_DIF, op, len);
  r = op == SOAK_ZERO ? nbd_zero (w->nbd, len, off, flags)
                      : nbd_trim (w->nbd, len, off, flags);
  if (r == -1) {
    soak_fail (who, "%s of LBA %" PRIu64 "+%" PRIu64 " on the dif view: %s",
               soak_op_names[op], w->lba + lba, n, nbd_get_error ());
    return -1;
  }
  memset (w->shadow + lba * geo.interval, 0, n * geo.interval);
  memset (w->escaped + lba, 1, n);
  return 0;
}

/* A batch of K asynchronous writes to disjoint ranges, then
 * asynchronous reads of the same ranges, each batch awaited with
 * stabledif_wait_all. */
static int
soak_dif_batch (struct soak_worker *w)
{
  enum { BATCH_MAX = 6 };
  const uint64_t iv = geo.interval;
  const uint64_t k = soak_range (&w->rng, 2, BATCH_MAX);
  const uint64_t seg = w->nblocks / k;
  uint64_t lba[BATCH_MAX] = { 0 }, n[BATCH_MAX] = { 0 }, i;
  uint8_t *wbuf[BATCH_MAX] = { NULL }, *rbuf[BATCH_MAX] = { NULL };
  uint8_t *pi[BATCH_MAX] = { NULL };
  char who[64];
  int r = -1;

  soak_worker_name (w, who, sizeof who);
  for (i = 0; i < k; i++) {
    soak_dif_pick_range (w, i * seg, seg, &lba[i], &n[i]);
    wbuf[i] = soak_malloc (n[i] * iv);
    rbuf[i] = soak_malloc (n[i] * iv);
    pi[i] = soak_malloc (n[i] * geo.tuple);
    soak_fill (&w->rng, wbuf[i], n[i] * iv);
  }

  soak_doing (w, "stabledif_aio_pwrite batch", (w->lba + lba[0]) * geo.ext,
              k);
  for (i = 0; i < k; i++) {
    soak_count (&w->t, SOAK_DIF, SOAK_WRITE, n[i] * geo.ext);
    if (stabledif_aio_pwrite (w->sd, wbuf[i], n[i] * iv,
                              (w->lba + lba[i]) * iv, 0, NULL, NULL) == -1) {
      soak_fail (who, "stabledif_aio_pwrite LBA %" PRIu64 "+%" PRIu64
                 ": %s", w->lba + lba[i], n[i], stabledif_get_error ());
      stabledif_wait_all (w->sd);
      goto out;
    }
  }
  if (stabledif_wait_all (w->sd) == -1) {
    soak_fail (who, "a batch of %" PRIu64 " writes: %s", k,
               stabledif_get_error ());
    goto out;
  }
  for (i = 0; i < k; i++) {
    memcpy (w->shadow + lba[i] * iv, wbuf[i], n[i] * iv);
    memset (w->escaped + lba[i], 0, n[i]);
  }

  soak_doing (w, "stabledif_aio_pread batch", (w->lba + lba[0]) * geo.ext,
              k);
  for (i = 0; i < k; i++) {
    soak_count (&w->t, SOAK_DIF, SOAK_READ, n[i] * geo.ext);
    if (stabledif_aio_pread (w->sd, rbuf[i], n[i] * iv,
                             (w->lba + lba[i]) * iv, pi[i], 0,
                             NULL, NULL) == -1) {
      soak_fail (who, "stabledif_aio_pread LBA %" PRIu64 "+%" PRIu64
                 ": %s", w->lba + lba[i], n[i], stabledif_get_error ());
      stabledif_wait_all (w->sd);
      goto out;
    }
  }
  if (stabledif_wait_all (w->sd) == -1) {
    soak_fail (who, "a batch of %" PRIu64 " reads: %s", k,
               stabledif_get_error ());
    goto out;
  }
  for (i = 0; i < k; i++)
    if (soak_dif_compare (w, rbuf[i], pi[i], lba[i], n[i], "batch read") == -1)
      goto out;
  r = 0;

 out:
  for (i = 0; i < k; i++) {
    free (wbuf[i]);
    free (rbuf[i]);
    free (pi[i]);
  }
  return r;
}

/* One random request (or batch) of dif worker W.  Returns -1 on
 * failure. */
static int
soak_dif_step (struct soak_worker *w, uint8_t *buf, uint8_t *pi)
{
  uint64_t r = rng_next_r (&w->rng) % 1000;
  uint64_t lba, n;
  char who[64];

  soak_worker_name (w, who, sizeof who);
  if (r < 5) {                  /* reconnect both */
    soak_dif_disconnect (w);
    return soak_dif_connect (w);
  }
  if (r < 35) {                 /* flush through the library */
    soak_doing (w, "stabledif_flush", 0, 0);
    soak_count (&w->t, SOAK_DIF, SOAK_FLUSH, 0);
    if (stabledif_flush (w->sd, 0) == -1) {
      soak_fail (who, "stabledif_flush: %s", stabledif_get_error ());
      return -1;
    }
    return 0;
  }
  if (r < 60) {                 /* flush on the raw connection */
    soak_doing (w, "nbd_flush (dif)", 0, 0);
    soak_count (&w->t, SOAK_DIF, SOAK_FLUSH, 0);
    if (nbd_flush (w->nbd, 0) == -1) {
      soak_fail (who, "flush on the dif view: %s", nbd_get_error ());
      return -1;
    }
    return 0;
  }
  if (r < 140)
    return soak_dif_batch (w);

  soak_dif_pick_range (w, 0, w->nblocks, &lba, &n);
  if (r < 470) {                /* write, some FUA */
    soak_fill (&w->rng, buf, n * geo.interval);
    return soak_dif_write (w, buf, lba, n,
                           r < 190 ? STABLEDIF_CMD_FLAG_FUA : 0);
  }
  if (r < 860)                  /* read */
    return soak_dif_read_check (w, buf, pi, lba, n);
  if (r < 930)                  /* zero */
    return soak_dif_zero_trim (w, SOAK_ZERO, lba, n,
                               r % 4 == 0 ? LIBNBD_CMD_FLAG_FUA : 0);
  return soak_dif_zero_trim (w, SOAK_TRIM, lba, n,
                             r % 4 == 0 ? LIBNBD_CMD_FLAG_FUA : 0);
}

/* Read the whole stripe of dif worker W and compare it. */
static int
soak_dif_final_check (struct soak_worker *w, uint8_t *buf, uint8_t *pi)
{
  const uint64_t step = SOAK_MAX_REQUEST / geo.interval;
  uint64_t lba, n;

  for (lba = 0; lba < w->nblocks; lba += n) {
    n = w->nblocks - lba < step ? w->nblocks - lba : step;
    if (soak_dif_read_check (w, buf, pi, lba, n) == -1)
      return -1;
  }
  return 0;
}

/* Dif worker thread: zero the stripe, random requests until told to
 * stop, read the whole stripe back. */
static void *
soak_dif_worker (void *arg)
{
  struct soak_worker *w = arg;
  uint8_t *buf = soak_malloc (SOAK_MAX_REQUEST);
  uint8_t *pi = soak_malloc (SOAK_MAX_REQUEST / geo.interval * geo.tuple);

  if (soak_dif_connect (w) == -1)
    goto out;
  if (soak_dif_zero_trim (w, SOAK_ZERO, 0, w->nblocks, 0) == -1)
    goto out;
  while (!soak_stopping ())
    if (soak_dif_step (w, buf, pi) == -1)
      goto out;
  if (!atomic_load (&failed_flag))
    soak_dif_final_check (w, buf, pi);

 out:
  soak_doing (w, "closing", 0, 0);
  soak_dif_disconnect (w);
  free (buf);
  free (pi);
  atomic_store (&w->done, true);
  return NULL;
}

/* ---- control-socket clients ------------------------------------------ */

/* Connect client C to the control socket (counted).  -1 on failure
 * (reported). */
static int
soak_ctl_connect (struct soak_ctl_client *c)
{
  struct sockaddr_un addr = { .sun_family = AF_UNIX };
  char who[64];

  snprintf (who, sizeof who, "ctl client %u", c->index);
  if (strlen (opt.ctl) >= sizeof addr.sun_path) {
    soak_fail (who, "control socket path too long: %s", opt.ctl);
    return -1;
  }
  strcpy (addr.sun_path, opt.ctl);
  c->fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (c->fd == -1 ||
      connect (c->fd, (struct sockaddr *) &addr, sizeof addr) == -1) {
    soak_fail (who, "connecting to %s: %s", opt.ctl, strerror (errno));
    if (c->fd >= 0)
      close (c->fd);
    c->fd = -1;
    return -1;
  }
  c->len = 0;
  c->connections++;
  return 0;
}

/* Send LINE (with its newline) and read one reply line into a parsed
 * JSON object *REPLY.  Waits at most 30 s for the reply.  -1 on failure
 * (reported). */
static int
soak_ctl_request (struct soak_ctl_client *c, const char *line, json_t **reply)
{
  size_t sent = 0, n = strlen (line);
  char who[64], *nl;
  json_error_t jerr;

  snprintf (who, sizeof who, "ctl client %u", c->index);
  while (sent < n) {
    ssize_t r = send (c->fd, line + sent, n - sent, MSG_NOSIGNAL);
    if (r == -1 && errno == EINTR)
      continue;
    if (r <= 0) {
      soak_fail (who, "sending %.*s: %s", (int) n - 1, line,
                 strerror (errno));
      return -1;
    }
    sent += r;
  }
  while ((nl = c->len ? memchr (c->buf, '\n', c->len) : NULL) == NULL) {
    struct pollfd pfd = { .fd = c->fd, .events = POLLIN };
    ssize_t r;

    if (c->cap - c->len < 4096) {
      c->cap = c->cap ? c->cap * 2 : 65536;
      c->buf = realloc (c->buf, c->cap);
      if (c->buf == NULL) {
        fprintf (stderr, "%s: out of memory\n", PROG);
        exit (SOAK_EXIT_ERROR);
      }
    }
    r = poll (&pfd, 1, 30000);
    if (r == 0) {
      soak_fail (who, "no reply to %.*s within 30 s", (int) n - 1, line);
      return -1;
    }
    if (r == -1) {
      if (errno == EINTR)
        continue;
      soak_fail (who, "poll: %s", strerror (errno));
      return -1;
    }
    r = recv (c->fd, c->buf + c->len, c->cap - c->len, 0);
    if (r == -1 && errno == EINTR)
      continue;
    if (r <= 0) {
      soak_fail (who, "reading the reply to %.*s: %s", (int) n - 1, line,
                 r == 0 ? "the server closed the connection"
                        : strerror (errno));
      return -1;
    }
    c->len += r;
  }
  *reply = json_loadb (c->buf, nl - c->buf, 0, &jerr);
  if (*reply == NULL || !json_is_object (*reply)) {
    soak_fail (who, "reply to %.*s is not a JSON object: %s (%.*s)",
               (int) n - 1, line, jerr.text,
               (int) (nl - c->buf > 200 ? 200 : nl - c->buf), c->buf);
    json_decref (*reply);
    return -1;
  }
  c->len -= nl + 1 - c->buf;
  memmove (c->buf, nl + 1, c->len);
  return 0;
}

/* The counter at KEY.VIEW.OP of COUNTERS, or -1 if it is missing. */
static long long
soak_ctl_counter (json_t *counters, const char *key, const char *view,
                  const char *op)
{
  json_t *v = json_object_get (json_object_get (json_object_get (counters,
                                                                 key),
                                                view), op);

  return json_is_integer (v) ? json_integer_value (v) : -1;
}

/* Check a counters reply: no PI failure, no event, and no request or
 * byte counter below what this client saw last time. */
static int
soak_ctl_check_counters (struct soak_ctl_client *c, json_t *reply)
{
  static const char *const zero_paths[][2] = {
    { "write_errors", "guard" }, { "write_errors", "app" },
    { "write_errors", "ref" }, { "read_errors", "guard" },
    { "read_errors", "app" }, { "read_errors", "ref" },
  };
  json_t *counters = json_object_get (reply, "counters");
  char who[64];
  size_t i, v, o;

  snprintf (who, sizeof who, "ctl client %u", c->index);
  if (!json_is_object (counters)) {
    soak_fail (who, "counters reply without \"counters\"");
    return -1;
  }
  for (i = 0; i < sizeof zero_paths / sizeof zero_paths[0]; i++) {
    json_t *x = json_object_get (json_object_get (counters,
                                                  zero_paths[i][0]),
                                 zero_paths[i][1]);
    if (!json_is_integer (x) || json_integer_value (x) != 0) {
      soak_fail (who, "counters: %s.%s is %lld, want 0", zero_paths[i][0],
                 zero_paths[i][1],
                 json_is_integer (x) ? (long long) json_integer_value (x)
                                     : -1LL);
      return -1;
    }
  }
  if (json_integer_value (json_object_get (counters, "writes_rejected")) ||
      json_integer_value (json_object_get (counters, "reads_failed")) ||
      json_integer_value (json_object_get (reply, "last_seq"))) {
    soak_fail (who, "counters: writes_rejected, reads_failed or last_seq "
               "is not 0");
    return -1;
  }
  for (v = 0; v < SOAK_NVIEWS; v++)
    for (o = 0; o < SOAK_NOPS; o++) {
      long long req = soak_ctl_counter (counters, "requests",
                                        soak_view_names[v],
                                        soak_op_names[o]);
      long long by = soak_ctl_counter (counters, "bytes",
                                       soak_view_names[v], soak_op_names[o]);
      if (req < 0 || by < 0) {
        soak_fail (who, "counters: requests/bytes.%s.%s missing",
                   soak_view_names[v], soak_op_names[o]);
        return -1;
      }
      if (c->have_last && ((uint64_t) req < c->last_requests[v][o] ||
                           (uint64_t) by < c->last_bytes[v][o])) {
        soak_fail (who, "counters went backwards: %s.%s requests %" PRIu64
                   " -> %lld, bytes %" PRIu64 " -> %lld",
                   soak_view_names[v], soak_op_names[o],
                   c->last_requests[v][o], req, c->last_bytes[v][o], by);
        return -1;
      }
      c->last_requests[v][o] = req;
      c->last_bytes[v][o] = by;
    }
  c->have_last = true;
  return 0;
}

/* Send one random request of client C and check its reply. */
static int
soak_ctl_step (struct soak_ctl_client *c)
{
  uint64_t r = rng_next_r (&c->rng) % 100;
  enum soak_verb verb = r < 55 ? SOAK_V_COUNTERS
    : r < 80 ? SOAK_V_EVENTS : r < 95 ? SOAK_V_PROFILE : SOAK_V_BAD;
  char line[64], who[64];
  json_t *reply = NULL, *ok;
  int ret = -1;

  snprintf (who, sizeof who, "ctl client %u", c->index);
  switch (verb) {
  case SOAK_V_COUNTERS: snprintf (line, sizeof line, "counters\n"); break;
  case SOAK_V_EVENTS:
    snprintf (line, sizeof line, "events %" PRIu64 "\n", c->since);
    break;
  case SOAK_V_PROFILE: snprintf (line, sizeof line, "profile\n"); break;
  case SOAK_V_BAD: snprintf (line, sizeof line, "counters please\n"); break;
  case SOAK_NVERBS: abort ();
  }
  atomic_store (&c->doing, soak_verb_names[verb]);
  c->requests[verb]++;
  if (soak_ctl_request (c, line, &reply) == -1)
    return -1;

  ok = json_object_get (reply, "ok");
  if (verb == SOAK_V_BAD) {
    if (!json_is_false (ok) ||
        !json_is_string (json_object_get (reply, "error"))) {
      soak_fail (who, "a bad request did not get an error reply");
      goto out;
    }
    ret = 0;
    goto out;
  }
  if (!json_is_true (ok)) {
    const char *e = json_string_value (json_object_get (reply, "error"));
    soak_fail (who, "%s: error reply: %s", soak_verb_names[verb],
               e ? e : "(no message)");
    goto out;
  }
  switch (verb) {
  case SOAK_V_COUNTERS:
    ret = soak_ctl_check_counters (c, reply);
    break;
  case SOAK_V_EVENTS: {
    json_t *ev = json_object_get (reply, "events");
    if (!json_is_array (ev) || json_array_size (ev) != 0) {
      soak_fail (who, "events: %zu PI failure events, want none",
                 json_is_array (ev) ? json_array_size (ev) : 0);
      break;
    }
    c->since = json_integer_value (json_object_get (reply, "next"));
    ret = 0;
    break;
  }
  case SOAK_V_PROFILE:
    if (json_is_true (json_object_get (reply, "stable_writes")) !=
        geo.stable_writes ||
        json_integer_value (json_object_get (reply, "nblocks")) !=
        (json_int_t) geo.nblocks) {
      soak_fail (who, "profile: stable_writes or nblocks differ from the "
                 "dif view's");
      break;
    }
    ret = 0;
    break;
  case SOAK_V_BAD:
  case SOAK_NVERBS:
    abort ();
  }

 out:
  json_decref (reply);
  return ret;
}

/* Control client thread: requests until told to stop, reconnecting now
 * and then, pausing opt.ctl_pause_us between them. */
static void *
soak_ctl_client (void *arg)
{
  struct soak_ctl_client *c = arg;

  if (soak_ctl_connect (c) == 0)
    while (!soak_stopping ()) {
      if (soak_ctl_step (c) == -1)
        break;
      if (rng_next_r (&c->rng) % 200 == 0) {
        close (c->fd);
        if (soak_ctl_connect (c) == -1)
          break;
      }
      if (opt.ctl_pause_us)
        soak_sleep_us (opt.ctl_pause_us);
    }
  atomic_store (&c->doing, "closing");
  if (c->fd >= 0)
    close (c->fd);
  c->fd = -1;
  free (c->buf);
  c->buf = NULL;
  atomic_store (&c->done, true);
  return NULL;
}

/* ---- totals, the scan and main --------------------------------------- */

/* The totals as JSON: {"requests": {"data": {"read": N, ...}, "dif":
 * {...}}, "bytes": {...}, "connections": {"data": N, "dif": N}}. */
static json_t *
soak_totals_json (const struct soak_totals *t)
{
  json_t *j = json_object (), *req = json_object (), *by = json_object ();
  json_t *conn = json_object ();
  size_t v, o;

  if (j == NULL || req == NULL || by == NULL || conn == NULL)
    goto nomem;
  for (v = 0; v < SOAK_NVIEWS; v++) {
    json_t *rv = json_object (), *bv = json_object ();
    if (rv == NULL || bv == NULL ||
        json_object_set_new (req, soak_view_names[v], rv) == -1 ||
        json_object_set_new (by, soak_view_names[v], bv) == -1 ||
        json_object_set_new (conn, soak_view_names[v],
                             json_integer (t->connections[v])) == -1)
      goto nomem;
    for (o = 0; o < SOAK_NOPS; o++)
      if (json_object_set_new (rv, soak_op_names[o],
                               json_integer (t->requests[v][o])) == -1 ||
          json_object_set_new (bv, soak_op_names[o],
                               json_integer (t->bytes[v][o])) == -1)
        goto nomem;
  }
  if (json_object_set_new (j, "requests", req) == -1 ||
      json_object_set_new (j, "bytes", by) == -1 ||
      json_object_set_new (j, "connections", conn) == -1)
    goto nomem;
  return j;

 nomem:
  fprintf (stderr, "%s: out of memory\n", PROG);
  exit (SOAK_EXIT_ERROR);
}

/* Write J (stolen) to opt.totals, if given.  -1 on failure (reported). */
static int
soak_write_totals (json_t *j)
{
  int r = 0;

  if (opt.totals &&
      json_dump_file (j, opt.totals, JSON_INDENT (2) | JSON_SORT_KEYS)
      == -1) {
    fprintf (stderr, "%s: cannot write %s\n", PROG, opt.totals);
    r = -1;
  }
  json_decref (j);
  return r;
}

/* Connect a library handle to the dif view.  NULL on failure (reported). */
static struct stabledif_handle *
soak_open_dif (void)
{
  char uri[PATH_MAX + 64];
  struct stabledif_handle *h = stabledif_create ();

  snprintf (uri, sizeof uri, "nbd+unix:///dif?socket=%s", opt.socket);
  if (h == NULL || stabledif_connect_uri (h, uri) == -1) {
    fprintf (stderr, "%s: connecting to %s: %s\n", PROG, uri,
             stabledif_get_error ());
    stabledif_close (h);
    return NULL;
  }
  return h;
}

/* Read the device geometry from a dif-view handle into geo. */
static void
soak_probe (struct stabledif_handle *h)
{
  geo.interval = stabledif_get_interval (h);
  geo.tuple = stabledif_get_tuple_size (h);
  geo.ext = geo.interval + geo.tuple;
  geo.nblocks = stabledif_get_size (h) / geo.interval;
  geo.stable_writes = stabledif_get_stable_writes (h) == 1;
}

/* --scan: read every block through the dif view, verifying its PI.
 * Blocks that fail are counted (a chunk that fails is read again block
 * by block), and escaped blocks must hold zeros.  Prints one line. */
static int
soak_scan (void)
{
  struct soak_totals t = { 0 };
  struct stabledif_handle *h = soak_open_dif ();
  uint64_t lba, n, i, bad = 0, escaped = 0, escaped_nonzero = 0;
  uint64_t perstep, nonzero_first = 0;
  uint8_t *buf, *pi;
  json_t *j;
  int r = SOAK_EXIT_OK;

  if (h == NULL)
    return SOAK_EXIT_ERROR;
  soak_probe (h);
  t.connections[SOAK_DIF]++;
  perstep = SOAK_MAX_REQUEST / geo.interval;
  buf = soak_malloc (perstep * geo.interval);
  pi = soak_malloc (perstep * (geo.tuple ? geo.tuple : 1));

  for (lba = 0; lba < geo.nblocks; lba += n) {
    n = geo.nblocks - lba < perstep ? geo.nblocks - lba : perstep;
    soak_count (&t, SOAK_DIF, SOAK_READ, n * geo.ext);
    if (stabledif_pread (h, buf, n * geo.interval, lba * geo.interval, pi,
                         0) == -1) {
      if (stabledif_get_errno () != EIO) {
        fprintf (stderr, "%s: scan: reading LBA %" PRIu64 "+%" PRIu64
                 ": %s\n", PROG, lba, n, stabledif_get_error ());
        r = SOAK_EXIT_ERROR;
        break;
      }
      /* Which blocks: one by one. */
      for (i = 0; i < n; i++) {
        soak_count (&t, SOAK_DIF, SOAK_READ, geo.ext);
        if (stabledif_pread (h, buf, geo.interval,
                             (lba + i) * geo.interval, pi, 0) == -1) {
          if (bad++ < 10)
            fprintf (stderr, "%s: scan: %s\n", PROG, stabledif_get_error ());
        }
      }
      continue;
    }
    for (i = 0; i < n && geo.tuple > 0; i++) {
      if (!soak_dif_all_ones (pi + i * geo.tuple))
        continue;
      escaped++;
      if (soak_first_diff (buf + i * geo.interval, soak_zeros,
                           geo.interval) >= 0 && escaped_nonzero++ == 0)
        nonzero_first = lba + i;
    }
  }
  stabledif_close (h);
  free (buf);
  free (pi);

  printf ("scan: %" PRIu64 " blocks, %" PRIu64 " escaped (all-ones "
          "tuple), %" PRIu64 " PI errors, %" PRIu64 " escaped blocks with "
          "data\n", geo.nblocks, escaped, bad, escaped_nonzero);
  if (escaped_nonzero)
    fprintf (stderr, "%s: scan: LBA %" PRIu64 " carries the all-ones tuple "
             "but its data is not zeros\n", PROG, nonzero_first);
  if (r == SOAK_EXIT_OK && (bad || escaped_nonzero))
    r = SOAK_EXIT_FAIL;
  j = soak_totals_json (&t);
  if (soak_write_totals (j) == -1 && r == SOAK_EXIT_OK)
    r = SOAK_EXIT_ERROR;
  return r;
}

/* Print the usage message to FP. */
static void
soak_usage (FILE *fp)
{
  fprintf (fp,
"Usage: " PROG " --socket NBD-SOCKET [--ctl CTL-SOCKET] [OPTIONS]\n"
"       " PROG " --socket NBD-SOCKET --scan [--totals FILE]\n"
"Load a stabledif device with many connections on both views and\n"
"control-socket clients for a bounded time, checking every read; or\n"
"(--scan) verify the PI of every block through the dif view.\n"
"\n"
"  --seconds S         length of the load (default 10)\n"
"  --grace S           time allowed to finish after that (default 60)\n"
"  --seed N            random seed (default 1)\n"
"  --data-workers N    libnbd connections on the data view (default 8)\n"
"  --dif-workers N     libstabledif handles on the dif view (default 8)\n"
"  --ctl-clients N     control-socket clients (default 4; needs --ctl)\n"
"  --ctl-pause-us N    pause between control requests (default 2000)\n"
"  --max-stripe BYTES  largest stripe a worker owns (default 8 MiB)\n"
"  --totals FILE       write the requests and bytes sent as JSON\n"
"  --quiet             no summary table\n"
"Exit status: 0 clean, 1 a check failed, 2 usage, connect error or hang.\n");
}

/* Parse an unsigned decimal option value into *OUT (at most MAX). */
static void
soak_parse_uint (const char *name, const char *s, uint64_t max, uint64_t *out)
{
  char *end;
  unsigned long long v;

  errno = 0;
  v = strtoull (s, &end, 10);
  if (errno || end == s || *end || s[0] == '-' || v > max) {
    fprintf (stderr, "%s: --%s: bad value '%s' (want 0..%" PRIu64 ")\n",
             PROG, name, s, max);
    exit (SOAK_EXIT_ERROR);
  }
  *out = v;
}

/* Parse a positive number of seconds into *OUT. */
static void
soak_parse_seconds (const char *name, const char *s, double *out)
{
  char *end;
  double v;

  errno = 0;
  v = strtod (s, &end);
  if (errno || end == s || *end || !(v > 0) || v > 1e6) {
    fprintf (stderr, "%s: --%s: bad number of seconds '%s'\n", PROG, name,
             s);
    exit (SOAK_EXIT_ERROR);
  }
  *out = v;
}

/* Parse the command line into opt. */
static void
soak_parse_options (int argc, char **argv)
{
  enum { O_SECONDS = 256, O_GRACE, O_SEED, O_DATA, O_DIF, O_CTLN, O_PAUSE,
         O_STRIPE, O_TOTALS, O_SCAN, O_QUIET, O_CTL, O_SOCKET, O_HELP };
  static const struct option longopts[] = {
    { "socket", required_argument, NULL, O_SOCKET },
    { "ctl", required_argument, NULL, O_CTL },
    { "seconds", required_argument, NULL, O_SECONDS },
    { "grace", required_argument, NULL, O_GRACE },
    { "seed", required_argument, NULL, O_SEED },
    { "data-workers", required_argument, NULL, O_DATA },
    { "dif-workers", required_argument, NULL, O_DIF },
    { "ctl-clients", required_argument, NULL, O_CTLN },
    { "ctl-pause-us", required_argument, NULL, O_PAUSE },
    { "max-stripe", required_argument, NULL, O_STRIPE },
    { "totals", required_argument, NULL, O_TOTALS },
    { "scan", no_argument, NULL, O_SCAN },
    { "quiet", no_argument, NULL, O_QUIET },
    { "help", no_argument, NULL, O_HELP },
    { NULL, 0, NULL, 0 },
  };
  uint64_t v;
  int c;

  while ((c = getopt_long (argc, argv, "", longopts, NULL)) != -1) {
    switch (c) {
    case O_SOCKET: opt.socket = optarg; break;
    case O_CTL: opt.ctl = optarg; break;
    case O_SECONDS:
      soak_parse_seconds ("seconds", optarg, &opt.seconds);
      break;
    case O_GRACE:
      soak_parse_seconds ("grace", optarg, &opt.grace);
      break;
    case O_SEED:
      soak_parse_uint ("seed", optarg, UINT64_MAX, &opt.seed);
      break;
    case O_DATA:
      soak_parse_uint ("data-workers", optarg, 256, &v);
      opt.data_workers = v;
      break;
    case O_DIF:
      soak_parse_uint ("dif-workers", optarg, 256, &v);
      opt.dif_workers = v;
      break;
    case O_CTLN:
      soak_parse_uint ("ctl-clients", optarg, 32, &v);
      opt.ctl_clients = v;
      break;
    case O_PAUSE:
      soak_parse_uint ("ctl-pause-us", optarg, 1000000, &v);
      opt.ctl_pause_us = v;
      break;
    case O_STRIPE:
      soak_parse_uint ("max-stripe", optarg, UINT64_C (1) << 32,
                       &opt.max_stripe);
      break;
    case O_TOTALS: opt.totals = optarg; break;
    case O_SCAN: opt.scan = true; break;
    case O_QUIET: opt.quiet = true; break;
    case O_HELP: soak_usage (stdout); exit (SOAK_EXIT_OK);
    default: soak_usage (stderr); exit (SOAK_EXIT_ERROR);
    }
  }
  if (optind != argc || opt.socket == NULL) {
    fprintf (stderr, "%s: %s\n", PROG, optind != argc
             ? "unexpected arguments" : "--socket is required");
    soak_usage (stderr);
    exit (SOAK_EXIT_ERROR);
  }
  if (!opt.scan && opt.data_workers + opt.dif_workers == 0) {
    fprintf (stderr, "%s: no workers (--data-workers and --dif-workers "
             "are both 0)\n", PROG);
    exit (SOAK_EXIT_ERROR);
  }
  if (!opt.scan && opt.ctl_clients > 0 && opt.ctl == NULL) {
    fprintf (stderr, "%s: --ctl-clients needs --ctl\n", PROG);
    exit (SOAK_EXIT_ERROR);
  }
}

/* Wait for THREAD (whose DONE flag says it finished) until DEADLINE
 * (soak_now seconds).  Returns false if it did not finish by then. */
static bool
soak_join (pthread_t thread, _Atomic bool *done, double deadline)
{
  while (!atomic_load (done) && soak_now () < deadline)
    soak_sleep_us (10000);
  if (!atomic_load (done))
    return false;
  pthread_join (thread, NULL);
  return true;
}

/* Print the summary table of the load. */
static void
soak_summary (const struct soak_totals *t, double secs,
              const struct soak_ctl_client *ctl, const struct
              soak_worker *workers, unsigned nworkers)
{
  uint64_t total = 0, bytes = 0, checked = 0, ctl_total = 0;
  uint64_t verbs[SOAK_NVERBS] = { 0 }, ctl_conns = 0;
  size_t v, o, i;

  for (v = 0; v < SOAK_NVIEWS; v++)
    for (o = 0; o < SOAK_NOPS; o++) {
      total += t->requests[v][o];
      if (o != SOAK_ZERO && o != SOAK_TRIM)
        bytes += t->bytes[v][o];
    }
  for (i = 0; i < nworkers; i++)
    checked += workers[i].reads_checked;
  for (i = 0; i < opt.ctl_clients; i++) {
    for (v = 0; v < SOAK_NVERBS; v++) {
      verbs[v] += ctl[i].requests[v];
      ctl_total += ctl[i].requests[v];
    }
    ctl_conns += ctl[i].connections;
  }

  printf ("soak: %.1f s, seed %" PRIu64 ", %u data + %u dif workers "
          "(%" PRIu64 " + %" PRIu64 " connections), %u ctl clients\n",
          secs, opt.seed, opt.data_workers, opt.dif_workers,
          t->connections[SOAK_DATA], t->connections[SOAK_DIF],
          opt.ctl_clients);
  printf ("%-6s %-6s %12s %16s\n", "view", "op", "requests", "bytes");
  for (v = 0; v < SOAK_NVIEWS; v++)
    for (o = 0; o < SOAK_NOPS; o++)
      printf ("%-6s %-6s %12" PRIu64 " %16" PRIu64 "\n", soak_view_names[v],
              soak_op_names[o], t->requests[v][o], t->bytes[v][o]);
  printf ("reads checked against the shadow: %" PRIu64 "\n", checked);
  printf ("ctl: %" PRIu64 " requests (%" PRIu64 " counters, %" PRIu64
          " events, %" PRIu64 " profile, %" PRIu64 " bad) on %" PRIu64
          " connections, %.0f req/s\n", ctl_total, verbs[SOAK_V_COUNTERS],
          verbs[SOAK_V_EVENTS], verbs[SOAK_V_PROFILE], verbs[SOAK_V_BAD],
          ctl_conns, ctl_total / secs);
  printf ("requests per second: %.0f (NBD, both views; %.1f MiB/s read + "
          "written)\n", total / secs, bytes / secs / 1048576.0);
}

/* --scan, or: probe the device, start the workers and control clients,
 * stop them after --seconds, print the summary and write the totals. */
int
main (int argc, char **argv)
{
  const unsigned nworkers_max = 512;
  struct soak_worker *workers;
  struct soak_ctl_client *ctl;
  struct stabledif_handle *probe;
  struct soak_totals sum = { 0 };
  unsigned nworkers, i;
  uint64_t spacing, stripe;
  double start, deadline, secs;
  bool hung = false;
  json_t *j;
  int r;

  soak_parse_options (argc, argv);
  if (opt.scan)
    return soak_scan ();

  probe = soak_open_dif ();
  if (probe == NULL)
    return SOAK_EXIT_ERROR;
  soak_probe (probe);
  stabledif_close (probe);
  sum.connections[SOAK_DIF]++;
  if (geo.interval > sizeof soak_zeros || geo.tuple == 0) {
    fprintf (stderr, "%s: the soak needs a format with PI and an interval "
             "of at most %zu (interval %" PRIu64 ", tuple %" PRIu64 ")\n",
             PROG, sizeof soak_zeros, geo.interval, geo.tuple);
    return SOAK_EXIT_ERROR;
  }

  /* Stripes: spread evenly over the disk, at most max_stripe bytes. */
  nworkers = opt.data_workers + opt.dif_workers;
  if (nworkers > nworkers_max) {
    fprintf (stderr, "%s: too many workers (at most %u)\n", PROG,
             nworkers_max);
    return SOAK_EXIT_ERROR;
  }
  spacing = geo.nblocks / nworkers;
  stripe = opt.max_stripe / geo.interval;
  if (stripe > spacing)
    stripe = spacing;
  if (stripe < 16) {
    fprintf (stderr, "%s: the disk (%" PRIu64 " blocks) is too small for "
             "%u workers of at least 16 blocks each\n", PROG, geo.nblocks,
             nworkers);
    return SOAK_EXIT_ERROR;
  }

  workers = calloc (nworkers, sizeof *workers);
  ctl = calloc (opt.ctl_clients ? opt.ctl_clients : 1, sizeof *ctl);
  if (workers == NULL || ctl == NULL) {
    fprintf (stderr, "%s: out of memory\n", PROG);
    return SOAK_EXIT_ERROR;
  }
  for (i = 0; i < nworkers; i++) {
    struct soak_worker *w = &workers[i];
    static const enum stabledif_policy policies[] = {
      STABLEDIF_POLICY_WAIT, STABLEDIF_POLICY_WAIT_SENT,
      STABLEDIF_POLICY_SNAPSHOT,
    };

    w->index = i;
    w->view = i < opt.data_workers ? SOAK_DATA : SOAK_DIF;
    w->export = i % 2 ? "data" : "";
    w->policy = policies[i % 3];
    w->rng = soak_seed_state (opt.seed, i);
    w->lba = i * spacing;
    w->nblocks = stripe;
    w->shadow = soak_malloc (stripe * geo.interval);
    w->escaped = soak_malloc (stripe);
    atomic_store (&w->doing, "starting");
  }
  for (i = 0; i < opt.ctl_clients; i++) {
    ctl[i].index = i;
    ctl[i].fd = -1;
    ctl[i].rng = soak_seed_state (opt.seed, nworkers_max + i);
    atomic_store (&ctl[i].doing, "starting");
  }

  start = soak_now ();
  for (i = 0; i < nworkers; i++) {
    r = pthread_create (&workers[i].thread, NULL,
                        workers[i].view == SOAK_DATA ? soak_data_worker
                                                     : soak_dif_worker,
                        &workers[i]);
    if (r != 0) {
      fprintf (stderr, "%s: pthread_create: %s\n", PROG, strerror (r));
      exit (SOAK_EXIT_ERROR);
    }
  }
  for (i = 0; i < opt.ctl_clients; i++) {
    r = pthread_create (&ctl[i].thread, NULL, soak_ctl_client, &ctl[i]);
    if (r != 0) {
      fprintf (stderr, "%s: pthread_create: %s\n", PROG, strerror (r));
      exit (SOAK_EXIT_ERROR);
    }
  }

  /* Run for --seconds (or until a check fails), then stop and wait. */
  while (!soak_stopping () && soak_now () - start < opt.seconds)
    soak_sleep_us (50000);
  atomic_store (&stop_flag, true);
  deadline = soak_now () + opt.grace;
  for (i = 0; i < nworkers; i++)
    if (!soak_join (workers[i].thread, &workers[i].done, deadline)) {
      char who[64];
      fprintf (stderr, "%s: HANG: %s still in %s (offset %" PRIu64
               " length %" PRIu64 ") %.0f s after the load stopped\n",
               PROG, soak_worker_name (&workers[i], who, sizeof who),
               atomic_load (&workers[i].doing),
               atomic_load (&workers[i].doing_off),
               atomic_load (&workers[i].doing_len), opt.grace);
      hung = true;
    }
  for (i = 0; i < opt.ctl_clients; i++)
    if (!soak_join (ctl[i].thread, &ctl[i].done, deadline)) {
      fprintf (stderr, "%s: HANG: ctl client %u still in %s %.0f s after "
               "the load stopped\n", PROG, i, atomic_load (&ctl[i].doing),
               opt.grace);
      hung = true;
    }
  if (hung)
    _exit (SOAK_EXIT_ERROR);    /* threads are stuck: do not clean up */
  secs = soak_now () - start;

  for (i = 0; i < nworkers; i++) {
    soak_totals_add (&sum, &workers[i].t);
    free (workers[i].shadow);
    free (workers[i].escaped);
  }
  if (!opt.quiet)
    soak_summary (&sum, secs, ctl, workers, nworkers);
  j = soak_totals_json (&sum);
  if (json_object_set_new (j, "seconds", json_real (secs)) == -1) {
    fprintf (stderr, "%s: out of memory\n", PROG);
    return SOAK_EXIT_ERROR;
  }
  r = soak_write_totals (j);
  free (workers);
  free (ctl);
  if (atomic_load (&failed_flag))
    return SOAK_EXIT_FAIL;
  return r == -1 ? SOAK_EXIT_ERROR : SOAK_EXIT_OK;
}
