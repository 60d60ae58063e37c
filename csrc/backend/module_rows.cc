// xccl._C._plan_rows: algo::planRows for `python -m xccl plan` (python/xccl/plan.py).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "algo/plan_rows.h"
#include "algo/tuning.h"
#include "backend/core/machine.h"
#include "common/error.h"

namespace py = pybind11;

namespace xccl::backend {

void bindPlan(py::module& m) {
  m.def(
      "_plan_rows",
      [](const std::string& device, int world, int hosts, const std::vector<size_t>& sizes,
         const std::optional<std::string>& topologyFile, bool kernelsVerified,
         const std::string& tuning) {
        std::vector<std::tuple<std::string, size_t, std::string, std::string, std::string,
                               std::string, uint64_t, uint64_t>>
            rows;
        try {
          if (device != "cpu" && device != "cuda") {
            throw py::value_error("device must be cpu or cuda, got '" + device + "'");
          }
          algo::PlanQuery query;
          query.gpu = device == "cuda";
          query.worldSize = world;
          query.hosts = hosts;
          query.sizes = sizes;
          query.kernelsVerified = kernelsVerified;
          std::optional<algo::TuningTable> table;
          if (!tuning.empty()) table = algo::parseTuningTable(tuning);
          query.tuning = table ? &*table : nullptr;
          // The tunables as a group created now would read them (XCCL_* of this process).
          const algo::Tunables tunables = algo::Tunables::fromEnvironment();
          const topo::Topology topology =
              topologyFile ? topo::loadTopologyFile(*topologyFile) : thisMachine();
          for (algo::PlanRow& row : algo::planRows(query, topology, tunables)) {
            rows.emplace_back(std::move(row.collective), row.bytes, std::move(row.route),
                              std::move(row.algorithm), std::move(row.reason),
                              std::move(row.decision), row.tunedNs, row.ruleNs);
          }
        } catch (const Error& e) {
          if (e.kind() == ErrorKind::kInvalidArgument) throw py::value_error(e.what());
          throw;
        }
        return rows;
      },
      py::arg("device"), py::arg("world"), py::arg("hosts"), py::arg("sizes"),
      py::arg("topology_file") = py::none(), py::arg("kernels_verified") = false,
      py::arg("tuning") = "",
      "The plan per collective and message size: (collective, bytes, route, algorithm, reason, "
      "decision, tuned_ns, rule_ns) rows (docs/algorithms.md, 'Seeing the plan'). Pure: runs "
      "nothing, needs no GPU. kernels_verified: plan as on a machine where xccl's GPU kernels "
      "were verified. tuning: a tuning table's canonical text to plan with (decision 'tuned' "
      "with the entry's measured medians, else 'rule' and 0s); a malformed one, or one made "
      "for another world, is a ValueError naming the line or both shapes.");
}

}  // namespace xccl::backend
