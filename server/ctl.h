/* SPDX-License-Identifier: BSD-3-Clause */
/* stabledif: the control socket (DESIGN §6).
 *
 * A Unix stream socket, mode 0600, in a directory only its user (or
 * root) can write (ctl-path.h): one request line in, one JSON reply
 * line out, as many requests per connection as the client likes.  Verbs:
 * profile, counters, events [SINCE], reset, inject KIND LBA, help.  A
 * thread of its own serves it; nothing on it can change stable_writes,
 * read files or touch anything outside the disk.
 */
#ifndef STABLEDIF_CTL_H
#define STABLEDIF_CTL_H

#include <stddef.h>

#include "disk.h"

struct ctl;

/* The default socket path for a server process PID: stabledif-PID.sock
 * in $XDG_RUNTIME_DIR if set, else in the private directory
 * ${TMPDIR:-/tmp}/stabledif-UID (ctl-path.h).  Writes into BUF (LEN
 * bytes); looks only at the environment.  Returns -1 (ENAMETOOLONG) if
 * it does not fit. */
int ctl_default_path (char *buf, size_t len, long pid);

/* Create the socket at PATH (NULL: this process's default path, making
 * the private directory if need be) and start serving D.  Returns NULL
 * after reporting the error through D's error function.  Same as
 * ctl_bind followed by ctl_serve. */
struct ctl *ctl_start (struct disk *d, const char *path);

/* The two halves of ctl_start, for a server that forks between them
 * (nbdkit: bind in .get_ready, so the socket exists before nbdkit runs
 * its --run command or reports that it started; serve in .after_fork,
 * as a thread does not survive fork).  Connections made in between
 * wait in the listen backlog.  ctl_bind returns NULL and ctl_serve -1
 * after reporting the error; ctl_serve removes the socket file when it
 * fails (C must still be passed to ctl_stop). */
struct ctl *ctl_bind (struct disk *d, const char *path);
int ctl_serve (struct ctl *c);

/* The path of C's socket file (the default one if none was given), for
 * announcing it.  Valid until ctl_stop. */
const char *ctl_socket_path (const struct ctl *c);

/* Stop serving (if ctl_serve ran), remove the socket file, free C.
 * NULL is a no-op. */
void ctl_stop (struct ctl *c);

/* Handle one request line (without its newline) and return the reply
 * line (without newline), malloc'd.  The socket thread uses this; tests
 * and fuzzers call it directly.  Never returns NULL except on ENOMEM. */
char *ctl_handle_line (struct disk *d, const char *line);

#endif /* STABLEDIF_CTL_H */
