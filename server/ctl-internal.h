/* stabledif: control socket limits and fixed replies, shared by the
 * socket thread (ctl.c), the request handler (ctl-request.c) and the
 * tests.  Not part of the contract in ctl.h. */
#ifndef STABLEDIF_CTL_INTERNAL_H
#define STABLEDIF_CTL_INTERNAL_H

/* Longest request line, in bytes, without its newline. */
#define CTL_LINE_MAX 4096

/* Connections served at once; more are told so and closed. */
#define CTL_CLIENTS_MAX 64

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

/* Most events in one "events" reply ("more" says there are others). */
#define CTL_EVENTS_MAX 1000

/* Default socket file names: PREFIX PID SUFFIX (stabledif-ctl globs
 * for them). */
#define CTL_SOCKET_PREFIX "stabledif-"
#define CTL_SOCKET_SUFFIX ".sock"

/* Replies the socket thread sends without asking ctl_handle_line. */
#define CTL_REPLY_TOO_LONG \
  "{\"ok\":false,\"error\":\"request line longer than 4096 bytes; " \
  "the rest of the line is ignored\"}"
#define CTL_REPLY_NUL \
  "{\"ok\":false,\"error\":\"request contains a NUL byte\"}"
#define CTL_REPLY_ENOMEM \
  "{\"ok\":false,\"error\":\"out of memory\"}"
#define CTL_REPLY_BUSY \
  "{\"ok\":false,\"error\":\"too many control connections (64); " \
  "try again later\"}"

#endif /* STABLEDIF_CTL_INTERNAL_H */
