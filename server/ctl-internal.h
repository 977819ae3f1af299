/* SPDX-License-Identifier: BSD-3-Clause */
/* stabledif: the control socket's internals, shared by the socket
 * thread (ctl.c), the request handler (ctl-request.c), the tests and the
 * fuzzers: its limits, and the functions a server does not need.  Not
 * part of the contract in ctl.h; what a client sees of the protocol is
 * in common/ctl/ctl-proto.h. */
#ifndef STABLEDIF_CTL_INTERNAL_H
#define STABLEDIF_CTL_INTERNAL_H

#include <stddef.h>

#include "ctl.h"
#include "ctl-proto.h"

/* Unwritten reply bytes at which a connection's further requests wait
 * (are neither read nor answered) until the client reads its replies. */
#define CTL_OUT_HIGH (64 * 1024)

/* Unwritten reply bytes a connection may never exceed (one reply more
 * than CTL_OUT_HIGH is far below it); beyond, it is dropped. */
#define CTL_OUT_MAX (4 * 1024 * 1024)

/* The first allocation of a connection's output buffer (it doubles as
 * replies need). */
#define CTL_OUT_FIRST 4096

/* An output buffer larger than this is freed once it is empty. */
#define CTL_OUT_KEEP (64 * 1024)

/* Pause before accepting again after running out of descriptors. */
#define CTL_BACKOFF_MS 100

/* The default socket path for a server process PID: stabledif-PID.sock
 * in $XDG_RUNTIME_DIR if set, else in the private directory
 * ${TMPDIR:-/tmp}/stabledif-UID (ctl-path.h).  Writes into BUF (LEN
 * bytes); looks only at the environment.  Returns -1 (ENAMETOOLONG) if
 * it does not fit. */
int ctl_default_path (char *buf, size_t len, long pid);

/* ctl_bind followed by ctl_serve, for a server that does not fork
 * between them.  Returns NULL after reporting the error through D's
 * error function. */
struct ctl *ctl_start (struct disk *d, const char *path);

/* Handle one request line (without its newline) and return the reply
 * line (without newline), malloc'd.  The socket thread uses this; tests
 * and fuzzers call it directly.  Never returns NULL except on ENOMEM. */
char *ctl_handle_line (struct disk *d, const char *line);

#endif /* STABLEDIF_CTL_INTERNAL_H */
