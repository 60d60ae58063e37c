// libFuzzer target: arbitrary bytes as the handshake of a new TCP connection
// (csrc/net/tcp/wire.h checkHello). Accepted only when it names this group, its nonce, a rank
// in the expected range other than ours and an existing link; anything else is refused with a
// reason.
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "net/tcp/wire.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace xccl::net::tcp;
  HelloExpectation expected{hashGroup("fuzz"), 0x1234, /*self=*/1, /*minRank=*/0, /*maxRank=*/7,
                            /*links=*/4};
  Hello hello{};
  const std::string why = checkHello(data, size, expected, &hello);
  if (why.empty()) {
    if (size != sizeof(Hello) || hello.magic != kHelloMagic || hello.group != expected.group ||
        hello.nonce != expected.nonce || hello.rank < 0 || hello.rank > 7 || hello.rank == 1 ||
        hello.link >= 4) {
      std::abort();  // accepted something it must refuse
    }
  }
  // Half the time, make the bytes a plausible hello to get past the magic and version checks.
  if (size >= sizeof(Hello) && data[0] % 2 == 0) {
    Hello forged;
    std::memcpy(&forged, data, sizeof(forged));
    forged.magic = kHelloMagic;
    forged.version = kWireVersion;
    forged.group = expected.group;
    const std::string reason = checkHello(&forged, sizeof(forged), expected, nullptr);
    if (reason.empty() && (forged.nonce != expected.nonce || forged.link >= 4)) std::abort();
  }
  return 0;
}
