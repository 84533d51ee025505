/*
 * sfd's Prometheus textfile: replaces DIR/stagefrontier.prom atomically with
 * the text daemon/report/prom_text.c renders. It owns the file's name, mode
 * and the temporary-file-then-rename dance, inside a directory walked by
 * safe_path.c; never the format.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "prom_export.h"
#include "safe_path.h"

/* The collector reads only "*.prom": a hidden name without that suffix is
 * never picked up half written. */
#define PROM_TMP_PREFIX ".stagefrontier.prom.tmp."

/* A fresh temporary file in the held directory: O_EXCL | O_NOFOLLOW, so a
 * name someone else made (a link included) is never written through. */
static int create_tmp(int dirfd, char *name, size_t len)
{
    static unsigned serial;
    for (int tries = 0; tries < 16; tries++) {
        snprintf(name, len, PROM_TMP_PREFIX "%ld.%u", (long)getpid(), serial++);
        int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd >= 0 || errno != EEXIST)
            return fd < 0 ? -errno : fd;
    }
    return -EEXIST;
}

int sfd_prom_write(const char *dir, const struct sf_prom_daemon *daemon,
                   const struct sf_prom_job *jobs, size_t n)
{
    char tmp[64], why[512];
    bool have_tmp = false;
    FILE *f = NULL;
    int fd = -1, r, skipped;

    if (dir == NULL || dir[0] == '\0')
        return -EINVAL;
    /* Walked from "/" on every write: a component may be swapped between two.
     * The directory itself is shared with node_exporter's other producers. */
    int dirfd = sf_safe_dir_open(dir, SF_SAFE_DIR_SHARED_LEAF, 0, why, sizeof why);
    if (dirfd < 0)
        return dirfd;
    fd = create_tmp(dirfd, tmp, sizeof tmp);
    if (fd < 0) {
        r = fd;
        goto out;
    }
    have_tmp = true;
    /* Created 0600; node_exporter runs as another user. */
    if (fchmod(fd, 0644) < 0) {
        r = -errno;
        goto out;
    }
    f = fdopen(fd, "w");
    if (f == NULL) {
        r = -errno;
        goto out;
    }
    fd = -1; /* owned by f now */
    skipped = sf_prom_render(f, daemon, jobs, n);
    if (skipped < 0) {
        r = skipped;
        goto out;
    }
    if (fflush(f) != 0 || ferror(f)) {
        r = errno ? -errno : -EIO;
        goto out;
    }
    if (fsync(fileno(f)) < 0) {
        r = -errno;
        goto out;
    }
    r = fclose(f);
    f = NULL;
    if (r != 0) {
        r = -errno;
        goto out;
    }
    if (renameat(dirfd, tmp, dirfd, SFD_PROM_FILE_NAME) < 0) {
        r = -errno;
        goto out;
    }
    have_tmp = false; /* renamed: nothing to unlink */
    /* The new file is in place; a failed directory sync only weakens crash
     * durability, which a metrics file rewritten every window can live with. */
    (void)fsync(dirfd);
    r = skipped;
out:
    if (f)
        fclose(f);
    if (fd >= 0)
        close(fd);
    if (have_tmp)
        unlinkat(dirfd, tmp, 0);
    close(dirfd);
    return r;
}
