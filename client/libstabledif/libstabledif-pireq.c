/* SPDX-License-Identifier: BSD-3-Clause */
/* libstabledif: the struct stabledif_pi of the _pi calls.
 *
 * Checks a caller's description of a request's PI against the device
 * and the kind of request, and applies it to the request: its layout
 * (interleaved or separate), whose tuples (the caller's or generated),
 * the checks and the app tag.  The paths then act on the request alone.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>

#include "libstabledif-internal.h"

/* Every flag a struct stabledif_pi may hold. */
#define PIREQ_KNOWN_FLAGS \
  (STABLEDIF_PI_INTERLEAVED | STABLEDIF_PI_CALLER | STABLEDIF_PI_CHECK_ALL)

int
pireq_check (struct stabledif_handle *h, const char *fn, enum io_op op,
             const struct stabledif_pi *pi)
{
  const bool has_pi = h->pi.format->tuple_size > 0;

  if (pi == NULL)
    return 0;
  if (pi->flags & ~PIREQ_KNOWN_FLAGS) {
    error_set (EINVAL, "%s: unknown pi->flags 0x%" PRIx32, fn,
               pi->flags & ~PIREQ_KNOWN_FLAGS);
    return -1;
  }
  if (op == IO_READ && (pi->flags & STABLEDIF_PI_CALLER)) {
    error_set (EINVAL, "%s: pi->flags: STABLEDIF_PI_CALLER is for writes",
               fn);
    return -1;
  }
  if (!has_pi)
    return 0;                   /* no tuples: nothing else applies */
  if ((pi->flags & STABLEDIF_PI_INTERLEAVED) && pi->tuples != NULL) {
    error_set (EINVAL, "%s: pi->tuples must be NULL with "
               "STABLEDIF_PI_INTERLEAVED (the tuples are in buf)", fn);
    return -1;
  }
  if (op == IO_WRITE && !(pi->flags & STABLEDIF_PI_INTERLEAVED)) {
    if ((pi->flags & STABLEDIF_PI_CALLER) && pi->tuples == NULL) {
      error_set (EINVAL, "%s: pi->tuples is NULL (STABLEDIF_PI_CALLER "
                 "without STABLEDIF_PI_INTERLEAVED takes the tuples "
                 "there)", fn);
      return -1;
    }
    if (!(pi->flags & STABLEDIF_PI_CALLER) && pi->tuples != NULL) {
      error_set (EINVAL, "%s: pi->tuples must be NULL unless "
                 "STABLEDIF_PI_CALLER is set (the library generates the "
                 "tuples)", fn);
      return -1;
    }
  }
  return 0;
}

void
pireq_apply (struct request *r, const struct stabledif_pi *pi)
{
  const struct stabledif_handle *h = r->h;
  const bool has_pi = h->pi.format->tuple_size > 0;

  r->params = h->pi;
  r->checks = STABLEDIF_PI_CHECK_ALL;
  r->buf_len = r->count;
  if (pi == NULL)
    return;
  r->pi_call = true;
  r->checks = pi->flags & STABLEDIF_PI_CHECK_ALL;
  r->params.app_tag = pi->app_tag;
  r->params.app_mask = pi->app_mask;
  r->params.check_app = (r->checks & STABLEDIF_PI_CHECK_APP) != 0;
  r->interleaved = has_pi && (pi->flags & STABLEDIF_PI_INTERLEAVED);
  r->caller_pi = has_pi && (pi->flags & STABLEDIF_PI_CALLER);
  if (r->interleaved)
    r->buf_len = r->nblocks * h->ext_size;
}

int
stabledif_generate_pi (struct stabledif_handle *h, void *buf, size_t count,
                       uint64_t offset, const struct stabledif_pi *pi)
{
  static const char fn[] = "stabledif_generate_pi";
  struct pi_params p;
  uint64_t nblocks, lba;

  /* The range as a read's: the call sends nothing, so a read-only
   * export is no obstacle. */
  if (io_check_call (h, fn, IO_READ, buf, count, offset, 0, false) == -1)
    return -1;
  if (pi == NULL) {
    error_set (EINVAL, "%s: pi is NULL (it gives the layout and the app "
               "tag)", fn);
    return -1;
  }
  if (pi->flags & ~PIREQ_KNOWN_FLAGS) {
    error_set (EINVAL, "%s: unknown pi->flags 0x%" PRIx32, fn,
               pi->flags & ~PIREQ_KNOWN_FLAGS);
    return -1;
  }
  p = h->pi;
  if (p.format->tuple_size == 0)
    return 0;                   /* no PI: nothing to fill */
  if ((pi->flags & STABLEDIF_PI_INTERLEAVED) && pi->tuples != NULL) {
    error_set (EINVAL, "%s: pi->tuples must be NULL with "
               "STABLEDIF_PI_INTERLEAVED (the tuples are in buf)", fn);
    return -1;
  }
  if (!(pi->flags & STABLEDIF_PI_INTERLEAVED) && pi->tuples == NULL) {
    error_set (EINVAL, "%s: pi->tuples is NULL (the separate layout "
               "takes the tuples there)", fn);
    return -1;
  }
  p.app_tag = pi->app_tag;
  nblocks = count / p.interval;
  lba = offset / p.interval;
  if (pi->flags & STABLEDIF_PI_INTERLEAVED)
    pi_generate_ext (&p, buf, nblocks, lba);
  else
    pi_generate_sep_stream (&p, buf, pi->tuples, nblocks, lba);
  return 0;
}
