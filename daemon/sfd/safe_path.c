/* The walk of sf_safe_dir_open: one component at a time from "/", each
 * checked before the next is opened below it. Only directories; the files in
 * them are the caller's (openat with O_EXCL | O_NOFOLLOW, or a renameat). */
#define _GNU_SOURCE
#include "safe_path.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int sf_safe_dir_check(const char *component, uid_t uid, mode_t mode, uid_t owner, char *why,
                      size_t whylen)
{
    if (!S_ISDIR(mode)) {
        snprintf(why, whylen, "%s is not a directory", component);
        return -ENOTDIR;
    }
    if (owner != uid && owner != 0) {
        snprintf(why, whylen, "%s is owned by uid %u, not by uid %u or root", component,
                 (unsigned)owner, (unsigned)uid);
        return -EPERM;
    }
    /* Sticky and root's: others may add entries but not replace ours. */
    bool shared_tmp = (mode & S_ISVTX) && owner == 0;
    if ((mode & (S_IWGRP | S_IWOTH)) && !shared_tmp) {
        snprintf(why, whylen, "%s is writable by group or others (mode %03o)", component,
                 (unsigned)(mode & 07777));
        return -EPERM;
    }
    return 0;
}

/* The absolute form of path: itself, or the working directory before it. */
static int absolute(const char *path, char *ret, size_t len, char *why, size_t whylen)
{
    if (path[0] == '/') {
        if (snprintf(ret, len, "%s", path) >= (int)len)
            goto too_long;
        return 0;
    }
    char cwd[PATH_MAX];
    if (getcwd(cwd, sizeof cwd) == NULL) {
        snprintf(why, whylen, "%s: cannot read the working directory: %s", path, strerror(errno));
        return -errno;
    }
    if (snprintf(ret, len, "%s/%s", cwd, path) >= (int)len)
        goto too_long;
    return 0;
too_long:
    snprintf(why, whylen, "%s: path too long", path);
    return -ENAMETOOLONG;
}

static int check_fd(int fd, const char *component, bool shared, char *why, size_t whylen)
{
    struct stat st;
    if (fstat(fd, &st) < 0) {
        snprintf(why, whylen, "%s: %s", component, strerror(errno));
        return -errno;
    }
    mode_t mode = shared ? st.st_mode & ~(mode_t)(S_IWGRP | S_IWOTH) : st.st_mode;
    return sf_safe_dir_check(component, geteuid(), mode, st.st_uid, why, whylen);
}

/* Whether the rest of the path after p names no further component. */
static bool last_component(const char *p)
{
    for (; *p != '\0'; p++)
        if (*p != '/' && !(p[0] == '.' && (p[1] == '/' || p[1] == '\0')))
            return false;
    return true;
}

/* A component that would not open as a directory: -ELOOP for a symbolic
 * link, -ENOTDIR for anything else that is not a directory. */
static int not_a_directory(int dirfd, const char *name, int r)
{
    struct stat st;
    if (r != -ELOOP && r != -ENOTDIR)
        return r;
    if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode))
        return -ELOOP;
    return -ENOTDIR;
}

/* Opens name below dirfd, making it first when asked. */
static int open_below(int dirfd, const char *name, bool create, mode_t mode)
{
    int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT && create) {
        if (mkdirat(dirfd, name, mode) < 0 && errno != EEXIST)
            return -errno;
        fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    }
    return fd < 0 ? not_a_directory(dirfd, name, -errno) : fd;
}

static void explain_open(const char *component, int r, char *why, size_t whylen)
{
    if (r == -ELOOP)
        snprintf(why, whylen, "%s is a symbolic link", component);
    else if (r == -ENOTDIR)
        snprintf(why, whylen, "%s is not a directory", component);
    else
        snprintf(why, whylen, "%s: %s", component, strerror(-r));
}

int sf_safe_dir_open(const char *path, unsigned flags, mode_t mode, char *why, size_t whylen)
{
    char abs[PATH_MAX];
    if (path == NULL || path[0] == '\0') {
        snprintf(why, whylen, "empty path");
        return -EINVAL;
    }
    int r = absolute(path, abs, sizeof abs, why, whylen);
    if (r < 0)
        return r;
    int fd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(why, whylen, "/: %s", strerror(errno));
        return -errno;
    }
    bool shared = flags & SF_SAFE_DIR_SHARED_LEAF;
    r = check_fd(fd, "/", shared && last_component(abs), why, whylen);
    /* abs is cut at each '/' in turn, so that it names the component reached. */
    char *p = abs;
    while (r >= 0) {
        while (*p == '/')
            p++;
        if (*p == '\0')
            break;
        char *end = strchr(p, '/');
        if (end != NULL)
            *end = '\0';
        if (strcmp(p, "..") == 0) {
            snprintf(why, whylen, "%s: '..' is not allowed", path);
            r = -EINVAL;
            break;
        }
        if (strcmp(p, ".") == 0) { /* "a/./b": nothing to open */
            if (end == NULL)
                break;
            *end = '/';
            p = end + 1;
            continue;
        }
        int next = open_below(fd, p, flags & SF_SAFE_DIR_CREATE, mode);
        if (next < 0) {
            explain_open(abs, next, why, whylen);
            r = next;
            break;
        }
        close(fd);
        fd = next;
        r = check_fd(fd, abs, shared && (end == NULL || last_component(end + 1)), why, whylen);
        if (end == NULL)
            break;
        *end = '/';
        p = end + 1;
    }
    if (r < 0) {
        close(fd);
        return r;
    }
    return fd;
}
