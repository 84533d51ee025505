/*
 * Kineto reader for `sfctl import kineto`: one Chrome-trace JSON per rank, as
 * torch.profiler exports it, plain or gzipped (zlib reads both). Streams the
 * file through trace_json.c; keeps complete ("X") events only. Owns file
 * access and the file's rank, job and clock facts; not the reduction.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <zlib.h>

#include "import.h"
#include "trace_json.h"

/* After 2001-09-09 in ns since the epoch: Kineto's absolute timestamps. */
#define EPOCH_CLOCK_NS INT64_C(1000000000000000000)

struct gz_source {
    gzFile gz;
    const char *path;
};

static ssize_t gz_read(void *ctx, void *buf, size_t len, char *err, size_t errlen)
{
    struct gz_source *s = ctx;
    int n = gzread(s->gz, buf, (unsigned)len);
    int code = Z_OK;
    const char *msg = gzerror(s->gz, &code);
    if (n < 0 || (code != Z_OK && code != Z_BUF_ERROR) || (n == 0 && code == Z_BUF_ERROR)) {
        size_t plen = strlen(s->path); /* zlib prefixes its message with the path */
        if (strncmp(msg, s->path, plen) == 0 && strncmp(msg + plen, ": ", 2) == 0)
            msg += plen + 2;
        snprintf(err, errlen, "gzip: %s", code == Z_ERRNO ? strerror(errno) : msg);
        return -EIO;
    }
    return n;
}

struct kineto_ctx {
    struct step_acc *acc;
    uint64_t cut_names;
};

static int on_event(void *user, const struct trace_event *ev, char *err, size_t errlen)
{
    struct kineto_ctx *k = user;
    if (ev->ph != 'X' || !ev->has_ts || !ev->has_dur)
        return 0; /* metadata, instants, flows, counters: not ranges */
    if (ev->dur_ns < 0 || ev->ts_ns > INT64_MAX - ev->dur_ns) {
        snprintf(err, errlen, "event \"%s\" has a negative or overflowing duration", ev->name);
        return -EINVAL;
    }
    if (ev->name_cut)
        k->cut_names++;
    return step_acc_add(k->acc, ev->name, ev->ts_ns, ev->ts_ns + ev->dur_ns);
}

int sfctl_import_kineto_read(const char *path, struct step_acc *acc, struct import_file_info *info,
                             char *err, size_t errlen)
{
    gzFile gz = gzopen(path, "rb");
    if (gz == NULL) {
        int e = errno ? errno : ENOMEM;
        snprintf(err, errlen, "%s", strerror(e));
        return -e;
    }
    gzbuffer(gz, 1 << 17);
    struct gz_source src = {gz, path};
    struct kineto_ctx k = {.acc = acc};
    struct trace_meta meta;
    int r = trace_json_read(gz_read, &src, on_event, &k, &meta, err, errlen);
    gzclose(gz);
    if (r < 0)
        return r;
    info->rank = meta.rank;
    info->world_size = meta.world_size;
    snprintf(info->backend, sizeof info->backend, "%s", meta.backend);
    info->bytes = meta.bytes;
    if (meta.has_base_time) {
        info->absolute_time = true;
        info->time_offset_ns = meta.base_time_ns;
    } else {
        info->absolute_time =
            meta.object_format && acc->n_steps > 0 && acc->t_min >= EPOCH_CLOCK_NS;
    }
    return 0;
}
