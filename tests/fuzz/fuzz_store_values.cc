// libFuzzer target: arbitrary text as a value a peer published in the store, through every parser
// that reads one. The first byte picks the parser, the rest is the value. What must hold beyond
// ASan/UBSan: bad input is refused with xccl::Error carrying a message (never another exception),
// an accepted value is within its bounds, and formatting it again gives a value that parses alike.
// A window record is also checked against a window size from the input, as registration checks it
// against the mapped memory. Seeds: make_seeds.py.
#include <arpa/inet.h>
#include <net/if.h>

#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <set>
#include <string>
#include <vector>

#include "algo/tuning.h"
#include "algo/tuning_agree.h"
#include "common/error.h"
#include "net/regions/cuda_ipc/record.h"
#include "net/regions/shm/names.h"
#include "net/regions/shm/segment.h"
#include "net/rendezvous/agree.h"
#include "net/rendezvous/hosts.h"
#include "net/rendezvous/membership.h"
#include "net/rendezvous/store.h"
#include "net/transport/shm_rings/mailboxes.h"
#include "net/transport/tcp/interfaces.h"
#include "net/transport/window_record.h"

namespace {

using namespace xccl;
using namespace xccl::net;

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "invariant broken: %s\n", what);
  std::abort();
}

void require(bool ok, const char* what) {
  if (!ok) fail(what);
}

// Runs `parse`; an xccl::Error with a message is a refusal, anything else thrown is a finding.
template <typename Parse>
void refusedOrChecked(Parse&& parse) {
  try {
    parse();
  } catch (const Error& e) {
    require(std::strlen(e.what()) > 0, "an error without a message");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "not an xccl::Error: %s\n", e.what());
    std::abort();
  }
}

bool sameAddress(const tcp::Address& a, const tcp::Address& b) {
  return a.length == b.length && std::memcmp(&a.storage, &b.storage, a.length) == 0;
}

uint16_t portOf(const tcp::Address& a) {
  const auto* sa = reinterpret_cast<const sockaddr*>(&a.storage);
  return ntohs(sa->sa_family == AF_INET6 ? reinterpret_cast<const sockaddr_in6*>(sa)->sin6_port
                                         : reinterpret_cast<const sockaddr_in*>(sa)->sin_port);
}

void address(const std::string& text) {
  const tcp::Address a = tcp::Address::parse(text);
  const int family = reinterpret_cast<const sockaddr*>(&a.storage)->sa_family;
  require((family == AF_INET && a.length == sizeof(sockaddr_in)) ||
              (family == AF_INET6 && a.length == sizeof(sockaddr_in6)),
          "an address of another family or length");
  require(sameAddress(tcp::Address::parse(a.toString()), a), "Address round trip");
}

void interfaces(const std::string& text) {
  bool named = false;
  const std::vector<tcp::Interface> list = tcp::parseInterfaces(text, &named);
  require(!list.empty() && list.size() <= tcp::kMaxInterfaces, "interface count");
  for (const tcp::Interface& it : list) {
    require(!it.name.empty() && it.name.size() < IFNAMSIZ, "interface name length");
    require(portOf(it.address) != 0, "port 0 accepted from the store");
    require((it.network & ~it.mask) == 0, "network outside its mask");
  }
  bool again = !named;
  const std::vector<tcp::Interface> reread =
      tcp::parseInterfaces(tcp::publishInterfaces(list, named), &again);
  require(again == named && reread.size() == list.size(), "interface list round trip");
  for (size_t i = 0; i < list.size(); ++i) {
    require(reread[i].name == list[i].name && sameAddress(reread[i].address, list[i].address) &&
                reread[i].network == list[i].network && reread[i].mask == list[i].mask,
            "interface round trip");
  }
  // Pairing a peer's list with one of ours (and with itself): indices in range, each used once.
  bool mineNamed = false;
  const std::vector<tcp::Interface> mine =
      tcp::parseInterfaces("A|eth0=10.0.0.1:1234/167772160/4278190080,"
                           "ib0=192.168.1.5:2345/3232235776/4294967040",
                           &mineNamed);
  for (const auto& [dialer, acceptor] :
       {std::make_pair(&list, &mine), std::make_pair(&mine, &list), std::make_pair(&list, &list)}) {
    const auto pairs = tcp::pairInterfaces(*dialer, *acceptor, named);
    require(!pairs.empty(), "no interface pairs");
    std::set<int> dialers, acceptors;
    for (const auto& [d, a] : pairs) {
      require(d >= 0 && d < static_cast<int>(dialer->size()) && a >= 0 &&
                  a < static_cast<int>(acceptor->size()),
              "pair out of range");
      require(dialers.insert(d).second && acceptors.insert(a).second, "interface paired twice");
    }
  }
}

void memberHandle(const std::string& text) {
  refusedOrChecked([&] {
    const MemberHandle handle = MemberHandle::parse(text);
    require(handle.format() == text, "MemberHandle round trip");
    require(MemberHandle::parse(handle.format()).host == handle.host, "host round trip");
  });
  // A membership: one handle per line; the rank is a position in it.
  std::vector<std::string> handles;
  for (size_t start = 0; start <= text.size() && handles.size() < 64;) {
    const size_t end = std::min(text.find('\n', start), text.size());
    handles.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  const std::string mine = handles.back();
  refusedOrChecked([&] {
    const std::string job = MemberHandle::parse(mine).job;
    const int rank = checkMembership(handles, /*ordered=*/handles.size() % 2 == 0, mine, job);
    require(rank >= 0 && rank < static_cast<int>(handles.size()) && handles[rank] == mine,
            "membership rank");
  });
}

void settings(const Bytes& bytes) {
  const Settings decoded = decodeSettings(bytes);
  require(encodeSettings(decoded) == bytes, "settings round trip");
  require(settingsMismatch({decoded, decoded}).empty(), "equal settings differ");
  (void)settingsMismatch({decoded, {}});
}

void ipcRecord(const Bytes& bytes) {
  const cuda_ipc::Record record = cuda_ipc::decodeRecord(bytes);
  require(record.busId.size() <= cuda_ipc::kMaxBusIdBytes &&
              record.failure.size() <= cuda_ipc::kMaxFailureBytes,
          "record text bounds");
  require(cuda_ipc::encodeRecord(record) == bytes, "cuda_ipc record round trip");
  (void)cuda_ipc::recordsVerdict({record, record});
}

// takeCensus as rank 0 of a group whose other ranks published the lines of `text`.
void census(const std::string& text) {
  MemoryStore store;
  int size = 1;
  for (size_t start = 0; start <= text.size() && size < 16; ++size) {
    const size_t end = std::min(text.find('\n', start), text.size());
    store.set("c/host/" + std::to_string(size), toBytes(text.substr(start, end - start)));
    start = end + 1;
  }
  const Bootstrap bootstrap(store, "c", 0, size, std::chrono::milliseconds(1));
  const Census got = takeCensus(bootstrap, "host", "me", true);
  require(static_cast<int>(got.hosts.hostOf.size()) == size, "census size");
  require(got.firstAbsent >= -1 && got.firstAbsent < size, "absent rank out of range");
  for (int host : got.hosts.hostOf) require(host >= 0 && host < got.hosts.count(), "host index");
}

void shmRecord(uint8_t kind, const std::string& text) {
  // The three records: a segment's (shm/segment.cc), the rings' (shm_rings/ring.cc), a window
  // file's.
  const std::vector<shm::SizeBound> bounds[] = {
      {{"slot bytes", shm::kMinSlotBytes, shm::kMaxRecordBytes},
       {"pool bytes", 0, shm::kMaxRecordBytes}},
      {{"ring bytes", shm_rings::kMinRingBytes, shm_rings::kRingBytes}},
      {{"file bytes", 4096, 4096 + shm::kMaxRecordBytes}}};
  const std::vector<shm::SizeBound>& bound = bounds[kind % 3];
  const shm::Published got = shm::parsePublished(text, bound);
  if (!got.made) {
    require(shm::parsePublished(shm::formatRefusal(got.why), bound).why == got.why,
            "refusal round trip");
    return;
  }
  require(got.sizes.size() == bound.size(), "size count");
  for (size_t i = 0; i < bound.size(); ++i) {
    require(got.sizes[i] >= bound[i].min && got.sizes[i] <= bound[i].max, "size out of bounds");
  }
  require(shm::isFileName(got.name) && got.name.find('/') == std::string::npos,
          "a name that is no xccl file");
  const shm::Published again =
      shm::parsePublished(shm::formatPublished(got.sizes, got.name), bound);
  require(again.made && again.sizes == got.sizes && again.name == got.name,
          "shm record round trip");
}

void windowRecord(const std::string& text) {
  const WindowRecord record = parseWindowRecord(text);
  require(record.sizes.size() <= kMaxWindowDims, "window dims");
  int64_t numel = 1;
  for (int64_t size : record.sizes) {
    require(size >= 0 && !__builtin_mul_overflow(numel, size, &numel), "window sizes");
  }
  require(numel == record.numel, "window numel");
  const WindowRecord again = parseWindowRecord(formatWindowRecord(record));
  require(again.dtype == record.dtype && again.sizes == record.sizes &&
              again.numel == record.numel && again.remote.address == record.remote.address &&
              again.remote.bytes == record.remote.bytes && again.remote.key == record.remote.key &&
              again.remote.hostKey == record.remote.hostKey,
          "window record round trip");
}

// "<mapped bytes> <element size> <registered 0|1> <record>": a peer's record checked against the
// memory behind it (window.cc's registration), with that memory's size from the input too.
// Whatever passes describes at most the mapped bytes, counted without overflow.
void windowFits(const std::string& text) {
  uint64_t mapped = 0, elementSize = 0, registered = 0;
  const char* at = text.data();
  const char* end = text.data() + text.size();
  for (uint64_t* field : {&mapped, &elementSize, &registered}) {
    const auto [stop, error] = std::from_chars(at, end, *field);
    if (error != std::errc() || stop == end || *stop != ' ') return;
    at = stop + 1;
  }
  const WindowRecord record = parseWindowRecord(std::string(at, end));
  const std::string why =
      checkWindowFits(record, static_cast<size_t>(elementSize), mapped, registered % 2 == 1);
  if (!why.empty()) return;
  unsigned __int128 bytes = static_cast<unsigned __int128>(record.numel) * elementSize;
  require(record.numel >= 0 && elementSize > 0, "a window without elements of a size passed");
  require(bytes <= mapped, "a window that passes its mapping passed");
  require(registered % 2 == 0 || record.remote.bytes == mapped,
          "a registration of another size passed");
}

// Rank 0's tuning table as every rank parses it at group creation (algo/tuning_agree.h).
void tuningTable(const std::string& text) {
  const algo::TuningAgreement verdict =
      algo::tuningVerdict({algo::encodeTuningAnswer({text, "fuzz"})}, algo::GroupShape{1});
  require(verdict.table == nullptr || verdict.parseError.empty(), "a table and an error");
  const algo::TuningTable table = algo::parseTuningTable(text);
  require(text.size() <= algo::kTuningMaxTextBytes, "oversized text accepted");
  require(table.cpu.size() + table.gpu.size() <= algo::kTuningMaxEntries, "too many entries");
  require(table.worldSize >= 1 && table.hosts >= 1 && table.hosts <= table.worldSize, "world");
  for (const algo::CpuTuningEntry& e : table.cpu) {
    require(e.minBytes < e.maxBytes, "empty cpu range");
    require(e.ringChunkBytes == 0 || (e.ringChunkBytes >= algo::kTuningMinChunkBytes &&
                                      e.ringChunkBytes <= algo::kTuningMaxChunkBytes),
            "chunk out of bounds");
    require(algo::findCpu(table, e.collective, e.minBytes, 1) != nullptr ||
                e.collective == algo::Collective::kAllToAll,
            "an entry that does not find itself");
  }
  for (const algo::GpuTuningEntry& e : table.gpu) {
    require(e.minBytes < e.maxBytes, "empty gpu range");
    require((e.kernel == algo::GpuKernel::kNone) == (e.route == algo::GpuRoute::kVendor),
            "kernel and route disagree");
    require(algo::findGpu(table, e.collective, e.minBytes) == &e, "overlapping gpu ranges");
  }
  const std::string canonical = algo::formatTuningTable(table);
  require(algo::parseTuningTable(canonical) == table, "tuning table round trip");
  require(algo::formatTuningTable(algo::parseTuningTable(canonical)) == canonical,
          "canonical text not stable");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  const Bytes bytes(data + 1, data + size);
  refusedOrChecked([&] {
    switch (data[0] % 9) {
      case 0: return address(text);
      case 1: return interfaces(text);
      case 2: return memberHandle(text);
      case 3: return settings(bytes);
      case 4: return ipcRecord(bytes);
      case 5: return census(text);
      case 6: return shmRecord(data[0] / 9, text);
      // 7, 25, ...: the record alone; 16, 34, ...: against the memory behind it.
      case 7: return data[0] / 9 % 2 == 1 ? windowFits(text) : windowRecord(text);
      // 8, 26, ...: IPv6 more often; 17, 35, ...: a tuning table.
      default: return data[0] / 9 % 2 == 1 ? tuningTable(text) : address("[" + text);
    }
  });
  return 0;
}
