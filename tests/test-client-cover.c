/* SPDX-License-Identifier: BSD-3-Clause */
/* stabledif: unit tests for libstabledif's read coverage
 * (client/libstabledif-cover.c): the ranges the chunks of a read reply
 * filled, so that the library can skip libnbd's zeroing of every read
 * buffer and still refuse a reply that left bytes unfilled or filled
 * some twice.
 *
 * A reply counts as complete only if its chunks tile the request
 * exactly: in order, out of order, or in many small pieces (past the
 * ranges held without an allocation); a gap, an overlap of any shape,
 * a chunk outside the request must all be caught.  The random cases
 * compare with a byte map.
 */
#include <config.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "libstabledif-internal.h"
#include "test-rng.h"

/* Add [START, START + LEN) of TOTAL to C; returns cover_add's result. */
static int
add (struct cover *c, uint64_t start, uint64_t len, uint64_t total)
{
  return cover_add (c, start, len, total);
}

START_TEST (test_in_order)
{
  struct cover c;

  cover_init (&c);
  ck_assert (!cover_full (&c, 100));
  ck_assert_int_eq (add (&c, 0, 40, 100), 0);
  ck_assert (!cover_full (&c, 100));
  ck_assert_int_eq (add (&c, 40, 60, 100), 0);
  ck_assert (cover_full (&c, 100));
  ck_assert_uint_eq (c.n, 1);                 /* merged as they came */
  ck_assert_uint_eq (cover_bytes (&c), 100);
  cover_free (&c);

  /* One chunk for the whole request: the common case. */
  cover_init (&c);
  ck_assert_int_eq (add (&c, 0, 133120, 133120), 0);
  ck_assert (cover_full (&c, 133120));
  cover_free (&c);
}
END_TEST

START_TEST (test_out_of_order)
{
  struct cover c;

  cover_init (&c);
  ck_assert_int_eq (add (&c, 60, 40, 100), 0);
  ck_assert_int_eq (add (&c, 0, 20, 100), 0);
  ck_assert_uint_eq (c.n, 2);
  ck_assert (!cover_full (&c, 100));
  ck_assert_uint_eq (cover_bytes (&c), 60);
  ck_assert_int_eq (add (&c, 20, 40, 100), 0); /* joins both neighbours */
  ck_assert_uint_eq (c.n, 1);
  ck_assert (cover_full (&c, 100));
  cover_free (&c);

  /* Many pieces, every other one first: more ranges at once than are
   * held without an allocation. */
  cover_init (&c);
  for (uint64_t i = 0; i < 64; i += 2)
    ck_assert_int_eq (add (&c, i * 10, 10, 640), 0);
  ck_assert_uint_eq (c.n, 32);
  ck_assert (!cover_full (&c, 640));
  for (uint64_t i = 1; i < 64; i += 2)
    ck_assert_int_eq (add (&c, i * 10, 10, 640), 0);
  ck_assert_uint_eq (c.n, 1);
  ck_assert (cover_full (&c, 640));
  cover_free (&c);
  ck_assert_uint_eq (c.n, 0);                 /* free leaves it empty */
  ck_assert (!cover_full (&c, 640));
}
END_TEST

START_TEST (test_gaps)
{
  struct cover c;

  cover_init (&c);
  ck_assert_int_eq (add (&c, 0, 50, 100), 0);
  ck_assert_int_eq (add (&c, 51, 49, 100), 0);   /* one byte missing */
  ck_assert (!cover_full (&c, 100));
  ck_assert_uint_eq (cover_bytes (&c), 99);
  ck_assert (!c.bad);                           /* a gap is not an error */
  cover_free (&c);

  cover_init (&c);
  ck_assert_int_eq (add (&c, 1, 99, 100), 0);    /* first byte missing */
  ck_assert (!cover_full (&c, 100));
  cover_free (&c);

  cover_init (&c);
  ck_assert_int_eq (add (&c, 0, 99, 100), 0);    /* last byte missing */
  ck_assert (!cover_full (&c, 100));
  ck_assert (cover_full (&c, 99));
  cover_free (&c);

  /* Nothing to read is complete with no chunk; zero-length chunks (from
   * a server that does not follow the protocol) fill nothing. */
  cover_init (&c);
  ck_assert (cover_full (&c, 0));
  ck_assert_int_eq (add (&c, 10, 0, 100), 0);
  ck_assert_uint_eq (c.n, 0);
  ck_assert (!cover_full (&c, 100));
  cover_free (&c);
}
END_TEST

/* Every way a chunk can overlap what is covered fails, and leaves the
 * whole reply untrusted even if the bytes add up. */
START_TEST (test_overlaps)
{
  static const struct { uint64_t s, l; } second[] = {
    { 10, 20 },                 /* the same bytes */
    { 5, 10 },                  /* over the start */
    { 25, 10 },                 /* over the end */
    { 15, 5 },                  /* inside */
    { 0, 100 },                 /* around */
    { 29, 1 },                  /* the last byte */
    { 10, 1 },                  /* the first byte */
  };
  size_t i;

  for (i = 0; i < sizeof second / sizeof second[0]; i++) {
    struct cover c;

    cover_init (&c);
    ck_assert_int_eq (add (&c, 10, 20, 100), 0);
    ck_assert_int_eq (add (&c, second[i].s, second[i].l, 100), -1);
    ck_assert (c.bad);
    ck_assert_int_eq (add (&c, 0, 10, 100), 0);
    ck_assert_int_eq (add (&c, 30, 70, 100), 0);
    ck_assert_msg (!cover_full (&c, 100), "overlap %zu trusted", i);
    cover_free (&c);
  }

  /* An overlap with the second of two ranges. */
  {
    struct cover c;

    cover_init (&c);
    ck_assert_int_eq (add (&c, 0, 10, 100), 0);
    ck_assert_int_eq (add (&c, 50, 10, 100), 0);
    ck_assert_int_eq (add (&c, 10, 41, 100), -1);
    ck_assert (!cover_full (&c, 100));
    cover_free (&c);
  }
}
END_TEST

START_TEST (test_outside)
{
  struct cover c;

  cover_init (&c);
  ck_assert_int_eq (add (&c, 90, 11, 100), -1);  /* past the end */
  ck_assert (c.bad);
  cover_free (&c);

  cover_init (&c);
  ck_assert_int_eq (add (&c, 101, 1, 100), -1);
  cover_free (&c);

  cover_init (&c);                               /* START + LEN overflows */
  ck_assert_int_eq (add (&c, 50, UINT64_MAX - 10, 100), -1);
  ck_assert (!cover_full (&c, 100));
  cover_free (&c);
}
END_TEST

/* Random tilings in random order are complete; with one chunk dropped
 * they are not; with one chunk sent twice they are refused.  The byte
 * map says what the answer must be. */
START_TEST (test_random)
{
  enum { TOTAL = 4096, MAXN = 300, ROUNDS = 300 };
  static uint64_t start[MAXN], len[MAXN];
  static uint8_t map[TOTAL];
  unsigned r;

  rng_seed (7);
  for (r = 0; r < ROUNDS; r++) {
    struct cover c;
    size_t n = 0, i, drop;
    uint64_t at = 0;
    bool twice = r % 3 == 2;

    /* Cut [0, TOTAL) into pieces of 1..40 bytes, then shuffle them. */
    while (at < TOTAL && n < MAXN - 1) {
      uint64_t l = 1 + rng_next () % 40;
      if (l > TOTAL - at || n == MAXN - 2)
        l = TOTAL - at;
      start[n] = at;
      len[n++] = l;
      at += l;
    }
    for (i = n; i > 1; i--) {
      size_t j = rng_next () % i;
      uint64_t ts = start[i - 1], tl = len[i - 1];
      start[i - 1] = start[j]; len[i - 1] = len[j];
      start[j] = ts; len[j] = tl;
    }
    drop = r % 3 == 1 ? rng_next () % n : n;       /* no piece dropped */

    cover_init (&c);
    memset (map, 0, sizeof map);
    for (i = 0; i < n; i++) {
      if (i == drop)
        continue;
      ck_assert_int_eq (add (&c, start[i], len[i], TOTAL), 0);
      memset (map + start[i], 1, len[i]);
    }
    if (twice) {
      i = rng_next () % n;
      ck_assert_int_eq (add (&c, start[i], len[i], TOTAL), -1);
    }
    {
      bool all = memchr (map, 0, TOTAL) == NULL;
      uint64_t bytes = 0;
      for (i = 0; i < TOTAL; i++)
        bytes += map[i];
      ck_assert_msg (cover_full (&c, TOTAL) == (all && !twice),
                     "round %u: %zu pieces, drop %zu, twice %d", r, n, drop,
                     twice);
      ck_assert_uint_eq (cover_bytes (&c), bytes);
    }
    cover_free (&c);
  }
}
END_TEST

static Suite *
cover_suite (void)
{
  Suite *s = suite_create ("client-cover");
  TCase *tc = tcase_create ("cover");

  tcase_add_test (tc, test_in_order);
  tcase_add_test (tc, test_out_of_order);
  tcase_add_test (tc, test_gaps);
  tcase_add_test (tc, test_overlaps);
  tcase_add_test (tc, test_outside);
  tcase_add_test (tc, test_random);
  suite_add_tcase (s, tc);
  return s;
}

int
main (void)
{
  SRunner *sr = srunner_create (cover_suite ());
  int failed;

  srunner_run_all (sr, CK_ENV);
  failed = srunner_ntests_failed (sr);
  srunner_free (sr);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
