/* SPDX-License-Identifier: BSD-3-Clause */
/* vm-relay: the guest end of the VM tests' non-IP NBD channel.
 *
 *   vm-relay SOCKET PORT
 *
 * Listens on the Unix stream socket SOCKET, accepts one connection,
 * opens PORT (a virtio-serial port, /dev/vportNpM, whose host end QEMU
 * connects to nbdkit's Unix socket) and copies bytes both ways until
 * either end closes, then exits 0.  The kernel's NBD driver needs a
 * socket, and a virtio-serial port is a character device: this is the
 * bridge (busybox has no socat).
 *
 * Both directions are buffered and non-blocking, so a full pipe one way
 * never stops the other (an NBD server may be writing a reply while the
 * client is still sending a request).
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

/* Bytes buffered per direction. */
#define RELAY_BUF (256 * 1024)

/* One direction: bytes read from FROM, waiting to be written to TO. */
struct pipe_dir {
  int from, to;                 /* descriptors */
  char *buf;                    /* RELAY_BUF bytes */
  size_t start, end;            /* pending bytes are buf[start..end) */
  bool eof;                     /* FROM has ended */
  const char *name;             /* for messages, "socket -> port" */
};

static void __attribute__ ((noreturn))
die (const char *what)
{
  fprintf (stderr, "vm-relay: %s: %s\n", what, strerror (errno));
  exit (EXIT_FAILURE);
}

/* Read what fits from D->from (moving pending bytes to the front of the
 * buffer first if they block the end).  Returns -1 on error. */
static int
pipe_read (struct pipe_dir *d)
{
  ssize_t r;

  if (d->end == RELAY_BUF && d->start > 0) {
    memmove (d->buf, d->buf + d->start, d->end - d->start);
    d->end -= d->start;
    d->start = 0;
  }
  if (d->end == RELAY_BUF)
    return 0;
  r = read (d->from, d->buf + d->end, RELAY_BUF - d->end);
  if (r == -1)
    return errno == EAGAIN || errno == EINTR ? 0 : -1;
  if (r == 0)
    d->eof = true;
  d->end += (size_t) r;
  return 0;
}

/* Write what D->to accepts.  Returns -1 on error. */
static int
pipe_write (struct pipe_dir *d)
{
  ssize_t r;

  if (d->start == d->end)
    return 0;
  r = write (d->to, d->buf + d->start, d->end - d->start);
  if (r == -1)
    return errno == EAGAIN || errno == EINTR ? 0 : -1;
  d->start += (size_t) r;
  if (d->start == d->end)
    d->start = d->end = 0;
  return 0;
}

int
main (int argc, char *argv[])
{
  struct sockaddr_un addr = { .sun_family = AF_UNIX };
  struct pipe_dir dirs[2];
  int lsock, sock, port, i;

  /* A reader that has gone is an ordinary end, not a signal. */
  signal (SIGPIPE, SIG_IGN);

  if (argc != 3) {
    fprintf (stderr, "usage: vm-relay SOCKET PORT\n");
    return EXIT_FAILURE;
  }
  if (strlen (argv[1]) >= sizeof addr.sun_path) {
    fprintf (stderr, "vm-relay: %s: path too long\n", argv[1]);
    return EXIT_FAILURE;
  }
  strcpy (addr.sun_path, argv[1]);

  lsock = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (lsock == -1)
    die ("socket");
  unlink (argv[1]);
  if (bind (lsock, (struct sockaddr *) &addr, sizeof addr) == -1)
    die (argv[1]);
  if (listen (lsock, 1) == -1)
    die ("listen");
  sock = accept4 (lsock, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
  if (sock == -1)
    die ("accept");
  close (lsock);
  unlink (argv[1]);

  port = open (argv[2], O_RDWR | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (port == -1)
    die (argv[2]);

  dirs[0] = (struct pipe_dir) { .from = sock, .to = port,
                                .name = "socket -> port" };
  dirs[1] = (struct pipe_dir) { .from = port, .to = sock,
                                .name = "port -> socket" };
  for (i = 0; i < 2; ++i) {
    dirs[i].buf = malloc (RELAY_BUF);
    if (dirs[i].buf == NULL)
      die ("malloc");
  }

  /* Until one side ends and what it sent has been passed on. */
  for (;;) {
    struct pollfd fds[2] = {
      { .fd = sock }, { .fd = port },
    };

    for (i = 0; i < 2; ++i) {
      struct pipe_dir *d = &dirs[i];
      struct pollfd *in = d->from == sock ? &fds[0] : &fds[1];
      struct pollfd *out = d->to == sock ? &fds[0] : &fds[1];

      if (!d->eof && (d->end < RELAY_BUF || d->start > 0))
        in->events |= POLLIN;
      if (d->start < d->end)
        out->events |= POLLOUT;
    }
    if ((dirs[0].eof && dirs[0].start == dirs[0].end) ||
        (dirs[1].eof && dirs[1].start == dirs[1].end))
      break;
    if (poll (fds, 2, -1) == -1) {
      if (errno == EINTR)
        continue;
      die ("poll");
    }
    for (i = 0; i < 2; ++i) {
      struct pipe_dir *d = &dirs[i];
      struct pollfd *in = d->from == sock ? &fds[0] : &fds[1];
      struct pollfd *out = d->to == sock ? &fds[0] : &fds[1];

      if (in->revents & (POLLIN | POLLHUP | POLLERR)) {
        if (pipe_read (d) == -1)
          die (d->name);
      }
      if (out->revents & (POLLOUT | POLLERR | POLLHUP)) {
        if (pipe_write (d) == -1) {
          if (errno == EPIPE || errno == ECONNRESET)
            goto done;          /* the reader has gone: nothing to do */
          die (d->name);
        }
      }
    }
  }
 done:
  /* Tell the socket's peer the other side has gone. */
  shutdown (sock, SHUT_RDWR);
  close (sock);
  close (port);
  free (dirs[0].buf);
  free (dirs[1].buf);
  return EXIT_SUCCESS;
}
