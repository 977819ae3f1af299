/* SPDX-License-Identifier: BSD-3-Clause */
/* Unit tests of the control socket's request handler, ctl_handle_line:
 * every verb on a memory disk, and bad input of every kind.  Every reply
 * must be one line of valid JSON with "ok", and no request may change
 * the device's profile (stable_writes above all). */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>
#include <jansson.h>

#include "ctl.h"
#include "ctl-internal.h"
#include "disk.h"
#include "pi.h"

#define INTERVAL 512
#define SIZE (64 * INTERVAL)    /* 64 blocks */

/* The last error the disk reported (tests check some of them). */
static char last_error[1024];

static void
test_error (const char *fmt, ...)
{
  va_list ap;

  va_start (ap, fmt);
  vsnprintf (last_error, sizeof last_error, fmt, ap);
  va_end (ap);
}

/* A memory disk of FORMAT (NULL: none) with an optional app tag. */
static struct disk *
open_disk (const char *format, bool has_app, uint16_t app)
{
  struct disk_config cfg = {
    .size = SIZE,
    .format = format ? pi_format_lookup (format) : pi_format_none (),
    .interval = INTERVAL,
    .has_app = has_app,
    .app_tag = app,
    .app_mask = 0xffff,
    .error = test_error,
  };
  struct disk *d;

  ck_assert_ptr_nonnull (cfg.format);
  d = disk_open (&cfg);
  ck_assert_msg (d != NULL, "disk_open: %s", last_error);
  return d;
}

static struct disk *d;          /* the disk of the current test */

static void
setup_type1 (void)
{
  d = open_disk ("T10-DIF-TYPE1-CRC", false, 0);
}

static void
teardown (void)
{
  disk_close (d);
  d = NULL;
}

/* Send LINE; the reply must be one line of JSON, an object with a
 * boolean "ok" that equals WANT_OK.  Returns the parsed reply. */
static json_t *
ask (const char *line, bool want_ok)
{
  json_error_t jerr;
  char *s = ctl_handle_line (d, line);
  json_t *j, *ok;

  ck_assert_ptr_nonnull (s);
  ck_assert_msg (strchr (s, '\n') == NULL, "reply has a newline: %s", s);
  j = json_loads (s, 0, &jerr);
  ck_assert_msg (j != NULL, "reply to '%s' is not JSON (%s): %s",
                 line, jerr.text, s);
  ok = json_object_get (j, "ok");
  ck_assert_msg (json_is_boolean (ok), "no boolean ok in %s", s);
  ck_assert_msg (json_is_true (ok) == want_ok,
                 "request '%s': wanted ok=%d, got %s", line, want_ok, s);
  if (!want_ok)
    ck_assert_msg (json_is_string (json_object_get (j, "error")) &&
                   strlen (json_string_value (json_object_get (j, "error")))
                   > 5, "error reply without a message: %s", s);
  free (s);
  return j;
}

/* The error message of a failed request (which must fail). */
static char *
ask_error (const char *line)
{
  json_t *j = ask (line, false);
  char *e = strdup (json_string_value (json_object_get (j, "error")));

  json_decref (j);
  return e;
}

/* Assert that the error for LINE contains NEEDLE. */
static void
expect_error (const char *line, const char *needle)
{
  char *e = ask_error (line);

  ck_assert_msg (strstr (e, needle) != NULL,
                 "request '%s': error '%s' does not mention '%s'",
                 line, e, needle);
  free (e);
}

/* An integer at a path of keys (NULL-terminated). */
static json_int_t
jint (json_t *j, ...)
{
  const char *key;
  va_list ap;

  va_start (ap, j);
  while ((key = va_arg (ap, const char *)) != NULL)
    j = json_object_get (j, key);
  va_end (ap);
  ck_assert_msg (json_is_integer (j), "not an integer");
  return json_integer_value (j);
}

/* The counters object of a "counters" reply (REPLY keeps it alive). */
static json_t *
counters (json_t **reply)
{
  *reply = ask ("counters", true);
  return json_object_get (*reply, "counters");
}

static const struct disk_io io_data = { .conn = 7, .view = PROFILE_VIEW_DATA };
static const struct disk_io io_dif = { .conn = 9, .view = PROFILE_VIEW_DIF };

/* Write NBLOCKS extended blocks with correct PI at LBA on the dif view,
 * with block BAD (if < NBLOCKS) given a wrong guard.  Returns the
 * result of disk_pwrite. */
static int
write_dif (uint64_t lba, uint64_t nblocks, uint64_t bad)
{
  uint32_t ext = pi_ext_size (&d->pi);
  uint8_t *buf = malloc (nblocks * ext);
  uint64_t i;
  int r;

  ck_assert_ptr_nonnull (buf);
  for (i = 0; i < nblocks * ext; i++)
    buf[i] = (uint8_t) (i * 7 + lba);
  pi_generate_ext (&d->pi, buf, nblocks, lba);
  if (bad < nblocks)
    buf[bad * ext + INTERVAL] ^= 0x40;     /* top byte of the guard */
  r = disk_pwrite (d, &io_dif, buf, nblocks * ext, lba * ext, false);
  free (buf);
  return r;
}

/* ---- verbs ---- */

START_TEST (test_help)
{
  static const char *const want[] = {
    "profile", "counters", "events", "reset", "inject", "help"
  };
  json_t *j = ask ("help", true);
  json_t *verbs = json_object_get (j, "verbs");
  size_t i, k;

  ck_assert (json_is_array (verbs));
  ck_assert_uint_eq (json_array_size (verbs), 6);
  for (i = 0; i < 6; i++) {
    bool found = false;
    for (k = 0; k < json_array_size (verbs); k++) {
      json_t *v = json_array_get (verbs, k);
      if (strcmp (json_string_value (json_object_get (v, "verb")),
                  want[i]) == 0) {
        found = true;
        ck_assert (json_is_string (json_object_get (v, "usage")));
        ck_assert (json_is_string (json_object_get (v, "description")));
      }
    }
    ck_assert_msg (found, "help does not list %s", want[i]);
  }
  json_decref (j);
}
END_TEST

START_TEST (test_profile)
{
  json_t *j = ask ("profile", true);
  json_t *views = json_object_get (j, "views");
  json_t *data = json_object_get (views, "data");
  json_t *dif = json_object_get (views, "dif");

  ck_assert (json_is_true (json_object_get (j, "stable_writes")));
  ck_assert_int_eq (jint (j, "size", NULL), SIZE);
  ck_assert_int_eq (jint (j, "nblocks", NULL), SIZE / INTERVAL);
  ck_assert_str_eq (json_string_value (json_object_get (j, "store")),
                    "memory");
  ck_assert (json_is_false (json_object_get (j, "read_only")));

  ck_assert_str_eq (json_string_value (json_object_get (data, "profile")),
                    "stabledif/1 view=data format=T10-DIF-TYPE1-CRC "
                    "interval=512 tuple=8 stable_writes=1");
  ck_assert_str_eq (json_string_value (json_object_get (dif, "profile")),
                    "stabledif/1 view=dif format=T10-DIF-TYPE1-CRC "
                    "interval=512 tuple=8 stable_writes=1");
  ck_assert_str_eq (json_string_value (json_object_get (dif, "view")), "dif");
  ck_assert_str_eq (json_string_value (json_object_get (data, "view")),
                    "data");
  ck_assert_str_eq (json_string_value (json_object_get (dif, "format")),
                    "T10-DIF-TYPE1-CRC");
  ck_assert_int_eq (jint (dif, "interval", NULL), INTERVAL);
  ck_assert_int_eq (jint (dif, "tuple", NULL), 8);
  ck_assert (json_is_true (json_object_get (dif, "stable_writes")));
  ck_assert_int_eq (jint (data, "size", NULL), SIZE);
  ck_assert_int_eq (jint (dif, "size", NULL),
                    (SIZE / INTERVAL) * (INTERVAL + 8));
  ck_assert_ptr_null (json_object_get (dif, "app_tag"));
  json_decref (j);
}
END_TEST

START_TEST (test_profile_none)
{
  json_t *j, *dif;

  disk_close (d);
  d = open_disk (NULL, false, 0);
  j = ask ("profile", true);
  ck_assert (json_is_false (json_object_get (j, "stable_writes")));
  dif = json_object_get (json_object_get (j, "views"), "dif");
  ck_assert_int_eq (jint (dif, "tuple", NULL), 0);
  ck_assert (json_is_false (json_object_get (dif, "stable_writes")));
  ck_assert_str_eq (json_string_value (json_object_get (dif, "profile")),
                    "stabledif/1 view=dif format=none interval=512 tuple=0 "
                    "stable_writes=0");
  json_decref (j);
}
END_TEST

START_TEST (test_counters_move)
{
  uint8_t buf[2 * INTERVAL];
  json_t *r, *c;

  c = counters (&r);
  ck_assert_int_eq (jint (c, "requests", "data", "write", NULL), 0);
  ck_assert_int_eq (jint (c, "blocks", "generated", NULL), 0);
  ck_assert_int_eq (jint (r, "last_seq", NULL), 0);
  ck_assert_uint_eq (json_array_size (json_object_get (r,
                                                       "failures_by_conn")),
                     0);
  json_decref (r);

  memset (buf, 0x5a, sizeof buf);
  ck_assert_int_eq (disk_pwrite (d, &io_data, buf, sizeof buf, 0, false), 0);
  ck_assert_int_eq (disk_pread (d, &io_data, buf, sizeof buf, 0), 0);
  ck_assert_int_eq (write_dif (4, 3, 99), 0);

  c = counters (&r);
  ck_assert_int_eq (jint (c, "requests", "data", "write", NULL), 1);
  ck_assert_int_eq (jint (c, "bytes", "data", "write", NULL), sizeof buf);
  ck_assert_int_eq (jint (c, "requests", "data", "read", NULL), 1);
  ck_assert_int_eq (jint (c, "requests", "dif", "write", NULL), 1);
  ck_assert_int_eq (jint (c, "bytes", "dif", "write", NULL),
                    3 * (INTERVAL + 8));
  ck_assert_int_eq (jint (c, "blocks", "generated", NULL), 2);
  ck_assert_int_ge (jint (c, "blocks", "verified", NULL), 2 + 3);
  ck_assert_int_eq (jint (c, "writes_rejected", NULL), 0);
  ck_assert_int_eq (jint (c, "write_errors", "guard", NULL), 0);
  json_decref (r);
}
END_TEST

START_TEST (test_events_rejected_write)
{
  json_t *r, *c, *evs, *ev, *by;
  char line[64];
  uint64_t seq;

  /* Blocks 10..13, block 12 (index 2) with a bad guard: rejected. */
  ck_assert_int_eq (write_dif (10, 4, 2), -1);
  ck_assert_int_eq (errno, EIO);

  c = counters (&r);
  ck_assert_int_eq (jint (c, "writes_rejected", NULL), 1);
  ck_assert_int_eq (jint (c, "write_errors", "guard", NULL), 1);
  ck_assert_int_eq (jint (r, "last_seq", NULL), 1);
  by = json_object_get (r, "failures_by_conn");
  ck_assert_uint_eq (json_array_size (by), 1);
  ck_assert_int_eq (jint (json_array_get (by, 0), "conn", NULL), 9);
  ck_assert_int_eq (jint (json_array_get (by, 0), "write_errors", NULL), 1);
  ck_assert_int_eq (jint (json_array_get (by, 0), "read_errors", NULL), 0);
  json_decref (r);

  for (int form = 0; form < 2; form++) {
    r = ask (form ? "events 0" : "events", true);
    evs = json_object_get (r, "events");
    ck_assert_uint_eq (json_array_size (evs), 1);
    ev = json_array_get (evs, 0);
    ck_assert_int_eq (jint (ev, "seq", NULL), 1);
    ck_assert_int_eq (jint (ev, "lba", NULL), 12);
    ck_assert_int_eq (jint (ev, "conn", NULL), 9);
    ck_assert_str_eq (json_string_value (json_object_get (ev, "view")), "dif");
    ck_assert_str_eq (json_string_value (json_object_get (ev, "op")), "write");
    ck_assert_str_eq (json_string_value (json_object_get (ev, "check")),
                      "guard");
    ck_assert_int_eq (jint (ev, "offset", NULL), 10 * (INTERVAL + 8));
    ck_assert_int_eq (jint (ev, "length", NULL), 4 * (INTERVAL + 8));
    /* expected is the guard of the data, actual the one we corrupted:
     * they differ exactly in the bit we flipped (0x40 of the top byte). */
    {
      uint64_t e = strtoull (json_string_value (json_object_get (ev,
                                                                 "expected")),
                             NULL, 16);
      uint64_t a = strtoull (json_string_value (json_object_get (ev,
                                                                 "actual")),
                             NULL, 16);
      ck_assert_uint_eq (e ^ a, 0x4000);
    }
    ck_assert_int_eq (jint (r, "next", NULL), 1);
    ck_assert_int_eq (jint (r, "missed", NULL), 0);
    ck_assert (json_is_false (json_object_get (r, "more")));
    json_decref (r);
  }

  /* Nothing after the newest. */
  r = ask ("events 1", true);
  ck_assert_uint_eq (json_array_size (json_object_get (r, "events")), 0);
  ck_assert_int_eq (jint (r, "next", NULL), 1);
  json_decref (r);

  /* A SINCE from the future (another server) resynchronises. */
  r = ask ("events 1000", true);
  ck_assert_uint_eq (json_array_size (json_object_get (r, "events")), 0);
  ck_assert_int_eq (jint (r, "next", NULL), 1);
  json_decref (r);

  /* Hex works too. */
  r = ask ("events 0x0", true);
  ck_assert_uint_eq (json_array_size (json_object_get (r, "events")), 1);
  seq = jint (json_array_get (json_object_get (r, "events"), 0), "seq",
              NULL);
  json_decref (r);
  snprintf (line, sizeof line, "events %" PRIu64, seq);
  r = ask (line, true);
  ck_assert_uint_eq (json_array_size (json_object_get (r, "events")), 0);
  json_decref (r);
}
END_TEST

START_TEST (test_reset)
{
  json_t *r, *c, *p1, *p2;
  char *s1, *s2;

  p1 = ask ("profile", true);
  ck_assert_int_eq (write_dif (0, 2, 0), -1);
  ck_assert_int_eq (write_dif (0, 2, 99), 0);

  r = ask ("reset", true);
  json_decref (r);
  c = counters (&r);
  ck_assert_int_eq (jint (c, "writes_rejected", NULL), 0);
  ck_assert_int_eq (jint (c, "write_errors", "guard", NULL), 0);
  ck_assert_int_eq (jint (c, "requests", "dif", "write", NULL), 0);
  ck_assert_int_eq (jint (c, "blocks", "verified", NULL), 0);
  /* The newest sequence number is kept: numbering continues. */
  ck_assert_int_eq (jint (r, "last_seq", NULL), 1);
  ck_assert_uint_eq (json_array_size (json_object_get (r,
                                                       "failures_by_conn")),
                     0);
  json_decref (r);

  r = ask ("events 0", true);
  ck_assert_uint_eq (json_array_size (json_object_get (r, "events")), 0);
  ck_assert_int_eq (jint (r, "next", NULL), 1);
  ck_assert_int_eq (jint (r, "missed", NULL), 1);      /* forgotten */
  json_decref (r);

  ck_assert_int_eq (write_dif (0, 1, 0), -1);
  r = ask ("events 0", true);
  ck_assert_uint_eq (json_array_size (json_object_get (r, "events")), 1);
  ck_assert_int_eq (jint (json_array_get (json_object_get (r, "events"), 0),
                          "seq", NULL), 2);
  json_decref (r);

  /* Reset touched neither the data nor the profile. */
  p2 = ask ("profile", true);
  s1 = json_dumps (p1, JSON_COMPACT | JSON_SORT_KEYS);
  s2 = json_dumps (p2, JSON_COMPACT | JSON_SORT_KEYS);
  ck_assert_str_eq (s1, s2);
  free (s1);
  free (s2);
  json_decref (p1);
  json_decref (p2);
}
END_TEST

/* Inject KIND at LBA 5 after writing it on the data view; the next data
 * read must fail with EIO and record CHECK. */
static void
inject_and_read (const char *kind, const char *check)
{
  uint8_t buf[INTERVAL];
  char line[64];
  json_t *r, *c, *ev;

  memset (buf, 0xa5, sizeof buf);
  ck_assert_int_eq (disk_pwrite (d, &io_data, buf, INTERVAL, 5 * INTERVAL,
                                 false), 0);
  ck_assert_int_eq (disk_pread (d, &io_data, buf, INTERVAL, 5 * INTERVAL), 0);

  snprintf (line, sizeof line, "inject %s 5", kind);
  r = ask (line, true);
  ck_assert_str_eq (json_string_value (json_object_get (r, "kind")), kind);
  ck_assert_int_eq (jint (r, "lba", NULL), 5);
  json_decref (r);

  ck_assert_int_eq (disk_pread (d, &io_data, buf, INTERVAL, 5 * INTERVAL), -1);
  ck_assert_int_eq (errno, EIO);
  /* Reproducible: the same failure every time. */
  ck_assert_int_eq (disk_pread (d, &io_data, buf, INTERVAL, 5 * INTERVAL), -1);

  c = counters (&r);
  ck_assert_int_eq (jint (c, "injections", NULL), 1);
  ck_assert_int_eq (jint (c, "reads_failed", NULL), 2);
  ck_assert_int_eq (jint (c, "read_errors", check, NULL), 2);
  json_decref (r);

  r = ask ("events", true);
  ck_assert_uint_eq (json_array_size (json_object_get (r, "events")), 2);
  ev = json_array_get (json_object_get (r, "events"), 0);
  ck_assert_int_eq (jint (ev, "lba", NULL), 5);
  ck_assert_int_eq (jint (ev, "conn", NULL), 7);
  ck_assert_str_eq (json_string_value (json_object_get (ev, "check")), check);
  ck_assert_str_eq (json_string_value (json_object_get (ev, "op")), "read");
  ck_assert_str_eq (json_string_value (json_object_get (ev, "view")), "data");
  ck_assert_str_ne (json_string_value (json_object_get (ev, "expected")),
                    json_string_value (json_object_get (ev, "actual")));
  json_decref (r);

  /* Other blocks are untouched. */
  ck_assert_int_eq (disk_pread (d, &io_data, buf, INTERVAL, 4 * INTERVAL), 0);
  ck_assert_int_eq (disk_pread (d, &io_data, buf, INTERVAL, 6 * INTERVAL), 0);
}

START_TEST (test_inject_data)
{
  inject_and_read ("data", "guard");
}
END_TEST

START_TEST (test_inject_guard)
{
  inject_and_read ("guard", "guard");
}
END_TEST

START_TEST (test_inject_ref)
{
  inject_and_read ("ref", "ref");
}
END_TEST

START_TEST (test_inject_app)
{
  disk_close (d);
  d = open_disk ("T10-DIF-TYPE1-CRC", true, 0x1234);
  inject_and_read ("app", "app");
}
END_TEST

START_TEST (test_inject_unwritten_block)
{
  uint8_t buf[INTERVAL];

  /* A never-written block escapes checking; inject must still make its
   * next read fail. */
  json_decref (ask ("inject guard 63", true));
  ck_assert_int_eq (disk_pread (d, &io_data, buf, INTERVAL, 63 * INTERVAL),
                    -1);
  ck_assert_int_eq (errno, EIO);
}
END_TEST

START_TEST (test_inject_errors)
{
  json_t *r, *c;

  expect_error ("inject data 64", "out of range");
  expect_error ("inject data 64", "64 blocks");
  expect_error ("inject guard 18446744073709551615", "out of range");
  expect_error ("inject guard 18446744073709551616", "too large");
  expect_error ("inject guard 99999999999999999999999999", "too large");
  expect_error ("inject guard 0xffffffffffffffffff", "too large");
  expect_error ("inject guard -1", "not a number");
  expect_error ("inject guard +1", "not a number");
  expect_error ("inject guard 1x", "not a number");
  expect_error ("inject guard 0x", "not a number");
  expect_error ("inject guard 0xg", "not a number");
  expect_error ("inject guard 1.5", "not a number");
  expect_error ("inject bogus 1", "unknown kind");
  expect_error ("inject Data 1", "unknown kind");
  expect_error ("inject data", "missing");
  expect_error ("inject", "missing");
  expect_error ("inject data 1 2", "too many");
  expect_error ("inject app 1", "app-tag");    /* no app tag here */

  c = counters (&r);
  ck_assert_int_eq (jint (c, "injections", NULL), 0);
  json_decref (r);

  /* Type 3 does not check ref tags; none has no PI at all. */
  disk_close (d);
  d = open_disk ("T10-DIF-TYPE3-CRC", false, 0);
  expect_error ("inject ref 1", "ref tag");
  json_decref (ask ("inject guard 0x3f", true));
  disk_close (d);
  d = open_disk (NULL, false, 0);
  expect_error ("inject data 1", "format none");
  expect_error ("inject guard 1", "format none");
}
END_TEST

/* ---- bad input ---- */

START_TEST (test_bad_requests)
{
  static const char *const verbs[] = {
    "profile", "counters", "reset", "help"
  };
  char line[64];
  size_t i;

  expect_error ("", "empty");
  expect_error ("   ", "empty");
  expect_error ("\t \t", "empty");
  expect_error ("\r", "empty");
  expect_error ("frobnicate", "unknown verb 'frobnicate'");
  expect_error ("frobnicate", "(verbs: profile, counters, events, reset, "
                "inject, help)");
  expect_error ("inject bogus 1", "(kinds: data, guard, app, ref)");
  expect_error ("PROFILE", "unknown verb");
  expect_error ("{\"verb\":\"profile\"}", "unknown verb");
  for (i = 0; i < sizeof verbs / sizeof verbs[0]; i++) {
    snprintf (line, sizeof line, "%s x", verbs[i]);
    expect_error (line, "too many arguments");
  }
  expect_error ("events 1 2", "too many arguments");
  expect_error ("events a b c d e f", "too many arguments");
  expect_error ("events x", "bad SINCE");
  expect_error ("events -1", "bad SINCE");
  expect_error ("events 18446744073709551616", "too large");
  expect_error ("events 184467440737095516150000000000", "too large");

  /* Accepted spellings: extra blanks, tabs, a trailing CR. */
  json_decref (ask ("  counters  ", true));
  json_decref (ask ("\tevents\t0\t", true));
  json_decref (ask ("help\r", true));
  json_decref (ask ("events 18446744073709551615", true));
}
END_TEST

START_TEST (test_non_utf8)
{
  char *e;

  /* The reply must still be valid JSON (json_loads rejects bad UTF-8),
   * with the bad bytes shown escaped. */
  e = ask_error ("\xff\xfe\x80 oops");
  ck_assert_msg (strstr (e, "\\xff\\xfe\\x80") != NULL, "error: %s", e);
  free (e);
  e = ask_error ("events \xc3\x28");
  ck_assert_msg (strstr (e, "\\xc3(") != NULL, "error: %s", e);
  free (e);
  e = ask_error ("inject \xe2\x82 1");
  ck_assert_msg (strstr (e, "unknown kind") != NULL, "error: %s", e);
  free (e);
  e = ask_error ("inject data \x01\x1b[2J");
  ck_assert_msg (strstr (e, "\\x01\\x1b[2J") != NULL, "error: %s", e);
  free (e);
  /* Valid UTF-8 that is not ASCII is not a verb either. */
  expect_error ("h\xc3\xa9lp", "unknown verb");
}
END_TEST

START_TEST (test_long_tokens)
{
  char *line = malloc (CTL_LINE_MAX + 1), *e;

  /* A maximal line: the error echoes only a short, escaped prefix. */
  memset (line, 'A', CTL_LINE_MAX);
  line[CTL_LINE_MAX] = '\0';
  e = ask_error (line);
  ck_assert_msg (strlen (e) < 300, "error echoes too much: %zu bytes",
                 strlen (e));
  /* Exactly the first 64 bytes, then "...". */
  ck_assert_msg (strstr (e, "'AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
                         "AAAAAAAAAAAA...'") != NULL, "error: %s", e);
  free (e);
  memcpy (line, "events ", 7);
  memset (line + 7, '9', CTL_LINE_MAX - 7);
  expect_error (line, "too large");
  memcpy (line, "events 0", 8);
  memset (line + 8, '0', CTL_LINE_MAX - 8);
  json_decref (ask (line, true));       /* 000...0 is 0 */
  free (line);
}
END_TEST

/* Deterministic noise: no line may crash, hang, leak or give anything
 * but a one-line JSON reply; none may change the profile. */
START_TEST (test_fuzz_lines)
{
  static const char *const words[] = {
    "profile", "counters", "events", "reset", "inject", "help", "data",
    "guard", "app", "ref", "0", "1", "63", "64", "0x3f", "-1",
    "18446744073709551615", "\xff", " ", "\t", "\r",
  };
  json_t *before = ask ("profile", true), *after;
  uint32_t x = 12345;
  char line[256], *s1, *s2;
  int i;

  for (i = 0; i < 3000; i++) {
    size_t len = 0, ntok, t;
    json_error_t jerr;
    char *reply;
    json_t *j;

    x = x * 1103515245 + 12345;
    ntok = (x >> 16) % 5;
    for (t = 0; t < ntok && len < 200; t++) {
      x = x * 1103515245 + 12345;
      if ((x >> 24) % 4 == 0) {           /* random bytes */
        size_t n = (x >> 8) % 8, k;
        for (k = 0; k < n; k++) {
          x = x * 1103515245 + 12345;
          line[len++] = (char) ((x >> 16) % 255 + 1);
        }
      }
      else {
        const char *w = words[(x >> 16) % (sizeof words / sizeof words[0])];
        len += snprintf (line + len, sizeof line - len, "%s", w);
      }
      line[len++] = ' ';
    }
    line[len] = '\0';
    /* The socket never passes a newline inside a line. */
    for (t = 0; t < len; t++)
      if (line[t] == '\n')
        line[t] = ' ';
    reply = ctl_handle_line (d, line);
    ck_assert_ptr_nonnull (reply);
    ck_assert (strchr (reply, '\n') == NULL);
    j = json_loads (reply, 0, &jerr);
    ck_assert_msg (j != NULL, "not JSON for fuzz line %d: %s", i, reply);
    ck_assert (json_is_boolean (json_object_get (j, "ok")));
    json_decref (j);
    free (reply);
  }

  after = ask ("profile", true);
  s1 = json_dumps (before, JSON_COMPACT | JSON_SORT_KEYS);
  s2 = json_dumps (after, JSON_COMPACT | JSON_SORT_KEYS);
  ck_assert_str_eq (s1, s2);
  free (s1);
  free (s2);
  json_decref (before);
  json_decref (after);
}
END_TEST

START_TEST (test_events_paging)
{
  json_t *r;
  uint64_t since = 0, total = 0;
  int i, pages = 0;

  /* More failures than one reply carries (the ring keeps 1024). */
  for (i = 0; i < 1100; i++)
    ck_assert_int_eq (write_dif (i % 64, 1, 0), -1);

  do {
    char line[64];
    json_t *evs;

    snprintf (line, sizeof line, "events %" PRIu64, since);
    r = ask (line, true);
    evs = json_object_get (r, "events");
    ck_assert_uint_le (json_array_size (evs), CTL_EVENTS_MAX);
    if (json_array_size (evs) > 0)
      ck_assert_int_eq (jint (json_array_get (evs, 0), "seq", NULL),
                        since ? since + 1 : 1100 - 1024 + 1);
    if (since == 0)
      ck_assert_int_eq (jint (r, "missed", NULL), 1100 - 1024);
    total += json_array_size (evs);
    since = jint (r, "next", NULL);
    pages++;
    if (!json_is_true (json_object_get (r, "more"))) {
      json_decref (r);
      break;
    }
    json_decref (r);
  } while (pages < 10);
  ck_assert_int_eq (pages, 2);
  ck_assert_uint_eq (total, 1024);
  ck_assert_uint_eq (since, 1100);
}
END_TEST

START_TEST (test_crc64_profile_and_inject)
{
  struct disk_config cfg = {
    .size = 16 * 4096,
    .format = pi_format_lookup ("EXT-DIF-TYPE1-CRC64"),
    .interval = 4096,
    .has_app = true,
    .app_tag = 0x1234,
    .app_mask = 0xff00,
    .error = test_error,
  };
  uint8_t buf[4096];
  json_t *j, *dif;

  disk_close (d);
  d = disk_open (&cfg);
  ck_assert_msg (d != NULL, "%s", last_error);
  j = ask ("profile", true);
  dif = json_object_get (json_object_get (j, "views"), "dif");
  ck_assert_int_eq (jint (dif, "tuple", NULL), 16);
  ck_assert_int_eq (jint (dif, "app_tag", NULL), 0x1234);
  ck_assert_int_eq (jint (dif, "app_mask", NULL), 0xff00);
  ck_assert_int_eq (jint (dif, "size", NULL), 16 * (4096 + 16));
  json_decref (j);

  json_decref (ask ("inject app 15", true));
  ck_assert_int_eq (disk_pread (d, &io_data, buf, 4096, 15 * 4096), -1);
  json_decref (ask ("inject data 2", true));
  ck_assert_int_eq (disk_pread (d, &io_data, buf, 4096, 2 * 4096), -1);
  j = ask ("events", true);
  ck_assert_uint_eq (json_array_size (json_object_get (j, "events")), 2);
  /* A 64-bit guard shows in full. */
  ck_assert_int_ge (strlen (json_string_value
                            (json_object_get (json_array_get
                                              (json_object_get (j, "events"),
                                               1), "expected"))), 2);
  json_decref (j);
  expect_error ("inject ref 16", "out of range");
}
END_TEST

static Suite *
ctl_suite (void)
{
  Suite *s = suite_create ("ctl");
  TCase *tc = tcase_create ("handle_line");

  tcase_add_checked_fixture (tc, setup_type1, teardown);
  tcase_add_test (tc, test_help);
  tcase_add_test (tc, test_profile);
  tcase_add_test (tc, test_profile_none);
  tcase_add_test (tc, test_counters_move);
  tcase_add_test (tc, test_events_rejected_write);
  tcase_add_test (tc, test_reset);
  tcase_add_test (tc, test_inject_data);
  tcase_add_test (tc, test_inject_guard);
  tcase_add_test (tc, test_inject_ref);
  tcase_add_test (tc, test_inject_app);
  tcase_add_test (tc, test_inject_unwritten_block);
  tcase_add_test (tc, test_inject_errors);
  tcase_add_test (tc, test_bad_requests);
  tcase_add_test (tc, test_non_utf8);
  tcase_add_test (tc, test_long_tokens);
  tcase_add_test (tc, test_fuzz_lines);
  tcase_add_test (tc, test_events_paging);
  tcase_add_test (tc, test_crc64_profile_and_inject);
  suite_add_tcase (s, tc);
  return s;
}

int
main (void)
{
  SRunner *sr = srunner_create (ctl_suite ());
  int failed;

  srunner_run_all (sr, CK_NORMAL);
  failed = srunner_ntests_failed (sr);
  srunner_free (sr);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
