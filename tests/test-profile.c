/* SPDX-License-Identifier: BSD-3-Clause */
/* stabledif: unit tests for common/profile (the one-line device profile).
 */

#include <config.h>

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "pi.h"
#include "profile.h"
#include "test-rng.h"

#define GOOD "stabledif/1 view=dif format=T10-DIF-TYPE1-CRC interval=512 " \
  "tuple=8 stable_writes=1"

/* Parse LINE, expecting failure with exactly the message WANT. */
static void
parse_fails (const char *line, const char *want)
{
  char err[512];
  struct profile p;

  memset (err, 'x', sizeof err);
  ck_assert_msg (profile_parse (line, &p, err, sizeof err) == -1,
                 "parsed: %s", line);
  ck_assert_msg (strcmp (err, want) == 0, "line: %s\n got: %s\nwant: %s",
                 line, err, want);
}

/* Parse LINE, expecting success. */
static struct profile
parse_ok (const char *line)
{
  char err[512] = "";
  struct profile p;

  ck_assert_msg (profile_parse (line, &p, err, sizeof err) == 0,
                 "line: %s\nerror: %s", line, err);
  return p;
}

START_TEST (test_views)
{
  enum profile_view v;

  ck_assert_str_eq (profile_view_name (PROFILE_VIEW_DATA), "data");
  ck_assert_str_eq (profile_view_name (PROFILE_VIEW_DIF), "dif");

  v = PROFILE_VIEW_DIF;
  ck_assert_int_eq (profile_view_from_export ("", &v), 0);
  ck_assert_int_eq (v, PROFILE_VIEW_DATA);
  v = PROFILE_VIEW_DIF;
  ck_assert_int_eq (profile_view_from_export ("data", &v), 0);
  ck_assert_int_eq (v, PROFILE_VIEW_DATA);
  ck_assert_int_eq (profile_view_from_export ("dif", &v), 0);
  ck_assert_int_eq (v, PROFILE_VIEW_DIF);
  ck_assert_int_eq (profile_view_from_export ("DIF", &v), -1);
  ck_assert_int_eq (profile_view_from_export ("data ", &v), -1);
  ck_assert_int_eq (profile_view_from_export ("dix", &v), -1);
  ck_assert_int_eq (profile_view_from_export (NULL, &v), -1);
}
END_TEST

START_TEST (test_init)
{
  struct profile p;
  struct pi_params pp;

  profile_init (&p, PROFILE_VIEW_DIF, pi_format_lookup ("EXT-DIF-TYPE3-CRC64"),
                4096);
  ck_assert_int_eq (p.view, PROFILE_VIEW_DIF);
  ck_assert_ptr_eq (p.format, pi_format_lookup ("EXT-DIF-TYPE3-CRC64"));
  ck_assert_uint_eq (p.interval, 4096);
  ck_assert_uint_eq (p.tuple, 16);
  ck_assert (p.stable_writes);
  ck_assert (!p.has_app);

  profile_pi_params (&p, &pp);
  ck_assert_ptr_eq (pp.format, p.format);
  ck_assert_uint_eq (pp.interval, 4096);
  ck_assert (!pp.check_app);

  p.has_app = true;
  p.app_tag = 0xabcd;
  p.app_mask = 0x0ff0;
  profile_pi_params (&p, &pp);
  ck_assert (pp.check_app);
  ck_assert_uint_eq (pp.app_tag, 0xabcd);
  ck_assert_uint_eq (pp.app_mask, 0x0ff0);

  profile_init (&p, PROFILE_VIEW_DATA, pi_format_none (), 512);
  ck_assert_uint_eq (p.tuple, 0);
  ck_assert (!p.stable_writes);
}
END_TEST

START_TEST (test_format_exact)
{
  char buf[PROFILE_LINE_MAX];
  struct profile p;

  profile_init (&p, PROFILE_VIEW_DIF, pi_format_lookup ("T10-DIF-TYPE1-CRC"),
                512);
  ck_assert_int_eq (profile_format (&p, buf, sizeof buf), strlen (GOOD));
  ck_assert_str_eq (buf, GOOD);

  profile_init (&p, PROFILE_VIEW_DATA, pi_format_none (), 4096);
  profile_format (&p, buf, sizeof buf);
  ck_assert_str_eq (buf, "stabledif/1 view=data format=none interval=4096 "
                    "tuple=0 stable_writes=0");

  profile_init (&p, PROFILE_VIEW_DATA,
                pi_format_lookup ("EXT-DIF-TYPE1-CRC64"), 4096);
  p.has_app = true;
  p.app_tag = 0x1234;
  p.app_mask = 0xffff;
  profile_format (&p, buf, sizeof buf);
  ck_assert_str_eq (buf, "stabledif/1 view=data format=EXT-DIF-TYPE1-CRC64 "
                    "interval=4096 tuple=16 stable_writes=1 "
                    "app_tag=0x1234/0xffff");
  p.app_tag = 0x5;
  p.app_mask = 0xf0;
  profile_format (&p, buf, sizeof buf);
  ck_assert_ptr_nonnull (strstr (buf, " app_tag=0x0005/0x00f0"));
}
END_TEST

START_TEST (test_format_small_buffer)
{
  char buf[PROFILE_LINE_MAX];
  struct profile p;
  int n;

  profile_init (&p, PROFILE_VIEW_DIF, pi_format_lookup ("T10-DIF-TYPE1-CRC"),
                512);
  n = (int) strlen (GOOD);
  ck_assert_int_eq (profile_format (&p, buf, n + 1), n);
  ck_assert_int_eq (profile_format (&p, buf, n), -1);
  ck_assert_int_eq (profile_format (&p, buf, 1), -1);
  ck_assert_int_eq (profile_format (&p, buf, 0), -1);

  /* The app tag part needs its own room too. */
  p.has_app = true;
  ck_assert_int_eq (profile_format (&p, buf, n + 1), -1);
  ck_assert_int_eq (profile_format (&p, buf, sizeof buf),
                    n + (int) strlen (" app_tag=0x0000/0x0000"));
}
END_TEST

/* Every format, view and valid interval, with and without an app tag,
 * formats and parses back to the same profile. */
START_TEST (test_round_trip)
{
  static const uint32_t intervals[] = { 512, 4096 };
  char buf[PROFILE_LINE_MAX], buf2[PROFILE_LINE_MAX];
  const struct pi_format *f;
  struct profile p, q;
  size_t i, j, n = 0;
  int v, app;

  for (i = 0; (f = pi_format_at (i)) != NULL; i++) {
    for (j = 0; j < 2; j++) {
      if (!pi_interval_valid (f, intervals[j], NULL))
        continue;
      for (v = 0; v < 2; v++) {
        for (app = 0; app < 2; app++) {
          if (app && f->guard == PI_GUARD_NONE)
            continue;
          profile_init (&p, (enum profile_view) v, f, intervals[j]);
          if (app) {
            p.has_app = true;
            p.app_tag = 0xbeef;
            p.app_mask = 0xff0f;
          }
          ck_assert_int_gt (profile_format (&p, buf, sizeof buf), 0);
          q = parse_ok (buf);
          ck_assert_int_eq (q.view, p.view);
          ck_assert_ptr_eq (q.format, p.format);
          ck_assert_uint_eq (q.interval, p.interval);
          ck_assert_uint_eq (q.tuple, p.tuple);
          ck_assert_int_eq (q.stable_writes, p.stable_writes);
          ck_assert_int_eq (q.has_app, p.has_app);
          ck_assert_uint_eq (q.app_tag, p.app_tag);
          ck_assert_uint_eq (q.app_mask, p.app_mask);
          profile_format (&q, buf2, sizeof buf2);
          ck_assert_str_eq (buf, buf2);
          n++;
        }
      }
    }
  }
  /* none and T10 x3 at 2 intervals, CRC64 x2 at 4096 only: 10 devices,
   * 8 of them with PI and so an app tag variant; times 2 views. */
  ck_assert_uint_eq (n, (10 + 8) * 2);
}
END_TEST

START_TEST (test_parse_lenient)
{
  struct profile p;

  /* Unknown keys ignored, any order, extra blanks and a newline. */
  p = parse_ok ("  stabledif/1\tfuture=yes stable_writes=1  tuple=8 "
                "interval=4096 x=  format=T10-DIF-TYPE3-CRC view=data "
                "y=a=b\r\n");
  ck_assert_int_eq (p.view, PROFILE_VIEW_DATA);
  ck_assert_ptr_eq (p.format, pi_format_lookup ("T10-DIF-TYPE3-CRC"));
  ck_assert_uint_eq (p.interval, 4096);
  ck_assert (!p.has_app);

  /* An unknown key may repeat; a known one may not (below). */
  parse_ok (GOOD " z=1 z=2");

  /* app_tag forms: hex or decimal, mask optional (default all bits). */
  p = parse_ok (GOOD " app_tag=0xAbCd/0x00F0");
  ck_assert (p.has_app);
  ck_assert_uint_eq (p.app_tag, 0xabcd);
  ck_assert_uint_eq (p.app_mask, 0x00f0);
  p = parse_ok (GOOD " app_tag=4660");
  ck_assert_uint_eq (p.app_tag, 0x1234);
  ck_assert_uint_eq (p.app_mask, 0xffff);
  p = parse_ok (GOOD " app_tag=0x0/65535");
  ck_assert_uint_eq (p.app_tag, 0);
  ck_assert_uint_eq (p.app_mask, 0xffff);

  /* format none: no PI, stable_writes=0. */
  p = parse_ok ("stabledif/1 view=data format=none interval=512 tuple=0 "
                "stable_writes=0");
  ck_assert_ptr_eq (p.format, pi_format_none ());
  ck_assert (!p.stable_writes);
}
END_TEST

START_TEST (test_parse_errors)
{
  /* Nothing there. */
  parse_fails ("", "profile: empty profile (expected 'stabledif/1 ...')");
  parse_fails (" \t\n", "profile: empty profile (expected 'stabledif/1 ...')");
  parse_fails (NULL, "profile: no profile");

  /* The first token. */
  parse_fails ("stabledif/2 view=dif",
               "profile: first token 'stabledif/2' is not 'stabledif/1'");
  parse_fails ("view=dif stabledif/1",
               "profile: first token 'view=dif' is not 'stabledif/1'");
  parse_fails ("stabledif/1x",
               "profile: first token 'stabledif/1x' is not 'stabledif/1'");

  /* Tokens that are not key=value. */
  parse_fails (GOOD " garbage",
               "profile: bad token 'garbage' (expected key=value)");
  parse_fails (GOOD " =5", "profile: bad token '=5' (expected key=value)");
  parse_fails ("stabledif/1 stabledif/1",
               "profile: bad token 'stabledif/1' (expected key=value)");

  /* Bad values, each naming its token. */
  parse_fails ("stabledif/1 view=disk",
               "profile: bad value in 'view=disk'");
  parse_fails ("stabledif/1 view=", "profile: bad value in 'view='");
  parse_fails ("stabledif/1 view=DIF", "profile: bad value in 'view=DIF'");
  parse_fails ("stabledif/1 format=T10-DIF-TYPE4-CRC",
               "profile: bad value in 'format=T10-DIF-TYPE4-CRC'");
  parse_fails ("stabledif/1 format=t10-dif-type1-crc",
               "profile: bad value in 'format=t10-dif-type1-crc'");
  parse_fails ("stabledif/1 interval=1000",
               "profile: bad value in 'interval=1000'");
  parse_fails ("stabledif/1 interval=-512",
               "profile: bad value in 'interval=-512'");
  parse_fails ("stabledif/1 interval=512k",
               "profile: bad value in 'interval=512k'");
  parse_fails ("stabledif/1 interval=",
               "profile: bad value in 'interval='");
  parse_fails ("stabledif/1 interval=4294967808",  /* 2^32 + 512 */
               "profile: bad value in 'interval=4294967808'");
  parse_fails ("stabledif/1 interval=99999999999999999999999999",
               "profile: bad value in 'interval=99999999999999999999999999'");
  parse_fails ("stabledif/1 tuple=eight",
               "profile: bad value in 'tuple=eight'");
  parse_fails ("stabledif/1 tuple=17", "profile: bad value in 'tuple=17'");
  parse_fails ("stabledif/1 stable_writes=yes",
               "profile: bad value in 'stable_writes=yes'");
  parse_fails ("stabledif/1 stable_writes=2",
               "profile: bad value in 'stable_writes=2'");
  parse_fails (GOOD " app_tag=0x12345",
               "profile: bad value in 'app_tag=0x12345'");
  parse_fails (GOOD " app_tag=65536",
               "profile: bad value in 'app_tag=65536'");
  parse_fails (GOOD " app_tag=0x1234/",
               "profile: bad value in 'app_tag=0x1234/'");
  parse_fails (GOOD " app_tag=/0xffff",
               "profile: bad value in 'app_tag=/0xffff'");
  parse_fails (GOOD " app_tag=0x",
               "profile: bad value in 'app_tag=0x'");
  parse_fails (GOOD " app_tag=0xzz",
               "profile: bad value in 'app_tag=0xzz'");
  parse_fails (GOOD " app_tag=1/2/3",
               "profile: bad value in 'app_tag=1/2/3'");

  /* Duplicates. */
  parse_fails (GOOD " view=data",
               "profile: duplicate key 'view' in 'view=data'");
  parse_fails (GOOD " app_tag=1 app_tag=1",
               "profile: duplicate key 'app_tag' in 'app_tag=1'");

  /* Each required key missing. */
  parse_fails ("stabledif/1 format=T10-DIF-TYPE1-CRC interval=512 tuple=8 "
               "stable_writes=1", "profile: missing required key 'view'");
  parse_fails ("stabledif/1 view=dif interval=512 tuple=8 stable_writes=1",
               "profile: missing required key 'format'");
  parse_fails ("stabledif/1 view=dif format=T10-DIF-TYPE1-CRC tuple=8 "
               "stable_writes=1", "profile: missing required key 'interval'");
  parse_fails ("stabledif/1 view=dif format=T10-DIF-TYPE1-CRC interval=512 "
               "stable_writes=1", "profile: missing required key 'tuple'");
  parse_fails ("stabledif/1 view=dif format=T10-DIF-TYPE1-CRC interval=512 "
               "tuple=8", "profile: missing required key 'stable_writes'");
  parse_fails ("stabledif/1", "profile: missing required key 'view'");

  /* Inconsistent with the format. */
  parse_fails ("stabledif/1 view=dif format=T10-DIF-TYPE1-CRC interval=512 "
               "tuple=16 stable_writes=1",
               "profile: tuple=16 does not match format T10-DIF-TYPE1-CRC (8)");
  parse_fails ("stabledif/1 view=dif format=EXT-DIF-TYPE1-CRC64 "
               "interval=4096 tuple=8 stable_writes=1",
               "profile: tuple=8 does not match format EXT-DIF-TYPE1-CRC64 "
               "(16)");
  parse_fails ("stabledif/1 view=dif format=none interval=512 tuple=8 "
               "stable_writes=0",
               "profile: tuple=8 does not match format none (0)");
  parse_fails ("stabledif/1 view=dif format=T10-DIF-TYPE1-CRC interval=512 "
               "tuple=8 stable_writes=0",
               "profile: stable_writes=0 but format T10-DIF-TYPE1-CRC "
               "checks PI");
  parse_fails ("stabledif/1 view=data format=none interval=512 tuple=0 "
               "stable_writes=1",
               "profile: stable_writes=1 but format none has no PI to check");
  parse_fails ("stabledif/1 view=data format=none interval=512 tuple=0 "
               "stable_writes=0 app_tag=0x1/0xffff",
               "profile: app_tag=0x1/0xffff but format none has no app tag");
}
END_TEST

/* The CRC-64 formats at interval 512: the message names the token and
 * explains. */
START_TEST (test_parse_crc64_512)
{
  char err[512];
  struct profile p;

  ck_assert_int_eq (profile_parse ("stabledif/1 view=dif "
                                   "format=EXT-DIF-TYPE3-CRC64 interval=512 "
                                   "tuple=16 stable_writes=1",
                                   &p, err, sizeof err), -1);
  ck_assert_msg (strncmp (err, "profile: interval=512 does not suit format "
                          "EXT-DIF-TYPE3-CRC64: ", 63) == 0, "%s", err);
  ck_assert_msg (strstr (err, "4096") != NULL, "%s", err);
}
END_TEST

/* Error messages quote at most 64 bytes of a token, with non-printable
 * bytes replaced, and never overflow ERR. */
START_TEST (test_parse_error_quoting)
{
  char line[1024], want[256], small[8];
  struct profile p;
  size_t i;

  snprintf (line, sizeof line, "stabledif/1 view=");
  for (i = strlen (line); i < 600; i++)
    line[i] = 'a';
  line[i] = '\0';
  snprintf (want, sizeof want, "profile: bad value in 'view=%.59s...'",
            line + strlen ("stabledif/1 view="));
  parse_fails (line, want);

  parse_fails ("stabledif/1 view=\001\177\377",
               "profile: bad value in 'view=?" "?" "?'");
  parse_fails ("\033[31mstabledif/1",
               "profile: first token '?[31mstabledif/1' is not "
               "'stabledif/1'");

  /* A short error buffer is filled and terminated, no more. */
  memset (small, 'x', sizeof small);
  ck_assert_int_eq (profile_parse ("nope", &p, small, 5), -1);
  ck_assert_str_eq (small, "prof");
  ck_assert_int_eq (small[5], 'x');
  ck_assert_int_eq (profile_parse ("nope", &p, NULL, 0), -1);
  ck_assert_int_eq (profile_parse ("nope", &p, small, 0), -1);
  ck_assert_int_eq (profile_parse (GOOD, &p, NULL, 0), 0);
}
END_TEST


/* Garbage and mutated profiles: the parser returns 0 or -1 with a message,
 * and whatever it accepts formats and parses back the same.  (Run under
 * --enable-sanitizers and valgrind, this also catches any overread.) */
START_TEST (test_parse_robust)
{
  static const char *const pieces[] = {
    "stabledif/1", " ", "  ", "\t", "view=", "dif", "data", "format=",
    "T10-DIF-TYPE1-CRC", "EXT-DIF-TYPE3-CRC64", "none", "interval=", "512",
    "4096", "tuple=", "8", "16", "0", "stable_writes=", "1", "=", "/",
    "app_tag=", "0x", "ffff", "0x1234/0xff00", "\377", "\001", "9999999999",
  };
  const size_t np = sizeof pieces / sizeof pieces[0];
  char line[300], err[128], buf[PROFILE_LINE_MAX], buf2[PROFILE_LINE_MAX];
  struct profile p, q;
  size_t len, n;
  int round, accepted = 0, r;

  rng_seed (12345);

  for (round = 0; round < 200000; round++) {
    len = 0;
    if (round % 3 == 0) {
      /* Random bytes (never NUL) of random length. */
      n = rng_next () % (sizeof line - 1);
      for (len = 0; len < n; len++)
        line[len] = (char) (1 + rng_next () % 255);
    }
    else {
      /* A valid profile with random pieces spliced in. */
      if (round % 3 == 1) {
        memcpy (line, GOOD, strlen (GOOD));
        len = strlen (GOOD);
        len = rng_next () % (len + 1);
      }
      n = rng_next () % 20;
      while (n-- > 0) {
        const char *s = pieces[rng_next () % np];
        if (len + strlen (s) >= sizeof line)
          break;
        memcpy (line + len, s, strlen (s));
        len += strlen (s);
      }
    }
    line[len] = '\0';

    memset (err, 0, sizeof err);
    r = profile_parse (line, &p, err, sizeof err);
    if (r == 0) {
      accepted++;
      ck_assert_int_gt (profile_format (&p, buf, sizeof buf), 0);
      ck_assert_int_eq (profile_parse (buf, &q, err, sizeof err), 0);
      ck_assert_int_gt (profile_format (&q, buf2, sizeof buf2), 0);
      ck_assert_str_eq (buf, buf2);
    }
    else {
      ck_assert_int_eq (r, -1);
      ck_assert_msg (strncmp (err, "profile: ", 9) == 0, "err: %s", err);
      ck_assert (memchr (err, '\0', sizeof err) != NULL);
    }
  }
  /* The generator does produce valid profiles now and then. */
  ck_assert_int_gt (accepted, 0);
}
END_TEST

static Suite *
profile_suite (void)
{
  Suite *s = suite_create ("profile");
  TCase *tc = tcase_create ("profile");

  tcase_add_test (tc, test_views);
  tcase_add_test (tc, test_init);
  tcase_add_test (tc, test_format_exact);
  tcase_add_test (tc, test_format_small_buffer);
  tcase_add_test (tc, test_round_trip);
  tcase_add_test (tc, test_parse_lenient);
  tcase_add_test (tc, test_parse_errors);
  tcase_add_test (tc, test_parse_crc64_512);
  tcase_add_test (tc, test_parse_error_quoting);
  tcase_add_test (tc, test_parse_robust);
  suite_add_tcase (s, tc);
  return s;
}

int
main (void)
{
  SRunner *sr = srunner_create (profile_suite ());
  int failed;

  srunner_run_all (sr, CK_ENV);
  failed = srunner_ntests_failed (sr);
  srunner_free (sr);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
