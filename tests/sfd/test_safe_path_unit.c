/* sf_safe_dir_open and its ownership rule, on real directories in a private
 * temporary directory (cmocka). The other-owner cases need root to chown. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "safe_path.h"

static char base[64];
static char why[512];

static int make_base(void **state)
{
    (void)state;
    snprintf(base, sizeof base, "/tmp/sf-safe-path-XXXXXX");
    return mkdtemp(base) == NULL ? -1 : 0;
}

static int remove_base(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", base);
    return system(cmd) == 0 ? 0 : -1;
}

static void under(char *out, size_t len, const char *rest)
{
    snprintf(out, len, "%s/%s", base, rest);
}

static void rule_by_mode_and_owner(void **state)
{
    (void)state;
    uid_t me = 1000;
    assert_int_equal(sf_safe_dir_check("/a", me, S_IFDIR | 0700, me, why, sizeof why), 0);
    assert_int_equal(sf_safe_dir_check("/a", me, S_IFDIR | 0755, 0, why, sizeof why), 0);
    assert_int_equal(sf_safe_dir_check("/tmp", me, S_IFDIR | 01777, 0, why, sizeof why), 0);
    assert_int_equal(sf_safe_dir_check("/a", me, S_IFDIR | 0700, 1001, why, sizeof why), -EPERM);
    assert_non_null(strstr(why, "/a is owned by uid 1001"));
    assert_int_equal(sf_safe_dir_check("/a", me, S_IFDIR | 0777, me, why, sizeof why), -EPERM);
    assert_non_null(strstr(why, "writable by group or others"));
    assert_int_equal(sf_safe_dir_check("/a", me, S_IFDIR | 0770, me, why, sizeof why), -EPERM);
    /* Sticky but not root's: its owner can still swap our entries. */
    assert_int_equal(sf_safe_dir_check("/a", me, S_IFDIR | 01777, me, why, sizeof why), -EPERM);
    assert_int_equal(sf_safe_dir_check("/a", me, S_IFREG | 0600, me, why, sizeof why), -ENOTDIR);
}

static void creates_missing_components(void **state)
{
    (void)state;
    char p[256];
    under(p, sizeof p, "x/y//z/");
    int fd = sf_safe_dir_open(p, SF_SAFE_DIR_CREATE, 0700, why, sizeof why);
    assert_true(fd >= 0);
    /* The descriptor is the directory: a file made through it lands there. */
    int f = openat(fd, "f", O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0600);
    assert_true(f >= 0);
    close(f);
    close(fd);
    under(p, sizeof p, "x/y/z/f");
    assert_int_equal(access(p, F_OK), 0);
    under(p, sizeof p, "x/./y");
    fd = sf_safe_dir_open(p, 0, 0, why, sizeof why);
    assert_true(fd >= 0);
    close(fd);
}

static void missing_without_create(void **state)
{
    (void)state;
    char p[256];
    under(p, sizeof p, "absent/deeper");
    assert_int_equal(sf_safe_dir_open(p, 0, 0, why, sizeof why), -ENOENT);
    assert_non_null(strstr(why, "absent"));
    assert_int_equal(sf_safe_dir_open("", SF_SAFE_DIR_CREATE, 0700, why, sizeof why), -EINVAL);
    under(p, sizeof p, "a/../b");
    assert_int_equal(sf_safe_dir_open(p, SF_SAFE_DIR_CREATE, 0700, why, sizeof why), -EINVAL);
}

static void symlink_is_refused(void **state)
{
    (void)state;
    char target[256], link[256], p[256];
    under(target, sizeof target, "real");
    under(link, sizeof link, "link");
    assert_int_equal(mkdir(target, 0700), 0);
    assert_int_equal(symlink(target, link), 0);
    assert_int_equal(sf_safe_dir_open(link, SF_SAFE_DIR_CREATE, 0700, why, sizeof why), -ELOOP);
    assert_non_null(strstr(why, "link is a symbolic link"));
    under(p, sizeof p, "link/below");
    assert_true(sf_safe_dir_open(p, SF_SAFE_DIR_CREATE, 0700, why, sizeof why) < 0);
    under(p, sizeof p, "real/below");
    assert_int_equal(access(p, F_OK), -1); /* nothing made through the link */
}

static void world_writable_component_is_refused(void **state)
{
    (void)state;
    char open_dir[256], p[256];
    under(open_dir, sizeof open_dir, "open");
    assert_int_equal(mkdir(open_dir, 0700), 0);
    assert_int_equal(chmod(open_dir, 0777), 0);
    under(p, sizeof p, "open/state");
    assert_int_equal(sf_safe_dir_open(p, SF_SAFE_DIR_CREATE, 0700, why, sizeof why), -EPERM);
    assert_non_null(strstr(why, open_dir));
    assert_null(strstr(why, "open/state"));
    assert_int_equal(access(p, F_OK), -1); /* refused before anything was made in it */
    assert_int_equal(chmod(open_dir, 01777), 0);
    if (geteuid() == 0) { /* sticky and root's, like /tmp */
        int fd = sf_safe_dir_open(p, SF_SAFE_DIR_CREATE, 0700, why, sizeof why);
        assert_true(fd >= 0);
        close(fd);
    }
}

/* node_exporter's textfile directory is shared by design: only its own
 * mode is let through, never a parent's. */
static void shared_leaf(void **state)
{
    (void)state;
    char open_dir[256], p[256];
    under(open_dir, sizeof open_dir, "shared");
    assert_int_equal(mkdir(open_dir, 0700), 0);
    assert_int_equal(chmod(open_dir, 0777), 0);
    int fd = sf_safe_dir_open(open_dir, SF_SAFE_DIR_SHARED_LEAF, 0, why, sizeof why);
    assert_true(fd >= 0);
    close(fd);
    under(p, sizeof p, "shared/./");
    fd = sf_safe_dir_open(p, SF_SAFE_DIR_SHARED_LEAF, 0, why, sizeof why);
    assert_true(fd >= 0);
    close(fd);
    under(p, sizeof p, "shared/below");
    assert_int_equal(mkdir(p, 0700), 0);
    assert_int_equal(sf_safe_dir_open(p, SF_SAFE_DIR_SHARED_LEAF, 0, why, sizeof why), -EPERM);
    assert_non_null(strstr(why, "shared is writable by group or others"));
    assert_int_equal(sf_safe_dir_open(open_dir, 0, 0, why, sizeof why), -EPERM);
}

static void other_owner_is_refused(void **state)
{
    (void)state;
    if (geteuid() != 0)
        skip();
    char squat[256], p[256];
    under(squat, sizeof squat, "squat");
    assert_int_equal(mkdir(squat, 0700), 0);
    assert_int_equal(chown(squat, 65534, 65534), 0);
    under(p, sizeof p, "squat/captures");
    assert_int_equal(sf_safe_dir_open(p, SF_SAFE_DIR_CREATE, 0700, why, sizeof why), -EPERM);
    assert_non_null(strstr(why, "squat is owned by uid 65534"));
}

static void regular_file_is_refused(void **state)
{
    (void)state;
    char p[256];
    under(p, sizeof p, "plain");
    int f = open(p, O_WRONLY | O_CREAT | O_EXCL, 0600);
    assert_true(f >= 0);
    close(f);
    assert_int_equal(sf_safe_dir_open(p, SF_SAFE_DIR_CREATE, 0700, why, sizeof why), -ENOTDIR);
    assert_non_null(strstr(why, "plain is not a directory"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(rule_by_mode_and_owner),
        cmocka_unit_test_setup_teardown(creates_missing_components, make_base, remove_base),
        cmocka_unit_test_setup_teardown(missing_without_create, make_base, remove_base),
        cmocka_unit_test_setup_teardown(symlink_is_refused, make_base, remove_base),
        cmocka_unit_test_setup_teardown(world_writable_component_is_refused, make_base,
                                        remove_base),
        cmocka_unit_test_setup_teardown(shared_leaf, make_base, remove_base),
        cmocka_unit_test_setup_teardown(other_owner_is_refused, make_base, remove_base),
        cmocka_unit_test_setup_teardown(regular_file_is_refused, make_base, remove_base),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
