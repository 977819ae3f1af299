/* SPDX-License-Identifier: BSD-3-Clause */
/* libstabledif: the extended-block layout of the dif view.
 *
 * Submit side: PI is generated over the caller's data (optionally while
 * copying it, for snapshots and forensics).  Copy-out side: data and
 * tuples are joined into extended blocks; where the caller's buffer may
 * have changed, the guard of what is actually copied is recomputed in the
 * same pass, so that the client catches the change too; otherwise it can
 * be recomputed over the sent blocks after the device rejected them.
 * Read side: verify and split in one pass.  Buffers may start at any
 * address.
 */
#include <config.h>

#include <string.h>

#include "libstabledif-internal.h"

uint64_t
layout_chunk_bytes (uint64_t max_request, uint32_t ext_size)
{
  uint64_t n;

  if (max_request == 0 || max_request > LAYOUT_MAX_REQUEST)
    max_request = LAYOUT_MAX_REQUEST;
  n = max_request / ext_size;
  if (n == 0)
    n = 1;
  return n * ext_size;
}

/* The copy-out check works on this many blocks at a time (their guards
 * on the stack). */
#define LAYOUT_BATCH 16

void
layout_generate (const struct pi_params *p, const uint8_t *src,
                 uint8_t *copy, uint8_t *tuples,
                 uint64_t nblocks, uint64_t lba)
{
  const struct pi_format *f = p->format;

  if (f->guard == PI_GUARD_NONE) {
    if (copy)
      memcpy (copy, src, nblocks * p->interval);
    return;
  }
  if (copy == NULL) {
    /* The caller's buffer may come from memory rather than cache. */
    pi_generate_sep_stream (p, src, tuples, nblocks, lba);
    return;
  }
  /* The guards of what was copied, in the same pass. */
  pi_generate_copy (p, src, copy, p->interval, tuples, f->tuple_size,
                    nblocks, lba);
}

void
layout_generate_ext (const struct pi_params *p, const uint8_t *src,
                     uint8_t *ext, uint64_t nblocks, uint64_t lba)
{
  const struct pi_format *f = p->format;
  const uint32_t iv = p->interval;
  const uint32_t es = iv + f->tuple_size;

  if (f->guard == PI_GUARD_NONE) {
    memcpy (ext, src, nblocks * iv);
    return;
  }
  /* As layout_generate: the guards are those of the copies. */
  pi_generate_copy (p, src, ext, es, ext + iv, es, nblocks, lba);
}

uint64_t
layout_join (const struct pi_params *p, const uint8_t *src,
             const uint8_t *tuples, uint8_t *ext, uint64_t nblocks,
             bool check, layout_mismatch_fn fn, void *opaque)
{
  const struct pi_format *f = p->format;
  const uint32_t iv = p->interval;
  const unsigned ts = f->tuple_size;
  const uint32_t es = iv + ts;
  uint64_t sent[LAYOUT_BATCH];
  uint64_t i, j, b, n = 0;

  if (f->guard == PI_GUARD_NONE) {
    memcpy (ext, src, nblocks * iv);
    return 0;
  }
  if (!check) {
    pi_join_ext (p, src, tuples, ext, nblocks);
    return 0;
  }

  for (i = 0; i < nblocks; i += b) {
    b = nblocks - i < LAYOUT_BATCH ? nblocks - i : LAYOUT_BATCH;
    /* The guards of exactly the bytes that go on the wire, computed in
     * the pass that copies them. */
    pi_guards_copy (f, ext + i * es, es, src + i * iv, iv, iv, b, sent);
    for (j = i; j < i + b; ++j) {
      const uint8_t *tp = tuples + j * ts;
      struct pi_tuple t;

      memcpy (ext + j * es + iv, tp, ts);
      pi_tuple_decode (f, tp, &t);
      if (sent[j - i] != t.guard) {
        n++;
        if (fn)
          fn (opaque, j, t.guard, sent[j - i]);
      }
    }
  }
  return n;
}

/* layout_recheck with block I's tuple at TUPLES + I * TSTRIDE. */
static uint64_t
recheck (const struct pi_params *p, const uint8_t *tuples, size_t tstride,
         const uint8_t *ext, uint64_t nblocks, layout_mismatch_fn fn,
         void *opaque)
{
  const struct pi_format *f = p->format;
  const uint32_t iv = p->interval;
  const uint32_t es = iv + f->tuple_size;
  uint64_t i, n = 0;

  if (f->guard == PI_GUARD_NONE)
    return 0;
  for (i = 0; i < nblocks; ++i) {
    uint64_t sent = pi_guard_compute (f, ext + i * es, iv);
    struct pi_tuple t;

    pi_tuple_decode (f, tuples + i * tstride, &t);
    if (sent != t.guard) {
      n++;
      if (fn)
        fn (opaque, i, t.guard, sent);
    }
  }
  return n;
}

uint64_t
layout_recheck (const struct pi_params *p, const uint8_t *tuples,
                const uint8_t *ext, uint64_t nblocks,
                layout_mismatch_fn fn, void *opaque)
{
  return recheck (p, tuples, p->format->tuple_size, ext, nblocks, fn,
                  opaque);
}

uint64_t
layout_recheck_ext (const struct pi_params *p, const uint8_t *ext,
                    uint64_t nblocks, layout_mismatch_fn fn, void *opaque)
{
  return recheck (p, ext + p->interval, pi_ext_size (p), ext, nblocks, fn,
                  opaque);
}

uint64_t
layout_check (const struct pi_params *p, uint32_t checks,
              const uint8_t *data, size_t dstride,
              const uint8_t *tuples, size_t tstride,
              uint64_t nblocks, uint64_t lba, pi_error_fn fn, void *opaque)
{
  const struct pi_format *f = p->format;
  const uint32_t iv = p->interval;
  const uint32_t es = pi_ext_size (p);
  struct pi_params all = *p;
  uint64_t i, n = 0;

  checks &= STABLEDIF_PI_CHECK_ALL;
  if (f->guard == PI_GUARD_NONE || checks == 0)
    return 0;
  all.check_app = (checks & STABLEDIF_PI_CHECK_APP) != 0;
  if ((checks | STABLEDIF_PI_CHECK_APP) == STABLEDIF_PI_CHECK_ALL) {
    /* Guard and ref (app as asked): the common verify, batched. */
    if (dstride == es && tstride == es && tuples == data + iv)
      return pi_verify_ext (&all, data, nblocks, lba, NULL, fn, opaque);
    if (dstride == iv && tstride == f->tuple_size)
      return pi_verify_sep (&all, data, tuples, nblocks, lba, NULL, fn,
                            opaque);
  }
  for (i = 0; i < nblocks; i++) {
    const uint8_t *tp = tuples + i * tstride;
    struct pi_error e = { .lba = lba + i, .index = i,
                          .check = PI_CHECK_OK };
    struct pi_tuple t;

    if (pi_tuple_escaped (f, tp))
      continue;
    pi_tuple_decode (f, tp, &t);
    if (checks & STABLEDIF_PI_CHECK_GUARD) {
      uint64_t g = pi_guard_compute (f, data + i * dstride, iv);
      if (g != t.guard) {
        e.check = PI_CHECK_GUARD;
        e.expected = g;
        e.actual = t.guard;
      }
    }
    if (e.check == PI_CHECK_OK && all.check_app &&
        ((t.app ^ p->app_tag) & p->app_mask) != 0) {
      e.check = PI_CHECK_APP;
      e.expected = p->app_tag;
      e.actual = t.app;
    }
    if (e.check == PI_CHECK_OK && (checks & STABLEDIF_PI_CHECK_REF) &&
        f->type != PI_TYPE_3 && t.ref != pi_ref_for_lba (f, lba + i)) {
      e.check = PI_CHECK_REF;
      e.expected = pi_ref_for_lba (f, lba + i);
      e.actual = t.ref;
    }
    if (e.check != PI_CHECK_OK) {
      n++;
      if (fn)
        fn (opaque, &e);
    }
  }
  return n;
}

void
layout_first_fn (void *opaque, const struct pi_error *err)
{
  struct layout_first *v = opaque;

  if (v->failed++ == 0)
    v->first = *err;
}

uint64_t
layout_split (const struct pi_params *p, const uint8_t *ext,
              uint8_t *data, uint8_t *pi, uint64_t nblocks, uint64_t lba,
              struct pi_verify_stats *stats, pi_error_fn fn, void *opaque)
{
  /* One pass: the guards are computed while the data is copied out. */
  return pi_verify_split_ext (p, ext, data, pi, nblocks, lba, stats, fn,
                              opaque);
}
