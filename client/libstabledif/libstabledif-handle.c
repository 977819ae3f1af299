/* SPDX-License-Identifier: BSD-3-Clause */
/* libstabledif: handles -- create, close, plain settings, counters. */
#include <config.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "libstabledif-internal.h"

/* A new handle with default settings: policy auto, safe, no race delay,
 * forensics off, one connection.  NULL on ENOMEM. */
struct stabledif_handle *
stabledif_create (void)
{
  const size_t align = _Alignof (struct stabledif_handle);
  struct stabledif_handle *h;
  pthread_condattr_t mono;
  unsigned i;

  /* Aligned as its connections are (see struct io_conn); aligned_alloc
   * wants a size that is a multiple of the alignment. */
  h = aligned_alloc (align, (sizeof *h + align - 1) / align * align);
  if (h == NULL) {
    error_set (errno, "stabledif_create: %s", strerror (errno));
    return NULL;
  }
  memset (h, 0, sizeof *h);
  pthread_mutex_init (&h->lock, NULL);
  h->policy = STABLEDIF_POLICY_AUTO;
  h->effective = STABLEDIF_POLICY_AUTO;
  h->want_conns = 1;
  h->poll = ppoll;
  h->poll_lease_len_ns = IO_POLL_LEASE_NS;
  /* stabledif_poll waits on a connection's COND with a timeout on the
   * monotonic clock (io_now_ns). */
  pthread_condattr_init (&mono);
  pthread_condattr_setclock (&mono, CLOCK_MONOTONIC);
  for (i = 0; i < STABLEDIF_MAX_CONNECTIONS; i++) {
    struct io_conn *c = &h->conns[i];
    c->h = h;
    c->index = i;
    c->wake[0] = c->wake[1] = -1;
    pthread_mutex_init (&c->lock, NULL);
    pthread_cond_init (&c->cond, &mono);
    pthread_cond_init (&c->drive_done, NULL);
    pinset_init (&c->pins);
  }
  pthread_condattr_destroy (&mono);
  return h;
}

/* Wait for every request in flight (their callbacks run), disconnect
 * and free the handle.  Must not be called from a callback. */
void
stabledif_close (struct stabledif_handle *h)
{
  unsigned i;

  if (h == NULL)
    return;
  io_stop (h);
  for (i = 0; i < STABLEDIF_MAX_CONNECTIONS; i++) {
    struct io_conn *c = &h->conns[i];
    if (c->nbd) {
      /* A polite goodbye on every connection that still works. */
      if (h->connected && nbd_aio_is_ready (c->nbd))
        nbd_shutdown (c->nbd, 0);
      nbd_close (c->nbd);
    }
    if (c->wake[0] >= 0)
      close (c->wake[0]);
    if (c->wake[1] >= 0)
      close (c->wake[1]);
    io_buf_cache_free (c);
    pthread_cond_destroy (&c->cond);
    pthread_cond_destroy (&c->drive_done);
    pthread_mutex_destroy (&c->lock);
  }
  free (h->profile_line);
  free (h->dead_msg);
  free (h->pending_msg);
  pthread_mutex_destroy (&h->lock);
  free (h);
}

int
handle_check_connected (struct stabledif_handle *h, const char *fn)
{
  if (h == NULL) {
    error_set (EINVAL, "%s: handle is NULL", fn);
    return -1;
  }
  if (!atomic_load (&h->connected)) {
    error_set (ENOTCONN, "%s: not connected (call stabledif_connect_uri "
               "first)", fn);
    return -1;
  }
  return 0;
}

/* How many connections connect opens (1..STABLEDIF_MAX_CONNECTIONS);
 * only before connect. */
int
stabledif_set_connections (struct stabledif_handle *h, unsigned n)
{
  static const char fn[] = "stabledif_set_connections";

  if (h == NULL) {
    error_set (EINVAL, "%s: handle is NULL", fn);
    return -1;
  }
  if (n < 1 || n > STABLEDIF_MAX_CONNECTIONS) {
    error_set (EINVAL, "%s: %u connections: the number must be 1 to %u", fn,
               n, (unsigned) STABLEDIF_MAX_CONNECTIONS);
    return -1;
  }
  pthread_mutex_lock (&h->lock);
  if (h->attempted) {
    pthread_mutex_unlock (&h->lock);
    error_set (EISCONN, "%s: the handle is connected (or a connect was "
               "attempted): set the connections before connecting", fn);
    return -1;
  }
  h->want_conns = n;
  pthread_mutex_unlock (&h->lock);
  return 0;
}

/* Before connect the number requested, once connected the number open. */
int
stabledif_get_connections (struct stabledif_handle *h)
{
  int n;

  if (h == NULL) {
    error_set (EINVAL, "stabledif_get_connections: handle is NULL");
    return -1;
  }
  pthread_mutex_lock (&h->lock);
  n = h->connected ? (int) h->nconns : (int) h->want_conns;
  pthread_mutex_unlock (&h->lock);
  return n;
}

/* Delay copy-out of each write by USEC microseconds after its checksum,
 * to widen the window in which a changing buffer is caught. */
int
stabledif_set_race_delay_us (struct stabledif_handle *h, uint32_t usec)
{
  if (h == NULL) {
    error_set (EINVAL, "stabledif_set_race_delay_us: handle is NULL");
    return -1;
  }
  pthread_mutex_lock (&h->lock);
  h->race_delay_us = usec;
  pthread_mutex_unlock (&h->lock);
  return 0;
}

int64_t
stabledif_get_race_delay_us (struct stabledif_handle *h)
{
  int64_t d;

  if (h == NULL) {
    error_set (EINVAL, "stabledif_get_race_delay_us: handle is NULL");
    return -1;
  }
  pthread_mutex_lock (&h->lock);
  d = h->race_delay_us;
  pthread_mutex_unlock (&h->lock);
  return d;
}

/* Add the counters B to A. */
static void
stats_add (struct stabledif_stats *a, const struct stabledif_stats *b)
{
  a->writes += b->writes;
  a->write_bytes += b->write_bytes;
  a->write_errors += b->write_errors;
  a->rejected_writes += b->rejected_writes;
  a->reads += b->reads;
  a->read_bytes += b->read_bytes;
  a->read_errors += b->read_errors;
  a->read_pi_errors += b->read_pi_errors;
  a->flushes += b->flushes;
  a->wait_calls += b->wait_calls;
  a->waits += b->waits;
  a->wait_ns += b->wait_ns;
  a->snapshots += b->snapshots;
  a->snapshot_bytes += b->snapshot_bytes;
  a->forensics_bytes += b->forensics_bytes;
  a->dma_bytes += b->dma_bytes;
  a->mismatches += b->mismatches;
  a->mismatched_blocks += b->mismatched_blocks;
}

/* Every counter is a uint64_t, so whole counters are whole multiples of
 * one; callers compiled against an older or newer header rely on it.
 */
_Static_assert (sizeof (struct stabledif_stats) % sizeof (uint64_t) == 0,
                "struct stabledif_stats holds only uint64_t counters");

/* The handle's counters, its own (the waits) and its connections',
 * written to the SIZE bytes at STATS: the counters that fit whole, then
 * zeros up to SIZE.  Nothing is written past SIZE, nor anything at all
 * when SIZE is too small.
 */
int
stabledif_get_stats (struct stabledif_handle *h, struct stabledif_stats *stats,
                     size_t size)
{
  struct stabledif_stats all;
  size_t known;
  unsigned i;

  if (h == NULL || stats == NULL) {
    error_set (EINVAL, "stabledif_get_stats: %s is NULL",
               h == NULL ? "handle" : "stats");
    return -1;
  }
  if (size < STABLEDIF_STATS_MIN_SIZE) {
    error_set (EINVAL, "stabledif_get_stats: size %zu is smaller than "
               "the first counter (%zu bytes)",
               size, (size_t) STABLEDIF_STATS_MIN_SIZE);
    return -1;
  }

  pthread_mutex_lock (&h->lock);
  all = h->stats;
  pthread_mutex_unlock (&h->lock);
  for (i = 0; i < STABLEDIF_MAX_CONNECTIONS; i++) {
    pthread_mutex_lock (&h->conns[i].lock);
    stats_add (&all, &h->conns[i].stats);
    pthread_mutex_unlock (&h->conns[i].lock);
  }

  known = size < sizeof all ? size : sizeof all;
  known -= known % sizeof (uint64_t);
  memcpy (stats, &all, known);
  memset ((char *) stats + known, 0, size - known);
  return 0;
}

/* Set every counter to zero. */
int
stabledif_reset_stats (struct stabledif_handle *h)
{
  unsigned i;

  if (h == NULL) {
    error_set (EINVAL, "stabledif_reset_stats: handle is NULL");
    return -1;
  }

  pthread_mutex_lock (&h->lock);
  memset (&h->stats, 0, sizeof h->stats);
  pthread_mutex_unlock (&h->lock);
  for (i = 0; i < STABLEDIF_MAX_CONNECTIONS; i++) {
    pthread_mutex_lock (&h->conns[i].lock);
    memset (&h->conns[i].stats, 0, sizeof h->conns[i].stats);
    pthread_mutex_unlock (&h->conns[i].lock);
  }
  return 0;
}
