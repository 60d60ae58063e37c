// CPU emulation of kernels/primitives.cuh (see emulation/kernels/gpu.h). The flag operations map
// onto C++ atomics with the same ordering, so the kernels' release/acquire protocol is what makes
// the emulated peers' plain data accesses well ordered (test_gpu_emulated_tsan checks that).
// Each operation first draws a random delay (emulation/jitter.h): a signal that arrives late, a
// poll that sees a value late, a vector access that stalls.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <thread>

#include "gpu/reference.h"
#include "kernels/gpu.h"

namespace xccl::emulation {
// Vector accesses whose address is not 16-byte aligned (a GPU would fault); tests expect 0.
inline std::atomic<int> misalignedVectorAccesses{0};
// Per emulated thread: 16-byte accesses made, and, when loadBegin is set, vector loads that
// reached outside [loadBegin, loadEnd) (the copy test's check that copyRange never over-reads).
inline thread_local size_t vectorLoads = 0, vectorStores = 0, loadsOutside = 0;
inline thread_local const char* loadBegin = nullptr;
inline thread_local const char* loadEnd = nullptr;
}  // namespace xccl::emulation

namespace xccl::kernels {

inline void stReleaseSys(uint32_t* address, uint32_t value) {
  emulation::jitter(4, 100);
  __atomic_store_n(address, value, __ATOMIC_RELEASE);
}
inline uint32_t ldAcquireSys(const uint32_t* address) {
  std::this_thread::yield();  // spinning threads outnumber the cores many times over
  emulation::jitter(16, 30);
  return __atomic_load_n(address, __ATOMIC_ACQUIRE);
}
inline uint32_t ldRelaxedSys(const uint32_t* address) {
  std::this_thread::yield();  // the flag waits poll with it too (barrier.cuh)
  emulation::jitter(16, 20);
  return __atomic_load_n(address, __ATOMIC_RELAXED);
}
inline void atomicOrSys(uint32_t* address, uint32_t bits) {
  __atomic_fetch_or(address, bits, __ATOMIC_RELAXED);
}
inline uint64_t globalTimerNs() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

inline void checkVectorAlignment(const void* address) {
  if (reinterpret_cast<uintptr_t>(address) % 16 != 0) emulation::misalignedVectorAccesses++;
}
inline uint4 ldVector(const void* address) {
  checkVectorAlignment(address);
  ++emulation::vectorLoads;
  const char* at = static_cast<const char*>(address);
  if (emulation::loadBegin != nullptr &&
      (at < emulation::loadBegin || at + sizeof(uint4) > emulation::loadEnd)) {
    ++emulation::loadsOutside;
  }
  emulation::jitter(64, 50);
  uint4 v;
  std::memcpy(&v, address, sizeof(v));
  return v;
}
inline void stVector(void* address, uint4 value) {
  checkVectorAlignment(address);
  ++emulation::vectorStores;
  emulation::jitter(64, 50);
  std::memcpy(address, &value, sizeof(value));
}

// Built with -ffp-contract=off: plain operations round once each, like the _rn intrinsics.
inline float addRn(float a, float b) { return a + b; }
inline float mulRn(float a, float b) { return a * b; }
inline float divRn(float a, float b) { return a / b; }

inline float floatFromBits(uint32_t bits) {
  float v;
  std::memcpy(&v, &bits, sizeof(v));
  return v;
}
inline uint32_t bitsFromFloat(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof(bits));
  return bits;
}
inline float floatFromHalfBits(uint16_t bits) { return testing::halfBitsToFloat(bits); }
inline uint16_t halfBitsFromFloatRn(float v) { return testing::floatToHalfBits(v); }

}  // namespace xccl::kernels
