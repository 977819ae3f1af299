/* SPDX-License-Identifier: BSD-3-Clause */
/* libstabledif: the read path.
 *
 * Receive extended blocks into a private buffer, verify every block's PI
 * (guard, app, ref; all-ones tuples escape), then split into the
 * caller's data buffer and, if asked, its tuple buffer.  A format
 * without PI reads straight into the caller's buffer.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "libstabledif-internal.h"

/* Build the request of a read; DESC may be NULL (the plain calls). */
static struct request *
read_prepare (struct stabledif_handle *h, const char *fn, void *buf,
              size_t count, uint64_t offset, void *pi,
              const struct stabledif_pi *desc, uint32_t flags, bool sync)
{
  struct request *r;

  if (io_check_call (h, fn, IO_READ, buf, count, offset, flags, sync) == -1)
    return NULL;
  if (pireq_check (h, fn, IO_READ, desc) == -1)
    return NULL;

  r = io_request_new (h, fn);
  if (r == NULL)
    return NULL;
  r->op = IO_READ;
  r->conn = io_pick_conn (h);
  r->sync = sync;
  r->offset = offset;
  r->count = count;
  r->lba = offset / h->profile.interval;
  r->nblocks = count / h->profile.interval;
  r->dst = buf;
  r->pi = desc ? desc->tuples : pi;
  pireq_apply (r, desc);
  cover_init (&r->cover);
  r->wire_count = r->nblocks * h->ext_size;
  /* An interleaved buffer receives the extended blocks themselves. */
  if (h->profile.tuple > 0 && !r->interleaved) {
    r->ext = io_buf_get (r->conn, r->wire_count, &r->ext_cap);
    if (r->ext == NULL) {
      error_set (ENOMEM, "%s: allocating %" PRIu64 " bytes: %s", fn,
                 r->wire_count, strerror (ENOMEM));
      io_request_free (r);
      return NULL;
    }
  }
  return r;
}

/* Submit a built read R: asynchronous with CB, or wait for it. */
static int64_t
read_submit (struct stabledif_handle *h, struct request *r,
             stabledif_completion_callback cb, void *user_data)
{
  if (r == NULL)
    return -1;
  r->cb = cb;
  r->user_data = user_data;
  if (!r->sync)
    return io_submit (h, r, 0);
  if (io_submit (h, r, 0) == -1)
    return -1;
  return io_wait_sync (r);
}

/* Read asynchronously into BUF (and tuples into PI if not NULL). */
int64_t
stabledif_aio_pread (struct stabledif_handle *h, void *buf, size_t count,
                     uint64_t offset, void *pi, uint32_t flags,
                     stabledif_completion_callback cb, void *user_data)
{
  return read_submit (h, read_prepare (h, "stabledif_aio_pread", buf, count,
                                       offset, pi, NULL, flags, false),
                      cb, user_data);
}

/* Read, verify and wait. */
int
stabledif_pread (struct stabledif_handle *h, void *buf, size_t count,
                 uint64_t offset, void *pi, uint32_t flags)
{
  return (int) read_submit (h, read_prepare (h, "stabledif_pread", buf,
                                             count, offset, pi, NULL, flags,
                                             true),
                            NULL, NULL);
}

/* Read asynchronously as DESC describes. */
int64_t
stabledif_aio_pread_pi (struct stabledif_handle *h, void *buf, size_t count,
                        uint64_t offset, const struct stabledif_pi *desc,
                        uint32_t flags, stabledif_completion_callback cb,
                        void *user_data)
{
  return read_submit (h, read_prepare (h, "stabledif_aio_pread_pi", buf,
                                       count, offset, NULL, desc, flags,
                                       false),
                      cb, user_data);
}

/* Read as DESC describes and wait. */
int
stabledif_pread_pi (struct stabledif_handle *h, void *buf, size_t count,
                    uint64_t offset, const struct stabledif_pi *desc,
                    uint32_t flags)
{
  return (int) read_submit (h, read_prepare (h, "stabledif_pread_pi", buf,
                                             count, offset, NULL, desc,
                                             flags, true),
                            NULL, NULL);
}

int
read_chunk (void *user_data, const void *subbuf, size_t count,
            uint64_t offset, unsigned status, int *error)
{
  struct request *r = user_data;
  const uint64_t base = r->lba * r->h->ext_size;

  (void) subbuf;
  (void) error;
  if (status != LIBNBD_READ_DATA && status != LIBNBD_READ_HOLE)
    return 0;                   /* an error chunk fills nothing */
  /* A bad chunk marks the coverage bad; read_complete fails the request
   * with one message whatever went wrong. */
  if (offset < base)
    r->cover.bad = true;
  else
    cover_add (&r->cover, offset - base, count, r->wire_count);
  return 0;
}

void
read_issue (struct request *r)
{
  r->refs = 1;
  io_issue_chunks (r);
  io_request_put (r);
}

/* What verify saw: the first failure and how many. */
struct verify_result {
  struct pi_error first;        /* first failed block */
  uint64_t failed;              /* failed blocks */
};

/* pi_verify_ext callback: keep the first failure, count them all. */
static void
on_pi_error (void *opaque, const struct pi_error *err)
{
  struct verify_result *v = opaque;

  if (v->failed++ == 0)
    v->first = *err;
}

void
read_complete (struct request *r)
{
  struct verify_result v = { .failed = 0 };
  char msg[ERROR_MAX];

  if (r->error == 0 && !cover_full (&r->cover, r->wire_count)) {
    /* Bytes no chunk filled hold whatever the buffer held before. */
    snprintf (msg, sizeof msg, "%s: the server's reply to a read at LBA %"
              PRIu64 " filled %" PRIu64 " of its %" PRIu64 " bytes%s",
              r->fn, r->lba, cover_bytes (&r->cover), r->wire_count,
              r->cover.bad ? " (chunks overlapped or lay outside it)" : "");
    io_request_fail (r, EIO, msg);
  }
  if (r->error == 0 && (r->ext || r->interleaved)) {
    const struct pi_params *p = &r->params;
    const uint32_t es = pi_ext_size (p);

    if (r->interleaved)
      /* Verified in place: the caller's buffer holds what came. */
      layout_check (p, r->checks, r->dst, es, r->dst + p->interval, es,
                    r->nblocks, r->lba, on_pi_error, &v);
    else if (r->checks == STABLEDIF_PI_CHECK_ALL)
      layout_split (p, r->ext, r->dst, r->pi, r->nblocks, r->lba, NULL,
                    on_pi_error, &v);
    else {
      layout_check (p, r->checks, r->ext, es, r->ext + p->interval, es,
                    r->nblocks, r->lba, on_pi_error, &v);
      pi_split_ext (p, r->ext, r->dst, r->pi, r->nblocks);
    }
    if (v.failed > 0) {
      char more[64] = "";
      if (v.failed > 1)
        snprintf (more, sizeof more, "; %" PRIu64 " blocks failed in all",
                  v.failed);
      snprintf (msg, sizeof msg, "%s: PI check failed on read at LBA %"
                PRIu64 ": %s check (expected 0x%" PRIx64 ", found 0x%"
                PRIx64 ")%s", r->fn, v.first.lba,
                pi_check_name (v.first.check), v.first.expected,
                v.first.actual, more);
      io_request_fail (r, EIO, msg);
    }
  }

  pthread_mutex_lock (&r->conn->lock);
  r->conn->stats.reads++;
  r->conn->stats.read_bytes += r->count;
  if (r->error)
    r->conn->stats.read_errors++;
  r->conn->stats.read_pi_errors += v.failed;
  pthread_mutex_unlock (&r->conn->lock);
}
