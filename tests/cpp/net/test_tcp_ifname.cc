// Which interfaces TCP listens and links on (socket.h linkIfnames): XCCL_SOCKET_IFNAME set alone
// limits them as XCCL_NET_IFNAMES does. Run in a fresh process (variables are cached per process)
// inside its own network namespace with two interfaces, a veth pair on two subnets, so that
// without the limit the links would run over both.
#include <gtest/gtest.h>
#include <sched.h>
#include <unistd.h>

#include <cstdlib>

#include "harness.h"

namespace xccl {
namespace {

// A network namespace of its own with interfaces xa (10.97.1.1/24) and xb (10.97.2.1/24);
// false where that cannot be made (not root, no iproute2).
bool twoInterfaces() {
  if (::unshare(CLONE_NEWNET) != 0) return false;
  return std::system("ip link add xa type veth peer name xb && ip addr add 10.97.1.1/24 dev xa &&"
                     " ip addr add 10.97.2.1/24 dev xb && ip link set xa up && ip link set xb up"
                     " && ip link set lo up") == 0;
}

TEST(TcpIfname, SocketIfnameAloneLimitsListenersAndLinks) {
  if (!testing::inFreshProcess({{"XCCL_SOCKET_IFNAME", "xb"}}, {"XCCL_NET_IFNAMES"})) return;
  if (!twoInterfaces()) GTEST_SKIP() << "cannot make a network namespace with two interfaces";
  net::tcp::TcpOptions options = testing::loopbackOptions("ifname");
  options.storeHost = "";  // the listen address comes from XCCL_SOCKET_IFNAME alone
  options.streams = 2;
  net::MemoryStore store;
  testing::runThreads(2, [&](int rank) {
    net::tcp::TcpTransport t(store, rank, 2, options);
    const int peer = 1 - rank;
    EXPECT_EQ(t.linkCount(peer), 2) << "one interface pair, two streams";
    for (int link = 0; link < t.linkCount(peer); ++link) {
      EXPECT_EQ(t.linkInterface(peer, link).rfind("xb ", 0), 0u) << t.linkInterface(peer, link);
    }
  });
}

}  // namespace
}  // namespace xccl
