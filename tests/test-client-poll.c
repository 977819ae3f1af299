/* SPDX-License-Identifier: BSD-3-Clause */
/* stabledif: stabledif_poll, a caller's thread that waits for its
 * completions by reading the replies itself, against the real plugin
 * (test-client-poll.sh).  Linked with the library's internals: the I/O
 * thread's poll function (struct stabledif_handle, poll) is replaced by
 * one that can park it, so that which thread reads a reply is known.
 *
 *   test-client-poll URI basic
 *   test-client-poll URI stalled
 *   test-client-poll URI mixed
 *   test-client-poll URI lost
 *   test-client-poll URI lease
 *
 * basic: stabledif_poll on a handle not connected fails with ENOTCONN,
 * a timeout below -1 with EINVAL; with nothing in flight a poll of 0 ms
 * and one of 20 ms return 0.  With the I/O thread parked in its poll,
 * this thread's writes and then reads complete through stabledif_poll:
 * their callbacks run on this thread, inside the poll, which returns
 * how many completed; from a callback, stabledif_poll and a synchronous
 * write fail with EDEADLK.  The data reads back.
 *
 * stalled: the server holds every write (nbdkit's delay filter): polls
 * of 0 and 50 ms return 0 with the write in flight, then a poll without
 * a limit returns it completed, its callback on this thread.
 *
 * mixed: two threads submit writes while this thread and another one
 * poll: every request completes exactly once, each callback on one of
 * the polling threads or on the I/O thread, and the data reads back.
 *
 * lost: writes held by the server, then the socket is shut down under
 * libnbd while this thread polls: every write fails with ENOTCONN
 * exactly once, the polls return no more than were submitted, then
 * stabledif_poll fails with ENOTCONN; close returns.
 *
 * lease: after a poll, the reply of a write nobody polls for waits for
 * the next poller while the lease runs (made an hour long here: 200 ms
 * later the write has not completed); stabledif_wait_all, a synchronous
 * write and stabledif_wait_stable under policy wait each end the lease
 * and return (an alarm fails the test otherwise), the write completed
 * on the I/O thread; with a 2 s lease, a write nobody polls for
 * completes on the I/O thread once it runs out; a 200 ms lease renewed
 * every 10 ms keeps the I/O thread in its leased poll, idle, for a
 * second, though the test holds the connection as a poller would (an
 * I/O thread that came out would wait for it), and a write completes on
 * the I/O thread once the renewals stop.  Every write reads back.
 *
 * pretake: the last write in flight (held by the server) completes on
 * the I/O thread while stabledif_poll is between its look at the
 * completions and its take of the connection (a test hook holds it
 * there): the poll returns 1 rather than wait for ever (an alarm fails
 * the test); the write reads back.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdint.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "test-client-util.h"
#include "libstabledif-internal.h"

/* Generous bound on every wait of the test: a hang fails instead. */
#define WAIT_SECONDS 60

/* Requests per group. */
#define REQUESTS 16

static struct stabledif_handle *h;
static uint32_t iv;

/* Set on the threads of this test (which may poll: the hook below parks
 * only the I/O thread). */
static _Thread_local bool test_thread;

/* ---- the poll hook --------------------------------------------------- */

static atomic_bool hook_armed;  /* park the I/O thread at its next poll */
static sem_t hook_parked;       /* posted when the I/O thread is parked */
static sem_t hook_release;      /* posted by the test to let it go on */
static sem_t hook_leased;       /* posted when the I/O thread begins a
                                   poll that leaves the socket to pollers
                                   (its wake-up pipe alone, a timeout) */

/* The I/O thread's poll: parks once when armed at a poll that waits
 * without a limit (nothing to do), then ppoll; says when a poll leaves
 * the socket to pollers. */
static int
hook_poll (struct pollfd *fds, nfds_t nfds, const struct timespec *timeout,
           const sigset_t *sigmask)
{
  if (!test_thread && nfds == 1 && timeout != NULL)
    sem_post (&hook_leased);
  if (!test_thread && timeout == NULL &&
      atomic_exchange (&hook_armed, false)) {
    sem_post (&hook_parked);
    while (sem_wait (&hook_release) == -1 && errno == EINTR)
      ;
  }
  return ppoll (fds, nfds, timeout, sigmask);
}

/* ---- completions recorded ------------------------------------------- */

/* Which thread ran a callback. */
enum where {
  ON_NONE,                      /* not run */
  ON_POLLER,                    /* a test thread inside stabledif_poll */
  ON_IO_THREAD,                 /* the connection's I/O thread */
  ON_OTHER,                     /* anywhere else: wrong */
};

/* One request's completion. */
struct rec {
  atomic_uint runs;             /* times its callback ran */
  int error;                    /* its error */
  enum where where;             /* the thread of the last run */
  pthread_t thread;             /* that thread */
  int poll_rc, poll_errno;      /* stabledif_poll from the callback
                                   (basic), else 0 */
  int sync_rc, sync_errno;      /* stabledif_pwrite from the callback
                                   (basic), else 0 */
};

static struct rec recs[4 * REQUESTS];
static atomic_uint completions;   /* callbacks run in all */
static atomic_bool try_from_callback; /* basic: call poll and pwrite */
static _Thread_local bool polling;  /* this thread is in stabledif_poll */

static void
on_rec (void *user_data, int error)
{
  struct rec *r = user_data;

  r->error = error;
  r->thread = pthread_self ();
  r->where = polling ? ON_POLLER
    : pthread_equal (r->thread, h->conns[0].thread) ? ON_IO_THREAD
    : ON_OTHER;
  if (atomic_load (&try_from_callback)) {
    static uint8_t blk[4096];

    r->poll_rc = stabledif_poll (h, 0);
    r->poll_errno = stabledif_get_errno ();
    r->sync_rc = stabledif_pwrite (h, blk, iv, 0, 0);
    r->sync_errno = stabledif_get_errno ();
  }
  atomic_fetch_add (&r->runs, 1);
  atomic_fetch_add (&completions, 1);
}

/* Poll until N callbacks in all have run, at most WAIT_SECONDS; returns
 * the sum of what the polls returned. */
static unsigned
poll_until (unsigned n)
{
  time_t end = time (NULL) + WAIT_SECONDS;
  unsigned sum = 0;

  while (atomic_load (&completions) < n) {
    int r;

    CHECK (time (NULL) < end, "%u of %u requests completed after %d s",
           atomic_load (&completions), n, WAIT_SECONDS);
    polling = true;
    r = stabledif_poll (h, 1000);
    polling = false;
    CHECK (r >= 0, "stabledif_poll failed");
    sum += (unsigned) r;
  }
  return sum;
}

/* ---- basic ---------------------------------------------------------- */

static void
basic (const char *uri)
{
  struct stabledif_handle *u = stabledif_create ();
  uint8_t *w = xmalloc ((size_t) REQUESTS * iv);
  uint8_t *rd = xmalloc ((size_t) REQUESTS * iv);
  pthread_t self = pthread_self ();
  unsigned i, sum;

  (void) uri;
  CHECK (u != NULL, "stabledif_create");
  FAILS (stabledif_poll (u, 0), ENOTCONN, "stabledif_poll");
  stabledif_close (u);
  FAILS (stabledif_poll (h, -2), EINVAL, "timeout_ms -2");
  CHECK (stabledif_poll (h, 0) == 0, "poll 0 with nothing in flight");
  CHECK (stabledif_poll (h, 20) == 0, "poll 20 with nothing in flight");

  fill_pattern (w, (size_t) REQUESTS * iv, 21);
  memset (rd, 0, (size_t) REQUESTS * iv);
  atomic_store (&hook_armed, true);
  /* A write lets the I/O thread round its loop into the parking poll
   * (its reply wakes it, whoever reads it).  Polled for: if the I/O
   * thread parks before the reply comes, this thread reads it. */
  {
    struct done d = { .ran = false };
    time_t end = time (NULL) + WAIT_SECONDS;

    OK (stabledif_aio_pwrite (h, w, iv, 0, 0, on_done, &d));
    while (!atomic_load (&d.ran)) {
      CHECK (time (NULL) < end, "the first write did not complete");
      OK (stabledif_poll (h, 1000));
    }
    CHECK (d.error == 0, "the first write failed: %s", d.msg);
  }
  sem_wait_bounded (&hook_parked, "the I/O thread parked", WAIT_SECONDS);
  atomic_store (&try_from_callback, true);
  for (i = 0; i < REQUESTS; i++)
    OK (stabledif_aio_pwrite (h, w + (size_t) i * iv, iv, (uint64_t) i * iv,
                              0, on_rec, &recs[i]));
  sum = poll_until (REQUESTS);
  atomic_store (&try_from_callback, false);
  CHECK (sum == REQUESTS, "the polls returned %u completions, not %u",
         sum, REQUESTS);
  for (i = 0; i < REQUESTS; i++)
    OK (stabledif_aio_pread (h, rd + (size_t) i * iv, iv, (uint64_t) i * iv,
                             NULL, 0, on_rec, &recs[REQUESTS + i]));
  sum = poll_until (2 * REQUESTS);
  CHECK (sum == REQUESTS, "the polls returned %u read completions, not %u",
         sum, REQUESTS);
  for (i = 0; i < 2 * REQUESTS; i++) {
    struct rec *r = &recs[i];

    CHECK (atomic_load (&r->runs) == 1 && r->error == 0,
           "request %u: callback ran %u times, error %d", i,
           atomic_load (&r->runs), r->error);
    CHECK (r->where == ON_POLLER && pthread_equal (r->thread, self),
           "request %u: callback ran on another thread than the poller's "
           "(%d)", i, (int) r->where);
    if (i < REQUESTS) {
      CHECK (r->poll_rc == -1 && r->poll_errno == EDEADLK,
             "stabledif_poll from a callback: %d, errno %d", r->poll_rc,
             r->poll_errno);
      CHECK (r->sync_rc == -1 && r->sync_errno == EDEADLK,
             "stabledif_pwrite from a callback on the poller: %d, errno %d",
             r->sync_rc, r->sync_errno);
    }
  }
  CHECK (memcmp (w, rd, (size_t) REQUESTS * iv) == 0,
         "the blocks read back differ from those written");
  sem_post (&hook_release);
  OK (stabledif_wait_all (h));
  printf ("basic: %u writes and %u reads completed on the polling thread\n",
          REQUESTS, REQUESTS);
  free (w);
  free (rd);
}

/* ---- stalled -------------------------------------------------------- */

static void
stalled (void)
{
  uint8_t *b = xmalloc (iv);
  int r;

  fill_pattern (b, iv, 22);
  OK (stabledif_aio_pwrite (h, b, iv, 0, 0, on_rec, &recs[0]));
  polling = true;
  CHECK (stabledif_poll (h, 0) == 0, "poll 0 with a held write");
  CHECK (stabledif_poll (h, 50) == 0, "poll 50 with a held write");
  CHECK (atomic_load (&recs[0].runs) == 0, "the held write completed");
  r = stabledif_poll (h, -1);
  polling = false;
  CHECK (r == 1, "poll without a limit returned %d, not 1", r);
  CHECK (atomic_load (&recs[0].runs) == 1 && recs[0].error == 0,
         "held write: ran %u, error %d", atomic_load (&recs[0].runs),
         recs[0].error);
  CHECK (recs[0].where == ON_POLLER || recs[0].where == ON_IO_THREAD,
         "held write: callback on a thread of its own (%d)",
         (int) recs[0].where);
  printf ("stalled: polls of 0 and 50 ms timed out, then the write "
          "completed (%s)\n",
          recs[0].where == ON_POLLER ? "on the poller" : "on the I/O thread");
  free (b);
}

/* ---- mixed ---------------------------------------------------------- */

static uint8_t *mixed_data;

/* Submit REQUESTS writes of group ARG (0 or 1). */
static void *
submitter (void *arg)
{
  unsigned g = (unsigned) (uintptr_t) arg, i;

  test_thread = true;
  for (i = 0; i < REQUESTS; i++) {
    unsigned k = g * REQUESTS + i;
    OK (stabledif_aio_pwrite (h, mixed_data + (size_t) k * iv, iv,
                              (uint64_t) k * iv, 0, on_rec, &recs[k]));
  }
  return NULL;
}

static void *
second_poller (void *arg)
{
  (void) arg;
  test_thread = true;
  poll_until (2 * REQUESTS);
  return NULL;
}

static void
mixed (void)
{
  uint8_t *rd = xmalloc ((size_t) 2 * REQUESTS * iv);
  pthread_t t[3];
  unsigned i, on_poller = 0;

  mixed_data = xmalloc ((size_t) 2 * REQUESTS * iv);
  fill_pattern (mixed_data, (size_t) 2 * REQUESTS * iv, 23);
  CHECK (pthread_create (&t[0], NULL, second_poller, NULL) == 0, "create");
  CHECK (pthread_create (&t[1], NULL, submitter, (void *) 0) == 0, "create");
  CHECK (pthread_create (&t[2], NULL, submitter, (void *) 1) == 0, "create");
  poll_until (2 * REQUESTS);
  for (i = 0; i < 3; i++)
    pthread_join (t[i], NULL);
  OK (stabledif_wait_all (h));
  CHECK (atomic_load (&completions) == 2 * REQUESTS, "%u callbacks for %u "
         "requests", atomic_load (&completions), 2 * REQUESTS);
  for (i = 0; i < 2 * REQUESTS; i++) {
    CHECK (atomic_load (&recs[i].runs) == 1 && recs[i].error == 0,
           "request %u: ran %u times, error %d", i,
           atomic_load (&recs[i].runs), recs[i].error);
    CHECK (recs[i].where == ON_POLLER || recs[i].where == ON_IO_THREAD,
           "request %u: callback on a thread that neither polls nor is "
           "the I/O thread", i);
    on_poller += recs[i].where == ON_POLLER;
  }
  OK (stabledif_pread (h, rd, (size_t) 2 * REQUESTS * iv, 0, NULL, 0));
  CHECK (memcmp (rd, mixed_data, (size_t) 2 * REQUESTS * iv) == 0,
         "the blocks read back differ from those written");
  printf ("mixed: %u writes from two threads, %u completed on a poller\n",
          2 * REQUESTS, on_poller);
  free (rd);
  free (mixed_data);
}

/* ---- lost ----------------------------------------------------------- */

/* Shut the socket of connection 0 down after 100 ms. */
static void *
shutter (void *arg)
{
  const struct timespec pause = { .tv_sec = 0, .tv_nsec = 100000000 };
  int fd = nbd_aio_get_fd (h->conns[0].nbd);

  (void) arg;
  nanosleep (&pause, NULL);
  CHECK (fd >= 0 && shutdown (fd, SHUT_RDWR) == 0, "shutdown of socket %d",
         fd);
  return NULL;
}

static void
lost (void)
{
  uint8_t *b = xmalloc (iv);
  time_t end = time (NULL) + WAIT_SECONDS;
  unsigned i, sum = 0;
  pthread_t t;
  int r;

  fill_pattern (b, iv, 24);
  for (i = 0; i < REQUESTS; i++)
    OK (stabledif_aio_pwrite (h, b, iv, (uint64_t) i * iv, 0, on_rec,
                              &recs[i]));
  CHECK (pthread_create (&t, NULL, shutter, NULL) == 0, "create");
  polling = true;
  while ((r = stabledif_poll (h, 1000)) >= 0) {
    sum += (unsigned) r;
    CHECK (time (NULL) < end, "no ENOTCONN from stabledif_poll after %d s",
           WAIT_SECONDS);
  }
  polling = false;
  pthread_join (t, NULL);
  CHECK (stabledif_get_errno () == ENOTCONN &&
         strstr (stabledif_get_error (), "connection to the device lost"),
         "stabledif_poll after the loss: errno %d", stabledif_get_errno ());
  CHECK (sum <= REQUESTS, "the polls returned %u completions of %u "
         "requests", sum, REQUESTS);
  CHECK (atomic_load (&completions) == REQUESTS, "%u callbacks for %u "
         "requests", atomic_load (&completions), REQUESTS);
  for (i = 0; i < REQUESTS; i++)
    CHECK (atomic_load (&recs[i].runs) == 1 && recs[i].error == ENOTCONN,
           "request %u: ran %u times, error %d", i,
           atomic_load (&recs[i].runs), recs[i].error);
  FAILS (stabledif_poll (h, 0), ENOTCONN, "connection to the device lost");
  printf ("lost: %u writes failed with ENOTCONN once each (%u counted by "
          "the polls)\n", REQUESTS, sum);
  stabledif_close (h);          /* must not hang */
  h = NULL;
  free (b);
}

/* ---- lease ---------------------------------------------------------- */

/* The callback of REC has not run 200 ms after it was submitted. */
static void
still_waiting (struct rec *rec, const char *what)
{
  const struct timespec pause = { .tv_sec = 0, .tv_nsec = 200000000 };

  nanosleep (&pause, NULL);
  CHECK (atomic_load (&rec->runs) == 0, "%s: completed while nobody "
         "polled and the pollers' lease ran", what);
}

/* REC's callback ran once, without error, on the I/O thread. */
static void
done_on_io_thread (struct rec *rec, const char *what)
{
  CHECK (atomic_load (&rec->runs) == 1 && rec->error == 0 &&
         rec->where == ON_IO_THREAD, "%s: ran %u times, error %d, on %s",
         what, atomic_load (&rec->runs), rec->error,
         rec->where == ON_POLLER ? "a poller" : "another thread");
}

/* A write of BLK to block 0 that nobody polls for completes on the I/O
 * thread (REC records it), within WAIT_SECONDS: the lease has run out or
 * is about to (WHAT says which). */
static void
write_completes_unpolled (uint8_t *blk, struct rec *rec, const char *what)
{
  const struct timespec ms = { .tv_sec = 0, .tv_nsec = 1000000 };
  time_t end;

  OK (stabledif_aio_pwrite (h, blk, iv, 0, 0, on_rec, rec));
  end = time (NULL) + WAIT_SECONDS;
  while (atomic_load (&rec->runs) == 0) {
    CHECK (time (NULL) < end, "%s: a write nobody polled for did not "
           "complete within %d s", what, WAIT_SECONDS);
    nanosleep (&ms, NULL);
  }
  done_on_io_thread (rec, what);
}

/* Make the I/O thread leave its socket to pollers for a lease of
 * LEN_NS, and see it do so: end any lease (stabledif_wait_all, nothing
 * in flight: a thread in a leased poll wakes and polls its socket
 * again), renew it with a poll, and wait for the I/O thread's leased
 * poll.  An I/O thread that is already asleep in a poll of its socket
 * stays there (a reply that a poller reads first does not even make its
 * poll return): a write BLK that nobody polls for wakes it (it reads the
 * reply itself, REC records it) and it goes round its loop into a
 * leased poll. */
static void
lease_enter (uint64_t len_ns, uint8_t *blk, struct rec *rec)
{
  const struct timespec ms = { .tv_sec = 0, .tv_nsec = 1000000 };
  unsigned tries;

  h->poll_lease_len_ns = len_ns;
  OK (stabledif_wait_all (h));
  while (sem_trywait (&hook_leased) == 0)
    ;
  for (tries = 0; ; tries++) {
    unsigned runs;
    time_t end;

    CHECK (tries < 10, "the I/O thread did not leave its socket to "
           "pollers after %u writes (idle %d, leased %d, driving %d, "
           "wake pending %d, poll_dir %u)", tries, h->conns[0].idle,
           h->conns[0].leased, h->conns[0].driving,
           h->conns[0].wake_pending, atomic_load (&h->conns[0].poll_dir));
    CHECK (stabledif_poll (h, 0) == 0, "poll with nothing in flight");
    if (sem_wait_ms (&hook_leased, 100) == 0)
      break;
    runs = atomic_load (&rec->runs);
    OK (stabledif_aio_pwrite (h, blk, iv, 0, 0, on_rec, rec));
    end = time (NULL) + WAIT_SECONDS;
    while (atomic_load (&rec->runs) == runs) {
      CHECK (time (NULL) < end, "a write nobody polled for, with no "
             "lease, did not complete after %d s", WAIT_SECONDS);
      nanosleep (&ms, NULL);
    }
  }
}

/* Whether the I/O thread of connection C is idle (under its lock). */
static bool
conn_idle (struct io_conn *c)
{
  bool idle;

  pthread_mutex_lock (&c->lock);
  idle = c->idle;
  pthread_mutex_unlock (&c->lock);
  return idle;
}

/* A lease that pollers keep renewing keeps the I/O thread in its leased
 * poll, idle, past the end of the lease it began with: it does not come
 * out to wait for the thread that drives the connection (the test,
 * holding it as a poller does) only to go back.  The lease is LEN_NS
 * long, renewed (stabledif_poll with nothing in flight) every 10 ms for
 * five lease lengths.  A thread that left after a renewal later than the
 * lease length (a loaded machine) proves nothing: then the run is tried
 * again, three times at most.  Afterwards the lease runs out and a write completes on the I/O
 * thread (REC). */
static void
lease_kept (uint64_t len_ns, uint8_t *blk, struct rec *rec)
{
  const struct timespec pause = { .tv_sec = 0, .tv_nsec = 10000000 };
  struct io_conn *c = &h->conns[0];
  unsigned attempt, i, n = (unsigned) (5 * len_ns / 10000000u);

  for (attempt = 0; ; attempt++) {
    uint64_t last, now;
    unsigned left_at = 0;
    bool late = false;

    CHECK (attempt < 3, "renewals came later than the lease length in "
           "three runs: the machine is too busy to tell");
    lease_enter (len_ns, blk, rec);
    pthread_mutex_lock (&c->lock);
    CHECK (c->idle && c->leased && !c->driving, "the I/O thread is not "
           "in a leased poll (idle %d, leased %d, driving %d)", c->idle,
           c->leased, c->driving);
    c->driving = c->poller = true;
    pthread_mutex_unlock (&c->lock);
    last = io_now_ns ();
    for (i = 0; i < n && left_at == 0; i++) {
      nanosleep (&pause, NULL);
      CHECK (stabledif_poll (h, 0) == 0, "poll with nothing in flight");
      now = io_now_ns ();
      late = late || now - last >= len_ns;
      last = now;
      if (!conn_idle (c))
        left_at = i + 1;
    }
    pthread_mutex_lock (&c->lock);
    c->driving = c->poller = false;
    pthread_cond_broadcast (&c->drive_done);
    pthread_mutex_unlock (&c->lock);
    if (left_at == 0)
      break;
    CHECK (late, "the I/O thread left its leased poll after %u of %u "
           "renewals of a %" PRIu64 " ms lease", left_at, n,
           len_ns / 1000000u);
  }
  /* Nobody renews it now: it runs out, and the I/O thread reads the
   * reply of a write nobody polls for. */
  write_completes_unpolled (blk, rec + 1, "write 0 (a renewed lease ran "
                            "out)");
}

static void
lease (void)
{
  const uint64_t hour = (uint64_t) 3600 * 1000000000u;
  uint8_t *b = xmalloc (4 * iv);

  fill_pattern (b, 4 * iv, 25);
  OK (stabledif_set_policy (h, STABLEDIF_POLICY_WAIT));

  lease_enter (hour, b, &recs[0]);
  OK (stabledif_aio_pwrite (h, b + iv, iv, iv, 0, on_rec, &recs[1]));
  still_waiting (&recs[1], "write 1");
  alarm (WAIT_SECONDS);
  OK (stabledif_wait_all (h));
  alarm (0);
  done_on_io_thread (&recs[1], "write 1 (stabledif_wait_all)");

  lease_enter (hour, b, &recs[2]);
  alarm (WAIT_SECONDS);
  OK (stabledif_pwrite (h, b + 2 * iv, iv, 2 * iv, 0));
  alarm (0);

  lease_enter (hour, b, &recs[3]);
  OK (stabledif_aio_pwrite (h, b + 3 * iv, iv, 3 * iv, 0, on_rec, &recs[4]));
  alarm (WAIT_SECONDS);
  OK (stabledif_wait_stable (h, b + 3 * iv, iv));
  alarm (0);
  done_on_io_thread (&recs[4], "write 3 (stabledif_wait_stable)");

  /* A short lease runs out by itself (long enough for the I/O thread to
   * be seen leaving its socket, under valgrind too). */
  lease_enter (2000000000u, b, &recs[5]);
  write_completes_unpolled (b, &recs[6], "write 0 again (the lease ran "
                            "out)");
  lease_kept (200000000u, b, &recs[7]);
  OK (stabledif_wait_all (h));
  {
    uint8_t *rd = xmalloc (4 * iv);

    OK (stabledif_pread (h, rd, 4 * iv, 0, NULL, 0));
    CHECK (memcmp (rd, b, 4 * iv) == 0,
           "the blocks read back differ from those written");
    free (rd);
  }
  printf ("lease: replies waited for a poller while the lease ran; "
          "wait_all, a synchronous write and wait_stable ended it; a short "
          "one ran out; a renewed one kept the I/O thread asleep\n");
  free (b);
}

/* ---- pretake ------------------------------------------------------- */

/* The request poll_pretake waits for, once (then NULL). */
static struct rec *pretake_rec;

/* poll_pretake: hold stabledif_poll between its look at the completions
 * and its take of the connection until PRETAKE_REC's callback has run
 * (on the I/O thread), WAIT_SECONDS at most. */
static void
pretake_wait (struct stabledif_handle *hh)
{
  const struct timespec ms = { .tv_sec = 0, .tv_nsec = 1000000 };
  struct rec *r = pretake_rec;
  time_t end = time (NULL) + WAIT_SECONDS;

  (void) hh;
  pretake_rec = NULL;
  while (r != NULL && atomic_load (&r->runs) == 0) {
    CHECK (time (NULL) < end, "the write did not complete on the I/O "
           "thread within %d s", WAIT_SECONDS);
    nanosleep (&ms, NULL);
  }
}

/* The last request in flight completes on the I/O thread after
 * stabledif_poll has looked at the completions and before it takes the
 * connection: the poll returns it rather than wait for a reply that
 * never comes.  The server holds the write (wdelay) until the poll has
 * begun; with no lease the I/O thread reads the reply. */
static void
pretake (void)
{
  uint8_t *b = xmalloc (iv);
  int n;

  fill_pattern (b, iv, 31);
  h->poll_lease_len_ns = 0;
  OK (stabledif_aio_pwrite (h, b, iv, 0, 0, on_rec, &recs[0]));
  pretake_rec = &recs[0];
  h->poll_pretake = pretake_wait;
  alarm (WAIT_SECONDS + 10);
  polling = true;
  n = stabledif_poll (h, -1);
  polling = false;
  alarm (0);
  h->poll_pretake = NULL;
  CHECK (n == 1, "stabledif_poll returned %d (%s), wanted 1: the write "
         "completed on the I/O thread while it polled", n,
         n == -1 ? stabledif_get_error () : "no error");
  done_on_io_thread (&recs[0], "the write completed before the take");
  {
    uint8_t *rd = xmalloc (iv);

    OK (stabledif_pread (h, rd, iv, 0, NULL, 0));
    CHECK (memcmp (rd, b, iv) == 0, "the block read back differs");
    free (rd);
  }
  printf ("pretake: a completion between the poll's look and its take "
          "ended the poll\n");
  free (b);
}

int
main (int argc, char *argv[])
{
  const char *mode;

  progname = "test-client-poll";
  test_thread = true;
  if (argc != 3) {
    fprintf (stderr, "usage: %s URI basic|stalled|mixed|lost|lease|"
             "pretake\n",
             argv[0]);
    return 2;
  }
  mode = argv[2];
  CHECK (sem_init (&hook_parked, 0, 0) == 0 &&
         sem_init (&hook_release, 0, 0) == 0 &&
         sem_init (&hook_leased, 0, 0) == 0, "sem_init");
  h = stabledif_create ();
  CHECK (h != NULL, "stabledif_create");
  h->poll = hook_poll;          /* before connect: no I/O thread yet */
  OK (stabledif_connect_uri (h, argv[1]));
  iv = stabledif_get_interval (h);
  CHECK (iv <= 4096, "interval %" PRIu32 " larger than the test's block",
         iv);

  if (strcmp (mode, "basic") == 0)
    basic (argv[1]);
  else if (strcmp (mode, "stalled") == 0)
    stalled ();
  else if (strcmp (mode, "mixed") == 0)
    mixed ();
  else if (strcmp (mode, "lost") == 0)
    lost ();
  else if (strcmp (mode, "lease") == 0)
    lease ();
  else if (strcmp (mode, "pretake") == 0)
    pretake ();
  else {
    fprintf (stderr, "%s: unknown mode %s\n", argv[0], mode);
    return 2;
  }
  stabledif_close (h);
  return 0;
}
