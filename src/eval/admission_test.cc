// The footprint arithmetic of one evaluation on the GPU and what admission
// makes of it: large inputs timed in place let several evaluations of a
// 6.4 GB problem run on one H200 at once (docs/EVAL.md, Device memory of one
// evaluation).
#include <gtest/gtest.h>

#include "eval/admission.h"

namespace mk::eval {
namespace {

constexpr double kGiB = 1024.0 * 1024 * 1024;
constexpr double kGB = 1e9;
constexpr double kH200 = 139.8 * kGiB;  // what torch reports for an H200's memory

TEST(DeviceEstimate, ALargeTimedEvaluationHoldsTwoInputsAndThreeOutputs) {
  const double in = 6.4 * kGB, out = 6.4 * kGB;
  DeviceEstimate e = estimate_device(in, out, 0, /*timed=*/true);
  EXPECT_TRUE(timed_in_place(in));
  EXPECT_EQ(e.inputs, 2);
  EXPECT_EQ(e.outputs, 3);
  EXPECT_EQ(e.pool, 0);
  EXPECT_DOUBLE_EQ(e.fixed, 3 * kContextBytes + kFlushBytes);
  EXPECT_DOUBLE_EQ(e.bytes, 2 * in + 3 * out + e.fixed);
  // The bound: at most 3 x (inputs + outputs) + 2 GB (contexts and flush included).
  EXPECT_LE(e.bytes, 3 * (in + out) + 2.2 * kGB);
  // Before: 9 inputs and 5 outputs (89.6 GB of data, 91.0 GB measured).
  EXPECT_LT(e.bytes, (9 * in + 5 * out) / 2);
}

TEST(DeviceEstimate, UntimedAndSmallEvaluations) {
  DeviceEstimate u = estimate_device(6.4 * kGB, 6.4 * kGB, 0, /*timed=*/false);
  EXPECT_EQ(u.inputs, 2);
  EXPECT_EQ(u.outputs, 2);
  EXPECT_DOUBLE_EQ(u.fixed, 2 * kContextBytes);
  // Small inputs rotate: each of the three processes holds up to five sets.
  const double small = 64e6;
  EXPECT_FALSE(timed_in_place(small));
  DeviceEstimate s = estimate_device(small, small, 0, true);
  EXPECT_EQ(s.inputs, 6);
  EXPECT_DOUBLE_EQ(s.pool, 3 * 5 * small);
  // Sets of 400 MB: two fit in the 1 GiB pool.
  EXPECT_DOUBLE_EQ(estimate_device(400e6, 1, 0, true).pool, 3 * 2 * 400e6);
  EXPECT_DOUBLE_EQ(estimate_device(1e9, 1e9, 2e9, true).params, 3);
}

/// How many evaluations reserving `each` on one GPU of `cap` are admitted
/// at once (none may wait).
int admitted_at_once(double cap, double each, int want) {
  Admission adm(1e18);
  adm.set_device_capacity(0, cap);
  int n = 0;
  for (int i = 0; i < want; ++i) {
    int checks = 0;
    auto t = adm.acquire(0, 1.0, each, /*exclusive=*/false, [&] { return checks++ > 0; });
    if (!t || t->alone) break;
    ++n;
  }
  return n;
}

TEST(Admission, ThreeLargeEvaluationsRunAtOnceOnAnH200AtTheAutoSlotCount) {
  const double in = 6.4 * kGB, out = 6.4 * kGB;
  // 16 cores: auto is 12 slots, each with three idle pre-started processes.
  const double cap = gpu_capacity(kH200, 3 * 12);
  Footprint estimated;
  estimated.device_bytes = estimate_device(in, out, 0, true).bytes;
  EXPECT_EQ(admitted_at_once(cap, device_reservation(estimated), 4), 3);
  // Measured at the estimate: its margin still lets three in.
  Footprint measured = estimated;
  measured.measured = true;
  EXPECT_EQ(admitted_at_once(cap, device_reservation(measured), 4), 3);
  // Today's rule before this change (9 inputs, 5 outputs, x 1.15 when measured): one at a time.
  const double old_rule = 9 * in + 5 * out + 3 * 0.6 * kGiB;
  EXPECT_EQ(admitted_at_once(cap, old_rule, 4), 1);
  EXPECT_EQ(admitted_at_once(cap, old_rule * 1.15, 4), 1);
}

TEST(Admission, AMeasuredDeviceFootprintGetsASmallMargin) {
  Footprint f;
  f.device_bytes = 10 * kGiB;
  EXPECT_DOUBLE_EQ(device_reservation(f), 10 * kGiB);
  f.measured = true;
  EXPECT_DOUBLE_EQ(device_reservation(f), 10.5 * kGiB + 0.5 * kGiB);
  f.device_bytes = 0;
  EXPECT_DOUBLE_EQ(device_reservation(f), 0);
  EXPECT_DOUBLE_EQ(gpu_capacity(100 * kGiB, 0), 93 * kGiB);
  EXPECT_DOUBLE_EQ(gpu_capacity(2 * kGiB, 36), kGiB);
}

}  // namespace
}  // namespace mk::eval
