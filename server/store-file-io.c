/* SPDX-License-Identifier: BSD-3-Clause */
/* stabledif: whole-buffer I/O on the file store's files (see
 * store-file-io.h). */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#include "store-file-io.h"

ssize_t
store_file_io_pread_upto (int fd, void *buf, size_t len, off_t off)
{
  uint8_t *p = buf;
  size_t done = 0;

  while (done < len) {
    ssize_t r = pread (fd, p + done, len - done, off + (off_t) done);

    if (r == -1) {
      if (errno == EINTR)
        continue;
      return -1;
    }
    if (r == 0)
      break;
    done += r;
  }
  return done;
}

int
store_file_io_pread (int fd, void *buf, size_t len, off_t off)
{
  ssize_t r = store_file_io_pread_upto (fd, buf, len, off);

  if (r == -1)
    return -1;
  if ((size_t) r < len) {
    errno = EIO;
    return -1;
  }
  return 0;
}

int
store_file_io_pwrite (int fd, const void *buf, size_t len, off_t off,
                      int rwf_flags)
{
  const uint8_t *p = buf;

  while (len > 0) {
    ssize_t r;

    if (rwf_flags != 0) {
      struct iovec iov = { .iov_base = (void *) p, .iov_len = len };

      r = pwritev2 (fd, &iov, 1, off, rwf_flags);
    }
    else
      r = pwrite (fd, p, len, off);
    if (r == -1) {
      if (errno == EINTR)
        continue;
      return -1;
    }
    p += r;
    len -= r;
    off += r;
  }
  return 0;
}

int
store_file_io_sync_dir (const char *path)
{
  char *copy = strdup (path);
  int fd, r, e;

  if (copy == NULL)
    return -1;
  fd = open (dirname (copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  free (copy);
  if (fd == -1)
    return -1;
  r = fsync (fd);
  e = errno;
  close (fd);
  errno = e;
  return r;
}
