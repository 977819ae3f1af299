/* SPDX-License-Identifier: BSD-3-Clause */
/* libstabledif: connecting to the dif view and reading the device profile
 * (stabledif(7), VIEWS and PROFILE).
 *
 * The URI's export name is used; an empty one becomes "dif" (option
 * mode lets us change it after libnbd parsed the URI).  The export
 * description must be a stabledif profile of the dif view.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "libstabledif-internal.h"

/* The export used when the URI names none. */
#define DEFAULT_EXPORT "dif"

/* Fail the connect with libnbd's error, prefixed with WHAT. */
static int
nbd_failed (const char *what)
{
  int e = nbd_get_errno ();
  const char *msg = nbd_get_error ();

  error_set (e ? e : EIO, "stabledif_connect_uri: %s: %s", what,
             msg ? msg : "unknown libnbd error");
  return -1;
}

/* Negotiate: connect, choose the export, go.  Returns 0 or -1. */
static int
negotiate (struct nbd_handle *nbd, const char *uri)
{
  /* No zeroing of read buffers by libnbd: every read checks that its
   * reply covered each byte once (libstabledif-cover.c) and verifies
   * what it read, so that pass over every buffer would be wasted. */
  if (nbd_set_full_info (nbd, true) == -1 ||
      nbd_set_opt_mode (nbd, true) == -1 ||
      nbd_set_pread_initialize (nbd, false) == -1)
    return nbd_failed ("setting up libnbd");
  if (nbd_connect_uri (nbd, uri) == -1)
    return nbd_failed (uri);
  if (nbd_aio_is_negotiating (nbd)) {
    char *name = nbd_get_export_name (nbd);
    if (name == NULL)
      return nbd_failed ("reading the export name");
    if (name[0] == '\0' && nbd_set_export_name (nbd, DEFAULT_EXPORT) == -1) {
      free (name);
      return nbd_failed ("setting the export name");
    }
    free (name);
    if (nbd_opt_go (nbd) == -1)
      return nbd_failed ("opening the export");
  }
  if (!nbd_aio_is_ready (nbd)) {
    error_set (EPROTO, "stabledif_connect_uri: %s: the connection did not "
               "become ready", uri);
    return -1;
  }
  return 0;
}

/* Read and check the profile and geometry into H (not yet published). */
static int
read_profile (struct stabledif_handle *h, struct nbd_handle *nbd)
{
  static const char fn[] = "stabledif_connect_uri";
  char err[256];
  char *desc, *export;
  int64_t size, max;
  int r;

  desc = nbd_get_export_description (nbd);
  if (desc == NULL) {
    error_set (EPROTO, "%s: not a stabledif device: the server sent no "
               "export description (a stabledif disk describes itself "
               "with a \"%s ...\" profile)", fn, PROFILE_MAGIC);
    return -1;
  }
  if (strncmp (desc, "stabledif/", 10) != 0) {
    error_set (EPROTO, "%s: not a stabledif device: export description "
               "is \"%.100s\"", fn, desc);
    free (desc);
    return -1;
  }
  if (profile_parse (desc, &h->profile, err, sizeof err) == -1) {
    error_set (EPROTO, "%s: malformed device profile \"%.200s\": %s",
               fn, desc, err);
    free (desc);
    return -1;
  }
  h->profile_line = desc;

  if (h->profile.view != PROFILE_VIEW_DIF) {
    export = nbd_get_export_name (nbd);
    error_set (EINVAL, "%s: export \"%s\" is the %s view of the disk, not "
               "the dif view; name export \"dif\" in the URI (or none)", fn,
               export ? export : "?", profile_view_name (h->profile.view));
    free (export);
    return -1;
  }

  profile_pi_params (&h->profile, &h->pi);
  h->ext_size = pi_ext_size (&h->pi);

  size = nbd_get_size (nbd);
  if (size == -1)
    return nbd_failed ("reading the export size");
  if ((uint64_t) size % h->ext_size != 0) {
    error_set (EPROTO, "%s: export size %" PRIi64 " is not a multiple of "
               "the extended block size %" PRIu32 " (interval %" PRIu32
               " + tuple %" PRIu32 ")", fn, size, h->ext_size,
               h->profile.interval, h->profile.tuple);
    return -1;
  }
  h->nblocks = (uint64_t) size / h->ext_size;
  h->size = h->nblocks * h->profile.interval;

  max = nbd_get_block_size (nbd, LIBNBD_SIZE_MAXIMUM);
  h->chunk_bytes = layout_chunk_bytes (max > 0 ? (uint64_t) max : 0,
                                       h->ext_size);
  r = nbd_is_read_only (nbd);
  h->read_only = r == 1;
  r = nbd_can_fua (nbd);
  h->can_fua = r == 1;
  r = nbd_can_flush (nbd);
  h->can_flush = r == 1;
  return 0;
}

/* Open connection C (index >= 1) to URI: it must describe the same
 * disk as the first (same profile line and size).  Returns 0 or -1. */
static int
open_more (struct stabledif_handle *h, struct io_conn *c, const char *uri,
           unsigned want)
{
  static const char fn[] = "stabledif_connect_uri";
  char what[64];
  char *desc;
  int64_t size;
  bool same;

  snprintf (what, sizeof what, "connection %u of %u", c->index + 1, want);
  c->nbd = nbd_create ();
  if (c->nbd == NULL)
    return nbd_failed (what);
  h->nconns = c->index + 1;
  if (negotiate (c->nbd, uri) == -1) {
    /* Say which connection: negotiate's message names the URI only. */
    const char *m = stabledif_get_error ();
    size_t n = strlen (fn);
    char msg[ERROR_MAX];

    if (strncmp (m, fn, n) == 0 && strncmp (m + n, ": ", 2) == 0)
      m += n + 2;
    snprintf (msg, sizeof msg, "%s: %s: %s", fn, what, m);
    error_set_str (stabledif_get_errno (), msg);
    return -1;
  }
  desc = nbd_get_export_description (c->nbd);
  size = nbd_get_size (c->nbd);
  same = desc != NULL && strcmp (desc, h->profile_line) == 0 &&
    size >= 0 && (uint64_t) size == h->nblocks * h->ext_size;
  if (!same) {
    error_set (EPROTO, "%s: %s: the server describes another disk "
               "(\"%.200s\", %" PRIi64 " bytes) than connection 1 "
               "(\"%.200s\", %" PRIu64 " bytes)", fn, what,
               desc ? desc : "no description", size, h->profile_line,
               h->nblocks * h->ext_size);
    free (desc);
    return -1;
  }
  free (desc);
  return 0;
}

/* Connect to URI, read the profile, resolve the policy, open the further
 * connections, start the I/O threads. */
int
stabledif_connect_uri (struct stabledif_handle *h, const char *uri)
{
  static const char fn[] = "stabledif_connect_uri";
  struct io_conn *first;
  char err[256];
  enum stabledif_policy effective;
  unsigned want, i;

  if (h == NULL || uri == NULL) {
    error_set (EINVAL, "%s: %s is NULL", fn, h == NULL ? "handle" : "uri");
    return -1;
  }
  pthread_mutex_lock (&h->lock);
  if (h->connected || h->connecting || h->attempted) {
    pthread_mutex_unlock (&h->lock);
    error_set (EISCONN, "%s: the handle is already connected (or a connect "
               "was attempted; use a new handle)", fn);
    return -1;
  }
  h->connecting = true;
  h->attempted = true;
  want = h->want_conns;
  pthread_mutex_unlock (&h->lock);

  first = &h->conns[0];
  first->nbd = nbd_create ();
  if (first->nbd == NULL) {
    nbd_failed ("creating the libnbd handle");
    goto fail;
  }
  h->nconns = 1;
  if (negotiate (first->nbd, uri) == -1 || read_profile (h, first->nbd) == -1)
    goto fail;

  pthread_mutex_lock (&h->lock);
  if (policy_resolve (h->policy, h->profile.stable_writes, h->unsafe,
                      &effective, err, sizeof err) == -1) {
    int e = errno;
    pthread_mutex_unlock (&h->lock);
    error_set (e, "%s: %s", fn, err);
    goto fail;
  }
  h->effective = effective;
  pthread_mutex_unlock (&h->lock);

  /* Several connections only where a flush on one covers the writes of
   * all (and a read on one sees what another wrote): multi-conn.
   * Otherwise one, as nbdcopy does. */
  if (want > 1 && nbd_can_multi_conn (first->nbd) != 1)
    want = 1;
  for (i = 1; i < want; i++)
    if (open_more (h, &h->conns[i], uri, want) == -1)
      goto fail;

  if (io_start (h) == -1)
    goto fail;

  pthread_mutex_lock (&h->lock);
  h->connected = true;
  h->connecting = false;
  pthread_mutex_unlock (&h->lock);
  return 0;

 fail:
  /* Keep the libnbd handles (closed in stabledif_close) so the handle
   * cannot be reused half-configured; say goodbye politely.  The
   * caller's error is already set; libnbd calls do not touch it, only
   * errno. */
  {
    int e = stabledif_get_errno ();
    for (i = 0; i < h->nconns; i++) {
      struct nbd_handle *nbd = h->conns[i].nbd;
      if (nbd == NULL)
        continue;
      if (nbd_aio_is_negotiating (nbd))
        nbd_opt_abort (nbd);
      else if (nbd_aio_is_ready (nbd))
        nbd_shutdown (nbd, 0);
    }
    errno = e;
  }
  pthread_mutex_lock (&h->lock);
  h->connecting = false;
  pthread_mutex_unlock (&h->lock);
  return -1;
}

/* The getters below need a connection and return fixed values. */

/* The export description: the profile line. */
const char *
stabledif_get_profile (struct stabledif_handle *h)
{
  if (handle_check_connected (h, "stabledif_get_profile") == -1)
    return NULL;
  return h->profile_line;
}

/* The PI format's Linux name, or "none". */
const char *
stabledif_get_format (struct stabledif_handle *h)
{
  if (handle_check_connected (h, "stabledif_get_format") == -1)
    return NULL;
  return h->profile.format->name;
}

/* The protection type: 0 (none), 1, 2 or 3. */
int
stabledif_get_type (struct stabledif_handle *h)
{
  if (handle_check_connected (h, "stabledif_get_type") == -1)
    return -1;
  return (int) h->profile.format->type;
}

/* Width of the guard tag: 0, 16 or 64. */
int
stabledif_get_guard_bits (struct stabledif_handle *h)
{
  if (handle_check_connected (h, "stabledif_get_guard_bits") == -1)
    return -1;
  switch (h->profile.format->guard) {
  case PI_GUARD_CRC16: return 16;
  case PI_GUARD_CRC64: return 64;
  case PI_GUARD_NONE: break;
  }
  return 0;
}

/* Protection interval, bytes. */
int64_t
stabledif_get_interval (struct stabledif_handle *h)
{
  if (handle_check_connected (h, "stabledif_get_interval") == -1)
    return -1;
  return h->profile.interval;
}

/* Tuple size, bytes (0 for format none). */
int
stabledif_get_tuple_size (struct stabledif_handle *h)
{
  if (handle_check_connected (h, "stabledif_get_tuple_size") == -1)
    return -1;
  return (int) h->profile.tuple;
}

/* 1 if the device checks host PI (needs stable pages), else 0. */
int
stabledif_get_stable_writes (struct stabledif_handle *h)
{
  if (handle_check_connected (h, "stabledif_get_stable_writes") == -1)
    return -1;
  return h->profile.stable_writes ? 1 : 0;
}

/* Size of the device in data bytes. */
int64_t
stabledif_get_size (struct stabledif_handle *h)
{
  if (handle_check_connected (h, "stabledif_get_size") == -1)
    return -1;
  return (int64_t) h->size;
}

/* The app tag and mask the device checks: 1 (set), 0 (none), -1. */
int
stabledif_get_app_tag (struct stabledif_handle *h, uint16_t *tag,
                       uint16_t *mask)
{
  if (handle_check_connected (h, "stabledif_get_app_tag") == -1)
    return -1;
  if (tag)
    *tag = h->pi.check_app ? h->pi.app_tag : 0;
  if (mask)
    *mask = h->pi.check_app ? h->pi.app_mask : 0;
  return h->pi.check_app ? 1 : 0;
}
