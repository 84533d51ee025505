/*
 * sfd logging: structured journald entries when stderr is connected to the
 * journal (JOURNAL_STREAM matches stderr), plain lines on stderr otherwise.
 * The only file-scope state is the level and the sink choice, set once at start.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <syslog.h>
#include <systemd/sd-journal.h>
#include <time.h>

#include "sfd.h"
#include "text_escape.h"

static int log_level = SFD_LOG_INFO;
static bool log_journal;

static bool stderr_is_journal(void)
{
    const char *e = getenv("JOURNAL_STREAM");
    unsigned long long dev, ino;
    struct stat st;
    if (e == NULL || sscanf(e, "%llu:%llu", &dev, &ino) != 2)
        return false;
    if (fstat(STDERR_FILENO, &st) < 0)
        return false;
    return (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
}

void sfd_log_init(int level)
{
    log_level = level;
    log_journal = stderr_is_journal();
}

void sfd_log_set_level(int level)
{
    log_level = level;
}

/* Messages carry outside text (job ids, capture paths and errors, host
 * names): escaped whole, so no byte of it reaches a terminal or forges a
 * line. */
void sfd_log(int level, const char *job, const char *fmt, ...)
{
    char raw[1024], msg[SF_TEXT_ESCAPED_SIZE(1024)], job_text[SF_TEXT_ESCAPED_SIZE(256)];
    va_list ap;

    if (level > log_level)
        return;
    va_start(ap, fmt);
    int n = vsnprintf(raw, sizeof(raw), fmt, ap);
    va_end(ap);
    size_t len = n < 0 ? 0 : (size_t)n < sizeof raw ? (size_t)n : sizeof raw - 1;
    sf_text_escape(raw, len, msg, sizeof msg);
    if (job != NULL) {
        sf_text_escape(job, strnlen(job, 256), job_text, sizeof job_text);
        job = job_text;
    }
    if (log_journal) {
        if (job != NULL)
            sd_journal_send("MESSAGE=%s", msg, "PRIORITY=%d", level, "SYSLOG_IDENTIFIER=sfd",
                            "SF_JOB_ID=%s", job, NULL);
        else
            sd_journal_send("MESSAGE=%s", msg, "PRIORITY=%d", level, "SYSLOG_IDENTIFIER=sfd", NULL);
        return;
    }
    static const char *const names[] = {"emerg",   "alert",  "crit", "error",
                                        "warning", "notice", "info", "debug"};
    fprintf(stderr, "sfd[%s]%s%s%s: %s\n", names[level & 7], job ? " job=" : "", job ? job : "", "",
            msg);
}
