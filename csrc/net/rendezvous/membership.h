// Dynamic membership (torch's reconfigure API): the handles members exchange out of band and the
// rendezvous through the store that turns a list of handles into a group. Torch-free; the backend
// (backend/process_group_lifecycle.cc) builds the new group's transports after rendezvous().
//
// A handle names a member, not an address: "xccl:1:<job token>:<member id>:<host identity>".
// Addresses are exchanged through the store at each reconfigure, exactly as at group creation,
// because every membership listens afresh (its transports are new). The job token is drawn once
// per store (jobToken()), so handles from another job are recognised; the member id (pid plus
// 64 random bits) is fixed for the life of the backend object, so a member's handle is stable
// across reconfigures.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "net/rendezvous/store.h"

namespace xccl::net {

struct MemberHandle {
  std::string job;     // the job token (hex), equal for every member on one store
  std::string member;  // "<pid>-<16 hex digits>": unique per backend object
  std::string host;    // topo::hostIdentity() of the member's machine

  std::string format() const;
  // kInvalidArgument naming the handle and what is wrong with it.
  static MemberHandle parse(const std::string& text);
};

// A fresh member id for this process: "<pid>-<16 random hex digits>".
std::string newMemberId();

// The job's token under `key`: the first caller on the store draws it (randomToken()), every later
// caller, in this process or a newcomer's, reads the same one. Waits at most `timeout` for the
// first caller to publish it.
std::string jobToken(Store& store, const std::string& key, std::chrono::milliseconds timeout);

// Checks a proposed membership before anything is torn down (kInvalidArgument, nothing changed):
// every handle parses and carries `job`, none repeats, and `mine` is among them. Returns this
// member's rank (its position). `ordered` false (torch passed a set) sorts `handles` first, so
// every member assigns the same ranks.
int checkMembership(std::vector<std::string>& handles, bool ordered, const std::string& mine,
                    const std::string& job);

// The two steps of a reconfigure's rendezvous through the store, among the members `handles`
// (rank = position), keys under `prefix` (unique per uuid).
// claimUuid: before anything is torn down, claims `uuid` for this exact membership:
// kInvalidArgument when the job already used it for another one (a member that arrives first
// publishes the membership; the others compare).
void claimUuid(Store& store, const std::string& prefix, int64_t uuid,
               const std::vector<std::string>& handles, std::chrono::milliseconds timeout);
// awaitMembers: says this member arrived and waits until every member did; kTimeout after
// `timeout` naming each rank that never arrived and its handle.
void awaitMembers(Store& store, const std::string& prefix, int64_t uuid, int rank,
                  const std::vector<std::string>& handles, std::chrono::milliseconds timeout);

}  // namespace xccl::net
