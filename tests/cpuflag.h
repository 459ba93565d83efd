/* cpuflag.h - whether /proc/cpuinfo's first "flags" line lists a flag (whole word), as the
 * tests of a CPU-dependent path decide what this machine should take, independently of the
 * code's own cpuid checks. */
#ifndef ZT_TESTS_CPUFLAG_H
#define ZT_TESTS_CPUFLAG_H

#include <stdio.h>
#include <string.h>

static int cpu_flag(const char *flag)
{
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[8192], want[64];
    int have = 0;
    snprintf(want, sizeof want, " %s", flag);
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "flags", 5)) {
            line[strcspn(line, "\n")] = ' ';
            have = strstr(line, want) && strchr(" ", strstr(line, want)[strlen(want)]);
            break;
        }
    if (f)
        fclose(f);
    return have;
}

#endif
