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

/* Build the request of a write (everything up to queueing it). */
static struct request *
write_prepare (struct stabledif_handle *h, const char *fn, const void *buf,
               size_t count, uint64_t offset, uint32_t flags, bool sync,
               uint32_t *delay_us)
{
  const struct pi_params *p;
  unsigned ts;
  struct request *r;
  bool forensics, snap_ext;

  if (io_check_call (h, fn, IO_WRITE, buf, count, offset, flags, sync)
      == -1)
    return NULL;
  p = &h->pi;
  ts = p->format->tuple_size;

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
  /* Forensics compares against what the guard was computed over; a
   * format without a guard has nothing to compare. */
  r->forensics = forensics && p->format->guard != PI_GUARD_NONE;

  /* A snapshot of a format with PI is made straight into extended
   * blocks (copy and guard in one pass): it is the wire buffer, nothing
   * is copied out later and nothing can change it. */
  snap_ext = r->policy == STABLEDIF_POLICY_SNAPSHOT && ts > 0;
  if (ts > 0 && !snap_ext &&
      (r->tuples = req_alloc (r, r->nblocks * ts)) == NULL)
    goto fail;

  /* The wire buffer: extended blocks, except for a format without PI
   * where the data is the wire format already -- unless wait-sent needs
   * a copy-out point to release the caller. */
  r->wire_count = r->nblocks * h->ext_size;
  if (ts > 0 || r->policy == STABLEDIF_POLICY_WAIT_SENT) {
    if ((r->ext = io_buf_get (r->conn, r->wire_count, &r->ext_cap))
        == NULL) {
      error_set (ENOMEM, "%s: allocating %" PRIu64 " bytes: %s", fn,
                 r->wire_count, strerror (ENOMEM));
      goto fail;
    }
  }

  if (snap_ext) {
    layout_generate_ext (p, buf, r->ext, r->nblocks, r->lba);
    r->built = true;
    r->src = NULL;
  }
  else if (r->policy == STABLEDIF_POLICY_SNAPSHOT) {
    if ((r->bounce = req_alloc (r, count)) == NULL)
      goto fail;
    layout_generate (p, buf, r->bounce, r->tuples, r->nblocks, r->lba);
    r->src = r->bounce;
  }
  else if (r->forensics) {
    if ((r->saved = req_alloc (r, count)) == NULL)
      goto fail;
    layout_generate (p, buf, r->saved, r->tuples, r->nblocks, r->lba);
  }
  else
    layout_generate (p, buf, NULL, r->tuples, r->nblocks, r->lba);
  if (r->ext == NULL)
    r->wire = r->src;

  if (r->policy == STABLEDIF_POLICY_SNAPSHOT || r->saved) {
    struct io_conn *c = r->conn;
    pthread_mutex_lock (&c->lock);
    if (r->policy == STABLEDIF_POLICY_SNAPSHOT) {
      c->stats.snapshots++;
      c->stats.snapshot_bytes += count;
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

/* Write asynchronously: PI is generated from BUF now; BUF is read again
 * at copy-out (policy wait, wait-sent and none). */
int64_t
stabledif_aio_pwrite (struct stabledif_handle *h, const void *buf,
                      size_t count, uint64_t offset, uint32_t flags,
                      stabledif_completion_callback cb, void *user_data)
{
  struct request *r;
  uint32_t delay;

  r = write_prepare (h, "stabledif_aio_pwrite", buf, count, offset, flags,
                     false, &delay);
  if (r == NULL)
    return -1;
  r->cb = cb;
  r->user_data = user_data;
  return io_submit (h, r, delay);
}

/* Write and wait for the device's answer. */
int
stabledif_pwrite (struct stabledif_handle *h, const void *buf, size_t count,
                  uint64_t offset, uint32_t flags)
{
  struct request *r;
  uint32_t delay;

  r = write_prepare (h, "stabledif_pwrite", buf, count, offset, flags,
                     true, &delay);
  if (r == NULL)
    return -1;
  if (io_submit (h, r, delay) == -1)
    return -1;
  return io_wait_sync (r);
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
                             r->ext + index * pi_ext_size (p),
                             p->interval, &ranges, &b->bytes_changed);
    if (n > 0) {
      b->ranges = ranges;
      b->nranges = (size_t) n;
    }
  }
}

void
write_issue (struct request *r)
{
  struct stabledif_handle *h = r->h;
  struct io_conn *c = r->conn;
  uint64_t changed = 0;

  r->refs = 1;
  if (r->ext && !r->built) {
    /* Recompute the guards while copying where the caller's buffer may
     * have changed and nobody else would tell: policy none, and with
     * forensics.  Under wait and wait-sent the caller promised not to
     * change it (a change is found after the device rejects the write,
     * in write_complete); a snapshot cannot change. */
    r->checked = r->policy == STABLEDIF_POLICY_NONE ||
      (r->forensics && r->policy != STABLEDIF_POLICY_SNAPSHOT);
    changed = layout_join (&h->pi, r->src, r->tuples, r->ext, r->nblocks,
                           r->checked, on_mismatch, r);
    r->mismatched = changed;
  }
  if (r->ext)
    r->wire = r->ext;
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
   * whose sent data no longer matches the guard computed at submit (the
   * sent blocks are still at EXT). */
  if (rejected && r->ext && !r->checked && r->tuples) {
    changed = layout_recheck (&h->pi, r->tuples, r->ext, r->nblocks,
                              on_mismatch, r);
    r->mismatched = changed;
  }
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
