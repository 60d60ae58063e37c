// xccl._C's tuning functions: the table a group plans from, the GPU calls per route (what the
// tuner, doctor --gpu and gpu_bench read before claiming a kernel ran), and, in builds with the
// test hooks (XCCL_TEST_HOOKS), a wrong-result injection for the tuner's tests. Each rank's
// table comes from the group's policy (module_policy.cc).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>

#include <memory>
#include <string>

#include "algo/gpu_plan.h"
#include "algo/runner.h"
#include "algo/test_hooks.h"
#include "algo/tunables.h"
#include "backend/core/group_core.h"
#include "backend/process_group.h"

namespace py = pybind11;

namespace xccl::backend {

void bindTuning(py::module& m) {
  m.def(
      "_tuning_in_force",
      [](const c10::intrusive_ptr<c10d::Backend>& backend) {
        auto* group = dynamic_cast<ProcessGroupXccl*>(backend.get());
        TORCH_CHECK_VALUE(group != nullptr, "_tuning_in_force: not an xccl backend");
        return group->tuningInForce();
      },
      py::arg("backend"),
      "(text, why) for an xccl backend (group._get_backend(torch.device('cpu'))): the canonical "
      "tuning table text the group plans from ('' if none) and why (\"rank 0's table\", \"no "
      "table: ...\", or the world it was made for against the group's).");

  m.def(
      "_gpu_route_counts",
      [](const py::object& backend) {
        GpuRouteCounts counts = processGpuRouteCounts();
        if (!backend.is_none()) {
          c10::intrusive_ptr<c10d::Backend> held;
          try {
            held = backend.cast<c10::intrusive_ptr<c10d::Backend>>();
          } catch (const py::cast_error&) {
          }
          auto* group = dynamic_cast<ProcessGroupXccl*>(held.get());
          TORCH_CHECK_VALUE(group != nullptr, "_gpu_route_counts: not an xccl backend");
          // Without the GIL: the GPU side's creation holds the lock this takes while it calls
          // into Python (the vendor group's factory).
          py::gil_scoped_release released;
          counts = group->gpuRouteCounts();
        }
        py::dict named;
        for (size_t r = 0; r < GpuRouteCounts::kRoutes; ++r) {
          named[algo::gpuRouteName(static_cast<algo::GpuRoute>(r))] = counts.calls[r];
        }
        return named;
      },
      py::arg("backend"),
      "{route: calls} for an xccl backend (group._get_backend(torch.device('cpu'))), or for "
      "every group of this process with None: how many CUDA calls ran on xccl's kernels "
      "('kernel'), NCCL/RCCL ('vendor'), host memory ('host') or at world size 1 ('local'). "
      "The proof that a kernel ran, which exact results alone are not (docs/gpu.md).");

#if XCCL_TEST_HOOKS
  m.def(
      "_inject_wrong_result",
      [](const std::string& algorithm) {
        algo::Algorithm named = algo::Algorithm::kAuto;
        if (!algorithm.empty()) {
          // What a plan can name (every algorithm of common/vocabulary.h but auto).
          std::string known;
          for (const vocab::AlgorithmRow& row : vocab::kAlgorithmRows) {
            if (row.kind == vocab::AlgorithmKind::kPlanner) continue;
            if (algorithm == row.name) named = row.id;
            known += std::string(row.name) + ", ";
          }
          TORCH_CHECK_VALUE(named != algo::Algorithm::kAuto,
                            "_inject_wrong_result: unknown algorithm '", algorithm, "' (", known,
                            "or '' for off)");
        }
        algo::injectWrongResult(named);
      },
      py::arg("algorithm"),
      "FOR TESTS ONLY, not a user feature: every CPU collective this process runs afterwards "
      "whose plan's algorithm is `algorithm` ('ring', 'direct', 'one_shot', 'two_shot', 'shm') "
      "adds 1 to the first element of its output (its first byte where the collective has no "
      "dtype): a wrong answer that the tuner's verification must catch. '' turns it off. Only "
      "in builds with XCCL_TEST_HOOKS=ON.");
#endif
}

}  // namespace xccl::backend
