/* SPDX-License-Identifier: BSD-3-Clause */
/* stabledif: unit-test support: unwritable paths (see ro-path.h).
 */
#include <config.h>

#include <dirent.h>
#include <errno.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <check.h>

#include "ro-path.h"

/* What ro_path_make did, to be undone in reverse order. */
static struct ro_undo {
  char path[600];               /* the path changed */
  bool mounted;                 /* a bind mount on it (root), else ... */
  mode_t mode;                  /* ... its permission bits before */
} undo[64];
static size_t nundo;            /* entries of UNDO in use */

/* Whether this process has entered its own mount namespace. */
static bool private_mounts;

/* Remember P's permission bits and clear its write bits. */
static void
clear_write_bits (const char *p)
{
  struct stat st;

  ck_assert_uint_lt (nundo, sizeof undo / sizeof undo[0]);
  ck_assert_msg (stat (p, &st) == 0, "stat %s: %s", p, strerror (errno));
  snprintf (undo[nundo].path, sizeof undo[nundo].path, "%s", p);
  undo[nundo].mounted = false;
  undo[nundo].mode = st.st_mode & 07777;
  nundo++;
  ck_assert_int_eq (chmod (p, st.st_mode & 07555), 0);
}

int
ro_path_make (const char *path)
{
  struct stat st;

  ck_assert_msg (stat (path, &st) == 0, "stat %s: %s", path,
                 strerror (errno));
  if (geteuid () == 0) {
    /* (The type "none" is ignored by these mounts; valgrind wants one.) */
    if (!private_mounts) {
      if (unshare (CLONE_NEWNS) == -1 ||
          mount ("none", "/", "none", MS_REC | MS_PRIVATE, NULL) == -1)
        return 0;
      private_mounts = true;
    }
    if (mount (path, path, "none", MS_BIND, NULL) == -1)
      return 0;
    ck_assert_uint_lt (nundo, sizeof undo / sizeof undo[0]);
    snprintf (undo[nundo].path, sizeof undo[nundo].path, "%s", path);
    undo[nundo].mounted = true;
    nundo++;
    ck_assert_msg (mount ("none", path, "none",
                          MS_REMOUNT | MS_BIND | MS_RDONLY, NULL) == 0,
                   "remount %s read-only: %s", path, strerror (errno));
    return EROFS;
  }

  if (S_ISDIR (st.st_mode)) {
    DIR *dp = opendir (path);
    struct dirent *e;
    char p[600];

    ck_assert_ptr_nonnull (dp);
    while ((e = readdir (dp)) != NULL)
      if (strcmp (e->d_name, ".") != 0 && strcmp (e->d_name, "..") != 0) {
        snprintf (p, sizeof p, "%s/%s", path, e->d_name);
        clear_write_bits (p);
      }
    closedir (dp);
  }
  clear_write_bits (path);
  return EACCES;
}

void
ro_path_undo (void)
{
  while (nundo > 0) {
    struct ro_undo *u = &undo[--nundo];

    if (u->mounted) {
      if (umount2 (u->path, MNT_DETACH) == -1)
        fprintf (stderr, "umount %s: %s\n", u->path, strerror (errno));
    }
    else if (chmod (u->path, u->mode) == -1)
      fprintf (stderr, "chmod %s: %s\n", u->path, strerror (errno));
  }
}
