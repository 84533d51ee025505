/*
 * A trainer's program built only from the installed development files of
 * libsfclient (header, pkg-config file or CMake package): it opens a client
 * (no daemon needed) and prints the default schema's stage count.
 */
#include <stdio.h>

#include <stagefrontier/client.h>

int main(void)
{
    sf_client_options o;
    sf_client *c;

    sf_client_options_init(&o);
    o.job_id = "dev-files";
    o.socket_path = "/nonexistent/ingest.sock";
    o.rank = 0;
    o.world_size = 1;
    if (sf_client_open(&o, &c) < 0)
        return 1;
    printf("stages=%d\n", sf_stage_count(c));
    sf_client_close(c);
    return 0;
}
