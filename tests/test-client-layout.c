/* SPDX-License-Identifier: BSD-3-Clause */
/* stabledif: unit tests for libstabledif's extended-block layout
 * (client/libstabledif-layout.c): submit-time PI generation, copy-out
 * with the guard recheck, read-side verify + split, request chunking,
 * reuse of wire buffers.
 *
 * Buffers deliberately start at odd addresses: callers' buffers have no
 * alignment, and an off-by-one in an interval or tuple stride shows up
 * as a wrong byte at a block boundary.
 */
#include <config.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "libstabledif-internal.h"

/* ---- helpers ---- */

/* Every (format, interval) pair the formats allow. */
struct geometry {
  const struct pi_format *f;
  uint32_t interval;
};

static size_t
geometries (struct geometry *out, size_t max)
{
  static const uint32_t intervals[] = { 512, 4096 };
  const struct pi_format *f;
  size_t i, j, n = 0;

  for (i = 0; (f = pi_format_at (i)) != NULL; ++i)
    for (j = 0; j < 2; ++j)
      if (pi_interval_valid (f, intervals[j], NULL) && n < max) {
        out[n].f = f;
        out[n].interval = intervals[j];
        n++;
      }
  return n;
}

static struct pi_params
params_of (const struct geometry *g)
{
  struct pi_params p = {
    .format = g->f, .interval = g->interval,
    .check_app = false, .app_tag = 0, .app_mask = 0,
  };
  return p;
}

/* Deterministic pseudo-random bytes. */
static void
fill (uint8_t *p, size_t n, uint32_t seed)
{
  uint32_t x = seed * 2654435761u + 1;
  size_t i;

  for (i = 0; i < n; ++i) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    p[i] = (uint8_t) x;
  }
}

/* A buffer of N bytes starting MISALIGN bytes past a malloc'd pointer;
 * *BASE is what to free. */
static uint8_t *
odd_buffer (size_t n, size_t misalign, void **base)
{
  uint8_t *b = malloc (n + misalign + 16);

  ck_assert_ptr_nonnull (b);
  memset (b, 0xa5, n + misalign + 16);
  *base = b;
  return b + misalign;
}

/* ---- chunking ---- */

START_TEST (test_chunk_bytes)
{
  /* No server limit: the library's own, rounded down to whole blocks. */
  ck_assert_uint_eq (layout_chunk_bytes (0, 520),
                     (LAYOUT_MAX_REQUEST / 520) * 520);
  ck_assert_uint_eq (layout_chunk_bytes (0, 520) % 520, 0);
  /* A server limit that is a multiple of the block is used as is. */
  ck_assert_uint_eq (layout_chunk_bytes (33554040, 520), 33554040);
  /* Not a multiple: round down. */
  ck_assert_uint_eq (layout_chunk_bytes (10000, 4104), 8208);
  /* Smaller than one block: still one block. */
  ck_assert_uint_eq (layout_chunk_bytes (100, 520), 520);
  /* Larger than libnbd takes: clamped. */
  ck_assert_uint_le (layout_chunk_bytes (UINT64_C (1) << 40, 4112),
                     LAYOUT_MAX_REQUEST);
  ck_assert_uint_eq (layout_chunk_bytes (UINT64_C (1) << 40, 4112) % 4112, 0);
}
END_TEST

/* ---- generate ---- */

START_TEST (test_generate_matches_pi)
{
  struct geometry g[16];
  size_t ng = geometries (g, 16), k;
  const uint64_t lbas[] = { 0, 1000, UINT64_C (0xfffffffe),
                            UINT64_C (0xfffffffffffe) };

  ck_assert_uint_ge (ng, 7);
  for (k = 0; k < ng; ++k) {
    struct pi_params p = params_of (&g[k]);
    const uint64_t nb = 5;
    const size_t len = nb * p.interval;
    const unsigned ts = p.format->tuple_size;
    void *b1, *b2, *b3, *b4;
    uint8_t *src = odd_buffer (len, 1, &b1);
    uint8_t *copy = odd_buffer (len, 3, &b2);
    uint8_t *tuples = odd_buffer (nb * ts + 1, 5, &b3);
    uint8_t *want = odd_buffer (nb * ts + 1, 7, &b4);
    size_t l;

    for (l = 0; l < sizeof lbas / sizeof lbas[0]; ++l) {
      fill (src, len, (uint32_t) (k * 31 + l));
      /* The reference: pi.c's own separate-layout generator. */
      pi_generate_sep (&p, src, want, nb, lbas[l]);

      memset (tuples, 0x5a, nb * ts + 1);
      layout_generate (&p, src, NULL, tuples, nb, lbas[l]);
      ck_assert_msg (memcmp (tuples, want, nb * ts) == 0,
                     "%s/%u lba %lu: tuples differ from pi_generate_sep",
                     p.format->name, p.interval, (unsigned long) lbas[l]);
      ck_assert_uint_eq (tuples[nb * ts], 0x5a); /* no overrun */

      /* With a copy: same tuples, and the copy is the data. */
      memset (tuples, 0x5a, nb * ts + 1);
      memset (copy, 0, len);
      layout_generate (&p, src, copy, tuples, nb, lbas[l]);
      ck_assert_msg (memcmp (tuples, want, nb * ts) == 0,
                     "%s/%u: tuples with copy differ", p.format->name,
                     p.interval);
      ck_assert (memcmp (copy, src, len) == 0);
      ck_assert_uint_eq (copy[len], 0xa5);
    }
    free (b1); free (b2); free (b3); free (b4);
  }
}
END_TEST

/* A snapshot built straight into extended blocks is the data followed by
 * the tuples pi.c generates, for every format, and verifies. */
START_TEST (test_generate_ext)
{
  struct geometry g[16];
  size_t ng = geometries (g, 16), k;

  for (k = 0; k < ng; ++k) {
    struct pi_params p = params_of (&g[k]);
    const uint64_t nb = 3, lba = 4242;
    const uint32_t iv = p.interval, ts = p.format->tuple_size;
    const uint32_t es = pi_ext_size (&p);
    void *b1, *b2, *b3, *b4;
    uint8_t *src = odd_buffer (nb * iv, 1, &b1);
    uint8_t *tuples = odd_buffer (nb * ts + 1, 2, &b2);
    uint8_t *want = odd_buffer (nb * es, 3, &b3);
    uint8_t *ext = odd_buffer (nb * es, 5, &b4);

    fill (src, nb * iv, (uint32_t) k + 300);
    pi_generate_sep (&p, src, tuples, nb, lba);
    pi_join_ext (&p, src, tuples, want, nb);
    memset (ext, 0, nb * es);
    layout_generate_ext (&p, src, ext, nb, lba);
    ck_assert_msg (memcmp (ext, want, nb * es) == 0,
                   "%s/%u: extended blocks differ", p.format->name, iv);
    ck_assert_uint_eq (ext[nb * es], 0xa5); /* no overrun */
    ck_assert_uint_eq (pi_verify_ext (&p, ext, nb, lba, NULL, NULL, NULL), 0);
    free (b1); free (b2); free (b3); free (b4);
  }
}
END_TEST

/* ---- join (copy-out) ---- */

struct mm_log {
  size_t n;
  uint64_t index[8];
  uint64_t submit[8];
  uint64_t sent[8];
};

static void
log_mismatch (void *opaque, uint64_t index, uint64_t gs, uint64_t gsent)
{
  struct mm_log *l = opaque;

  if (l->n < 8) {
    l->index[l->n] = index;
    l->submit[l->n] = gs;
    l->sent[l->n] = gsent;
  }
  l->n++;
}

START_TEST (test_join_layout)
{
  struct geometry g[16];
  size_t ng = geometries (g, 16), k;

  for (k = 0; k < ng; ++k) {
    struct pi_params p = params_of (&g[k]);
    const uint64_t nb = 4, lba = 77;
    const uint32_t iv = p.interval, ts = p.format->tuple_size;
    const uint32_t es = pi_ext_size (&p);
    void *b1, *b2, *b3;
    uint8_t *src = odd_buffer (nb * iv, 1, &b1);
    uint8_t *tuples = odd_buffer (nb * ts + 1, 2, &b2);
    uint8_t *ext = odd_buffer (nb * es, 3, &b3);
    struct mm_log log = { .n = 0 };
    uint64_t i, n;

    fill (src, nb * iv, (uint32_t) k + 100);
    layout_generate (&p, src, NULL, tuples, nb, lba);
    n = layout_join (&p, src, tuples, ext, nb, true, log_mismatch, &log);
    ck_assert_uint_eq (n, 0);
    ck_assert_uint_eq (log.n, 0);
    for (i = 0; i < nb; ++i) {
      ck_assert_msg (memcmp (ext + i * es, src + i * iv, iv) == 0,
                     "%s/%u block %lu: data misplaced", p.format->name, iv,
                     (unsigned long) i);
      ck_assert_msg (memcmp (ext + i * es + iv, tuples + i * ts, ts) == 0,
                     "%s/%u block %lu: tuple misplaced", p.format->name, iv,
                     (unsigned long) i);
    }
    ck_assert_uint_eq (ext[nb * es], 0xa5); /* no overrun */
    /* What was built verifies as a device would verify it. */
    ck_assert_uint_eq (pi_verify_ext (&p, ext, nb, lba, NULL, NULL, NULL), 0);
    free (b1); free (b2); free (b3);
  }
}
END_TEST

START_TEST (test_join_detects_change)
{
  const struct pi_format *fmts[] = {
    pi_format_lookup ("T10-DIF-TYPE1-CRC"),
    pi_format_lookup ("EXT-DIF-TYPE3-CRC64"),
  };
  size_t k;

  for (k = 0; k < 2; ++k) {
    struct pi_params p = {
      .format = fmts[k], .interval = 4096,
    };
    const uint64_t nb = 6, lba = 5;
    const uint32_t iv = p.interval, ts = p.format->tuple_size;
    const uint32_t es = pi_ext_size (&p);
    uint8_t *src = malloc (nb * iv), *tuples = malloc (nb * ts);
    uint8_t *ext = malloc (nb * es);
    struct mm_log log = { .n = 0 };
    struct pi_tuple t;

    ck_assert_ptr_nonnull (fmts[k]);
    fill (src, nb * iv, 9);
    layout_generate (&p, src, NULL, tuples, nb, lba);
    /* The buffer changes after its checksum, in blocks 2 and 5. */
    src[2 * iv + 100] ^= 0x01;
    src[5 * iv + iv - 1] += 1;
    ck_assert_uint_eq (layout_join (&p, src, tuples, ext, nb, true,
                                    log_mismatch, &log), 2);
    ck_assert_uint_eq (log.n, 2);
    ck_assert_uint_eq (log.index[0], 2);
    ck_assert_uint_eq (log.index[1], 5);
    pi_tuple_decode (p.format, tuples + 2 * ts, &t);
    ck_assert_uint_eq (log.submit[0], t.guard);
    ck_assert_uint_eq (log.sent[0],
                       pi_guard_compute (p.format, src + 2 * iv, iv));
    ck_assert_uint_ne (log.submit[0], log.sent[0]);
    /* What is sent is the changed data with the stale tuple, which the
     * device must reject. */
    ck_assert (memcmp (ext + 2 * es, src + 2 * iv, iv) == 0);
    ck_assert_uint_eq (pi_verify_ext (&p, ext, nb, lba, NULL, NULL, NULL), 2);
    /* No callback: still counted. */
    ck_assert_uint_eq (layout_join (&p, src, tuples, ext, nb, true, NULL,
                                    NULL), 2);

    /* Without the check the same blocks are built and nothing is
     * reported; a recheck of what was built (after a rejection) finds
     * the same two blocks with the same guards. */
    memset (ext, 0, nb * es);
    log.n = 0;
    ck_assert_uint_eq (layout_join (&p, src, tuples, ext, nb, false,
                                    log_mismatch, &log), 0);
    ck_assert_uint_eq (log.n, 0);
    ck_assert (memcmp (ext + 2 * es, src + 2 * iv, iv) == 0);
    ck_assert (memcmp (ext + 5 * es + iv, tuples + 5 * ts, ts) == 0);
    ck_assert_uint_eq (pi_verify_ext (&p, ext, nb, lba, NULL, NULL, NULL), 2);
    ck_assert_uint_eq (layout_recheck (&p, tuples, ext, nb, log_mismatch,
                                       &log), 2);
    ck_assert_uint_eq (log.n, 2);
    ck_assert_uint_eq (log.index[0], 2);
    ck_assert_uint_eq (log.index[1], 5);
    ck_assert_uint_eq (log.submit[0], t.guard);
    ck_assert_uint_eq (log.sent[0],
                       pi_guard_compute (p.format, src + 2 * iv, iv));
    ck_assert_uint_eq (layout_recheck (&p, tuples, ext, nb, NULL, NULL), 2);
    /* Unchanged data rechecks clean. */
    layout_generate (&p, src, NULL, tuples, nb, lba);
    layout_join (&p, src, tuples, ext, nb, false, NULL, NULL);
    ck_assert_uint_eq (layout_recheck (&p, tuples, ext, nb, NULL, NULL), 0);
    free (src); free (tuples); free (ext);
  }
}
END_TEST

START_TEST (test_join_none)
{
  struct pi_params p = { .format = pi_format_none (), .interval = 512 };
  void *b1, *b2;
  uint8_t *src = odd_buffer (3 * 512, 1, &b1);
  uint8_t *ext = odd_buffer (3 * 512, 7, &b2);

  fill (src, 3 * 512, 3);
  layout_generate (&p, src, NULL, NULL, 3, 0);
  struct mm_log log = { .n = 0 };
  ck_assert_uint_eq (layout_join (&p, src, NULL, ext, 3, true, log_mismatch,
                                  &log), 0);
  ck_assert_uint_eq (layout_recheck (&p, NULL, ext, 3, log_mismatch, &log),
                     0);
  ck_assert_uint_eq (log.n, 0);
  ck_assert (memcmp (src, ext, 3 * 512) == 0);
  ck_assert_uint_eq (ext[3 * 512], 0xa5);
  free (b1); free (b2);
}
END_TEST

/* ---- split (read) ---- */

struct err_log {
  size_t n;
  struct pi_error first[4];
};

static void
log_error (void *opaque, const struct pi_error *e)
{
  struct err_log *l = opaque;

  if (l->n < 4)
    l->first[l->n] = *e;
  l->n++;
}

START_TEST (test_split_roundtrip)
{
  struct geometry g[16];
  size_t ng = geometries (g, 16), k;

  for (k = 0; k < ng; ++k) {
    struct pi_params p = params_of (&g[k]);
    const uint64_t nb = 3, lba = 4000;
    const uint32_t iv = p.interval, ts = p.format->tuple_size;
    const uint32_t es = pi_ext_size (&p);
    void *b1, *b2, *b3, *b4;
    uint8_t *src = odd_buffer (nb * iv, 0, &b1);
    uint8_t *ext = odd_buffer (nb * es, 1, &b2);
    uint8_t *data = odd_buffer (nb * iv, 3, &b3);
    uint8_t *pi = odd_buffer (nb * ts, 5, &b4);
    struct pi_verify_stats st = { 0 };
    struct err_log log = { .n = 0 };
    uint64_t i;

    fill (src, nb * iv, (uint32_t) k);
    for (i = 0; i < nb; ++i) {
      memcpy (ext + i * es, src + i * iv, iv);
      pi_generate_block (&p, src + i * iv, lba + i, ext + i * es + iv);
    }
    ck_assert_uint_eq (layout_split (&p, ext, data, pi, nb, lba, &st,
                                     log_error, &log), 0);
    ck_assert_uint_eq (log.n, 0);
    ck_assert (memcmp (data, src, nb * iv) == 0);
    ck_assert_uint_eq (data[nb * iv], 0xa5);
    for (i = 0; i < nb; ++i)
      ck_assert (memcmp (pi + i * ts, ext + i * es + iv, ts) == 0);
    if (ts > 0)
      ck_assert_uint_eq (pi[nb * ts], 0xa5);
    /* Without a PI buffer. */
    memset (data, 0, nb * iv);
    ck_assert_uint_eq (layout_split (&p, ext, data, NULL, nb, lba, NULL,
                                     NULL, NULL), 0);
    ck_assert (memcmp (data, src, nb * iv) == 0);
    free (b1); free (b2); free (b3); free (b4);
  }
}
END_TEST

START_TEST (test_split_detects_corruption)
{
  struct pi_params p = {
    .format = pi_format_lookup ("T10-DIF-TYPE1-CRC"), .interval = 512,
  };
  const uint64_t nb = 5, lba = 10;
  const uint32_t es = pi_ext_size (&p);
  uint8_t *ext = malloc (nb * es), *data = malloc (nb * 512);
  uint8_t pi[5 * 8];
  struct pi_verify_stats st = { 0 };
  struct err_log log = { .n = 0 };
  uint64_t i;

  for (i = 0; i < nb; ++i) {
    fill (ext + i * es, 512, (uint32_t) i);
    pi_generate_block (&p, ext + i * es, lba + i, ext + i * es + 512);
  }
  ext[3 * es + 17] ^= 0x80;                     /* block 3: guard */
  ext[1 * es + 512 + 7] ^= 0x01;                /* block 1: ref tag */
  memset (ext + 4 * es + 512, 0xff, 8);         /* block 4: escaped */
  ext[4 * es] ^= 0xff;                          /* ... with bad data */

  ck_assert_uint_eq (layout_split (&p, ext, data, pi, nb, lba, &st,
                                   log_error, &log), 2);
  ck_assert_uint_eq (log.n, 2);
  ck_assert_uint_eq (log.first[0].lba, lba + 1);
  ck_assert_int_eq (log.first[0].check, PI_CHECK_REF);
  ck_assert_uint_eq (log.first[1].lba, lba + 3);
  ck_assert_int_eq (log.first[1].check, PI_CHECK_GUARD);
  ck_assert_uint_eq (st.failed, 2);
  ck_assert_uint_eq (st.escaped, 1);
  /* The data is still split out (the caller gets EIO with it). */
  for (i = 0; i < nb; ++i)
    ck_assert (memcmp (data + i * 512, ext + i * es, 512) == 0);
  free (ext); free (data);
}
END_TEST

/* Wire buffers (io_buf_get, io_buf_keep_locked): a completed request's
 * buffer is reused for a later one of a similar size, not for one much
 * smaller; the cache stays within IO_BUF_CACHE_BYTES, and what it cannot
 * take stays with the request; close frees the cache (the leak checkers
 * of the sanitizer and valgrind runs see it). */
START_TEST (test_wire_buffer_reuse)
{
  struct stabledif_handle *h = stabledif_create ();
  struct request r = { .h = NULL };
  struct io_conn *k;            /* the cache is a connection's */
  uint8_t *a, *b, *c;
  size_t cap = 0, cap2 = 0;

  ck_assert_ptr_nonnull (h);
  k = &h->conns[1];             /* any: close frees every one's */
  r.h = h;
  r.conn = k;
  a = io_buf_get (k, 1000, &cap);
  ck_assert_ptr_nonnull (a);
  ck_assert_uint_eq (cap, 1000);
  memset (a, 0xa5, cap);                /* all of it is writable */

  /* Complete: the cache takes the buffer from the request. */
  r.ext = a;
  r.ext_cap = cap;
  pthread_mutex_lock (&k->lock);
  io_buf_keep_locked (k, &r);
  pthread_mutex_unlock (&k->lock);
  ck_assert_ptr_null (r.ext);
  ck_assert_uint_eq (k->buf_bytes, 1000);

  /* Too small a request does not take it: a new buffer. */
  b = io_buf_get (k, 400, &cap2);
  ck_assert_ptr_nonnull (b);
  ck_assert_ptr_ne (b, a);
  ck_assert_uint_eq (cap2, 400);
  ck_assert_uint_eq (k->buf_bytes, 1000);

  /* A similar size gets it back, with its real size. */
  c = io_buf_get (k, 800, &cap);
  ck_assert_ptr_eq (c, a);
  ck_assert_uint_eq (cap, 1000);
  ck_assert_uint_eq (k->buf_bytes, 0);
  free (c);

  /* A buffer that would take the cache over its limit stays with the
   * request, which frees it. */
  r.ext = b;
  r.ext_cap = IO_BUF_CACHE_BYTES + 1;   /* as if it were that large */
  pthread_mutex_lock (&k->lock);
  io_buf_keep_locked (k, &r);
  pthread_mutex_unlock (&k->lock);
  ck_assert_ptr_eq (r.ext, b);
  ck_assert_uint_eq (k->buf_bytes, 0);
  free (b);

  /* Cached at close: freed by it. */
  r.ext = io_buf_get (k, 4096, &r.ext_cap);
  ck_assert_ptr_nonnull (r.ext);
  pthread_mutex_lock (&k->lock);
  io_buf_keep_locked (k, &r);
  pthread_mutex_unlock (&k->lock);
  ck_assert_uint_eq (k->buf_bytes, 4096);
  stabledif_close (h);
}
END_TEST

static Suite *
layout_suite (void)
{
  Suite *s = suite_create ("client-layout");
  TCase *tc = tcase_create ("layout");

  tcase_add_test (tc, test_chunk_bytes);
  tcase_add_test (tc, test_generate_matches_pi);
  tcase_add_test (tc, test_generate_ext);
  tcase_add_test (tc, test_join_layout);
  tcase_add_test (tc, test_join_detects_change);
  tcase_add_test (tc, test_join_none);
  tcase_add_test (tc, test_split_roundtrip);
  tcase_add_test (tc, test_split_detects_corruption);
  tcase_add_test (tc, test_wire_buffer_reuse);
  suite_add_tcase (s, tc);
  return s;
}

int
main (void)
{
  SRunner *sr = srunner_create (layout_suite ());
  int failed;

  srunner_run_all (sr, CK_ENV);
  failed = srunner_ntests_failed (sr);
  srunner_free (sr);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
