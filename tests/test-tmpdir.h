/* SPDX-License-Identifier: BSD-3-Clause */
/* stabledif: one private temporary directory for a whole Check runner.
 *
 * In CK_FORK mode (the default) a test that fails stops in its child
 * process at the failed assertion, before any clean-up of its own, and
 * the directory it made would be left in /tmp.  A runner that calls
 * test_tmpdir_enter before srunner_run_all and test_tmpdir_leave after
 * it has every test make its files under a directory of its own ($TMPDIR
 * points there while the tests run; they all honour it), which
 * test_tmpdir_leave removes whatever the tests left in it. */
#ifndef STABLEDIF_TEST_TMPDIR_H
#define STABLEDIF_TEST_TMPDIR_H

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

/* The runner's directory; empty until test_tmpdir_enter. */
static char test_tmpdir[PATH_MAX];

/* Make NAME.XXXXXX under $TMPDIR (an absolute path) or /tmp and point
 * $TMPDIR at it.  Exits with 99 (automake's hard error) if it cannot. */
static inline void
test_tmpdir_enter (const char *name)
{
  const char *t = getenv ("TMPDIR");

  snprintf (test_tmpdir, sizeof test_tmpdir, "%s/%s.XXXXXX",
            t && t[0] == '/' ? t : "/tmp", name);
  if (mkdtemp (test_tmpdir) == NULL) {
    perror (test_tmpdir);
    exit (99);
  }
  if (setenv ("TMPDIR", test_tmpdir, 1) == -1) {
    perror ("setenv TMPDIR");
    exit (99);
  }
}

/* Remove the runner's directory and everything in it, also what tests
 * made unwritable.  Says so on stderr if it cannot (the tests' result
 * stands). */
static inline void
test_tmpdir_leave (void)
{
  char cmd[2 * PATH_MAX + 64];

  if (test_tmpdir[0] == '\0')
    return;
  snprintf (cmd, sizeof cmd, "chmod -R u+rwx '%s' && rm -rf '%s'",
            test_tmpdir, test_tmpdir);
  if (system (cmd) != 0)
    fprintf (stderr, "could not remove %s\n", test_tmpdir);
}

#endif /* STABLEDIF_TEST_TMPDIR_H */
