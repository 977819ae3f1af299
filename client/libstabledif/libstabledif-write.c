/* SPDX-License-Identifier: BSD-3-Clause */
/* libstabledif: the write path.
 *
 * Submit (caller's thread): generate PI over the caller's buffer, like
 * the kernel's integrity layer; under snapshot copy the data in the same
 * pass straight into extended blocks (the bounce buffer is the wire
 * buffer); with forensics keep a copy of what was checksummed; queue.
 * Copy-out (I/O thread after the race delay, or the submitting thread
 * itself when the I/O thread is idle: io_drive): join data and tuples into
 * extended blocks -- under policy none and with forensics recomputing
 * each guard in the same pass and noting blocks whose data changed;
 * send.  Completion: a rejected write that was not checked at copy-out
 * is checked over the blocks sent; name the failing blocks and bytes,
 * call the forensics callback.
 *
 * The _pi calls add the caller's tuples (checked at submit as asked,
 * else sent as they are; the device judges them and a rejection names
 * the first block sent that fails its rules) and interleaved buffers:
 * their tuples are filled or checked in place at submit and the buffer
 * itself is sent -- no copy-out, unless wait-sent needs one as its
 * release point -- with the guards recomputed at send where the plain
 * path recomputes them at copy-out.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "libstabledif-internal.h"

/* Allocate SIZE bytes for request R (error reported on failure). */
static void *
req_alloc (struct request *r, uint64_t size)
{
  void *p = malloc (size ? size : 1);

  if (p == NULL)
    error_set (ENOMEM, "%s: allocating %" PRIu64 " bytes: %s", r->fn, size,
               strerror (ENOMEM));
  return p;
}

/* Check the caller's tuples of R at submit as R->checks asks: block I's
 * data at DATA + I * DSTRIDE, its tuple at TUPLES + I * TSTRIDE.
 * Returns 0, or -1 with EILSEQ reported naming the first failure. */
static int
check_caller_pi (struct request *r, const uint8_t *data, size_t dstride,
                 const uint8_t *tuples, size_t tstride)
{
  struct layout_first v = { .failed = 0 };
  char more[64] = "";

  if (layout_check (&r->params, r->checks, data, dstride, tuples, tstride,
                    r->nblocks, r->lba, layout_first_fn, &v) == 0)
    return 0;
  if (v.failed > 1)
    snprintf (more, sizeof more, "; %" PRIu64 " blocks fail in all",
              v.failed);
  error_set (EILSEQ, "%s: the caller's PI fails the %s check at LBA %"
             PRIu64 " (expected 0x%" PRIx64 ", found 0x%" PRIx64 ")%s; "
             "nothing was sent", r->fn, pi_check_name (v.first.check),
             v.first.lba, v.first.expected, v.first.actual, more);
  return -1;
}

/* Write R from an interleaved buffer BUF (extended blocks, tuples in
 * place): fill or check the tuples in BUF, then, unless a policy needs a
 * copy, send BUF itself.  Snapshot copies at submit; wait-sent copies
 * out on the I/O thread (its release point); forensics keeps the data
 * that was checksummed.  Returns 0, or -1 with the error reported. */
static int
prepare_interleaved (struct request *r, uint8_t *buf)
{
  const struct pi_params *p = &r->params;
  const uint32_t iv = p->interval, es = pi_ext_size (p);
  const unsigned ts = p->format->tuple_size;
  const bool snap = r->policy == STABLEDIF_POLICY_SNAPSHOT;
  uint64_t i;

  if (r->caller_pi && r->checks &&
      check_caller_pi (r, buf, es, buf + iv, es) == -1)
    return -1;
  if (!r->caller_pi && !snap)
    pi_generate_ext (p, buf, r->nblocks, r->lba);
  if (snap || r->policy == STABLEDIF_POLICY_WAIT_SENT) {
    if ((r->ext = io_buf_get (r->conn, r->wire_count, &r->ext_cap))
        == NULL) {
      error_set (ENOMEM, "%s: allocating %" PRIu64 " bytes: %s", r->fn,
                 r->wire_count, strerror (ENOMEM));
      return -1;
    }
  }
  if (snap) {
    /* The guards are those of the copy; the caller's buffer gets the
     * same tuples. */
    memcpy (r->ext, buf, r->wire_count);
    if (!r->caller_pi) {
      pi_generate_ext (p, r->ext, r->nblocks, r->lba);
      for (i = 0; i < r->nblocks; i++)
        memcpy (buf + i * es + iv, r->ext + i * es + iv, ts);
    }
    r->built = true;
    r->src = NULL;
  }
  else if (r->forensics) {
    if ((r->saved = req_alloc (r, r->count)) == NULL)
      return -1;
    pi_split_ext (p, buf, r->saved, NULL, r->nblocks);
  }
  if (r->ext == NULL)
    r->wire = buf;
  return 0;
}

/* Write R from a data buffer BUF, the tuples generated (into TUPLES) or
 * the caller's (CALLER, packed).  Returns 0, or -1 with the error
 * reported. */
static int
prepare_separate (struct request *r, const uint8_t *buf,
                  const uint8_t *caller)
{
  const struct pi_params *p = &r->params;
  const unsigned ts = p->format->tuple_size;
  bool snap_ext;

  if (r->caller_pi && r->checks &&
      check_caller_pi (r, buf, p->interval, caller, ts) == -1)
    return -1;

  /* A snapshot of a format with PI is made straight into extended
   * blocks (copy and guard in one pass): it is the wire buffer, nothing
   * is copied out later and nothing can change it. */
  snap_ext = r->policy == STABLEDIF_POLICY_SNAPSHOT && ts > 0;
  if (r->caller_pi)
    r->join_tuples = caller;
  else if (ts > 0 && !snap_ext) {
    if ((r->tuples = req_alloc (r, r->nblocks * ts)) == NULL)
      return -1;
    r->join_tuples = r->tuples;
  }

  /* The wire buffer: extended blocks, except for a format without PI
   * where the data is the wire format already -- unless wait-sent needs
   * a copy-out point to release the caller. */
  if (ts > 0 || r->policy == STABLEDIF_POLICY_WAIT_SENT) {
    if ((r->ext = io_buf_get (r->conn, r->wire_count, &r->ext_cap))
        == NULL) {
      error_set (ENOMEM, "%s: allocating %" PRIu64 " bytes: %s", r->fn,
                 r->wire_count, strerror (ENOMEM));
      return -1;
    }
  }

  if (snap_ext) {
    /* The caller may reuse its tuple buffer once the call returns: the
     * tuples are in the snapshot from here on. */
    r->join_tuples = NULL;
    if (r->caller_pi)
      pi_join_ext (p, buf, caller, r->ext, r->nblocks);
    else
      layout_generate_ext (p, buf, r->ext, r->nblocks, r->lba);
    r->built = true;
    r->src = NULL;
  }
  else if (r->policy == STABLEDIF_POLICY_SNAPSHOT) {
    if ((r->bounce = req_alloc (r, r->count)) == NULL)
      return -1;
    layout_generate (p, buf, r->bounce, r->tuples, r->nblocks, r->lba);
    r->src = r->bounce;
  }
  else if (r->forensics) {
    if ((r->saved = req_alloc (r, r->count)) == NULL)
      return -1;
    if (r->caller_pi)
      memcpy (r->saved, buf, r->count);
    else
      layout_generate (p, buf, r->saved, r->tuples, r->nblocks, r->lba);
  }
  else if (!r->caller_pi)
    layout_generate (p, buf, NULL, r->tuples, r->nblocks, r->lba);
  if (r->ext == NULL)
    r->wire = r->src;
  return 0;
}

/* Build the request of a write (everything up to queueing it); PI may
 * be NULL (the plain calls). */
static struct request *
write_prepare (struct stabledif_handle *h, const char *fn, const void *buf,
               size_t count, uint64_t offset, const struct stabledif_pi *pi,
               uint32_t flags, bool sync, uint32_t *delay_us)
{
  const struct pi_params *p;
  struct request *r;
  bool forensics;
  int rc;

  if (io_check_call (h, fn, IO_WRITE, buf, count, offset, flags, sync)
      == -1)
    return NULL;
  if (pireq_check (h, fn, IO_WRITE, pi) == -1)
    return NULL;
  p = &h->pi;

  r = io_request_new (h, fn);
  if (r == NULL)
    return NULL;
  /* Settings are read without the handle's lock (atomics): the I/O
   * path takes only its connection's. */
  r->conn = io_pick_conn (h);
  r->policy = atomic_load (&h->effective);
  forensics = atomic_load (&h->forensics);
  *delay_us = atomic_load (&h->race_delay_us);

  r->op = IO_WRITE;
  r->sync = sync;
  r->nbd_flags = (flags & STABLEDIF_CMD_FLAG_FUA) ? LIBNBD_CMD_FLAG_FUA : 0;
  r->offset = offset;
  r->count = count;
  r->lba = offset / p->interval;
  r->nblocks = count / p->interval;
  r->buf = buf;
  r->src = buf;
  r->wire_count = r->nblocks * h->ext_size;
  pireq_apply (r, pi);
  /* Forensics compares against what the guard was computed over; a
   * format without a guard has nothing to compare. */
  r->forensics = forensics && p->format->guard != PI_GUARD_NONE;

  /* An interleaved buffer is written by the library (its tuples) unless
   * they are the caller's: the _pi calls take it as not const. */
  if (r->interleaved)
    rc = prepare_interleaved (r, (uint8_t *) buf);
  else
    rc = prepare_separate (r, buf, pi ? pi->tuples : NULL);
  if (rc == -1)
    goto fail;

  if (r->policy == STABLEDIF_POLICY_SNAPSHOT || r->saved) {
    struct io_conn *c = r->conn;
    pthread_mutex_lock (&c->lock);
    if (r->policy == STABLEDIF_POLICY_SNAPSHOT) {
      c->stats.snapshots++;
      c->stats.snapshot_bytes += r->buf_len;
    }
    else
      c->stats.forensics_bytes += count;
    pthread_mutex_unlock (&c->lock);
  }
  return r;

 fail:
  io_request_free (r);
  return NULL;
}

/* Submit a built write R: asynchronous with CB, or wait for it (SYNC). */
static int64_t
write_submit (struct stabledif_handle *h, struct request *r, uint32_t delay,
              stabledif_completion_callback cb, void *user_data)
{
  if (r == NULL)
    return -1;
  r->cb = cb;
  r->user_data = user_data;
  if (!r->sync)
    return io_submit (h, r, delay);
  if (io_submit (h, r, delay) == -1)
    return -1;
  return io_wait_sync (r);
}

/* Write asynchronously: PI is generated from BUF now; BUF is read again
 * at copy-out (policy wait, wait-sent and none). */
int64_t
stabledif_aio_pwrite (struct stabledif_handle *h, const void *buf,
                      size_t count, uint64_t offset, uint32_t flags,
                      stabledif_completion_callback cb, void *user_data)
{
  struct request *r;
  uint32_t delay = 0;

  r = write_prepare (h, "stabledif_aio_pwrite", buf, count, offset, NULL,
                     flags, false, &delay);
  return write_submit (h, r, delay, cb, user_data);
}

/* Write and wait for the device's answer. */
int
stabledif_pwrite (struct stabledif_handle *h, const void *buf, size_t count,
                  uint64_t offset, uint32_t flags)
{
  struct request *r;
  uint32_t delay = 0;

  r = write_prepare (h, "stabledif_pwrite", buf, count, offset, NULL, flags,
                     true, &delay);
  return (int) write_submit (h, r, delay, NULL, NULL);
}

/* Write asynchronously with the PI that PI describes. */
int64_t
stabledif_aio_pwrite_pi (struct stabledif_handle *h, void *buf, size_t count,
                         uint64_t offset, const struct stabledif_pi *pi,
                         uint32_t flags, stabledif_completion_callback cb,
                         void *user_data)
{
  struct request *r;
  uint32_t delay = 0;

  r = write_prepare (h, "stabledif_aio_pwrite_pi", buf, count, offset, pi,
                     flags, false, &delay);
  return write_submit (h, r, delay, cb, user_data);
}

/* Write with the PI that PI describes and wait for the device. */
int
stabledif_pwrite_pi (struct stabledif_handle *h, void *buf, size_t count,
                     uint64_t offset, const struct stabledif_pi *pi,
                     uint32_t flags)
{
  struct request *r;
  uint32_t delay = 0;

  r = write_prepare (h, "stabledif_pwrite_pi", buf, count, offset, pi,
                     flags, true, &delay);
  return (int) write_submit (h, r, delay, NULL, NULL);
}

/* layout_join callback: record a block whose data changed, and with
 * forensics which bytes. */
static void
on_mismatch (void *opaque, uint64_t index, uint64_t guard_submit,
             uint64_t guard_sent)
{
  struct request *r = opaque;
  const struct pi_params *p = &r->h->pi;
  struct stabledif_block_report *b;

  if (r->nchanged == r->changed_alloc) {
    size_t n = r->changed_alloc ? r->changed_alloc * 2 : 4;
    struct stabledif_block_report *nb;

    nb = realloc (r->changed, n * sizeof *nb);
    if (nb == NULL)
      return;                   /* the count in the stats stays right */
    r->changed = nb;
    r->changed_alloc = n;
  }
  b = &r->changed[r->nchanged++];
  memset (b, 0, sizeof *b);
  b->lba = r->lba + index;
  b->guard_submit = guard_submit;
  b->guard_sent = guard_sent;
  if (r->saved) {
    struct stabledif_byte_range *ranges;
    long n = forensics_diff (r->saved + index * p->interval,
                             r->wire + index * pi_ext_size (p),
                             p->interval, &ranges, &b->bytes_changed);
    if (n > 0) {
      b->ranges = ranges;
      b->nranges = (size_t) n;
    }
  }
}

/* Whether copy-out compares the guards of what is sent with the tuples:
 * where the caller's buffer may have changed and nobody else would tell
 * -- policy none, and with forensics.  Under wait and wait-sent the
 * caller promised not to change it (a change is found after the device
 * rejects the write, in write_complete); a snapshot cannot change.  The
 * caller's tuples are compared only if their guards were checked at
 * submit: otherwise a difference says nothing about a change. */
static bool
issue_checks (const struct request *r)
{
  if (r->caller_pi && !(r->checks & STABLEDIF_PI_CHECK_GUARD))
    return false;
  return r->policy == STABLEDIF_POLICY_NONE ||
    (r->forensics && r->policy != STABLEDIF_POLICY_SNAPSHOT);
}

void
write_issue (struct request *r)
{
  struct io_conn *c = r->conn;
  uint64_t changed = 0;

  r->refs = 1;
  if (r->ext)
    r->wire = r->ext;
  if (r->ext && !r->built) {
    r->checked = issue_checks (r);
    if (r->interleaved) {
      /* wait-sent's copy-out: the tuples travel in the copy. */
      memcpy (r->ext, r->src, r->wire_count);
      if (r->checked)
        changed = layout_recheck_ext (&r->params, r->ext, r->nblocks,
                                      on_mismatch, r);
    }
    else
      changed = layout_join (&r->params, r->src, r->join_tuples, r->ext,
                             r->nblocks, r->checked, on_mismatch, r);
    r->mismatched = changed;
  }
  else if (r->interleaved && !r->built) {
    /* The caller's buffer goes on the wire itself: no copy-out. */
    r->checked = issue_checks (r);
    if (r->checked)
      changed = layout_recheck_ext (&r->params, r->wire, r->nblocks,
                                    on_mismatch, r);
    r->mismatched = changed;
  }
  io_issue_chunks (r);

  pthread_mutex_lock (&c->lock);
  if (r->ext)
    c->stats.dma_bytes += r->wire_count;
  if (changed) {
    c->stats.mismatches++;
    c->stats.mismatched_blocks += changed;
  }
  /* Copied out and handed to libnbd: wait-sent releases the caller. */
  if (r->policy == STABLEDIF_POLICY_WAIT_SENT) {
    pinset_remove (&c->pins, &r->pin);
    pthread_cond_broadcast (&c->cond);
  }
  pthread_mutex_unlock (&c->lock);

  io_request_put (r);
}

/* The message of a write the device rejected with EIO. */
static void
rejected_message (struct request *r)
{
  char what[ERROR_MAX - 128];
  char msg[ERROR_MAX];

  if (r->nchanged > 0) {
    forensics_describe (r->changed, r->nchanged, r->saved != NULL,
                        what, sizeof what);
    snprintf (msg, sizeof msg, "%s: write rejected by device (EIO) at %s",
              r->fn, what);
  }
  else if (r->mismatched > 0)
    snprintf (msg, sizeof msg, "%s: write rejected by device (EIO), LBA %"
              PRIu64 "-%" PRIu64 ": guard check: the data of %" PRIu64
              " blocks changed between checksum and transfer (out of "
              "memory for the details)", r->fn, r->lba,
              r->lba + r->nblocks - 1, r->mismatched);
  else
    snprintf (msg, sizeof msg, "%s: write rejected by device (EIO), LBA %"
              PRIu64 "-%" PRIu64 ": the data sent matched the guards "
              "computed at submit, so the client cannot name the failing "
              "block; NBD does not carry the device's reason (its event "
              "log names the block and check)", r->fn, r->lba,
              r->lba + r->nblocks - 1);
  free (r->msg);
  r->msg = strdup (msg);
}

/* The message of a write of a _pi call that the device rejected with
 * EIO although no data changed: verify the blocks sent by the device's
 * rules and name the first that fails (a caller's wrong tuple, or an app
 * tag the device does not take).  Leaves R's message unset if all pass. */
static void
rejected_tuple_message (struct request *r)
{
  struct layout_first v = { .failed = 0 };
  char more[64] = "";
  char msg[ERROR_MAX];

  if (r->wire == NULL ||
      pi_verify_ext (&r->h->pi, r->wire, r->nblocks, r->lba, NULL,
                     layout_first_fn, &v) == 0)
    return;
  if (v.failed > 1)
    snprintf (more, sizeof more, "; %" PRIu64 " blocks sent fail it in all",
              v.failed);
  snprintf (msg, sizeof msg, "%s: write rejected by device (EIO) at LBA %"
            PRIu64 ": the block sent fails the device's %s check (expected "
            "0x%" PRIx64 ", found 0x%" PRIx64 ")%s", r->fn, v.first.lba,
            pi_check_name (v.first.check), v.first.expected,
            v.first.actual, more);
  free (r->msg);
  r->msg = strdup (msg);
}

void
write_complete (struct request *r)
{
  struct stabledif_handle *h = r->h;
  struct io_conn *c = r->conn;
  bool rejected = r->error == EIO;
  stabledif_forensics_callback fcb = NULL;
  void *fcb_data = NULL;
  uint64_t changed = 0;

  /* Rejected although nothing was checked at copy-out: find the blocks
   * whose sent data no longer matches the guard computed (or checked) at
   * submit (the sent blocks are still at WIRE). */
  if (rejected && r->wire && !r->checked &&
      (!r->caller_pi || (r->checks & STABLEDIF_PI_CHECK_GUARD))) {
    if (r->interleaved)
      changed = layout_recheck_ext (&r->params, r->wire, r->nblocks,
                                    on_mismatch, r);
    else if (r->ext && r->join_tuples)
      changed = layout_recheck (&r->params, r->join_tuples, r->ext,
                                r->nblocks, on_mismatch, r);
    r->mismatched = changed;
  }
  if (rejected && r->msg == NULL && r->pi_call && r->mismatched == 0)
    rejected_tuple_message (r);
  if (rejected && r->msg == NULL)
    rejected_message (r);

  pthread_mutex_lock (&c->lock);
  if (changed) {
    c->stats.mismatches++;
    c->stats.mismatched_blocks += changed;
  }
  c->stats.writes++;
  c->stats.write_bytes += r->count;
  if (r->error)
    c->stats.write_errors++;
  if (rejected)
    c->stats.rejected_writes++;
  pthread_mutex_unlock (&c->lock);

  if (r->forensics && (r->nchanged > 0 || rejected)) {
    pthread_mutex_lock (&h->lock);
    fcb = h->fcb;
    fcb_data = h->fcb_data;
    pthread_mutex_unlock (&h->lock);
  }
  if (fcb) {
    struct stabledif_forensics_report rep = {
      .cookie = r->cookie,
      .offset = r->offset,
      .count = r->count,
      .buf = r->buf,
      .error = r->error,
      .rejected = rejected,
      .nblocks = r->nchanged,
      .blocks = r->changed,
    };
    fcb (fcb_data, &rep);
  }
}
