/* SPDX-License-Identifier: BSD-3-Clause */
/* stabledif: whole-buffer I/O on the file store's files (PATH, PATH.pi,
 * PATH.log): pread and pwrite repeated until the whole buffer is done or
 * the file ends, and the directory sync that makes a renamed file
 * durable.  Every function returns -1 with errno set on failure and
 * reports nothing: the caller knows what the bytes were for and reports
 * the error once, with that context.
 */
#ifndef STABLEDIF_STORE_FILE_IO_H
#define STABLEDIF_STORE_FILE_IO_H

#include <stddef.h>
#include <sys/types.h>

/* Read up to LEN bytes at OFF of FD into BUF, stopping early only at
 * the end of the file; EINTR is retried.  Returns the bytes read (fewer
 * than LEN: the file ended), or -1 with errno. */
ssize_t store_file_io_pread_upto (int fd, void *buf, size_t len, off_t off);

/* Read exactly LEN bytes at OFF of FD into BUF.  -1 with errno on
 * error; EIO if the file ends first (it was truncated behind our
 * back). */
int store_file_io_pread (int fd, void *buf, size_t len, off_t off);

/* Write exactly LEN bytes from BUF at OFF of FD; EINTR is retried.  With
 * RWF_FLAGS 0 with pwrite, else with pwritev2 and those flags (such as
 * RWF_DSYNC).  -1 with errno on error (EOPNOTSUPP or ENOSYS: the kernel
 * has no such flag, and nothing was written if it said so on the first
 * call, as it does). */
int store_file_io_pwrite (int fd, const void *buf, size_t len, off_t off,
                          int rwf_flags);

/* fsync the directory holding PATH, so that a file created or renamed in
 * it stays there after a crash.  -1 with errno. */
int store_file_io_sync_dir (const char *path);

#endif /* STABLEDIF_STORE_FILE_IO_H */
