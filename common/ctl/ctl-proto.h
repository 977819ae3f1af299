/* SPDX-License-Identifier: BSD-3-Clause */
/* stabledif: the control socket's protocol, as both ends see it.
 *
 * One request line in, one JSON reply line out (stabledif-ctl(1),
 * PROTOCOL).  The limits a client must respect, the default socket file
 * names, and the replies the server sends without parsing a request.
 * No code: the server (server/ctl.c, server/ctl-request.c) and the
 * client side (ctl-conn.c) include it.
 */
#ifndef STABLEDIF_CTL_PROTO_H
#define STABLEDIF_CTL_PROTO_H

/* Longest request line, in bytes, without its newline (a plain number:
 * the reply below spells it). */
#define CTL_LINE_MAX 4096

/* Connections a server serves at once; more are told so and closed (a
 * plain number: the reply below spells it). */
#define CTL_CLIENTS_MAX 64

/* Most events in one "events" reply ("more" says there are others). */
#define CTL_EVENTS_MAX 1000

/* Default socket file names: PREFIX PID SUFFIX (stabledif-ctl globs
 * for them). */
#define CTL_SOCKET_PREFIX "stabledif-"
#define CTL_SOCKET_SUFFIX ".sock"

/* A number macro as a string literal. */
#define CTL_STR_(x) #x
#define CTL_STR(x) CTL_STR_(x)

/* Replies the server sends without parsing the request. */
#define CTL_REPLY_TOO_LONG \
  "{\"ok\":false,\"error\":\"request line longer than " \
  CTL_STR (CTL_LINE_MAX) " bytes; the rest of the line is ignored\"}"
#define CTL_REPLY_NUL \
  "{\"ok\":false,\"error\":\"request contains a NUL byte\"}"
#define CTL_REPLY_ENOMEM \
  "{\"ok\":false,\"error\":\"out of memory\"}"
#define CTL_REPLY_BUSY \
  "{\"ok\":false,\"error\":\"too many control connections (" \
  CTL_STR (CTL_CLIENTS_MAX) "); try again later\"}"

#endif /* STABLEDIF_CTL_PROTO_H */
