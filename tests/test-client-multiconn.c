/* SPDX-License-Identifier: BSD-3-Clause */
/* stabledif: libstabledif with several connections per handle
 * (stabledif_set_connections), against the real plugin.
 *
 *   test-client-multiconn URI io N EXPECT MODEL-FILE
 *   test-client-multiconn - log LOGFILE FORMAT INTERVAL EXPECT WRITES
 *   test-client-multiconn URI api
 *   test-client-multiconn URI refused N
 *   test-client-multiconn URI mismatch N WHICH
 *   test-client-multiconn URI describe
 *   test-client-multiconn URI killed PIDFILE
 *   test-client-multiconn SOCKET cut RELAY-SOCKET K
 *
 * io: asks for N connections and expects EXPECT in use (1 when the
 * server does not advertise multi-conn), then: 64 asynchronous writes
 * of distinct patterns from the main thread, read back (data and PI);
 * flush and aio_flush; one write per connection whose completion
 * callbacks must all be running at the same time (one I/O thread per
 * connection), each getting EDEADLK for synchronous calls; chains of
 * writes submitted from completion callbacks (each chain stays on one
 * I/O thread, the chains cover every connection, the data is right);
 * wait_stable under wait and wait-sent with a race delay; policy none
 * with forensics, the buffers changed after submit on every connection;
 * the counters; then a second handle with one connection reads the
 * whole device and compares it with what was written, and the expected
 * contents of the data view go to MODEL-FILE (the script compares them
 * with what nbdcopy reads).  Prints "writes=W" for the log check.
 *
 * log: reads nbdkit's log filter file of an io run and checks what the
 * server saw: the 64 writes of the main thread came on EXPECT distinct
 * connections, each callback chain's writes on one connection and the
 * chains on EXPECT connections, W writes in all (as the library
 * counted), one Flush per flush call (multi-conn: never repeated on
 * every connection), and EXPECT + 1 connections to the dif export (the
 * io handle's and the one-connection reader's).
 *
 * api: the argument errors of stabledif_set_connections and
 * stabledif_get_connections, the default, EISCONN after connect, and a
 * handle with the most connections (16) doing I/O.
 *
 * refused: the server takes one client at a time (nbdkit's limit
 * filter): connect with N must fail naming "connection 2 of N", the
 * handle is unusable afterwards (EISCONN), close is clean, and a handle
 * with one connection then works.
 *
 * mismatch: a server (nbdkit's eval plugin, set up by the script) that
 * describes another disk on connection WHICH: connect fails with EPROTO
 * naming "connection WHICH of N".  describe prints the profile line and
 * the dif export's size in bytes for that script.
 *
 * killed: the server (its pid in PIDFILE) is killed with requests in
 * flight on both of 2 connections: they fail, new ones fail with
 * ENOTCONN, wait_all and close return.
 *
 * cut: 2 connections through a relay of this program (RELAY-SOCKET to
 * the server's SOCKET); the relay drops the K-th connection (0: the
 * first one) only: the whole handle is dead, the requests queued on
 * either connection and new ones fail with ENOTCONN naming
 * "connection K+1 of 2", nothing hangs.
 *
 * Nothing here depends on timing except that a few statements run
 * within the race delay (a quarter second or more) after a submit, as
 * in test-client-policies.c; the lost-connection modes end after 60 s
 * by alarm() at the latest.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "pi.h"
#include "test-client-util.h"

/* Layout of the io mode, in blocks (LBAs) of the interval.  The device
 * must have at least LAST_LBA blocks (16M at interval 4096 has 4096). */
#define MAIN_WRITES 64          /* asynchronous writes from main */
#define MAIN_NB 4               /* blocks per main write */
#define MAIN_LBA 0              /* first block of the main writes */
#define CHAIN_LEN 16            /* writes per callback chain */
#define CHAIN_NB 2              /* blocks per chain write */
#define CHAIN_LBA 512           /* chain k writes from CHAIN_LBA + k * 32 */
#define CHAIN_SPAN (CHAIN_LEN * CHAIN_NB)
#define GATE_LBA 1024           /* one block per connection */
#define STABLE_LBA 1536         /* wait_stable rounds */
#define STABLE_NB 2             /* blocks per write there */
#define FOREN_LBA 2048          /* policy none + forensics */
#define FOREN_NB 2              /* blocks per write there */
#define LAST_LBA 2560
/* Flush calls of io (the log must show exactly this many). */
#define IO_FLUSHES 3
/* Race delay of the wait_stable and forensics cases, microseconds. */
#define DELAY_US 250000

static struct stabledif_handle *h;    /* the handle under test */
static const struct pi_format *fmt;   /* its PI format */
static uint32_t iv;                   /* interval, bytes */
static unsigned ts;                   /* tuple size, bytes */
static uint64_t size;                 /* device size, data bytes */
static int nconns;                    /* connections in use */
static uint8_t *model;                /* expected data of the device */
static uint64_t writes_done;          /* write requests completed */
static uint64_t write_bytes_done;     /* their data bytes */
static uint64_t reads_done;           /* read requests completed */
static uint64_t read_bytes_done;      /* their data bytes */

/* ---- helpers ---- */

/* A completion callback that counts into an atomic_uint, and errors
 * into count_errors. */
static atomic_uint count_errors;
static void
on_count (void *user_data, int error)
{
  atomic_fetch_add ((atomic_uint *) user_data, 1);
  if (error)
    atomic_fetch_add (&count_errors, 1);
}

/* Record that NB blocks at LBA now hold DATA (a write that succeeded). */
static void
model_put (uint64_t lba, const uint8_t *data, uint64_t nb)
{
  memcpy (model + lba * iv, data, nb * iv);
}

/* Count a completed write (or read) of NB blocks. */
static void
count_write (uint64_t nb)
{
  writes_done++;
  write_bytes_done += nb * iv;
}
static void
count_read (uint64_t nb)
{
  reads_done++;
  read_bytes_done += nb * iv;
}

/* Check NB blocks at LBA read back as DATA with TUPLES (app tag 0). */
static void
check_pi (const uint8_t *data, const uint8_t *tuples, uint64_t nb,
          uint64_t lba, const char *what)
{
  uint64_t i;

  for (i = 0; i < nb && ts > 0; ++i) {
    struct pi_tuple t;

    pi_tuple_decode (fmt, tuples + i * ts, &t);
    CHECK (t.guard == pi_guard_compute (fmt, data + i * iv, iv),
           "%s: LBA %" PRIu64 ": guard 0x%" PRIx64 " is not the guard of "
           "the data", what, lba + i, t.guard);
    CHECK (t.app == 0, "%s: LBA %" PRIu64 ": app 0x%x", what, lba + i,
           t.app);
    CHECK (t.ref == pi_ref_for_lba (fmt, lba + i),
           "%s: LBA %" PRIu64 ": ref 0x%" PRIx64, what, lba + i, t.ref);
  }
}

/* Read NB blocks at LBA through HH synchronously (counted if HH is the
 * handle under test) and compare them with the model. */
static void
expect_model (struct stabledif_handle *hh, uint64_t lba, uint64_t nb,
              const char *what)
{
  uint8_t *r = xmalloc (nb * iv);

  memset (r, 0xa5, nb * iv);
  OK (stabledif_pread (hh, r, nb * iv, lba * iv, NULL, 0));
  if (hh == h)
    count_read (nb);
  CHECK (memcmp (r, model + lba * iv, nb * iv) == 0,
         "%s: the device holds other data than was written", what);
  free (r);
}

static void
stats (struct stabledif_stats *st)
{
  OK (stabledif_get_stats (h, st, sizeof *st));
}

/* Create the handle, ask for N connections, connect to URI, expect
 * EXPECT in use; set the globals from the profile. */
static void
connect_n (const char *uri, unsigned n, int expect)
{
  h = stabledif_create ();
  CHECK (h != NULL, "create");
  CHECK (stabledif_get_connections (h) == 1, "a new handle asks for %d "
         "connections, want 1", stabledif_get_connections (h));
  OK (stabledif_set_connections (h, n));
  CHECK (stabledif_get_connections (h) == (int) n, "before connect: %d "
         "connections, asked for %u", stabledif_get_connections (h), n);
  OK (stabledif_connect_uri (h, uri));
  nconns = stabledif_get_connections (h);
  CHECK (nconns == expect, "asked for %u connections: %d in use, want %d",
         n, nconns, expect);
  FAILS (stabledif_set_connections (h, 1), EISCONN,
         "stabledif_set_connections: ");
  CHECK (stabledif_get_connections (h) == expect, "a refused set changed "
         "the connections in use");

  fmt = pi_format_lookup (stabledif_get_format (h));
  CHECK (fmt != NULL, "unknown format %s", stabledif_get_format (h));
  iv = (uint32_t) stabledif_get_interval (h);
  ts = fmt->tuple_size;
  size = (uint64_t) stabledif_get_size (h);
}

/* ---- io: main-thread writes, read back, flush ---- */

static void
io_main (void)
{
  const size_t len = MAIN_NB * iv, total = MAIN_WRITES * len;
  uint8_t *w = xmalloc (total), *r = xmalloc (total);
  uint8_t *pi = xmalloc (MAIN_WRITES * MAIN_NB * ts + 1);
  atomic_uint called = 0;
  struct done fd = { .ran = false };
  int i;

  /* Every write its own pattern, some with FUA, half with a callback
   * (errors of the others come out of wait_all). */
  for (i = 0; i < MAIN_WRITES; ++i) {
    const uint64_t lba = MAIN_LBA + (uint64_t) i * MAIN_NB;
    int64_t c;

    fill_pattern (w + i * len, len, 100 + (uint64_t) i);
    model_put (lba, w + i * len, MAIN_NB);
    c = stabledif_aio_pwrite (h, w + i * len, len, lba * iv,
                              i % 8 == 0 ? STABLEDIF_CMD_FLAG_FUA : 0,
                              i % 2 ? on_count : NULL,
                              i % 2 ? &called : NULL);
    CHECK (c > 0, "aio_pwrite %d returned %" PRIi64, i, c);
    count_write (MAIN_NB);
  }
  OK (stabledif_wait_all (h));
  CHECK (atomic_load (&called) == MAIN_WRITES / 2, "%u write callbacks ran",
         atomic_load (&called));
  CHECK (atomic_load (&count_errors) == 0, "%u writes failed",
         atomic_load (&count_errors));
  CHECK (stabledif_get_in_flight (h) == 0, "requests in flight after "
         "wait_all");

  /* Read back: all at once (over every connection), with the PI. */
  memset (r, 0, total);
  pi[MAIN_WRITES * MAIN_NB * ts] = 0x77;
  for (i = 0; i < MAIN_WRITES; ++i) {
    const uint64_t lba = MAIN_LBA + (uint64_t) i * MAIN_NB;
    CHECK (stabledif_aio_pread (h, r + i * len, len, lba * iv,
                                pi + i * MAIN_NB * ts, 0, on_count,
                                &called) > 0, "aio_pread %d", i);
    count_read (MAIN_NB);
  }
  OK (stabledif_wait_all (h));
  CHECK (atomic_load (&called) == MAIN_WRITES / 2 + MAIN_WRITES,
         "read callbacks");
  CHECK (atomic_load (&count_errors) == 0, "%u reads failed",
         atomic_load (&count_errors));
  CHECK (memcmp (r, w, total) == 0, "asynchronous reads: data differs");
  CHECK (pi[MAIN_WRITES * MAIN_NB * ts] == 0x77, "tuple buffer overrun");
  check_pi (r, pi, MAIN_WRITES * MAIN_NB, MAIN_LBA, "main writes");

  /* And in one synchronous request. */
  memset (r, 0, total);
  OK (stabledif_pread (h, r, total, MAIN_LBA * iv, NULL, 0));
  count_read (MAIN_WRITES * MAIN_NB);
  CHECK (memcmp (r, w, total) == 0, "synchronous read: data differs");

  /* IO_FLUSHES flushes: synchronous, asynchronous with and without a
   * callback. */
  OK (stabledif_flush (h, 0));
  OK (stabledif_aio_flush (h, 0, NULL, NULL));
  OK (stabledif_aio_flush (h, 0, on_done, &fd));
  OK (stabledif_wait_all (h));
  CHECK (atomic_load (&fd.ran) && fd.error == 0, "aio_flush callback: "
         "error %d %s", fd.error, fd.msg);
  free (w); free (r); free (pi);
}

/* ---- io: one completion callback per connection, all at once ---- */

static pthread_mutex_t gate_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cond = PTHREAD_COND_INITIALIZER;
static int gate_inside;                 /* callbacks at the gate */
static bool gate_open;                  /* they may return */
static uint8_t *gate_spare;             /* a buffer for refused calls */

/* What one gate callback saw. */
struct gate_cb {
  int error;                    /* the write's error */
  int pwrite_errno;             /* of a synchronous pwrite in it */
  int pread_errno;              /* of a synchronous pread in it */
  int flush_errno;              /* of a synchronous flush in it */
  int wait_all_errno;           /* of wait_all in it */
  pthread_t thread;             /* the thread it ran on */
};

/* Try the synchronous calls (each would wait for an I/O thread, maybe
 * this one: EDEADLK), then wait at the gate until main opens it. */
static void
on_gate (void *user_data, int error)
{
  struct gate_cb *g = user_data;

  g->error = error;
  g->thread = pthread_self ();
  if (stabledif_pwrite (h, gate_spare, iv, GATE_LBA * iv, 0) == -1)
    g->pwrite_errno = stabledif_get_errno ();
  if (stabledif_pread (h, gate_spare, iv, GATE_LBA * iv, NULL, 0) == -1)
    g->pread_errno = stabledif_get_errno ();
  if (stabledif_flush (h, 0) == -1)
    g->flush_errno = stabledif_get_errno ();
  if (stabledif_wait_all (h) == -1)
    g->wait_all_errno = stabledif_get_errno ();

  pthread_mutex_lock (&gate_lock);
  gate_inside++;
  pthread_cond_broadcast (&gate_cond);
  while (!gate_open)
    pthread_cond_wait (&gate_cond, &gate_lock);
  pthread_mutex_unlock (&gate_lock);
}

/* One write per connection (main's requests take turns): the callbacks
 * must all be inside at the same time, which they can only be on
 * NCONNS different I/O threads; until they return the writes are in
 * flight. */
static void
io_gate (void)
{
  struct gate_cb g[STABLEDIF_MAX_CONNECTIONS];
  uint8_t *buf = xmalloc ((size_t) nconns * iv);
  struct timespec deadline;
  int i, j, inside;

  memset (g, 0, sizeof g);
  gate_spare = xmalloc (iv);
  memset (gate_spare, 0x5a, iv);
  fill_pattern (buf, (size_t) nconns * iv, 7);
  for (i = 0; i < nconns; ++i) {
    CHECK (stabledif_aio_pwrite (h, buf + i * iv, iv,
                                 (GATE_LBA + (uint64_t) i) * iv, 0, on_gate,
                                 &g[i]) > 0, "gate write %d", i);
    model_put (GATE_LBA + (uint64_t) i, buf + i * iv, 1);
    count_write (1);
  }

  /* A bound, not a timing assertion: they are all inside at once or
   * never (a connection's callbacks run one after the other). */
  clock_gettime (CLOCK_REALTIME, &deadline);
  deadline.tv_sec += 60;
  pthread_mutex_lock (&gate_lock);
  while (gate_inside < nconns &&
         pthread_cond_timedwait (&gate_cond, &gate_lock, &deadline) == 0)
    ;
  inside = gate_inside;
  pthread_mutex_unlock (&gate_lock);
  CHECK (inside == nconns, "only %d of %d completion callbacks could run "
         "at the same time: the writes are not on %d connections with an "
         "I/O thread each", inside, nconns, nconns);
  CHECK (stabledif_get_in_flight (h) == nconns, "%" PRIi64 " requests in "
         "flight while %d callbacks run", stabledif_get_in_flight (h),
         nconns);

  pthread_mutex_lock (&gate_lock);
  gate_open = true;
  pthread_cond_broadcast (&gate_cond);
  pthread_mutex_unlock (&gate_lock);
  OK (stabledif_wait_all (h));
  CHECK (stabledif_get_in_flight (h) == 0, "in flight after wait_all");

  for (i = 0; i < nconns; ++i) {
    CHECK (g[i].error == 0, "gate write %d failed: %d", i, g[i].error);
    CHECK (g[i].pwrite_errno == EDEADLK, "connection of write %d: pwrite "
           "from a callback: errno %d, want EDEADLK", i, g[i].pwrite_errno);
    CHECK (g[i].pread_errno == EDEADLK, "pread from a callback: errno %d",
           g[i].pread_errno);
    CHECK (g[i].flush_errno == EDEADLK, "flush from a callback: errno %d",
           g[i].flush_errno);
    CHECK (g[i].wait_all_errno == EDEADLK, "wait_all from a callback: "
           "errno %d", g[i].wait_all_errno);
    for (j = 0; j < i; ++j)
      CHECK (!pthread_equal (g[i].thread, g[j].thread), "gate callbacks %d "
             "and %d ran on the same thread", j, i);
  }
  expect_model (h, GATE_LBA, (uint64_t) nconns, "gate writes");
  free (buf);
  free (gate_spare);
}

/* ---- io: chains of requests submitted from completion callbacks ---- */

/* One chain: CHAIN_LEN writes, each submitted by the previous one's
 * callback, then a read of them all submitted by the last callback.
 * Only the chain's callbacks touch it until wait_all returned. */
struct chain {
  uint64_t lba;                 /* first block */
  uint8_t *buf;                 /* CHAIN_SPAN blocks of data */
  uint8_t *back;                /* the read */
  unsigned submitted;           /* writes submitted */
  unsigned callbacks;           /* callbacks run (writes and the read) */
  int error;                    /* first error of a request */
  int submit_errno;             /* errno of a failed submit */
  bool moved;                   /* a callback ran on another thread */
  pthread_t thread;             /* the thread of the first callback */
  bool read_ok;                 /* the read returned the data written */
  int stable_errno;             /* wait_stable on a pinned buffer in the
                                   first callback */
};

static void on_chain_read (void *user_data, int error);

/* Note the thread and the error of a chain's callback. */
static void
chain_seen (struct chain *c, int error)
{
  if (c->callbacks++ == 0)
    c->thread = pthread_self ();
  else if (!pthread_equal (c->thread, pthread_self ()))
    c->moved = true;
  if (error && c->error == 0)
    c->error = error;
}

static void
on_chain_write (void *user_data, int error)
{
  struct chain *c = user_data;
  const size_t len = CHAIN_NB * iv;

  chain_seen (c, error);
  if (c->submitted == 1) {
    /* Write 0 of this chain is complete, but write 0's buffer is still
     * pinned while this callback runs (policy wait): waiting for it
     * would wait for this very thread. */
    if (stabledif_wait_stable (h, c->buf, len) == -1)
      c->stable_errno = stabledif_get_errno ();
  }
  if (c->submitted < CHAIN_LEN) {
    unsigned k = c->submitted++;
    if (stabledif_aio_pwrite (h, c->buf + k * len, len,
                              (c->lba + k * CHAIN_NB) * iv, 0,
                              on_chain_write, c) == -1)
      c->submit_errno = stabledif_get_errno ();
  }
  else if (stabledif_aio_pread (h, c->back, CHAIN_SPAN * iv, c->lba * iv,
                                NULL, 0, on_chain_read, c) == -1)
    c->submit_errno = stabledif_get_errno ();
}

static void
on_chain_read (void *user_data, int error)
{
  struct chain *c = user_data;

  chain_seen (c, error);
  c->read_ok = error == 0 &&
    memcmp (c->back, c->buf, CHAIN_SPAN * iv) == 0;
}

/* 2 * NCONNS chains started back to back from main: they go to every
 * connection, two each; each stays on its connection's I/O thread. */
static void
io_chains (void)
{
  const int n = 2 * nconns;
  struct chain *ch = calloc ((size_t) n, sizeof *ch);
  pthread_t threads[2 * STABLEDIF_MAX_CONNECTIONS];
  int i, j, nthreads = 0;

  CHECK (ch != NULL, "calloc");
  OK (stabledif_set_policy (h, STABLEDIF_POLICY_WAIT));
  for (i = 0; i < n; ++i) {
    ch[i].lba = CHAIN_LBA + (uint64_t) i * CHAIN_SPAN;
    ch[i].buf = xmalloc (CHAIN_SPAN * iv);
    ch[i].back = xmalloc (CHAIN_SPAN * iv);
    fill_pattern (ch[i].buf, CHAIN_SPAN * iv, 300 + (uint64_t) i);
    model_put (ch[i].lba, ch[i].buf, CHAIN_SPAN);
  }
  for (i = 0; i < n; ++i) {
    ch[i].submitted = 1;
    CHECK (stabledif_aio_pwrite (h, ch[i].buf, CHAIN_NB * iv,
                                 ch[i].lba * iv, 0, on_chain_write,
                                 &ch[i]) > 0, "chain %d: first write", i);
  }
  /* A callback submits the next request before its own completes, so
   * the chains are in flight until the last read. */
  OK (stabledif_wait_all (h));
  CHECK (stabledif_get_in_flight (h) == 0, "in flight after the chains");

  for (i = 0; i < n; ++i) {
    struct chain *c = &ch[i];
    CHECK (c->submit_errno == 0, "chain %d: a submit from a callback "
           "failed: errno %d", i, c->submit_errno);
    CHECK (c->error == 0, "chain %d: a request failed: %d", i, c->error);
    CHECK (c->callbacks == CHAIN_LEN + 1, "chain %d: %u callbacks ran, "
           "want %d", i, c->callbacks, CHAIN_LEN + 1);
    CHECK (c->read_ok, "chain %d: the read from a callback returned other "
           "data than the chain wrote", i);
    CHECK (!c->moved, "chain %d: requests submitted from a callback "
           "completed on another I/O thread", i);
    CHECK (c->stable_errno == EDEADLK, "chain %d: wait_stable from a "
           "callback on a pinned buffer: errno %d", i, c->stable_errno);
    for (j = 0; j < nthreads; ++j)
      if (pthread_equal (threads[j], c->thread))
        break;
    if (j == nthreads)
      threads[nthreads++] = c->thread;
    writes_done += CHAIN_LEN;
    write_bytes_done += (uint64_t) CHAIN_SPAN * iv;
    count_read (CHAIN_SPAN);
  }
  CHECK (nthreads == nconns, "%d chains started from main ran on %d I/O "
         "threads, want %d", n, nthreads, nconns);
  for (i = 0; i < n; ++i) {
    expect_model (h, ch[i].lba, CHAIN_SPAN, "chain");
    free (ch[i].buf);
    free (ch[i].back);
  }
  free (ch);
}

/* ---- io: wait_stable across connections ---- */

/* 2 * NCONNS writes (two per connection) of one buffer each, then: under
 * wait, wait_stable of a buffer returns only after that write's
 * callback has run; of the whole buffer, after all of them; under
 * wait-sent the buffer may change after wait_stable and the device
 * still gets the data as it was at submit. */
static void
io_stable (void)
{
  const int n = 2 * nconns;
  const size_t len = STABLE_NB * iv;
  uint8_t *buf = xmalloc ((size_t) n * len), *orig = xmalloc (n * len);
  uint8_t *other = xmalloc (iv);
  struct done *d = calloc ((size_t) n, sizeof *d);
  struct stabledif_stats a, b;
  int round, i;

  CHECK (d != NULL, "calloc");
  OK (stabledif_set_race_delay_us (h, DELAY_US));
  for (round = 0; round < 3; ++round) {
    const uint64_t lba = STABLE_LBA + (uint64_t) round * n * STABLE_NB;
    uint64_t calls = 0;

    OK (stabledif_set_policy (h, round < 2 ? STABLEDIF_POLICY_WAIT
                              : STABLEDIF_POLICY_WAIT_SENT));
    fill_pattern (buf, n * len, 400 + (uint64_t) round);
    memcpy (orig, buf, n * len);
    memset (d, 0, (size_t) n * sizeof *d);
    stats (&a);
    for (i = 0; i < n; ++i) {
      CHECK (stabledif_aio_pwrite (h, buf + i * len, len,
                                   (lba + (uint64_t) i * STABLE_NB) * iv, 0,
                                   on_done, &d[i]) > 0, "write %d", i);
      count_write (STABLE_NB);
    }
    model_put (lba, orig, (uint64_t) n * STABLE_NB);
    /* Memory no write reads: no waiting. */
    OK (stabledif_wait_stable (h, other, iv));
    OK (stabledif_wait_stable (h, buf + n * len, 1));
    calls += 2;
    stats (&b);
    CHECK (b.waits == a.waits, "round %d: waited on memory no write reads",
           round);
    if (round == 0) {
      /* Buffer by buffer, the last submitted first. */
      for (i = n - 1; i >= 0; --i) {
        OK (stabledif_wait_stable (h, buf + i * len + len - 1, 1));
        calls++;
        CHECK (atomic_load (&d[i].ran), "wait: wait_stable of buffer %d "
               "returned before its write completed", i);
      }
    }
    else {
      OK (stabledif_wait_stable (h, buf, n * len));
      calls++;
      for (i = 0; i < n && round == 1; ++i)
        CHECK (atomic_load (&d[i].ran), "wait: wait_stable of all buffers "
               "returned before write %d completed", i);
      if (round == 2)           /* wait-sent: copied out, ours again */
        memset (buf, 0xee, n * len);
    }
    OK (stabledif_wait_all (h));
    stats (&b);
    CHECK (b.wait_calls == a.wait_calls + calls, "round %d: %" PRIu64
           " wait calls counted, made %" PRIu64, round,
           b.wait_calls - a.wait_calls, calls);
    CHECK (b.waits > a.waits && b.wait_ns > a.wait_ns, "round %d: "
           "wait_stable never waited for writes delayed by %d us", round,
           DELAY_US);
    CHECK (b.mismatches == a.mismatches, "round %d: mismatches", round);
    for (i = 0; i < n; ++i)
      CHECK (atomic_load (&d[i].ran) && d[i].error == 0, "round %d: write "
             "%d: %s", round, i, d[i].msg);
    expect_model (h, lba, (uint64_t) n * STABLE_NB, round == 2 ?
                  "wait-sent: the data at submit" : "wait");
  }
  OK (stabledif_set_race_delay_us (h, 0));
  OK (stabledif_set_policy (h, STABLEDIF_POLICY_AUTO));
  free (buf); free (orig); free (other); free (d);
}

/* ---- io: policy none and forensics on every connection ---- */

static pthread_mutex_t foren_lock = PTHREAD_MUTEX_INITIALIZER;
/* What the forensics callback saw, per report (lock). */
static struct {
  int64_t cookie;               /* the write */
  bool rejected;                /* the device failed it */
  size_t nblocks;               /* changed blocks named */
  uint64_t lba;                 /* the first of them */
  uint32_t offset, length;      /* its first changed range */
} foren[STABLEDIF_MAX_CONNECTIONS];
static int foren_calls;         /* reports (lock) */

/* Called on the I/O threads, maybe at the same time: under a lock. */
static void
on_forensics (void *user_data, const struct stabledif_forensics_report *r)
{
  pthread_mutex_lock (&foren_lock);
  if (foren_calls < STABLEDIF_MAX_CONNECTIONS) {
    foren[foren_calls].cookie = r->cookie;
    foren[foren_calls].rejected = r->rejected;
    foren[foren_calls].nblocks = r->nblocks;
    if (r->nblocks > 0) {
      foren[foren_calls].lba = r->blocks[0].lba;
      if (r->blocks[0].nranges > 0) {
        foren[foren_calls].offset = r->blocks[0].ranges[0].offset;
        foren[foren_calls].length = r->blocks[0].ranges[0].length;
      }
    }
  }
  foren_calls++;
  pthread_mutex_unlock (&foren_lock);
}

/* One write per connection under policy none, each buffer changed in
 * one byte right after submit: the device rejects every one (EIO), the
 * error and the report name the changed block and byte, the old data
 * stays. */
static void
io_forensics (void)
{
  const int n = nconns;
  const size_t len = FOREN_NB * iv;
  uint8_t *buf = xmalloc ((size_t) n * len);
  struct done d[STABLEDIF_MAX_CONNECTIONS];
  int64_t cookie[STABLEDIF_MAX_CONNECTIONS];
  struct stabledif_stats a, b;
  int i, k;

  /* Old contents, written safely. */
  fill_pattern (buf, n * len, 500);
  OK (stabledif_pwrite (h, buf, n * len, FOREN_LBA * iv, 0));
  count_write ((uint64_t) n * FOREN_NB);
  model_put (FOREN_LBA, buf, (uint64_t) n * FOREN_NB);

  OK (stabledif_set_forensics_callback (h, on_forensics, NULL));
  OK (stabledif_set_forensics (h, true));
  OK (stabledif_set_unsafe (h, true));
  OK (stabledif_set_policy (h, STABLEDIF_POLICY_NONE));
  OK (stabledif_set_race_delay_us (h, DELAY_US));
  fill_pattern (buf, n * len, 501);
  memset (d, 0, sizeof d);
  stats (&a);
  for (i = 0; i < n; ++i) {
    cookie[i] = stabledif_aio_pwrite (h, buf + i * len, len,
                                      (FOREN_LBA + (uint64_t) i * FOREN_NB)
                                      * iv, 0, on_done, &d[i]);
    CHECK (cookie[i] > 0, "write %d", i);
    count_write (FOREN_NB);
  }
  /* Write i: block i % 2 of it, byte 10 + i. */
  for (i = 0; i < n; ++i)
    buf[i * len + (i % 2) * iv + 10 + i] ^= 0x01;
  OK (stabledif_wait_all (h));

  for (i = 0; i < n; ++i) {
    const uint64_t lba = FOREN_LBA + (uint64_t) i * FOREN_NB + i % 2;
    char want[128];

    CHECK (atomic_load (&d[i].ran) && d[i].error == EIO, "write %d: error "
           "%d, want EIO (%s)", i, d[i].error, d[i].msg);
    snprintf (want, sizeof want, "stabledif_aio_pwrite: write rejected by "
              "device (EIO) at LBA %" PRIu64 ": guard check: ", lba);
    CHECK (strstr (d[i].msg, want) != NULL, "write %d: message \"%s\" "
           "lacks \"%s\"", i, d[i].msg, want);
    snprintf (want, sizeof want, "byte %d (1 byte) changed", 10 + i);
    CHECK (strstr (d[i].msg, want) != NULL, "write %d: message \"%s\" "
           "lacks \"%s\"", i, d[i].msg, want);
    pthread_mutex_lock (&foren_lock);
    for (k = 0; k < foren_calls && foren[k].cookie != cookie[i]; ++k)
      ;
    CHECK (k < foren_calls, "no forensics report for write %d", i);
    CHECK (foren[k].rejected && foren[k].nblocks == 1 &&
           foren[k].lba == lba && foren[k].offset == (uint32_t) (10 + i) &&
           foren[k].length == 1, "write %d: the report names %zu blocks, "
           "LBA %" PRIu64 " bytes %" PRIu32 "+%" PRIu32 ", rejected %d", i,
           foren[k].nblocks, foren[k].lba, foren[k].offset, foren[k].length,
           foren[k].rejected);
    pthread_mutex_unlock (&foren_lock);
  }
  CHECK (foren_calls == n, "%d forensics reports, want %d", foren_calls, n);
  stats (&b);
  CHECK (b.rejected_writes == a.rejected_writes + (uint64_t) n &&
         b.write_errors == a.write_errors + (uint64_t) n &&
         b.mismatches == a.mismatches + (uint64_t) n &&
         b.mismatched_blocks == a.mismatched_blocks + (uint64_t) n,
         "counters: %" PRIu64 " rejected, %" PRIu64 " errors, %" PRIu64
         " mismatches, %" PRIu64 " blocks; want %d more each",
         b.rejected_writes - a.rejected_writes,
         b.write_errors - a.write_errors, b.mismatches - a.mismatches,
         b.mismatched_blocks - a.mismatched_blocks, n);
  /* Nothing of the rejected writes was stored. */
  expect_model (h, FOREN_LBA, (uint64_t) n * FOREN_NB, "after the rejected "
                "writes");

  OK (stabledif_set_race_delay_us (h, 0));
  OK (stabledif_set_policy (h, STABLEDIF_POLICY_AUTO));
  OK (stabledif_set_unsafe (h, false));
  OK (stabledif_set_forensics (h, false));
  free (buf);
}

/* A second handle with one connection reads the whole device: it must
 * hold what the model says (data; the library verifies the PI). */
static void
io_reader (const char *uri)
{
  struct stabledif_handle *h1 = stabledif_create ();
  struct stabledif_stats st;
  uint8_t *all = xmalloc (size);

  CHECK (h1 != NULL, "create");
  OK (stabledif_connect_uri (h1, uri));
  CHECK (stabledif_get_connections (h1) == 1, "default handle: %d "
         "connections", stabledif_get_connections (h1));
  OK (stabledif_pread (h1, all, size, 0, NULL, 0));
  CHECK (memcmp (all, model, size) == 0, "a one-connection handle reads "
         "other data than the %d-connection handle wrote", nconns);
  OK (stabledif_get_stats (h1, &st, sizeof st));
  CHECK (st.read_errors == 0 && st.read_pi_errors == 0, "reader: errors");
  stabledif_close (h1);
  free (all);
}

static void
mode_io (const char *uri, unsigned n, int expect, const char *model_file)
{
  struct stabledif_stats st;
  FILE *fp;

  connect_n (uri, n, expect);
  CHECK (size >= (uint64_t) LAST_LBA * iv, "device too small");
  model = calloc (1, size);
  CHECK (model != NULL, "calloc");

  io_main ();
  io_gate ();
  io_chains ();
  io_stable ();
  io_forensics ();

  /* The counters cover every connection. */
  OK (stabledif_get_stats (h, &st, sizeof st));
  CHECK (st.writes == writes_done && st.write_bytes == write_bytes_done,
         "stats: %" PRIu64 " writes of %" PRIu64 " bytes, did %" PRIu64
         " of %" PRIu64, st.writes, st.write_bytes, writes_done,
         write_bytes_done);
  CHECK (st.reads == reads_done && st.read_bytes == read_bytes_done,
         "stats: %" PRIu64 " reads of %" PRIu64 " bytes, did %" PRIu64
         " of %" PRIu64, st.reads, st.read_bytes, reads_done,
         read_bytes_done);
  CHECK (st.flushes == IO_FLUSHES, "stats: %" PRIu64 " flushes",
         st.flushes);
  CHECK (st.read_errors == 0 && st.read_pi_errors == 0, "read errors");
  CHECK (st.write_errors == (uint64_t) nconns, "write errors %" PRIu64,
         st.write_errors);
  CHECK (stabledif_get_in_flight (h) == 0, "requests left in flight");
  stabledif_close (h);

  io_reader (uri);
  fp = fopen (model_file, "w");
  CHECK (fp != NULL && fwrite (model, 1, size, fp) == size &&
         fclose (fp) == 0, "writing %s", model_file);
  free (model);
  printf ("writes=%" PRIu64 "\n", st.writes);
  printf ("%s: io: %d connections: %" PRIu64 " writes, %" PRIu64
          " reads, %" PRIu64 " flushes: ok\n", progname, nconns, st.writes,
          st.reads, st.flushes);
}

/* ---- log: what the server saw ---- */

/* A set of small numbers (connection ids). */
struct idset {
  unsigned n;                   /* entries */
  unsigned id[64];              /* distinct ids */
};

static void
idset_add (struct idset *s, unsigned id)
{
  unsigned i;

  for (i = 0; i < s->n; ++i)
    if (s->id[i] == id)
      return;
  CHECK (s->n < sizeof s->id / sizeof s->id[0], "too many connections");
  s->id[s->n++] = id;
}

static void
mode_log (const char *log, const char *format, uint32_t interval,
          unsigned expect, uint64_t want_writes)
{
  const struct pi_format *f = pi_format_lookup (format);
  const unsigned nchains = 2 * expect;
  struct idset all = { 0 }, main_ids = { 0 }, chains = { 0 };
  struct idset chain[2 * STABLEDIF_MAX_CONNECTIONS];
  unsigned chain_writes[2 * STABLEDIF_MAX_CONNECTIONS] = { 0 };
  uint64_t ext, writes = 0, flushes = 0, dif_connects = 0;
  char line[4096];
  FILE *fp;
  unsigned k;

  CHECK (f != NULL, "unknown format %s", format);
  CHECK (expect >= 1 && expect <= STABLEDIF_MAX_CONNECTIONS, "expect");
  ext = interval + f->tuple_size;
  memset (chain, 0, sizeof chain);
  fp = fopen (log, "r");
  CHECK (fp != NULL, "opening %s", log);
  while (fgets (line, sizeof line, fp)) {
    const char *p = strstr (line, "connection=");
    unsigned conn;
    uint64_t off, count, lba;
    char word[64];

    if (p == NULL || sscanf (p, "connection=%u %63s", &conn, word) != 2)
      continue;
    if (strcmp (word, "Connect") == 0) {
      /* nbdkit quotes the name only where needed. */
      if (strstr (p, " export=dif ") || strstr (p, " export=\"dif\" "))
        dif_connects++;
      continue;
    }
    if (strcmp (word, "Flush") == 0) {
      flushes++;
      continue;
    }
    if (strcmp (word, "Write") != 0)
      continue;
    CHECK (sscanf (p, "connection=%u Write id=%*u offset=%" SCNx64
                   " count=%" SCNx64, &conn, &off, &count) == 3,
           "unreadable log line: %s", line);
    CHECK (off % ext == 0, "write at offset %" PRIu64, off);
    writes++;
    idset_add (&all, conn);
    lba = off / ext;
    if (lba - MAIN_LBA < MAIN_WRITES * MAIN_NB)  /* below wraps around */
      idset_add (&main_ids, conn);
    if (lba >= CHAIN_LBA && lba < CHAIN_LBA + nchains * CHAIN_SPAN) {
      k = (unsigned) ((lba - CHAIN_LBA) / CHAIN_SPAN);
      idset_add (&chain[k], conn);
      chain_writes[k]++;
    }
  }
  fclose (fp);

  CHECK (main_ids.n == expect, "the %d writes from the main thread came "
         "on %u connections, want %u", MAIN_WRITES, main_ids.n, expect);
  for (k = 0; k < nchains; ++k) {
    CHECK (chain_writes[k] == CHAIN_LEN, "chain %u: %u writes logged", k,
           chain_writes[k]);
    CHECK (chain[k].n == 1, "chain %u: the writes submitted from its "
           "callbacks came on %u connections, want 1", k, chain[k].n);
    idset_add (&chains, chain[k].id[0]);
  }
  CHECK (chains.n == expect, "the %u chains used %u connections, want %u",
         nchains, chains.n, expect);
  CHECK (all.n == expect, "writes on %u connections, want %u", all.n,
         expect);
  CHECK (writes == want_writes, "the server got %" PRIu64 " writes, the "
         "library counted %" PRIu64, writes, want_writes);
  CHECK (flushes == IO_FLUSHES, "the server got %" PRIu64 " flushes for %d "
         "flush calls", flushes, IO_FLUSHES);
  CHECK (dif_connects == expect + 1, "%" PRIu64 " connections to the dif "
         "export, want %u (the handle's) + 1 (the reader's)", dif_connects,
         expect);
  printf ("%s: log: %" PRIu64 " writes on %u connections, %" PRIu64
          " flushes, %" PRIu64 " dif connections: ok\n", progname, writes,
          all.n, flushes, dif_connects);
}

/* ---- api: argument errors, the default, the most connections ---- */

static void
mode_api (const char *uri)
{
  struct stabledif_handle *h2;
  const unsigned nw = 2 * STABLEDIF_MAX_CONNECTIONS;
  uint8_t *w, *r;
  unsigned i;

  FAILS (stabledif_set_connections (NULL, 2), EINVAL,
         "stabledif_set_connections: handle is NULL");
  FAILS (stabledif_get_connections (NULL), EINVAL,
         "stabledif_get_connections: handle is NULL");

  h = stabledif_create ();
  CHECK (h != NULL, "create");
  CHECK (stabledif_get_connections (h) == 1, "default %d",
         stabledif_get_connections (h));
  FAILS (stabledif_set_connections (h, 0), EINVAL,
         "stabledif_set_connections: 0 connections");
  CHECK (strstr (stabledif_get_error (), "1 to 16") != NULL, "the message "
         "does not give the range: %s", stabledif_get_error ());
  FAILS (stabledif_set_connections (h, 17), EINVAL,
         "stabledif_set_connections: 17 connections");
  CHECK (strstr (stabledif_get_error (), "1 to 16") != NULL, "range: %s",
         stabledif_get_error ());
  FAILS (stabledif_set_connections (h, UINT32_MAX), EINVAL,
         "stabledif_set_connections: 4294967295 connections");
  CHECK (stabledif_get_connections (h) == 1, "a refused set changed the "
         "number to %d", stabledif_get_connections (h));
  OK (stabledif_set_connections (h, 3));
  OK (stabledif_set_connections (h, 1));
  CHECK (stabledif_get_connections (h) == 1, "the last set counts");
  OK (stabledif_connect_uri (h, uri));
  CHECK (stabledif_get_connections (h) == 1, "1 asked, %d in use",
         stabledif_get_connections (h));
  FAILS (stabledif_set_connections (h, 2), EISCONN,
         "stabledif_set_connections: ");
  stabledif_close (h);

  /* The most: every connection does I/O. */
  h2 = stabledif_create ();
  CHECK (h2 != NULL, "create");
  OK (stabledif_set_connections (h2, STABLEDIF_MAX_CONNECTIONS));
  OK (stabledif_connect_uri (h2, uri));
  CHECK (stabledif_get_connections (h2) == STABLEDIF_MAX_CONNECTIONS,
         "%d connections in use, want %d", stabledif_get_connections (h2),
         STABLEDIF_MAX_CONNECTIONS);
  iv = (uint32_t) stabledif_get_interval (h2);
  w = xmalloc (nw * iv);
  r = xmalloc (nw * iv);
  fill_pattern (w, nw * iv, 16);
  for (i = 0; i < nw; ++i)
    CHECK (stabledif_aio_pwrite (h2, w + i * iv, iv, i * iv, 0, NULL,
                                 NULL) > 0, "write %u", i);
  OK (stabledif_wait_all (h2));
  OK (stabledif_flush (h2, 0));
  for (i = 0; i < nw; ++i)
    CHECK (stabledif_aio_pread (h2, r + i * iv, iv, i * iv, NULL, 0, NULL,
                                NULL) > 0, "read %u", i);
  OK (stabledif_wait_all (h2));
  CHECK (memcmp (w, r, nw * iv) == 0, "16 connections: data differs");
  stabledif_close (h2);
  free (w); free (r);
  printf ("%s: api: ok\n", progname);
}

/* ---- refused: the second connection is refused ---- */

static void
mode_refused (const char *uri, unsigned n)
{
  uint8_t *b;
  char want[64];
  const char *m;
  int tries, r = -1;

  h = stabledif_create ();
  CHECK (h != NULL, "create");
  OK (stabledif_set_connections (h, n));
  CHECK (stabledif_connect_uri (h, uri) == -1, "connect with %u "
         "connections succeeded on a server that takes one client", n);
  m = stabledif_get_error ();
  snprintf (want, sizeof want, "stabledif_connect_uri: connection 2 of %u: ",
            n);
  CHECK (m != NULL && strstr (m, want) != NULL, "the message does not "
         "name the connection (\"%s\"): %s", want, m ? m : "(none)");
  CHECK (stabledif_get_errno () != 0, "no errno");
  printf ("refused: %s (errno %d)\n", m, stabledif_get_errno ());

  /* Unusable, and says so; close is clean. */
  FAILS (stabledif_connect_uri (h, uri), EISCONN, "stabledif_connect_uri: ");
  FAILS (stabledif_set_connections (h, 1), EISCONN,
         "stabledif_set_connections: ");
  b = xmalloc (4096);
  memset (b, 0, 4096);
  FAILS (stabledif_pwrite (h, b, 512, 0, 0), ENOTCONN,
         "stabledif_pwrite: not connected");
  FAILS (stabledif_flush (h, 0), ENOTCONN, "not connected");
  stabledif_close (h);

  /* One connection is within the limit: the server works.  The limit
   * counts the closed handle's connection until nbdkit has noticed the
   * close, so a fresh handle tries a bounded number of times. */
  for (tries = 0; tries < 100 && r == -1; ++tries) {
    h = stabledif_create ();
    CHECK (h != NULL, "create");
    r = stabledif_connect_uri (h, uri);
    if (r == -1) {
      stabledif_close (h);
      usleep (50000);
    }
  }
  CHECK (r == 0, "one connection was refused too");
  CHECK (stabledif_get_connections (h) == 1, "connections");
  iv = (uint32_t) stabledif_get_interval (h);
  fill_pattern (b, iv, 6);
  OK (stabledif_pwrite (h, b, iv, 0, 0));
  stabledif_close (h);
  free (b);
  printf ("%s: refused: ok\n", progname);
}

/* ---- mismatch: a further connection describes another disk ---- */

static void
mode_mismatch (const char *uri, unsigned n, unsigned which)
{
  char want[128];

  h = stabledif_create ();
  CHECK (h != NULL, "create");
  OK (stabledif_set_connections (h, n));
  snprintf (want, sizeof want, "stabledif_connect_uri: connection %u of "
            "%u: the server describes another disk", which, n);
  FAILS (stabledif_connect_uri (h, uri), EPROTO, want);
  printf ("mismatch: %s\n", stabledif_get_error ());
  FAILS (stabledif_connect_uri (h, uri), EISCONN, "stabledif_connect_uri");
  stabledif_close (h);
  printf ("%s: mismatch: ok\n", progname);
}

static void
mode_describe (const char *uri)
{
  h = stabledif_create ();
  CHECK (h != NULL, "create");
  OK (stabledif_connect_uri (h, uri));
  printf ("%s\n%" PRIu64 "\n%d\n", stabledif_get_profile (h),
          (uint64_t) stabledif_get_size (h) / stabledif_get_interval (h) *
          (uint64_t) (stabledif_get_interval (h) +
                      stabledif_get_tuple_size (h)),
          (int) (stabledif_get_interval (h) + stabledif_get_tuple_size (h)));
  stabledif_close (h);
}

/* A buffer of NBLOCKS intervals of pattern SEED, after writing its first
 * block to LBAs 0 and 1 of the handle's two connections (the main
 * thread's requests take turns): both work before the test breaks one. */
static uint8_t *
both_work (size_t nblocks, uint64_t seed)
{
  uint8_t *b = xmalloc (nblocks * iv);

  fill_pattern (b, nblocks * iv, seed);
  OK (stabledif_pwrite (h, b, iv, 0, 0));
  OK (stabledif_pwrite (h, b, iv, iv, 0));
  return b;
}

/* ---- killed: the server dies with requests on both connections ---- */

static void
mode_killed (const char *uri, const char *pidfile)
{
  enum { NREQ = 7 };
  struct done d[NREQ];
  uint8_t *b;
  FILE *fp;
  long pid;
  int i;

  connect_n (uri, 2, 2);
  b = both_work (8, 8);

  /* In flight on both (main's requests take turns), held back by the
   * race delay, when the server dies. */
  memset (d, 0, sizeof d);
  OK (stabledif_set_race_delay_us (h, 200000));
  for (i = 0; i < 4; ++i)
    OK (stabledif_aio_pwrite (h, b + i * iv, iv, (8 + i) * iv, 0, on_done,
                              &d[i]));
  OK (stabledif_aio_pread (h, b + 4 * iv, iv, 0, NULL, 0, on_done, &d[4]));
  OK (stabledif_aio_pread (h, b + 5 * iv, iv, iv, NULL, 0, on_done, &d[5]));
  OK (stabledif_aio_flush (h, 0, on_done, &d[6]));
  CHECK (stabledif_get_in_flight (h) == NREQ, "in flight");

  fp = fopen (pidfile, "r");
  CHECK (fp && fscanf (fp, "%ld", &pid) == 1, "reading %s", pidfile);
  fclose (fp);
  CHECK (kill ((pid_t) pid, SIGKILL) == 0, "kill %ld", pid);

  OK (stabledif_wait_all (h));
  for (i = 0; i < NREQ; ++i)
    CHECK (atomic_load (&d[i].ran) && d[i].error != 0, "request %d: error "
           "%d", i, d[i].error);
  printf ("in flight at the loss: %s\n", d[0].msg);
  CHECK (stabledif_get_in_flight (h) == 0, "requests left in flight");

  FAILS (stabledif_pwrite (h, b, iv, 0, 0), ENOTCONN, "stabledif_pwrite: ");
  CHECK (strstr (stabledif_get_error (), "lost") != NULL, "message: %s",
         stabledif_get_error ());
  FAILS (stabledif_aio_pread (h, b, iv, 0, NULL, 0, NULL, NULL), ENOTCONN,
         "stabledif_aio_pread: ");
  FAILS (stabledif_aio_flush (h, 0, NULL, NULL), ENOTCONN,
         "stabledif_aio_flush: ");
  OK (stabledif_wait_stable (h, b, 8 * iv));
  OK (stabledif_wait_all (h));
  stabledif_close (h);
  free (b);
  printf ("%s: killed: ok\n", progname);
}

/* ---- cut: one connection of two lost, through a relay ---- */

#define RELAY_MAX STABLEDIF_MAX_CONNECTIONS

/* A relay between Unix sockets: every connection accepted on LFD gets
 * its own connection to the server; one thread copies bytes both ways
 * and closes a pair when either side ends. */
struct relay {
  int lfd;                      /* listening socket */
  int stop[2];                  /* pipe: a byte stops the thread */
  struct sockaddr_un server;    /* where the server listens */
  pthread_mutex_t lock;         /* protects cfd, sfd, npairs */
  int cfd[RELAY_MAX];           /* client side of pair i, -1 once closed */
  int sfd[RELAY_MAX];           /* server side of pair i, -1 once closed */
  unsigned npairs;              /* pairs accepted so far */
  pthread_t thread;             /* the copying thread */
};

/* Send all of BUF to FD; -1 if the peer is gone. */
static int
relay_send (int fd, const uint8_t *buf, size_t len)
{
  while (len > 0) {
    ssize_t n = send (fd, buf, len, MSG_NOSIGNAL);
    if (n == -1 && errno == EINTR)
      continue;
    if (n <= 0)
      return -1;
    buf += n;
    len -= (size_t) n;
  }
  return 0;
}

/* Close pair I (relay thread only; lock held). */
static void
relay_close_pair (struct relay *r, unsigned i)
{
  if (r->cfd[i] >= 0)
    close (r->cfd[i]);
  if (r->sfd[i] >= 0)
    close (r->sfd[i]);
  r->cfd[i] = r->sfd[i] = -1;
}

/* Accept one client and connect it to the server (relay thread). */
static void
relay_accept (struct relay *r)
{
  int c = accept (r->lfd, NULL, NULL), s;

  if (c == -1)
    return;
  s = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s == -1 || connect (s, (struct sockaddr *) &r->server,
                          sizeof r->server) == -1) {
    fprintf (stderr, "%s: relay: connecting to the server: %s\n", progname,
             strerror (errno));
    if (s >= 0)
      close (s);
    close (c);
    return;
  }
  pthread_mutex_lock (&r->lock);
  if (r->npairs < RELAY_MAX) {
    r->cfd[r->npairs] = c;
    r->sfd[r->npairs] = s;
    r->npairs++;
    c = s = -1;
  }
  pthread_mutex_unlock (&r->lock);
  if (c >= 0) {
    close (c);
    close (s);
  }
}

static void *
relay_thread (void *arg)
{
  struct relay *r = arg;
  uint8_t buf[65536];

  for (;;) {
    struct pollfd p[2 + 2 * RELAY_MAX];
    unsigned pair[2 + 2 * RELAY_MAX];
    nfds_t n = 2, j;
    unsigned i;

    p[0].fd = r->stop[0];
    p[1].fd = r->lfd;
    pthread_mutex_lock (&r->lock);
    for (i = 0; i < r->npairs; ++i)
      if (r->cfd[i] >= 0) {
        pair[n] = i;
        p[n++].fd = r->cfd[i];
        pair[n] = i;
        p[n++].fd = r->sfd[i];
      }
    pthread_mutex_unlock (&r->lock);
    for (j = 0; j < n; ++j) {
      p[j].events = POLLIN;
      p[j].revents = 0;
    }
    if (poll (p, n, -1) == -1) {
      if (errno == EINTR)
        continue;
      break;
    }
    if (p[0].revents)
      break;
    if (p[1].revents & POLLIN)
      relay_accept (r);
    for (j = 2; j < n; ++j) {
      ssize_t got;
      int to;

      if (p[j].revents == 0)
        continue;
      pthread_mutex_lock (&r->lock);
      i = pair[j];
      if (r->cfd[i] < 0) {      /* closed with its partner already */
        pthread_mutex_unlock (&r->lock);
        continue;
      }
      to = p[j].fd == r->cfd[i] ? r->sfd[i] : r->cfd[i];
      got = read (p[j].fd, buf, sizeof buf);
      if (got <= 0 || relay_send (to, buf, (size_t) got) == -1)
        relay_close_pair (r, i);
      pthread_mutex_unlock (&r->lock);
    }
  }
  pthread_mutex_lock (&r->lock);
  for (unsigned i = 0; i < r->npairs; ++i)
    relay_close_pair (r, i);
  pthread_mutex_unlock (&r->lock);
  return NULL;
}

/* Listen on PATH, relaying to the server at SERVER. */
static void
relay_start (struct relay *r, const char *path, const char *server)
{
  struct sockaddr_un a = { .sun_family = AF_UNIX };

  memset (r, 0, sizeof *r);
  pthread_mutex_init (&r->lock, NULL);
  CHECK (strlen (path) < sizeof a.sun_path &&
         strlen (server) < sizeof a.sun_path, "socket path too long");
  r->server.sun_family = AF_UNIX;
  strcpy (r->server.sun_path, server);
  strcpy (a.sun_path, path);
  r->lfd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  CHECK (r->lfd >= 0, "socket: %s", strerror (errno));
  CHECK (bind (r->lfd, (struct sockaddr *) &a, sizeof a) == 0 &&
         listen (r->lfd, 16) == 0, "relay on %s: %s", path,
         strerror (errno));
  CHECK (pipe (r->stop) == 0, "pipe");
  CHECK (pthread_create (&r->thread, NULL, relay_thread, r) == 0,
         "pthread_create");
}

/* Cut pair K: both sides see the connection end at once. */
static void
relay_cut (struct relay *r, unsigned k)
{
  pthread_mutex_lock (&r->lock);
  CHECK (k < r->npairs && r->cfd[k] >= 0, "no connection %u to cut", k);
  shutdown (r->cfd[k], SHUT_RDWR);
  shutdown (r->sfd[k], SHUT_RDWR);
  pthread_mutex_unlock (&r->lock);
}

static void
relay_stop (struct relay *r, const char *path)
{
  CHECK (write (r->stop[1], "x", 1) == 1, "stopping the relay");
  pthread_join (r->thread, NULL);
  close (r->stop[0]);
  close (r->stop[1]);
  close (r->lfd);
  unlink (path);
  pthread_mutex_destroy (&r->lock);
}

static void
mode_cut (const char *server, const char *path, unsigned k)
{
  enum { NREQ = 4 };
  struct relay relay;
  struct done d[NREQ];
  char uri[256], want[64];
  uint8_t *b, *back;
  unsigned npairs;
  int i;

  relay_start (&relay, path, server);
  snprintf (uri, sizeof uri, "nbd+unix:///?socket=%s", path);
  connect_n (uri, 2, 2);
  pthread_mutex_lock (&relay.lock);
  npairs = relay.npairs;
  pthread_mutex_unlock (&relay.lock);
  CHECK (npairs == 2, "the handle made %u connections through the relay, "
         "want 2", npairs);
  b = both_work (4, 9);

  /* Queued on both connections (main's requests take turns), held
   * back by the race delay; then connection K alone ends. */
  memset (d, 0, sizeof d);
  OK (stabledif_set_race_delay_us (h, 500000));
  OK (stabledif_aio_pwrite (h, b, iv, 2 * iv, 0, on_done, &d[0]));
  OK (stabledif_aio_pwrite (h, b + iv, iv, 3 * iv, 0, on_done, &d[1]));
  OK (stabledif_aio_pread (h, b + 2 * iv, iv, 0, NULL, 0, on_done, &d[2]));
  OK (stabledif_aio_flush (h, 0, on_done, &d[3]));
  relay_cut (&relay, k);

  /* The handle is dead: what was queued on either connection fails. */
  OK (stabledif_wait_all (h));
  snprintf (want, sizeof want, "connection %u of 2 to the device lost", k + 1);
  for (i = 0; i < NREQ; ++i) {
    CHECK (atomic_load (&d[i].ran), "request %d: no callback", i);
    CHECK (d[i].error == ENOTCONN, "request %d: error %d, want ENOTCONN "
           "(%s)", i, d[i].error, d[i].msg);
    CHECK (strstr (d[i].msg, want) != NULL, "request %d: message \"%s\" "
           "lacks \"%s\"", i, d[i].msg, want);
  }
  printf ("queued at the loss: %s\n", d[0].msg);
  CHECK (stabledif_get_in_flight (h) == 0, "requests left in flight");

  /* And new ones, whichever connection they would take. */
  for (i = 0; i < 2; ++i) {
    FAILS (stabledif_pwrite (h, b, iv, 0, 0), ENOTCONN, want);
    FAILS (stabledif_aio_pread (h, b, iv, 0, NULL, 0, NULL, NULL), ENOTCONN,
           want);
  }
  FAILS (stabledif_flush (h, 0), ENOTCONN, want);
  OK (stabledif_wait_stable (h, b, 4 * iv));
  OK (stabledif_wait_all (h));
  stabledif_close (h);
  relay_stop (&relay, path);

  /* Nothing of the failed writes was stored: a fresh handle, straight
   * to the server, reads LBA 0-1 as written before the cut and LBA 2-3
   * as never written (zeros, PI escaped), with no PI error. */
  snprintf (uri, sizeof uri, "nbd+unix:///?socket=%s", server);
  connect_n (uri, 1, 1);
  back = xmalloc (4 * iv);
  memset (back, 0xee, 4 * iv);
  OK (stabledif_pread (h, back, 4 * iv, 0, NULL, 0));
  CHECK (memcmp (back, b, iv) == 0 && memcmp (back + iv, b, iv) == 0,
         "LBA 0-1 do not read back as written before the cut");
  for (i = 2 * (int) iv; i < 4 * (int) iv; i++)
    CHECK (back[i] == 0, "byte %d reads 0x%02x: a write that failed at the "
           "cut was stored", i, back[i]);
  stabledif_close (h);
  free (back);
  free (b);
  printf ("%s: cut connection %u of 2: ok\n", progname, k + 1);
}

int
main (int argc, char *argv[])
{
  const char *mode = argc >= 3 ? argv[2] : "";

  progname = "test-client-multiconn";
  if (strcmp (mode, "io") == 0 && argc == 6)
    mode_io (argv[1], (unsigned) atoi (argv[3]), atoi (argv[4]), argv[5]);
  else if (strcmp (mode, "log") == 0 && argc == 8)
    mode_log (argv[3], argv[4], (uint32_t) atoi (argv[5]),
              (unsigned) atoi (argv[6]), strtoull (argv[7], NULL, 10));
  else if (strcmp (mode, "api") == 0 && argc == 3)
    mode_api (argv[1]);
  else if (strcmp (mode, "refused") == 0 && argc == 4) {
    alarm (60);
    mode_refused (argv[1], (unsigned) atoi (argv[3]));
  }
  else if (strcmp (mode, "mismatch") == 0 && argc == 5)
    mode_mismatch (argv[1], (unsigned) atoi (argv[3]),
                   (unsigned) atoi (argv[4]));
  else if (strcmp (mode, "describe") == 0 && argc == 3)
    mode_describe (argv[1]);
  else if (strcmp (mode, "killed") == 0 && argc == 4) {
    alarm (60);
    mode_killed (argv[1], argv[3]);
  }
  else if (strcmp (mode, "cut") == 0 && argc == 5) {
    alarm (60);
    mode_cut (argv[1], argv[3], (unsigned) atoi (argv[4]));
  }
  else {
    fprintf (stderr, "usage: %s URI io N EXPECT MODEL-FILE\n"
             "       %s - log LOGFILE FORMAT INTERVAL EXPECT WRITES\n"
             "       %s URI api|describe\n"
             "       %s URI refused N\n"
             "       %s URI mismatch N WHICH\n"
             "       %s URI killed PIDFILE\n"
             "       %s SOCKET cut RELAY-SOCKET K\n", progname, progname,
             progname, progname, progname, progname, progname);
    exit (EXIT_FAILURE);
  }
  return EXIT_SUCCESS;
}
