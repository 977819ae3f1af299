/* SPDX-License-Identifier: BSD-3-Clause */
/* stabledif: counters and the event ring (nbdkit-stabledif-plugin(1),
 * COUNTERS).
 *
 * Counters are 64-bit atomics, updated without locks on the I/O path.
 * Events record the most recent failures in a ring (mutex-protected: they
 * are rare) and, optionally, are appended to a file as JSON lines.
 */
#ifndef STABLEDIF_STATS_H
#define STABLEDIF_STATS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include <jansson.h>

#include "pi.h"
#include "profile.h"

/* NBD operations that are counted. */
enum stats_op {
  STATS_OP_READ = 0,
  STATS_OP_WRITE,
  STATS_OP_TRIM,
  STATS_OP_ZERO,
  STATS_OP_FLUSH,
  STATS_OP_COUNT                /* number of ops */
};
#define STATS_VIEW_COUNT 2       /* PROFILE_VIEW_DATA, PROFILE_VIEW_DIF */

/* "read", "write", "trim", "zero", "flush". */
const char *stats_op_name (enum stats_op op);

/* The counters.  Indexed by [view][op] and by enum pi_check (index 0,
 * PI_CHECK_OK, is unused). */
struct stats_counters {
  _Atomic uint64_t requests[STATS_VIEW_COUNT][STATS_OP_COUNT]; /* requests */
  _Atomic uint64_t bytes[STATS_VIEW_COUNT][STATS_OP_COUNT]; /* bytes moved */
  _Atomic uint64_t blocks_verified;  /* blocks whose PI was checked */
  _Atomic uint64_t blocks_generated; /* blocks whose PI the device inserted */
  _Atomic uint64_t blocks_escaped;   /* blocks skipped by the escape rule */
  _Atomic uint64_t blocks_recovered; /* blocks whose PI opening the file=
                                        store rebuilt after a crash */
  _Atomic uint64_t write_errors[4];  /* host PI rejected, per check */
  _Atomic uint64_t read_errors[4];   /* stored PI failed on read, per check */
  _Atomic uint64_t writes_rejected;  /* write requests refused for bad PI */
  _Atomic uint64_t reads_failed;     /* read requests failed for bad PI */
  _Atomic uint64_t injections;       /* faults injected on the ctl socket */
};

/* A plain copy of the counters, for reporting. */
struct stats_snapshot {
  uint64_t requests[STATS_VIEW_COUNT][STATS_OP_COUNT];
  uint64_t bytes[STATS_VIEW_COUNT][STATS_OP_COUNT];
  uint64_t blocks_verified, blocks_generated, blocks_escaped;
  uint64_t blocks_recovered;
  uint64_t write_errors[4], read_errors[4];
  uint64_t writes_rejected, reads_failed, injections;
};

/* One recorded failure. */
struct stats_event {
  uint64_t seq;                 /* 1, 2, 3 ... (assigned when recorded) */
  struct timespec time;         /* wall clock (assigned when recorded) */
  uint64_t conn;                /* connection number, from 1; 0 = none */
  enum profile_view view;       /* view of the request */
  enum stats_op op;             /* operation of the request */
  uint64_t lba;                 /* failing block */
  enum pi_check check;          /* failing check */
  uint64_t expected;            /* value the check wanted */
  uint64_t actual;              /* value found */
  uint64_t offset;              /* request offset, bytes, in its view */
  uint64_t length;              /* request length, bytes */
};

/* Counters + events of one disk. */
struct stats {
  struct stats_counters c;      /* the counters */
  pthread_mutex_t lock;         /* guards everything below */
  struct stats_event *ring;     /* ring_size most recent events */
  size_t ring_size;             /* capacity of ring */
  uint64_t next_seq;            /* sequence number of the next event */
  FILE *events_file;            /* JSON lines appended here, or NULL */
};

/* RING_SIZE events are kept.  Returns -1 with errno set if the ring
 * cannot be allocated. */
int stats_init (struct stats *s, size_t ring_size);
/* Append events to EVENTS_PATH as JSON lines too (after stats_init).
 * Returns -1 with errno set if it cannot be opened. */
int stats_open_events (struct stats *s, const char *events_path);
void stats_destroy (struct stats *s);

/* Add N to a counter (relaxed atomic). */
static inline void
stats_add (_Atomic uint64_t *counter, uint64_t n)
{
  atomic_fetch_add_explicit (counter, n, memory_order_relaxed);
}

/* Count one request of OP on VIEW moving BYTES bytes. */
void stats_request (struct stats *s, enum profile_view view,
                    enum stats_op op, uint64_t bytes);

/* Record EV (seq and time are filled in) and append it to the events file
 * if there is one. */
void stats_record (struct stats *s, struct stats_event *ev);

/* Copy up to MAX events with seq > SINCE, oldest first, into OUT.
 * Returns how many were copied. */
size_t stats_events_since (struct stats *s, uint64_t since,
                           struct stats_event *out, size_t max);

/* Read all counters. */
void stats_snapshot (struct stats *s, struct stats_snapshot *out);

/* Zero the counters and forget the events (sequence numbers continue). */
void stats_reset (struct stats *s);

/* JSON forms (new references; the caller decrefs).  Used for the events
 * file and by the control socket, so both say the same thing. */
json_t *stats_event_json (const struct stats_event *ev);
json_t *stats_snapshot_json (const struct stats_snapshot *snap);

#endif /* STABLEDIF_STATS_H */
