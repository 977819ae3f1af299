/* SPDX-License-Identifier: BSD-3-Clause */
/* libstabledif: requests, the I/O threads, flush and wait_all.
 *
 * Callers build a request and queue it on a connection (io_submit).
 * Each connection's I/O thread takes requests off its queue in order
 * once their race delay has passed, in batches (IO_BATCH_MAX), hands them
 * to the path that issues them (copy-out for writes), polls its libnbd
 * socket and its wake-up pipe after each batch, and completes requests
 * when their last NBD command is answered:
 * path completion, then the caller's callback or the waiting synchronous
 * caller.
 *
 * A caller's thread that submits while the I/O thread waits in its poll
 * with nothing queued issues the request itself (io_drive), as a thread
 * of libnbd's own callers sends its commands: the request then costs no
 * wake-up of the I/O thread and no thread switch, and the I/O thread
 * only wakes when the reply comes.  Completions stay on the I/O thread,
 * except for a caller's thread in stabledif_poll: it drives an idle
 * connection and reads the replies itself, so the completions it reads
 * run on its own thread, as a libnbd caller's nbd_poll does.  For a
 * short lease after each stabledif_poll call an idle I/O thread leaves
 * the replies to the next one (it waits on its wake-up pipe alone), so
 * that a reply wakes the poller only, not both threads; any other wait
 * of the library ends the lease (io_lease_end).
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "libstabledif-internal.h"

uint64_t
io_now_ns (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}

/* The connection whose I/O thread is the calling thread (a callback is
 * running), or NULL. */
static struct io_conn *
io_current_conn (struct stabledif_handle *h)
{
  pthread_t self = pthread_self ();
  unsigned i;

  /* nconns, thread and running are written before the handle is
   * published as connected (or, for io_stop, by the thread that joins
   * them), and callers got here after seeing that. */
  for (i = 0; i < h->nconns; i++)
    if (h->conns[i].running && pthread_equal (self, h->conns[i].thread))
      return &h->conns[i];
  return NULL;
}

/* The handle whose stabledif_poll runs on the calling thread (its
 * completion callbacks may run here), or NULL. */
static _Thread_local struct stabledif_handle *io_poller;

bool
io_on_io_thread (struct stabledif_handle *h)
{
  return io_poller == h || io_current_conn (h) != NULL;
}

/* Check a data range of a read or write: aligned to the interval, not
 * empty, inside the device.  Reports the error naming FN and returns -1;
 * 0 if the range is good. */
static int
check_range (struct stabledif_handle *h, const char *fn,
             size_t count, uint64_t offset)
{
  const uint32_t iv = h->profile.interval;

  if (count == 0) {
    error_set (EINVAL, "%s: count is 0 (it must be a non-zero multiple of "
               "the protection interval %" PRIu32 ")", fn, iv);
    return -1;
  }
  if (count % iv != 0) {
    error_set (EINVAL, "%s: count %zu is not a multiple of the protection "
               "interval %" PRIu32, fn, count, iv);
    return -1;
  }
  if (offset % iv != 0) {
    error_set (EINVAL, "%s: offset %" PRIu64 " is not a multiple of the "
               "protection interval %" PRIu32, fn, offset, iv);
    return -1;
  }
  if (offset > h->size || count > h->size - offset) {
    error_set (EINVAL, "%s: offset %" PRIu64 " count %zu goes beyond the "
               "end of the device (%" PRIu64 " bytes)", fn, offset, count,
               h->size);
    return -1;
  }
  return 0;
}

/* Check that FLAGS are known to a request of kind OP (a write takes
 * FUA, nothing else takes any) and that the device supports what OP
 * needs: FUA if asked, a writable export for a write, flush for a
 * flush.  Reports the error naming FN and returns -1; 0 if it may go
 * ahead. */
static int
check_flags_and_device (struct stabledif_handle *h, const char *fn,
                        enum io_op op, uint32_t flags)
{
  const uint32_t known = op == IO_WRITE ? STABLEDIF_CMD_FLAG_FUA : 0;

  if (flags & ~known) {
    error_set (EINVAL, "%s: unknown flags 0x%" PRIx32, fn, flags);
    return -1;
  }
  if ((flags & STABLEDIF_CMD_FLAG_FUA) && !h->can_fua) {
    error_set (ENOTSUP, "%s: the device does not support FUA", fn);
    return -1;
  }
  if (op == IO_FLUSH && !h->can_flush) {
    error_set (ENOTSUP, "%s: the device does not support flush", fn);
    return -1;
  }
  if (op == IO_WRITE && h->read_only) {
    error_set (EROFS, "%s: the export is read-only", fn);
    return -1;
  }
  return 0;
}

int
io_check_call (struct stabledif_handle *h, const char *fn, enum io_op op,
               const void *buf, size_t count, uint64_t offset,
               uint32_t flags, bool sync)
{
  if (handle_check_connected (h, fn) == -1)
    return -1;
  if (op != IO_FLUSH) {
    if (buf == NULL) {
      error_set (EINVAL, "%s: buf is NULL", fn);
      return -1;
    }
    if (check_range (h, fn, count, offset) == -1)
      return -1;
  }
  if (check_flags_and_device (h, fn, op, flags) == -1)
    return -1;
  if (sync && io_on_io_thread (h)) {
    error_set (EDEADLK, "%s: a synchronous call from a callback would wait "
               "for itself", fn);
    return -1;
  }
  return 0;
}

struct request *
io_request_new (struct stabledif_handle *h, const char *fn)
{
  struct request *r = calloc (1, sizeof *r);

  if (r == NULL) {
    error_set (errno, "%s: %s", fn, strerror (errno));
    return NULL;
  }
  r->h = h;
  r->fn = fn;
  return r;
}

uint8_t *
io_buf_get (struct io_conn *c, size_t size, size_t *cap)
{
  struct io_buf **pp, *b = NULL;
  uint8_t *p;

  if (size < sizeof (struct io_buf))
    size = sizeof (struct io_buf);
  pthread_mutex_lock (&c->lock);
  for (pp = &c->bufs; *pp != NULL; pp = &(*pp)->next)
    if ((*pp)->cap >= size && (*pp)->cap / 2 <= size) {
      b = *pp;
      *pp = b->next;
      c->buf_bytes -= b->cap;
      break;
    }
  pthread_mutex_unlock (&c->lock);
  if (b) {
    *cap = b->cap;
    return (uint8_t *) b;
  }
  p = malloc (size);
  if (p)
    *cap = size;
  return p;
}

void
io_buf_keep_locked (struct io_conn *c, struct request *r)
{
  struct io_buf *b = (struct io_buf *) r->ext;

  if (b == NULL || r->ext_cap < sizeof *b ||
      c->buf_bytes + r->ext_cap > IO_BUF_CACHE_BYTES)
    return;
  b->cap = r->ext_cap;
  b->next = c->bufs;
  c->bufs = b;
  c->buf_bytes += b->cap;
  r->ext = NULL;
}

void
io_buf_cache_free (struct io_conn *c)
{
  struct io_buf *b, *next;

  for (b = c->bufs; b != NULL; b = next) {
    next = b->next;
    free (b);
  }
  c->bufs = NULL;
  c->buf_bytes = 0;
}

struct io_conn *
io_pick_conn (struct stabledif_handle *h)
{
  struct io_conn *c = io_current_conn (h);

  /* A callback's request stays on its connection (no thread switch, the
   * data still in that CPU's cache); the others take turns. */
  if (c == NULL)
    c = &h->conns[atomic_fetch_add (&h->next_conn, 1) % h->nconns];
  return c;
}

void
io_request_free (struct request *r)
{
  if (r == NULL)
    return;
  if (r->saved != r->bounce)
    free (r->saved);
  free (r->bounce);
  free (r->tuples);
  free (r->ext);
  cover_free (&r->cover);
  forensics_free (r->changed, r->nchanged);
  free (r->msg);
  free (r);
}

void
io_request_fail (struct request *r, int errnum, const char *msg)
{
  if (r->error != 0)
    return;
  r->error = errnum ? errnum : EIO;
  if (msg)
    r->msg = strdup (msg);
}

/* The connection the calling thread is driving (io_drive), or NULL. */
static _Thread_local struct io_conn *io_driver;

static void io_drive (struct io_conn *c, struct request *r);

/* Wake the I/O thread of C (the pipe being full means it is awake
 * anyway). */
static void
wake (struct io_conn *c)
{
  char b = 0;
  ssize_t r;

  do
    r = write (c->wake[1], &b, 1);
  while (r == -1 && errno == EINTR);
}

void
io_lease_end (struct stabledif_handle *h)
{
  unsigned i;

  if (atomic_load (&h->poll_lease_ns) == 0)
    return;
  atomic_store (&h->poll_lease_ns, 0);
  /* An I/O thread sets LEASED under its lock after reading the lease:
   * either it read it before the store above and this sees LEASED, or
   * it reads 0. */
  for (i = 0; i < h->nconns; i++) {
    struct io_conn *c = &h->conns[i];
    bool need_wake;

    pthread_mutex_lock (&c->lock);
    need_wake = c->leased && !c->wake_pending;
    if (need_wake)
      c->wake_pending = true;
    pthread_mutex_unlock (&c->lock);
    if (need_wake)
      wake (c);
  }
}

int64_t
io_submit (struct stabledif_handle *h, struct request *r, uint32_t delay_us)
{
  struct io_conn *c = r->conn;
  int64_t cookie;
  bool need_wake = false, drive = false;

  pthread_mutex_lock (&c->lock);
  /* Read under c->lock: the I/O thread decides to stop under it too, so
   * either it sees this request in flight or this sees the close. */
  if (atomic_load (&h->closing) || atomic_load (&h->dead)) {
    char msg[ERROR_MAX];
    int e;

    pthread_mutex_unlock (&c->lock);
    pthread_mutex_lock (&h->lock);
    e = h->dead ? h->dead_errno : ESHUTDOWN;
    snprintf (msg, sizeof msg, "%s: %s", r->fn,
              !h->dead ? "the handle is being closed"
              : h->dead_msg ? h->dead_msg : "connection to the device lost");
    pthread_mutex_unlock (&h->lock);
    error_set_str (e, msg);
    io_request_free (r);
    return -1;
  }
  cookie = r->cookie = (int64_t) (c->cookies++ * h->nconns + c->index + 1);
  r->ready_ns = io_now_ns () + (uint64_t) delay_us * 1000;
  if (r->op == IO_WRITE && policy_pins (r->policy))
    pinset_add (&c->pins, &r->pin, r->buf, r->buf_len);
  r->next = NULL;
  if (c->queue_tail)
    c->queue_tail->next = r;
  else
    c->queue_head = r;
  c->queue_tail = r;
  c->in_flight++;
  /* While the I/O thread is busy it looks at the queue again before it
   * polls: requests submitted meanwhile need nothing more.  While it
   * waits in its poll (IDLE), a request ready now with nothing queued
   * before it is issued by this thread (io_drive), unless another thread
   * drives already (which takes it off the queue before it stops);
   * otherwise one wake-up until the I/O thread looks at the queue. */
  if (c->idle && !c->driving) {
    if (c->queue_head == r && delay_us == 0) {
      c->queue_head = c->queue_tail = NULL;
      c->driving = c->drove = true;
      drive = true;
    }
    else if (!c->wake_pending)
      need_wake = c->wake_pending = true;
  }
  pthread_mutex_unlock (&c->lock);
  if (drive)
    io_drive (c, r);
  else if (need_wake)
    wake (c);
  return cookie;
}

int
io_wait_sync (struct request *r)
{
  struct io_conn *c = r->conn;
  int ret = 0;

  io_lease_end (c->h);
  pthread_mutex_lock (&c->lock);
  while (!r->done)
    pthread_cond_wait (&c->cond, &c->lock);
  io_buf_keep_locked (c, r);
  pthread_mutex_unlock (&c->lock);
  if (r->error) {
    error_set_str (r->error, r->msg ? r->msg : strerror (r->error));
    ret = -1;
  }
  io_request_free (r);
  return ret;
}

/* Give R a message from its errno if the path made none. */
static void
default_message (struct request *r)
{
  char msg[ERROR_MAX];

  if (r->error == 0 || r->msg != NULL)
    return;
  /* No NBD error maps to ENOTCONN: libnbd fails the commands it holds
   * with it when the connection dies. */
  if (r->error == ENOTCONN) {
    char conn[48] = "";

    if (r->h->nconns > 1)
      snprintf (conn, sizeof conn, " (connection %u of %u)",
                r->conn->index + 1, r->h->nconns);
    if (r->op == IO_FLUSH)
      snprintf (msg, sizeof msg, "%s: connection to the device lost%s "
                "before it answered the flush", r->fn, conn);
    else
      snprintf (msg, sizeof msg, "%s: connection to the device lost%s "
                "before it answered the %s of data offset %" PRIu64
                " count %" PRIu64 " (LBA %" PRIu64 "-%" PRIu64 ")",
                r->fn, conn, r->op == IO_WRITE ? "write" : "read",
                r->offset, r->count, r->lba, r->lba + r->nblocks - 1);
    r->msg = strdup (msg);
    return;
  }
  if (r->op == IO_FLUSH)
    snprintf (msg, sizeof msg, "%s: the device failed the flush: %s",
              r->fn, strerror (r->error));
  else
    snprintf (msg, sizeof msg, "%s: the device failed the %s of data offset "
              "%" PRIu64 " count %" PRIu64 " (LBA %" PRIu64 "-%" PRIu64
              "): %s",
              r->fn, r->op == IO_WRITE ? "write" : "read", r->offset,
              r->count, r->lba, r->lba + r->nblocks - 1, strerror (r->error));
  r->msg = strdup (msg);
}

/* R is complete: report it and let it go. */
static void
complete (struct request *r)
{
  struct stabledif_handle *h = r->h;
  struct io_conn *c = r->conn;

  switch (r->op) {
  case IO_WRITE: write_complete (r); break;
  case IO_READ: read_complete (r); break;
  case IO_FLUSH:
    pthread_mutex_lock (&c->lock);
    c->stats.flushes++;
    pthread_mutex_unlock (&c->lock);
    break;
  }
  default_message (r);

  if (r->sync) {
    pthread_mutex_lock (&c->lock);
    pinset_remove (&c->pins, &r->pin);
    r->done = true;
    c->in_flight--;
    c->completed++;
    pthread_cond_broadcast (&c->cond);
    pthread_mutex_unlock (&c->lock);
    return;                     /* the waiter frees it */
  }

  if (r->error)
    error_set_str (r->error, r->msg ? r->msg : strerror (r->error));
  if (r->cb)
    r->cb (r->user_data, r->error);
  if (r->error && r->cb == NULL) {
    /* Before the request leaves the count wait_all waits for. */
    pthread_mutex_lock (&h->lock);
    if (h->pending_errno == 0) {
      h->pending_errno = r->error;
      h->pending_msg = r->msg ? strdup (r->msg) : NULL;
    }
    pthread_mutex_unlock (&h->lock);
  }
  pthread_mutex_lock (&c->lock);
  /* A write under policy wait stays pinned until its callback returned. */
  pinset_remove (&c->pins, &r->pin);
  c->in_flight--;
  c->completed++;
  io_buf_keep_locked (c, r);
  pthread_cond_broadcast (&c->cond);
  pthread_mutex_unlock (&c->lock);
  io_request_free (r);
}

void
io_request_put (struct request *r)
{
  struct io_conn *c = r->conn;

  if (--r->refs > 0)
    return;
  /* A driver (a caller's thread) drops the last reference when libnbd
   * refuses or abandons a command: the I/O thread completes the request,
   * so that callbacks run there and never inside a submit. */
  if (io_driver == c) {
    pthread_mutex_lock (&c->lock);
    r->next = c->handoff;
    c->handoff = r;
    pthread_mutex_unlock (&c->lock);
    return;
  }
  complete (r);
}

/* libnbd completion callback of every command: USER_DATA is the
 * request.  Drops a reference and completes the request at zero.
 * Returns 1: the command is retired. */
static int
io_command_done (void *user_data, int *error)
{
  struct request *r = user_data;

  if (*error)
    io_request_fail (r, *error, NULL);
  io_request_put (r);
  return 1;                     /* retire the command */
}

void
io_issue_chunks (struct request *r)
{
  struct stabledif_handle *h = r->h;
  uint64_t base = r->lba * h->ext_size;
  uint64_t off;

  for (off = 0; off < r->wire_count; off += h->chunk_bytes) {
    uint64_t len = r->wire_count - off;
    nbd_completion_callback cb = {
      .callback = io_command_done, .user_data = r, .free = NULL,
    };
    int64_t c;

    if (len > h->chunk_bytes)
      len = h->chunk_bytes;
    r->refs++;
    if (r->op == IO_WRITE)
      c = nbd_aio_pwrite (r->conn->nbd, r->wire + off, len, base + off, cb,
                          r->nbd_flags);
    else {
      /* Each chunk of the reply says which bytes it filled: libnbd does
       * not zero the buffer first (see libstabledif-cover.c). */
      nbd_chunk_callback chunk = {
        .callback = read_chunk, .user_data = r, .free = NULL,
      };
      c = nbd_aio_pread_structured (r->conn->nbd,
                                    (r->ext ? r->ext : r->dst) + off, len,
                                    base + off, chunk, cb, 0);
    }
    if (c == -1) {
      char msg[ERROR_MAX];
      int e = nbd_get_errno ();

      /* libnbd refuses commands once it found the connection dead
       * (EINVAL, "invalid state"): say what happened. */
      if (nbd_aio_is_dead (r->conn->nbd) ||
          nbd_aio_is_closed (r->conn->nbd)) {
        e = ENOTCONN;
        snprintf (msg, sizeof msg, "%s: connection to the device lost "
                  "while the request was sent", r->fn);
      }
      else
        snprintf (msg, sizeof msg, "%s: %s", r->fn, nbd_get_error ());
      r->refs--;
      io_request_fail (r, e, msg);
      break;
    }
  }
}

/* Issue a flush.  On one connection: the handle uses several only if
 * the server advertised multi-conn, under which a flush covers the
 * writes completed on every connection. */
static void
flush_issue (struct request *r)
{
  nbd_completion_callback cb = {
    .callback = io_command_done, .user_data = r, .free = NULL,
  };

  r->refs = 2;
  if (nbd_aio_flush (r->conn->nbd, cb, 0) == -1) {
    char msg[ERROR_MAX];
    snprintf (msg, sizeof msg, "%s: %s", r->fn, nbd_get_error ());
    r->refs--;
    io_request_fail (r, nbd_get_errno (), msg);
  }
  io_request_put (r);
}

/* The most requests the I/O thread issues before it reads the replies
 * that have come: under a flood of submissions a batch of everything
 * queued would grow with every round, and replies would wait longer and
 * longer. */
#define IO_BATCH_MAX 64

/* Take C's queued requests off its queue (c->lock held): all of them if
 * ALL, else those whose delay has passed at NOW, at most IO_BATCH_MAX.
 * Returns them in order, linked by next. */
static struct request *
take_queued (struct io_conn *c, bool all, uint64_t now)
{
  struct request *ready = NULL, **tail = &ready, *r;
  unsigned n = 0;

  while ((r = c->queue_head) != NULL &&
         (all || (r->ready_ns <= now && n++ < IO_BATCH_MAX))) {
    c->queue_head = r->next;
    if (c->queue_head == NULL)
      c->queue_tail = NULL;
    r->next = NULL;
    *tail = r;
    tail = &r->next;
  }
  return ready;
}

/* Fail the requests of the list R (never issued) with the handle's
 * reason (I/O thread of their connection). */
static void
fail_unissued (struct stabledif_handle *h, struct request *r)
{
  struct request *next;
  char msg[ERROR_MAX];
  char why[ERROR_MAX / 2];

  if (r == NULL)
    return;
  pthread_mutex_lock (&h->lock);
  snprintf (why, sizeof why, "%s",
            h->dead_msg ? h->dead_msg : "connection to the device lost");
  pthread_mutex_unlock (&h->lock);
  for (; r != NULL; r = next) {
    next = r->next;
    r->next = NULL;
    snprintf (msg, sizeof msg, "%s: %s", r->fn, why);
    io_request_fail (r, ENOTCONN, msg);
    r->refs = 1;
    io_request_put (r);
  }
}

/* Connection C is gone: remember WHY (the handle is dead: nothing new is
 * accepted), fail everything queued on C, and wake the other I/O threads
 * so they fail theirs.  Commands libnbd had accepted are failed by
 * libnbd itself (ENOTCONN); those on other connections complete as the
 * server answers them. */
static void
connection_lost (struct io_conn *c, const char *why)
{
  struct stabledif_handle *h = c->h;
  struct request *q;
  char msg[ERROR_MAX];
  unsigned i;

  pthread_mutex_lock (&h->lock);
  if (!h->dead) {
    h->dead_errno = ENOTCONN;
    if (h->nconns > 1)
      snprintf (msg, sizeof msg, "connection %u of %u to the device lost: "
                "%s", c->index + 1, h->nconns, why);
    else
      snprintf (msg, sizeof msg, "connection to the device lost: %s", why);
    h->dead_msg = strdup (msg);
    atomic_store (&h->dead, true);
  }
  pthread_mutex_unlock (&h->lock);
  pthread_mutex_lock (&c->lock);
  q = take_queued (c, true, 0);
  pthread_mutex_unlock (&c->lock);

  fail_unissued (h, q);
  for (i = 0; i < h->nconns; i++)
    if (&h->conns[i] != c)
      wake (&h->conns[i]);
}

/* Hand a request whose delay has passed to its path. */
static void
issue (struct request *r)
{
  switch (r->op) {
  case IO_WRITE: write_issue (r); break;
  case IO_READ: read_issue (r); break;
  case IO_FLUSH: flush_issue (r); break;
  }
}

static void drive_issue (struct io_conn *c, struct request *r);
static void drive_release (struct io_conn *c);

/* The calling thread (a caller's, inside io_submit) drives connection C
 * (c->driving was set while the I/O thread waited in its poll): issue R
 * (taken off the queue), then whatever other threads queued meanwhile
 * and is ready, while the I/O thread still waits and at most
 * IO_BATCH_MAX.  Then stop driving, and wake the I/O thread if it has
 * something to do that its poll would not show: requests to complete
 * (handoff) or still queued, a command libnbd could not send at once
 * (it wants the socket writable), a connection libnbd found dead. */
static void
io_drive (struct io_conn *c, struct request *r)
{
  io_driver = c;
  drive_issue (c, r);
  io_driver = NULL;
  drive_release (c);
}

/* The driver of C issues R (off the queue) and then what is queued and
 * ready, at most IO_BATCH_MAX in all; once libnbd found the connection
 * dead, what is left goes back to the queue for the I/O thread. */
static void
drive_issue (struct io_conn *c, struct request *r)
{
  unsigned n = 0;

  while (r != NULL) {
    struct request *next = r->next;

    if (nbd_aio_is_dead (c->nbd) || nbd_aio_is_closed (c->nbd)) {
      /* The I/O thread fails them with the reason of the loss. */
      struct request *last = r;

      while (last->next)
        last = last->next;
      pthread_mutex_lock (&c->lock);
      last->next = c->queue_head;
      if (c->queue_head == NULL)
        c->queue_tail = last;
      c->queue_head = r;
      pthread_mutex_unlock (&c->lock);
      break;
    }
    r->next = NULL;
    issue (r);
    n++;
    r = next;
    if (r == NULL && n < IO_BATCH_MAX) {
      pthread_mutex_lock (&c->lock);
      if (c->idle && c->queue_head && c->queue_head->ready_ns <= io_now_ns ())
        r = take_queued (c, false, io_now_ns ());
      pthread_mutex_unlock (&c->lock);
    }
  }
}

/* The driver of C (io_drive, or stabledif_poll) lets it go: wake the I/O
 * thread if it has something to do that its poll would not show, and
 * pollers waiting for the connection. */
static void
drive_release (struct io_conn *c)
{
  bool want_write, gone, need_wake;   /* want_write: libnbd wants to
                                         write, the I/O thread's poll
                                         does not wait for it */

  /* Still the only thread on the connection: libnbd's state is ours to
   * read (and never under c->lock, which its callbacks take). */
  want_write = (nbd_aio_get_direction (c->nbd) &
                ~atomic_load (&c->poll_dir) &
                LIBNBD_AIO_DIRECTION_WRITE) != 0;
  gone = nbd_aio_is_dead (c->nbd) || nbd_aio_is_closed (c->nbd);

  pthread_mutex_lock (&c->lock);
  /* An I/O thread that leaves its socket to pollers leaves them the rest
   * of a send too: the next poll finishes it (or the I/O thread, once
   * the lease runs out). */
  if (c->leased)
    want_write = false;
  c->driving = c->poller = false;
  pthread_cond_broadcast (&c->drive_done);
  if (c->pollers_waiting > 0)
    pthread_cond_broadcast (&c->cond);
  need_wake = c->idle && !c->wake_pending &&
    (c->handoff || c->queue_head || want_write || gone);
  if (need_wake)
    c->wake_pending = true;
  pthread_mutex_unlock (&c->lock);
  if (need_wake)
    wake (c);
}

/* Connection C was declared lost (connection_lost) for a reason libnbd
 * has not seen itself: a failed poll, or a socket that is no longer
 * open.  Make libnbd fail the commands it holds (ENOTCONN, through their
 * completion callbacks): if the socket is still OPEN, shut it down so
 * that libnbd reads end-of-file; then let libnbd's state machine run in
 * the direction it wants until it finds the connection dead, a few steps
 * at most (reading end-of-file, or a socket that is gone, kills it at
 * once). */
static void
abandon_commands (struct io_conn *c, bool open)
{
  int fd = nbd_aio_get_fd (c->nbd);
  unsigned step;

  if (open && fd >= 0)
    shutdown (fd, SHUT_RDWR);
  for (step = 0; step < 8; step++) {
    unsigned dir;

    if (nbd_aio_is_dead (c->nbd) || nbd_aio_is_closed (c->nbd))
      return;
    dir = nbd_aio_get_direction (c->nbd);
    if (dir & LIBNBD_AIO_DIRECTION_READ)
      nbd_aio_notify_read (c->nbd);
    else if (dir & LIBNBD_AIO_DIRECTION_WRITE)
      nbd_aio_notify_write (c->nbd);
    else
      return;
  }
}

/* Poll of connection C failed with errno ERR (not EINTR): the
 * connection is lost, and everything in flight or queued on it fails.
 * A short pause keeps a poll that keeps failing from spinning. */
static void
poll_failed (struct io_conn *c, int err)
{
  const struct timespec pause = { .tv_sec = 0, .tv_nsec = 1000000 };
  char why[256];

  snprintf (why, sizeof why, "poll: %s", strerror (err));
  connection_lost (c, why);
  abandon_commands (c, true);
  nanosleep (&pause, NULL);
}

/* Whether C's libnbd handle has died; if so, connection_lost. */
static void
check_alive (struct io_conn *c, const char *why)
{
  if (nbd_aio_is_dead (c->nbd) || nbd_aio_is_closed (c->nbd))
    connection_lost (c, why);
}

/* Whether a reply is waiting on C's socket, which libnbd wants to read:
 * 1 if so, 0 if not (or the socket is in another state that the next
 * full poll deals with), -1 if the poll failed (connection lost).  With
 * no command of libnbd in flight no reply can come: 0 without a poll
 * (one request at a time costs no extra system call). */
static int
reply_waiting (struct io_conn *c)
{
  const struct timespec zero = { .tv_sec = 0, .tv_nsec = 0 };
  struct pollfd p;
  int r;

  if (nbd_aio_in_flight (c->nbd) <= 0 ||
      nbd_aio_is_dead (c->nbd) || nbd_aio_is_closed (c->nbd) ||
      !(nbd_aio_get_direction (c->nbd) & LIBNBD_AIO_DIRECTION_READ))
    return 0;
  p.fd = nbd_aio_get_fd (c->nbd);
  p.events = POLLIN;
  p.revents = 0;
  if (p.fd < 0)
    return 0;
  r = c->h->poll (&p, 1, &zero, NULL);
  if (r == -1 && errno == EINTR)
    return 0;                   /* the next full poll looks again */
  if (r == -1) {
    poll_failed (c, errno);
    return -1;
  }
  return (p.revents & POLLIN) != 0;
}

/* C's socket polled REV while libnbd wanted DIR: let libnbd read or
 * write.  In the middle of sending commands libnbd reads one reply per
 * notification, so go on reading while replies are waiting, at most
 * IO_BATCH_MAX more: replies keep pace with the requests issued, however
 * many are queued.  A failure of libnbd loses the connection. */
static void
service_socket (struct io_conn *c, unsigned dir, short rev)
{
  unsigned n;
  int rc = 0, w;

  if ((rev & POLLIN) ||
      ((rev & (POLLHUP | POLLERR)) && (dir & LIBNBD_AIO_DIRECTION_READ)))
    rc = nbd_aio_notify_read (c->nbd);
  else if (rev & (POLLOUT | POLLHUP | POLLERR))
    rc = nbd_aio_notify_write (c->nbd);
  for (n = 0; rc == 0 && n < IO_BATCH_MAX; n++) {
    w = reply_waiting (c);
    if (w == -1)
      return;
    if (w == 0)
      break;
    rc = nbd_aio_notify_read (c->nbd);
  }
  if (rc == -1)
    connection_lost (c, nbd_get_error () ? nbd_get_error ()
                     : strerror (nbd_get_errno ()));
  else
    check_alive (c, "the server closed the connection");
}

/* A poller (stabledif_poll) read C's socket while the I/O thread's poll
 * waited: what that poll saw may have been read already, and libnbd,
 * told to read with nothing to read, would leave its ready state and
 * hold back the commands it is given until a reply comes.  Poll the
 * socket again, at once, in libnbd's direction DIR: its events now (0
 * if none, or if that poll failed: the next full poll sees it). */
static short
poll_again (struct io_conn *c, unsigned dir)
{
  const struct timespec zero = { .tv_sec = 0, .tv_nsec = 0 };
  struct pollfd p;

  p.fd = nbd_aio_get_fd (c->nbd);
  p.events = ((dir & LIBNBD_AIO_DIRECTION_READ) ? POLLIN : 0) |
    ((dir & LIBNBD_AIO_DIRECTION_WRITE) ? POLLOUT : 0);
  p.revents = 0;
  if (p.fd < 0 || c->h->poll (&p, 1, &zero, NULL) <= 0)
    return 0;
  return p.revents;
}

/* Whether the idle I/O thread of C leaves its socket to pollers now: the
 * pollers' lease runs and the thread has nothing to do -- no wake-up
 * pending, no queued request due.  Then *TS is how long it polls its
 * wake-up pipe alone: until the lease ends or the first queued request
 * is due, whichever comes first.  A lease that was never given or has
 * run out is seen without the lock (C->leased is then left as it is:
 * the caller clears it after its poll); otherwise C->leased is set under
 * C->lock, where io_lease_end looks for it. */
static bool
lease_poll (struct io_conn *c, struct timespec *ts)
{
  uint64_t end = atomic_load (&c->h->poll_lease_ns), now;
  bool leased;

  if (end == 0)
    return false;
  now = io_now_ns ();
  if (end <= now)
    return false;
  pthread_mutex_lock (&c->lock);
  /* Read again under the lock: io_lease_end stores 0, then looks at
   * C->leased under it. */
  end = atomic_load (&c->h->poll_lease_ns);
  leased = end > now && !c->wake_pending;
  if (leased && c->queue_head) {
    if (c->queue_head->ready_ns <= now)
      leased = false;
    else if (c->queue_head->ready_ns < end)
      end = c->queue_head->ready_ns;
  }
  c->leased = leased;
  pthread_mutex_unlock (&c->lock);
  if (leased) {
    ts->tv_sec = (end - now) / 1000000000u;
    ts->tv_nsec = (end - now) % 1000000000u;
  }
  return leased;
}

/* The I/O thread of connection ARG: issue requests whose delay has
 * passed, in order; poll the NBD socket (in the direction libnbd wants)
 * and the wake-up pipe, with a timeout until the next request becomes
 * ready; run libnbd's state machine, which completes requests.  Once the
 * handle is dead it fails what is queued instead.  Stops when the handle
 * is closing and nothing of this connection is in flight. */
static void *
io_thread (void *arg)
{
  struct io_conn *c = arg;
  struct stabledif_handle *h = c->h;
  bool lost = false;            /* this connection died */

  for (;;) {
    struct request *ready, *r, *done;
    struct timespec ts, *timeout = NULL;
    struct pollfd fds[2];
    nfds_t nfds = 1;
    bool stop, dead, more, idle, leased;
    uint64_t now;
    unsigned dir;
    int pr;

    pthread_mutex_lock (&c->lock);
    /* Anything submitted from here on needs a new wake-up; anything
     * submitted before is taken off the queue now. */
    c->wake_pending = false;
    done = c->handoff;
    c->handoff = NULL;
    now = io_now_ns ();
    dead = atomic_load (&h->dead);
    ready = take_queued (c, dead, now);
    if (c->queue_head) {
      uint64_t wait = c->queue_head->ready_ns > now
        ? c->queue_head->ready_ns - now : 0;
      ts.tv_sec = wait / 1000000000u;
      ts.tv_nsec = wait % 1000000000u;
      timeout = &ts;
    }
    stop = atomic_load (&h->closing) && c->in_flight == 0;
    /* Nothing to do: the poll below waits, and a submit from another
     * thread drives or wakes this one (io_submit). */
    idle = c->idle = !stop && ready == NULL && done == NULL;
    if (idle && c->pollers_waiting > 0)
      pthread_cond_broadcast (&c->cond);  /* a poller may drive now */
    atomic_store (&c->poll_dir, 0);
    pthread_mutex_unlock (&c->lock);

    if (stop)
      break;
    if (done) {
      /* Requests a driver could not issue or libnbd abandoned while it
       * drove: complete them here, and see whether libnbd found the
       * connection dead then. */
      while (done) {
        r = done->next;
        done->next = NULL;
        complete (done);
        done = r;
      }
      check_alive (c, nbd_get_error () ? nbd_get_error ()
                   : "the server closed the connection");
      if (ready == NULL)
        continue;
    }
    if (ready) {
      if (dead)
        fail_unissued (h, ready);
      else {
        for (r = ready; r != NULL; ) {
          struct request *next = r->next;

          /* Sending an earlier one may have found the connection
           * dead: the rest fail like requests queued at the loss. */
          if (nbd_aio_is_dead (c->nbd) || nbd_aio_is_closed (c->nbd)) {
            connection_lost (c, nbd_get_error () ? nbd_get_error ()
                             : "the server closed the connection");
            fail_unissued (h, r);
            break;
          }
          r->next = NULL;
          issue (r);
          r = next;
        }
        check_alive (c, nbd_get_error () ? nbd_get_error ()
                     : "the server closed the connection");
      }
      /* If more is queued, read the replies that have come before
       * taking it: under a flood of submissions the queue would never
       * be empty, and replies left unread would stall the server and
       * every request waiting for one. */
      pthread_mutex_lock (&c->lock);
      more = c->queue_head != NULL;
      pthread_mutex_unlock (&c->lock);
      if (!more)
        continue;               /* look at the queue again */
      ts.tv_sec = ts.tv_nsec = 0;
      timeout = &ts;
    }

    fds[0].fd = c->wake[0];
    fds[0].events = POLLIN;
    fds[0].revents = 0;
    lost = lost || nbd_aio_is_dead (c->nbd) || nbd_aio_is_closed (c->nbd);
    dir = lost ? 0 : nbd_aio_get_direction (c->nbd);
    /* Nothing to do but libnbd's (replies to read, a command to finish
     * sending), and a poller's lease running: leave the socket to the
     * pollers until it runs out (a wake-up ends it). */
    leased = idle && dir != 0 && lease_poll (c, &ts);
    if (leased) {
      timeout = &ts;
      dir = 0;
    }
    atomic_store (&c->poll_dir, dir);
    if (dir != 0) {
      fds[1].fd = nbd_aio_get_fd (c->nbd);
      fds[1].events = ((dir & LIBNBD_AIO_DIRECTION_READ) ? POLLIN : 0) |
        ((dir & LIBNBD_AIO_DIRECTION_WRITE) ? POLLOUT : 0);
      fds[1].revents = 0;
      if (fds[1].fd >= 0)
        nfds = 2;
    }

    pr = h->poll (fds, nfds, timeout, NULL);
    /* A lease the pollers renewed while this poll waited: poll the pipe
     * again until its new end, still idle.  Leaving the poll would mean
     * waiting for the thread that drives the connection (a caller's, in
     * a submit or a poll) and making the next poller wait for this one:
     * two thread switches for nothing, as often as the lease is long. */
    while (leased && pr == 0 && lease_poll (c, &ts))
      pr = h->poll (fds, nfds, &ts, NULL);
    if (idle) {
      int e = errno;
      bool drove, polled;

      /* A caller that drives (io_drive) has the connection until it is
       * done; what libnbd wanted when the poll began may have changed. */
      pthread_mutex_lock (&c->lock);
      c->idle = c->leased = false;
      /* A poller may hold the connection for as long as its caller
       * waits; a request whose race delay ran out (this poll's timeout,
       * or one queued while it woke for another reason) needs it now.
       * The socket and the pipe wake the poller too.  (A lease that ran
       * out needs nothing from the poller.) */
      if (c->driving && c->poller && c->queue_head)
        wake (c);
      while (c->driving)
        pthread_cond_wait (&c->drive_done, &c->lock);
      drove = c->drove;
      polled = c->polled;
      c->drove = c->polled = false;
      pthread_mutex_unlock (&c->lock);
      errno = e;
      if (drove && pr >= 0 && nfds == 2 && !lost) {
        if (nbd_aio_is_dead (c->nbd) || nbd_aio_is_closed (c->nbd)) {
          check_alive (c, nbd_get_error () ? nbd_get_error ()
                       : "the server closed the connection");
          continue;
        }
        dir = nbd_aio_get_direction (c->nbd);
        if (!(dir & LIBNBD_AIO_DIRECTION_READ))
          fds[1].revents &= ~POLLIN;
        if (!(dir & LIBNBD_AIO_DIRECTION_WRITE))
          fds[1].revents &= ~POLLOUT;
        if (polled && fds[1].revents)
          fds[1].revents = poll_again (c, dir);
      }
    }
    if (pr == -1) {
      if (errno != EINTR) {
        poll_failed (c, errno);
        lost = true;
      }
      continue;
    }
    if (fds[0].revents & POLLIN) {
      char buf[64];
      /* Usually one byte (see wake_pending): one read empties the pipe;
       * a full buffer means there may be more. */
      while (read (c->wake[0], buf, sizeof buf) == (ssize_t) sizeof buf)
        ;
    }
    if (nfds == 2 && (fds[1].revents & POLLNVAL)) {
      /* The socket was closed under libnbd: it would poll the same way
       * for ever. */
      connection_lost (c, "poll: the socket is no longer open");
      abandon_commands (c, false);
      lost = true;
    }
    else if (nfds == 2 && fds[1].revents)
      service_socket (c, dir, fds[1].revents);
  }
  return NULL;
}

int
io_start (struct stabledif_handle *h)
{
  sigset_t all, old;
  unsigned i;
  int r = 0;

  for (i = 0; i < h->nconns; i++) {
    struct io_conn *c = &h->conns[i];
    if (pipe2 (c->wake, O_NONBLOCK | O_CLOEXEC) == -1) {
      error_set (errno, "stabledif_connect_uri: pipe: %s", strerror (errno));
      return -1;
    }
  }
  /* The I/O threads take no signals: they belong to the caller. */
  sigfillset (&all);
  pthread_sigmask (SIG_SETMASK, &all, &old);
  for (i = 0; i < h->nconns && r == 0; i++) {
    struct io_conn *c = &h->conns[i];
    r = pthread_create (&c->thread, NULL, io_thread, c);
    if (r == 0)
      c->running = true;
  }
  pthread_sigmask (SIG_SETMASK, &old, NULL);
  if (r != 0) {
    error_set (r, "stabledif_connect_uri: starting the I/O thread of "
               "connection %u: %s", i, strerror (r));
    io_stop (h);
    return -1;
  }
  return 0;
}

void
io_stop (struct stabledif_handle *h)
{
  unsigned i;

  /* The I/O threads finish what is in flight themselves, no poller's
   * lease holding them back. */
  atomic_store (&h->poll_lease_ns, 0);
  atomic_store (&h->closing, true);
  for (i = 0; i < h->nconns; i++)
    if (h->conns[i].running)
      wake (&h->conns[i]);
  for (i = 0; i < h->nconns; i++)
    if (h->conns[i].running) {
      pthread_join (h->conns[i].thread, NULL);
      h->conns[i].running = false;
    }
}

/* Submit a flush. */
static int64_t
flush_submit (struct stabledif_handle *h, const char *fn, uint32_t flags,
              stabledif_completion_callback cb, void *user_data, bool sync,
              struct request **rp)
{
  struct request *r;

  if (io_check_call (h, fn, IO_FLUSH, NULL, 0, 0, flags, sync) == -1)
    return -1;
  r = io_request_new (h, fn);
  if (r == NULL)
    return -1;
  r->op = IO_FLUSH;
  r->conn = io_pick_conn (h);
  r->cb = cb;
  r->user_data = user_data;
  r->sync = sync;
  *rp = r;
  return io_submit (h, r, 0);
}

/* Flush, asynchronously. */
int64_t
stabledif_aio_flush (struct stabledif_handle *h, uint32_t flags,
                     stabledif_completion_callback cb, void *user_data)
{
  struct request *r;

  return flush_submit (h, "stabledif_aio_flush", flags, cb, user_data,
                       false, &r);
}

/* Flush: writes completed before it are durable when it returns. */
int
stabledif_flush (struct stabledif_handle *h, uint32_t flags)
{
  struct request *r;

  if (flush_submit (h, "stabledif_flush", flags, NULL, NULL, true, &r) == -1)
    return -1;
  return io_wait_sync (r);
}

/* Wait until no request is in flight; report the first failure of an
 * asynchronous request that had no callback. */
int
stabledif_wait_all (struct stabledif_handle *h)
{
  static const char fn[] = "stabledif_wait_all";
  unsigned i;
  int e;
  char *msg;

  if (handle_check_connected (h, fn) == -1)
    return -1;
  if (io_on_io_thread (h)) {
    error_set (EDEADLK, "%s: called from a callback: it would wait for "
               "itself", fn);
    return -1;
  }
  io_lease_end (h);
  /* Each connection in turn: a request that completes on one while this
   * waits for another has left its count already. */
  for (i = 0; i < h->nconns; i++) {
    struct io_conn *c = &h->conns[i];
    pthread_mutex_lock (&c->lock);
    while (c->in_flight > 0)
      pthread_cond_wait (&c->cond, &c->lock);
    pthread_mutex_unlock (&c->lock);
  }
  pthread_mutex_lock (&h->lock);
  e = h->pending_errno;
  msg = h->pending_msg;
  h->pending_errno = 0;
  h->pending_msg = NULL;
  pthread_mutex_unlock (&h->lock);
  if (e) {
    error_set_str (e, msg ? msg : strerror (e));
    free (msg);
    return -1;
  }
  return 0;
}

/* Requests submitted and not yet completed. */
int64_t
stabledif_get_in_flight (struct stabledif_handle *h)
{
  int64_t n = 0;
  unsigned i;

  if (handle_check_connected (h, "stabledif_get_in_flight") == -1)
    return -1;
  for (i = 0; i < h->nconns; i++) {
    pthread_mutex_lock (&h->conns[i].lock);
    n += (int64_t) h->conns[i].in_flight;
    pthread_mutex_unlock (&h->conns[i].lock);
  }
  return n;
}

/* ---- stabledif_poll ------------------------------------------------- */

/* How long a poller waits on the connections it holds before it looks
 * at those it does not (their I/O threads complete their requests). */
#define IO_POLL_SLICE_NS 1000000u

/* Take up to STABLEDIF_MAX_CONNECTIONS connections of H whose I/O
 * threads are idle and which nobody drives into HELD: the calling thread
 * drives them (as a poller) until poll_held lets them go.  Returns how
 * many. */
static unsigned
poll_take (struct stabledif_handle *h, struct io_conn **held)
{
  unsigned i, n = 0;

  for (i = 0; i < h->nconns; i++) {
    struct io_conn *c = &h->conns[i];

    pthread_mutex_lock (&c->lock);
    if (c->idle && !c->driving) {
      c->driving = c->drove = c->poller = c->polled = true;
      held[n++] = c;
    }
    pthread_mutex_unlock (&c->lock);
  }
  return n;
}

/* The calling thread holds the N connections HELD (poll_take): wait up
 * to TIMEOUT (NULL: no limit) for their sockets, in the direction libnbd
 * wants, and their wake-up pipes; let libnbd read or write what is ready
 * (the requests it completes are completed here, callbacks and all);
 * take up a wake-up (a submit queued a request while this drove, the
 * I/O thread needs its connection, the handle closes or died); issue
 * what is queued and ready (or fail it, once the handle is dead); let
 * the connections go.  Returns 0, or -1 with errno set if the poll
 * failed (nothing else happened then). */
static int
poll_held (struct io_conn **held, unsigned n, const struct timespec *timeout)
{
  struct pollfd fds[2 * STABLEDIF_MAX_CONNECTIONS];
  unsigned dirs[STABLEDIF_MAX_CONNECTIONS];
  unsigned i;
  int pr, e = 0;

  for (i = 0; i < n; i++) {
    struct io_conn *c = held[i];
    struct pollfd *p = &fds[2 * i];

    p[0].fd = c->wake[0];
    p[0].events = POLLIN;
    p[0].revents = 0;
    dirs[i] = nbd_aio_is_dead (c->nbd) || nbd_aio_is_closed (c->nbd)
      ? 0 : nbd_aio_get_direction (c->nbd);
    /* poll(2) ignores a negative descriptor. */
    p[1].fd = dirs[i] ? nbd_aio_get_fd (c->nbd) : -1;
    p[1].events = ((dirs[i] & LIBNBD_AIO_DIRECTION_READ) ? POLLIN : 0) |
      ((dirs[i] & LIBNBD_AIO_DIRECTION_WRITE) ? POLLOUT : 0);
    p[1].revents = 0;
  }
  pr = ppoll (fds, 2 * n, timeout, NULL);
  if (pr == -1) {
    e = errno;
    if (e == EINTR)
      e = 0;                    /* the caller looks again */
    pr = 0;
  }

  for (i = 0; i < n; i++) {
    struct io_conn *c = held[i];
    struct stabledif_handle *h = c->h;
    struct pollfd *p = &fds[2 * i];
    struct request *r;
    bool dead;

    if (pr > 0 && (p[0].revents & POLLIN)) {
      char buf[64];

      /* As the I/O thread does at the top of its loop: what was queued
       * before is taken below. */
      pthread_mutex_lock (&c->lock);
      c->wake_pending = false;
      while (read (c->wake[0], buf, sizeof buf) == (ssize_t) sizeof buf)
        ;
      pthread_mutex_unlock (&c->lock);
    }
    if (pr > 0 && (p[1].revents & POLLNVAL)) {
      connection_lost (c, "poll: the socket is no longer open");
      abandon_commands (c, false);
    }
    else if (pr > 0 && p[1].revents)
      service_socket (c, dirs[i], p[1].revents);

    pthread_mutex_lock (&c->lock);
    dead = atomic_load (&h->dead);
    r = take_queued (c, dead, io_now_ns ());
    pthread_mutex_unlock (&c->lock);
    if (dead)
      fail_unissued (h, r);
    else if (r)
      drive_issue (c, r);
    drive_release (c);
  }
  errno = e;
  return e ? -1 : 0;
}

/* Requests of H completed so far: the sum over its connections, each
 * connection's own count stored in SEEN. */
static uint64_t
poll_completed (struct stabledif_handle *h, uint64_t *seen)
{
  uint64_t total = 0;
  unsigned i;

  for (i = 0; i < h->nconns; i++) {
    pthread_mutex_lock (&h->conns[i].lock);
    seen[i] = h->conns[i].completed;
    total += seen[i];
    pthread_mutex_unlock (&h->conns[i].lock);
  }
  return total;
}

/* Wait on connection C's COND until one of its requests completes after
 * SEEN, the connection can be driven, or the monotonic time UNTIL_NS
 * passes. */
static void
poll_wait_conn (struct io_conn *c, uint64_t seen, uint64_t until_ns)
{
  struct timespec ts = {
    .tv_sec = until_ns / 1000000000u, .tv_nsec = until_ns % 1000000000u,
  };

  pthread_mutex_lock (&c->lock);
  c->pollers_waiting++;
  while (c->completed == seen && !(c->idle && !c->driving) &&
         pthread_cond_timedwait (&c->cond, &c->lock, &ts) == 0)
    ;
  c->pollers_waiting--;
  pthread_mutex_unlock (&c->lock);
}

/* Wait for requests of H to complete, reading replies on this thread
 * where a connection's I/O thread is idle. */
int
stabledif_poll (struct stabledif_handle *h, int timeout_ms)
{
  static const char fn[] = "stabledif_poll";
  struct io_conn *held[STABLEDIF_MAX_CONNECTIONS];
  uint64_t seen[STABLEDIF_MAX_CONNECTIONS];
  uint64_t start, done = 0, deadline = UINT64_MAX;
  unsigned turn = 0;
  bool first = true;
  int ret = 0;

  if (handle_check_connected (h, fn) == -1)
    return -1;
  if (timeout_ms < -1) {
    error_set (EINVAL, "%s: timeout_ms %d is negative (-1 waits without a "
               "limit)", fn, timeout_ms);
    return -1;
  }
  if (io_on_io_thread (h)) {
    error_set (EDEADLK, "%s: called from a completion callback: it would "
               "wait for itself", fn);
    return -1;
  }
  if (timeout_ms >= 0)
    deadline = io_now_ns () + (uint64_t) timeout_ms * 1000000u;
  start = poll_completed (h, seen);
  io_poller = h;
  atomic_store (&h->poll_lease_ns, io_now_ns () + h->poll_lease_len_ns);
  for (;;) {
    uint64_t now, until;
    struct timespec ts, *tsp = NULL;
    unsigned n;

    done = poll_completed (h, seen) - start;
    if (done > 0)
      break;
    if (atomic_load (&h->dead) && stabledif_get_in_flight (h) == 0) {
      pthread_mutex_lock (&h->lock);
      error_set (ENOTCONN, "%s: %s", fn,
                 h->dead_msg ? h->dead_msg : "connection to the device lost");
      pthread_mutex_unlock (&h->lock);
      ret = -1;
      break;
    }
    /* Nothing left to wait for: a completion that came just before the
     * call (whose callback the caller may not have looked at yet) must
     * not make it wait for one that never comes. */
    if (stabledif_get_in_flight (h) == 0)
      break;
    now = io_now_ns ();
    if (!first && now >= deadline)
      break;                    /* timed out: 0 */
    first = false;
    until = deadline;
    if (h->poll_pretake)
      h->poll_pretake (h);
    n = poll_take (h, held);
    /* An I/O thread may have completed a request between the look above
     * and the take (the last one, perhaps: then nothing would wake this
     * poll).  The connections held complete nothing behind this thread's
     * back from here on: look again before waiting on them. */
    if (n > 0 && (poll_completed (h, seen) != start ||
                  stabledif_get_in_flight (h) == 0)) {
      unsigned i;

      for (i = 0; i < n; i++)
        drive_release (held[i]);
      continue;
    }
    /* Requests of the connections not held complete on their I/O
     * threads: look at them again after a slice. */
    if (n < h->nconns && h->nconns > 1 &&
        (until == UINT64_MAX || until - now > IO_POLL_SLICE_NS))
      until = now + IO_POLL_SLICE_NS;
    if (n > 0) {
      if (until != UINT64_MAX) {
        uint64_t left = until > now ? until - now : 0;
        ts.tv_sec = left / 1000000000u;
        ts.tv_nsec = left % 1000000000u;
        tsp = &ts;
      }
      if (poll_held (held, n, tsp) == -1) {
        error_set (errno, "%s: poll: %s", fn, strerror (errno));
        ret = -1;
        break;
      }
    }
    else {
      unsigned i = turn++ % h->nconns;
      poll_wait_conn (&h->conns[i], seen[i], until);
    }
  }
  io_poller = NULL;
  /* The caller is expected back soon: replies that come meanwhile wait
   * for it (at most the lease) rather than wake an I/O thread. */
  if (ret == 0)
    atomic_store (&h->poll_lease_ns, io_now_ns () + h->poll_lease_len_ns);
  return ret == -1 ? -1 : done > INT_MAX ? INT_MAX : (int) done;
}
