/* libstabledif: requests, the I/O thread, flush and wait_all.
 *
 * Callers build a request and queue it (io_submit).  The I/O thread takes
 * requests off the queue in order once their race delay has passed,
 * hands them to the path that issues them (copy-out for writes), polls
 * the libnbd socket and a wake-up pipe, and completes requests when
 * their last NBD command is answered: path completion, then the caller's
 * callback or the waiting synchronous caller.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

bool
io_on_io_thread (struct stabledif_handle *h)
{
  /* io_thread and io_running are written before the handle is published
   * as connected, and callers got here after seeing that. */
  return h->io_running && pthread_equal (pthread_self (), h->io_thread);
}

int
io_check_range (struct stabledif_handle *h, const char *fn,
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
io_buf_get (struct stabledif_handle *h, size_t size, size_t *cap)
{
  struct io_buf **pp, *b = NULL;
  uint8_t *p;

  if (size < sizeof (struct io_buf))
    size = sizeof (struct io_buf);
  pthread_mutex_lock (&h->lock);
  for (pp = &h->bufs; *pp != NULL; pp = &(*pp)->next)
    if ((*pp)->cap >= size && (*pp)->cap / 2 <= size) {
      b = *pp;
      *pp = b->next;
      h->buf_bytes -= b->cap;
      break;
    }
  pthread_mutex_unlock (&h->lock);
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
io_buf_keep_locked (struct stabledif_handle *h, struct request *r)
{
  struct io_buf *b = (struct io_buf *) r->ext;

  if (b == NULL || r->ext_cap < sizeof *b ||
      h->buf_bytes + r->ext_cap > IO_BUF_CACHE_BYTES)
    return;
  b->cap = r->ext_cap;
  b->next = h->bufs;
  h->bufs = b;
  h->buf_bytes += b->cap;
  r->ext = NULL;
}

void
io_buf_cache_free (struct stabledif_handle *h)
{
  struct io_buf *b, *next;

  for (b = h->bufs; b != NULL; b = next) {
    next = b->next;
    free (b);
  }
  h->bufs = NULL;
  h->buf_bytes = 0;
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

/* Wake the I/O thread (the pipe being full means it is awake anyway). */
static void
wake (struct stabledif_handle *h)
{
  char c = 0;
  ssize_t r;

  do
    r = write (h->wake[1], &c, 1);
  while (r == -1 && errno == EINTR);
}

int64_t
io_submit (struct stabledif_handle *h, struct request *r, uint32_t delay_us)
{
  int64_t cookie;
  bool need_wake;

  pthread_mutex_lock (&h->lock);
  if (h->closing || h->dead) {
    int e = h->dead ? h->dead_errno : ESHUTDOWN;
    char msg[ERROR_MAX];
    snprintf (msg, sizeof msg, "%s: %s", r->fn,
              !h->dead ? "the handle is being closed"
              : h->dead_msg ? h->dead_msg : "connection to the device lost");
    pthread_mutex_unlock (&h->lock);
    error_set_str (e, msg);
    io_request_free (r);
    return -1;
  }
  cookie = r->cookie = ++h->next_cookie;
  r->ready_ns = io_now_ns () + (uint64_t) delay_us * 1000;
  if (r->op == IO_WRITE && policy_pins (r->policy))
    pinset_add (&h->pins, &r->pin, r->buf, r->count);
  r->next = NULL;
  if (h->queue_tail)
    h->queue_tail->next = r;
  else
    h->queue_head = r;
  h->queue_tail = r;
  h->in_flight++;
  /* One wake-up until the I/O thread looks at the queue again: while it
   * is busy, requests submitted meanwhile cost no system call.  A
   * callback submitting on the I/O thread needs none: that thread looks
   * at the queue before it polls again. */
  need_wake = !h->wake_pending && !io_on_io_thread (h);
  if (need_wake)
    h->wake_pending = true;
  pthread_mutex_unlock (&h->lock);
  if (need_wake)
    wake (h);
  return cookie;
}

int
io_wait_sync (struct stabledif_handle *h, struct request *r)
{
  int ret = 0;

  pthread_mutex_lock (&h->lock);
  while (!r->done)
    pthread_cond_wait (&h->cond, &h->lock);
  io_buf_keep_locked (h, r);
  pthread_mutex_unlock (&h->lock);
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

  switch (r->op) {
  case IO_WRITE: write_complete (r); break;
  case IO_READ: read_complete (r); break;
  case IO_FLUSH:
    pthread_mutex_lock (&h->lock);
    h->stats.flushes++;
    pthread_mutex_unlock (&h->lock);
    break;
  }
  default_message (r);

  if (r->sync) {
    pthread_mutex_lock (&h->lock);
    pinset_remove (&h->pins, &r->pin);
    r->done = true;
    h->in_flight--;
    pthread_cond_broadcast (&h->cond);
    pthread_mutex_unlock (&h->lock);
    return;                     /* the waiter frees it */
  }

  if (r->error)
    error_set_str (r->error, r->msg ? r->msg : strerror (r->error));
  if (r->cb)
    r->cb (r->user_data, r->error);
  pthread_mutex_lock (&h->lock);
  if (r->error && r->cb == NULL && h->pending_errno == 0) {
    h->pending_errno = r->error;
    h->pending_msg = r->msg ? strdup (r->msg) : NULL;
  }
  /* A write under policy wait stays pinned until its callback returned. */
  pinset_remove (&h->pins, &r->pin);
  h->in_flight--;
  io_buf_keep_locked (h, r);
  pthread_cond_broadcast (&h->cond);
  pthread_mutex_unlock (&h->lock);
  io_request_free (r);
}

void
io_request_put (struct request *r)
{
  if (--r->refs > 0)
    return;
  complete (r);
}

int
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
      c = nbd_aio_pwrite (h->nbd, r->wire + off, len, base + off, cb,
                          r->nbd_flags);
    else
      c = nbd_aio_pread (h->nbd, (r->ext ? r->ext : r->dst) + off, len,
                         base + off, cb, 0);
    if (c == -1) {
      char msg[ERROR_MAX];
      snprintf (msg, sizeof msg, "%s: %s", r->fn, nbd_get_error ());
      r->refs--;
      io_request_fail (r, nbd_get_errno (), msg);
      break;
    }
  }
}

/* Issue a flush. */
static void
flush_issue (struct request *r)
{
  nbd_completion_callback cb = {
    .callback = io_command_done, .user_data = r, .free = NULL,
  };

  r->refs = 2;
  if (nbd_aio_flush (r->h->nbd, cb, 0) == -1) {
    char msg[ERROR_MAX];
    snprintf (msg, sizeof msg, "%s: %s", r->fn, nbd_get_error ());
    r->refs--;
    io_request_fail (r, nbd_get_errno (), msg);
  }
  io_request_put (r);
}

/* The connection is gone: remember WHY, fail everything queued.
 * Commands libnbd had accepted are failed by libnbd itself (ENOTCONN). */
static void
connection_lost (struct stabledif_handle *h, const char *why)
{
  struct request *q, *next;
  char msg[ERROR_MAX];

  pthread_mutex_lock (&h->lock);
  if (!h->dead) {
    h->dead = true;
    h->dead_errno = ENOTCONN;
    snprintf (msg, sizeof msg, "connection to the device lost: %s", why);
    h->dead_msg = strdup (msg);
  }
  q = h->queue_head;
  h->queue_head = h->queue_tail = NULL;
  pthread_mutex_unlock (&h->lock);

  for (; q != NULL; q = next) {
    next = q->next;
    snprintf (msg, sizeof msg, "%s: %s", q->fn,
              h->dead_msg ? h->dead_msg : "connection lost");
    io_request_fail (q, ENOTCONN, msg);
    q->refs = 1;
    io_request_put (q);
  }
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

/* The I/O thread: issue requests whose delay has passed, in order; poll
 * the NBD socket (in the direction libnbd wants) and the wake-up pipe,
 * with a timeout until the next request becomes ready; run libnbd's
 * state machine, which completes requests.  Stops when the handle is
 * closing and nothing is in flight. */
static void *
io_thread (void *arg)
{
  struct stabledif_handle *h = arg;

  for (;;) {
    struct request *ready = NULL, **tail = &ready, *r;
    struct timespec ts, *timeout = NULL;
    struct pollfd fds[2];
    nfds_t nfds = 1;
    bool stop, dead;
    uint64_t now;
    unsigned dir;

    pthread_mutex_lock (&h->lock);
    /* Anything submitted from here on needs a new wake-up; anything
     * submitted before is taken off the queue now. */
    h->wake_pending = false;
    now = io_now_ns ();
    while ((r = h->queue_head) != NULL && r->ready_ns <= now) {
      h->queue_head = r->next;
      if (h->queue_head == NULL)
        h->queue_tail = NULL;
      r->next = NULL;
      *tail = r;
      tail = &r->next;
    }
    if (h->queue_head) {
      uint64_t wait = h->queue_head->ready_ns - now;
      ts.tv_sec = wait / 1000000000u;
      ts.tv_nsec = wait % 1000000000u;
      timeout = &ts;
    }
    stop = h->closing && h->in_flight == 0;
    dead = h->dead;
    pthread_mutex_unlock (&h->lock);

    if (stop)
      break;
    if (ready) {
      for (r = ready; r != NULL; ) {
        struct request *next = r->next;
        r->next = NULL;
        if (dead) {
          io_request_fail (r, ENOTCONN, NULL);
          r->refs = 1;
          io_request_put (r);
        }
        else
          issue (r);
        r = next;
      }
      if (!dead && (nbd_aio_is_dead (h->nbd) || nbd_aio_is_closed (h->nbd)))
        connection_lost (h, nbd_get_error () ? nbd_get_error ()
                         : "the server closed the connection");
      continue;                 /* look at the queue again */
    }

    fds[0].fd = h->wake[0];
    fds[0].events = POLLIN;
    fds[0].revents = 0;
    dir = dead ? 0 : nbd_aio_get_direction (h->nbd);
    if (dir != 0) {
      fds[1].fd = nbd_aio_get_fd (h->nbd);
      fds[1].events = ((dir & LIBNBD_AIO_DIRECTION_READ) ? POLLIN : 0) |
        ((dir & LIBNBD_AIO_DIRECTION_WRITE) ? POLLOUT : 0);
      fds[1].revents = 0;
      if (fds[1].fd >= 0)
        nfds = 2;
    }

    if (ppoll (fds, nfds, timeout, NULL) == -1) {
      char why[256];
      if (errno == EINTR)
        continue;
      snprintf (why, sizeof why, "poll: %s", strerror (errno));
      connection_lost (h, why);
      continue;
    }
    if (fds[0].revents & POLLIN) {
      char buf[64];
      /* Usually one byte (see wake_pending): one read empties the pipe;
       * a full buffer means there may be more. */
      while (read (h->wake[0], buf, sizeof buf) == (ssize_t) sizeof buf)
        ;
    }
    if (nfds == 2 && fds[1].revents) {
      short rev = fds[1].revents;
      int rc = 0;

      if ((rev & POLLIN) ||
          ((rev & (POLLHUP | POLLERR)) && (dir & LIBNBD_AIO_DIRECTION_READ)))
        rc = nbd_aio_notify_read (h->nbd);
      else if (rev & (POLLOUT | POLLHUP | POLLERR))
        rc = nbd_aio_notify_write (h->nbd);
      if (rc == -1)
        connection_lost (h, nbd_get_error () ? nbd_get_error ()
                         : strerror (nbd_get_errno ()));
      else if (nbd_aio_is_dead (h->nbd) || nbd_aio_is_closed (h->nbd))
        connection_lost (h, "the server closed the connection");
    }
  }
  return NULL;
}

int
io_start (struct stabledif_handle *h)
{
  sigset_t all, old;
  int r;

  if (pipe2 (h->wake, O_NONBLOCK | O_CLOEXEC) == -1) {
    error_set (errno, "stabledif_connect_uri: pipe: %s", strerror (errno));
    return -1;
  }
  /* The I/O thread takes no signals: they belong to the caller. */
  sigfillset (&all);
  pthread_sigmask (SIG_SETMASK, &all, &old);
  r = pthread_create (&h->io_thread, NULL, io_thread, h);
  pthread_sigmask (SIG_SETMASK, &old, NULL);
  if (r != 0) {
    error_set (r, "stabledif_connect_uri: starting the I/O thread: %s",
               strerror (r));
    return -1;
  }
  h->io_running = true;
  return 0;
}

void
io_stop (struct stabledif_handle *h)
{
  if (!h->io_running)
    return;
  pthread_mutex_lock (&h->lock);
  h->closing = true;
  pthread_mutex_unlock (&h->lock);
  wake (h);
  pthread_join (h->io_thread, NULL);
  h->io_running = false;
}

/* Submit a flush. */
static int64_t
flush_submit (struct stabledif_handle *h, const char *fn, uint32_t flags,
              stabledif_completion_callback cb, void *user_data, bool sync,
              struct request **rp)
{
  struct request *r;

  if (handle_check_connected (h, fn) == -1)
    return -1;
  if (flags != 0) {
    error_set (EINVAL, "%s: unknown flags 0x%" PRIx32, fn, flags);
    return -1;
  }
  if (!h->can_flush) {
    error_set (ENOTSUP, "%s: the device does not support flush", fn);
    return -1;
  }
  if (sync && io_on_io_thread (h)) {
    error_set (EDEADLK, "%s: a synchronous call from a callback would wait "
               "for itself", fn);
    return -1;
  }
  r = io_request_new (h, fn);
  if (r == NULL)
    return -1;
  r->op = IO_FLUSH;
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
  return io_wait_sync (h, r);
}

/* Wait until no request is in flight; report the first failure of an
 * asynchronous request that had no callback. */
int
stabledif_wait_all (struct stabledif_handle *h)
{
  static const char fn[] = "stabledif_wait_all";
  int e;
  char *msg;

  if (handle_check_connected (h, fn) == -1)
    return -1;
  if (io_on_io_thread (h)) {
    error_set (EDEADLK, "%s: called from a callback: it would wait for "
               "itself", fn);
    return -1;
  }
  pthread_mutex_lock (&h->lock);
  while (h->in_flight > 0)
    pthread_cond_wait (&h->cond, &h->lock);
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
  int64_t n;

  if (handle_check_connected (h, "stabledif_get_in_flight") == -1)
    return -1;
  pthread_mutex_lock (&h->lock);
  n = (int64_t) h->in_flight;
  pthread_mutex_unlock (&h->lock);
  return n;
}
