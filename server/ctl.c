/* SPDX-License-Identifier: BSD-3-Clause */
/* stabledif: the control socket -- the socket and its thread.
 *
 * One thread polls the listening socket, a self-pipe (ctl_stop writes to
 * it) and up to CTL_CLIENTS_MAX connections.  Each connection has a line
 * buffer: complete lines go to ctl_handle_line (ctl-request.c) and the
 * reply is queued on the connection's output buffer, written without
 * blocking.  A line longer than CTL_LINE_MAX gets one JSON error and the
 * rest of it is discarded; the connection stays usable.  Requests are
 * answered only while the connection's unwritten replies stay below
 * CTL_OUT_HIGH; past that, what was received waits (and nothing more is
 * read) until the client has read enough, so a client may send any
 * number of requests at once and gets every answer, and one that never
 * reads cannot make the server hold more than about CTL_OUT_HIGH plus a
 * reply.
 *
 * The socket file is created mode 0600, only in a directory nobody else
 * can write (ctl-path.c), never replaces anything but a stale socket of
 * our own and never follows a symbolic link; it is removed by ctl_stop
 * if it is still ours.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "ctl.h"
#include "ctl-internal.h"
#include "ctl-path.h"

/* One connection. */
struct ctl_client {
  int fd;                       /* the connection, -1 for a free slot */
  char in[CTL_LINE_MAX + 1];    /* the line being received (+ NUL) */
  size_t inlen;                 /* bytes of it in IN */
  bool discarding;              /* line too long: skip to its newline */
  bool eof;                     /* the client closed its sending side */
  char pend[CTL_LINE_MAX];      /* bytes received, not yet taken into
                                   IN (they wait while OUT is full) */
  size_t pendoff;               /* bytes of PEND already taken */
  size_t pendlen;               /* bytes received into PEND */
  char *out;                    /* replies not yet written */
  size_t outlen;                /* bytes queued in OUT */
  size_t outoff;                /* bytes of OUT already written */
  size_t outcap;                /* allocated size of OUT */
};

/* The control socket. */
struct ctl {
  struct disk *d;               /* the disk served */
  char *path;                   /* socket file path */
  dev_t dev;                    /* device and inode of the socket file, */
  ino_t ino;                    /*   to remove it only if it is ours */
  int lfd;                      /* listening socket */
  int wake[2];                  /* self-pipe: ctl_stop writes wake[1] */
  pthread_t thread;             /* the serving thread */
  bool serving;                 /* thread started (ctl_serve) */
  struct ctl_client clients[CTL_CLIENTS_MAX]; /* connection slots */
};

int
ctl_default_path (char *buf, size_t len, long pid)
{
  char dir[PATH_MAX];
  int n;

  if (ctl_path_default_dir (dir, sizeof dir, NULL) == -1)
    return -1;
  n = snprintf (buf, len, "%s%s" CTL_SOCKET_PREFIX "%ld" CTL_SOCKET_SUFFIX,
                dir, strcmp (dir, "/") == 0 ? "" : "/", pid);
  if (n < 0 || (size_t) n >= len) {
    errno = ENAMETOOLONG;
    return -1;
  }
  return 0;
}

const char *
ctl_socket_path (const struct ctl *c)
{
  return c->path;
}

/* Whether a Unix socket at PATH accepts connections (a server is alive). */
static bool
socket_is_live (const char *path)
{
  struct sockaddr_un addr = { .sun_family = AF_UNIX };
  int fd, r;

  /* Non-blocking: a live server with a full backlog says EAGAIN
   * instead of making us wait. */
  fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd == -1)
    return false;
  memcpy (addr.sun_path, path, strlen (path) + 1);
  r = connect (fd, (struct sockaddr *) &addr, sizeof addr);
  if (r == -1 && (errno == EAGAIN || errno == EINPROGRESS))
    r = 0;
  close (fd);
  return r == 0;
}

/* Make sure nothing but a stale socket is at PATH, removing that.  A
 * regular file, a directory, a symlink (never followed) or a socket with
 * a live server behind it is an error. */
static int
clear_path (struct disk *d, const char *path)
{
  struct stat st;

  if (lstat (path, &st) == -1) {
    if (errno == ENOENT)
      return 0;
    d->cfg.error ("ctl=%s: %m", path);
    return -1;
  }
  if (!S_ISSOCK (st.st_mode)) {
    d->cfg.error ("ctl=%s: exists and is not a socket; "
                  "not replacing it", path);
    errno = EEXIST;
    return -1;
  }
  if (st.st_uid != geteuid ()) {
    d->cfg.error ("ctl=%s: a socket owned by another user is there; "
                  "not replacing it", path);
    errno = EEXIST;
    return -1;
  }
  if (socket_is_live (path)) {
    d->cfg.error ("ctl=%s: another server is listening on this socket",
                  path);
    errno = EADDRINUSE;
    return -1;
  }
  if (unlink (path) == -1 && errno != ENOENT) {
    d->cfg.error ("ctl=%s: removing the stale socket: %m", path);
    return -1;
  }
  return 0;
}

/* Create, bind (mode 0600) and listen.  Fills c->lfd, c->dev, c->ino. */
static int
open_socket (struct ctl *c)
{
  struct sockaddr_un addr = { .sun_family = AF_UNIX };
  size_t len = strlen (c->path);
  char dir[sizeof addr.sun_path], why[PATH_MAX + 256];
  struct stat st;
  mode_t old_umask;
  int r;

  if (len == 0 || len >= sizeof addr.sun_path) {
    c->d->cfg.error ("ctl=%s: a Unix socket path must be 1 to %zu bytes",
                     c->path, sizeof addr.sun_path - 1);
    errno = ENAMETOOLONG;
    return -1;
  }
  memcpy (addr.sun_path, c->path, len + 1);

  /* Only in a directory nobody else can write: there, nobody can swap
   * the socket (or what lies at its path) for something else between
   * the checks below and bind, or after it. */
  if (ctl_path_dirname (c->path, dir, sizeof dir) == -1) {
    c->d->cfg.error ("ctl=%s: path too long", c->path);
    return -1;
  }
  if (ctl_path_check_dir (dir, why, sizeof why) == -1) {
    int err = errno;
    if (err == EPERM || err == ENOTDIR)
      c->d->cfg.error ("ctl=%s: unsafe directory for the control socket: "
                       "%s; choose a directory only you can write",
                       c->path, why);
    else
      c->d->cfg.error ("ctl=%s: directory %s", c->path, why);
    errno = err;
    return -1;
  }

  if (clear_path (c->d, c->path) == -1)
    return -1;

  c->lfd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (c->lfd == -1) {
    c->d->cfg.error ("ctl=%s: socket: %m", c->path);
    return -1;
  }

  /* bind creates the file with the umask applied, so it is born mode
   * 0600.  bind never follows a symbolic link at the path and never
   * replaces anything there (EADDRINUSE), even if something appeared
   * since clear_path looked.  This runs before nbdkit serves, so
   * changing the process umask briefly does not race other files. */
  old_umask = umask (0177);
  r = bind (c->lfd, (struct sockaddr *) &addr, sizeof addr);
  umask (old_umask);
  if (r == -1) {
    c->d->cfg.error ("ctl=%s: bind: %m", c->path);
    return -1;
  }

  /* A default ACL on the directory overrides the umask: then set the
   * mode.  Nobody can connect before listen below, which comes only
   * after the mode is checked; and the directory is safe, so the path
   * is still our socket (lstat first: chmod would follow a link). */
  if (lstat (c->path, &st) == -1) {
    c->d->cfg.error ("ctl=%s: %m", c->path);
    unlink (c->path);
    return -1;
  }
  if (S_ISSOCK (st.st_mode) && (st.st_mode & 07777) != 0600 &&
      (chmod (c->path, 0600) == -1 || lstat (c->path, &st) == -1)) {
    c->d->cfg.error ("ctl=%s: setting mode 0600: %m", c->path);
    unlink (c->path);
    return -1;
  }
  if (!S_ISSOCK (st.st_mode) || (st.st_mode & 07777) != 0600 ||
      st.st_uid != geteuid ()) {
    c->d->cfg.error ("ctl=%s: socket file has mode %04o owner %ld, "
                     "wanted a socket of mode 0600 owned by %ld",
                     c->path, (unsigned) (st.st_mode & 07777),
                     (long) st.st_uid, (long) geteuid ());
    if (S_ISSOCK (st.st_mode))
      unlink (c->path);
    errno = EPERM;
    return -1;
  }
  c->dev = st.st_dev;
  c->ino = st.st_ino;

  /* A generous backlog: bursts of connections wait instead of failing
   * with EAGAIN while the thread is busy. */
  if (listen (c->lfd, SOMAXCONN) == -1) {
    c->d->cfg.error ("ctl=%s: listen: %m", c->path);
    unlink (c->path);
    return -1;
  }
  return 0;
}

/* Free slot I and close its connection. */
static void
drop_client (struct ctl_client *cl)
{
  if (cl->fd >= 0)
    close (cl->fd);
  cl->fd = -1;
  free (cl->out);
  cl->out = NULL;
  cl->outlen = cl->outoff = cl->outcap = 0;
  cl->inlen = 0;
  cl->pendoff = cl->pendlen = 0;
  cl->discarding = cl->eof = false;
}

/* Bytes of replies queued for CL and not yet written. */
static size_t
unsent (const struct ctl_client *cl)
{
  return cl->outlen - cl->outoff;
}

/* Write as much queued output as the socket takes now.  Returns -1 if
 * the connection failed (the caller drops it). */
static int
flush_client (struct ctl_client *cl)
{
  while (cl->outoff < cl->outlen) {
    ssize_t n = send (cl->fd, cl->out + cl->outoff, cl->outlen - cl->outoff,
                      MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n == -1) {
      if (errno == EINTR)
        continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK)
        return 0;
      return -1;
    }
    cl->outoff += n;
  }
  cl->outoff = cl->outlen = 0;
  /* Give back the memory of an unusually large reply. */
  if (cl->outcap > CTL_OUT_KEEP) {
    free (cl->out);
    cl->out = NULL;
    cl->outcap = 0;
  }
  return 0;
}

/* Queue REPLY (LEN bytes) and a newline.  Returns -1 if the client has
 * let more than CTL_OUT_MAX bytes of replies pile up, or on ENOMEM. */
static int
queue_reply (struct ctl_client *cl, const char *reply, size_t len)
{
  size_t need;

  if (cl->outoff > 0) {         /* compact what was already written */
    memmove (cl->out, cl->out + cl->outoff, cl->outlen - cl->outoff);
    cl->outlen -= cl->outoff;
    cl->outoff = 0;
  }
  need = cl->outlen + len + 1;
  if (need > CTL_OUT_MAX)
    return -1;
  if (need > cl->outcap) {
    size_t cap = cl->outcap ? cl->outcap : CTL_OUT_FIRST;
    char *p;

    while (cap < need)
      cap *= 2;
    p = realloc (cl->out, cap);
    if (p == NULL)
      return -1;
    cl->out = p;
    cl->outcap = cap;
  }
  memcpy (cl->out + cl->outlen, reply, len);
  cl->out[cl->outlen + len] = '\n';
  cl->outlen = need;
  return 0;
}

/* Queue a constant reply. */
static int
queue_const (struct ctl_client *cl, const char *reply)
{
  return queue_reply (cl, reply, strlen (reply));
}

/* Handle the complete line in cl->in (cl->inlen bytes) and queue the
 * reply. */
static int
answer_line (struct ctl *c, struct ctl_client *cl)
{
  char *reply;
  int r;

  cl->in[cl->inlen] = '\0';
  if (memchr (cl->in, '\0', cl->inlen) != NULL) {
    cl->inlen = 0;
    return queue_const (cl, CTL_REPLY_NUL);
  }
  cl->inlen = 0;
  reply = ctl_handle_line (c->d, cl->in);
  if (reply == NULL)
    return queue_const (cl, CTL_REPLY_ENOMEM);
  r = queue_reply (cl, reply, strlen (reply));
  free (reply);
  return r;
}

/* Take the bytes received from CL (cl->pend) into its line buffer,
 * answering every complete line, until they are used up or its unsent
 * replies reach CTL_OUT_HIGH; the rest waits in cl->pend. */
static int
feed_client (struct ctl *c, struct ctl_client *cl)
{
  while (cl->pendoff < cl->pendlen && unsent (cl) < CTL_OUT_HIGH) {
    const char *buf = cl->pend + cl->pendoff;
    const size_t n = cl->pendlen - cl->pendoff;
    const char *nl = memchr (buf, '\n', n);
    size_t seg = nl ? (size_t) (nl - buf) : n;

    if (cl->discarding)
      ;                         /* drop the rest of an over-long line */
    else if (cl->inlen + seg > CTL_LINE_MAX) {
      cl->inlen = 0;
      cl->discarding = true;
      if (queue_const (cl, CTL_REPLY_TOO_LONG) == -1)
        return -1;
    }
    else {
      memcpy (cl->in + cl->inlen, buf, seg);
      cl->inlen += seg;
    }

    if (nl == NULL) {
      cl->pendoff = cl->pendlen;
      break;
    }
    cl->pendoff += seg + 1;
    if (cl->discarding)
      cl->discarding = false;
    else if (answer_line (c, cl) == -1)
      return -1;
  }
  if (cl->pendoff == cl->pendlen)
    cl->pendoff = cl->pendlen = 0;
  return 0;
}

/* The client's socket is readable and everything it sent before is
 * answered: read once.  Returns -1 to drop the client. */
static int
read_client (struct ctl *c, struct ctl_client *cl)
{
  ssize_t n;

  n = recv (cl->fd, cl->pend, sizeof cl->pend, MSG_DONTWAIT);
  if (n == -1) {
    if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)
      return 0;
    return -1;
  }
  if (n == 0) {
    /* End of input: an unterminated last line is still a request. */
    cl->eof = true;
    if (cl->inlen > 0 && !cl->discarding && answer_line (c, cl) == -1)
      return -1;
    cl->inlen = 0;
    return 0;
  }
  cl->pendoff = 0;
  cl->pendlen = (size_t) n;
  return 0;
}

/* Act on the poll events REV of client CL: read and answer, write what
 * is queued, drop it when it failed or is finished. */
static void
service_client (struct ctl *c, struct ctl_client *cl, short rev)
{
  if (rev & POLLNVAL) {
    drop_client (cl);
    return;
  }
  if ((rev & (POLLIN | POLLHUP | POLLERR)) && cl->pendlen == 0 &&
      !cl->eof && read_client (c, cl) == -1) {
    drop_client (cl);
    return;
  }
  /* Answer what was received as far as the unsent replies allow, write,
   * and go on while writing made room. */
  for (;;) {
    size_t before;

    if (feed_client (c, cl) == -1) {
      drop_client (cl);
      return;
    }
    before = unsent (cl);
    if (flush_client (cl) == -1) {
      drop_client (cl);
      return;
    }
    if (cl->pendlen == 0 || unsent (cl) == before)
      break;
  }
  /* Closed by the client and everything answered: done. */
  if (cl->eof && cl->pendlen == 0 && unsent (cl) == 0)
    drop_client (cl);
}

/* Every slot is taken: look (without waiting) for clients that have
 * gone away since the last poll and free their slots. */
static void
reap_clients (struct ctl *c)
{
  struct pollfd pfd[CTL_CLIENTS_MAX];
  size_t i;

  for (i = 0; i < CTL_CLIENTS_MAX; i++)
    pfd[i] = (struct pollfd) {
      .fd = c->clients[i].eof ? -1 : c->clients[i].fd,
      .events = POLLIN,
    };
  if (poll (pfd, CTL_CLIENTS_MAX, 0) <= 0)
    return;
  for (i = 0; i < CTL_CLIENTS_MAX; i++)
    if (pfd[i].revents)
      service_client (c, &c->clients[i], pfd[i].revents);
}

/* Accept every pending connection.  Returns -1 with errno set when
 * accept fails (out of descriptors, say): the caller backs off for a
 * moment. */
static int
accept_clients (struct ctl *c)
{
  for (;;) {
    int fd = accept4 (c->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    size_t i;

    if (fd == -1) {
      if (errno == EINTR || errno == ECONNABORTED)
        continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK)
        return 0;
      return -1;                /* the caller reports it */
    }
    for (i = 0; i < CTL_CLIENTS_MAX; i++)
      if (c->clients[i].fd == -1)
        break;
    if (i == CTL_CLIENTS_MAX) {
      reap_clients (c);
      for (i = 0; i < CTL_CLIENTS_MAX; i++)
        if (c->clients[i].fd == -1)
          break;
    }
    if (i == CTL_CLIENTS_MAX) {
      /* Full: say so (best effort, it is short) and hang up. */
      static const char busy[] = CTL_REPLY_BUSY "\n";
      ssize_t r = send (fd, busy, sizeof busy - 1,
                        MSG_NOSIGNAL | MSG_DONTWAIT);
      (void) r;
      close (fd);
      continue;
    }
    c->clients[i].fd = fd;
  }
}

static void *
ctl_thread (void *arg)
{
  struct ctl *c = arg;
  struct pollfd pfd[2 + CTL_CLIENTS_MAX];
  size_t slot[CTL_CLIENTS_MAX];  /* pfd[2 + k] is client slot[k] */
  bool backoff = false;          /* accept failed: pause accepting */
  bool backoff_reported = false; /* ... and that was reported */
  struct timespec backoff_end;   /* until then (CLOCK_MONOTONIC) */

  for (;;) {
    size_t i, k, n = 0;
    int r, timeout = -1;

    if (backoff) {
      struct timespec now;
      long long ms;

      clock_gettime (CLOCK_MONOTONIC, &now);
      ms = (backoff_end.tv_sec - now.tv_sec) * 1000LL +
           (backoff_end.tv_nsec - now.tv_nsec) / 1000000;
      if (ms <= 0)
        backoff = false;
      else
        timeout = (int) ms;
    }

    pfd[0] = (struct pollfd) { .fd = c->wake[0], .events = POLLIN };
    pfd[1] = (struct pollfd) { .fd = backoff ? -1 : c->lfd,
                               .events = POLLIN };
    for (i = 0; i < CTL_CLIENTS_MAX; i++) {
      struct ctl_client *cl = &c->clients[i];
      short ev = 0;

      if (cl->fd == -1)
        continue;
      /* Read more only once what came is answered and the replies
       * are below the mark (backpressure). */
      if (!cl->eof && cl->pendlen == 0 && unsent (cl) < CTL_OUT_HIGH)
        ev |= POLLIN;
      if (unsent (cl) > 0)
        ev |= POLLOUT;
      pfd[2 + n] = (struct pollfd) { .fd = cl->fd, .events = ev };
      slot[n++] = i;
    }

    r = poll (pfd, 2 + n, timeout);
    if (r == -1) {
      if (errno == EINTR)
        continue;
      c->d->cfg.error ("ctl=%s: poll: %m; control socket stopped", c->path);
      break;
    }
    if (pfd[0].revents)
      break;                    /* ctl_stop */

    /* Clients first, so that connections closed meanwhile free their
     * slots before new ones are accepted. */
    for (k = 0; k < n; k++)
      service_client (c, &c->clients[slot[k]], pfd[2 + k].revents);

    if (pfd[1].revents & POLLIN) {
      if (accept_clients (c) == -1) {
        /* Report once per streak of failures, not every 100 ms. */
        if (!backoff_reported)
          c->d->cfg.error ("ctl=%s: accept: %m (retrying)", c->path);
        backoff = backoff_reported = true;
        clock_gettime (CLOCK_MONOTONIC, &backoff_end);
        backoff_end.tv_nsec += CTL_BACKOFF_MS * 1000000L;
        if (backoff_end.tv_nsec >= 1000000000L) {
          backoff_end.tv_sec++;
          backoff_end.tv_nsec -= 1000000000L;
        }
      }
      else
        backoff_reported = false;
    }
  }
  return NULL;
}

/* The default socket path of this process into BUF (LEN bytes),
 * making the private directory if that is where it goes.  Reports
 * errors through D. */
static int
default_socket (struct disk *d, char *buf, size_t len)
{
  char dir[PATH_MAX], why[PATH_MAX + 256];
  bool is_private;

  if (ctl_path_default_dir (dir, sizeof dir, &is_private) == -1 ||
      ctl_default_path (buf, len, (long) getpid ()) == -1) {
    d->cfg.error ("ctl: the default control socket path is too long; "
                  "use ctl=PATH");
    return -1;
  }
  if (is_private && ctl_path_make_private (dir, why, sizeof why) == -1) {
    int err = errno;
    d->cfg.error ("ctl: the default control socket directory: %s; "
                  "remove or fix it, or choose a place with ctl=PATH", why);
    errno = err;
    return -1;
  }
  return 0;
}

struct ctl *
ctl_bind (struct disk *d, const char *path)
{
  char def[PATH_MAX];
  struct ctl *c;
  size_t i;
  int err;

  if (path == NULL) {
    if (default_socket (d, def, sizeof def) == -1)
      return NULL;
    path = def;
  }

  c = calloc (1, sizeof *c);
  if (c == NULL) {
    d->cfg.error ("ctl=%s: %m", path);
    return NULL;
  }
  c->d = d;
  c->lfd = c->wake[0] = c->wake[1] = -1;
  for (i = 0; i < CTL_CLIENTS_MAX; i++)
    c->clients[i].fd = -1;
  c->path = strdup (path);
  if (c->path == NULL) {
    d->cfg.error ("ctl=%s: %m", path);
    goto err;
  }
  if (pipe2 (c->wake, O_CLOEXEC | O_NONBLOCK) == -1) {
    d->cfg.error ("ctl=%s: pipe: %m", path);
    goto err;
  }
  if (open_socket (c) == -1)
    goto err;
  /* Seed jansson's hash function now, while there is one thread, rather
   * than racily on first use in whichever thread builds JSON first. */
  json_object_seed (0);
  return c;

 err:
  err = errno;
  if (c->lfd >= 0)
    close (c->lfd);
  if (c->wake[0] >= 0) {
    close (c->wake[0]);
    close (c->wake[1]);
  }
  free (c->path);
  free (c);
  errno = err;
  return NULL;
}

/* Remove the socket file if it is still the one we created. */
static void
remove_socket_file (const struct ctl *c)
{
  struct stat st;

  if (lstat (c->path, &st) == 0 && S_ISSOCK (st.st_mode) &&
      st.st_dev == c->dev && st.st_ino == c->ino)
    unlink (c->path);
}

int
ctl_serve (struct ctl *c)
{
  sigset_t all, old;
  int err;

  /* The thread takes no signals: they belong to the server's threads. */
  sigfillset (&all);
  pthread_sigmask (SIG_SETMASK, &all, &old);
  err = pthread_create (&c->thread, NULL, ctl_thread, c);
  pthread_sigmask (SIG_SETMASK, &old, NULL);
  if (err != 0) {
    errno = err;
    c->d->cfg.error ("ctl=%s: starting the control thread: %m", c->path);
    remove_socket_file (c);
    errno = err;
    return -1;
  }
  c->serving = true;
  return 0;
}

struct ctl *
ctl_start (struct disk *d, const char *path)
{
  struct ctl *c = ctl_bind (d, path);

  if (c && ctl_serve (c) == -1) {
    int err = errno;
    ctl_stop (c);
    errno = err;
    return NULL;
  }
  return c;
}

void
ctl_remove_socket (const struct ctl *c)
{
  if (c)
    remove_socket_file (c);
}

void
ctl_stop (struct ctl *c)
{
  size_t i;
  ssize_t r;

  if (c == NULL)
    return;

  if (c->serving) {
    do
      r = write (c->wake[1], "x", 1);
    while (r == -1 && errno == EINTR);
    pthread_join (c->thread, NULL);
  }
  remove_socket_file (c);

  for (i = 0; i < CTL_CLIENTS_MAX; i++)
    drop_client (&c->clients[i]);
  close (c->lfd);
  close (c->wake[0]);
  close (c->wake[1]);
  free (c->path);
  free (c);
}
