/* SPDX-License-Identifier: BSD-3-Clause */
/* stabledif fuzz targets: replay inputs without libFuzzer.
 *
 *   TARGET-replay FILE|DIR...
 *
 * Linked (by the ordinary compiler, no clang needed) with one fuzz target,
 * it calls LLVMFuzzerTestOneInput once on each FILE and on every regular
 * file in each DIR (in name order, skipping names that start with '.'),
 * so "make check" runs the seed corpora and the saved regressions.  A
 * target that finds a bug aborts, and so does this program.  Exits 0
 * after replaying everything, 1 if an argument cannot be read.
 */
#include <config.h>

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz-common.h"

/* Inputs larger than this are refused (libFuzzer's default -max_len is
 * far smaller; a huge file is a mistake). */
#define REPLAY_MAX (16 * 1024 * 1024)

/* Replay one file.  Returns 0, or -1 after reporting why it cannot be
 * read. */
static int
replay_file (const char *path)
{
  FILE *fp;
  uint8_t *buf;
  long len;
  size_t got;

  fp = fopen (path, "rb");
  if (fp == NULL) {
    fprintf (stderr, "replay: %s: %s\n", path, strerror (errno));
    return -1;
  }
  if (fseek (fp, 0, SEEK_END) == -1 || (len = ftell (fp)) < 0 ||
      fseek (fp, 0, SEEK_SET) == -1) {
    fprintf (stderr, "replay: %s: %s\n", path, strerror (errno));
    fclose (fp);
    return -1;
  }
  if (len > REPLAY_MAX) {
    fprintf (stderr, "replay: %s: larger than %d bytes\n", path, REPLAY_MAX);
    fclose (fp);
    return -1;
  }
  /* One byte more, so that an empty file still has a buffer. */
  buf = malloc ((size_t) len + 1);
  if (buf == NULL) {
    fprintf (stderr, "replay: %s: %s\n", path, strerror (ENOMEM));
    fclose (fp);
    return -1;
  }
  got = fread (buf, 1, (size_t) len, fp);
  if (got != (size_t) len || ferror (fp)) {
    fprintf (stderr, "replay: %s: short read\n", path);
    free (buf);
    fclose (fp);
    return -1;
  }
  fclose (fp);

  printf ("replay: %s (%ld bytes)\n", path, len);
  fflush (stdout);
  LLVMFuzzerTestOneInput (buf, (size_t) len);
  free (buf);
  return 0;
}

/* scandir filter: names not starting with '.'. */
static int
visible (const struct dirent *e)
{
  return e->d_name[0] != '.';
}

/* Replay every regular file in DIR; counts them into *COUNT.  Returns 0
 * or -1 after reporting an unreadable directory or file. */
static int
replay_dir (const char *dir, unsigned *count)
{
  struct dirent **names;
  char path[PATH_MAX];
  struct stat st;
  int n, i, r = 0;

  n = scandir (dir, &names, visible, alphasort);
  if (n < 0) {
    fprintf (stderr, "replay: %s: %s\n", dir, strerror (errno));
    return -1;
  }
  for (i = 0; i < n; i++) {
    if (r == 0) {
      if (snprintf (path, sizeof path, "%s/%s", dir, names[i]->d_name)
          >= (int) sizeof path) {
        fprintf (stderr, "replay: %s/%s: name too long\n", dir,
                 names[i]->d_name);
        r = -1;
      }
      else if (stat (path, &st) == -1) {
        fprintf (stderr, "replay: %s: %s\n", path, strerror (errno));
        r = -1;
      }
      else if (S_ISREG (st.st_mode)) {
        r = replay_file (path);
        if (r == 0)
          (*count)++;
      }
    }
    free (names[i]);
  }
  free (names);
  return r;
}

int
main (int argc, char *argv[])
{
  unsigned count = 0;
  struct stat st;
  int i;

  if (argc < 2) {
    fprintf (stderr, "usage: %s FILE|DIR...\n", argv[0]);
    return 1;
  }
  for (i = 1; i < argc; i++) {
    if (stat (argv[i], &st) == -1) {
      fprintf (stderr, "replay: %s: %s\n", argv[i], strerror (errno));
      return 1;
    }
    if (S_ISDIR (st.st_mode)) {
      if (replay_dir (argv[i], &count) == -1)
        return 1;
    }
    else {
      if (replay_file (argv[i]) == -1)
        return 1;
      count++;
    }
  }
  printf ("replay: %u inputs, all passed\n", count);
  return 0;
}
