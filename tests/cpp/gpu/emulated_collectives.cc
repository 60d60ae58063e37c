#include "gpu/emulated_collectives.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "gpu/reference.h"
#include "kernels/copy_kernel.cuh"
#include "kernels/reduce_kernels.cuh"
// After the kernels:
#include "gpu/emulator.h"

namespace xccl::kernels::emulated {

std::string collectiveName(Collective c) {
  switch (c) {
    case Collective::kOneShot: return "OneShot";
    case Collective::kTwoShot: return "TwoShot";
    case Collective::kReduceScatter: return "ReduceScatter";
    case Collective::kAllGather: return "AllGather";
    case Collective::kBroadcast: return "Broadcast";
    case Collective::kAllToAll: return "AllToAll";
  }
  return "?";
}

bool isReduce(Collective c) {
  return c == Collective::kOneShot || c == Collective::kTwoShot || c == Collective::kReduceScatter;
}

int syncsPerKernel(Collective c) { return c == Collective::kTwoShot ? 3 : 2; }

namespace {

using testing::Bytes;

// Threads per emulated block: at least the world size (thread t < W owns the flag pair with
// peer t), otherwise few, since every one is an OS thread.
int threadsFor(int world) { return std::max(world, 4); }

// Host memory standing in for every rank's device memory, 64-byte aligned.
class EmulatedRanks {
 public:
  EmulatedRanks(int world, size_t bufferBytes, size_t outputBytes)
      : world_(world), flags_(world), errors_(world, 0), factors_(world, 0.0f) {
    epochs_.assign(static_cast<size_t>(world) * kMaxBlocks, 0);
    for (int r = 0; r < world; ++r) {
      buffers_.emplace_back(bufferBytes + 64);
      outputs_.emplace_back(outputBytes + 64);
    }
  }
  char* buffer(int r) { return aligned(buffers_[r]); }
  char* output(int r) { return aligned(outputs_[r]); }
  float* factor(int r) { return &factors_[r]; }
  uint32_t error(int r) const { return errors_[r]; }

  DeviceHandle handle(int rank, size_t offset) {
    DeviceHandle h{};
    for (int p = 0; p < world_; ++p) {
      h.buffers[p] = buffer(p) + offset;
      h.flags[p] = &flags_[p];
    }
    h.epochs = &epochs_[static_cast<size_t>(rank) * kMaxBlocks];
    h.error = &errors_[rank];
    h.timeoutNs = kDefaultTimeoutNs;
    h.rank = rank;
    h.worldSize = world_;
    return h;
  }

 private:
  static char* aligned(std::vector<char>& v) {
    const auto p = reinterpret_cast<uintptr_t>(v.data());
    return v.data() + ((64 - p % 64) % 64);
  }
  int world_;
  std::vector<std::vector<char>> buffers_, outputs_;
  std::vector<FlagArea> flags_;
  std::vector<uint32_t> epochs_;
  std::vector<uint32_t> errors_;
  std::vector<float> factors_;
};

// The reduce kernel for a runtime (collective, dtype, kind, world): the one runtime-to-template
// dispatch of the emulated tests.
template <typename T, ReduceKind K>
void (*reduceKernelWith(Collective c, int world))(ReduceParams) {
  const bool two = c == Collective::kTwoShot;
  switch (world) {
    case 1: return two ? &twoShotKernel<T, K, 1> : &directReduceKernel<T, K, 1>;
    case 2: return two ? &twoShotKernel<T, K, 2> : &directReduceKernel<T, K, 2>;
    case 3: return two ? &twoShotKernel<T, K, 3> : &directReduceKernel<T, K, 3>;
    case 5: return two ? &twoShotKernel<T, K, 5> : &directReduceKernel<T, K, 5>;
    case 8: return two ? &twoShotKernel<T, K, 8> : &directReduceKernel<T, K, 8>;
  }
  return nullptr;
}
template <typename T>
void (*reduceKernelOf(Collective c, ReduceKind kind, int world))(ReduceParams) {
  switch (kind) {
    case ReduceKind::kSum: return reduceKernelWith<T, ReduceKind::kSum>(c, world);
    case ReduceKind::kMin: return reduceKernelWith<T, ReduceKind::kMin>(c, world);
    case ReduceKind::kMax: return reduceKernelWith<T, ReduceKind::kMax>(c, world);
  }
  return nullptr;
}
void (*reduceKernel(Collective c, DataType dtype, ReduceKind kind, int world))(ReduceParams) {
  switch (dtype) {
    case DataType::kFloat32: return reduceKernelOf<float>(c, kind, world);
    case DataType::kFloat16: return reduceKernelOf<Half>(c, kind, world);
    default: return reduceKernelOf<BFloat16>(c, kind, world);
  }
}

Bytes randomBytes(size_t n, uint64_t seed) {
  Bytes out(n);
  uint64_t x = seed;
  for (auto& b : out) b = static_cast<uint8_t>(emulation::mixSeed(x++) >> 56);
  return out;
}

// Everything one call needs on every rank, prepared before the streams start so that they only
// copy and launch.
struct PreparedCall {
  size_t inBytesOffset = 0;
  std::vector<Bytes> inputs;    // per rank, copied in at buffer + inBytesOffset
  std::vector<Bytes> expected;  // per rank
  std::vector<ReduceParams> reduce;
  std::vector<CopyParams> copy;
  void (*reduceKernel)(ReduceParams) = nullptr;
  std::vector<const char*> outputs;  // per rank: where the result lands
};

std::string describe(const Sequence& s, size_t k) {
  const Call& c = s.calls[k];
  std::string text = collectiveName(s.collective) + " world " + std::to_string(s.world);
  if (isReduce(s.collective)) {
    text += std::string(" ") + dataTypeName(s.dtype) + " " + reduceOpName(c.op);
    if (c.deviceFactor) text += " (device factor)";
  }
  text += " call " + std::to_string(k) + " count " + std::to_string(c.count) + " blocks " +
          std::to_string(c.blocks) + " offsets " + std::to_string(c.inOffset) + "/" +
          std::to_string(c.outOffset) + (c.inPlace ? " in place" : "");
  if (!isReduce(s.collective)) {
    text += " parts " + std::to_string(c.parts) + " root " + std::to_string(c.root);
  }
  return text + " (seed " + std::to_string(s.seed) + ")";
}

PreparedCall prepareReduce(const Sequence& s, size_t k, EmulatedRanks& e) {
  const Call& c = s.calls[k];
  const int world = s.world;
  const size_t size = elementSize(s.dtype);
  const size_t perRank = s.collective == Collective::kReduceScatter ? c.count * world : c.count;
  const ReduceSpec spec = reduceSpec(s.dtype, c.op, c.factor, world);
  PreparedCall p;
  p.inBytesOffset = c.inOffset * size;
  p.reduceKernel = reduceKernel(s.collective, s.dtype, spec.kind, world);
  for (int r = 0; r < world; ++r) {
    p.inputs.push_back(testing::randomElements(s.dtype, perRank, s.seed * 7919 + k * 131 + r));
  }
  for (int r = 0; r < world; ++r) {
    const size_t chunk = s.collective == Collective::kReduceScatter ? r * c.count : 0;
    ReduceParams params{e.handle(r, p.inBytesOffset),
                        e.output(r) + c.outOffset * size,
                        c.count,
                        chunk,
                        spec.preMul,
                        spec.postDiv,
                        nullptr};
    if (c.deviceFactor) {
      // The host-side factor is poison: a kernel that ignored the device one would return NaNs.
      params.preMul = std::numeric_limits<float>::quiet_NaN();
      params.preMulOnDevice = e.factor(r);
    }
    if (c.inPlace) params.output = static_cast<char*>(params.handle.buffers[r]) + chunk * size;
    p.reduce.push_back(params);
    p.outputs.push_back(static_cast<const char*>(params.output));
    p.expected.push_back(
        testing::referenceReduce(s.dtype, c.op, c.factor, p.inputs, chunk, c.count));
  }
  return p;
}

PreparedCall prepareCopy(const Sequence& s, size_t k, EmulatedRanks& e) {
  const Call& c = s.calls[k];
  const int world = s.world;
  const size_t chunk = c.count;
  PreparedCall p;
  p.inBytesOffset = c.inOffset;
  const bool toAll = s.collective == Collective::kAllToAll;
  for (int r = 0; r < world; ++r) {
    p.inputs.push_back(randomBytes(toAll ? chunk * world : chunk, s.seed * 7919 + k * 131 + r));
  }
  for (int r = 0; r < world; ++r) {
    const bool broadcast = s.collective == Collective::kBroadcast;
    const CopyParams params{e.handle(r, c.inOffset),
                            e.output(r) + c.outOffset,
                            chunk,
                            toAll ? chunk * r : 0,
                            broadcast ? 1 : world,
                            c.root,
                            c.parts,
                            !broadcast};
    p.copy.push_back(params);
    p.outputs.push_back(static_cast<const char*>(params.output));
    Bytes expected;
    for (int q = 0; q < (broadcast ? 1 : world); ++q) {
      const Bytes& from = p.inputs[broadcast ? c.root : q];
      const size_t at = toAll ? r * chunk : 0;
      expected.insert(expected.end(), from.begin() + at, from.begin() + at + chunk);
    }
    p.expected.push_back(expected);
  }
  return p;
}

std::string firstByteMismatch(const Bytes& expected, const Bytes& actual) {
  const auto at = std::mismatch(expected.begin(), expected.end(), actual.begin());
  if (at.first == expected.end()) return "";
  return "byte " + std::to_string(at.first - expected.begin()) + " of " +
         std::to_string(expected.size()) + ": got " + std::to_string(*at.second) + ", expected " +
         std::to_string(*at.first);
}

}  // namespace

std::string runSequence(const Sequence& s) {
  const int world = s.world;
  const bool reduce = isReduce(s.collective);
  const size_t size = reduce ? elementSize(s.dtype) : 1;
  size_t bufferBytes = 0, outputBytes = 0;
  for (const Call& c : s.calls) {
    const bool wide =
        s.collective == Collective::kReduceScatter || s.collective == Collective::kAllToAll;
    const bool gathers = s.collective == Collective::kAllGather || (wide && !reduce);
    bufferBytes = std::max(bufferBytes, (c.inOffset + c.count * (wide ? world : 1)) * size);
    outputBytes = std::max(outputBytes, (c.outOffset + c.count * (gathers ? world : 1)) * size);
  }
  EmulatedRanks e(world, bufferBytes, outputBytes);
  std::vector<PreparedCall> calls;
  for (size_t k = 0; k < s.calls.size(); ++k) {
    calls.push_back(reduce ? prepareReduce(s, k, e) : prepareCopy(s, k, e));
    if (reduce && calls.back().reduceKernel == nullptr) return "no kernel for " + describe(s, k);
  }
  const int misalignedBefore = emulation::misalignedVectorAccesses.load();
  std::vector<std::vector<Bytes>> results(calls.size(), std::vector<Bytes>(world));

  std::vector<int> ranks(world);
  for (int r = 0; r < world; ++r) ranks[r] = r;
  emulation::runStreams(ranks, s.seed, [&](int r) {
    for (size_t k = 0; k < calls.size(); ++k) {
      const PreparedCall& call = calls[k];
      const Call& c = s.calls[k];
      emulation::jitter(2, 300);  // ranks reach a call at different times
      // Copy-in, in stream order after this rank's previous kernel: no other ordering.
      std::memcpy(e.buffer(r) + call.inBytesOffset, call.inputs[r].data(), call.inputs[r].size());
      if (c.deviceFactor) *e.factor(r) = c.factor;
      if (reduce) {
        emulation::launch(call.reduceKernel, call.reduce[r], c.blocks, threadsFor(world));
      } else {
        emulation::launch(&pullCopyKernel, call.copy[r], c.blocks, threadsFor(world));
      }
      // Copy-out, also in stream order: the next call may overwrite the output.
      const char* out = call.outputs[r];
      results[k][r].assign(out, out + call.expected[r].size());
    }
  });

  for (int r = 0; r < world; ++r) {
    if (e.error(r) != 0) {
      return collectiveName(s.collective) + " rank " + std::to_string(r) + ": " +
             describeDeviceError(e.error(r)) + " (seed " + std::to_string(s.seed) + ")";
    }
  }
  for (size_t k = 0; k < calls.size(); ++k) {
    for (int r = 0; r < world; ++r) {
      const std::string mismatch =
          reduce ? testing::firstMismatch(s.dtype, calls[k].expected[r], results[k][r])
                 : firstByteMismatch(calls[k].expected[r], results[k][r]);
      if (!mismatch.empty()) return describe(s, k) + " rank " + std::to_string(r) + ": " + mismatch;
    }
  }
  if (emulation::misalignedVectorAccesses.load() != misalignedBefore) {
    return collectiveName(s.collective) + ": misaligned 16-byte accesses";
  }
  return "";
}

Sequence coverageSequence(Collective c, int world, DataType dtype, uint64_t seed) {
  Sequence s{c, world, dtype, {}, seed};
  if (isReduce(c)) {
    const ReduceOp ops[] = {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kPreMulSum, ReduceOp::kMin,
                            ReduceOp::kMax};
    const float factors[] = {0.37f, 1.5f, -0.25f};
    int next = 0;
    for (size_t count : {size_t{1}, size_t{7}, size_t{33}, size_t{257}}) {
      for (int blocks : {1, 3}) {
        for (auto [in, out] : {std::pair<size_t, size_t>{0, 0}, {1, 1}, {1, 0}}) {
          Call call{count, blocks, in, out};
          call.op = ops[next % 5];
          call.factor = factors[next % 3];
          // Every other PREMUL_SUM reads its factor from device memory, changed per call.
          call.deviceFactor = call.op == ReduceOp::kPreMulSum && next % 2 == 0;
          ++next;
          s.calls.push_back(call);
        }
        if (c != Collective::kOneShot) s.calls.push_back(Call{count, blocks, 1, 0, true});
      }
    }
  } else {
    // Byte counts that leave heads and tails, several parts per source, grids smaller and larger
    // than the number of sources, input and output at equal and different alignments.
    for (size_t chunk : {size_t{1}, size_t{17}, size_t{1000}}) {
      for (auto [in, out] : {std::pair<size_t, size_t>{0, 0}, {3, 3}, {3, 0}, {0, 5}}) {
        for (int parts : {1, 2}) {
          for (int blocks : {1, world + 1}) {
            Call call{chunk, blocks, in, out};
            call.parts = parts;
            call.root = static_cast<int>(s.calls.size()) % world;
            s.calls.push_back(call);
          }
        }
      }
    }
  }
  return s;
}

}  // namespace xccl::kernels::emulated
