/* SPDX-License-Identifier: BSD-3-Clause */
/* Tests of the control socket itself (ctl_start/ctl_stop, server/ctl.c)
 * on a memory disk in this process: the socket file (mode 0600, never
 * replacing anything but a stale socket, removed on stop) and robustness
 * (garbage, over-long and partial lines, NUL bytes, many clients, clients
 * that vanish or never read).  After each abuse the socket must still
 * answer.  All waits are bounded (poll with a timeout). */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <check.h>
#include <jansson.h>

#include "ctl.h"
#include "ctl-internal.h"
#include "disk.h"
#include "pi.h"
#include "test-tmpdir.h"

/* Longest any single wait may take. */
#define WAIT_MS 20000

/* The last error reported (also from the control thread). */
static char last_error[1024];
static pthread_mutex_t error_lock = PTHREAD_MUTEX_INITIALIZER;

static void
test_error (const char *fmt, ...)
{
  va_list ap;

  pthread_mutex_lock (&error_lock);
  va_start (ap, fmt);
  vsnprintf (last_error, sizeof last_error, fmt, ap);
  va_end (ap);
  pthread_mutex_unlock (&error_lock);
}

/* Whether the last error mentions NEEDLE. */
static bool
error_says (const char *needle)
{
  bool r;

  pthread_mutex_lock (&error_lock);
  r = strstr (last_error, needle) != NULL;
  pthread_mutex_unlock (&error_lock);
  return r;
}

static struct disk *d;          /* a small memory disk */
static char dir[256];           /* private directory of the test */
static char path[PATH_MAX];     /* socket path in it */

static void
setup (void)
{
  struct disk_config cfg = {
    .size = 64 * 512,
    .format = pi_format_lookup ("T10-DIF-TYPE1-CRC"),
    .interval = 512,
    .error = test_error,
  };

  d = disk_open (&cfg);
  ck_assert_msg (d != NULL, "%s", last_error);
  snprintf (dir, sizeof dir, "%s/test-ctl-socket.XXXXXX",
            getenv ("TMPDIR") ? getenv ("TMPDIR") : "/tmp");
  ck_assert_ptr_nonnull (mkdtemp (dir));
  snprintf (path, sizeof path, "%s/ctl.sock", dir);
  last_error[0] = '\0';
}

static void
teardown (void)
{
  char cmd[PATH_MAX + 16];
  int r;

  disk_close (d);
  snprintf (cmd, sizeof cmd, "rm -rf '%s'", dir);
  r = system (cmd);
  (void) r;
}

/* Connect to the socket at P. */
static int
connect_to (const char *p)
{
  struct sockaddr_un addr = { .sun_family = AF_UNIX };
  int fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

  ck_assert_int_ge (fd, 0);
  strcpy (addr.sun_path, p);
  ck_assert_msg (connect (fd, (struct sockaddr *) &addr, sizeof addr) == 0,
                 "connect %s: %s", p, strerror (errno));
  return fd;
}

/* Send all of BUF (LEN bytes). */
static void
send_all (int fd, const void *buf, size_t len)
{
  const char *p = buf;

  while (len > 0) {
    ssize_t n = send (fd, p, len, MSG_NOSIGNAL);
    ck_assert_msg (n > 0, "send: %s", strerror (errno));
    p += n;
    len -= n;
  }
}

static void
send_str (int fd, const char *s)
{
  send_all (fd, s, strlen (s));
}

/* Per-fd receive buffers for read_line. */
#define MAXFD 1024
static char *rbuf[MAXFD];
static size_t rlen[MAXFD];

/* Read one reply line from FD (malloc'd, without newline), or NULL at
 * end of file.  Fails the test after WAIT_MS without a line. */
static char *
read_line (int fd)
{
  ck_assert_int_lt (fd, MAXFD);
  for (;;) {
    char *nl = rlen[fd] ? memchr (rbuf[fd], '\n', rlen[fd]) : NULL;
    struct pollfd p = { .fd = fd, .events = POLLIN };
    ssize_t n;

    if (nl) {
      size_t len = nl - rbuf[fd];
      char *line = strndup (rbuf[fd], len);
      memmove (rbuf[fd], nl + 1, rlen[fd] - len - 1);
      rlen[fd] -= len + 1;
      return line;
    }
    ck_assert_msg (poll (&p, 1, WAIT_MS) == 1, "no reply within %d ms",
                   WAIT_MS);
    rbuf[fd] = realloc (rbuf[fd], rlen[fd] + 65536);
    n = recv (fd, rbuf[fd] + rlen[fd], 65536, 0);
    if (n == 0 || (n == -1 && errno == ECONNRESET))
      return NULL;
    ck_assert_msg (n > 0, "recv: %s", strerror (errno));
    rlen[fd] += n;
  }
}

static void
close_fd (int fd)
{
  free (rbuf[fd]);
  rbuf[fd] = NULL;
  rlen[fd] = 0;
  close (fd);
}

/* Read a reply and check it is JSON with ok == WANT_OK; return the error
 * message (malloc'd) or NULL for an ok reply. */
static char *
expect_reply (int fd, bool want_ok)
{
  char *line = read_line (fd), *e = NULL;
  json_error_t jerr;
  json_t *j;

  ck_assert_msg (line != NULL, "connection closed instead of a reply");
  j = json_loads (line, 0, &jerr);
  ck_assert_msg (j != NULL, "reply is not JSON: %s", line);
  ck_assert_msg (json_is_true (json_object_get (j, "ok")) == want_ok,
                 "wanted ok=%d: %s", want_ok, line);
  if (!want_ok)
    e = strdup (json_string_value (json_object_get (j, "error")));
  json_decref (j);
  free (line);
  return e;
}

/* The socket answers a fresh connection ("help" -> ok). */
static void
assert_answers (const char *p)
{
  int fd = connect_to (p);

  send_str (fd, "help\n");
  free (expect_reply (fd, true));
  close_fd (fd);
}

/* ---- the socket file ---- */

START_TEST (test_default_path)
{
  char buf[256], want[256];
  const char *old = getenv ("XDG_RUNTIME_DIR");
  const char *oldtmp = getenv ("TMPDIR");
  char *saved = old ? strdup (old) : NULL;
  char *savedtmp = oldtmp ? strdup (oldtmp) : NULL;

  unsetenv ("TMPDIR");
  setenv ("XDG_RUNTIME_DIR", "/run/user/1000", 1);
  ck_assert_int_eq (ctl_default_path (buf, sizeof buf, 4242), 0);
  ck_assert_str_eq (buf, "/run/user/1000/stabledif-4242.sock");
  /* Without it: the private directory in /tmp, never /tmp itself. */
  unsetenv ("XDG_RUNTIME_DIR");
  snprintf (want, sizeof want, "/tmp/stabledif-%ld/stabledif-17.sock",
            (long) geteuid ());
  ck_assert_int_eq (ctl_default_path (buf, sizeof buf, 17), 0);
  ck_assert_str_eq (buf, want);
  setenv ("XDG_RUNTIME_DIR", "", 1);     /* empty: ignored */
  ck_assert_int_eq (ctl_default_path (buf, sizeof buf, 17), 0);
  ck_assert_str_eq (buf, want);
  ck_assert_int_eq (ctl_default_path (buf, 10, 17), -1);
  ck_assert_int_eq (ctl_default_path (buf, strlen (want), 17), -1);
  ck_assert_int_eq (ctl_default_path (buf, strlen (want) + 1, 17), 0);
  /* TMPDIR moves the private directory. */
  setenv ("TMPDIR", "/var/tmp/", 1);
  snprintf (want, sizeof want, "/var/tmp/stabledif-%ld/stabledif-17.sock",
            (long) geteuid ());
  ck_assert_int_eq (ctl_default_path (buf, sizeof buf, 17), 0);
  ck_assert_str_eq (buf, want);

  if (saved)
    setenv ("XDG_RUNTIME_DIR", saved, 1);
  else
    unsetenv ("XDG_RUNTIME_DIR");
  if (savedtmp)
    setenv ("TMPDIR", savedtmp, 1);
  else
    unsetenv ("TMPDIR");
  free (saved);
  free (savedtmp);
}
END_TEST

START_TEST (test_mode_and_removal)
{
  struct ctl *c;
  struct stat st;
  mode_t old = umask (0);       /* the most permissive umask */

  c = ctl_start (d, path);
  /* ctl_start gave the process umask back as it was. */
  ck_assert_uint_eq (umask (old), 0);
  ck_assert_msg (c != NULL, "ctl_start: %s", last_error);
  ck_assert_int_eq (lstat (path, &st), 0);
  ck_assert (S_ISSOCK (st.st_mode));
  ck_assert_uint_eq (st.st_mode & 07777, 0600);
  ck_assert_uint_eq (st.st_uid, geteuid ());
  assert_answers (path);
  ctl_stop (c);
  ck_assert_int_eq (lstat (path, &st), -1);
  ck_assert_int_eq (errno, ENOENT);
  ctl_stop (NULL);
}
END_TEST

START_TEST (test_refuse_regular_file)
{
  struct stat st;
  int fd = open (path, O_CREAT | O_WRONLY, 0644);

  ck_assert_int_ge (fd, 0);
  ck_assert_int_eq (write (fd, "keep", 4), 4);
  close (fd);
  ck_assert_ptr_null (ctl_start (d, path));
  ck_assert_msg (strstr (last_error, "not a socket") != NULL, "%s",
                 last_error);
  ck_assert_int_eq (lstat (path, &st), 0);
  ck_assert (S_ISREG (st.st_mode));
  ck_assert_int_eq (st.st_size, 4);
}
END_TEST

START_TEST (test_refuse_symlink)
{
  char target[PATH_MAX], target2[PATH_MAX];
  struct stat st;
  int fd;

  /* A symlink to a file, and a dangling one: neither is followed or
   * removed. */
  snprintf (target, sizeof target, "%s/target", dir);
  fd = open (target, O_CREAT | O_WRONLY, 0644);
  ck_assert_int_ge (fd, 0);
  close (fd);
  ck_assert_int_eq (symlink (target, path), 0);
  ck_assert_ptr_null (ctl_start (d, path));
  ck_assert_msg (strstr (last_error, "not a socket") != NULL, "%s",
                 last_error);
  ck_assert_int_eq (lstat (path, &st), 0);
  ck_assert (S_ISLNK (st.st_mode));
  ck_assert_int_eq (lstat (target, &st), 0);
  ck_assert (S_ISREG (st.st_mode));

  unlink (path);
  snprintf (target2, sizeof target2, "%s/nothing-here", dir);
  ck_assert_int_eq (symlink (target2, path), 0);
  ck_assert_ptr_null (ctl_start (d, path));
  ck_assert_int_eq (lstat (target2, &st), -1);    /* not created */
  ck_assert_int_eq (lstat (path, &st), 0);
  ck_assert (S_ISLNK (st.st_mode));
}
END_TEST

START_TEST (test_refuse_directory)
{
  struct stat st;

  ck_assert_int_eq (mkdir (path, 0700), 0);
  ck_assert_ptr_null (ctl_start (d, path));
  ck_assert_int_eq (lstat (path, &st), 0);
  ck_assert (S_ISDIR (st.st_mode));
}
END_TEST

START_TEST (test_replace_stale_socket)
{
  struct sockaddr_un addr = { .sun_family = AF_UNIX };
  struct ctl *c;
  int fd;

  /* A socket file whose server is gone. */
  fd = socket (AF_UNIX, SOCK_STREAM, 0);
  strcpy (addr.sun_path, path);
  ck_assert_int_eq (bind (fd, (struct sockaddr *) &addr, sizeof addr), 0);
  close (fd);

  c = ctl_start (d, path);
  ck_assert_msg (c != NULL, "ctl_start: %s", last_error);
  assert_answers (path);
  ctl_stop (c);
}
END_TEST

START_TEST (test_refuse_live_socket)
{
  struct ctl *c1, *c2;

  c1 = ctl_start (d, path);
  ck_assert_ptr_nonnull (c1);
  c2 = ctl_start (d, path);
  ck_assert_ptr_null (c2);
  ck_assert_msg (strstr (last_error, "another server") != NULL, "%s",
                 last_error);
  assert_answers (path);         /* the first one is undisturbed */
  ctl_stop (c1);
}
END_TEST

START_TEST (test_path_too_long)
{
  char longpath[300];

  memset (longpath, 'x', sizeof longpath - 1);
  longpath[0] = '/';
  longpath[sizeof longpath - 1] = '\0';
  ck_assert_ptr_null (ctl_start (d, longpath));
  ck_assert_msg (strstr (last_error, "bytes") != NULL, "%s", last_error);
  ck_assert_ptr_null (ctl_start (d, "/nonexistent-dir-stabledif/x.sock"));
  ck_assert_msg (strstr (last_error, "directory /nonexistent-dir-stabledif: "
                         "No such file") != NULL, "%s", last_error);
}
END_TEST

START_TEST (test_stop_removes_only_ours)
{
  struct ctl *c;
  struct stat st;
  int fd;

  /* If someone replaced the socket file meanwhile, stop leaves theirs. */
  c = ctl_start (d, path);
  ck_assert_ptr_nonnull (c);
  ck_assert_int_eq (unlink (path), 0);
  fd = open (path, O_CREAT | O_WRONLY, 0600);
  ck_assert_int_ge (fd, 0);
  close (fd);
  ctl_stop (c);
  ck_assert_int_eq (lstat (path, &st), 0);
  ck_assert (S_ISREG (st.st_mode));
}
END_TEST

/* ---- robustness ---- */

static struct ctl *c;           /* the socket of a robustness test */

static void
setup_running (void)
{
  setup ();
  c = ctl_start (d, path);
  ck_assert_msg (c != NULL, "ctl_start: %s", last_error);
}

static void
teardown_running (void)
{
  ctl_stop (c);
  c = NULL;
  teardown ();
}

START_TEST (test_several_requests_one_connection)
{
  int fd = connect_to (path);
  char *line;
  json_t *j;

  /* Several lines in one write, answered in order. */
  send_str (fd, "help\nbogus\r\ncounters\n\nevents 0\n");
  free (expect_reply (fd, true));
  free (expect_reply (fd, false));
  free (expect_reply (fd, true));
  free (expect_reply (fd, false));          /* empty line */
  line = read_line (fd);
  j = json_loads (line, 0, NULL);
  ck_assert (json_is_array (json_object_get (j, "events")));
  json_decref (j);
  free (line);
  close_fd (fd);
}
END_TEST

START_TEST (test_garbage)
{
  int fd = connect_to (path);
  unsigned char buf[8192];
  uint32_t x = 99;
  size_t i, newlines = 0;
  char *e;

  for (i = 0; i < sizeof buf; i++) {
    x = x * 1103515245 + 12345;
    buf[i] = x >> 16;
    if (buf[i] == 0 || buf[i] == '\n') /* count lines; NULs are separate */
      buf[i] = (i % 50 == 49) ? '\n' : 'z';
    if (buf[i] == '\n')
      newlines++;
  }
  buf[sizeof buf - 1] = '\n';
  newlines++;
  send_all (fd, buf, sizeof buf);
  for (i = 0; i < newlines; i++)
    free (expect_reply (fd, false));
  send_str (fd, "help\n");
  free (expect_reply (fd, true));

  /* A NUL byte inside a line. */
  send_all (fd, "help\0junk\n", 10);
  e = expect_reply (fd, false);
  ck_assert_msg (strstr (e, "NUL") != NULL, "%s", e);
  free (e);
  send_str (fd, "counters\n");
  free (expect_reply (fd, true));
  close_fd (fd);
}
END_TEST

START_TEST (test_long_lines)
{
  int fd = connect_to (path);
  char *big = malloc (3 * CTL_LINE_MAX), *e;
  size_t i;

  /* Exactly CTL_LINE_MAX bytes is a line (an unknown verb). */
  memset (big, 'q', CTL_LINE_MAX);
  big[CTL_LINE_MAX] = '\n';
  send_all (fd, big, CTL_LINE_MAX + 1);
  e = expect_reply (fd, false);
  ck_assert_msg (strstr (e, "unknown verb") != NULL, "%s", e);
  free (e);

  /* One byte more is too long: one error, the rest is discarded. */
  memset (big, 'q', 3 * CTL_LINE_MAX);
  send_all (fd, big, CTL_LINE_MAX + 1);
  e = expect_reply (fd, false);
  ck_assert_msg (strstr (e, "longer than") != NULL, "%s", e);
  free (e);
  send_all (fd, big, 3 * CTL_LINE_MAX);     /* more of the same line */
  send_str (fd, "still the same line\nhelp\n");
  free (expect_reply (fd, true));

  /* A long line that arrives a few bytes at a time. */
  for (i = 0; i < CTL_LINE_MAX + 100; i += 100)
    send_all (fd, big, 100);
  send_str (fd, "\ncounters\n");
  e = expect_reply (fd, false);
  ck_assert_msg (strstr (e, "longer than") != NULL, "%s", e);
  free (e);
  free (expect_reply (fd, true));

  /* 1 MiB without any newline, then a request. */
  for (i = 0; i < 256; i++)
    send_all (fd, big, 4096);
  send_str (fd, "\nhelp\n");
  free (expect_reply (fd, false));
  free (expect_reply (fd, true));
  close_fd (fd);
  free (big);
}
END_TEST

START_TEST (test_partial_lines)
{
  int fd = connect_to (path);
  const char *req = "events 0\n";
  char *line;
  json_t *j;
  size_t i;

  /* One byte at a time: still one request, one reply. */
  for (i = 0; i < strlen (req); i++)
    send_all (fd, req + i, 1);
  line = read_line (fd);
  j = json_loads (line, 0, NULL);
  ck_assert_msg (json_is_array (json_object_get (j, "events")), "%s", line);
  json_decref (j);
  free (line);

  /* "coun" + "ters" is "counters", not an error about "coun". */
  send_str (fd, "coun");
  send_str (fd, "ters\n");
  line = read_line (fd);
  j = json_loads (line, 0, NULL);
  ck_assert_msg (json_is_object (json_object_get (j, "counters")), "%s", line);
  json_decref (j);
  free (line);

  /* An unterminated last line before the client stops sending is still
   * answered, then the server closes. */
  send_str (fd, "help");
  ck_assert_int_eq (shutdown (fd, SHUT_WR), 0);
  free (expect_reply (fd, true));
  ck_assert_ptr_null (read_line (fd));
  close_fd (fd);
  assert_answers (path);
}
END_TEST

START_TEST (test_many_clients)
{
  int fds[50];
  size_t i;

  /* 50 clients at once, each with a request in flight, answered in any
   * order, each connection getting its own reply. */
  for (i = 0; i < 50; i++)
    fds[i] = connect_to (path);
  for (i = 0; i < 50; i++)
    send_str (fds[i], i % 2 ? "counters\nhel" : "profile\nbogus\nhel");
  for (i = 0; i < 50; i++)
    send_str (fds[i], "p\n");
  for (i = 50; i-- > 0; ) {
    char *line = read_line (fds[i]);
    json_t *j = json_loads (line, 0, NULL);

    ck_assert_ptr_nonnull (j);
    if (i % 2)
      ck_assert (json_is_object (json_object_get (j, "counters")));
    else
      ck_assert (json_is_object (json_object_get (j, "views")));
    json_decref (j);
    free (line);
    if (i % 2 == 0)
      free (expect_reply (fds[i], false));
    free (expect_reply (fds[i], true));
  }
  for (i = 0; i < 50; i++)
    close_fd (fds[i]);
  assert_answers (path);
}
END_TEST

START_TEST (test_too_many_clients)
{
  int fds[CTL_CLIENTS_MAX], extra;
  char *e;
  size_t i;

  for (i = 0; i < CTL_CLIENTS_MAX; i++) {
    fds[i] = connect_to (path);
    /* Make sure the server has taken it (answered) before the next. */
    send_str (fds[i], "help\n");
    free (expect_reply (fds[i], true));
  }
  extra = connect_to (path);
  e = expect_reply (extra, false);
  ck_assert_msg (strstr (e, "too many") != NULL, "%s", e);
  free (e);
  ck_assert_ptr_null (read_line (extra));       /* and hung up */
  close_fd (extra);

  /* Existing clients are unaffected; a freed slot is reused. */
  send_str (fds[0], "counters\n");
  free (expect_reply (fds[0], true));
  close_fd (fds[0]);
  /* The server notices the close asynchronously: retry (bounded). */
  for (i = 0; i < 200; i++) {
    char *line;

    extra = connect_to (path);
    send_str (extra, "help\n");
    line = read_line (extra);
    if (line && strstr (line, "\"ok\":true")) {
      free (line);
      break;
    }
    free (line);
    close_fd (extra);
    poll (NULL, 0, 50);
  }
  ck_assert_int_lt (i, 200);
  close_fd (extra);
  for (i = 1; i < CTL_CLIENTS_MAX; i++)
    close_fd (fds[i]);
}
END_TEST

START_TEST (test_vanishing_clients)
{
  size_t i;

  for (i = 0; i < 200; i++) {
    int fd = connect_to (path);

    switch (i % 4) {
    case 0: break;                          /* connect, close */
    case 1: send_str (fd, "coun"); break;   /* half a request */
    case 2: send_str (fd, "events 0\nprofile\nhelp\n"); break; /* no read */
    case 3: {                               /* reset by peer */
      struct linger l = { .l_onoff = 1, .l_linger = 0 };
      setsockopt (fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
      send_str (fd, "counters\n");
      break;
    }
    }
    close_fd (fd);
  }
  assert_answers (path);
}
END_TEST

START_TEST (test_client_never_reads)
{
  int fd = connect_to (path), i;
  char reqs[1000];
  bool full = false;
  uint64_t sent_lines = 0, got = 0;
  char *line;

  /* Ask for ever more replies without reading them: the server must
   * stop reading our requests once its unsent replies pass its mark
   * (our sends then find the socket full), not hold them without bound.
   * Bounded: 4000 writes of 100 requests is far beyond the mark (each
   * reply is hundreds of bytes). */
  for (i = 0; i + 10 <= (int) sizeof reqs; i += 10)
    memcpy (reqs + i, "counters\n\n", 10);  /* 2 replies per 10 bytes */
  for (i = 0; i < 4000 && !full; i++) {
    ssize_t n = send (fd, reqs, sizeof reqs, MSG_NOSIGNAL | MSG_DONTWAIT);

    if (n == -1 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      /* Full, or the server is just slow: give it a moment. */
      struct pollfd p = { .fd = fd, .events = POLLOUT };
      full = poll (&p, 1, 500) == 0;
      continue;
    }
    ck_assert_msg (n > 0, "send: %s", strerror (errno));
    for (ssize_t k = 0; k < n; k++)
      sent_lines += reqs[k] == '\n';
    if (n < (ssize_t) sizeof reqs) {            /* finish the line */
      send_all (fd, reqs + n, sizeof reqs - n);
      for (size_t k = n; k < sizeof reqs; k++)
        sent_lines += reqs[k] == '\n';
    }
  }
  ck_assert_msg (full, "the server read every request of a client that "
                 "never reads its replies");
  /* Others are served meanwhile. */
  assert_answers (path);
  /* Reading now gets every reply, in order: nothing was dropped. */
  shutdown (fd, SHUT_WR);
  while ((line = read_line (fd)) != NULL) {
    got++;
    free (line);
  }
  ck_assert_msg (got == sent_lines, "%" PRIu64 " replies to %" PRIu64
                 " requests", got, sent_lines);
  close_fd (fd);
}
END_TEST

/* Many requests in one write whose replies are far more than the
 * server's limits: all answered, in order, for a client that reads.
 * Each "events" reply carries the 1000 events of 1000 failed reads
 * (about 170 KiB); 40 of them fit in one read of the server's. */
START_TEST (test_many_requests_one_write)
{
  static const struct disk_io io = { .conn = 1, .view = PROFILE_VIEW_DATA };
  const size_t nreq = 40;
  char reqs[40 * 7], blk[512];
  int fd, k;
  size_t i, got = 0, bytes = 0;
  char *line;

  memset (blk, 0x3c, sizeof blk);
  ck_assert_int_eq (disk_pwrite (d, &io, blk, sizeof blk, 5 * 512, false), 0);
  ck_assert_int_eq (disk_inject (d, DISK_INJECT_GUARD, 5), 0);
  for (k = 0; k < 1000; k++)
    ck_assert_int_eq (disk_pread (d, &io, blk, sizeof blk, 5 * 512), -1);
  last_error[0] = '\0';
  for (i = 0; i < nreq; i++)
    memcpy (reqs + 7 * i, "events\n", 7);
  fd = connect_to (path);
  send_all (fd, reqs, sizeof reqs);
  while (got < nreq) {
    line = read_line (fd);
    ck_assert_msg (line != NULL, "dropped after %zu replies", got);
    ck_assert_msg (strncmp (line, "{\"ok\":true", 10) == 0,
                   "reply %zu: %.200s", got, line);
    bytes += strlen (line) + 1;
    got++;
    free (line);
  }
  ck_assert_uint_gt (bytes, CTL_OUT_MAX);
  close_fd (fd);
}
END_TEST

START_TEST (test_accept_out_of_fds)
{
  struct rlimit rl, low;
  int fd, probe, i;
  const char *preload = getenv ("LD_PRELOAD");

  /* Allow exactly one more descriptor: the client's socket takes it, so
   * the server's accept fails (EMFILE).  It must report that once, keep
   * the connection waiting and accept it when descriptors are back.
   * (Not under valgrind: its accept takes the connection and closes it
   * when the descriptor is above the limit, which the kernel never
   * does.) */
  if (preload && strstr (preload, "vgpreload"))
    return;
  probe = dup (0);
  ck_assert_int_ge (probe, 0);
  close (probe);
  ck_assert_int_eq (getrlimit (RLIMIT_NOFILE, &rl), 0);
  low = rl;
  low.rlim_cur = probe + 1;
  ck_assert_int_eq (setrlimit (RLIMIT_NOFILE, &low), 0);
  fd = connect_to (path);
  ck_assert_int_eq (fd, probe);
  for (i = 0; i < 400 && !error_says ("accept"); i++)
    poll (NULL, 0, 50);
  ck_assert_msg (error_says ("accept"), "no accept error: %s", last_error);
  ck_assert_int_eq (setrlimit (RLIMIT_NOFILE, &rl), 0);
  send_str (fd, "help\n");
  free (expect_reply (fd, true));
  close_fd (fd);
  assert_answers (path);
}
END_TEST

START_TEST (test_stop_with_clients)
{
  int fds[5];
  struct stat st;
  size_t i;

  for (i = 0; i < 5; i++) {
    fds[i] = connect_to (path);
    send_str (fds[i], i % 2 ? "help\n" : "coun");
  }
  free (expect_reply (fds[1], true));
  ctl_stop (c);
  c = NULL;
  ck_assert_int_eq (lstat (path, &st), -1);
  /* Every connection is closed by the server. */
  for (i = 0; i < 5; i++) {
    char *line;
    while ((line = read_line (fds[i])) != NULL)
      free (line);
    close_fd (fds[i]);
  }
}
END_TEST

static Suite *
ctl_socket_suite (void)
{
  Suite *s = suite_create ("ctl-socket");
  TCase *file = tcase_create ("file");
  TCase *robust = tcase_create ("robust");

  tcase_add_checked_fixture (file, setup, teardown);
  tcase_add_test (file, test_default_path);
  tcase_add_test (file, test_mode_and_removal);
  tcase_add_test (file, test_refuse_regular_file);
  tcase_add_test (file, test_refuse_symlink);
  tcase_add_test (file, test_refuse_directory);
  tcase_add_test (file, test_replace_stale_socket);
  tcase_add_test (file, test_refuse_live_socket);
  tcase_add_test (file, test_path_too_long);
  tcase_add_test (file, test_stop_removes_only_ours);
  suite_add_tcase (s, file);

  tcase_add_checked_fixture (robust, setup_running, teardown_running);
  tcase_add_test (robust, test_several_requests_one_connection);
  tcase_add_test (robust, test_garbage);
  tcase_add_test (robust, test_long_lines);
  tcase_add_test (robust, test_partial_lines);
  tcase_add_test (robust, test_many_clients);
  tcase_add_test (robust, test_too_many_clients);
  tcase_add_test (robust, test_vanishing_clients);
  tcase_add_test (robust, test_client_never_reads);
  tcase_add_test (robust, test_many_requests_one_write);
  tcase_add_test (robust, test_accept_out_of_fds);
  tcase_add_test (robust, test_stop_with_clients);
  suite_add_tcase (s, robust);
  return s;
}

int
main (void)
{
  SRunner *sr = srunner_create (ctl_socket_suite ());
  int failed;

  test_tmpdir_enter ("test-ctl-socket");
  srunner_run_all (sr, CK_NORMAL);
  failed = srunner_ntests_failed (sr);
  srunner_free (sr);
  test_tmpdir_leave ();
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
