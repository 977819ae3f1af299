/* SPDX-License-Identifier: BSD-3-Clause */
/* stabledif: libstabledif's I/O thread on its unhappy paths, against the
 * real plugin (test-client-io.sh).  Linked with the library's internals:
 * the handle's poll function (struct stabledif_handle, poll) is replaced
 * by one that can stop the I/O thread at a chosen moment.
 *
 *   test-client-io URI poll-fails
 *   test-client-io URI socket-closed
 *   test-client-io URI flood
 *   test-client-io URI batch
 *   test-client-io URI counters
 *   test-client-io URI drive
 *   test-client-io URI drive-lost
 *
 * poll-fails: poll(2) fails (ENOMEM) while writes are in flight (the
 * server delays them) and others are queued: every one fails with
 * ENOTCONN, later calls fail naming the poll, and close returns.
 * socket-closed: the socket is closed under libnbd instead, so that poll
 * reports POLLNVAL: the same, naming the closed socket.
 *
 * flood: three threads submit writes as fast as the I/O thread takes
 * them, never letting its queue run empty, until a write of this thread
 * completes or each has submitted FLOOD_MAX: the write must complete
 * before the flood runs out (the I/O thread keeps reading replies between
 * the requests it takes off the queue), and every write completes.
 *
 * batch: while the I/O thread is parked in its first poll, BATCH_QUEUED
 * writes are queued; then, at every poll it makes, the commands libnbd
 * has in flight may have grown by at most BATCH_MAX since its previous
 * poll: it reads the replies that have come between batches instead of
 * sending the whole queue first (replies are read only after a poll, so
 * the growth between two polls counts the commands issued in between).
 *
 * counters: two threads on two connections write and read single blocks
 * while this one takes stabledif_get_stats snapshots: in every snapshot
 * the bytes are the requests times the block size.
 *
 * drive: while the I/O thread is parked in its poll with nothing to do,
 * this thread's writes and reads are sent by this thread itself (libnbd
 * has them in flight as soon as the submit returns, the I/O thread still
 * parked); their callbacks run on the I/O thread once it is let go, and
 * another thread that waits for them on a condition variable sees them
 * all; a write queued with a race delay is left to the I/O thread.  The
 * data reads back.
 *
 * drive-lost: the same, but the socket was shut down under libnbd: the
 * write this thread sends fails, and so do those submitted after it,
 * every one with ENOTCONN in a callback on the I/O thread, and later
 * calls fail; close returns.
 *
 * poll-fails, socket-closed and batch queue their first writes with a
 * race delay of 1 us, so that the I/O thread, not this thread, issues
 * them (it parks in its poll with them in flight).
 */
#include <config.h>

#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <errno.h>
#include <sys/socket.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>

#include "test-client-util.h"
#include "libstabledif-internal.h"

/* Generous bound on every wait of the test: a hang fails instead. */
#define WAIT_SECONDS 60

static struct stabledif_handle *h;
static uint32_t iv;

/* ---- the poll hook --------------------------------------------------- */

/* What the hook does at the first poll with libnbd commands in flight. */
enum hook_mode {
  HOOK_OFF,                     /* nothing: plain ppoll */
  HOOK_FAIL,                    /* park, then fail with ENOMEM */
  HOOK_HOLD,                    /* park, then ppoll */
  HOOK_PARK,                    /* park at the next poll, even with
                                   nothing in flight, then ppoll */
};

static _Atomic int hook_mode = HOOK_OFF; /* armed mode (one shot) */
static sem_t hook_parked;       /* posted when the I/O thread is parked */
static sem_t hook_release;      /* posted by the test to let it go on */

/* The I/O thread's polls watched (batch): the commands in flight at the
 * previous poll, and the most they grew from one poll to the next.  Only
 * the I/O thread touches the two numbers while hook_watch is set. */
static atomic_bool hook_watch;
static int64_t watch_last;
static int64_t watch_max_growth;

/* The I/O thread's poll: see enum hook_mode. */
static int
hook_poll (struct pollfd *fds, nfds_t nfds, const struct timespec *timeout,
           const sigset_t *sigmask)
{
  int mode = atomic_load (&hook_mode);

  if (atomic_load (&hook_watch)) {
    int64_t n = nbd_aio_in_flight (h->conns[0].nbd);

    if (n - watch_last > watch_max_growth)
      watch_max_growth = n - watch_last;
    watch_last = n;
  }
  if (mode == HOOK_PARK ||
      (mode != HOOK_OFF && nbd_aio_in_flight (h->conns[0].nbd) > 0)) {
    atomic_store (&hook_mode, HOOK_OFF);
    sem_post (&hook_parked);
    while (sem_wait (&hook_release) == -1 && errno == EINTR)
      ;
    if (mode == HOOK_FAIL) {
      errno = ENOMEM;
      return -1;
    }
  }
  return ppoll (fds, nfds, timeout, sigmask);
}

/* ---- completions counted ------------------------------------------- */

/* Completions of a group of asynchronous requests. */
struct tally {
  pthread_mutex_t lock;         /* protects the fields below */
  pthread_cond_t cond;          /* broadcast at each completion */
  unsigned done;                /* completed */
  unsigned failed;              /* completed with an error */
  unsigned enotconn;            /* ... of them with ENOTCONN and the
                                   message saying so */
  char msg[1024];               /* message of the last failure */
};

static struct tally tally = {
  .lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER,
};

/* Completion callback counting into the struct tally USER_DATA. */
static void
on_tally (void *user_data, int error)
{
  struct tally *t = user_data;
  const char *m = stabledif_get_error ();

  pthread_mutex_lock (&t->lock);
  t->done++;
  if (error) {
    t->failed++;
    if (error == ENOTCONN && m &&
        strstr (m, "connection to the device lost"))
      t->enotconn++;
    snprintf (t->msg, sizeof t->msg, "%s", m ? m : "(none)");
  }
  pthread_cond_broadcast (&t->cond);
  pthread_mutex_unlock (&t->lock);
}

/* Wait until N requests of T completed, failing after WAIT_SECONDS. */
static void
tally_wait (struct tally *t, unsigned n)
{
  struct timespec until;
  int r = 0;

  clock_gettime (CLOCK_REALTIME, &until);
  until.tv_sec += WAIT_SECONDS;
  pthread_mutex_lock (&t->lock);
  while (t->done < n && r != ETIMEDOUT)
    r = pthread_cond_timedwait (&t->cond, &t->lock, &until);
  CHECK (t->done >= n, "%u of %u requests completed after %d s", t->done,
         n, WAIT_SECONDS);
  pthread_mutex_unlock (&t->lock);
}

/* ---- poll-fails, socket-closed -------------------------------------- */

/* Writes in flight when the I/O thread polls, and queued behind them. */
#define LOST_IN_FLIGHT 4
#define LOST_QUEUED 4

/* Stop the I/O thread in its poll in MODE with writes in flight, queue
 * more behind them, let it go on after BREAK_IT (or nothing), and check
 * that everything fails with ENOTCONN and later calls with WHY. */
static void
lost (enum hook_mode mode, void (*break_it) (void), const char *why)
{
  uint8_t *b = xmalloc ((size_t) iv);
  unsigned i, n = LOST_IN_FLIGHT + LOST_QUEUED;

  fill_pattern (b, iv, 7);
  atomic_store (&hook_mode, mode);
  /* Queued for the I/O thread, not sent by this one (io_drive). */
  OK (stabledif_set_race_delay_us (h, 1));
  for (i = 0; i < LOST_IN_FLIGHT; i++)
    OK (stabledif_aio_pwrite (h, b, iv, (uint64_t) i * iv, 0, on_tally,
                              &tally));
  sem_wait_bounded (&hook_parked, "poll with writes in flight", WAIT_SECONDS);

  /* These wait for a minute before the I/O thread may take them. */
  OK (stabledif_set_race_delay_us (h, WAIT_SECONDS * 1000000u));
  for (; i < n; i++)
    OK (stabledif_aio_pwrite (h, b, iv, (uint64_t) i * iv, 0, on_tally,
                              &tally));
  if (break_it)
    break_it ();
  sem_post (&hook_release);

  tally_wait (&tally, n);
  CHECK (tally.enotconn == n, "%u of %u requests failed with ENOTCONN; "
         "last message: %s", tally.enotconn, n, tally.msg);
  FAILS (stabledif_pwrite (h, b, iv, 0, 0), ENOTCONN, why);
  FAILS (stabledif_aio_pread (h, b, iv, 0, NULL, 0, NULL, NULL), ENOTCONN, why);
  stabledif_close (h);          /* must not hang */
  h = NULL;
  free (b);
}

/* Close the socket libnbd polls: poll reports POLLNVAL for it. */
static void
close_socket (void)
{
  int fd = nbd_aio_get_fd (h->conns[0].nbd);

  CHECK (fd >= 0 && close (fd) == 0, "closing the socket %d", fd);
}

/* ---- flood ---------------------------------------------------------- */

/* Threads submitting writes, the buffers each writes in turn (and so
 * the writes it keeps queued), and the most each submits. */
#define FLOOD_THREADS 3
#define FLOOD_RING 32u
#define FLOOD_MAX 10000u

static pthread_barrier_t flood_started; /* the threads and this one */
static atomic_bool flood_go;    /* the awaited write was submitted */
static atomic_uint flood_submitted; /* writes submitted by all threads */
static atomic_uint flood_at_done = UINT32_MAX; /* flood_submitted when
                                   the awaited write completed */
static struct tally flood_tally = {
  .lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER,
};
static struct tally awaited_tally = {
  .lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER,
};

/* Completion callback of the awaited write: note how far the flood had
 * got, then count it. */
static void
on_awaited (void *user_data, int error)
{
  atomic_store (&flood_at_done, atomic_load (&flood_submitted));
  on_tally (user_data, error);
}

/* A flood thread: one-block writes from FLOOD_RING buffers in turn, each
 * reused as soon as stabledif_wait_stable lets it (under wait-sent, when
 * its last write was copied out): so each thread keeps FLOOD_RING writes
 * queued for as long as it runs, and the I/O thread's queue is never
 * empty.  After FLOOD_RING writes it waits for the awaited write to be
 * submitted, then goes on until that completed or FLOOD_MAX. */
static void *
flood_thread (void *arg)
{
  uint8_t *ring = xmalloc ((size_t) FLOOD_RING * iv);
  uintptr_t idx = (uintptr_t) arg;
  unsigned i;

  fill_pattern (ring, (size_t) FLOOD_RING * iv, idx);
  for (i = 0; i < FLOOD_MAX; i++) {
    uint8_t *b = ring + (size_t) (i % FLOOD_RING) * iv;

    if (i == FLOOD_RING) {
      pthread_barrier_wait (&flood_started);
      while (!atomic_load (&flood_go))
        sched_yield ();         /* bounded: main submits at once */
    }
    if (atomic_load (&flood_at_done) != UINT32_MAX)
      break;
    CHECK (stabledif_wait_stable (h, b, iv) == 0, "wait_stable %u", i);
    CHECK (stabledif_aio_pwrite (h, b, iv, (uint64_t) (i % 64) * iv, 0,
                                 on_tally, &flood_tally) > 0,
           "flood write %u", i);
    atomic_fetch_add (&flood_submitted, 1);
  }
  /* Before the buffers go: the writes must be done with them. */
  CHECK (stabledif_wait_stable (h, ring, (size_t) FLOOD_RING * iv) == 0,
         "wait_stable");
  free (ring);
  return NULL;
}

static void
flood (void)
{
  pthread_t t[FLOOD_THREADS];
  uint8_t *b = xmalloc ((size_t) iv);
  unsigned at_done, total;
  uintptr_t i;

  fill_pattern (b, iv, 99);
  pthread_barrier_init (&flood_started, NULL, FLOOD_THREADS + 1);
  for (i = 0; i < FLOOD_THREADS; i++)
    CHECK (pthread_create (&t[i], NULL, flood_thread, (void *) i) == 0,
           "pthread_create");
  pthread_barrier_wait (&flood_started);
  OK (stabledif_aio_pwrite (h, b, iv, 100 * (uint64_t) iv, 0, on_awaited,
                            &awaited_tally));
  atomic_store (&flood_go, true);
  tally_wait (&awaited_tally, 1);
  CHECK (awaited_tally.failed == 0, "the write failed: %s",
         awaited_tally.msg);
  at_done = atomic_load (&flood_at_done);
  for (i = 0; i < FLOOD_THREADS; i++)
    pthread_join (t[i], NULL);
  pthread_barrier_destroy (&flood_started);
  total = atomic_load (&flood_submitted);
  OK (stabledif_wait_all (h));
  tally_wait (&flood_tally, total);
  CHECK (flood_tally.failed == 0, "%u flood writes failed: %s",
         flood_tally.failed, flood_tally.msg);
  CHECK (at_done < FLOOD_THREADS * FLOOD_MAX,
         "the write completed only after the whole flood (%u writes) had "
         "been submitted", at_done);
  printf ("flood: the write completed after %u of at most %u writes\n",
          at_done, FLOOD_THREADS * FLOOD_MAX);
  free (b);
}

/* ---- batch ---------------------------------------------------------- */

/* Writes queued at once, and the most the I/O thread may issue without
 * reading replies (IO_BATCH_MAX of libstabledif-io.c). */
#define BATCH_QUEUED 1000u
#define BATCH_MAX 64

static void
batch (void)
{
  uint8_t *b = xmalloc ((size_t) iv);
  unsigned i;

  fill_pattern (b, iv, 5);
  /* hook_mode was HOOK_PARK from before the connect: the I/O thread
   * parks in the first poll it makes, with nothing to do yet. */
  sem_wait_bounded (&hook_parked, "the I/O thread's first poll", WAIT_SECONDS);
  /* Queued for the I/O thread, not sent by this one (io_drive). */
  OK (stabledif_set_race_delay_us (h, 1));
  for (i = 0; i < BATCH_QUEUED; i++)
    OK (stabledif_aio_pwrite (h, b, iv, (uint64_t) (i % 64) * iv, 0,
                              on_tally, &tally));
  watch_last = 0;
  watch_max_growth = 0;
  atomic_store (&hook_watch, true);
  sem_post (&hook_release);
  tally_wait (&tally, BATCH_QUEUED);
  atomic_store (&hook_watch, false);
  CHECK (tally.failed == 0, "%u writes failed: %s", tally.failed, tally.msg);
  CHECK (watch_max_growth > 0, "no command seen in flight at any poll");
  CHECK (watch_max_growth <= BATCH_MAX, "the I/O thread issued %" PRId64
         " commands between two polls (at most %d): it sent the queue "
         "before reading replies", watch_max_growth, BATCH_MAX);
  printf ("batch: at most %" PRId64 " commands issued between two polls\n",
          watch_max_growth);
  free (b);
}

/* ---- counters ------------------------------------------------------- */

/* Requests of each counters thread. */
#define COUNTERS_REQUESTS 3000u

static atomic_uint counters_running; /* counters threads still going */

/* A counters thread: alternate one-block writes and reads, each thread
 * in a block of its own (ARG its index). */
static void *
counters_thread (void *arg)
{
  uintptr_t idx = (uintptr_t) arg;
  uint8_t *b = xmalloc ((size_t) iv);
  unsigned i;

  fill_pattern (b, iv, idx);
  for (i = 0; i < COUNTERS_REQUESTS; i++) {
    if (i % 2 == 0)
      CHECK (stabledif_pwrite (h, b, iv, idx * iv, 0) == 0, "write %u", i);
    else
      CHECK (stabledif_pread (h, b, iv, idx * iv, NULL, 0) == 0, "read %u", i);
  }
  free (b);
  atomic_fetch_sub (&counters_running, 1);
  return NULL;
}

/* Check the invariants of one snapshot. */
static void
check_snapshot (const struct stabledif_stats *s)
{
  CHECK (s->write_bytes == s->writes * iv && s->read_bytes == s->reads * iv,
         "torn snapshot: %" PRIu64 " writes of %" PRIu64 " bytes, %" PRIu64
         " reads of %" PRIu64 " bytes (block %" PRIu32 ")", s->writes,
         s->write_bytes, s->reads, s->read_bytes, iv);
  CHECK (s->write_errors == 0 && s->read_errors == 0,
         "errors in the counters");
}

static void
counters (void)
{
  pthread_t t[2];
  struct stabledif_stats s;
  uintptr_t i;
  unsigned snaps = 0;

  atomic_store (&counters_running, 2);
  for (i = 0; i < 2; i++)
    CHECK (pthread_create (&t[i], NULL, counters_thread, (void *) i) == 0,
           "pthread_create");
  /* Bounded: the threads finish after 2 * COUNTERS_REQUESTS requests. */
  while (atomic_load (&counters_running) > 0 && snaps < 50000000u) {
    OK (stabledif_get_stats (h, &s, sizeof s));
    check_snapshot (&s);
    snaps++;
  }
  for (i = 0; i < 2; i++)
    pthread_join (t[i], NULL);
  OK (stabledif_get_stats (h, &s, sizeof s));
  check_snapshot (&s);
  CHECK (s.writes == COUNTERS_REQUESTS && s.reads == COUNTERS_REQUESTS,
         "%" PRIu64 " writes, %" PRIu64 " reads", s.writes, s.reads);
  printf ("counters: %u snapshots, every one whole\n", snaps);
}

/* ---- drive, drive-lost ---------------------------------------------- */

/* Requests of the drive test: writes, then reads of the same blocks. */
#define DRIVE_REQUESTS 8u

/* Completions as a caller's own thread waits for them: a callback
 * records on which thread it ran and hands its index back. */
static struct {
  pthread_mutex_t lock;         /* protects the fields below */
  pthread_cond_t cond;          /* signalled at each completion */
  unsigned done;                /* completed */
  unsigned failed;              /* ... with an error */
  unsigned enotconn;            /* ... with ENOTCONN, message saying so */
  unsigned off_io_thread;       /* callbacks not on the I/O thread */
  char msg[1024];               /* message of the last failure */
} handback = {
  .lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER,
};

static void
on_handback (void *user_data, int error)
{
  const char *m = stabledif_get_error ();

  (void) user_data;
  pthread_mutex_lock (&handback.lock);
  if (!pthread_equal (pthread_self (), h->conns[0].thread))
    handback.off_io_thread++;
  if (error) {
    handback.failed++;
    if (error == ENOTCONN && m && strstr (m, "connection to the device lost"))
      handback.enotconn++;
    snprintf (handback.msg, sizeof handback.msg, "%s", m ? m : "(none)");
  }
  handback.done++;
  pthread_cond_signal (&handback.cond);
  pthread_mutex_unlock (&handback.lock);
}

/* A thread other than the submitter: waits for ARG completions. */
static void *
handback_waiter (void *arg)
{
  unsigned n = (unsigned) (uintptr_t) arg;
  struct timespec until;
  int r = 0;

  clock_gettime (CLOCK_REALTIME, &until);
  until.tv_sec += WAIT_SECONDS;
  pthread_mutex_lock (&handback.lock);
  while (handback.done < n && r != ETIMEDOUT)
    r = pthread_cond_timedwait (&handback.cond, &handback.lock, &until);
  pthread_mutex_unlock (&handback.lock);
  return NULL;
}

/* The commands libnbd of connection 0 has in flight. */
static int64_t
nbd_in_flight (void)
{
  return nbd_aio_in_flight (h->conns[0].nbd);
}

static void
drive (void)
{
  uint8_t *w = xmalloc ((size_t) DRIVE_REQUESTS * iv);
  uint8_t *r = xmalloc ((size_t) DRIVE_REQUESTS * iv);
  pthread_t waiter;
  unsigned i;
  int64_t n;

  fill_pattern (w, (size_t) DRIVE_REQUESTS * iv, 11);
  memset (r, 0, (size_t) DRIVE_REQUESTS * iv);
  CHECK (pthread_create (&waiter, NULL, handback_waiter,
                         (void *) (uintptr_t) (2 * DRIVE_REQUESTS + 1)) == 0,
         "pthread_create");
  /* hook_mode was HOOK_PARK from before the connect. */
  sem_wait_bounded (&hook_parked, "the I/O thread's first poll", WAIT_SECONDS);
  for (i = 0; i < DRIVE_REQUESTS; i++) {
    OK (stabledif_aio_pwrite (h, w + (size_t) i * iv, iv, (uint64_t) i * iv,
                              0, on_handback, NULL));
    n = nbd_in_flight ();
    CHECK (n == (int64_t) i + 1, "after write %u, with the I/O thread "
           "parked, libnbd has %" PRId64 " commands in flight: the "
           "submitting thread did not send it", i, n);
  }
  /* With a race delay the write is the I/O thread's to send. */
  OK (stabledif_set_race_delay_us (h, 1));
  OK (stabledif_aio_pwrite (h, w, iv, (uint64_t) DRIVE_REQUESTS * iv, 0,
                            on_handback, NULL));
  n = nbd_in_flight ();
  CHECK (n == DRIVE_REQUESTS, "a write with a race delay was sent at "
         "submit (%" PRId64 " commands in flight)", n);
  OK (stabledif_set_race_delay_us (h, 0));
  CHECK (handback.done == 0, "a callback ran while the I/O thread was "
         "parked");
  sem_post (&hook_release);

  /* Reads of the blocks written, from this thread, while the I/O thread
   * runs: sent by whichever finds the connection free. */
  OK (stabledif_wait_all (h));
  for (i = 0; i < DRIVE_REQUESTS; i++)
    OK (stabledif_aio_pread (h, r + (size_t) i * iv, iv, (uint64_t) i * iv,
                             NULL, 0, on_handback, NULL));
  pthread_join (waiter, NULL);
  CHECK (handback.done == 2 * DRIVE_REQUESTS + 1, "the other thread saw "
         "%u of %u completions", handback.done, 2 * DRIVE_REQUESTS + 1);
  CHECK (handback.failed == 0, "%u requests failed: %s", handback.failed,
         handback.msg);
  CHECK (handback.off_io_thread == 0, "%u callbacks ran off the I/O "
         "thread", handback.off_io_thread);
  CHECK (memcmp (w, r, (size_t) DRIVE_REQUESTS * iv) == 0,
         "the blocks read back differ from those written");
  printf ("drive: %u writes sent by the submitting thread, callbacks on "
          "the I/O thread\n", DRIVE_REQUESTS);
  free (w);
  free (r);
}

static void
drive_lost (void)
{
  uint8_t *b = xmalloc ((size_t) iv);
  unsigned i;
  int fd;

  fill_pattern (b, iv, 13);
  sem_wait_bounded (&hook_parked, "the I/O thread's first poll", WAIT_SECONDS);
  fd = nbd_aio_get_fd (h->conns[0].nbd);
  CHECK (fd >= 0 && shutdown (fd, SHUT_RDWR) == 0, "shutdown of socket %d",
         fd);
  for (i = 0; i < DRIVE_REQUESTS; i++)
    OK (stabledif_aio_pwrite (h, b, iv, (uint64_t) i * iv, 0, on_handback,
                              NULL));
  CHECK (handback.done == 0, "a callback ran inside a submit");
  sem_post (&hook_release);
  handback_waiter ((void *) (uintptr_t) DRIVE_REQUESTS);
  CHECK (handback.done == DRIVE_REQUESTS, "%u of %u requests completed",
         handback.done, DRIVE_REQUESTS);
  CHECK (handback.enotconn == DRIVE_REQUESTS, "%u of %u requests failed "
         "with ENOTCONN; last message: %s", handback.enotconn,
         DRIVE_REQUESTS, handback.msg);
  CHECK (handback.off_io_thread == 0, "%u callbacks ran off the I/O "
         "thread", handback.off_io_thread);
  FAILS (stabledif_pwrite (h, b, iv, 0, 0), ENOTCONN,
         "connection to the device lost");
  printf ("drive-lost: %u writes failed with ENOTCONN on the I/O thread\n",
          DRIVE_REQUESTS);
  stabledif_close (h);          /* must not hang */
  h = NULL;
  free (b);
}

int
main (int argc, char *argv[])
{
  const char *mode;

  progname = "test-client-io";
  /* Every wait below is bounded by WAIT_SECONDS except the I/O thread
   * parked in the poll hook and the flood threads' start: a hang there
   * ends the whole test (SIGALRM's default action) instead. */
  alarm (4 * WAIT_SECONDS);
  if (argc != 3) {
    fprintf (stderr, "usage: %s URI MODE\n", progname);
    return EXIT_FAILURE;
  }
  mode = argv[2];
  sem_init (&hook_parked, 0, 0);
  sem_init (&hook_release, 0, 0);

  h = stabledif_create ();
  CHECK (h != NULL, "stabledif_create");
  h->poll = hook_poll;          /* before connect: no I/O thread yet */
  if (strcmp (mode, "counters") == 0)
    OK (stabledif_set_connections (h, 2));
  if (strcmp (mode, "flood") == 0)
    OK (stabledif_set_policy (h, STABLEDIF_POLICY_WAIT_SENT));
  if (strcmp (mode, "batch") == 0 || strncmp (mode, "drive", 5) == 0)
    atomic_store (&hook_mode, HOOK_PARK);
  OK (stabledif_connect_uri (h, argv[1]));
  iv = (uint32_t) stabledif_get_interval (h);

  if (strcmp (mode, "poll-fails") == 0)
    lost (HOOK_FAIL, NULL,
          "connection to the device lost: poll: Cannot allocate memory");
  else if (strcmp (mode, "socket-closed") == 0)
    lost (HOOK_HOLD, close_socket,
          "connection to the device lost: poll: the socket is no longer "
          "open");
  else if (strcmp (mode, "flood") == 0)
    flood ();
  else if (strcmp (mode, "batch") == 0)
    batch ();
  else if (strcmp (mode, "counters") == 0)
    counters ();
  else if (strcmp (mode, "drive") == 0)
    drive ();
  else if (strcmp (mode, "drive-lost") == 0)
    drive_lost ();
  else {
    fprintf (stderr, "%s: unknown mode %s\n", progname, mode);
    return EXIT_FAILURE;
  }
  stabledif_close (h);
  sem_destroy (&hook_parked);
  sem_destroy (&hook_release);
  return EXIT_SUCCESS;
}
