/* SPDX-License-Identifier: BSD-3-Clause */
/* stabledif: unit tests for the pieces of libstabledif's _pi calls that
 * need no device: the per-request checks (layout_check: each check on
 * its own, the app mask, escapes, type 3's missing ref tag, both
 * layouts and odd strides), the recheck of an interleaved buffer
 * (layout_recheck_ext), and the checks and application of a struct
 * stabledif_pi (pireq_check, pireq_apply).
 */
#include <config.h>

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "libstabledif-internal.h"

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

/* What layout_check reported: failures in order. */
struct seen {
  size_t n;
  struct pi_error e[16];
};

static void
on_error (void *opaque, const struct pi_error *err)
{
  struct seen *s = opaque;

  if (s->n < 16)
    s->e[s->n] = *err;
  s->n++;
}

/* NB extended blocks of format F at LBA with app tag APP, correct. */
static uint8_t *
make_ext (const struct pi_params *p, uint64_t nb, uint64_t lba)
{
  const uint32_t es = pi_ext_size (p);
  uint8_t *ext = malloc (nb * es + 1);
  uint64_t i;

  ck_assert_ptr_nonnull (ext);
  for (i = 0; i < nb; i++)
    fill (ext + i * es, p->interval, (uint32_t) (lba + i));
  pi_generate_ext (p, ext, nb, lba);
  return ext;
}

/* Change field CHECK of the tuple at T. */
static void
spoil (const struct pi_format *f, uint8_t *t, enum pi_check check)
{
  struct pi_tuple v;

  pi_tuple_decode (f, t, &v);
  if (check == PI_CHECK_GUARD)
    v.guard ^= 0x10;
  else if (check == PI_CHECK_APP)
    v.app ^= 0x0800;
  else
    v.ref ^= 0x2;
  pi_tuple_encode (f, &v, t);
}

START_TEST (test_check_each_field)
{
  static const char *formats[] = {
    "T10-DIF-TYPE1-CRC", "T10-DIF-TYPE3-CRC", "EXT-DIF-TYPE1-CRC64",
  };
  static const enum pi_check checks[] = {
    PI_CHECK_GUARD, PI_CHECK_APP, PI_CHECK_REF,
  };
  static const uint32_t flags[] = {
    STABLEDIF_PI_CHECK_GUARD, STABLEDIF_PI_CHECK_APP, STABLEDIF_PI_CHECK_REF,
  };
  size_t fi, k;

  for (fi = 0; fi < 3; fi++) {
    struct pi_params p = {
      .format = pi_format_lookup (formats[fi]),
      .interval = 4096, .check_app = false, .app_tag = 0x1234,
      .app_mask = 0xffff,
    };
    const uint32_t es = pi_ext_size (&p), ts = p.format->tuple_size;
    const uint64_t nb = 5, lba = 1000;

    for (k = 0; k < 3; k++) {
      uint8_t *ext = make_ext (&p, nb, lba);
      uint8_t *data = malloc (nb * p.interval), *tup = malloc (nb * ts);
      struct seen s = { .n = 0 };
      uint64_t n;
      bool type3_ref = checks[k] == PI_CHECK_REF &&
        p.format->type == PI_TYPE_3;

      spoil (p.format, ext + 3 * es + p.interval, checks[k]);
      pi_split_ext (&p, ext, data, tup, nb);

      /* Interleaved, the one check: block 3 fails it (type 3 has no ref
       * tag to check). */
      n = layout_check (&p, flags[k], ext, es, ext + p.interval, es, nb,
                        lba, on_error, &s);
      ck_assert_uint_eq (n, type3_ref ? 0 : 1);
      if (!type3_ref) {
        ck_assert_uint_eq (s.e[0].lba, lba + 3);
        ck_assert_uint_eq (s.e[0].index, 3);
        ck_assert_int_eq (s.e[0].check, checks[k]);
      }
      /* Separate, every check: the same block and check. */
      s.n = 0;
      n = layout_check (&p, STABLEDIF_PI_CHECK_ALL, data, p.interval, tup,
                        ts, nb, lba, on_error, &s);
      ck_assert_uint_eq (n, type3_ref ? 0 : 1);
      if (!type3_ref) {
        ck_assert_uint_eq (s.e[0].lba, lba + 3);
        ck_assert_int_eq (s.e[0].check, checks[k]);
      }
      /* The other checks do not see it. */
      n = layout_check (&p, STABLEDIF_PI_CHECK_ALL & ~flags[k], ext, es,
                        ext + p.interval, es, nb, lba, NULL, NULL);
      ck_assert_uint_eq (n, 0);
      /* No check: nothing. */
      ck_assert_uint_eq (layout_check (&p, 0, ext, es, ext + p.interval,
                                       es, nb, lba, NULL, NULL), 0);
      free (ext); free (data); free (tup);
    }
  }
}
END_TEST

START_TEST (test_check_app_mask_and_escape)
{
  struct pi_params p = {
    .format = pi_format_lookup ("T10-DIF-TYPE1-CRC"), .interval = 512,
    .check_app = true, .app_tag = 0x12ab, .app_mask = 0xff00,
  };
  const uint32_t es = pi_ext_size (&p);
  uint8_t *ext = make_ext (&p, 4, 7);
  struct seen s = { .n = 0 };

  /* Bits outside the mask do not count. */
  p.app_tag = 0x1200;
  ck_assert_uint_eq (layout_check (&p, STABLEDIF_PI_CHECK_APP, ext, es,
                                   ext + 512, es, 4, 7, NULL, NULL), 0);
  /* Inside they do, for every block, in order. */
  p.app_tag = 0x1300;
  ck_assert_uint_eq (layout_check (&p, STABLEDIF_PI_CHECK_ALL, ext, es,
                                   ext + 512, es, 4, 7, on_error, &s), 4);
  ck_assert_uint_eq (s.e[0].lba, 7);
  ck_assert_uint_eq (s.e[3].lba, 10);
  ck_assert_int_eq (s.e[2].check, PI_CHECK_APP);
  ck_assert_uint_eq (s.e[2].expected, 0x1300);
  ck_assert_uint_eq (s.e[2].actual, 0x12ab);
  /* An all-ones app tag escapes, whatever the data. */
  pi_tuple_set_escape (p.format, ext + 1 * es + 512);
  ext[1 * es] ^= 0xff;
  ck_assert_uint_eq (layout_check (&p, STABLEDIF_PI_CHECK_ALL, ext, es,
                                   ext + 512, es, 4, 7, NULL, NULL), 3);
  /* Format none: nothing to check. */
  p.format = pi_format_none ();
  ck_assert_uint_eq (layout_check (&p, STABLEDIF_PI_CHECK_ALL, ext, 512,
                                   ext, 0, 4, 7, NULL, NULL), 0);
  free (ext);
}
END_TEST

/* layout_check's own loop (a subset of checks) and the batched verify
 * (all checks) agree on every block of random tuples. */
START_TEST (test_check_paths_agree)
{
  struct pi_params p = {
    .format = pi_format_lookup ("T10-DIF-TYPE2-CRC"), .interval = 512,
    .check_app = false, .app_tag = 0x0042, .app_mask = 0xffff,
  };
  const uint32_t es = pi_ext_size (&p);
  const uint64_t nb = 64;
  uint8_t *ext = make_ext (&p, nb, 50);
  struct seen a = { .n = 0 }, b = { .n = 0 };
  uint64_t i;

  for (i = 0; i < nb; i += 3)
    spoil (p.format, ext + i * es + 512,
           (enum pi_check) (1 + (i / 3) % 3));
  layout_check (&p, STABLEDIF_PI_CHECK_ALL, ext, es, ext + 512, es, nb, 50,
                on_error, &a);
  /* The same blocks through the per-block loop: guard then app then
   * ref, each alone, summed. */
  layout_check (&p, STABLEDIF_PI_CHECK_GUARD, ext, es, ext + 512, es, nb,
                50, on_error, &b);
  layout_check (&p, STABLEDIF_PI_CHECK_APP, ext, es, ext + 512, es, nb, 50,
                on_error, &b);
  layout_check (&p, STABLEDIF_PI_CHECK_REF, ext, es, ext + 512, es, nb, 50,
                on_error, &b);
  ck_assert_uint_eq (a.n, (nb + 2) / 3);
  ck_assert_uint_eq (b.n, a.n);
  free (ext);
}
END_TEST

static struct { uint64_t idx; uint64_t sub, sent; size_t n; } mm;

static void
on_mismatch (void *opaque, uint64_t index, uint64_t guard_submit,
             uint64_t guard_sent)
{
  (void) opaque;
  mm.idx = index;
  mm.sub = guard_submit;
  mm.sent = guard_sent;
  mm.n++;
}

START_TEST (test_recheck_ext)
{
  struct pi_params p = {
    .format = pi_format_lookup ("EXT-DIF-TYPE3-CRC64"), .interval = 4096,
  };
  const uint32_t es = pi_ext_size (&p);
  uint8_t *ext = make_ext (&p, 3, 0);
  struct pi_tuple t;

  ck_assert_uint_eq (layout_recheck_ext (&p, ext, 3, on_mismatch, NULL), 0);
  pi_tuple_decode (p.format, ext + es + 4096, &t);
  ext[es + 100] ^= 1;
  memset (&mm, 0, sizeof mm);
  ck_assert_uint_eq (layout_recheck_ext (&p, ext, 3, on_mismatch, NULL), 1);
  ck_assert_uint_eq (mm.n, 1);
  ck_assert_uint_eq (mm.idx, 1);
  ck_assert_uint_eq (mm.sub, t.guard);
  ck_assert_uint_eq (mm.sent, pi_guard_compute (p.format, ext + es, 4096));
  free (ext);
}
END_TEST

START_TEST (test_pireq)
{
  struct stabledif_handle *h = calloc (1, sizeof *h);
  struct request r;
  uint8_t t[8];
  struct stabledif_pi pi = { .flags = 0 };

  ck_assert_ptr_nonnull (h);
  h->pi.format = pi_format_lookup ("T10-DIF-TYPE1-CRC");
  h->pi.interval = 512;
  h->pi.check_app = true;
  h->pi.app_tag = 0x1234;
  h->pi.app_mask = 0xffff;
  h->ext_size = 520;

  /* NULL: the device's PI, every check, a plain buffer. */
  memset (&r, 0, sizeof r);
  r.h = h; r.count = 2048; r.nblocks = 4;
  ck_assert_int_eq (pireq_check (h, "f", IO_WRITE, NULL), 0);
  pireq_apply (&r, NULL);
  ck_assert (!r.pi_call && !r.interleaved && !r.caller_pi);
  ck_assert_uint_eq (r.checks, STABLEDIF_PI_CHECK_ALL);
  ck_assert_uint_eq (r.params.app_tag, 0x1234);
  ck_assert (r.params.check_app);
  ck_assert_uint_eq (r.buf_len, 2048);

  /* Interleaved caller PI: the request's app tag, its checks, the
   * extended length pinned. */
  pi.flags = STABLEDIF_PI_INTERLEAVED | STABLEDIF_PI_CALLER |
    STABLEDIF_PI_CHECK_GUARD;
  pi.app_tag = 0x0042;
  pi.app_mask = 0x00ff;
  ck_assert_int_eq (pireq_check (h, "f", IO_WRITE, &pi), 0);
  pireq_apply (&r, &pi);
  ck_assert (r.pi_call && r.interleaved && r.caller_pi);
  ck_assert_uint_eq (r.checks, STABLEDIF_PI_CHECK_GUARD);
  ck_assert_uint_eq (r.params.app_tag, 0x0042);
  ck_assert_uint_eq (r.params.app_mask, 0x00ff);
  ck_assert (!r.params.check_app);
  ck_assert_uint_eq (r.buf_len, 4 * 520);

  /* Bad descriptions. */
  pi.flags = 0x80;
  ck_assert_int_eq (pireq_check (h, "f", IO_WRITE, &pi), -1);
  ck_assert_int_eq (stabledif_get_errno (), EINVAL);
  ck_assert_ptr_nonnull (strstr (stabledif_get_error (), "f: unknown pi->flags"));
  pi.flags = STABLEDIF_PI_CALLER;
  ck_assert_int_eq (pireq_check (h, "f", IO_READ, &pi), -1);
  ck_assert_int_eq (pireq_check (h, "f", IO_WRITE, &pi), -1);
  ck_assert_ptr_nonnull (strstr (stabledif_get_error (), "pi->tuples is NULL"));
  pi.tuples = t;
  ck_assert_int_eq (pireq_check (h, "f", IO_WRITE, &pi), 0);
  pi.flags = 0;
  ck_assert_int_eq (pireq_check (h, "f", IO_WRITE, &pi), -1);
  ck_assert_int_eq (pireq_check (h, "f", IO_READ, &pi), 0);
  pi.flags = STABLEDIF_PI_INTERLEAVED;
  ck_assert_int_eq (pireq_check (h, "f", IO_READ, &pi), -1);

  /* Format none: no tuples, the layouts coincide. */
  h->pi.format = pi_format_none ();
  ck_assert_int_eq (pireq_check (h, "f", IO_WRITE, &pi), 0);
  pireq_apply (&r, &pi);
  ck_assert (!r.interleaved);
  ck_assert_uint_eq (r.buf_len, 2048);
  free (h);
}
END_TEST

int
main (void)
{
  Suite *s = suite_create ("client-pireq");
  TCase *tc = tcase_create ("pireq");
  SRunner *sr;
  int failed;

  tcase_add_test (tc, test_check_each_field);
  tcase_add_test (tc, test_check_app_mask_and_escape);
  tcase_add_test (tc, test_check_paths_agree);
  tcase_add_test (tc, test_recheck_ext);
  tcase_add_test (tc, test_pireq);
  suite_add_tcase (s, tc);
  sr = srunner_create (s);
  srunner_run_all (sr, CK_ENV);
  failed = srunner_ntests_failed (sr);
  srunner_free (sr);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
