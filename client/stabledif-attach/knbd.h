/* SPDX-License-Identifier: BSD-3-Clause */
/* stabledif: the Linux kernel's NBD driver (/dev/nbdN), for
 * stabledif-attach.
 *
 * The kernel does not do the NBD handshake itself: a client negotiates
 * in userspace, then hands the connected socket to the driver together
 * with what the handshake said (size, block size, transmission flags).
 * This file does the second half, over the driver's generic netlink
 * family "nbd" (Linux >= 4.12), plus the sysfs knobs around it:
 * /sys/module/nbd, /sys/block/nbdN/{pid,size,dev},
 * /sys/block/nbdN/queue/stable_writes.
 *
 * Every function that can fail returns -1 and writes one message into
 * ERR (ERRLEN bytes) that names the device, file or netlink command; the
 * caller reports it once.  Nothing here keeps state between calls.
 */
#ifndef STABLEDIF_KNBD_H
#define STABLEDIF_KNBD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* What the kernel needs to take over a negotiated connection. */
struct knbd_attach {
  int index;                    /* N of /dev/nbdN, >= 0 */
  int sock;                     /* connected socket, handshake finished
                                   (the kernel takes its own reference) */
  uint64_t size;                /* export size, bytes */
  uint64_t block_size;          /* logical block size, a power of two in
                                   512..4096 */
  uint64_t server_flags;        /* NBD transmission flags (NBD_FLAG_*) */
  const char *backend;          /* shown in /sys/block/nbdN/backend, or
                                   NULL */
};

/* Parse "/dev/nbdN" or "nbdN" into N.  Returns -1 (with a message) for
 * anything else. */
int knbd_parse_device (const char *name, int *index,
                       char *err, size_t errlen);

/* Make sure the nbd driver is loaded: if /sys/module/nbd is absent, run
 * "modprobe nbd" once and look again.  Returns -1 if it is still
 * missing. */
int knbd_module_ready (char *err, size_t errlen);

/* Whether /dev/nbdN exists and whether it is attached (the driver
 * creates /sys/block/nbdN/pid while a connection is configured). */
bool knbd_exists (int index);
bool knbd_attached (int index);

/* The lowest N whose /dev/nbdN exists and is not attached.  Returns -1
 * if every device is in use (or none exist). */
int knbd_find_free (int *index, char *err, size_t errlen);

/* Read or write /sys/block/nbdN/queue/stable_writes (0 or 1). */
int knbd_get_stable_writes (int index, int *value, char *err, size_t errlen);
int knbd_set_stable_writes (int index, int value, char *err, size_t errlen);

/* If /dev/nbdN or one of its partitions is mounted, return 1 and write
 * the first mount point into MNT (MNTLEN bytes); 0 if not mounted; -1 on
 * error. */
int knbd_mounted (int index, char *mnt, size_t mntlen,
                  char *err, size_t errlen);

/* NBD_CMD_CONNECT: give A->sock to /dev/nbdA->index.  The device is live
 * (readable, announced to udev) when this returns 0. */
int knbd_connect (const struct knbd_attach *a, char *err, size_t errlen);

/* NBD_CMD_DISCONNECT /dev/nbdN, then wait (bounded, TIMEOUT_MS) until
 * the driver has dropped the connection. */
int knbd_disconnect (int index, unsigned timeout_ms,
                     char *err, size_t errlen);

#endif /* STABLEDIF_KNBD_H */
