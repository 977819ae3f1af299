/* SPDX-License-Identifier: BSD-3-Clause */
/* stabledif: the control socket thread's own limits, shared by the
 * socket thread (ctl.c), the request handler (ctl-request.c) and the
 * tests.  Not part of the contract in ctl.h; what a client sees of the
 * protocol is in common/ctl/ctl-proto.h. */
#ifndef STABLEDIF_CTL_INTERNAL_H
#define STABLEDIF_CTL_INTERNAL_H

#include "ctl-proto.h"

/* Unwritten reply bytes at which a connection's further requests wait
 * (are neither read nor answered) until the client reads its replies. */
#define CTL_OUT_HIGH (64 * 1024)

/* Unwritten reply bytes a connection may never exceed (one reply more
 * than CTL_OUT_HIGH is far below it); beyond, it is dropped. */
#define CTL_OUT_MAX (4 * 1024 * 1024)

/* An output buffer larger than this is freed once it is empty. */
#define CTL_OUT_KEEP (64 * 1024)

/* Pause before accepting again after running out of descriptors. */
#define CTL_BACKOFF_MS 100

#endif /* STABLEDIF_CTL_INTERNAL_H */
