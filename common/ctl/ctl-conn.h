/* SPDX-License-Identifier: BSD-3-Clause */
/* stabledif: the client side of the control socket (stabledif-ctl(1),
 * PROTOCOL).
 *
 * Connect to a device's control socket (given, or found by itself), send
 * one request line, read one JSON reply line.  Used by stabledif-ctl; a
 * program that wants the device's counters (stabledif-bench) can use it
 * too.  Errors are written into the caller's buffer, never printed.
 */
#ifndef STABLEDIF_CTL_CONN_H
#define STABLEDIF_CTL_CONN_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

/* How long ctl_conn_request waits for a reply, in milliseconds. */
#define CTL_CONN_TIMEOUT_MS 10000

/* A connection. */
struct ctl_conn {
  int fd;                       /* the socket */
  char *buf;                    /* bytes received, not yet returned */
  size_t len;                   /* bytes in buf */
  size_t cap;                   /* allocated size of buf */
  bool closed;                  /* the server closed the connection */
  bool foreign;                 /* the server is not a stabledif control
                                   socket (an NBD server, say) */
};

/* Find the control socket when the user gave none: the single
 * stabledif-*.sock of ours in $XDG_RUNTIME_DIR or in the private
 * directory ${TMPDIR:-/tmp}/stabledif-UID (if it is safe, see
 * ctl-path.h) that accepts a connection.  Returns a malloc'd path, or NULL with a message in ERR
 * (ERRLEN bytes): none found, or several (listed). */
char *ctl_conn_find (char *err, size_t errlen);

/* Connect to PATH.  Returns -1 with a message in ERR. */
int ctl_conn_open (struct ctl_conn *c, const char *path,
                   char *err, size_t errlen);

/* Send LINE (no newline) and parse the reply line into *REPLY (a new
 * reference) and, if RAW is not NULL, a malloc'd copy of the reply text
 * into *RAW.  Returns -1 with a message in ERR if the connection fails,
 * times out or the reply is not JSON; c->closed then says whether the
 * server hung up, c->foreign whether the server is not a control
 * socket at all (it spoke NBD, or its reply does not start as a JSON
 * object: ERR says which, and no reply is waited for in vain).  A reply
 * {"ok":false,...} is not a failure here. */
int ctl_conn_request (struct ctl_conn *c, const char *line, json_t **reply,
                      char **raw, char *err, size_t errlen);

/* Close the connection (the struct may be opened again). */
void ctl_conn_close (struct ctl_conn *c);

#endif /* STABLEDIF_CTL_CONN_H */
