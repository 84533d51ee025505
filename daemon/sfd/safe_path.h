/* Directories sfd writes into, opened so that no one else can steer them.
 *
 * A path is walked from "/" one component at a time with
 * openat(O_NOFOLLOW | O_DIRECTORY): a symbolic link anywhere on the way is
 * refused, and so is a component owned by anyone but this user or root, or
 * writable by group or others unless it is sticky and root's (like /tmp).
 * The caller keeps the descriptor and creates its files relative to it. */
#ifndef SF_SAFE_PATH_H
#define SF_SAFE_PATH_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* Missing components are made (with the mode given). */
#define SF_SAFE_DIR_CREATE 1u
/* The last component may be writable by group or others (a directory that
 * several producers share by design, like node_exporter's textfile
 * directory); every component above it is held to the rule. */
#define SF_SAFE_DIR_SHARED_LEAF 2u

/* Opens the directory at path (absolute, or relative to the working
 * directory) and returns its descriptor (O_CLOEXEC), or -errno. flags are
 * SF_SAFE_DIR_* bits. Refusals: -EPERM (another owner,
 * writable by others), -ELOOP (a symbolic link), -ENOTDIR (not a
 * directory); else the error of the component that failed. In every case
 * why names the component and the reason. */
int sf_safe_dir_open(const char *path, unsigned flags, mode_t mode, char *why, size_t whylen);

/* Whether a directory's status may hold this user's files: owned by uid or
 * root, and writable by no one else unless sticky and root's. 0, or -EPERM
 * with the reason in why. */
int sf_safe_dir_check(const char *component, uid_t uid, mode_t mode, uid_t owner, char *why,
                      size_t whylen);

#endif
