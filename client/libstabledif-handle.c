/* libstabledif: handles -- create, close, plain settings, counters. */
#include <config.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "libstabledif-internal.h"

/* A new handle with default settings: policy auto, safe, no race delay,
 * forensics off.  NULL on ENOMEM. */
struct stabledif_handle *
stabledif_create (void)
{
  struct stabledif_handle *h;

  h = calloc (1, sizeof *h);
  if (h == NULL) {
    error_set (errno, "stabledif_create: %s", strerror (errno));
    return NULL;
  }
  pthread_mutex_init (&h->lock, NULL);
  pthread_cond_init (&h->cond, NULL);
  h->policy = STABLEDIF_POLICY_AUTO;
  h->effective = STABLEDIF_POLICY_AUTO;
  h->wake[0] = h->wake[1] = -1;
  pinset_init (&h->pins);
  return h;
}

/* Wait for every request in flight (their callbacks run), disconnect
 * and free the handle.  Must not be called from a callback. */
void
stabledif_close (struct stabledif_handle *h)
{
  if (h == NULL)
    return;
  io_stop (h);
  if (h->nbd) {
    if (h->connected && !h->dead)
      nbd_shutdown (h->nbd, 0);
    nbd_close (h->nbd);
  }
  if (h->wake[0] >= 0)
    close (h->wake[0]);
  if (h->wake[1] >= 0)
    close (h->wake[1]);
  free (h->profile_line);
  free (h->dead_msg);
  free (h->pending_msg);
  io_buf_cache_free (h);
  pthread_cond_destroy (&h->cond);
  pthread_mutex_destroy (&h->lock);
  free (h);
}

int
handle_check_connected (struct stabledif_handle *h, const char *fn)
{
  bool connected;

  if (h == NULL) {
    error_set (EINVAL, "%s: handle is NULL", fn);
    return -1;
  }
  pthread_mutex_lock (&h->lock);
  connected = h->connected;
  pthread_mutex_unlock (&h->lock);
  if (!connected) {
    error_set (ENOTCONN, "%s: not connected (call stabledif_connect_uri "
               "first)", fn);
    return -1;
  }
  return 0;
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

/* A snapshot of the handle's counters. */
int
stabledif_get_stats (struct stabledif_handle *h, struct stabledif_stats *stats)
{
  if (h == NULL || stats == NULL) {
    error_set (EINVAL, "stabledif_get_stats: %s is NULL",
               h == NULL ? "handle" : "stats");
    return -1;
  }
  pthread_mutex_lock (&h->lock);
  *stats = h->stats;
  pthread_mutex_unlock (&h->lock);
  return 0;
}

/* Set every counter to zero. */
int
stabledif_reset_stats (struct stabledif_handle *h)
{
  if (h == NULL) {
    error_set (EINVAL, "stabledif_reset_stats: handle is NULL");
    return -1;
  }
  pthread_mutex_lock (&h->lock);
  memset (&h->stats, 0, sizeof h->stats);
  pthread_mutex_unlock (&h->lock);
  return 0;
}
