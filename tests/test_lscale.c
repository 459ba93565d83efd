/* test_lscale.c - engine/lscale.c against DeepSpeed's DynamicLossScaler: the scenarios of
 * tests/fixtures/loss_scale/scenarios.txt (written by tests/ref/loss_scaler_ref.py, a
 * transcription of deepspeed/runtime/fp16/loss_scaler.py's update_scale) replayed step by
 * step: the same scale and hysteresis after every step, and the error exactly where
 * DeepSpeed raises (an overflow at the minimum scale), the state then unchanged; windows 2 to
 * 1000, hysteresis 1 to 3, consecutive or not, min_loss_scale 0.25 to 2. And a static scale
 * never changes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zerotrain.h"
#include "../engine/lscale.h"

static void test_deepspeed_scenarios(void **state)
{
    (void)state;
    const char *dir = getenv("ZT_FIXTURES") ? getenv("ZT_FIXTURES") : "tests/fixtures";
    char path[512], line[256];
    snprintf(path, sizeof path, "%s/loss_scale/scenarios.txt", dir);
    FILE *f = fopen(path, "r");
    if (!f)
        fail_msg("%s: cannot open", path);
    zt_lscale s;
    int scen = 0, steps = 0, errors = 0, ups = 0, downs = 0, step = 0;
    while (fgets(line, sizeof line, f)) {
        int power, window, hyst, cons, n, ov, h;
        double mins, scale;
        char e[4];
        if (line[0] == '#')
            continue;
        if (sscanf(line, "scenario %d %d %d %d %lf %d", &power, &window, &hyst, &cons, &mins,
                   &n) == 6) {
            zt_lscale_init(&s, 0.0, power, window, hyst, cons, mins);
            scen++;
            step = 0;
            continue;
        }
        step++;
        double before = s.scale;
        if (sscanf(line, "%d %3s", &ov, e) == 2 && !strcmp(e, "E")) {
            zt_lscale t = s;
            if (zt_lscale_update(&s, ov) != ZT_E_RANGE)
                fail_msg("scenario %d step %d: DeepSpeed raises here, zerotrain did not", scen,
                         step);
            if (memcmp(&t, &s, sizeof s))
                fail_msg("scenario %d step %d: the failed update changed the state", scen, step);
            errors++;
            continue;
        }
        if (sscanf(line, "%d %lf %d", &ov, &scale, &h) != 3)
            fail_msg("%s: bad line: %s", path, line);
        if (zt_lscale_update(&s, ov) != 0)
            fail_msg("scenario %d step %d: an error where DeepSpeed goes on", scen, step);
        if (s.scale != scale || s.hysteresis != h)
            fail_msg("scenario %d step %d (overflow %d): scale %g hysteresis %d, DeepSpeed %g %d",
                     scen, step, ov, s.scale, s.hysteresis, scale, h);
        ups += s.scale > before;
        downs += s.scale < before;
        steps++;
    }
    fclose(f);
    assert_true(scen >= 10 && errors >= 5 && ups >= 20 && downs >= 20);
    printf("%d scenarios, %d steps (%d raises, %d drops), %d errors where DeepSpeed raises\n",
           scen, steps, ups, downs, errors);
}

static void test_static(void **state)
{
    (void)state;
    zt_lscale s;
    zt_lscale_init(&s, 128.0, 16, 1000, 2, 0, 1.0);
    assert_int_equal(s.dynamic, 0);
    for (int i = 0; i < 3000; i++)
        assert_int_equal(zt_lscale_update(&s, i % 3 == 0), 0);
    assert_true(s.scale == 128.0);
    zt_lscale_init(&s, 0.0, 16, 1000, 2, 0, 1.0); /* DeepSpeed's defaults */
    assert_true(s.dynamic && s.scale == 65536.0 && s.hysteresis == 2 && s.window == 1000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_deepspeed_scenarios),
        cmocka_unit_test(test_static),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
