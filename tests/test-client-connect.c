/* SPDX-License-Identifier: BSD-3-Clause */
/* stabledif: what stabledif_connect_uri accepts and how it refuses.
 *
 *   test-client-connect [--policy P] [--unsafe] [--effective P]
 *                       URI EXPECT [SUBSTRING]
 *
 * EXPECT is "ok" or the errno name the connect must fail with (EPROTO,
 * EINVAL, EPERM, ...); the error message must then contain SUBSTRING.
 * On success the profile getters must work and, with --effective, the
 * resolved policy must be P.
 */
#include <config.h>

#include <inttypes.h>
#include <stdbool.h>

#include "test-client-util.h"

static const struct {
  const char *name;
  int value;
} errnos[] = {
  { "EPROTO", EPROTO }, { "EINVAL", EINVAL }, { "EPERM", EPERM },
  { "ENOENT", ENOENT }, { "ENOTSUP", ENOTSUP }, { "ECONNREFUSED",
                                                  ECONNREFUSED },
};

static int
errno_of (const char *name)
{
  size_t i;

  for (i = 0; i < sizeof errnos / sizeof errnos[0]; ++i)
    if (strcmp (errnos[i].name, name) == 0)
      return errnos[i].value;
  fprintf (stderr, "%s: unknown errno name %s\n", progname, name);
  exit (EXIT_FAILURE);
}

int
main (int argc, char *argv[])
{
  struct stabledif_handle *h;
  const char *policy = NULL, *effective = NULL;
  bool unsafe = false;
  int i = 1, r;

  progname = "test-client-connect";
  for (; i < argc && strncmp (argv[i], "--", 2) == 0; ++i) {
    if (strcmp (argv[i], "--unsafe") == 0)
      unsafe = true;
    else if (strcmp (argv[i], "--policy") == 0 && i + 1 < argc)
      policy = argv[++i];
    else if (strcmp (argv[i], "--effective") == 0 && i + 1 < argc)
      effective = argv[++i];
    else
      break;
  }
  if (argc - i < 2 || argc - i > 3) {
    fprintf (stderr, "usage: %s [--policy P] [--unsafe] [--effective P] "
             "URI EXPECT [SUBSTRING]\n", progname);
    exit (EXIT_FAILURE);
  }

  h = stabledif_create ();
  CHECK (h != NULL, "create");
  if (policy)
    OK (stabledif_set_policy (h, stabledif_policy_from_name (policy)));
  OK (stabledif_set_unsafe (h, unsafe));
  r = stabledif_connect_uri (h, argv[i]);

  if (strcmp (argv[i + 1], "ok") == 0) {
    CHECK (r == 0, "connect to %s failed", argv[i]);
    CHECK (stabledif_get_size (h) > 0, "size");
    CHECK (stabledif_get_format (h) != NULL, "format");
    if (effective)
      CHECK (stabledif_get_effective_policy (h) ==
             stabledif_policy_from_name (effective),
             "effective policy %s, want %s",
             stabledif_policy_name (stabledif_get_effective_policy (h)),
             effective);
    printf ("%s: connected: %s (policy %s)\n", progname,
            stabledif_get_profile (h),
            stabledif_policy_name (stabledif_get_effective_policy (h)));
  }
  else {
    int want = errno_of (argv[i + 1]);
    const char *msg;

    CHECK (r == -1, "connect to %s succeeded, expected %s", argv[i],
           argv[i + 1]);
    msg = stabledif_get_error ();
    printf ("%s: refused as expected: %s\n", progname, msg);
    CHECK (stabledif_get_errno () == want, "errno %d, want %s (%d)",
           stabledif_get_errno (), argv[i + 1], want);
    CHECK (strncmp (msg, "stabledif_connect_uri: ", 23) == 0,
           "message does not name the function");
    if (argc - i == 3)
      CHECK (strstr (msg, argv[i + 2]) != NULL, "message lacks \"%s\"",
             argv[i + 2]);
    /* A failed handle stays unusable, with a clear error. */
    FAILS (stabledif_get_size (h), ENOTCONN, "not connected");
  }
  stabledif_close (h);
  return EXIT_SUCCESS;
}
