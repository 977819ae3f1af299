/* SPDX-License-Identifier: BSD-3-Clause */
/* stabledif: the client side of the control socket (see ctl-conn.h). */
#include <config.h>

#include <errno.h>
#include <glob.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "ctl-conn.h"
#include "ctl-proto.h"
#include "ctl-path.h"

/* Longest reply line accepted (an "events" reply with CTL_EVENTS_MAX
 * events is well below this). */
#define REPLY_MAX (16 * 1024 * 1024)

/* What an NBD server sends first, before the client says anything (in
 * both of NBD's handshake styles).  The control socket never speaks
 * first, and each of its replies starts with '{'. */
#define NBD_GREETING "NBDMAGIC"
#define NBD_GREETING_LEN (sizeof NBD_GREETING - 1)

/* Whether the first LEN bytes of a reply, BUF, show that the server is
 * not a stabledif control socket: then the reason is written into ERR.
 * A start of "NBDMAGIC" is only judged once all of it is there. */
static bool
foreign_reply (const char *buf, size_t len, char *err, size_t errlen)
{
  size_t n = len < NBD_GREETING_LEN ? len : NBD_GREETING_LEN;

  if (len == 0 || buf[0] == '{')
    return false;
  if (memcmp (buf, NBD_GREETING, n) == 0) {
    if (len < NBD_GREETING_LEN)
      return false;
    snprintf (err, errlen, "not a stabledif control socket: an NBD server "
              "answered (" NBD_GREETING "); use the path nbdkit prints as "
              "\"control socket:\" when it starts");
    return true;
  }
  snprintf (err, errlen, "not a stabledif control socket: its reply does "
            "not start with a JSON object");
  return true;
}

/* Mark C as connected to a server that is not a control socket; -1. */
static int
not_ours (struct ctl_conn *c)
{
  c->foreign = true;
  return -1;
}

/* After a send failed because the server hung up: whether what it sent
 * before (still unread) shows that it is not a stabledif control socket
 * (the reason then in ERR).  An NBD server sends its greeting, reads our
 * request as a bad handshake and hangs up. */
static bool
foreign_hangup (struct ctl_conn *c, char *err, size_t errlen)
{
  char peek[64];
  ssize_t r;

  if (c->len > 0)
    return foreign_reply (c->buf, c->len, err, errlen);
  r = recv (c->fd, peek, sizeof peek, MSG_PEEK | MSG_DONTWAIT);
  return r > 0 && foreign_reply (peek, (size_t) r, err, errlen);
}

/* Connect a new socket to PATH.  The connect does not block: a live
 * server whose backlog is full answers EAGAIN.  When PROBE is true that
 * counts as success (the caller only wants to know whether a server is
 * there, and closes the fd); otherwise it is retried for up to
 * CTL_CONN_TIMEOUT_MS.  Returns the fd, or -1 with errno set. */
static int
connect_path (const char *path, bool probe)
{
  struct sockaddr_un addr = { .sun_family = AF_UNIX };
  size_t len = strlen (path);
  int fd, err, tries;

  if (len >= sizeof addr.sun_path) {
    errno = ENAMETOOLONG;
    return -1;
  }
  memcpy (addr.sun_path, path, len + 1);
  for (tries = 0; ; tries++) {
    fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd == -1)
      return -1;
    if (connect (fd, (struct sockaddr *) &addr, sizeof addr) == 0)
      return fd;
    err = errno;
    if (err == EAGAIN && probe)
      return fd;
    close (fd);
    if (err != EAGAIN || tries >= CTL_CONN_TIMEOUT_MS / 10) {
      errno = err;
      return -1;
    }
    poll (NULL, 0, 10);         /* backlog full: try again shortly */
  }
}

char *
ctl_conn_find (char *err, size_t errlen)
{
  const char *xdg = getenv ("XDG_RUNTIME_DIR");
  char dirs[2][PATH_MAX], why[PATH_MAX + 256];
  bool use[2] = { false, false };
  char *found[16];
  size_t nfound = 0, total = 0, i, d;
  char list[1024] = "";

  /* Where the plugin makes its default socket (ctl-path.h): the user's
   * runtime directory, and the private directory in $TMPDIR or /tmp
   * (a server started without XDG_RUNTIME_DIR).  The private directory
   * is only looked in if it is safe; it is never created here. */
  if (xdg != NULL && xdg[0] == '/' &&
      snprintf (dirs[0], sizeof dirs[0], "%s", xdg) < (int) sizeof dirs[0])
    use[0] = true;
  why[0] = '\0';
  if (ctl_path_private_dir (dirs[1], sizeof dirs[1]) == -1)
    snprintf (dirs[1], sizeof dirs[1], "$TMPDIR (path too long)");
  else if (ctl_path_check_private (dirs[1], why, sizeof why) == 0)
    use[1] = !(use[0] && strcmp (dirs[0], dirs[1]) == 0);
  else if (errno == ENOENT)
    why[0] = '\0';             /* no server ever made it: nothing there */

  for (d = 0; d < 2; d++) {
    char pattern[PATH_MAX + 64];
    glob_t g;

    if (!use[d])
      continue;
    snprintf (pattern, sizeof pattern, "%s/" CTL_SOCKET_PREFIX "*"
              CTL_SOCKET_SUFFIX, dirs[d]);
    if (glob (pattern, 0, NULL, &g) != 0)
      continue;
    for (i = 0; i < g.gl_pathc; i++) {
      struct stat st;
      int fd;

      if (lstat (g.gl_pathv[i], &st) == -1 || !S_ISSOCK (st.st_mode) ||
          st.st_uid != geteuid ())
        continue;
      fd = connect_path (g.gl_pathv[i], true);
      if (fd == -1)
        continue;               /* stale: its server is gone */
      close (fd);
      if (nfound < sizeof found / sizeof found[0])
        found[nfound++] = strdup (g.gl_pathv[i]);
      total++;
    }
    globfree (&g);
  }

  if (total == 1 && found[0] != NULL)
    return found[0];

  for (i = 0; i < nfound; i++) {
    size_t used = strlen (list);
    if (found[i])
      snprintf (list + used, sizeof list - used, "\n  %s", found[i]);
    free (found[i]);
  }
  if (total == 0)
    snprintf (err, errlen, "no running stabledif device found "
              "(no live %s*%s socket in %s%s%s%s%s); use -s SOCKET",
              CTL_SOCKET_PREFIX, CTL_SOCKET_SUFFIX,
              use[0] ? dirs[0] : "", use[0] ? " or " : "", dirs[1],
              why[0] ? "; not searched: " : "", why);
  else if (total == 1)
    snprintf (err, errlen, "out of memory");
  else
    snprintf (err, errlen, "%zu stabledif devices are running; "
              "choose one with -s SOCKET:%s", total, list);
  return NULL;
}

int
ctl_conn_open (struct ctl_conn *c, const char *path, char *err,
               size_t errlen)
{
  memset (c, 0, sizeof *c);
  c->fd = connect_path (path, false);
  if (c->fd == -1) {
    snprintf (err, errlen, "%s: %s", path, strerror (errno));
    return -1;
  }
  return 0;
}

/* Milliseconds left until DEADLINE (CLOCK_MONOTONIC), at least 0. */
static int
ms_left (const struct timespec *deadline)
{
  struct timespec now;
  long long ms;

  clock_gettime (CLOCK_MONOTONIC, &now);
  ms = (deadline->tv_sec - now.tv_sec) * 1000LL +
       (deadline->tv_nsec - now.tv_nsec) / 1000000;
  return ms < 0 ? 0 : (int) ms;
}

/* Wait until FD is ready for EVENTS or DEADLINE passes.  Returns 1 when
 * ready, 0 on timeout, -1 on error. */
static int
wait_fd (int fd, short events, const struct timespec *deadline)
{
  for (;;) {
    struct pollfd p = { .fd = fd, .events = events };
    int r = poll (&p, 1, ms_left (deadline));

    if (r == -1 && errno == EINTR)
      continue;
    return r;
  }
}

int
ctl_conn_request (struct ctl_conn *c, const char *line, json_t **reply,
                  char **raw, char *err, size_t errlen)
{
  size_t len = strlen (line), sent = 0;
  struct timespec deadline;
  json_error_t jerr;
  char *nl;

  *reply = NULL;
  if (raw)
    *raw = NULL;
  if (c->closed) {
    snprintf (err, errlen, "the server closed the connection");
    return -1;
  }
  clock_gettime (CLOCK_MONOTONIC, &deadline);
  deadline.tv_sec += CTL_CONN_TIMEOUT_MS / 1000;

  /* Send the line and its newline. */
  while (sent < len + 1) {
    const char *p = sent < len ? line + sent : "\n";
    size_t n = sent < len ? len - sent : 1;
    ssize_t r;

    if (wait_fd (c->fd, POLLOUT, &deadline) <= 0) {
      snprintf (err, errlen, "timed out sending the request");
      return -1;
    }
    r = send (c->fd, p, n, MSG_NOSIGNAL);
    if (r == -1) {
      int e = errno;

      if (e == EINTR || e == EAGAIN)
        continue;
      if ((e == EPIPE || e == ECONNRESET) && foreign_hangup (c, err, errlen))
        return not_ours (c);
      if (e == EPIPE || e == ECONNRESET)
        c->closed = true;
      snprintf (err, errlen, "sending the request: %s", strerror (e));
      return -1;
    }
    sent += r;
  }

  /* Read until a newline, giving up at once if the start of the reply
   * shows that this is not a control socket (a server that is not ours
   * may never send a newline). */
  while ((nl = c->len ? memchr (c->buf, '\n', c->len) : NULL) == NULL) {
    ssize_t r;

    if (foreign_reply (c->buf, c->len, err, errlen))
      return not_ours (c);
    if (c->len == c->cap) {
      size_t cap = c->cap ? c->cap * 2 : 4096;
      char *b;

      if (cap > REPLY_MAX) {
        snprintf (err, errlen, "reply longer than %d bytes", REPLY_MAX);
        return -1;
      }
      b = realloc (c->buf, cap);
      if (b == NULL) {
        snprintf (err, errlen, "out of memory");
        return -1;
      }
      c->buf = b;
      c->cap = cap;
    }
    if (wait_fd (c->fd, POLLIN, &deadline) <= 0) {
      snprintf (err, errlen, "no reply within %d seconds",
                CTL_CONN_TIMEOUT_MS / 1000);
      return -1;
    }
    r = recv (c->fd, c->buf + c->len, c->cap - c->len, 0);
    if (r == 0 || (r == -1 && errno == ECONNRESET)) {
      if (foreign_reply (c->buf, c->len, err, errlen))
        return not_ours (c);
      c->closed = true;
      snprintf (err, errlen, "the server closed the connection");
      return -1;
    }
    if (r == -1) {
      if (errno == EINTR || errno == EAGAIN)
        continue;
      snprintf (err, errlen, "reading the reply: %s", strerror (errno));
      return -1;
    }
    c->len += r;
  }

  if (foreign_reply (c->buf, c->len, err, errlen))
    return not_ours (c);
  *nl = '\0';
  *reply = json_loads (c->buf, 0, &jerr);
  if (*reply == NULL)
    snprintf (err, errlen, "the reply is not JSON: %s", jerr.text);
  else if (!json_is_object (*reply)) {
    snprintf (err, errlen, "the reply is not a JSON object");
    json_decref (*reply);
    *reply = NULL;
  }
  else if (raw && (*raw = strdup (c->buf)) == NULL) {
    snprintf (err, errlen, "out of memory");
    json_decref (*reply);
    *reply = NULL;
  }
  c->len -= nl + 1 - c->buf;
  memmove (c->buf, nl + 1, c->len);
  return *reply ? 0 : -1;
}

void
ctl_conn_close (struct ctl_conn *c)
{
  if (c->fd >= 0)
    close (c->fd);
  c->fd = -1;
  free (c->buf);
  c->buf = NULL;
  c->len = c->cap = 0;
}
