// xccl._C._plan_rows: algo::planRows for `python -m xccl plan` (python/xccl/plan.py).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "algo/plan_rows.h"
#include "backend/core/machine.h"
#include "common/error.h"

namespace py = pybind11;

namespace xccl::backend {

void bindPlan(py::module& m) {
  m.def(
      "_plan_rows",
      [](const std::string& device, int world, int hosts, const std::vector<size_t>& sizes,
         const std::optional<std::string>& topologyFile, bool kernelsVerified) {
        std::vector<std::tuple<std::string, size_t, std::string, std::string, std::string>> rows;
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
          // The tunables as a group created now would read them (XCCL_* of this process).
          const algo::Tunables tunables = algo::Tunables::fromEnvironment();
          const topo::Topology topology =
              topologyFile ? topo::loadTopologyFile(*topologyFile) : thisMachine();
          for (algo::PlanRow& row : algo::planRows(query, topology, tunables)) {
            rows.emplace_back(std::move(row.collective), row.bytes, std::move(row.route),
                              std::move(row.algorithm), std::move(row.reason));
          }
        } catch (const Error& e) {
          if (e.kind() == ErrorKind::kInvalidArgument) throw py::value_error(e.what());
          throw;
        }
        return rows;
      },
      py::arg("device"), py::arg("world"), py::arg("hosts"), py::arg("sizes"),
      py::arg("topology_file") = py::none(), py::arg("kernels_verified") = false,
      "The plan per collective and message size: (collective, bytes, route, algorithm, reason) "
      "rows (docs/algorithms.md, 'Seeing the plan'). Pure: runs nothing, needs no GPU. "
      "kernels_verified: plan as on a machine where xccl's GPU kernels were verified.");
}

}  // namespace xccl::backend
