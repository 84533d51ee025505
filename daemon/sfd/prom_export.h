/*
 * Prometheus textfile export of sfd: writes DIR/stagefrontier.prom for the
 * node_exporter textfile collector, in the format of prom_text.h
 * (daemon/report). Owns only the atomic write; it never reads sfd state on its
 * own and never logs.
 */
#ifndef SFD_PROM_EXPORT_H
#define SFD_PROM_EXPORT_H

#include <stddef.h>
#include <stdint.h>

#include "prom_text.h"

#define SFD_PROM_FILE_NAME "stagefrontier.prom"

/* Writes DIR/stagefrontier.prom atomically: the text goes to a hidden
 * temporary file in DIR (a name the textfile collector ignores), which is
 * fsynced and then renamed over the final name. Readers see either the old
 * file or the new one, never a partial one.
 * The text is sf_prom_render's: label values are escaped; bytes the format cannot carry (control
 * bytes, invalid UTF-8) become '?' and ids are cut at 256 bytes. A job whose escaped id equals an
 * earlier one is left out, so one client cannot invalidate the file for every other job. Returns
 * the number of jobs left out (>= 0), -EINVAL on bad arguments (NULL or empty dir, no daemon, jobs
 * NULL with n > 0, a job without an id), -EPERM or -ELOOP when a component of DIR is not safe
 * (safe_path.h), or the -errno of the failing file operation; on failure
 * the previous file is left untouched and no temporary file remains. */
int sfd_prom_write(const char *dir, const struct sf_prom_daemon *daemon,
                   const struct sf_prom_job *jobs, size_t n);

#endif
