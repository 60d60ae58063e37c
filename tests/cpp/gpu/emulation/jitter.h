// Seeded random delays for the CPU emulation of the kernels (emulation/kernels/*): the flag
// primitives, block barriers, vector accesses and the emulated streams' copy-ins call jitter() so
// that the orderings a GPU can produce (a slow peer block, a late signal, a fast rank reusing its
// buffer) actually occur on a 2-core machine. Every emulated thread draws from its own
// xorshift state, seeded from the sequence's seed and its (rank, launch, block, thread), so a
// failing seed replays the same delay pattern (thread scheduling itself is not reproducible).
// Test code only.
#pragma once

#include <chrono>
#include <cstdint>
#include <thread>

namespace xccl::emulation {

// 0: this thread draws no delays (host threads outside an emulated stream).
inline thread_local uint64_t jitterState = 0;

inline uint64_t mixSeed(uint64_t x) {  // splitmix64 finaliser: nearby seeds, unrelated streams
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

inline void seedJitter(uint64_t seed) { jitterState = mixSeed(seed) | 1; }

inline uint64_t jitterRandom() {  // xorshift64
  uint64_t x = jitterState;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  jitterState = x;
  return x;
}

// With probability 1/oneIn, yields or sleeps up to maxMicros (uniform; 0 means a yield).
inline void jitter(uint32_t oneIn, uint32_t maxMicros) {
  if (jitterState == 0) return;
  const uint64_t r = jitterRandom();
  if (r % oneIn != 0) return;
  const uint32_t micros = static_cast<uint32_t>((r >> 32) % (maxMicros + 1));
  if (micros == 0) {
    std::this_thread::yield();
  } else {
    std::this_thread::sleep_for(std::chrono::microseconds(micros));
  }
}

}  // namespace xccl::emulation
