/* SPDX-License-Identifier: BSD-3-Clause */
/* stabledif: the control socket (stabledif-ctl(1), PROTOCOL).
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

/* Create the socket at PATH (NULL: this process's default path, making
 * the private directory if need be) and serve D, in two halves for a
 * server that forks between them (nbdkit: bind in .get_ready, so the
 * socket exists before nbdkit runs its --run command or reports that it
 * started; serve in .after_fork, as a thread does not survive fork).
 * Connections made in between wait in the listen backlog.  ctl_bind
 * returns NULL and ctl_serve -1 after reporting the error through D's
 * error function; ctl_serve removes the socket file when it fails (C
 * must still be passed to ctl_stop). */
struct ctl *ctl_bind (struct disk *d, const char *path);
int ctl_serve (struct ctl *c);

/* The path of C's socket file (the default one if none was given), for
 * announcing it.  Valid until ctl_stop. */
const char *ctl_socket_path (const struct ctl *c);

/* Stop serving (if ctl_serve ran), remove the socket file, free C.
 * NULL is a no-op. */
void ctl_stop (struct ctl *c);

/* Remove C's socket file if it is still the one ctl_bind made, and
 * nothing else (C stays valid, a serving thread runs on): for a process
 * that exits without calling ctl_stop.  NULL is a no-op. */
void ctl_remove_socket (const struct ctl *c);

#endif /* STABLEDIF_CTL_H */
