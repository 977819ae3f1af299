/* SPDX-License-Identifier: BSD-3-Clause */
/* stabledif: unit tests for server/ratelimit.c.
 *
 * The limiter runs on a clock the test moves by hand: no sleeping, and
 * every count is exact.
 */
#include <config.h>

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include <check.h>

#include "ratelimit.h"

/* One second in nanoseconds. */
#define SEC UINT64_C (1000000000)

/* The hand-driven clock: *OPAQUE is the time in nanoseconds. */
static uint64_t
test_clock (void *opaque)
{
  return *(const uint64_t *) opaque;
}

/* Offer N lines to RL; return how many passed and add the held counts
 * handed over to *HELD. */
static unsigned
offer (struct ratelimit *rl, unsigned n, uint64_t *held)
{
  unsigned passed = 0, i;

  for (i = 0; i < n; i++) {
    uint64_t h;

    passed += ratelimit_allow (rl, &h);
    *held += h;
  }
  return passed;
}

/* The first BURST lines of an interval pass, the rest are held and
 * handed over, exactly, by the first line of the next interval. */
START_TEST (burst_then_held)
{
  uint64_t now = 1000, held = 0, h;
  struct ratelimit rl;

  ratelimit_init (&rl, 10, 5 * SEC, test_clock, &now);
  ck_assert_uint_eq (offer (&rl, 10, &held), 10);
  ck_assert_uint_eq (held, 0);
  ck_assert_uint_eq (offer (&rl, 1392, &held), 0);
  ck_assert_uint_eq (held, 0);

  /* Still inside the interval (one nanosecond before its end). */
  now += 5 * SEC - 1;
  ck_assert (!ratelimit_allow (&rl, &h));
  ck_assert_uint_eq (h, 0);

  /* The interval has ended: the next line passes, with the count. */
  now += 1;
  ck_assert (ratelimit_allow (&rl, &h));
  ck_assert_uint_eq (h, 1393);
  ratelimit_destroy (&rl);
}
END_TEST

/* A new interval lets a full burst through again, and hands over
 * nothing when the previous one held nothing back. */
START_TEST (new_interval_resets)
{
  uint64_t now = 0, held = 0;
  struct ratelimit rl;
  int round;

  ratelimit_init (&rl, 3, 2 * SEC, test_clock, &now);
  for (round = 0; round < 4; round++) {
    held = 0;
    ck_assert_uint_eq (offer (&rl, 3, &held), 3);
    ck_assert_uint_eq (held, round == 0 ? 0 : 5);
    ck_assert_uint_eq (offer (&rl, 5, &held), 0);
    now += 2 * SEC + 17;
  }
  held = 0;
  ck_assert_uint_eq (offer (&rl, 2, &held), 2);
  ck_assert_uint_eq (held, 5);
  /* Quiet intervals: nothing held, nothing handed over. */
  now += 10 * SEC;
  held = 0;
  ck_assert_uint_eq (offer (&rl, 3, &held), 3);
  ck_assert_uint_eq (held, 0);
  ratelimit_destroy (&rl);
}
END_TEST

/* An interval starts with the first line after the previous one ended,
 * not on a fixed grid. */
START_TEST (interval_starts_at_first_line)
{
  uint64_t now = 0, h;
  struct ratelimit rl;

  ratelimit_init (&rl, 1, 5 * SEC, test_clock, &now);
  ck_assert (ratelimit_allow (&rl, &h));
  now = 7 * SEC;                /* a new interval begins here */
  ck_assert (ratelimit_allow (&rl, &h));
  now = 11 * SEC;               /* 4 s into it: still limited */
  ck_assert (!ratelimit_allow (&rl, &h));
  now = 12 * SEC;
  ck_assert (ratelimit_allow (&rl, &h));
  ck_assert_uint_eq (h, 1);
  ratelimit_destroy (&rl);
}
END_TEST

/* ratelimit_flush hands over what is held once; the lines it handed
 * over are not handed over again by the next interval. */
START_TEST (flush_hands_over_once)
{
  uint64_t now = 0, held = 0, h;
  struct ratelimit rl;

  ratelimit_init (&rl, 2, SEC, test_clock, &now);
  ck_assert_uint_eq (ratelimit_flush (&rl), 0);
  ck_assert_uint_eq (offer (&rl, 9, &held), 2);
  ck_assert_uint_eq (ratelimit_flush (&rl), 7);
  ck_assert_uint_eq (ratelimit_flush (&rl), 0);
  now += SEC;
  ck_assert (ratelimit_allow (&rl, &h));
  ck_assert_uint_eq (h, 0);
  ratelimit_destroy (&rl);
}
END_TEST

/* Interval 0 means no limit; burst 0 holds every line back. */
START_TEST (no_limit_and_no_burst)
{
  uint64_t now = 0, held = 0;
  struct ratelimit rl;

  ratelimit_init (&rl, 1, 0, test_clock, &now);
  ck_assert_uint_eq (offer (&rl, 100, &held), 100);
  ck_assert_uint_eq (held + ratelimit_flush (&rl), 0);
  ratelimit_destroy (&rl);

  ratelimit_init (&rl, 0, SEC, test_clock, &now);
  ck_assert_uint_eq (offer (&rl, 4, &held), 0);
  ck_assert_uint_eq (ratelimit_flush (&rl), 4);
  ratelimit_destroy (&rl);
}
END_TEST

/* The default clock (CLOCK_MONOTONIC) works: the first line passes. */
START_TEST (default_clock)
{
  struct ratelimit rl;
  uint64_t h;

  ratelimit_init (&rl, 1, 3600 * SEC, NULL, NULL);
  ck_assert (ratelimit_allow (&rl, &h));
  ck_assert (!ratelimit_allow (&rl, &h));
  ck_assert_uint_eq (ratelimit_flush (&rl), 1);
  ratelimit_destroy (&rl);
}
END_TEST

static Suite *
ratelimit_suite (void)
{
  Suite *s = suite_create ("ratelimit");
  TCase *tc = tcase_create ("core");

  tcase_add_test (tc, burst_then_held);
  tcase_add_test (tc, new_interval_resets);
  tcase_add_test (tc, interval_starts_at_first_line);
  tcase_add_test (tc, flush_hands_over_once);
  tcase_add_test (tc, no_limit_and_no_burst);
  tcase_add_test (tc, default_clock);
  suite_add_tcase (s, tc);
  return s;
}

int
main (void)
{
  SRunner *sr = srunner_create (ratelimit_suite ());
  int failed;

  srunner_run_all (sr, CK_NORMAL);
  failed = srunner_ntests_failed (sr);
  srunner_free (sr);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
