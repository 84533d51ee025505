/*
 * sfd's Prometheus textfile: replaces DIR/stagefrontier.prom atomically with
 * the text daemon/report/prom_text.c renders. It owns the file's name, mode
 * and the temporary-file-then-rename dance; never the format.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "prom_export.h"

/* The collector reads only "*.prom": a hidden name without that suffix is
 * never picked up half written. */
#define PROM_TMP_TEMPLATE ".stagefrontier.prom.tmp.XXXXXX"

static int fsync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int r = 0;

    if (fd < 0)
        return -errno;
    if (fsync(fd) < 0 && errno != EINVAL)
        r = -errno;
    close(fd);
    return r;
}

int sfd_prom_write(const char *dir, const struct sf_prom_daemon *daemon,
                   const struct sf_prom_job *jobs, size_t n)
{
    char *tmp = NULL, *final = NULL;
    FILE *f = NULL;
    int fd = -1, r, skipped;

    if (dir == NULL || dir[0] == '\0')
        return -EINVAL;

    if (asprintf(&tmp, "%s/" PROM_TMP_TEMPLATE, dir) < 0) {
        tmp = NULL;
        r = -ENOMEM;
        goto out;
    }
    if (asprintf(&final, "%s/" SFD_PROM_FILE_NAME, dir) < 0) {
        final = NULL;
        r = -ENOMEM;
        goto out;
    }
    fd = mkostemp(tmp, O_CLOEXEC);
    if (fd < 0) {
        r = -errno;
        free(tmp);
        tmp = NULL; /* nothing to unlink */
        goto out;
    }
    /* mkostemp creates 0600; node_exporter runs as another user. */
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
    if (rename(tmp, final) < 0) {
        r = -errno;
        goto out;
    }
    free(tmp);
    tmp = NULL; /* renamed: nothing to unlink */
    /* The new file is in place; a failed directory sync only weakens crash
     * durability, which a metrics file rewritten every window can live with. */
    (void)fsync_dir(dir);
    r = skipped;
out:
    if (f)
        fclose(f);
    if (fd >= 0)
        close(fd);
    if (tmp) {
        unlink(tmp);
        free(tmp);
    }
    free(final);
    return r;
}
