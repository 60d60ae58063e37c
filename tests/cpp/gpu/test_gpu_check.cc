// XCCL_GPU_CHECK (common/gpu_runtime.h) on any machine: a failing call is a runtime error code
// here, so no device is needed. Checks the kind the caller chose, the message (the call as
// written, the runtime's name and text of the error, file:line). That it clears the runtime's last
// error needs a driver: without one the runtime's error (cudaErrorInsufficientDriver) is sticky.
#include <gtest/gtest.h>

#include <string>

#include "common/gpu_runtime.h"

namespace xccl {
namespace {

gpuError_t failWith(gpuError_t rc) { return rc; }

TEST(GpuCheck, ThrowsTheChosenKindNamingTheCallAndTheRuntimesText) {
  const gpuError_t invalid = XCCL_RT(ErrorInvalidValue);
  try {
    XCCL_GPU_CHECK(ErrorKind::kPeerFailure, failWith(invalid));
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kPeerFailure);
    const std::string text = e.what();
    EXPECT_NE(text.find("xccl: failWith(invalid) failed: "), std::string::npos) << text;
    EXPECT_NE(text.find(gpuGetErrorName(invalid)), std::string::npos) << text;
    EXPECT_NE(text.find(std::string("(") + gpuGetErrorString(invalid) + ")"), std::string::npos)
        << text;
    EXPECT_NE(text.find("test_gpu_check.cc:"), std::string::npos) << text;
  }
}

TEST(GpuCheck, SpellsTheAliasAsTheRuntimesName) {
  // Fails with or without a device: no count to write to, or no driver.
  try {
    XCCL_GPU_CHECK(ErrorKind::kSystem, XCCL_RT(GetDeviceCount)(nullptr));
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kSystem);
    const std::string call = XCCL_GPU_HIP ? "hipGetDeviceCount" : "cudaGetDeviceCount";
    EXPECT_EQ(std::string(e.what()).rfind("xccl: " + call + "(nullptr) failed: ", 0), 0u)
        << e.what();
  }
}

TEST(GpuCheck, SuccessDoesNotThrow) {
  EXPECT_NO_THROW(XCCL_GPU_CHECK(ErrorKind::kInternal, failWith(gpuSuccess)));
}

}  // namespace
}  // namespace xccl
