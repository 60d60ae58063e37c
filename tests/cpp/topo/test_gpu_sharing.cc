// How this process shares its GPU (gpu_sharing.h) on faked inputs: MPS pipe directories with and
// without the control daemon's FIFO, and MIG spellings of CUDA_VISIBLE_DEVICES.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include "fake_sysfs.h"
#include "topo/gpu_sharing.h"

namespace xccl::topo {
namespace {

TEST(MpsDetection, PipeDirectoryIsTheVariableOrTheDriversDefault) {
  EXPECT_EQ(mpsPipeDirectory(nullptr), "/tmp/nvidia-mps");
  EXPECT_EQ(mpsPipeDirectory(""), "/tmp/nvidia-mps");
  EXPECT_EQ(mpsPipeDirectory("/run/mps-user7"), "/run/mps-user7");
}

TEST(MpsDetection, RunningOnlyWithTheControlFifo) {
  testing::FakeSysfs root;
  const std::string dir = root.root() + "/mps";
  EXPECT_FALSE(mpsControlDaemonRunning(dir)) << "no directory";
  root.mkdir("/mps");
  EXPECT_FALSE(mpsControlDaemonRunning(dir)) << "an empty directory";
  root.write("/mps/control", "");
  EXPECT_FALSE(mpsControlDaemonRunning(dir)) << "a plain file named control is no pipe";
  const std::string fifoDir = root.root() + "/mps2";
  root.mkdir("/mps2");
  ASSERT_EQ(::mkfifo((fifoDir + "/control").c_str(), 0600), 0);
  EXPECT_TRUE(mpsControlDaemonRunning(fifoDir));
  EXPECT_FALSE(mpsControlDaemonRunning(""));
}

TEST(MigDetection, UuidsAndVisibleDevices) {
  EXPECT_TRUE(isMigUuid("MIG-4b1e7c9a-2f3d-5e6f-8a9b-0c1d2e3f4a5b"));
  EXPECT_TRUE(isMigUuid(" MIG-4b1e7c9a"));
  EXPECT_FALSE(isMigUuid("GPU-4b1e7c9a-2f3d-5e6f-8a9b-0c1d2e3f4a5b"));
  EXPECT_FALSE(isMigUuid("mig"));
  EXPECT_FALSE(isMigUuid(""));
  EXPECT_TRUE(isMigDeviceName("NVIDIA A100-SXM4-40GB MIG 1g.5gb"));
  EXPECT_TRUE(isMigDeviceName("NVIDIA H100 80GB HBM3 MIG 1c.3g.40gb"));
  EXPECT_FALSE(isMigDeviceName("NVIDIA H200"));
  EXPECT_FALSE(isMigDeviceName("NVIDIA MIGHTY 5"));
  EXPECT_FALSE(isMigDeviceName("Vendor MIG "));
  EXPECT_FALSE(visibleDevicesAreMig(nullptr));
  EXPECT_FALSE(visibleDevicesAreMig(""));
  EXPECT_FALSE(visibleDevicesAreMig("0,1,2,3"));
  EXPECT_FALSE(visibleDevicesAreMig("GPU-4b1e7c9a,GPU-5c2f"));
  EXPECT_TRUE(visibleDevicesAreMig("MIG-4b1e7c9a-2f3d-5e6f-8a9b-0c1d2e3f4a5b"));
  EXPECT_TRUE(visibleDevicesAreMig("GPU-4b1e7c9a,MIG-5c2f"));
}

}  // namespace
}  // namespace xccl::topo
