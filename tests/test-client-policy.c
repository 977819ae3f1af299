/* SPDX-License-Identifier: BSD-3-Clause */
/* stabledif: unit tests for libstabledif's stable-page policies and the
 * wait-stable bookkeeping (client/libstabledif-policy.c): resolution of
 * auto and the unsafe rule, which policies pin, names, and the overlap
 * logic stabledif_wait_stable relies on.
 */
#include <config.h>

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "libstabledif-internal.h"

/* ---- resolution ---- */

/* Resolve and expect success with WANT. */
static void
expect_resolves (int req, bool stable, bool unsafe, enum stabledif_policy want)
{
  enum stabledif_policy eff = (enum stabledif_policy) -1;
  char err[256] = "";

  ck_assert_msg (policy_resolve (req, stable, unsafe, &eff, err,
                                 sizeof err) == 0,
                 "%s stable=%d unsafe=%d refused: %s",
                 stabledif_policy_name (req), stable, unsafe, err);
  ck_assert_msg (eff == want, "%s stable=%d unsafe=%d -> %s, want %s",
                 stabledif_policy_name (req), stable, unsafe,
                 stabledif_policy_name (eff), stabledif_policy_name (want));
}

START_TEST (test_resolve_auto)
{
  /* auto: wait exactly when the device needs stable pages, in either
   * unsafe setting. */
  expect_resolves (STABLEDIF_POLICY_AUTO, true, false, STABLEDIF_POLICY_WAIT);
  expect_resolves (STABLEDIF_POLICY_AUTO, true, true, STABLEDIF_POLICY_WAIT);
  expect_resolves (STABLEDIF_POLICY_AUTO, false, false, STABLEDIF_POLICY_NONE);
  expect_resolves (STABLEDIF_POLICY_AUTO, false, true, STABLEDIF_POLICY_NONE);
}
END_TEST

START_TEST (test_resolve_explicit)
{
  static const enum stabledif_policy ps[] = {
    STABLEDIF_POLICY_WAIT, STABLEDIF_POLICY_WAIT_SENT,
    STABLEDIF_POLICY_SNAPSHOT,
  };
  size_t i;

  /* Safe policies are kept as asked, on any device. */
  for (i = 0; i < 3; ++i) {
    expect_resolves (ps[i], true, false, ps[i]);
    expect_resolves (ps[i], false, false, ps[i]);
    expect_resolves (ps[i], true, true, ps[i]);
  }
  /* none is fine where nothing checks the data ... */
  expect_resolves (STABLEDIF_POLICY_NONE, false, false, STABLEDIF_POLICY_NONE);
  /* ... and on a stable device only when unsafe. */
  expect_resolves (STABLEDIF_POLICY_NONE, true, true, STABLEDIF_POLICY_NONE);
}
END_TEST

START_TEST (test_resolve_none_refused)
{
  enum stabledif_policy eff = STABLEDIF_POLICY_SNAPSHOT;
  char err[256] = "";

  errno = 0;
  ck_assert_int_eq (policy_resolve (STABLEDIF_POLICY_NONE, true, false, &eff,
                                    err, sizeof err), -1);
  ck_assert_int_eq (errno, EPERM);
  ck_assert_msg (strstr (err, "stabledif_set_unsafe") != NULL,
                 "message does not say how to allow it: %s", err);
  ck_assert_msg (strstr (err, "stable_writes=1") != NULL, "%s", err);
  ck_assert_int_eq (eff, STABLEDIF_POLICY_SNAPSHOT); /* untouched */
}
END_TEST

START_TEST (test_resolve_invalid)
{
  enum stabledif_policy eff;
  char err[64] = "";

  errno = 0;
  ck_assert_int_eq (policy_resolve (99, false, false, &eff, err, sizeof err),
                    -1);
  ck_assert_int_eq (errno, EINVAL);
  ck_assert_int_eq (policy_resolve (-1, true, true, &eff, err, sizeof err),
                    -1);
  ck_assert (!policy_valid (5));
  ck_assert (policy_valid (STABLEDIF_POLICY_NONE));
}
END_TEST

START_TEST (test_pins)
{
  ck_assert (policy_pins (STABLEDIF_POLICY_WAIT));
  ck_assert (policy_pins (STABLEDIF_POLICY_WAIT_SENT));
  ck_assert (!policy_pins (STABLEDIF_POLICY_SNAPSHOT));
  ck_assert (!policy_pins (STABLEDIF_POLICY_NONE));
  /* auto is always resolved before it is used; it does not pin. */
  ck_assert (!policy_pins (STABLEDIF_POLICY_AUTO));
}
END_TEST

START_TEST (test_names)
{
  int p;

  for (p = 0; p <= STABLEDIF_POLICY_NONE; ++p) {
    const char *n = stabledif_policy_name (p);
    ck_assert_ptr_nonnull (n);
    ck_assert_int_eq (stabledif_policy_from_name (n), p);
  }
  ck_assert_str_eq (stabledif_policy_name (STABLEDIF_POLICY_WAIT_SENT),
                    "wait-sent");
  ck_assert_int_eq (stabledif_policy_from_name ("wait_sent"),
                    STABLEDIF_POLICY_WAIT_SENT);
  ck_assert_ptr_null (stabledif_policy_name (7));
  ck_assert_int_eq (stabledif_policy_from_name ("Wait"), -1);
  ck_assert_int_eq (stabledif_get_errno (), EINVAL);
  ck_assert_ptr_nonnull (strstr (stabledif_get_error (), "\"Wait\""));
  ck_assert_int_eq (stabledif_policy_from_name (NULL), -1);
}
END_TEST

/* ---- overlap ---- */

START_TEST (test_overlap)
{
  /* Half-open ranges: touching is not overlapping. */
  ck_assert (!policy_ranges_overlap (10, 10, 20, 10));
  ck_assert (!policy_ranges_overlap (20, 10, 10, 10));
  ck_assert (policy_ranges_overlap (10, 10, 19, 1));
  ck_assert (policy_ranges_overlap (19, 1, 10, 10));
  ck_assert (policy_ranges_overlap (10, 11, 20, 10));
  /* Containment either way. */
  ck_assert (policy_ranges_overlap (0, 100, 40, 2));
  ck_assert (policy_ranges_overlap (40, 2, 0, 100));
  ck_assert (policy_ranges_overlap (5, 1, 5, 1));
  /* Empty ranges overlap nothing, not even inside another. */
  ck_assert (!policy_ranges_overlap (10, 0, 0, 100));
  ck_assert (!policy_ranges_overlap (0, 100, 10, 0));
  ck_assert (!policy_ranges_overlap (10, 0, 10, 0));
  /* At the top of the address space: clipped, no wrap-around to 0. */
  ck_assert (policy_ranges_overlap (UINTPTR_MAX - 5, 100, UINTPTR_MAX - 1, 1));
  ck_assert (!policy_ranges_overlap (UINTPTR_MAX - 5, 100, 0, 10));
  ck_assert (!policy_ranges_overlap (0, 10, UINTPTR_MAX - 5, SIZE_MAX));
  ck_assert (policy_ranges_overlap (0, SIZE_MAX, UINTPTR_MAX - 1, 1));
}
END_TEST

START_TEST (test_pinset)
{
  static char buf[4096];
  struct pinset s;
  struct pin a, b, c;

  pinset_init (&s);
  ck_assert (!pinset_overlaps (&s, buf, sizeof buf));

  pinset_add (&s, &a, buf, 512);          /* [0, 512) */
  pinset_add (&s, &b, buf + 1024, 512);   /* [1024, 1536) */
  pinset_add (&s, &c, buf + 3000, 10);    /* [3000, 3010) */
  ck_assert_uint_eq (s.count, 3);

  ck_assert (pinset_overlaps (&s, buf + 511, 1));
  ck_assert (!pinset_overlaps (&s, buf + 512, 512));  /* the gap */
  ck_assert (pinset_overlaps (&s, buf + 512, 513));   /* into b */
  ck_assert (pinset_overlaps (&s, buf + 3009, 100));
  ck_assert (!pinset_overlaps (&s, buf + 3010, 100));
  ck_assert (!pinset_overlaps (&s, buf + 100, 0));    /* empty */

  /* Remove from the middle of the list, then both ends. */
  pinset_remove (&s, &b);
  ck_assert_uint_eq (s.count, 2);
  ck_assert (!b.active);
  ck_assert (!pinset_overlaps (&s, buf + 1024, 512));
  ck_assert (pinset_overlaps (&s, buf, 1));
  ck_assert (pinset_overlaps (&s, buf + 3000, 1));
  pinset_remove (&s, &b);                 /* twice: no-op */
  ck_assert_uint_eq (s.count, 2);
  pinset_remove (&s, &c);
  pinset_remove (&s, &a);
  ck_assert_uint_eq (s.count, 0);
  ck_assert_ptr_null (s.head);
  ck_assert (!pinset_overlaps (&s, buf, sizeof buf));

  /* Two pins on the same region: it stays pinned until both go. */
  pinset_add (&s, &a, buf, 100);
  pinset_add (&s, &b, buf, 100);
  pinset_remove (&s, &a);
  ck_assert (pinset_overlaps (&s, buf + 50, 1));
  pinset_remove (&s, &b);
  ck_assert (!pinset_overlaps (&s, buf + 50, 1));
}
END_TEST

static Suite *
policy_suite (void)
{
  Suite *s = suite_create ("client-policy");
  TCase *tc = tcase_create ("policy");

  tcase_add_test (tc, test_resolve_auto);
  tcase_add_test (tc, test_resolve_explicit);
  tcase_add_test (tc, test_resolve_none_refused);
  tcase_add_test (tc, test_resolve_invalid);
  tcase_add_test (tc, test_pins);
  tcase_add_test (tc, test_names);
  tcase_add_test (tc, test_overlap);
  tcase_add_test (tc, test_pinset);
  suite_add_tcase (s, tc);
  return s;
}

int
main (void)
{
  SRunner *sr = srunner_create (policy_suite ());
  int failed;

  srunner_run_all (sr, CK_ENV);
  failed = srunner_ntests_failed (sr);
  srunner_free (sr);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
