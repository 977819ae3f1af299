/* SPDX-License-Identifier: BSD-3-Clause */
/* stabledif: unit-test support: make a file or a directory unwritable
 * for the test process, and undo it (tests of read-only storage).
 */
#ifndef STABLEDIF_RO_PATH_H
#define STABLEDIF_RO_PATH_H

/* Make PATH unwritable for this process until ro_path_undo: a file, or
 * a directory together with the files in it.  As root, with a read-only
 * bind mount of PATH in a private mount namespace that the process
 * enters on first use (open for writing: EROFS; the permission bits do
 * not stop root); otherwise by clearing the write bits (EACCES).
 * Returns the errno an open for writing now fails with, or 0 if this
 * process can do neither (root without mount privileges: the caller
 * skips).  Fails the test (ck_assert) on any other error. */
int ro_path_make (const char *path);

/* Undo every ro_path_make, the latest first.  Safe to call when there
 * is nothing to undo (a fixture's teardown calls it). */
void ro_path_undo (void);

#endif /* STABLEDIF_RO_PATH_H */
