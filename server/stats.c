/* SPDX-License-Identifier: BSD-3-Clause */
/* stabledif: counters and the event ring (see stats.h for the contract).
 *
 * Counters: a tally is added to one block under the block's lock, and
 * a snapshot copies each block under its lock and sums them.  Every
 * counter relation a request keeps (its bytes with its requests, its
 * PI errors with its rejection) is a sum over requests, so it holds in
 * each block and therefore in the sum, even though the blocks are not
 * copied at one instant.  Readers could skip the lock with a sequence
 * count, but writers need one anyway (a block has many), and readers
 * are rare.
 *
 * The ring keeps event seq at slot (seq - 1) % ring_size.  A slot whose
 * stored seq differs from the one asked for has been overwritten (the
 * event is too old) or cleared by stats_reset, so no separate "oldest
 * event" field is needed.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "stats.h"

const char *
stats_op_name (enum stats_op op)
{
  switch (op) {
  case STATS_OP_READ: return "read";
  case STATS_OP_WRITE: return "write";
  case STATS_OP_TRIM: return "trim";
  case STATS_OP_ZERO: return "zero";
  case STATS_OP_FLUSH: return "flush";
  case STATS_OP_COUNT: break;
  }
  return "unknown";
}

int
stats_init (struct stats *s, size_t ring_size)
{
  size_t i;

  memset (s, 0, sizeof *s);
  s->next_seq = 1;
  s->ring_size = ring_size;
  s->blocks = aligned_alloc (_Alignof (struct stats_block),
                             STATS_BLOCKS * sizeof *s->blocks);
  if (s->blocks == NULL)
    return -1;
  if (ring_size > 0) {
    s->ring = calloc (ring_size, sizeof *s->ring);
    if (s->ring == NULL) {
      free (s->blocks);
      s->blocks = NULL;
      return -1;
    }
  }
  for (i = 0; i < STATS_BLOCKS; i++) {
    memset (&s->blocks[i], 0, sizeof s->blocks[i]);
    pthread_mutex_init (&s->blocks[i].lock, NULL);
  }
  pthread_mutex_init (&s->lock, NULL);
  return 0;
}

int
stats_open_events (struct stats *s, const char *events_path)
{
  s->events_file = fopen (events_path, "a");
  return s->events_file == NULL ? -1 : 0;
}

void
stats_destroy (struct stats *s)
{
  size_t i;

  if (s->events_file)
    fclose (s->events_file);
  s->events_file = NULL;
  free (s->ring);
  s->ring = NULL;
  if (s->blocks) {
    for (i = 0; i < STATS_BLOCKS; i++)
      pthread_mutex_destroy (&s->blocks[i].lock);
    free (s->blocks);
    s->blocks = NULL;
  }
  pthread_mutex_destroy (&s->lock);
}

/* Add the per-check counts of T into SUM. */
static void
add_checks (uint64_t sum[4], const uint64_t t[4])
{
  size_t c;

  for (c = 0; c < 4; c++)
    sum[c] += t[c];
}

/* Add the rare counts of T into SUM. */
static void
add_rare (struct stats_snapshot *sum, const struct stats_tally *t)
{
  sum->blocks_recovered += t->blocks_recovered;
  add_checks (sum->write_errors, t->write_errors);
  add_checks (sum->read_errors, t->read_errors);
  sum->writes_rejected += t->writes_rejected;
  sum->reads_failed += t->reads_failed;
  sum->injections += t->injections;
}

void
stats_commit (struct stats *s, uint64_t conn, const struct stats_tally *t)
{
  struct stats_block *b = &s->blocks[conn % STATS_BLOCKS];
  struct stats_snapshot *sum = &b->sum;

  pthread_mutex_lock (&b->lock);
  sum->requests[t->view][t->op] += t->requests;
  sum->bytes[t->view][t->op] += t->bytes;
  sum->blocks_verified += t->blocks_verified;
  sum->blocks_generated += t->blocks_generated;
  sum->blocks_escaped += t->blocks_escaped;
  if (t->rare)
    add_rare (sum, t);
  pthread_mutex_unlock (&b->lock);
}

/* Write EV to the events file as one JSON line.  Called with the lock
 * held, so lines from concurrent requests never interleave. */
static void
append_to_file (struct stats *s, const struct stats_event *ev)
{
  json_t *j;
  char *line;

  j = stats_event_json (ev);
  if (j == NULL)
    return;
  line = json_dumps (j, JSON_COMPACT | JSON_PRESERVE_ORDER);
  json_decref (j);
  if (line == NULL)
    return;
  fputs (line, s->events_file);
  fputc ('\n', s->events_file);
  /* A reader tailing the file (or a test) sees each event at once. */
  fflush (s->events_file);
  free (line);
}

void
stats_record (struct stats *s, struct stats_event *ev)
{
  clock_gettime (CLOCK_REALTIME, &ev->time);

  pthread_mutex_lock (&s->lock);
  ev->seq = s->next_seq++;
  if (s->ring_size > 0)
    s->ring[(ev->seq - 1) % s->ring_size] = *ev;
  if (s->events_file)
    append_to_file (s, ev);
  pthread_mutex_unlock (&s->lock);
}

size_t
stats_events_since (struct stats *s, uint64_t since, struct stats_event *out,
                    size_t max)
{
  size_t n = 0;
  uint64_t seq, first;

  pthread_mutex_lock (&s->lock);
  if (s->ring_size > 0) {
    /* The oldest event the ring can still hold. */
    first = s->next_seq > s->ring_size ? s->next_seq - s->ring_size : 1;
    if (since + 1 > first)
      first = since + 1;
    for (seq = first; seq < s->next_seq && n < max; seq++) {
      const struct stats_event *ev = &s->ring[(seq - 1) % s->ring_size];
      if (ev->seq == seq)
        out[n++] = *ev;
    }
  }
  pthread_mutex_unlock (&s->lock);
  return n;
}

/* Add every counter of B into OUT. */
static void
add_snapshot (struct stats_snapshot *out, const struct stats_snapshot *b)
{
  size_t v, o;

  for (v = 0; v < STATS_VIEW_COUNT; v++)
    for (o = 0; o < STATS_OP_COUNT; o++) {
      out->requests[v][o] += b->requests[v][o];
      out->bytes[v][o] += b->bytes[v][o];
    }
  out->blocks_verified += b->blocks_verified;
  out->blocks_generated += b->blocks_generated;
  out->blocks_escaped += b->blocks_escaped;
  out->blocks_recovered += b->blocks_recovered;
  add_checks (out->write_errors, b->write_errors);
  add_checks (out->read_errors, b->read_errors);
  out->writes_rejected += b->writes_rejected;
  out->reads_failed += b->reads_failed;
  out->injections += b->injections;
}

void
stats_snapshot (struct stats *s, struct stats_snapshot *out)
{
  size_t i;

  memset (out, 0, sizeof *out);
  for (i = 0; i < STATS_BLOCKS; i++) {
    pthread_mutex_lock (&s->blocks[i].lock);
    add_snapshot (out, &s->blocks[i].sum);
    pthread_mutex_unlock (&s->blocks[i].lock);
  }
}

void
stats_reset (struct stats *s)
{
  size_t i;

  for (i = 0; i < STATS_BLOCKS; i++) {
    pthread_mutex_lock (&s->blocks[i].lock);
    memset (&s->blocks[i].sum, 0, sizeof s->blocks[i].sum);
    pthread_mutex_unlock (&s->blocks[i].lock);
  }

  pthread_mutex_lock (&s->lock);
  if (s->ring_size > 0)
    memset (s->ring, 0, s->ring_size * sizeof *s->ring);
  pthread_mutex_unlock (&s->lock);
}

/* A 64-bit value as a JSON string "0x...": JSON numbers are doubles to
 * many readers, and a 64-bit guard does not fit one. */
static json_t *
hex_json (uint64_t v)
{
  char buf[32];

  snprintf (buf, sizeof buf, "0x%" PRIx64, v);
  return json_string (buf);
}

/* JSON integers are signed 64-bit in jansson; counters and LBAs never
 * reach 2^63, but clamp rather than wrap if one did. */
static json_t *
uint_json (uint64_t v)
{
  return json_integer (v > (uint64_t) INT64_MAX ? INT64_MAX : (json_int_t) v);
}

json_t *
stats_event_json (const struct stats_event *ev)
{
  char when[64];
  struct tm tm;
  time_t secs = ev->time.tv_sec;

  /* RFC 3339, UTC, microseconds: 2024-05-01T12:34:56.123456Z */
  gmtime_r (&secs, &tm);
  snprintf (when, sizeof when, "%04d-%02d-%02dT%02d:%02d:%02d.%06ldZ",
            tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
            tm.tm_hour, tm.tm_min, tm.tm_sec, ev->time.tv_nsec / 1000);

  return json_pack ("{s:o, s:s, s:o, s:s, s:s, s:o, s:s, s:o, s:o, s:o, s:o}",
                    "seq", uint_json (ev->seq),
                    "time", when,
                    "conn", uint_json (ev->conn),
                    "view", profile_view_name (ev->view),
                    "op", stats_op_name (ev->op),
                    "lba", uint_json (ev->lba),
                    "check", pi_check_name (ev->check),
                    "expected", hex_json (ev->expected),
                    "actual", hex_json (ev->actual),
                    "offset", uint_json (ev->offset),
                    "length", uint_json (ev->length));
}

/* {"guard": n, "app": n, "ref": n} from a per-check array. */
static json_t *
checks_json (const uint64_t v[4])
{
  return json_pack ("{s:o, s:o, s:o}",
                    "guard", uint_json (v[PI_CHECK_GUARD]),
                    "app", uint_json (v[PI_CHECK_APP]),
                    "ref", uint_json (v[PI_CHECK_REF]));
}

/* {"data": {"read": n, ...}, "dif": {...}} from a [view][op] array. */
static json_t *
by_view_op_json (const uint64_t v[STATS_VIEW_COUNT][STATS_OP_COUNT])
{
  json_t *top = json_object ();
  size_t view, op;

  if (top == NULL)
    return NULL;
  for (view = 0; view < STATS_VIEW_COUNT; view++) {
    json_t *ops = json_object ();
    if (ops == NULL) {
      json_decref (top);
      return NULL;
    }
    for (op = 0; op < STATS_OP_COUNT; op++)
      json_object_set_new (ops, stats_op_name (op), uint_json (v[view][op]));
    json_object_set_new (top, profile_view_name (view), ops);
  }
  return top;
}

json_t *
stats_snapshot_json (const struct stats_snapshot *snap)
{
  return json_pack ("{s:o, s:o, s:{s:o, s:o, s:o, s:o}, s:o, s:o, s:o, s:o, "
                    "s:o}",
                    "requests", by_view_op_json (snap->requests),
                    "bytes", by_view_op_json (snap->bytes),
                    "blocks",
                      "verified", uint_json (snap->blocks_verified),
                      "generated", uint_json (snap->blocks_generated),
                      "escaped", uint_json (snap->blocks_escaped),
                      "recovered", uint_json (snap->blocks_recovered),
                    "write_errors", checks_json (snap->write_errors),
                    "read_errors", checks_json (snap->read_errors),
                    "writes_rejected", uint_json (snap->writes_rejected),
                    "reads_failed", uint_json (snap->reads_failed),
                    "injections", uint_json (snap->injections));
}
