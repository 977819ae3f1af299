/* SPDX-License-Identifier: BSD-3-Clause */
/* stabledif: counters and the event ring (nbdkit-stabledif-plugin(1),
 * COUNTERS).
 *
 * A request gathers what it adds to the counters in a tally as it runs
 * and adds the whole tally in one step when it finishes, so a snapshot
 * holds every request either entirely or not at all.  The counters are
 * kept in a few blocks, each behind a small lock held only for that
 * step: requests of different connections rarely meet.  Events record
 * the most recent failures in a ring (mutex-protected: they are rare)
 * and, optionally, are appended to a file as JSON lines.
 */
#ifndef STABLEDIF_STATS_H
#define STABLEDIF_STATS_H

#include <pthread.h>
#include <stdbool.h>
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

/* A plain copy of the counters, for reporting.  Indexed by [view][op]
 * and by enum pi_check (index 0, PI_CHECK_OK, is unused). */
struct stats_snapshot {
  uint64_t requests[STATS_VIEW_COUNT][STATS_OP_COUNT]; /* requests */
  uint64_t bytes[STATS_VIEW_COUNT][STATS_OP_COUNT]; /* bytes moved */
  uint64_t blocks_verified;     /* blocks whose PI was checked */
  uint64_t blocks_generated;    /* blocks whose PI the device inserted */
  uint64_t blocks_escaped;      /* blocks skipped by the escape rule */
  uint64_t blocks_recovered;    /* blocks whose PI opening the file=
                                   store rebuilt after a crash */
  uint64_t write_errors[4];     /* host PI rejected, per check */
  uint64_t read_errors[4];      /* stored PI failed, per check */
  uint64_t writes_rejected;     /* write requests refused for bad PI */
  uint64_t reads_failed;        /* read requests failed for bad PI */
  uint64_t injections;          /* faults injected on the ctl socket */
};

/* What one request (or one injection, or opening the store) adds to the
 * counters: gathered while it runs, added at once by stats_commit.  The
 * counts are those of struct stats_snapshot; blocks_generated may dip
 * below zero (modulo 2^64) while it runs, when a block is put back.
 * The rare counts are only added if rare is set: whoever makes one of
 * them nonzero sets it, so that a request that fails nothing costs no
 * more than its few common counts. */
struct stats_tally {
  enum profile_view view;       /* view of the request */
  enum stats_op op;             /* operation of the request */
  uint64_t requests;            /* 1 for a request, 0 otherwise */
  uint64_t bytes;               /* bytes the request moves */
  uint64_t blocks_verified;     /* as in struct stats_snapshot */
  uint64_t blocks_generated;
  uint64_t blocks_escaped;
  bool rare;                    /* a count below may be nonzero */
  uint64_t blocks_recovered;    /* the rare counts */
  uint64_t write_errors[4];
  uint64_t read_errors[4];
  uint64_t writes_rejected;
  uint64_t reads_failed;
  uint64_t injections;
};

/* Counter blocks per disk.  A request is added to the block of its
 * connection; the blocks are summed when read. */
#define STATS_BLOCKS 8

/* One block of counters.  Several threads add to it (one connection may
 * run requests in parallel, and connections share blocks), so it has a
 * lock, held only while a tally is added or the block copied.  Aligned
 * to a cache line so that the blocks of different connections do not
 * share one. */
struct stats_block {
  _Alignas (64) pthread_mutex_t lock; /* guards sum */
  struct stats_snapshot sum;    /* the tallies committed to this block */
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
  struct stats_block *blocks;   /* STATS_BLOCKS blocks of counters */
  pthread_mutex_t lock;         /* guards everything below */
  struct stats_event *ring;     /* ring_size most recent events */
  size_t ring_size;             /* capacity of ring */
  uint64_t next_seq;            /* sequence number of the next event */
  FILE *events_file;            /* JSON lines appended here, or NULL */
};

/* RING_SIZE events are kept.  Returns -1 with errno set if the ring or
 * the counters cannot be allocated. */
int stats_init (struct stats *s, size_t ring_size);
/* Append events to EVENTS_PATH as JSON lines too (after stats_init).
 * Returns -1 with errno set if it cannot be opened. */
int stats_open_events (struct stats *s, const char *events_path);
void stats_destroy (struct stats *s);

/* Start the tally of one request of OP on VIEW asking for BYTES bytes:
 * it counts the request and its bytes, and nothing else yet. */
static inline void
stats_tally_request (struct stats_tally *t, enum profile_view view,
                     enum stats_op op, uint64_t bytes)
{
  *t = (struct stats_tally) {
    .view = view, .op = op, .requests = 1, .bytes = bytes,
  };
}

/* Start an empty tally of rare counts, for what is not a request. */
static inline void
stats_tally_none (struct stats_tally *t)
{
  *t = (struct stats_tally) { .rare = true };
}

/* Add T to the counters in one step: a snapshot sees all of it or none.
 * CONN (the connection number; any number will do) picks the block. */
void stats_commit (struct stats *s, uint64_t conn,
                   const struct stats_tally *t);

/* Record EV (seq and time are filled in) and append it to the events file
 * if there is one. */
void stats_record (struct stats *s, struct stats_event *ev);

/* Copy up to MAX events with seq > SINCE, oldest first, into OUT.
 * Returns how many were copied. */
size_t stats_events_since (struct stats *s, uint64_t since,
                           struct stats_event *out, size_t max);

/* Read all counters: every committed tally entirely, or not at all,
 * so the counters of one request always agree with each other. */
void stats_snapshot (struct stats *s, struct stats_snapshot *out);

/* Zero the counters and forget the events (sequence numbers continue). */
void stats_reset (struct stats *s);

/* JSON forms (new references; the caller decrefs).  Used for the events
 * file and by the control socket, so both say the same thing. */
json_t *stats_event_json (const struct stats_event *ev);
json_t *stats_snapshot_json (const struct stats_snapshot *snap);

#endif /* STABLEDIF_STATS_H */
