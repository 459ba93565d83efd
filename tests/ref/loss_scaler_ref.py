#!/usr/bin/env python3
"""loss_scaler_ref.py - DeepSpeed's dynamic loss scaling, transcribed from
deepspeed/runtime/fp16/loss_scaler.py (DynamicLossScaler.update_scale, DeepSpeed master of
2024-2025), with no torch and no distributed calls; writes the scenarios
tests/test_lscale.c replays against engine/lscale.c: per scenario its settings, the overflow
of each step and the scale and hysteresis after it, up to DeepSpeed's exception at the
minimum scale ("E").

    loss_scaler_ref.py > tests/fixtures/loss_scale/scenarios.txt"""
import random


class DynamicLossScaler:  # the fields and update_scale of DeepSpeed's class
    def __init__(self, init_scale, scale_factor, scale_window, min_scale, delayed_shift,
                 consecutive_hysteresis, raise_error_at_min_scale=True):
        self.cur_scale = init_scale
        self.cur_iter = 0
        self.last_overflow_iter = -1
        self.scale_factor = scale_factor
        self.scale_window = scale_window
        self.min_scale = min_scale
        self.delayed_shift = delayed_shift
        self.cur_hysteresis = delayed_shift
        self.consecutive_hysteresis = consecutive_hysteresis
        self.raise_error_at_min_scale = raise_error_at_min_scale

    def update_scale(self, overflow):
        if overflow:
            if self.delayed_shift == 1 or self.cur_hysteresis == 1:
                if (self.cur_scale == self.min_scale) and self.raise_error_at_min_scale:
                    raise Exception("Current loss scale already at minimum")
                else:
                    next_scale = max(self.cur_scale / self.scale_factor, self.min_scale)
                    self.cur_scale = next_scale
            else:
                self.cur_hysteresis -= 1
            self.last_overflow_iter = self.cur_iter
        else:
            if self.consecutive_hysteresis:
                self.cur_hysteresis = self.delayed_shift
            if (self.cur_iter - self.last_overflow_iter) % self.scale_window == 0:
                if not self.consecutive_hysteresis:
                    self.cur_hysteresis = self.delayed_shift
                self.cur_scale *= self.scale_factor
        self.cur_iter += 1


def main():
    rng = random.Random(26)
    print("# scenario POWER WINDOW HYSTERESIS CONSECUTIVE MIN_SCALE STEPS, then per step:")
    print("# OVERFLOW SCALE HYSTERESIS (after update_scale), or OVERFLOW E (DeepSpeed raises)")
    settings = [(16, 1000, 2, 0, 1.0, 3000, 0.002), (16, 1000, 2, 1, 1.0, 3000, 0.002),
                (4, 5, 1, 0, 1.0, 400, 0.3), (4, 5, 2, 0, 1.0, 400, 0.35),
                (3, 7, 3, 1, 0.25, 400, 0.45), (2, 3, 2, 0, 1.0, 300, 0.6),
                (10, 10, 1, 0, 1.0, 500, 0.1), (5, 4, 2, 1, 0.5, 500, 0.5),
                (1, 2, 1, 0, 1.0, 200, 0.8), (6, 5, 2, 0, 1.0, 600, 0.15),
                (6, 8, 1, 1, 1.0, 600, 0.1), (8, 20, 3, 0, 2.0, 800, 0.08)]
    for power, window, hyst, cons, mins, steps, p in settings:
        s = DynamicLossScaler(2.0 ** power, 2.0, window, mins, hyst, bool(cons))
        print("scenario %d %d %d %d %r %d" % (power, window, hyst, cons, mins, steps))
        for _ in range(steps):
            ov = int(rng.random() < p)
            try:
                s.update_scale(ov)
            except Exception:
                print("%d E" % ov)
                break
            print("%d %r %d" % (ov, s.cur_scale, s.cur_hysteresis))


if __name__ == "__main__":
    main()
