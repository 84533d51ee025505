/* Fuzz target: the streaming Chrome-trace reader of `sfctl import kineto`
 * on arbitrary bytes, fed in small uneven chunks so tokens straddle buffer
 * refills, then the step reduction of whatever ranges it yields. */
#include <errno.h>
#include <string.h>
#include <sys/types.h>

#include "import_steps.h"
#include "trace_json.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

struct mem_source {
    const unsigned char *data;
    size_t size, pos, turn;
};

static ssize_t mem_read(void *ctx, void *buf, size_t len, char *err, size_t errlen)
{
    (void)err;
    (void)errlen;
    struct mem_source *m = ctx;
    size_t n = 1 + (m->turn++ * 7919) % 97; /* uneven chunks */
    if (n > len)
        n = len;
    if (n > m->size - m->pos)
        n = m->size - m->pos;
    memcpy(buf, m->data + m->pos, n);
    m->pos += n;
    return (ssize_t)n;
}

static int on_event(void *user, const struct trace_event *ev, char *err, size_t errlen)
{
    (void)err;
    (void)errlen;
    if (ev->ph != 'X' || !ev->has_ts || !ev->has_dur || ev->dur_ns < 0 ||
        ev->ts_ns > INT64_MAX - ev->dur_ns)
        return 0;
    return step_acc_add(user, ev->name, ev->ts_ns, ev->ts_ns + ev->dur_ns);
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    static struct import_map map;
    static bool loaded;
    char err[400];
    if (!loaded) {
        if (import_map_load(NULL, &map, err, sizeof err) < 0)
            return 0;
        loaded = true;
    }
    struct mem_source src = {data, size, 0, 0};
    struct step_acc acc;
    struct trace_meta meta;
    step_acc_init(&acc, &map);
    if (trace_json_read(mem_read, &src, on_event, &acc, &meta, err, sizeof err) == 0) {
        struct replay_input in = {0};
        struct replay_part *part = sfctl_input_add_part(&in);
        uint64_t totals[SF_MAX_STAGES] = {0};
        if (part && import_map_schema(&map, &part->schema) == 0 &&
            step_acc_rows(&acc, 0, part, totals, err, sizeof err) == 0)
            sfctl_part_finish(part);
        sfctl_replay_input_clear(&in);
    }
    step_acc_clear(&acc);
    return 0;
}
