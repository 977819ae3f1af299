/* SPDX-License-Identifier: BSD-3-Clause */
/* stabledif fuzz target: the profile parser (common/profile.c).
 *
 * The input, up to its first NUL, is a profile line.  Whatever it is, the
 * parser must not crash and must either fail with a non-empty message or
 * give a consistent profile.  A profile that parses must format into a
 * line that parses back to the same profile and formats to the same line
 * (round trip), and profile_format must refuse a buffer one byte short.
 */
#include <config.h>

#include <stdlib.h>
#include <string.h>

#include "fuzz-common.h"
#include "profile.h"

/* Abort unless A and B are the same profile, field by field. */
static void
profile_same (const struct profile *a, const struct profile *b,
              const char *line)
{
  FUZZ_ASSERT (a->view == b->view && a->format == b->format &&
               a->interval == b->interval && a->tuple == b->tuple &&
               a->stable_writes == b->stable_writes &&
               a->has_app == b->has_app && a->app_tag == b->app_tag &&
               a->app_mask == b->app_mask,
               "round trip changed the profile: '%s'", line);
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  struct profile p, q;
  char err[256], line[PROFILE_LINE_MAX], line2[PROFILE_LINE_MAX];
  char tiny[8];
  char *s;
  int n, n2, r;

  s = malloc (size + 1);
  FUZZ_ASSERT (s != NULL, "out of memory");
  memcpy (s, data, size);
  s[size] = '\0';

  r = profile_parse (s, &p, err, sizeof err);
  FUZZ_ASSERT (r == 0 || r == -1, "profile_parse returned %d", r);
  /* Without an error buffer, or with a tiny one, the answer is the same
   * and the message is cut, not overrun. */
  FUZZ_ASSERT (profile_parse (s, &q, NULL, 0) == r,
               "profile_parse depends on the error buffer");
  memset (tiny, 'x', sizeof tiny);
  FUZZ_ASSERT (profile_parse (s, &q, tiny, 5) == r &&
               memchr (tiny, '\0', 5) != NULL && tiny[5] == 'x',
               "profile_parse overran a 5-byte error buffer");
  free (s);

  if (r == -1) {
    FUZZ_ASSERT (err[0] != '\0' && memchr (err, '\0', sizeof err) != NULL,
                 "parse failed without a message");
    FUZZ_ASSERT (strncmp (err, "profile: ", 9) == 0,
                 "error message without context: '%s'", err);
    return 0;
  }

  /* What the parser promises about a profile it accepts. */
  FUZZ_ASSERT (p.format != NULL, "parsed profile without a format");
  FUZZ_ASSERT (p.tuple == p.format->tuple_size,
               "tuple %u does not match format %s", (unsigned) p.tuple,
               p.format->name);
  FUZZ_ASSERT (p.stable_writes == (p.format->guard != PI_GUARD_NONE),
               "stable_writes does not follow format %s", p.format->name);
  FUZZ_ASSERT (pi_interval_valid (p.format, p.interval, NULL),
               "interval %u invalid for %s", (unsigned) p.interval,
               p.format->name);
  FUZZ_ASSERT (p.view == PROFILE_VIEW_DATA || p.view == PROFILE_VIEW_DIF,
               "bad view %d", (int) p.view);
  FUZZ_ASSERT (!p.has_app || p.format->guard != PI_GUARD_NONE,
               "app tag accepted for format %s", p.format->name);

  n = profile_format (&p, line, sizeof line);
  FUZZ_ASSERT (n > 0 && (size_t) n < sizeof line &&
               strlen (line) == (size_t) n,
               "profile_format returned %d", n);
  FUZZ_ASSERT (profile_format (&p, line2, (size_t) n) == -1,
               "profile_format accepted a buffer one byte short");
  FUZZ_ASSERT (profile_format (&p, line2, (size_t) n + 1) == n,
               "profile_format failed with exactly enough room");

  FUZZ_ASSERT (profile_parse (line, &q, err, sizeof err) == 0,
               "formatted profile '%s' does not parse: %s", line, err);
  profile_same (&p, &q, line);
  n2 = profile_format (&q, line2, sizeof line2);
  FUZZ_ASSERT (n2 == n && strcmp (line, line2) == 0,
               "round trip changed the line: '%s' -> '%s'", line, line2);
  return 0;
}
